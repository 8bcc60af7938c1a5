"""The engine under MockClock with scripted actors: the first-chunk rule, gates, skips,
cooldowns, circuits, retry storms, soft triggers. Exact virtual times, no leaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import (
    Capabilities,
    ChainFailed,
    Engine,
    HealthBook,
    Hop,
    Ledger,
    Router,
    SoftLimits,
    UnknownModel,
)
from olp.ir import (
    ChatRequest,
    Error,
    QuotaReport,
    Retrying,
    Stop,
    TextDelta,
    ToolSpec,
    Usage,
)

REQ = user_says("q", model="chain")
OK = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]


def fail(delay: float, category: str, code: str = "X", **kw: Any) -> list[Step]:
    return [Line(delay, event_line(Error(code=code, category=category,  # type: ignore[arg-type]
                                         message=f"{code} happened", **kw))), Hang()]


class Scripted:
    """Per-provider scripts, one per spawn (the last repeats)."""

    def __init__(self, scripts: Sequence[Sequence[Step]]) -> None:
        self.scripts = list(scripts)
        self.calls = 0

    def __call__(self, spec: object) -> Sequence[Step]:
        script = self.scripts[min(self.calls, len(self.scripts) - 1)]
        self.calls += 1
        return script


def build(scripts: dict[str, Sequence[Sequence[Step]]], hops: Sequence[Hop] | None = None, *,
          max_concurrent: int = 1, ledger: Ledger | None = None
          ) -> tuple[Engine, dict[str, FakeSpawner]]:
    spawners = {name: FakeSpawner(Scripted(s)) for name, s in scripts.items()}
    actors = {name: ProviderActor(name, CliRunner(JsonLinesAdapter(), spawners[name], CliConfig(
        binary=name, timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60), proxy_env={})),
        max_concurrent=max_concurrent) for name in scripts}
    hops = hops or [Hop(provider=name, model=f"{name}-model") for name in scripts]
    router = Router(lambda m: Hop("a", "a-model") if m == "solo" else None,
                    providers=list(scripts), chains={"chain": hops})
    return Engine(router, actors, health=HealthBook(clock=trio.current_time),
                  ledger=ledger or Ledger(clock=trio.current_time)), spawners


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def served_by(engine: Engine, request: ChatRequest = REQ) -> str:
    answer = await engine.open(request)
    events = [e async for e in answer]
    assert isinstance(events[-1], Stop)
    return answer.hop.provider


def clean(engine: Engine, spawners: dict[str, FakeSpawner]) -> bool:
    return all(s.alive == 0 for s in spawners.values()) and all(
        a.limiter.statistics().borrowed_tokens == 0 for a in engine.actors.values())


async def test_failure_before_content_advances(autojump_clock: trio.testing.MockClock,
                                               nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [fail(1, "rate_limited", "RATE_LIMITED")], "b": [OK]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert trio.current_time() == 1.5
    assert answer.hop.provider == "b" and answer.index == 1
    assert [(r.code, r.trigger_type) for r in answer.records] == [("RATE_LIMITED", "hard")]
    assert [e async for e in answer] == [TextDelta(text="hi"), Stop()]
    assert trio.current_time() == 2
    await trio.testing.wait_all_tasks_blocked()
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 1
    assert clean(engine, spawners)


async def test_non_content_events_do_not_commit(autojump_clock: trio.testing.MockClock,
                                                nursery: trio.Nursery) -> None:
    retry = Retrying(attempt=1, category="unknown", status=None)
    engine, _ = build({"a": [[Line(1, event_line(retry)), *fail(1, "unavailable")]],
                       "b": [[Line(1, event_line(TextDelta(text="x"))), Exit(0, 0)]]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b" and trio.current_time() == 3
    answer.close()


async def test_after_content_a_failure_is_the_callers(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [[Line(1, event_line(TextDelta(text="part"))),
                                     *fail(1, "unavailable", "CRASH")]], "b": [[Exit(0, 0)]]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    events = [e async for e in answer]
    assert events[0] == TextDelta(text="part")
    assert isinstance(events[1], Error) and events[1].code == "CRASH"
    assert spawners["b"].runs == []  # zero further spawns once content was handed back


async def test_client_errors_never_fall_back(autojump_clock: trio.testing.MockClock,
                                             nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [fail(1, "client_error", "BAD", status=422)], "b": [OK]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert info.value.first is not None and info.value.first[1].code == "BAD"
    assert [r.trigger_type for r in info.value.records] == ["client_error"]
    assert spawners["b"].runs == []


@pytest.mark.parametrize(("code", "trigger"), [("UPSTREAM_AUTH", "non_trigger"),
                                               ("AUTH_MISSING", "auth_missing")])
async def test_auth_stops_unless_the_next_entry_opts_in(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, code: str,
        trigger: str) -> None:
    engine, spawners = build({"a": [fail(1, "auth", code)], "b": [OK]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert [r.trigger_type for r in info.value.records] == [trigger]
    assert spawners["b"].runs == []
    opted = [Hop("a", "a-model"), Hop("b", "b-model", on=frozenset({"auth"}))]
    engine, _ = build({"a": [fail(1, "auth", code)], "b": [OK]}, opted)
    await start(engine, nursery)
    assert await served_by(engine) == "b"


async def test_the_on_gate_stops_the_chain(autojump_clock: trio.testing.MockClock,
                                           nursery: trio.Nursery) -> None:
    hops = [Hop("a", "a-model"), Hop("b", "b-model", on=frozenset({"unavailable"}))]
    engine, spawners = build({"a": [fail(1, "rate_limited")], "b": [OK]}, hops)
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert [r.trigger_type for r in info.value.records] == ["non_trigger"]
    assert spawners["b"].runs == []


async def test_unclassifiable_errors_advance(autojump_clock: trio.testing.MockClock,
                                             nursery: trio.Nursery) -> None:
    engine, _ = build({"a": [fail(1, "unknown", "WEIRD")], "b": [OK]})
    await start(engine, nursery)
    assert await served_by(engine) == "b"


async def test_exhaustion_keeps_the_first_hops_error(autojump_clock: trio.testing.MockClock,
                                                     nursery: trio.Nursery) -> None:
    # A later hop's 400 never masks an earlier 429.
    engine, _ = build({"a": [fail(1, "rate_limited", "FIRST", status=429)],
                       "b": [fail(2, "client_error", "SECOND", status=400)]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert trio.current_time() == 3
    assert info.value.first is not None and info.value.first[1].code == "FIRST"
    assert info.value.tried == ["a", "b"]


async def test_context_length_enters_only_larger_windows(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    hops = [Hop("a", "a-model", context_window=100), Hop("b", "b-model", context_window=100),
            Hop("c", "c-model", context_window=None)]
    engine, spawners = build({"a": [fail(1, "context_length", "CONTEXT_LENGTH")], "b": [OK],
                              "c": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert answer.hop.provider == "c"
    assert [(r.provider, r.code, r.trigger_type) for r in answer.records] == [
        ("a", "CONTEXT_LENGTH", "hard"), ("b", "CONTEXT_WINDOW", "soft")]
    assert spawners["b"].runs == []
    answer.close()


async def test_a_retry_storm_is_abandoned_at_once(autojump_clock: trio.testing.MockClock,
                                                  nursery: trio.Nursery) -> None:
    storm = [Line(1, event_line(Retrying(attempt=1, category="rate_limited", status=429,
                                         delay_s=30))), Line(5, event_line(TextDelta(text="x"))),
             Exit(0, 0)]
    engine, spawners = build({"a": [storm], "b": [OK]})
    await start(engine, nursery)
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b" and trio.current_time() == 1.5
    assert [(r.code, r.category) for r in answer.records] == [("RETRY_ABANDONED",
                                                                "rate_limited")]
    await trio.testing.wait_all_tasks_blocked()
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 1
    answer.close()
    # With no hop left to go to, the CLI is left to retry.
    engine, _ = build({"a": [storm]}, [Hop("a", "a-model")])
    await start(engine, nursery)
    t0 = trio.current_time()
    assert await served_by(engine) == "a" and trio.current_time() == t0 + 6


async def test_capability_skip_and_ignore(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    with_tools = ChatRequest(model="chain", messages=REQ.messages, tools=(ToolSpec(name="f"),),
                             temperature=0.2)
    text_only = Capabilities(tools=False)
    hops = [Hop("a", "a-model", capabilities=text_only), Hop("b", "b-model")]
    engine, spawners = build({"a": [OK], "b": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(with_tools)
    assert answer.hop.provider == "b" and spawners["a"].runs == []
    assert [(r.code, r.trigger_type) for r in answer.records] == [("CAPABILITY", "soft")]
    answer.close()
    hops = [Hop("a", "a-model", capabilities=text_only, unsupported="ignore")]
    engine, _ = build({"a": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(with_tools)
    assert answer.hop.provider == "a"
    assert answer.ignored_params == ("temperature", "tools")
    answer.close()
    engine, _ = build({"a": [OK]}, [Hop("a", "a-model", capabilities=text_only)])
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(with_tools)
    assert info.value.first is None and info.value.skip_codes == {"CAPABILITY"}


async def test_usage_window_rests_the_provider_until_its_reset(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [fail(1, "usage_window", "USAGE_WINDOW",
                                         retry_after_s=100), OK], "b": [OK]})
    await start(engine, nursery)
    assert await served_by(engine) == "b"  # a failed at t=1 and rests until t=101
    assert trio.current_time() == 2
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b"
    assert [(r.code, r.trigger_type, r.retry_after_s) for r in answer.records] == [
        ("COOLDOWN", "soft", 99)]
    answer.close()
    assert len(spawners["a"].runs) == 1
    await trio.sleep(101 - trio.current_time())
    assert await served_by(engine) == "a"


async def test_every_hop_cooling_reports_the_soonest_reset(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, _ = build({"a": [fail(1, "usage_window", retry_after_s=300)],
                       "b": [fail(1, "billing")]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed):
        await engine.open(REQ)
    assert trio.current_time() == 2
    with pytest.raises(ChainFailed) as info:
        await engine.open(REQ)
    assert info.value.first is None and info.value.skip_codes == {"COOLDOWN"}
    assert info.value.retry_after_s == 299  # a at t=301; b (billing, 1 h) at t=3602


async def test_circuit_opens_probes_and_closes(autojump_clock: trio.testing.MockClock,
                                               nursery: trio.Nursery) -> None:
    down = fail(1, "unavailable", "UPSTREAM_5XX")
    engine, spawners = build({"a": [down, down, down, down, OK], "b": [OK]})
    await start(engine, nursery)
    for _ in range(3):
        assert await served_by(engine) == "b"  # a fails at t=1, 3, 5: the circuit opens
    assert trio.current_time() == 6
    answer = await engine.open(REQ)  # the circuit is open: a is skipped without a spawn
    assert [(r.code, r.trigger_type) for r in answer.records] == [("CIRCUIT_OPEN", "soft")]
    answer.close()
    assert len(spawners["a"].runs) == 3
    await trio.sleep(5 + 15 - trio.current_time())  # the half-open probe is due at t=20
    assert await served_by(engine) == "b"  # the probe fails at t=21: the wait doubles to 30
    assert len(spawners["a"].runs) == 4
    await trio.sleep(50 - trio.current_time())
    answer = await engine.open(REQ)
    assert answer.records[0].code == "CIRCUIT_OPEN"
    answer.close()
    await trio.sleep(51 - trio.current_time())
    assert await served_by(engine) == "a"  # the probe succeeds: closed
    assert await served_by(engine) == "a"
    assert engine.health.snapshot()["circuits"] == []


async def test_saturation_advances_and_never_opens_the_circuit(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    slow = [Line(50, event_line(TextDelta(text="slow"))), Exit(0, 0)]
    engine, _ = build({"a": [slow], "b": [OK]}, max_concurrent=1)
    await start(engine, nursery)
    hold = await engine.actors["a"].submit(REQ, "a-model")  # occupies a's only slot
    await trio.testing.wait_all_tasks_blocked()
    for _ in range(4):
        answer = await engine.open(REQ)
        assert answer.hop.provider == "b"
        assert answer.records[0].code == "CONCURRENCY_LIMIT"
        answer.close()
    assert engine.health.snapshot()["circuits"] == []
    hold.abandon()


async def test_soft_trigger_skips_before_spawning(autojump_clock: trio.testing.MockClock,
                                                  nursery: trio.Nursery) -> None:
    ledger = Ledger({"a": SoftLimits(daily_request_count_threshold=2)}, clock=trio.current_time)
    engine, spawners = build({"a": [OK], "b": [OK]}, ledger=ledger)
    await start(engine, nursery)
    assert [await served_by(engine) for _ in range(3)] == ["a", "a", "b"]
    assert len(spawners["a"].runs) == 2


async def test_non_streaming_partial_output_advances_then_salvages(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    crash = [Line(1, event_line(TextDelta(text="half"))), *fail(1, "unavailable", "CRASH")]
    engine, _ = build({"a": [crash], "b": [OK]})
    await start(engine, nursery)
    done = await engine.complete(REQ)
    assert done.hop.provider == "b" and not done.truncated
    assert done.events == [TextDelta(text="hi"), Stop()]
    engine, _ = build({"a": [crash], "b": [fail(1, "unavailable")]})
    await start(engine, nursery)
    done = await engine.complete(REQ)
    assert done.truncated and done.hop.provider == "a"
    assert done.events == [TextDelta(text="half"), Stop(finish_reason="length")]


async def test_cancelling_open_kills_the_hop_in_progress(autojump_clock: trio.testing.MockClock,
                                                         nursery: trio.Nursery) -> None:
    engine, spawners = build({"a": [[Line(8, event_line(TextDelta(text="late"))), Exit(0, 0)]]})
    await start(engine, nursery)
    with trio.move_on_after(3):
        await engine.open(REQ)
    await trio.testing.wait_all_tasks_blocked()
    assert spawners["a"].runs[0].killed and spawners["a"].runs[0].ended_at == 3
    assert clean(engine, spawners)


async def test_unknown_model_and_default_fallbacks(autojump_clock: trio.testing.MockClock
                                                   ) -> None:
    engine, _ = build({"a": [OK]})
    with pytest.raises(UnknownModel):
        await engine.open(ChatRequest(model="nope", messages=REQ.messages))
    assert engine.router.resolve("solo").hops == (Hop("a", "a-model"),)
    router = Router(lambda m: Hop("a", "a-model") if m == "solo" else None,
                    providers=["a", "b"], default_fallbacks=[Hop("b", "b-model")],
                    chains={"x": [Hop("a", "a-model"), Hop("a", "a-model"),
                                  Hop("b", "b-model")]})
    assert [h.provider for h in router.resolve("solo").hops] == ["a", "b"]
    assert [h.provider for h in router.resolve("x").hops] == ["a", "b"]  # deduplicated


async def test_credit_pool_counts_the_tokens_answers_used(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    used = [Line(0.5, event_line(TextDelta(text="hi"))),
            Line(0, event_line(Usage(prompt_tokens=600, completion_tokens=400))), Exit(0, 0)]
    ledger = Ledger({"a": SoftLimits(credit_pool_percent_threshold=50,
                                     credit_pool_budget_tokens=4000)}, clock=trio.current_time)
    engine, _ = build({"a": [used], "b": [OK]}, ledger=ledger)
    await start(engine, nursery)
    assert await served_by(engine) == "a"  # 1000 tokens: 25 %
    assert (await engine.complete(REQ)).hop.provider == "a"  # 2000 tokens: 50 %
    answer = await engine.open(REQ)
    assert answer.hop.provider == "b" and answer.records[0].code == "SOFT_TRIGGER"
    answer.close()


async def test_a_bounded_proxy_retry_is_let_finish(autojump_clock: trio.testing.MockClock,
                                                   nursery: trio.Nursery) -> None:
    retry = Retrying(attempt=1, category="rate_limited", status=429, delay_s=2, bounded=True)
    engine, spawners = build({"a": [[Line(1, event_line(retry)), *OK]], "b": [OK]})
    await start(engine, nursery)
    assert await served_by(engine) == "a" and trio.current_time() == 2
    assert spawners["b"].runs == []


async def test_a_window_the_cli_reports_drives_the_five_hour_trigger_until_it_resets(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    report = QuotaReport(window="five_hour", status="allowed_warning", utilization=0.93,
                         resets_at=3600.0)
    used = [Line(0.5, event_line(report)), *OK]
    ledger = Ledger({"a": SoftLimits(five_hour_window_percent_threshold=90)},
                    clock=trio.current_time)
    engine, spawners = build({"a": [used], "b": [OK]}, ledger=ledger)
    await start(engine, nursery)
    assert await served_by(engine) == "a"  # the report came with this answer
    assert trio.current_time() == 1.5
    answer = await engine.open(REQ)
    [skip] = answer.records
    assert (answer.hop.provider, skip.code) == ("b", "SOFT_TRIGGER")
    assert "93% of its five-hour window used" in skip.error_message
    assert skip.retry_after_s == 3600.0 - 1.5  # until the window the CLI reported resets
    answer.close()
    autojump_clock.jump(3600)
    assert await served_by(engine) == "a"  # reset: the report is gone
    assert len(spawners["a"].runs) == 2


async def test_a_report_before_a_failure_is_kept_and_never_reaches_the_answer(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    rejected = QuotaReport(window="five_hour", status="rejected", utilization=1.0,
                           resets_at=7200.0)
    engine, _ = build({"a": [[Line(0.5, event_line(rejected)),
                              *fail(0.5, "usage_window", "USAGE_WINDOW")]],
                       "b": [[Line(0.5, event_line(rejected)), *OK]]})
    await start(engine, nursery)
    done = await engine.complete(REQ)
    assert done.hop.provider == "b"
    assert {w: e.status for w, (e, _) in engine.ledger.reported("a").items()} == \
        {"five_hour": "rejected"}
    assert "b" in engine.ledger.snapshot()["reported"]
    restored = Ledger(clock=trio.current_time)
    restored.restore(engine.ledger.snapshot())
    assert restored.reported("a")["five_hour"][0] == rejected
