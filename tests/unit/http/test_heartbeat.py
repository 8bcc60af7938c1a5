"""streaming.heartbeat_interval_ms: keep-alive comments during silence, before and after the
first content; a heartbeat commits a 200, so a later chain failure is an in-band error."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import trio
import trio.testing
from test_fallback_headers import OWNER_H, _Keys, fail

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, HealthBook, Hop, Router
from olp.http import Services, create_app
from olp.ir import TextDelta


def text(delay: float, t: str) -> Line:
    return Line(delay, event_line(TextDelta(text=t)))


async def exchange(scripts: dict[str, Sequence[Step]], nursery: trio.Nursery
                   ) -> tuple[int, dict[str, str], list[tuple[float, str]], dict[str, Any]]:
    spawners = {n: FakeSpawner(lambda _, s=s: s) for n, s in scripts.items()}
    actors = {n: ProviderActor(n, CliRunner(JsonLinesAdapter(), spawners[n], CliConfig(
        binary=n, timeouts=Timeouts(10, 10, 60), proxy_env={})), max_concurrent=1)
        for n in scripts}
    for actor in actors.values():
        await nursery.start(actor.run)
    router = Router(lambda m: None, providers=list(scripts),
                    chains={"chain": [Hop(n, f"{n}-m") for n in scripts]})
    engine = Engine(router, actors, health=HealthBook(clock=trio.current_time))
    app = create_app(Services(engine=engine, keys=_Keys(), models=lambda: [], actors=actors,
                              heartbeat_s=1.0, background=nursery))
    frames: list[tuple[float, str]] = []
    async with app.test_client().request("/v1/chat/completions", method="POST", headers={
            **OWNER_H, "Content-Type": "application/json"}) as conn:
        await conn.send(json.dumps({"model": "chain", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]}).encode())
        await conn.send_complete()
        buffer = ""
        with trio.move_on_after(60):
            while not (buffer.endswith("data: [DONE]\n\n") or '{"error"' in buffer):
                chunk = (await conn.receive()).decode()
                buffer += chunk
                frames += [(trio.current_time(), f) for f in chunk.split("\n\n") if f]
        status = conn.status_code
        headers = {k.lower(): v for k, v in (conn.headers or {}).items()}
    await trio.testing.wait_all_tasks_blocked()
    leaks = {"alive": sum(s.alive for s in spawners.values()),
             "slots": sum(a.limiter.statistics().borrowed_tokens for a in actors.values())}
    return status or 0, headers, frames, leaks


def kinds(frames: list[tuple[float, str]]) -> list[tuple[float, str]]:
    out = []
    for t, f in frames:
        if f.startswith(":"):
            out.append((t, "keepalive"))
        elif f == "data: [DONE]":
            out.append((t, "done"))
        elif '"error"' in f:
            out.append((t, "error"))
        elif '"content":"' in f and '"content":""' not in f:
            out.append((t, "content"))
    return out


async def test_content_within_the_interval_needs_no_heartbeat(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    status, headers, frames, leaks = await exchange({"a": [text(0.5, "x"), Exit(0, 0)]},
                                                    nursery)
    assert status == 200 and headers["x-olp-provider-used"] == "a"
    assert kinds(frames) == [(0.5, "content"), (0.5, "done")]
    assert leaks == {"alive": 0, "slots": 0}


async def test_keepalives_until_the_first_content_and_during_silence(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    status, headers, frames, leaks = await exchange(
        {"a": [text(3.5, "x"), text(2.5, "y"), Exit(0, 0)]}, nursery)
    assert status == 200 and headers["x-olp-heartbeat"] == "true"
    assert kinds(frames) == [(1, "keepalive"), (2, "keepalive"), (3, "keepalive"),
                             (3.5, "content"), (4.5, "keepalive"), (5.5, "keepalive"),
                             (6, "content"), (6, "done")]
    assert leaks == {"alive": 0, "slots": 0}


async def test_fallback_proceeds_behind_heartbeats(autojump_clock: trio.testing.MockClock,
                                                   nursery: trio.Nursery) -> None:
    status, _, frames, _ = await exchange({"a": fail("unavailable", "DOWN"),
                                           "b": [text(1.5, "x"), Exit(0, 0)]}, nursery)
    assert status == 200
    # a fails at t=1 (no content: nothing committed but the heartbeats); b answers at t=2.5
    assert kinds(frames) == [(1, "keepalive"), (2, "keepalive"), (2.5, "content"),
                             (2.5, "done")]


async def test_a_chain_failing_after_a_heartbeat_is_an_in_band_error(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    late = [Line(2.5, fail("rate_limited", "RATE_LIMITED")[0].data), Hang()]
    status, _, frames, leaks = await exchange({"a": late}, nursery)
    assert status == 200  # committed by the first heartbeat
    assert kinds(frames) == [(1, "keepalive"), (2, "keepalive"), (2.5, "error")]
    assert json.loads(frames[-1][1].removeprefix("data: "))["error"]["code"] == "rate_limited"
    assert leaks == {"alive": 0, "slots": 0}


async def test_a_client_leaving_during_heartbeats_cancels_the_job(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    spawner = FakeSpawner(lambda _: [text(30, "late"), Exit(0, 0)])
    actor = ProviderActor("a", CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="a", timeouts=Timeouts(60, 10, 60), proxy_env={})), max_concurrent=1)
    await nursery.start(actor.run)
    engine = Engine(Router(lambda m: Hop("a", "a-m"), providers=["a"]), {"a": actor},
                    health=HealthBook(clock=trio.current_time))
    app = create_app(Services(engine=engine, keys=_Keys(), models=lambda: [],
                              heartbeat_s=1.0, background=nursery))
    with trio.move_on_after(30):
        async with app.test_client().request("/v1/chat/completions", method="POST", headers={
                **OWNER_H, "Content-Type": "application/json"}) as conn:
            await conn.send(json.dumps({"model": "x", "stream": True, "messages": [
                {"role": "user", "content": "hi"}]}).encode())
            await conn.send_complete()
            assert (await conn.receive()) == b": keepalive\n\n"
            await trio.sleep(1.5)
            await conn.disconnect()
            await trio.sleep(0.1)
            assert spawner.alive == 0 and actor.limiter.statistics().borrowed_tokens == 0
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 2.5
