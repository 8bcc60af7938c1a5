"""A CLI provider's actor whose login OLP keeps (issue #41), under MockClock with the scripted
spawner and a real keeper: what each spawn gets, warm processes retired at every new token
(before it nears its end), an expired login refused as ``auth``, and a spawn refused by the
API with an older token answered again with the new one, before any content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing
from sample_requests import user_says
from test_keeper_mockclock import AHEAD_S, HOLD_S, T0, Endpoint, claude_answer, claude_file, wall

from olp.actors import (
    CliConfig,
    CliRunner,
    ProviderActor,
    SpawnSpec,
    Ticket,
    Timeouts,
    WarmSettings,
)
from olp.actors.testing import Exit as ExitStep
from olp.actors.testing import FakeSpawner, JsonLinesAdapter, Line, Step, event_line
from olp.failures import Code, failure
from olp.ir import Error, Event, Start, Stop, TextDelta
from olp.logins import LoginKeeper
from olp.providers.anthropic._login import LOGIN as CLAUDE

TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=HOLD_S)
ANSWER: list[Step] = [Line(0.25, event_line(Start(model="m"))),
                      Line(0.25, event_line(TextDelta(text="ok"))), ExitStep(0.25, 0)]
REFUSED: list[Step] = [Line(0.25, event_line(failure(Code.UPSTREAM_AUTH, "401 Invalid bearer "
                                                                         "token"))),
                       ExitStep(0.1, 1)]


class LinkingAdapter(JsonLinesAdapter):
    """Like claude's: it would link the login file into each spawn's home."""

    def __init__(self, login_file: Path) -> None:
        super().__init__()
        self.login_file = login_file

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return {".claude/.credentials.json": self.login_file}


def token_of(spec: SpawnSpec) -> str | None:
    return spec.env.get("CLAUDE_CODE_OAUTH_TOKEN")


def make(tmp_path: Path, endpoint: Endpoint, script: Any, *, warm: int = 0,
         expires_at: float = T0 + 7200) -> tuple[ProviderActor, FakeSpawner, LoginKeeper, Path]:
    path = tmp_path / "owner" / ".claude" / ".credentials.json"
    claude_file(path, "at-1", "rt-1", expires_at)
    login = LoginKeeper("anthropic", CLAUDE, path, fix="olp login anthropic", hold_s=HOLD_S,
                        post=endpoint, wall=wall)
    spawner = FakeSpawner(script)
    runner = CliRunner(LinkingAdapter(path), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={},
                                 real_home=tmp_path / "owner"),
                       warm=WarmSettings(size=warm, ttl_s=3 * 3600), login=login)
    actor = ProviderActor("anthropic", runner, max_concurrent=4, pool=runner.pool, login=login)
    return actor, spawner, login, path


async def drain(ticket: Ticket) -> list[Event]:
    return [e async for e in ticket.events]


def homes(seen: list[Path]) -> Any:
    def script(spec: SpawnSpec) -> Sequence[Step]:
        home = spec.cwd.parent / "home"
        seen.append(home)
        assert not (home / ".claude").exists()  # the login file is never linked in
        return ANSWER
    return script


async def test_a_spawn_gets_the_access_token_only(autojump_clock: trio.testing.MockClock,
                                                   tmp_path: Path,
                                                   nursery: trio.Nursery) -> None:
    seen: list[Path] = []
    actor, spawner, _, path = make(tmp_path, Endpoint(), homes(seen))
    await nursery.start(actor.run)
    events = await drain(await actor.submit(user_says("hi"), "m"))
    assert events[-1] == Stop()
    assert token_of(spawner.runs[0].spec) == "at-1"
    assert "rt-1" not in json.dumps(dict(spawner.runs[0].spec.env))
    assert len(seen) == 1 and spawner.alive == 0


async def test_warm_processes_retire_at_every_new_token(
        autojump_clock: trio.testing.MockClock, tmp_path: Path, nursery: trio.Nursery) -> None:
    """Three token lifetimes with one warm process kept: each is retired when the keeper
    refreshes (well before its token ends) and the next request gets one with the new
    token; nothing but the keeper ever refreshes."""
    endpoint = Endpoint(*[claude_answer(n) for n in range(2, 5)])
    actor, spawner, login, _ = make(tmp_path, endpoint, lambda spec: ANSWER, warm=1,
                                    expires_at=T0 + 3600)
    await nursery.start(actor.run)
    assert (await drain(await actor.submit(user_says("hi"), "m")))[-1] == Stop()
    served: list[tuple[float, str | None, bool]] = []
    for n in range(1, 4):  # a request 50 s after each refresh (within the demand window)
        await trio.sleep_until(n * (3600 - AHEAD_S + 0.5) + 50)
        before = len(spawner.runs)
        assert (await drain(await actor.submit(user_says("hi"), "m")))[-1] == Stop()
        run = max((r for r in spawner.runs[:before] if r.input),  # a warm one served it
                  key=lambda r: r.input_at or 0.0)
        served.append((run.started_at, token_of(run.spec), run.spec.stdin is None))
    refreshed_at = [t + 0.5 for t, _, _ in endpoint.calls]
    assert refreshed_at == [n * (3600 - AHEAD_S + 0.5) for n in range(1, 4)]
    # each request was served warm, by a process started right after the last refresh,
    # holding that refresh's token
    assert served == [(refreshed_at[0], "at-2", True), (refreshed_at[1], "at-3", True),
                      (refreshed_at[2], "at-4", True)]
    killed = [r for r in spawner.runs if r.killed and not r.input]
    assert {token_of(r.spec) for r in killed} == {"at-1", "at-2", "at-3"}  # retired idle
    assert login.refreshes == 3


async def test_a_token_refused_before_content_is_answered_again_with_the_new_one(
        autojump_clock: trio.testing.MockClock, tmp_path: Path, nursery: trio.Nursery) -> None:
    endpoint = Endpoint(claude_answer(2))
    actor, spawner, login, _ = make(
        tmp_path, endpoint, lambda spec: REFUSED if token_of(spec) == "at-1" else ANSWER)
    await nursery.start(actor.run)
    events = await drain(await actor.submit(user_says("hi"), "m"))
    assert events[-1] == Stop() and TextDelta(text="ok") in events
    assert [token_of(r.spec) for r in spawner.runs] == ["at-1", "at-2"]
    assert len(endpoint.calls) == 1 and login.generation == 2 and spawner.alive == 0


async def test_an_expired_login_is_refused_as_auth_without_a_spawn(
        autojump_clock: trio.testing.MockClock, tmp_path: Path, nursery: trio.Nursery) -> None:
    endpoint = Endpoint((400, {"error": "invalid_grant"}))
    actor, spawner, login, _ = make(tmp_path, endpoint, lambda spec: ANSWER,
                                    expires_at=T0 - 1)
    await nursery.start(actor.run)
    events = await drain(await actor.submit(user_says("hi"), "m"))
    assert len(events) == 1 and isinstance(events[0], Error)
    assert events[0].code == Code.LOGIN_EXPIRED and events[0].category == "auth"
    assert "olp login anthropic" in events[0].message
    assert spawner.runs == [] and login.ended() is not None
