"""A provider actor's admission (the lockdown gate, ADR 0024) under trio's MockClock: each
job is admitted before it takes a limiter slot; a refusal is the job's only event, spawns
nothing and is counted in ``jobs_refused``; the admission's ``serve`` runs in the actor's
nursery and ends when the actor is retired."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Ticket, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Line, Step, event_line
from olp.actors.testing import JsonLinesAdapter as Adapter
from olp.failures import Code, failure
from olp.ir import Error, Event, Stop, TextDelta
from olp.lockdown import TARGETS, LockdownGate, Verdict

REQ = user_says("hi", model="m")
TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=30)
REFUSAL = failure(Code.LOCKDOWN_FAILED, "fake: lockdown FAILED: offers Bash")
ANSWER: list[Step] = [Line(0.5, event_line(TextDelta(text="a"))), Exit(0.5, 0)]


class FakeAdmission:
    """Answers admit call ``i`` with ``answers[i]`` (the last repeats) after ``took``
    virtual seconds; records when ``serve`` ran and when it was cancelled."""

    def __init__(self, *answers: Error | None, took: float = 0.0) -> None:
        self.answers = answers
        self.took = took
        self.admits: list[float] = []
        self.admits_cancelled: list[float] = []
        self.serve_started: float | None = None
        self.serve_cancelled: float | None = None

    async def admit(self) -> Error | None:
        i = len(self.admits)
        self.admits.append(trio.current_time())
        try:
            await trio.sleep(self.took)
        except trio.Cancelled:
            self.admits_cancelled.append(trio.current_time())
            raise
        return self.answers[min(i, len(self.answers) - 1)]

    def status(self) -> dict[str, Any]:
        return {"state": "failed", "line": "FAILED: offers Bash"}

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        self.serve_started = trio.current_time()
        task_status.started()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.serve_cancelled = trio.current_time()
            raise


def make_actor(admission: Any, *, script: Sequence[Step] = ANSWER,
               max_concurrent: int = 2) -> tuple[ProviderActor, FakeSpawner]:
    spawner = FakeSpawner(lambda spec: script)
    runner = CliRunner(Adapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    actor = ProviderActor("fake", runner, max_concurrent=max_concurrent, admission=admission)
    return actor, spawner


async def drain(ticket: Ticket) -> list[tuple[float, Event]]:
    out = []
    async for event in ticket.events:
        out.append((trio.current_time(), event))
    return out


def in_flight(actor: ProviderActor) -> int:
    return actor.statistics().in_flight


async def test_a_refused_job_gets_only_the_refusal_and_spawns_nothing(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(REFUSAL)
    actor, spawner = make_actor(admission)
    await nursery.start(actor.run)
    assert await drain(await actor.submit(REQ, "m")) == [(0.0, REFUSAL)]
    assert spawner.runs == []
    stats = actor.statistics()
    assert (stats.jobs_refused, stats.jobs_started, stats.in_flight) == (1, 0, 0)
    assert admission.admits == [0.0]
    assert await drain(await actor.submit(REQ, "m")) == [(0.0, REFUSAL)]
    assert actor.statistics().jobs_refused == 2
    assert spawner.runs == []


async def test_no_slot_is_held_while_a_job_waits_for_admission(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(REFUSAL, took=5.0)
    actor, spawner = make_actor(admission, max_concurrent=1)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    await trio.sleep(2)
    assert admission.admits == [0.0]
    assert in_flight(actor) == 0
    assert actor.statistics().jobs_refused == 0
    assert await drain(ticket) == [(5.0, REFUSAL)]
    stats = actor.statistics()
    assert (stats.jobs_refused, stats.jobs_started, stats.in_flight) == (1, 0, 0)
    assert spawner.runs == []


async def test_a_refusal_leaves_the_slot_to_the_next_job(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(REFUSAL, None)
    actor, spawner = make_actor(admission, max_concurrent=1)
    await nursery.start(actor.run)
    assert await drain(await actor.submit(REQ, "m")) == [(0.0, REFUSAL)]
    assert await drain(await actor.submit(REQ, "m")) == [
        (0.5, TextDelta(text="a")), (1.0, Stop())]
    stats = actor.statistics()
    assert (stats.jobs_refused, stats.jobs_started, stats.in_flight) == (1, 1, 0)
    assert len(spawner.runs) == 1 and spawner.alive == 0


async def test_an_admitted_job_runs_normally(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(None)
    actor, spawner = make_actor(admission)
    await nursery.start(actor.run)
    assert await drain(await actor.submit(REQ, "m")) == [
        (0.5, TextDelta(text="a")), (1.0, Stop())]
    stats = actor.statistics()
    assert (stats.jobs_refused, stats.jobs_started, stats.in_flight) == (0, 1, 0)
    assert len(spawner.runs) == 1 and spawner.runs[0].started_at == 0.0
    assert spawner.alive == 0
    assert admission.admits == [0.0]


async def test_a_job_runs_once_its_admission_has_waited(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(None, took=3.0)
    actor, spawner = make_actor(admission)
    await nursery.start(actor.run)
    assert await drain(await actor.submit(REQ, "m")) == [
        (3.5, TextDelta(text="a")), (4.0, Stop())]
    assert spawner.runs[0].started_at == 3.0
    assert actor.statistics().jobs_started == 1


async def test_a_job_abandoned_while_it_waits_for_admission(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    admission = FakeAdmission(None, took=10.0)
    actor, spawner = make_actor(admission)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    await trio.sleep(2)
    ticket.abandon()
    await trio.sleep(20)
    assert admission.admits_cancelled == [2.0]
    stats = actor.statistics()
    assert (stats.jobs_refused, stats.jobs_started, stats.in_flight) == (0, 0, 0)
    assert spawner.runs == []


async def test_serve_runs_beside_the_actor_and_ends_when_it_is_retired(
        autojump_clock: trio.testing.MockClock) -> None:
    admission = FakeAdmission(None)
    actor, _ = make_actor(admission)
    returned: list[float] = []

    async def run_actor(*, task_status: trio.TaskStatus[None]) -> None:
        await actor.run(task_status=task_status)
        returned.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        await nursery.start(run_actor)
        await trio.sleep(1)
        assert admission.serve_started == 0.0
        assert admission.serve_cancelled is None
        await trio.sleep(9)
        actor.retire()
    assert returned == [10.0]
    assert admission.serve_cancelled == 10.0
    assert actor.finished.is_set()


async def test_a_retired_actor_ends_its_checks_with_its_last_job(
        autojump_clock: trio.testing.MockClock) -> None:
    admission = FakeAdmission(None)
    actor, spawner = make_actor(admission, script=[
        Line(2.0, event_line(TextDelta(text="a"))), Exit(3.0, 0)])
    returned: list[float] = []

    async def run_actor(*, task_status: trio.TaskStatus[None]) -> None:
        await actor.run(task_status=task_status)
        returned.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        await nursery.start(run_actor)
        ticket = await actor.submit(REQ, "m")
        await trio.sleep(1)
        actor.retire()
        assert await drain(ticket) == [(2.0, TextDelta(text="a")), (5.0, Stop())]
    assert admission.serve_cancelled == 5.0  # a job might still have waited on a check
    assert returned == [5.0]
    assert spawner.alive == 0


async def test_cancelling_the_actor_cancels_serve(
        autojump_clock: trio.testing.MockClock) -> None:
    admission = FakeAdmission(None)
    actor, _ = make_actor(admission)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await trio.sleep(4)
        nursery.cancel_scope.cancel()
    assert admission.serve_started == 0.0
    assert admission.serve_cancelled == 4.0
    assert actor.finished.is_set()


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "fake-cli"
    path.write_bytes(b"fake 1.0\n")
    return path


async def test_with_a_lockdown_gate_a_failed_check_refuses(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, binary: Path) -> None:
    async def verify() -> Verdict:
        await trio.sleep(4)
        return Verdict("fake", "1.0", offered=("Bash",), problems=("offers Bash",))

    actor, spawner = make_actor(LockdownGate("fake", str(binary), verify,
                                                 target=TARGETS["claude"]))
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert [t for t, _ in events] == [4.0]
    refusal = events[0][1]
    assert isinstance(refusal, Error)
    assert (refusal.code, refusal.category, refusal.message) == (
        "LOCKDOWN_FAILED", "unavailable", "fake: lockdown FAILED: offers Bash")
    assert spawner.runs == [] and actor.statistics().jobs_refused == 1


async def test_with_a_lockdown_gate_a_new_binary_is_checked_before_the_job(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, binary: Path) -> None:
    checks: list[float] = []

    async def verify() -> Verdict:
        checks.append(trio.current_time())
        await trio.sleep(2)
        return Verdict("fake", "1.0")

    actor, spawner = make_actor(LockdownGate("fake", str(binary), verify,
                                                 target=TARGETS["claude"]))
    await nursery.start(actor.run)
    await trio.sleep(5)
    assert await drain(await actor.submit(REQ, "m")) == [
        (5.5, TextDelta(text="a")), (6.0, Stop())]
    new = binary.with_name("fake-cli.new")
    new.write_bytes(b"fake 1.1\n")
    os.replace(new, binary)
    assert await drain(await actor.submit(REQ, "m")) == [
        (8.5, TextDelta(text="a")), (9.0, Stop())]
    assert checks == [0.0, 6.0]
    assert [r.started_at for r in spawner.runs] == [5.0, 8.0]


async def test_a_job_taken_before_retire_gets_the_check_in_progress(
        autojump_clock: trio.testing.MockClock, binary: Path) -> None:
    async def verify() -> Verdict:
        await trio.sleep(10)
        return Verdict("fake", "1.0")

    actor, _ = make_actor(LockdownGate("fake", str(binary), verify,
                                         target=TARGETS["claude"], wait_s=60.0))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        ticket = await actor.submit(REQ, "m")
        await trio.sleep(1)
        actor.retire()  # a config reload replaced it
        events = await drain(ticket)
    assert events == [(10.5, TextDelta(text="a")), (11.0, Stop())]
