"""The one interface every stream of IR events offers its consumer."""

from __future__ import annotations

from typing import Protocol

from ._events import Event


class EventSource(Protocol):
    """A job's events as the engine consumes them: a live provider job (``Ticket``), a
    singleflight subscription, or a cached answer being replayed.

    ``receive`` returns events up to and including exactly one terminal event, then raises
    :class:`trio.EndOfChannel`. ``abandon`` is synchronous and idempotent: the consumer is
    done (normally or not); a live job behind it is cancelled if no one else needs it.
    """

    async def receive(self) -> Event: ...

    def abandon(self) -> None: ...
