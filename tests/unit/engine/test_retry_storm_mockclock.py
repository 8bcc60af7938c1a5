"""A CLI's own retry storm with no hop to go to (docs/adr/0005-fallback-engine.md): it is
stopped after the provider's retry budget (or at the hop's deadline, whichever comes first)
and the client gets the storm's category, never a timeout. Exact virtual times, no leaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import ChainFailed, Engine, HealthBook, Hop, Ledger, Router
from olp.ir import Category, Error, Retrying, Stop, TextDelta

REQ = user_says("q", model="chain")
OK: list[Step] = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]


def retry(attempt: int, category: Category = "rate_limited", status: int | None = 429,
          delay_s: float | None = None) -> bytes:
    return event_line(Retrying(attempt=attempt, category=category, status=status,
                               delay_s=delay_s))


#: claude retrying a 429 on its own: lines at t = 1, 5, 11 and 19, then silence.
STORM: list[Step] = [Line(1, retry(1, delay_s=4)), Line(4, retry(2, delay_s=6)),
                     Line(6, retry(3, delay_s=8)), Line(8, retry(4, delay_s=8)), Hang()]


def build(scripts: Mapping[str, Sequence[Step]], *, first_output_s: float = 60,
          budgets: Mapping[str, float] | None = None) -> tuple[Engine, dict[str, FakeSpawner]]:
    def replay(script: Sequence[Step]) -> FakeSpawner:
        return FakeSpawner(lambda spec: script)

    spawners = {name: replay(script) for name, script in scripts.items()}
    actors = {name: ProviderActor(name, CliRunner(JsonLinesAdapter(), spawners[name], CliConfig(
        binary=name, timeouts=Timeouts(first_output_s=first_output_s, idle_s=300,
                                       total_s=600), proxy_env={})), max_concurrent=1)
              for name in scripts}
    hops = [Hop(provider=name, model=f"{name}-model") for name in scripts]
    router = Router(lambda m: None, providers=list(scripts), chains={"chain": hops})
    engine = Engine(router, actors, health=HealthBook(clock=trio.current_time),
                    ledger=Ledger(clock=trio.current_time), cli_retry_budget_s=budgets)
    return engine, spawners


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def first_error(engine: Engine, *, complete: bool = False) -> Error:
    with pytest.raises(ChainFailed) as info:
        await (engine.complete(REQ) if complete else engine.open(REQ))
    assert info.value.first is not None
    return info.value.first[1]


async def assert_clean(engine: Engine, spawners: dict[str, FakeSpawner]) -> None:
    await trio.testing.wait_all_tasks_blocked()
    assert all(s.alive == 0 for s in spawners.values())
    assert all(a.limiter.statistics().borrowed_tokens == 0 for a in engine.actors.values())


@pytest.mark.parametrize("complete", [False, True])
async def test_a_storm_with_no_next_hop_ends_with_its_cause_after_the_budget(
        complete: bool, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": STORM})
    await start(engine, nursery)
    error = await first_error(engine, complete=complete)
    assert trio.current_time() == 21  # first retry line at 1 + the default budget of 20 s
    assert (error.code, error.category, error.status) == ("RATE_LIMITED", "rate_limited", 429)
    assert error.retry_after_s == 8  # the reset the CLI's last retry line gave
    assert "retry budget" in error.message
    await assert_clean(engine, spawners)
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 21


async def test_the_budget_is_per_provider(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": STORM}, budgets={"a": 7.5, "other": 1})
    await start(engine, nursery)
    error = await first_error(engine)
    assert trio.current_time() == 8.5 and error.code == "RATE_LIMITED"
    assert error.retry_after_s == 6  # the retry line at t=5 was the last before the budget
    await assert_clean(engine, spawners)


async def test_the_deadline_when_it_comes_first_still_gives_the_cause(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": STORM}, first_output_s=15)
    await start(engine, nursery)
    error = await first_error(engine)
    assert trio.current_time() == 15
    assert (error.code, error.category, error.retry_after_s) == ("RATE_LIMITED",
                                                                 "rate_limited", 8)
    assert "deadline" in error.message
    await assert_clean(engine, spawners)


async def test_an_error_of_the_cli_itself_is_passed_through(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    gave_up = Error(code="RATE_LIMITED", category="rate_limited", status=429,
                    retry_after_s=42, message="upstream: rate limited")
    engine, spawners = build({"a": [Line(1, retry(1, delay_s=4)),
                                    Line(4, event_line(gave_up)), Hang()]})
    await start(engine, nursery)
    assert await first_error(engine) == gave_up and trio.current_time() == 5
    await assert_clean(engine, spawners)


async def test_without_a_reset_in_the_retry_line_the_cooldown_gives_it(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [Line(1, retry(1, "usage_window", None)), Hang()]})
    await start(engine, nursery)

    async def another_request_hits_the_window() -> None:  # e.g. a concurrent request
        await trio.sleep(5)
        engine.health.record_failure("a", "a-model", Error(
            code="USAGE_WINDOW", category="usage_window", message="w", retry_after_s=600),
            model_scoped=True)

    nursery.start_soon(another_request_hits_the_window)
    error = await first_error(engine)
    assert trio.current_time() == 21
    assert (error.code, error.category, error.status) == ("USAGE_WINDOW", "usage_window", None)
    assert error.retry_after_s == 584  # the cooldown set at t=5 for 600 s
    await assert_clean(engine, spawners)


async def test_the_storm_is_recorded_like_any_usage_window_failure(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [Line(1, retry(1, "usage_window", None)), Hang()]})
    await start(engine, nursery)
    error = await first_error(engine)
    assert error.code == "USAGE_WINDOW" and error.retry_after_s is None
    skip = engine.health.check("a", "a-model")  # rests for the default window
    assert skip is not None and skip.code == "COOLDOWN"
    assert skip.retry_after_s == engine.health.policy.usage_window_default_s
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert info.value.first is None and info.value.skip_codes == {"COOLDOWN"}
    assert len(spawners["a"].runs) == 1


async def test_an_unavailable_storm_keeps_its_status(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [Line(1, retry(1, "unavailable", 529)), Hang()]})
    await start(engine, nursery)
    error = await first_error(engine)
    assert trio.current_time() == 21
    assert (error.code, error.category, error.status) == ("OVERLOADED", "unavailable", 529)
    await assert_clean(engine, spawners)


async def test_with_a_viable_next_hop_the_storm_is_still_abandoned_at_once(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": STORM, "b": OK}, budgets={"a": 60})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b" and trio.current_time() == 1.5
    assert [(r.code, r.category) for r in answer.records] == [("RETRY_ABANDONED",
                                                                "rate_limited")]
    assert [e async for e in answer] == [TextDelta(text="hi"), Stop()]
    await assert_clean(engine, spawners)


async def test_content_within_the_budget_is_served(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [*STORM[:3], Line(2, event_line(TextDelta(text="late"))),
                                    Exit(0, 0)]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert trio.current_time() == 13 and answer.hop.provider == "a"
    events = [e async for e in answer]
    assert [type(e) for e in events] == [Retrying] * 3 + [TextDelta, Stop]
    await assert_clean(engine, spawners)
