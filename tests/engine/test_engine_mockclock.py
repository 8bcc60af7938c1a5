"""The engine's first-chunk rule and hop order, under MockClock with scripted actors."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import ChainFailed, Engine, Hop, Router, UnknownModel
from olp.ir import ChatRequest, Error, Message, Retrying, Stop, TextDelta, TextPart

REQ = ChatRequest(model="chain", messages=(Message(role="user", content=(TextPart(text="q"),)),))


def fail(delay: float, category: str, code: str = "X") -> list[Step]:
    return [Line(delay, event_line(Error(code=code, category=category,  # type: ignore[arg-type]
                                         message=f"{code} happened"))), Hang()]


def build(scripts: dict[str, Sequence[Step]]) -> tuple[Engine, dict[str, FakeSpawner]]:
    spawners = {name: FakeSpawner(lambda spec, s=script: s) for name, script in scripts.items()}
    actors = {name: ProviderActor(name, CliRunner(JsonLinesAdapter(), spawners[name], CliConfig(
        binary=name, timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60), proxy_env={})),
        max_concurrent=1) for name in scripts}
    hops = [Hop(provider=name, model=f"{name}-model") for name in scripts]
    router = Router(lambda m: ("a", "a-model") if m == "solo" else None,
                    providers=list(scripts), chains={"chain": hops})
    return Engine(router, actors), spawners


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def test_failure_before_content_advances(autojump_clock: trio.testing.MockClock,
                                               nursery: trio.Nursery) -> None:
    engine, spawners = build({
        "a": fail(1, "rate_limited", "RATE_LIMITED"),
        "b": [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert trio.current_time() == 1.5
    assert answer.hop.provider == "b" and answer.index == 1
    assert [f.error.code for f in answer.failures] == ["RATE_LIMITED"]
    assert [e async for e in answer] == [TextDelta(text="hi"), Stop()]
    assert trio.current_time() == 2
    await trio.testing.wait_all_tasks_blocked()
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 1
    assert all(s.alive == 0 for s in spawners.values())


async def test_non_content_events_do_not_commit(autojump_clock: trio.testing.MockClock,
                                                nursery: trio.Nursery) -> None:
    retry = Retrying(attempt=1, category="rate_limited", status=429)
    engine, _ = build({"a": [Line(1, event_line(retry)), *fail(1, "unavailable")],
                       "b": [Line(1, event_line(TextDelta(text="x"))), Exit(0, 0)]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b" and trio.current_time() == 3
    answer.close()


async def test_after_content_a_failure_is_the_callers(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [Line(1, event_line(TextDelta(text="part"))),
                                    *fail(1, "unavailable", "CRASH")],
                              "b": [Exit(0, 0)]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    events = [e async for e in answer]
    assert events[0] == TextDelta(text="part")
    assert isinstance(events[1], Error) and events[1].code == "CRASH"
    assert spawners["b"].runs == []  # zero further spawns once content was handed back


@pytest.mark.parametrize("category", ["client_error", "auth"])
async def test_client_and_auth_errors_never_fall_back(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery,
                                                      category: str) -> None:
    engine, spawners = build({"a": fail(1, category), "b": [Exit(0, 0)]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert info.value.first.error.category == category and len(info.value.failures) == 1
    assert spawners["b"].runs == []


async def test_exhaustion_keeps_the_first_hops_error(autojump_clock: trio.testing.MockClock,
                                                     nursery: trio.Nursery) -> None:
    engine, _ = build({"a": fail(1, "rate_limited", "FIRST"), "b": fail(2, "unknown", "SECOND")})
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert trio.current_time() == 3
    assert info.value.first.error.code == "FIRST"
    assert [f.hop.provider for f in info.value.failures] == ["a", "b"]


async def test_cancelling_open_kills_the_hop_in_progress(autojump_clock: trio.testing.MockClock,
                                                         nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [Line(8, event_line(TextDelta(text="late"))), Exit(0, 0)]})
    await start(engine, nursery)
    with trio.move_on_after(3):
        await engine.open(REQ)
    await trio.testing.wait_all_tasks_blocked()
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 3
    assert engine.actors["a"].limiter.statistics().borrowed_tokens == 0


async def test_unknown_model(autojump_clock: trio.testing.MockClock) -> None:
    engine, _ = build({"a": []})
    with pytest.raises(UnknownModel):
        await engine.open(ChatRequest(model="nope", messages=REQ.messages))
    assert engine.router.resolve("solo").hops == (Hop("a", "a-model"),)
