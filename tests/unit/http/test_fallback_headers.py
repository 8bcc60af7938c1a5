"""The loud side of fallback over HTTP: detail headers and their policy, exhaustion,
truncation, cooldown reset, the resilience view of /health (MockClock, scripted actors)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio
import trio.testing
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, HealthBook, Hop, Router
from olp.http import HeaderPolicy, Services, create_app
from olp.ir import Error, TextDelta

OWNER, GUEST = "olp_owner", "olp_guest"
OWNER_H = {"Authorization": f"Bearer {OWNER}"}
GUEST_H = {"Authorization": f"Bearer {GUEST}"}
OK = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]


def fail(category: str, code: str, **kw: Any) -> list[Step]:
    return [Line(1, event_line(Error(code=code, category=category,  # type: ignore[arg-type]
                                     message=f"{code}: caf\u00e9 closed", **kw))), Hang()]


@dataclass(frozen=True)
class _P:
    name: str
    tier: str
    key_id: int = 0


class _Keys:
    async def authenticate(self, token: str) -> _P | None:
        await trio.lowlevel.checkpoint()
        return {OWNER: _P("owner", "owner"), GUEST: _P("kid", "guest")}.get(token)


def make(scripts: dict[str, Sequence[Step]], *, detail: str = "owner_only",
         metered: frozenset[str] = frozenset()) -> tuple[QuartTrio, Engine]:
    actors = {n: ProviderActor(n, CliRunner(JsonLinesAdapter(), FakeSpawner(lambda _, s=s: s),
                                            CliConfig(binary=n, timeouts=Timeouts(10, 5, 60),
                                                      proxy_env={})), max_concurrent=2)
              for n, s in scripts.items()}
    router = Router(lambda m: None, providers=list(scripts),
                    chains={"chain": [Hop(n, f"{n}-m") for n in scripts]})
    engine = Engine(router, actors, health=HealthBook(clock=trio.current_time))
    services = Services(engine=engine, keys=_Keys(), models=lambda: [], actors=actors,
                        headers=HeaderPolicy(detail, metered))
    return create_app(services), engine


async def post(app: QuartTrio, headers: dict[str, str], **body: Any) -> Any:
    return await app.test_client().post("/v1/chat/completions", headers=headers, json={
        "model": "chain", "messages": [{"role": "user", "content": "hi"}], **body})


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def test_fallback_detail_for_owners_only_by_default(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, engine = make({"a": fail("rate_limited", "RATE_LIMITED"), "b": OK},
                       metered=frozenset({"b"}))
    await start(engine, nursery)
    resp = await post(app, OWNER_H, temperature=0.3)
    assert resp.status_code == 200
    assert resp.headers["X-OLP-Provider-Used"] == "b"
    assert resp.headers["X-OLP-Fallback-Hops"] == "1"
    assert resp.headers["X-OLP-Credential"] == "metered"
    assert resp.headers["X-OLP-Ignored-Params"] == "temperature"
    detail = resp.headers["X-OLP-Fallback-Detail"]
    assert detail.isascii() and "\\u00e9" in detail
    assert json.loads(detail) == [{"hop": 0, "provider": "a", "account": "default",
                                   "model": "a-m",
                                   "code": "RATE_LIMITED", "category": "rate_limited",
                                   "error_message": "RATE_LIMITED: caf\u00e9 closed",
                                   "trigger_type": "hard"}]
    resp = await post(app, GUEST_H)
    assert resp.status_code == 200 and "X-OLP-Fallback-Detail" not in resp.headers


async def test_detail_policy_all_and_none(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    for policy, present in (("all", True), ("none", False)):
        app, engine = make({"a": fail("unavailable", "DOWN"), "b": OK}, detail=policy)
        await start(engine, nursery)
        for headers in (OWNER_H, GUEST_H):
            resp = await post(app, headers)
            assert ("X-OLP-Fallback-Detail" in resp.headers) is present


async def test_exhaustion_returns_the_first_error_with_the_trail(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, engine = make({"a": fail("rate_limited", "RATE_LIMITED", status=429,
                                  retry_after_s=7),
                        "b": fail("client_error", "BAD_REQUEST", status=400)})
    await start(engine, nursery)
    resp = await post(app, OWNER_H, stream=True)
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "7"
    body = await resp.get_json()
    assert body["error"]["code"] == "rate_limited"
    assert resp.headers["X-OLP-Fallback-Exhausted"] == "a,b"
    assert resp.headers["X-OLP-Model-Used"] == "a-m"
    trail = json.loads(resp.headers["X-OLP-Fallback-Detail"])
    assert [(t["provider"], t["trigger_type"]) for t in trail] == [("a", "hard"),
                                                                   ("b", "client_error")]


async def test_every_hop_cooling_is_429_with_the_soonest_reset(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, engine = make({"a": fail("usage_window", "USAGE_WINDOW", retry_after_s=120),
                        "b": fail("usage_window", "USAGE_WINDOW", retry_after_s=60)})
    await start(engine, nursery)
    assert (await post(app, OWNER_H)).status_code == 429  # both fail (a's error first)
    resp = await post(app, OWNER_H)
    assert resp.status_code == 429
    assert (await resp.get_json())["error"]["code"] == "all_hops_cooling"
    assert resp.headers["Retry-After"] == "60"  # b failed at t=2 and rests until t=62
    health = await (await app.test_client().get("/health", headers=OWNER_H)).get_json()
    assert {c["provider"] for c in health["resilience"]["cooldowns"]} == {"a", "b"}
    # Only the owner can reset; then the hops are tried again.
    client = app.test_client()
    resp = await client.post("/v0/management/cooldowns/reset", headers=GUEST_H)
    assert resp.status_code == 403
    resp = await client.post("/v0/management/cooldowns/reset", headers=OWNER_H)
    assert (await resp.get_json()) == {"reset": 2}
    resp = await post(app, OWNER_H)
    assert (await resp.get_json())["error"]["code"] == "usage_window"  # tried again


async def test_non_streaming_truncated_answer(autojump_clock: trio.testing.MockClock,
                                              nursery: trio.Nursery) -> None:
    crash = [Line(1, event_line(TextDelta(text="half an "))),
             Line(1, event_line(Error(code="CRASH", category="unavailable", message="x"))),
             Hang()]
    app, engine = make({"a": crash, "b": fail("unavailable", "DOWN")})
    await start(engine, nursery)
    resp = await post(app, OWNER_H)
    assert resp.status_code == 200 and resp.headers["X-OLP-Truncated"] == "true"
    body = await resp.get_json()
    assert body["choices"][0]["message"]["content"] == "half an "
    assert body["choices"][0]["finish_reason"] == "length"
