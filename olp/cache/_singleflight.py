"""Singleflight: identical concurrent requests share one provider job (every spawn counts).

The first :meth:`Singleflight.open` for a key starts the source (``actor.submit(...)``) in a
pump task that runs in the Singleflight's own nursery; every open for that key while the
flight is live attaches to it. Each subscriber reads the flight's shared history through its
own cursor: it gets every event produced so far at once, then the live tail as it arrives.

- **Slow clients are dropped alone.** A subscriber may fall at most ``max_buffer`` events
  behind the live tail (events produced before it attached don't count: they are the shared
  history, not its backlog). When a new non-terminal event would put it further behind, it
  is dropped: its next ``receive`` returns ``Error(code="CLIENT_TOO_SLOW",
  category="unknown")`` as its terminal event (unread events are skipped), then
  :class:`trio.EndOfChannel`. Nobody else waits for it, and no memory is held per
  subscriber beyond its cursor.
- **When every subscriber is gone** (abandoned or dropped) before the terminal event, the
  source is abandoned on the spot (its job cancelled, its slot returned), the flight is
  removed so the next request starts fresh, and nothing is cached.
- **A terminal event reaches every subscriber**: a source's :class:`~olp.ir.Error`, or one the
  pump makes up when the source cannot be started (``SOURCE_FAILED``), ends without a
  terminal event (``JOB_LOST``), raises (``INTERNAL_ERROR``), or the Singleflight shuts down
  (``CANCELLED``).
- **Complete answers** (ending in :class:`~olp.ir.Stop`, no error) are handed once to the
  first opener's ``on_complete(events)`` (where the engine writes the cache); the flight
  is removed only after it returns, so a request arriving meanwhile still attaches (and gets
  the whole answer from memory) instead of missing both the flight and the cache.

Only the pump talks to the source; subscribers never touch the actor or its limiter.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from olp.failures import Code, failure
from olp.ir import Error, Event, EventSource, Stop, is_terminal

log = logging.getLogger("olp.cache")


#: ``on_complete(events)``: awaited once per flight whose answer is complete. Bind what it
#: needs when the flight is opened (``functools.partial(store.put, namespace, key, provider)``),
#: not through variables the caller rebinds later (a loop's ``hop``): it may run after the
#: opener has moved on to another hop while attached clients finish this one.
OnComplete = Callable[[list[Event]], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class SingleflightStatistics:
    in_flight: int  # flights in the table
    subscribers: int  # live subscribers across them
    started: int  # sources started since start-up
    attached: int  # opens that joined an existing flight
    dropped: int  # subscribers dropped as too slow


class _Flight:
    def __init__(self, key: str, start: Callable[[], Awaitable[EventSource]],
                 on_complete: OnComplete | None) -> None:
        self.key = key
        self.start = start
        self.on_complete = on_complete
        self.history: list[Event] = []
        self.subscribers: set[_Subscription] = set()
        self.scope = trio.CancelScope()
        self.source: EventSource | None = None
        self.ended = False  # the history holds its terminal event
        self._changed = trio.Event()

    def publish(self, event: Event) -> None:
        """Append and wake every waiting subscriber (sync: safe in ``finally``)."""
        self.history.append(event)
        self.ended = is_terminal(event)
        self.wake()

    def wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        await self._changed.wait()


class _Subscription:
    """One client's view of a flight; an :class:`~olp.ir.EventSource`."""

    def __init__(self, owner: Singleflight, flight: _Flight) -> None:
        self._owner = owner
        self._flight = flight
        self._cursor = 0
        self._floor = len(flight.history)  # what was produced before it attached
        self._dropped: Error | None = None
        self._dropped_delivered = False
        self._abandoned = False

    @property
    def backlog(self) -> int:
        """Live events produced since it attached that it has not read yet."""
        return len(self._flight.history) - max(self._cursor, self._floor)

    async def receive(self) -> Event:
        await trio.lowlevel.checkpoint()
        while True:
            if self._abandoned:
                raise trio.ClosedResourceError("the subscription was abandoned")
            if self._dropped is not None:
                if self._dropped_delivered:
                    raise trio.EndOfChannel
                self._dropped_delivered = True
                return self._dropped
            history = self._flight.history
            if self._cursor < len(history):
                event = history[self._cursor]
                self._cursor += 1
                return event
            if self._flight.ended:
                raise trio.EndOfChannel
            await self._flight.wait_changed()

    def abandon(self) -> None:
        if not self._abandoned:
            self._abandoned = True
            self._owner._leave(self._flight, self)

    def _drop(self, error: Error) -> None:
        self._dropped = error


