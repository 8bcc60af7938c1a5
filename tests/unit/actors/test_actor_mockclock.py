"""The provider actor under trio's MockClock with a scripted fake spawner.

Every test asserts exact virtual times and that nothing leaks: no fake process alive,
no limiter slot borrowed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, SpawnError, Ticket, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.ir import Error, Event, Start, Stop, TextDelta

REQ = user_says("hi", model="m")
TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=30)


def text(delay: float, t: str) -> Line:
    return Line(delay, event_line(TextDelta(text=t)))


def make_actor(script: Sequence[Step], *, max_concurrent: int = 2,
               spawner: FakeSpawner | None = None,
               adapter: JsonLinesAdapter | None = None) -> tuple[ProviderActor, FakeSpawner]:
    spawner = spawner or FakeSpawner(lambda spec: script)
    runner = CliRunner(adapter or JsonLinesAdapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    return ProviderActor("fake", runner, max_concurrent=max_concurrent), spawner


async def drain(ticket: Ticket) -> list[tuple[float, Event]]:
    out = []
    async for event in ticket.events:
        out.append((trio.current_time(), event))
    return out


def assert_clean(actor: ProviderActor, spawner: FakeSpawner) -> None:
    assert spawner.alive == 0
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_success_streams_each_event_when_printed(autojump_clock: trio.testing.MockClock,
                                                       nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([Line(0.5, event_line(Start(model="m-2026"))), text(0.5, "a"),
                                 text(1.0, "b"), Exit(0.25, 0)])
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert events == [(0.5, Start(model="m-2026")), (1.0, TextDelta(text="a")),
                      (2.0, TextDelta(text="b")), (2.25, Stop())]
    assert spawner.runs[0].ended_at == 2.25 and not spawner.runs[0].killed
    assert_clean(actor, spawner)


async def test_spawn_gets_minimal_env_workdir_and_prompt_on_stdin(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([Exit(0, 0)])
    actor.runner.config = CliConfig(  # type: ignore[attr-defined]
        binary="fake-cli", timeouts=TIMEOUTS, env={"EXTRA": "1"},
        proxy_env={"PATH": "/bin", "ANTHROPIC_BASE_URL": "http://leak", "SECRET": "x"})
    await nursery.start(actor.run)
    await drain(await actor.submit(REQ, "m"))
    spec = spawner.runs[0].spec
    assert spec.stdin == b"hi" and "hi" not in spec.argv
    assert spec.env["PATH"] == "/bin" and spec.env["EXTRA"] == "1" and spec.env["FAKE_CLI"] == "1"
    assert "ANTHROPIC_BASE_URL" not in spec.env and "SECRET" not in spec.env
    assert spec.env["HOME"] != spec.cwd and spec.cwd.name == "work"
    assert not spec.cwd.exists()  # the job's temporary directories are gone


async def test_first_output_deadline_counts_to_first_content(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    # A non-content event does not stop the first-output clock.
    actor, spawner = make_actor([Line(1, event_line(Start(model="m"))), Hang()])
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert events[-1][0] == 10
    err = events[-1][1]
    assert isinstance(err, Error) and err.code == "FIRST_OUTPUT_TIMEOUT"
    assert err.category == "unavailable"
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 10
    assert_clean(actor, spawner)


async def test_idle_deadline_after_content(autojump_clock: trio.testing.MockClock,
                                           nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(2, "a"), text(4, "b"), Hang()])
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert [t for t, _ in events] == [2, 6, 11]
    assert isinstance(events[-1][1], Error) and events[-1][1].code == "IDLE_TIMEOUT"
    assert spawner.runs[0].ended_at == 11
    assert_clean(actor, spawner)


async def test_total_deadline_bounds_a_steady_trickle(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(4, f"{i}") for i in range(100)])
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert events[-1][0] == 30
    assert isinstance(events[-1][1], Error) and events[-1][1].code == "TOTAL_TIMEOUT"
    assert len(events) == 1 + 7  # deltas at 4, 8, ..., 28
    assert_clean(actor, spawner)


async def test_saturated_actor_refuses_at_once(autojump_clock: trio.testing.MockClock,
                                               nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), Exit(1, 0)], max_concurrent=1)
    await nursery.start(actor.run)
    first = await actor.submit(REQ, "m")
    await trio.testing.wait_all_tasks_blocked()
    second = await actor.submit(REQ, "m")
    refused = await drain(second)
    assert len(refused) == 1 and refused[0][0] == 0
    err = refused[0][1]
    assert isinstance(err, Error) and err.code == "CONCURRENCY_LIMIT"
    assert err.category == "unavailable"
    assert actor.statistics().in_flight == 1 and actor.statistics().jobs_refused == 1
    assert [t for t, _ in await drain(first)] == [1, 2]
    assert len(spawner.runs) == 1
    assert_clean(actor, spawner)


async def test_slot_returned_then_reusable(autojump_clock: trio.testing.MockClock,
                                           nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), Exit(0, 0)], max_concurrent=1)
    await nursery.start(actor.run)
    for expected_end in (1, 2, 3):
        events = await drain(await actor.submit(REQ, "m"))
        assert events[-1] == (expected_end, Stop())
    assert_clean(actor, spawner)


async def test_cancel_before_spawn(autojump_clock: trio.testing.MockClock,
                                   nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), Exit(0, 0)])
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    ticket.abandon()
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.runs == []
    assert_clean(actor, spawner)


async def test_cancel_before_first_output(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(5, "a"), Exit(0, 0)])
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    await trio.sleep(2)
    assert spawner.alive == 1
    ticket.abandon()
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 2
    assert_clean(actor, spawner)


async def test_cancel_mid_stream(autojump_clock: trio.testing.MockClock,
                                 nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), text(1, "b"), Exit(1, 0)])
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    assert await ticket.events.receive() == TextDelta(text="a")
    await trio.sleep(0.5)
    ticket.abandon()
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 1.5
    assert_clean(actor, spawner)


async def test_caller_closing_its_channel_stops_the_job(autojump_clock: trio.testing.MockClock,
                                                        nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), text(1, "b"), Hang()])
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    await ticket.events.receive()
    ticket.events.close()  # gone without cancelling: the next send notices
    await trio.sleep(5)
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 2
    assert_clean(actor, spawner)


async def test_cancelling_the_actor_reaps_every_job(autojump_clock: trio.testing.MockClock,
                                                    ) -> None:
    actor, spawner = make_actor([text(1, "a"), Hang()], max_concurrent=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        tickets = [await actor.submit(REQ, "m") for _ in range(3)]
        await trio.sleep(4)
        nursery.cancel_scope.cancel()
    assert [r.ended_at for r in spawner.runs] == [4, 4, 4]
    for ticket in tickets:
        ticket.abandon()
    assert_clean(actor, spawner)


@pytest.mark.parametrize(("not_found", "code"), [(True, "CLI_NOT_FOUND"),
                                                 (False, "SPAWN_FAILED")])
async def test_spawn_failure_is_typed(autojump_clock: trio.testing.MockClock,
                                      nursery: trio.Nursery, not_found: bool, code: str) -> None:
    spawner = FakeSpawner(lambda spec: [], fail_with=SpawnError("nope", not_found=not_found))
    actor, _ = make_actor([], spawner=spawner)
    await nursery.start(actor.run)
    [(t, err)] = await drain(await actor.submit(REQ, "m"))
    assert t == 0 and isinstance(err, Error) and err.code == code
    assert err.category == "unavailable"
    assert_clean(actor, spawner)


async def test_preflight_failure_never_spawns(autojump_clock: trio.testing.MockClock,
                                              nursery: trio.Nursery) -> None:
    missing = Error(code="AUTH_MISSING", category="auth", message="log in")
    actor, spawner = make_actor([Exit(0, 0)], adapter=JsonLinesAdapter(preflight_error=missing))
    await nursery.start(actor.run)
    assert await drain(await actor.submit(REQ, "m")) == [(0, missing)]
    assert spawner.runs == []
    assert_clean(actor, spawner)


async def test_nonzero_exit_and_garbage_are_failures_not_crashes(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([text(1, "a"), Line(1, b"not json"), Exit(0, 0)])
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    err = events[-1][1]
    assert isinstance(err, Error) and err.code == "INTERNAL_ERROR" and events[-1][0] == 2
    # The actor survives a job's bug and serves the next job.
    actor.runner.spawner = FakeSpawner(lambda spec: [Exit(1, 3)])  # type: ignore[attr-defined]
    events = await drain(await actor.submit(REQ, "m"))
    assert isinstance(events[-1][1], Error) and events[-1][1].code == "CLI_FAILED"
    assert_clean(actor, spawner)


async def test_a_retired_actor_finishes_its_jobs_and_takes_no_new_one(
        autojump_clock: trio.testing.MockClock) -> None:
    """A config reload retires a replaced actor: its job in flight runs to its end, a job
    offered after gets a terminal CANCELLED (category unavailable: the chain moves on), and
    run() returns once the last job is done."""
    actor, spawner = make_actor([text(1, "a"), text(2, "b"), Exit(0, 0)])
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        ticket = await actor.submit(REQ, "m")
        await trio.sleep(0.5)
        actor.retire()
        late = await actor.submit(REQ, "m")
        [(at, refused)] = await drain(late)
        assert at == 0.5 and isinstance(refused, Error)
        assert (refused.code, refused.category) == ("CANCELLED", "unavailable")
        events = await drain(ticket)
        assert [e.text for _, e in events if isinstance(e, TextDelta)] == ["a", "b"]
        assert isinstance(events[-1][1], Stop) and events[-1][0] == 3
        await actor.finished.wait()
        assert trio.current_time() == 3  # run() ended with its last job, not before
    assert len(spawner.runs) == 1 and actor.statistics().in_flight == 0
