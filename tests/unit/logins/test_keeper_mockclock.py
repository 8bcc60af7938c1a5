"""The per-login keeper under trio's MockClock (issue #41): single flight, the CLI's own lock,
the margin, adopting a newer file, refusals for good, retries, and never writing an older pair.

Real login files in ``tmp_path`` in the CLIs' own formats (:mod:`olp.providers.anthropic._login`,
:mod:`olp.providers.codex._login`); the token endpoint is a scripted fake whose answers take
virtual time. The wall clock the tokens' dates are read against is ``T0`` + virtual time, so
every refresh happens at an exact, asserted virtual second.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from olp.actors import LoginPass
from olp.failures import Code
from olp.ir import Error
from olp.logins import EndpointUnreachable, LoginKeeper
from olp.logins._keeper import SLACK_S
from olp.logins._locks import POLL_S
from olp.providers.anthropic._login import LOGIN as CLAUDE
from olp.providers.codex._login import LOGIN as CODEX

T0 = 1_800_000_000.0
HOLD_S = 30.0
AHEAD_S = CLAUDE.margin_s + HOLD_S + SLACK_S  # 390 s before the token ends


def wall() -> float:
    return T0 + trio.current_time()


def claude_file(path: Path, access: str, refresh: str | None, expires_at: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": access, "refreshToken": refresh, "expiresAt": int(expires_at * 1000),
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max",
        "rateLimitTier": "default_claude_max_20x"}}))
    path.chmod(0o600)


def jwt(exp: float, tag: str) -> str:
    def part(obj: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'jti': tag})}.sig"


def codex_file(path: Path, access: str, refresh: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "tokens": {
        "id_token": "id-1", "access_token": access, "refresh_token": refresh,
        "account_id": "acct-1"}, "last_refresh": "2026-12-01T00:00:00.000000Z"}, indent=2))


class Endpoint:
    """The vendor's token endpoint: answers in order, each after ``delay_s`` of virtual
    time; an exception is raised instead of answered."""

    def __init__(self, *answers: tuple[int, object] | Exception, delay_s: float = 0.5) -> None:
        self.answers = list(answers)
        self.delay_s = delay_s
        self.calls: list[tuple[float, str, dict[str, Any]]] = []

    async def __call__(self, url: str, body: Mapping[str, Any]) -> tuple[int, object]:
        self.calls.append((trio.current_time(), url, dict(body)))
        await trio.sleep(self.delay_s)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def claude_answer(n: int, lifetime_s: float = 3600.0) -> tuple[int, object]:
    return 200, {"token_type": "Bearer", "access_token": f"at-{n}", "refresh_token": f"rt-{n}",
                 "expires_in": lifetime_s, "scope": "user:inference user:profile"}


def keeper(path: Path, endpoint: Endpoint, fmt: Any = CLAUDE) -> LoginKeeper:
    return LoginKeeper("anthropic", fmt, path, fix="olp login anthropic", hold_s=HOLD_S,
                       post=endpoint, wall=wall)


def passed(got: LoginPass | Error) -> LoginPass:
    assert isinstance(got, LoginPass), got
    return got


async def test_eight_spawns_on_an_expired_token_share_one_refresh(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    path = tmp_path / ".claude" / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 - 10)  # ended ten seconds ago
    endpoint = Endpoint(claude_answer(2))
    login = keeper(path, endpoint)
    got: list[LoginPass | Error] = []

    async def spawn() -> None:
        got.append(await login.current())

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(spawn)
    assert [t for t, _, _ in endpoint.calls] == [0.0]  # one refresh, at once
    assert endpoint.calls[0][2] == {"grant_type": "refresh_token", "refresh_token": "rt-1",
                                    "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
                                    "scope": "user:profile user:inference "
                                             "user:sessions:claude_code user:mcp_servers "
                                             "user:file_upload user:plugins"}
    assert trio.current_time() == 0.5
    assert {passed(g).env["CLAUDE_CODE_OAUTH_TOKEN"] for g in got} == {"at-2"}
    assert {passed(g).generation for g in got} == {2}
    assert all(not passed(g).home_files for g in got)  # no file, no refresh token
    written = json.loads(path.read_text())["claudeAiOauth"]
    assert written == {"accessToken": "at-2", "refreshToken": "rt-2",
                       "expiresAt": int((T0 + 0.5 + 3600) * 1000),
                       "scopes": ["user:inference", "user:profile"],
                       "subscriptionType": "max", "rateLimitTier": "default_claude_max_20x"}
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == [".credentials.json"]  # no temp, no lock
    assert login.refreshes == 1


async def test_an_idle_keeper_refreshes_ahead_of_every_margin(
        autojump_clock: trio.testing.MockClock, tmp_path: Path,
        nursery: trio.Nursery) -> None:
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + 3600)
    endpoint = Endpoint(claude_answer(2), claude_answer(3))
    login = keeper(path, endpoint)
    changed: list[float] = []
    login.subscribe(lambda: changed.append(trio.current_time()))
    await nursery.start(login.serve)
    await trio.sleep(3600 + 3600)
    # each token is refreshed when 300 s (claude's margin) + 30 s (a spawn) + 60 s remain
    assert [t for t, _, _ in endpoint.calls] == [3600 - AHEAD_S, 3600 - AHEAD_S + 0.5 + 3600
                                                 - AHEAD_S]
    assert changed == [t + 0.5 for t, _, _ in endpoint.calls]
    assert AHEAD_S == 390
    assert json.loads(path.read_text())["claudeAiOauth"]["accessToken"] == "at-3"
    # the owner's own claude, reading the file at any time, finds more than its 300 s margin
    status = login.status()
    assert status["state"] == "ok" and status["refreshes"] == 2


async def test_a_file_the_owners_cli_refreshed_is_adopted_and_nothing_is_spent(
        autojump_clock: trio.testing.MockClock, tmp_path: Path,
        nursery: trio.Nursery) -> None:
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + 1000)
    endpoint = Endpoint()
    login = keeper(path, endpoint)
    await nursery.start(login.serve)
    assert passed(await login.current()).env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-1"
    await trio.sleep(100)
    claude_file(path, "at-own", "rt-own", T0 + 100 + 3600)  # the owner's claude refreshed
    got = passed(await login.current())
    assert got.env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-own" and got.generation == 2
    await trio.sleep(1000)  # past the old token's due time
    assert endpoint.calls == []


async def test_under_the_clis_own_lock_a_refresh_by_the_cli_is_adopted(
        autojump_clock: trio.testing.MockClock, tmp_path: Path,
        nursery: trio.Nursery) -> None:
    """claude holds its ``.oauth_refresh.lock`` while it refreshes: OLP waits for it, reads
    the file again under the lock, finds the new pair and spends nothing."""
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + AHEAD_S + 10)
    lock = tmp_path / ".oauth_refresh.lock"
    lock.mkdir()  # the owner's claude is refreshing
    endpoint = Endpoint()
    login = keeper(path, endpoint)
    await nursery.start(login.serve)
    await trio.sleep(12)  # OLP's refresh is due at 10 s and waits on the lock
    assert endpoint.calls == [] and login.generation == 1
    claude_file(path, "at-cli", "rt-cli", T0 + 12 + 3600)
    lock.rmdir()
    await trio.sleep(1)
    assert endpoint.calls == []
    assert passed(await login.current()).env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-cli"
    assert login.refreshes == 0


async def test_codex_logins_wait_on_codexs_flock_and_spawns_get_no_refresh_token(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    path = tmp_path / "codex" / "auth.json"
    codex_file(path, jwt(T0 + 100, "a1"), "rt-1")  # inside the lead: due now
    new_access = jwt(T0 + 10 * 86400, "a2")
    endpoint = Endpoint((200, {"id_token": "id-2", "access_token": new_access,
                               "refresh_token": "rt-2"}))
    login = keeper(path, endpoint, CODEX)
    fd = os.open(path.parent / "auth.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the owner's codex holds its lock
    async with trio.open_nursery() as nursery:
        nursery.start_soon(login.current)
        await trio.sleep(5)
        assert endpoint.calls == []
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert len(endpoint.calls) == 1 and 5.0 <= endpoint.calls[0][0] <= 5.0 + POLL_S
    assert endpoint.calls[0][2] == {"client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
                                    "grant_type": "refresh_token",
                                    "refresh_reason": "proactive_expiry",
                                    "refresh_token": "rt-1"}
    data = json.loads(path.read_text())
    assert data["tokens"] == {"id_token": "id-2", "access_token": new_access,
                              "refresh_token": "rt-2", "account_id": "acct-1"}
    assert data["last_refresh"].startswith("2027-01-15T")  # T0 + 5.5 s, as codex writes it
    spawn = passed(await login.current())
    assert spawn.env == {}
    given = json.loads(spawn.home_files[".codex/auth.json"])
    assert given["tokens"]["refresh_token"] == "" and given["tokens"]["access_token"] == new_access


async def test_a_refusal_for_good_ends_the_login_and_its_file_is_never_written(
        autojump_clock: trio.testing.MockClock, tmp_path: Path,
        nursery: trio.Nursery) -> None:
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + 100)
    before = path.read_bytes()
    endpoint = Endpoint((400, {"error": "invalid_grant",
                               "error_description": "Refresh token not found or invalid"}))
    login = keeper(path, endpoint)
    await nursery.start(login.serve)
    await trio.sleep(3600)
    assert len(endpoint.calls) == 1 and path.read_bytes() == before
    ended = login.ended()
    assert ended == ("the refresh token was refused (invalid_grant): log in again with "
                     "`olp login anthropic`")
    refused = await login.current()
    assert isinstance(refused, Error) and refused.code == Code.LOGIN_EXPIRED
    assert refused.category == "auth"
    assert login.status() | {"expires_in_s": 0} == {
        "state": "expired", "cli": "claude", "file": str(path), "refreshes": 0,
        "refreshable": False, "expires_in_s": 0, "problem": ended,
        "fix": "olp login anthropic"}
    claude_file(path, "at-new", "rt-new", T0 + 3600 + 28800)  # `olp login anthropic`
    await trio.sleep(31)  # the keeper looks at the file every 30 s
    assert login.ended() is None and login.status()["state"] == "ok"
    assert passed(await login.current()).env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-new"


async def test_a_failed_refresh_is_retried_with_a_back_off_while_the_token_lasts(
        autojump_clock: trio.testing.MockClock, tmp_path: Path,
        nursery: trio.Nursery) -> None:
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + AHEAD_S + 60)  # due at 60 s, ends at 450 s
    endpoint = Endpoint(EndpointUnreachable("ConnectError"), (503, None),
                        *[EndpointUnreachable("ConnectError")] * 6, delay_s=0)
    login = keeper(path, endpoint)
    await nursery.start(login.serve)
    await trio.sleep(400)
    assert [t for t, _, _ in endpoint.calls] == [60, 75, 105, 165, 285]
    assert login.status()["state"] == "failing"
    assert passed(await login.current()).env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-1"
    await trio.sleep(50)  # the token ended at 450 s
    failed = await login.current()
    assert isinstance(failed, Error) and failed.code == Code.LOGIN_REFRESH_FAILED
    assert failed.category == "unavailable"


async def test_an_older_pair_never_replaces_a_newer_file(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    """A writer that ignores the lock leaves a newer login while OLP's refresh is in flight:
    OLP keeps that file, not its own older answer."""
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 - 1)
    endpoint = Endpoint(claude_answer(2, lifetime_s=3600), delay_s=2)
    login = keeper(path, endpoint)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(login.current)
        await trio.sleep(1)
        claude_file(path, "at-other", "rt-other", T0 + 7200)
    assert json.loads(path.read_text())["claudeAiOauth"]["accessToken"] == "at-other"
    assert passed(await login.current()).env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-other"


async def test_a_refused_token_is_renewed_once_a_minute_at_most(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    path = tmp_path / ".credentials.json"
    claude_file(path, "at-1", "rt-1", T0 + 7200)
    endpoint = Endpoint(claude_answer(2), claude_answer(3))
    login = keeper(path, endpoint)
    first = passed(await login.current())
    renewed = passed(await login.renewed(first))
    assert renewed.generation == 2 and renewed.env["CLAUDE_CODE_OAUTH_TOKEN"] == "at-2"
    again = passed(await login.renewed(renewed))  # within the minute: nothing spent
    assert again.generation == 2 and len(endpoint.calls) == 1
    stale = passed(await login.renewed(first))  # already renewed: the current pass
    assert stale.generation == 2 and len(endpoint.calls) == 1


@pytest.mark.parametrize("stub", [
    {"claudeAiOauth": {"accessToken": "", "refreshToken": "", "expiresAt": 0}},
    {"OPENAI_API_KEY": "sk"}, None])
async def test_a_file_without_a_login_ends_it(autojump_clock: trio.testing.MockClock,
                                              tmp_path: Path, stub: object) -> None:
    path = tmp_path / ".credentials.json"
    if stub is not None:
        path.write_text(json.dumps(stub))
    login = keeper(path, Endpoint())
    refused = await login.current()
    assert isinstance(refused, Error) and refused.code == Code.LOGIN_EXPIRED
    assert "holds no claude login" in refused.message and "olp login anthropic" in refused.message
