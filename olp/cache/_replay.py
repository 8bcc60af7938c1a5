"""A stored answer played back as an :class:`~olp.ir.EventSource`."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from olp.ir import Event, is_terminal


class ReplaySource:
    """An :class:`~olp.ir.EventSource` over a finished event list (a cache hit).

    Yields the events one by one, as they were produced, so the SSE writer emits the original
    chunk boundaries; then raises :class:`trio.EndOfChannel`. After :meth:`abandon`,
    ``receive`` raises :class:`trio.ClosedResourceError` (as a closed channel would). The first
    ``receive`` is a checkpoint; the others return at once (the answer is in memory, and a
    schedule point per event cost a scheduler pass each: ADR 0028).
    """

    def __init__(self, events: Sequence[Event]) -> None:
        if not events or not is_terminal(events[-1]) \
                or any(is_terminal(e) for e in events[:-1]):
            raise ValueError("a replayed answer must end with exactly one terminal event")
        self._events = tuple(events)
        self._next = 0
        self._abandoned = False
        self._started = False

    async def receive(self) -> Event:
        if not self._started:
            await trio.lowlevel.checkpoint()
            self._started = True
        if self._abandoned:
            raise trio.ClosedResourceError("the replay was abandoned")
        if self._next >= len(self._events):
            raise trio.EndOfChannel
        event = self._events[self._next]
        self._next += 1
        return event

    def abandon(self) -> None:
        self._abandoned = True