class Singleflight:
    """At most one source per key in flight. Start it with ``await nursery.start(sf.run)``;
    cancelling ``run`` cancels every flight (their subscribers get ``CANCELLED``)."""

    def __init__(self, *, max_buffer: int = 256) -> None:
        if max_buffer < 1:
            raise ValueError("max_buffer must be at least 1")
        self.max_buffer = max_buffer
        self._flights: dict[str, _Flight] = {}
        self._nursery: trio.Nursery | None = None
        self._started = 0
        self._attached = 0
        self._dropped = 0

    def statistics(self) -> SingleflightStatistics:
        return SingleflightStatistics(
            in_flight=len(self._flights),
            subscribers=sum(len(f.subscribers) for f in self._flights.values()),
            started=self._started, attached=self._attached, dropped=self._dropped)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Own the pump tasks until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    async def open(self, key: str, start: Callable[[], Awaitable[EventSource]], *,
                   on_complete: OnComplete | None = None) -> tuple[EventSource, bool]:
        """Subscribe to the flight for ``key``, starting one with ``start()`` if none is live.

        Returns the subscription and whether it attached to an existing flight. ``start`` and
        ``on_complete`` are used only by the opener that starts the flight (attached opens
        asked the same question, by construction of the key). ``key`` must already include
        everything that separates answers, the API-key namespace too. Events (and failures
        to start) arrive through the subscription; call its ``abandon()`` when done.
        """
        await trio.lowlevel.checkpoint()
        if self._nursery is None:
            raise RuntimeError("the Singleflight is not running: nursery.start(sf.run) first")
        flight = self._flights.get(key)
        attached = flight is not None
        if flight is None:
            flight = _Flight(key, start, on_complete)
            self._flights[key] = flight
            self._started += 1
            self._nursery.start_soon(self._pump, flight, name=f"singleflight:{key[:16]}")
        else:
            self._attached += 1
        subscription = _Subscription(self, flight)
        flight.subscribers.add(subscription)
        return subscription, attached

    def joinable(self, key: str) -> bool:
        """Whether a flight for ``key`` is live (or finished and still writing its answer):
        :meth:`open` would attach to it."""
        return key in self._flights

    def _leave(self, flight: _Flight, subscription: _Subscription) -> None:
        flight.subscribers.discard(subscription)
        flight.wake()  # a receive() parked in another task raises ClosedResourceError now
        if not flight.subscribers and not flight.ended:
            self._cancel(flight)

    def _cancel(self, flight: _Flight) -> None:
        """Nobody wants this answer any more: stop the source now and forget the flight."""
        self._forget(flight)
        flight.scope.cancel(reason="every subscriber left")
        if flight.source is not None:
            flight.source.abandon()

    def _forget(self, flight: _Flight) -> None:
        if self._flights.get(flight.key) is flight:
            del self._flights[flight.key]

    def _publish(self, flight: _Flight, event: Event) -> None:
        flight.publish(event)
        if flight.ended:
            return
        for subscription in [s for s in flight.subscribers if s.backlog > self.max_buffer]:
            subscription._drop(failure(
                Code.CLIENT_TOO_SLOW,
                f"the client fell more than {self.max_buffer} events behind"))
            flight.subscribers.discard(subscription)
            self._dropped += 1
            log.info("dropped a slow singleflight subscriber")
        if not flight.subscribers:
            self._cancel(flight)

    async def _pump(self, flight: _Flight) -> None:
        try:
            with flight.scope:
                await self._run_source(flight)
            history = flight.history
            if flight.on_complete is not None and history and isinstance(history[-1], Stop) \
                    and not any(isinstance(e, Error) for e in history):
                try:
                    await flight.on_complete(list(history))
                except Exception:
                    log.exception("singleflight on_complete failed")
        finally:
            if not flight.ended:  # cancelled from outside: nobody may wait forever
                flight.publish(failure(Code.CANCELLED, "the proxy is shutting down"))
            self._forget(flight)

    async def _run_source(self, flight: _Flight) -> None:
        try:
            source = await flight.start()
        except Exception as exc:
            log.warning("could not start a singleflight source", exc_info=True)
            self._publish(flight, failure(Code.SOURCE_FAILED,
                                          f"could not start the job: {type(exc).__name__}"))
            return
        flight.source = source
        try:
            # Stop at the terminal event, or once every subscriber left (_cancel abandoned
            # the source: it must not be read again).
            while not (flight.ended or flight.scope.cancel_called):
                try:
                    event = await source.receive()
                except trio.EndOfChannel:
                    event = failure(Code.JOB_LOST, "the job stopped without an answer")
                self._publish(flight, event)
        except Exception:
            if flight.scope.cancel_called:  # nobody is listening any more
                return
            log.exception("singleflight source failed")
            self._publish(flight, failure(Code.INTERNAL_ERROR, "the job's event stream failed"))
        finally:
            source.abandon()
