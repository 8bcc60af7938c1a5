"""Singleflight under trio's MockClock, with scripted fake sources (and one real actor).

Every test asserts exact virtual times and, at the end, that nothing leaks: no flight left in
the table, no subscriber, and every source either finished or abandoned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, Step, event_line
from olp.cache import (
    Singleflight,
)
from olp.failures import Code
from olp.ir import (
    Error,
    Event,
    EventSource,
    Start,
    Stop,
    TextDelta,
    is_terminal,
)

Script = Sequence[tuple[float, Event]]
FAIL = Error(code="RATE_LIMITED", category="rate_limited", message="slow down")


def deltas(n: int, every: float = 1.0) -> list[tuple[float, Event]]:
    return [(every, TextDelta(text=str(i))) for i in range(n)]


ANSWER: Script = [(1, Start(model="m")), (1, TextDelta(text="a")), (1, TextDelta(text="b")),
                  (1, Stop())]
ANSWER_EVENTS = [e for _, e in ANSWER]


class FakeSource:
    """Emits scripted events after scripted virtual delays; records how it ended."""

    def __init__(self, script: Script, *, fail: Exception | None = None) -> None:
        self._script = list(script)
        self._fail = fail
        self.abandoned_at: float | None = None
        self.finished = False
        self.used_after_abandon = False
        self.readers: set[str] = set()

    async def receive(self) -> Event:
        self.readers.add(trio.lowlevel.current_task().name)
        if self.abandoned_at is not None:
            self.used_after_abandon = True
            raise trio.ClosedResourceError
        if not self._script:
            await trio.lowlevel.checkpoint()
            if self._fail is not None:
                raise self._fail
            raise trio.EndOfChannel
        delay, event = self._script[0]
        await trio.sleep(delay)
        self._script.pop(0)
        self.finished = is_terminal(event)
        return event

    def abandon(self) -> None:
        if self.abandoned_at is None:
            self.abandoned_at = trio.current_time()


class Starter:
    """A ``start`` callable handing out one fresh FakeSource per call."""

    def __init__(self, *scripts: Script, delay: float = 0.0,
                 fail: Exception | None = None) -> None:
        self._scripts = list(scripts)
        self._delay = delay
        self._fail = fail
        self.sources: list[FakeSource] = []

    @property
    def calls(self) -> int:
        return len(self.sources)

    async def __call__(self) -> EventSource:
        await trio.sleep(self._delay)
        if self._fail is not None:
            self.sources.append(FakeSource([]))  # counted; never used
            self.sources[-1].finished = True
            raise self._fail
        source = FakeSource(self._scripts[len(self.sources)])
        self.sources.append(source)
        return source


class Completions:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[tuple[float, list[Event]]] = []

    async def __call__(self, events: list[Event]) -> None:
        self.calls.append((trio.current_time(), events))
        await trio.sleep(self.delay)


async def drain(source: EventSource, *, stop_after: int | None = None
                ) -> list[tuple[float, Event]]:
    """Read until EndOfChannel (or ``stop_after`` events), then abandon."""
    out: list[tuple[float, Event]] = []
    try:
        while stop_after is None or len(out) < stop_after:
            try:
                event = await source.receive()
            except trio.EndOfChannel:
                break
            out.append((trio.current_time(), event))
    finally:
        source.abandon()
    return out


def events_of(timed: list[tuple[float, Event]]) -> list[Event]:
    return [e for _, e in timed]


@pytest.fixture
async def sf(nursery: trio.Nursery) -> Singleflight:
    singleflight = Singleflight(max_buffer=4)
    await nursery.start(singleflight.run)
    return singleflight


async def assert_clean(sf: Singleflight, starter: Starter) -> None:
    await trio.testing.wait_all_tasks_blocked()
    stats = sf.statistics()
    assert (stats.in_flight, stats.subscribers) == (0, 0)
    for source in starter.sources:
        assert source.finished or source.abandoned_at is not None
        assert not source.used_after_abandon
        assert source.readers <= {"singleflight:k"}  # only the pump ever reads the source


# --- one source per key -----------------------------------------------------------------------

async def test_identical_concurrent_opens_start_one_source(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter, done = Starter(ANSWER), Completions()
    results: list[tuple[bool, list[tuple[float, Event]]]] = []

    async def client() -> None:
        source, attached = await sf.open("k", starter, on_complete=done)
        results.append((attached, await drain(source)))

    async with trio.open_nursery() as clients:
        for _ in range(5):
            clients.start_soon(client)
        await trio.testing.wait_all_tasks_blocked()
        assert (sf.statistics().in_flight, sf.statistics().subscribers) == (1, 5)
    assert starter.calls == 1
    assert sorted(attached for attached, _ in results) == [False, True, True, True, True]
    for _, timed in results:
        assert timed == [(1, Start(model="m")), (2, TextDelta(text="a")),
                         (3, TextDelta(text="b")), (4, Stop())]
    assert done.calls == [(4, ANSWER_EVENTS)]
    stats = sf.statistics()
    assert (stats.started, stats.attached, stats.dropped) == (1, 4, 0)
    await assert_clean(sf, starter)


async def test_different_keys_do_not_share(autojump_clock: trio.testing.MockClock,
                                           sf: Singleflight) -> None:
    starter = Starter(ANSWER, ANSWER)
    a, attached_a = await sf.open("k", starter)
    b, attached_b = await sf.open("other", starter)
    assert (attached_a, attached_b, sf.statistics().in_flight) == (False, False, 2)
    assert events_of(await drain(a)) == events_of(await drain(b)) == ANSWER_EVENTS
    assert starter.calls == 2
    await trio.testing.wait_all_tasks_blocked()
    assert sf.statistics().in_flight == 0


async def test_late_joiner_gets_the_prefix_at_once_then_the_live_tail(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter = Starter(ANSWER)
    late: list[tuple[float, Event]] = []

    async def join_late() -> None:
        await trio.sleep(2.5)
        source, attached = await sf.open("k", starter)
        assert attached
        late.extend(await drain(source))

    async with trio.open_nursery() as clients:
        clients.start_soon(join_late)
        first, _ = await sf.open("k", starter)
        early = await drain(first)
    assert early == [(1, Start(model="m")), (2, TextDelta(text="a")), (3, TextDelta(text="b")),
                     (4, Stop())]
    assert late == [(2.5, Start(model="m")), (2.5, TextDelta(text="a")),
                    (3, TextDelta(text="b")), (4, Stop())]
    assert starter.calls == 1
    await assert_clean(sf, starter)


async def test_a_late_joiners_prefix_is_not_counted_as_its_backlog(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter = Starter([*deltas(10), (1, Stop())])
    late: list[tuple[float, Event]] = []

    async def join_late() -> None:
        await trio.sleep(8.5)  # 8 events (> max_buffer) already produced
        source, _ = await sf.open("k", starter)
        await trio.sleep(2)  # falls 2 live events behind: within max_buffer
        late.extend(await drain(source))

    async with trio.open_nursery() as clients:
        clients.start_soon(join_late)
        first, _ = await sf.open("k", starter)
        await drain(first)
    assert late[:10] == [(10.5, TextDelta(text=str(i))) for i in range(10)]
    assert late[10:] == [(11, Stop())]
    assert sf.statistics().dropped == 0
    await assert_clean(sf, starter)


# --- disconnects ------------------------------------------------------------------------------

async def test_one_of_two_leaves_and_the_other_finishes(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter, done = Starter(ANSWER), Completions()
    a, _ = await sf.open("k", starter, on_complete=done)
    b, _ = await sf.open("k", starter)
    async with trio.open_nursery() as clients:
        clients.start_soon(partial(drain, a, stop_after=1))  # reads Start at 1, then leaves
        assert await drain(b) == [(1, Start(model="m")), (2, TextDelta(text="a")),
                                  (3, TextDelta(text="b")), (4, Stop())]
    source = starter.sources[0]
    assert source.finished and source.abandoned_at == 4  # abandoned only once it was done
    assert done.calls == [(4, ANSWER_EVENTS)]  # the opener's callback, though it left
    await assert_clean(sf, starter)


async def test_when_everyone_leaves_the_source_is_abandoned_then_and_nothing_is_completed(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter, done = Starter(ANSWER, ANSWER), Completions()
    a, _ = await sf.open("k", starter, on_complete=done)
    b, _ = await sf.open("k", starter, on_complete=done)
    await a.receive()
    await trio.sleep(0.5)
    a.abandon()
    assert sf.statistics().in_flight == 1
    await trio.sleep(1)
    assert trio.current_time() == 2.5
    b.abandon()
    source = starter.sources[0]
    assert (source.abandoned_at, source.finished) == (2.5, False)  # at once, not later
    assert sf.statistics().in_flight == 0  # gone at once: the next request starts fresh
    with pytest.raises(trio.ClosedResourceError):
        await b.receive()
    again, attached = await sf.open("k", starter, on_complete=done)
    assert not attached
    assert await drain(again) == [(3.5, Start(model="m")), (4.5, TextDelta(text="a")),
                                  (5.5, TextDelta(text="b")), (6.5, Stop())]
    assert starter.calls == 2
    assert done.calls == [(6.5, ANSWER_EVENTS)]  # only the second, complete flight
    await assert_clean(sf, starter)


async def test_leaving_while_the_source_is_starting_abandons_it_once_started(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter = Starter(ANSWER, delay=1)
    a, _ = await sf.open("k", starter)
    await trio.sleep(0.5)
    a.abandon()  # start() is still running: it is cancelled
    await trio.testing.wait_all_tasks_blocked()
    assert starter.calls == 0
    assert sf.statistics().in_flight == 0
    await assert_clean(sf, starter)


async def test_abandon_is_idempotent_and_wakes_a_parked_receive(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter = Starter(ANSWER)
    a, _ = await sf.open("k", starter)
    b, _ = await sf.open("k", starter)  # keeps the flight alive: no publish wakes `a`

    async def parked() -> None:
        with pytest.raises(trio.ClosedResourceError):
            await a.receive()
        assert trio.current_time() == 0.5

    async with trio.open_nursery() as clients:
        clients.start_soon(parked)
        await trio.sleep(0.5)
        a.abandon()
        a.abandon()
    with pytest.raises(trio.ClosedResourceError):
        await a.receive()
    assert events_of(await drain(b)) == ANSWER_EVENTS
    await assert_clean(sf, starter)


async def test_a_cancelled_open_subscribes_to_nothing(autojump_clock: trio.testing.MockClock,
                                                      sf: Singleflight) -> None:
    starter = Starter(ANSWER)
    with trio.CancelScope() as scope:
        scope.cancel()
        await sf.open("k", starter)
    assert sf.statistics().started == 0
    await assert_clean(sf, starter)


# --- slow clients -----------------------------------------------------------------------------

async def test_a_slow_client_is_dropped_alone(autojump_clock: trio.testing.MockClock,
                                             sf: Singleflight) -> None:
    script = [*deltas(10), (1, Stop())]
    starter, done = Starter(script), Completions()
    fast, _ = await sf.open("k", starter, on_complete=done)
    slow, _ = await sf.open("k", starter)
    async with trio.open_nursery() as clients:
        clients.start_soon(drain, fast)
        await trio.sleep(4.5)
        assert sf.statistics().subscribers == 2  # 4 unread: at the limit
        await trio.sleep(1)
        assert sf.statistics().subscribers == 1  # the 5th event dropped it
        assert sf.statistics().dropped == 1
    assert trio.current_time() == 11  # the fast client was never held back
    assert done.calls == [(11, [e for _, e in script])]
    dropped = await drain(slow)
    assert [type(e) for _, e in dropped] == [Error]
    error = dropped[0][1]
    assert isinstance(error, Error) and (error.code, error.category) == (Code.CLIENT_TOO_SLOW,
                                                                         "unknown")
    await assert_clean(sf, starter)


async def test_dropping_the_only_client_cancels_the_source(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter, done = Starter([*deltas(10), (1, Stop())]), Completions()
    slow, _ = await sf.open("k", starter, on_complete=done)
    await trio.sleep(100)
    assert starter.sources[0].abandoned_at == 5 and not starter.sources[0].finished
    assert sf.statistics().in_flight == 0 and done.calls == []
    error = await slow.receive()
    assert isinstance(error, Error) and error.code == Code.CLIENT_TOO_SLOW
    with pytest.raises(trio.EndOfChannel):
        await slow.receive()
    slow.abandon()
    await assert_clean(sf, starter)


async def test_a_client_that_keeps_up_slowly_is_not_dropped(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter = Starter([*deltas(20, every=1), (1, Stop())])
    source, _ = await sf.open("k", starter)
    got = []
    while True:
        try:
            got.append(await source.receive())
        except trio.EndOfChannel:
            break
        if len(got) == 8:  # read at 11.5 with the 12th due at 12: 4 unread at most so far
            break
        await trio.sleep(1.5)  # falls behind by one event every two
    source.abandon()
    assert all(isinstance(e, TextDelta) for e in got) and sf.statistics().dropped == 0
    await assert_clean(sf, starter)


# --- failures ---------------------------------------------------------------------------------

async def test_a_source_error_reaches_every_subscriber(autojump_clock: trio.testing.MockClock,
                                                       sf: Singleflight) -> None:
    starter = Starter([(1, Start(model="m")), (1, TextDelta(text="a")), (1, FAIL)], ANSWER)
    done = Completions()
    a, _ = await sf.open("k", starter, on_complete=done)
    results: list[list[tuple[float, Event]]] = []

    async def join_late() -> None:
        await trio.sleep(1.5)
        results.append(await drain((await sf.open("k", starter))[0]))

    async with trio.open_nursery() as clients:
        clients.start_soon(join_late)
        results.append(await drain(a))
    for timed in results:
        assert events_of(timed) == [Start(model="m"), TextDelta(text="a"), FAIL]
        assert timed[-1][0] == 3
    assert done.calls == []
    assert sf.statistics().in_flight == 0
    again, attached = await sf.open("k", starter)  # a failure is not remembered
    assert not attached and events_of(await drain(again)) == ANSWER_EVENTS
    await assert_clean(sf, starter)


@pytest.mark.parametrize(("source", "code", "category"), [
    (Starter(fail=trio.BrokenResourceError("the actor is not running"), delay=1),
     Code.SOURCE_FAILED, "unavailable"),
    (Starter([(1, TextDelta(text="a"))]), Code.JOB_LOST, "unknown"),
])
async def test_a_source_that_cannot_answer_fails_every_subscriber(
        autojump_clock: trio.testing.MockClock, sf: Singleflight, source: Starter, code: str,
        category: str) -> None:
    a, _ = await sf.open("k", source)
    b, _ = await sf.open("k", source)
    for sub in (a, b):
        last = events_of(await drain(sub))[-1]
        assert isinstance(last, Error) and (last.code, last.category) == (code, category)
    await assert_clean(sf, source)


async def test_a_raising_source_fails_every_subscriber(autojump_clock: trio.testing.MockClock,
                                                       sf: Singleflight,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    starter = Starter()
    broken = FakeSource([(1, TextDelta(text="a"))], fail=RuntimeError("bug"))

    async def start() -> EventSource:
        starter.sources.append(broken)
        return broken

    a, _ = await sf.open("k", start)
    b, _ = await sf.open("k", start)
    for sub in (a, b):
        events = events_of(await drain(sub))
        assert events[0] == TextDelta(text="a")
        assert isinstance(events[1], Error) and events[1].code == Code.INTERNAL_ERROR
    assert broken.abandoned_at == 1
    assert "singleflight source failed" in caplog.text
    await assert_clean(sf, starter)


async def test_a_failing_on_complete_is_logged_and_the_flight_still_ends(
        autojump_clock: trio.testing.MockClock, sf: Singleflight,
        caplog: pytest.LogCaptureFixture) -> None:
    starter = Starter(ANSWER)

    async def broken_put(events: list[Event]) -> None:
        raise OSError("disk full")

    a, _ = await sf.open("k", starter, on_complete=broken_put)
    assert events_of(await drain(a)) == ANSWER_EVENTS
    assert "on_complete failed" in caplog.text
    await assert_clean(sf, starter)


# --- completion hands over to the cache -------------------------------------------------------

async def test_the_flight_stays_until_on_complete_returns_then_is_removed(
        autojump_clock: trio.testing.MockClock, sf: Singleflight) -> None:
    starter, done = Starter(ANSWER, ANSWER), Completions(delay=1)
    a, _ = await sf.open("k", starter, on_complete=done)
    assert await drain(a) == [(1, Start(model="m")), (2, TextDelta(text="a")),
                              (3, TextDelta(text="b")), (4, Stop())]
    await trio.sleep(0.5)  # the "cache write" is still running
    during, attached = await sf.open("k", starter)
    assert attached
    assert await drain(during) == [(4.5, e) for e in ANSWER_EVENTS]  # all of it, from memory
    await trio.sleep(1)
    after, attached = await sf.open("k", starter)  # written by now: a miss would go to cache
    assert not attached and sf.statistics().started == 2
    after.abandon()
    assert done.calls == [(4, ANSWER_EVENTS)]
    await assert_clean(sf, starter)


# --- lifecycle --------------------------------------------------------------------------------

async def test_shutdown_fails_live_flights_and_refuses_new_ones(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    sf = Singleflight()
    with pytest.raises(RuntimeError):
        await sf.open("k", Starter(ANSWER))
    starter = Starter(ANSWER)
    results: list[list[tuple[float, Event]]] = []
    async with trio.open_nursery() as owner:
        await owner.start(sf.run)

        async def client() -> None:
            results.append(await drain((await sf.open("k", starter))[0]))

        nursery.start_soon(client)
        nursery.start_soon(client)
        await trio.sleep(2.5)
        owner.cancel_scope.cancel()
    await trio.testing.wait_all_tasks_blocked()
    for timed in results:
        assert timed[:2] == [(1, Start(model="m")), (2, TextDelta(text="a"))]
        last = timed[-1][1]
        assert isinstance(last, Error) and last.code == Code.CANCELLED and timed[-1][0] == 2.5
    assert len(results) == 2
    assert starter.sources[0].abandoned_at == 2.5
    with pytest.raises(RuntimeError):
        await sf.open("k", starter)
    await assert_clean(sf, starter)


def test_max_buffer_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Singleflight(max_buffer=0)


# --- with a real provider actor: only the source holds a slot ---------------------------------

REQ = user_says("hi", model="m")


@pytest.fixture
def actor() -> Iterator[tuple[ProviderActor, FakeSpawner]]:
    script: list[Step] = [Line(1, event_line(TextDelta(text="a"))),
                          Line(1, event_line(TextDelta(text="b"))), Exit(1, 0)]
    spawner = FakeSpawner(lambda spec: script)
    runner = CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="fake-cli", timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=30),
        proxy_env={}))
    yield ProviderActor("fake", runner, max_concurrent=1), spawner


async def test_subscribers_share_one_actor_slot(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, sf: Singleflight,
        actor: tuple[ProviderActor, FakeSpawner]) -> None:
    provider, spawner = actor
    await nursery.start(provider.run)
    results: list[list[Event]] = []

    async def client() -> None:
        source, _ = await sf.open("k", lambda: provider.submit(REQ, "m"))
        results.append(events_of(await drain(source)))

    async with trio.open_nursery() as clients:
        for _ in range(3):  # max_concurrent=1: separate jobs would be refused
            clients.start_soon(client)
        await trio.sleep(1.5)
        assert provider.statistics().in_flight == 1
    assert results == [[TextDelta(text="a"), TextDelta(text="b"), Stop()]] * 3
    assert len(spawner.runs) == 1 and provider.statistics().jobs_refused == 0
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.alive == 0 and provider.statistics().in_flight == 0


async def test_everyone_leaving_kills_the_job_and_returns_the_slot(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, sf: Singleflight,
        actor: tuple[ProviderActor, FakeSpawner]) -> None:
    provider, spawner = actor
    await nursery.start(provider.run)
    a, _ = await sf.open("k", lambda: provider.submit(REQ, "m"))
    b, _ = await sf.open("k", lambda: provider.submit(REQ, "m"))
    assert await a.receive() == TextDelta(text="a")
    a.abandon()
    await trio.sleep(0.5)
    b.abandon()
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 1.5
    assert spawner.alive == 0 and provider.statistics().in_flight == 0
    assert sf.statistics().in_flight == 0
