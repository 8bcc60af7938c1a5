"""How events cross from a job to its caller (ADR 0028), under trio's MockClock.

An event that finds room in the reply buffer is sent without a schedule point, and one
already buffered is received without one; a full buffer still holds the job back until the
caller reads (a slow client slows the reader), and a caller cancelled while waiting loses no
event. Exact virtual times; no slot is left borrowed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
import trio.testing
from sample_requests import user_says

from olp.actors import ProviderActor
from olp.actors._actor import REPLY_BUFFER
from olp.ir import ChatRequest, Event, Stop, TextDelta

REQ = user_says("hi", model="m")
Emit = Callable[[Event], Awaitable[None]]


class Scripted:
    """A runner that emits ``count`` text deltas back to back (then ``Stop``), noting when
    each emit returned; with ``pause_s``, it sleeps that long first."""

    def __init__(self, count: int, *, pause_s: float = 0.0, check_no_yield: int = 0) -> None:
        self.count = count
        self.pause_s = pause_s
        self.check_no_yield = check_no_yield  # how many first emits must not checkpoint
        self.emitted_at: list[float] = []

    async def run(self, request: ChatRequest, model: str, emit: Emit, *,
                  owner: str | None = None) -> None:
        if self.pause_s:
            await trio.sleep(self.pause_s)
        for i in range(self.count):
            if i < self.check_no_yield:
                with trio.testing.assert_no_checkpoints():
                    await emit(TextDelta(text=str(i)))
            else:
                await emit(TextDelta(text=str(i)))
            self.emitted_at.append(trio.current_time())
        await emit(Stop())


async def test_events_with_room_in_the_buffer_cross_without_a_schedule_point(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    runner = Scripted(REPLY_BUFFER - 1, check_no_yield=REPLY_BUFFER - 1)
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    first = await ticket.receive()  # waits: the job has not run yet
    assert first == TextDelta(text="0")
    # the rest is buffered by now (the job ran to its end in one step): no schedule point
    with trio.testing.assert_no_checkpoints():
        rest = [await ticket.receive() for _ in range(REPLY_BUFFER - 1)]
    assert rest == [*(TextDelta(text=str(i)) for i in range(1, REPLY_BUFFER - 1)), Stop()]
    await trio.testing.wait_all_tasks_blocked()
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_a_full_buffer_holds_the_job_until_the_caller_reads(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    runner = Scripted(REPLY_BUFFER + 3)
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    await trio.sleep(10)  # a slow client: nothing read for 10 s
    assert len(runner.emitted_at) == REPLY_BUFFER  # the 17th event waits for room
    got = [await ticket.receive() for _ in range(REPLY_BUFFER + 4)]
    assert got[-1] == Stop() and len(got) == REPLY_BUFFER + 4
    assert runner.emitted_at[:REPLY_BUFFER] == [0.0] * REPLY_BUFFER
    assert runner.emitted_at[REPLY_BUFFER:] == [10.0] * 3
    await trio.testing.wait_all_tasks_blocked()
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_a_caller_cancelled_while_waiting_loses_no_event(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    runner = Scripted(2, pause_s=5)
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    with trio.move_on_after(1) as scope:
        await ticket.receive()
    assert scope.cancelled_caught and trio.current_time() == 1
    events = [await ticket.receive() for _ in range(3)]
    assert events == [TextDelta(text="0"), TextDelta(text="1"), Stop()]
    assert trio.current_time() == 5
    await trio.testing.wait_all_tasks_blocked()
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_a_caller_that_stopped_listening_stops_the_job_at_its_first_event(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    runner = Scripted(REPLY_BUFFER * 4, pause_s=1)
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    ticket = await actor.submit(REQ, "m")
    ticket.events.close()  # no abandon(): only the channel is gone
    await trio.testing.wait_all_tasks_blocked()
    await trio.sleep(2)
    # the first emit found nobody listening and stopped the job there
    assert runner.emitted_at == [] and trio.current_time() == 2
    assert actor.limiter.statistics().borrowed_tokens == 0
