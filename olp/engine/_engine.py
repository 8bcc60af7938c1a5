"""The engine: sends a request to each hop's actor in turn until one produces content.

The first-chunk rule lives here: a request moves to the next hop only while no content
(text or tool-call delta) has been handed back. Once :meth:`Engine.open` returns an
:class:`Answer`, the caller owns that hop; a later failure is the caller's to report.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from olp.actors import ProviderActor, Ticket
from olp.ir import Category, ChatRequest, Error, Event, Start, Stop, is_content, is_terminal

from ._routes import Hop, Route, Router

log = logging.getLogger("olp.engine")

#: Categories that move a request to the next hop by default (BRIEF §4): an unclassifiable
#: error advances; ``auth`` only where an entry opts in; ``client_error`` never.
DEFAULT_ON: frozenset[Category] = frozenset(
    {"usage_window", "billing", "rate_limited", "unavailable", "context_length", "unknown"})


@dataclass(frozen=True, slots=True)
class HopFailure:
    index: int
    hop: Hop
    error: Error


class ChainFailed(Exception):
    """Every hop tried failed before content. ``first`` decides the response status."""

    def __init__(self, route: Route, failures: list[HopFailure]) -> None:
        super().__init__(f"{route.requested}: " + "; ".join(
            f"{f.hop.name}: {f.error.code}" for f in failures))
        self.route = route
        self.failures = failures

    @property
    def first(self) -> HopFailure:
        return self.failures[0]


class Answer:
    """A hop's stream whose first content (or a content-less :class:`Stop`) is in hand.

    Iterate it for the events, ending with exactly one terminal event; :meth:`close` stops
    the job (sync, idempotent: call it in ``finally``).
    """

    def __init__(self, route: Route, index: int, ticket: Ticket, prelude: list[Event],
                 failures: list[HopFailure]) -> None:
        self.route = route
        self.index = index
        self.hop = route.hops[index]
        self.failures = failures
        self.model = self.hop.model
        self._ticket = ticket
        self._pending = deque(prelude)
        self._done = False
        for event in prelude:
            self._note(event)

    def _note(self, event: Event) -> None:
        if isinstance(event, Start):
            self.model = event.model

    def __aiter__(self) -> Answer:
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        if self._pending:
            event = self._pending.popleft()
        else:
            try:
                event = await self._ticket.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                event = _lost(self.hop)
            self._note(event)
        if is_terminal(event):
            self._done = True
            self.close()
        return event

    def close(self) -> None:
        self._ticket.abandon()


class Engine:
    """Routes requests to provider actors, hop by hop, under the caller's cancellation."""

    def __init__(self, router: Router, actors: Mapping[str, ProviderActor]) -> None:
        self.router = router
        self.actors = actors

    async def open(self, request: ChatRequest) -> Answer:
        """Blocks until some hop produced content (or finished with none) and returns it.

        Raises :class:`~olp.engine.UnknownModel` or :class:`ChainFailed`. If cancelled (the
        client went away), the hop in progress is abandoned: its process group is killed
        and its slot returned by its actor.
        """
        route = self.router.resolve(request.model)
        failures: list[HopFailure] = []
        for index, hop in enumerate(route.hops):
            ticket = await self.actors[hop.provider].submit(request, hop.model)
            try:
                outcome = await _until_first_content(ticket, hop)
            except BaseException:
                ticket.abandon()
                raise
            if isinstance(outcome, list):
                return Answer(route, index, ticket, outcome, failures)
            ticket.abandon()
            failures.append(HopFailure(index, hop, outcome))
            nxt = route.hops[index + 1].name if index + 1 < len(route.hops) else None
            advance = nxt is not None and outcome.category in DEFAULT_ON
            log.info("hop failed", extra={"event": "hop", "hop": index, "provider": hop.provider,
                                          "model": hop.model, "code": outcome.code,
                                          "category": outcome.category,
                                          "next_provider": nxt if advance else None})
            if not advance:
                break
        raise ChainFailed(route, failures)


async def _until_first_content(ticket: Ticket, hop: Hop) -> list[Event] | Error:
    """The events up to and including the first content (or a content-less Stop), or the
    hop's error."""
    prelude: list[Event] = []
    while True:
        try:
            event = await ticket.receive()
        except trio.EndOfChannel:
            return _lost(hop)
        if isinstance(event, Error):
            return event
        prelude.append(event)
        if is_content(event) or isinstance(event, Stop):
            return prelude


def _lost(hop: Hop) -> Error:
    return Error(code="JOB_LOST", category="unknown",
                 message=f"{hop.name} stopped without an answer")
