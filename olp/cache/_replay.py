"""A stored answer played back as an :class:`~olp.ir.EventSource`."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from olp.ir import Event, is_terminal


class ReplaySource:
    """An :class:`~olp.ir.EventSource` over a finished event list (a cache hit).

    Yields the events one by one, as they were produced, so the SSE writer emits the original
    chunk boundaries; then raises :class:`trio.EndOfChannel`. After :meth:`abandon`,
    ``receive`` raises :class:`trio.ClosedResourceError` (as a closed channel would).
    """

    def __init__(self, events: Sequence[Event]) -> None:
        if not events or not is_terminal(events[-1]) \
                or any(is_terminal(e) for e in events[:-1]):
            raise ValueError("a replayed answer must end with exactly one terminal event")
        self._events = tuple(events)
        self._next = 0
        self._abandoned = False

    async def receive(self) -> Event:
        await trio.lowlevel.checkpoint()
        if self._abandoned:
            raise trio.ClosedResourceError("the replay was abandoned")
        if self._next >= len(self._events):
            raise trio.EndOfChannel
        event = self._events[self._next]
        self._next += 1
        return event

    def abandon(self) -> None:
        self._abandoned = True
