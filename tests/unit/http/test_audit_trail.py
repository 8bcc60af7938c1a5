"""The audit trail through the app (issue #29): a huge model name or path is stored bounded,
a flood of 401s from one client keeps a small burst and one summary row that counts the rest
(a valid request meanwhile is audited as usual), and the owner's actions record what they did
to what — never a secret."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.accounting import MAX_ENDPOINT_CHARS, MAX_MODEL_CHARS, AuditThrottle, Recorder
from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, event_line
from olp.engine import Engine, Hop, Router
from olp.http import Services, create_app
from olp.ir import Start, TextDelta, Usage
from olp.store import Database

OWNER, GUEST = "olp_owner_token", "olp_guest_token"
_T = TypeVar("_T")
ATTACKER = {"client": ("203.0.113.9", 40000)}
FAMILY = {"client": ("192.168.1.20", 50000)}
LOOPBACK = {"client": ("127.0.0.1", 50001)}
SUCCESS = [Line(0.1, event_line(Start(model="claude-sonnet-4-6"))),
           Line(0.1, event_line(TextDelta(text="hi"))),
           Line(0, event_line(Usage(prompt_tokens=3, completion_tokens=1))), Exit(0.1, 0)]


class InlineDatabase(Database):
    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


@dataclass(frozen=True)
class _Principal:
    name: str
    tier: str
    key_id: int = 0
    active: bool = True


class _Keys:
    def __init__(self) -> None:
        self.revoked: list[str] = []

    async def authenticate(self, token: str) -> _Principal | None:
        await trio.lowlevel.checkpoint()
        return {OWNER: _Principal("owner", "owner", 1),
                GUEST: _Principal("kid", "guest", 2)}.get(token)

    async def list(self) -> list[_Principal]:
        return [_Principal("owner", "owner", 1), _Principal("bob", "guest", 3)]

    async def revoke(self, name: str) -> bool:
        self.revoked.append(name)
        return name == "bob"


@dataclass
class World:
    app: QuartTrio
    db: Database
    recorder: Recorder
    keys: _Keys
    actor: ProviderActor

    async def rows(self) -> list[dict[str, Any]]:
        self.recorder.end_windows()
        await self.recorder.flush()

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            c.row_factory = sqlite3.Row
            try:
                return [dict(r) for r in c.execute("SELECT * FROM audit ORDER BY id")]
            finally:
                c.row_factory = None
        return self.db.read(read)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    db = InlineDatabase(tmp_path / "olp.db")
    spawner = FakeSpawner(lambda spec: SUCCESS)
    actor = ProviderActor("anthropic", CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="claude", timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={})), max_concurrent=4)
    router = Router(lambda m: Hop("anthropic", "claude-sonnet-4-6") if m == "sonnet" else None,
                    providers=["anthropic"])
    recorder = Recorder(db, throttle=AuditThrottle(burst=10, window_s=60,
                                                   monotonic=trio.current_time))
    keys = _Keys()
    services = Services(engine=Engine(router, {"anthropic": actor}), keys=keys,
                        models=lambda: [{"id": "sonnet", "object": "model"}],
                        actors={"anthropic": actor}, max_body_bytes=8 * 1024 * 1024,
                        recorder=recorder, db=db)
    yield World(create_app(services), db, recorder, keys, actor)
    db.close()


def auth(token: str = OWNER) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(("length", "status"), [(250, 404), (4 * 1024 * 1024, 400)])
async def test_a_long_model_name_gives_a_bounded_row(
        world: World, autojump_clock: trio.testing.MockClock, length: int, status: int) -> None:
    """Past the decoder's bound (256) the name is a 400 and never reaches the trace; below
    it, an unknown name is a 404 and its row is cut at the audit's bound."""
    huge = "m" * length
    resp = await world.app.test_client().post(
        "/v1/chat/completions", headers=auth(GUEST), scope_base=FAMILY,
        json={"model": huge, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == status
    assert len(await resp.get_data()) < 1000
    [row] = await world.rows()
    if status == 400:
        assert row["requested_model"] is None
        return
    assert len(row["requested_model"]) <= MAX_MODEL_CHARS
    head, marker = row["requested_model"].split("…")
    assert marker == f"[+{len(huge) - len(head)} chars]"


async def test_a_64_kb_path_gives_a_bounded_endpoint(
        world: World, autojump_clock: trio.testing.MockClock) -> None:
    path = "/" + "p" * 65_536
    resp = await world.app.test_client().get(path, scope_base=ATTACKER)  # no key: a 401
    assert resp.status_code == 401
    [row] = await world.rows()
    assert len(row["endpoint"]) <= MAX_ENDPOINT_CHARS and row["endpoint"].startswith("GET /ppp")
    assert re.fullmatch(r"GET /p+…\[\+\d+ chars\]", row["endpoint"])


async def test_1000_401s_from_one_client_keep_the_burst_and_count_the_rest(
        world: World, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    await nursery.start(world.actor.run)
    client = world.app.test_client()
    statuses = set()
    for n in range(1000):  # no key, then wrong keys: 401s, then the back-off's 429s
        guess = {} if n % 2 else {"Authorization": f"Bearer olp_guess_{n}"}
        resp = await client.get("/v1/models", scope_base=ATTACKER, headers=guess)
        statuses.add(resp.status_code)
        if n == 500:
            ok = await client.post("/v1/chat/completions", headers=auth(GUEST),
                                   scope_base=FAMILY, json={
                                       "model": "sonnet",
                                       "messages": [{"role": "user", "content": "hi"}]})
            assert ok.status_code == 200
            valid_id = ok.headers["X-Request-Id"]
    assert statuses <= {401, 429}
    rows = await world.rows()
    flood = [r for r in rows if r["key"] is None]
    kept = [r for r in flood if r["outcome"] != "suppressed"]
    summaries = [r for r in flood if r["outcome"] == "suppressed"]
    assert len(kept) == 10
    assert 1 <= len(summaries) <= 2  # one per status dropped (401, and 429 if backed off)
    assert {(s["endpoint"], s["key"]) for s in summaries} == {("GET /v1/models", None)}
    assert len(kept) + sum(s["suppressed"] for s in summaries) == 1000
    [valid] = [r for r in rows if r["request_id"] == valid_id]
    assert (valid["status"], valid["key_name"], valid["requested_model"], valid["outcome"]) == (
        200, "kid", "sonnet", "ok")
    assert len(rows) == 10 + len(summaries) + 1


async def test_a_dashboard_revoke_records_the_action_and_its_target(
        world: World, autojump_clock: trio.testing.MockClock) -> None:
    client = world.app.test_client()
    login = await client.post("/dashboard/login", form={"key": OWNER}, scope_base=LOOPBACK)
    assert login.status_code == 303
    page = await (await client.get("/dashboard", scope_base=LOOPBACK)).get_data(as_text=True)
    [csrf] = re.findall(r'const CSRF = "([^"]+)"', page)
    headers = {"X-CSRF-Token": csrf}
    for target in ("bob", OWNER):  # the second: a token pasted by mistake, refused (404)
        resp = await client.post("/dashboard/api/action", headers=headers, scope_base=LOOPBACK,
                                 json={"action": "revoke_key", "key": target})
        assert resp.status_code == (200 if target == "bob" else 404)
    assert world.keys.revoked == ["bob", OWNER]
    rows = [r for r in await world.rows() if r["endpoint"] == "POST /dashboard/api/action"]
    assert [(r["action"], r["status"], r["key_name"]) for r in rows] == [
        ("revoke_key bob", 200, "owner"), ("revoke_key olp_owne…", 404, "owner")]
    assert not any(OWNER in str(v) for r in await world.rows() for v in r.values())


async def test_delete_cache_records_the_action_and_its_key(
        world: World, autojump_clock: trio.testing.MockClock) -> None:
    client = world.app.test_client()
    assert (await client.delete("/cache?key=3", headers=auth(), scope_base=LOOPBACK)
            ).status_code == 200
    assert (await client.delete("/cache", headers=auth(), scope_base=LOOPBACK)
            ).status_code == 200
    assert (await client.delete("/cache?key=3", headers=auth(GUEST), scope_base=LOOPBACK)
            ).status_code == 403
    rows = await world.rows()
    assert [(r["endpoint"], r["action"], r["status"], r["key_name"]) for r in rows] == [
        ("DELETE /cache", "clear_cache 3", 200, "owner"),
        ("DELETE /cache", "clear_cache", 200, "owner"),
        ("DELETE /cache", "clear_cache 3", 403, "kid")]


async def test_the_audit_view_lists_the_new_columns(
        world: World, autojump_clock: trio.testing.MockClock) -> None:
    client = world.app.test_client()
    await client.delete("/cache?key=3", headers=auth(), scope_base=LOOPBACK)
    await world.rows()
    data = await (await client.get("/v0/management/audit", headers=auth(),
                                   scope_base=LOOPBACK)).get_json()
    assert [(r["action"], r["suppressed"]) for r in data["data"]] == [("clear_cache 3", None)]
