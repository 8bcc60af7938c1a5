"""The engine: walks a request's route hop by hop until one produces content.

The first-chunk rule lives here: a request moves to the next hop only while no content
(text or tool-call delta) has been handed back. Before spawning, a hop may be skipped
(cooling down, circuit open, soft budget spent, missing capability); after a failure, the
next hop is entered only if its ``on`` gate admits the failure's category. See
``docs/adr/0005-fallback-engine.md``.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import trio

from olp.actors import ProviderActor
from olp.failures import Code, failure
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    EventSource,
    QuotaReport,
    Retrying,
    Start,
    Stop,
    Usage,
    is_content,
    is_terminal,
)

from ._budget import Ledger
from ._capabilities import ignored_params, refused_for
from ._detail import HopRecord
from ._health import HealthBook, Skip
from ._routes import Hop, Router
from ._sources import NO_CONTEXT, CacheStatus, RequestContext, Sources
from ._storm import DEADLINE_CODES, DEFAULT_CLI_RETRY_BUDGET_S, Storm, abandoned, is_storm
from ._walk import Attempt, Walk, conversation_first, for_key

log = logging.getLogger("olp.engine")


class Answer:
    """A hop's stream whose first content (or a content-less :class:`Stop`) is in hand.

    Iterate it for the events, ending with exactly one terminal event; :meth:`close` stops
    the job (sync, idempotent: call it in ``finally``). ``usage`` is the last
    :class:`Usage` seen, ``started_at`` when the hop was entered (``trio.current_time()``).
    """

    def __init__(self, walk: Walk, attempt: Attempt, prelude: list[Event],
                 ignored: tuple[str, ...]) -> None:
        self.route = walk.route
        self.index = attempt.index
        self.hop = attempt.hop
        self.cache = attempt.cache
        self.records = walk.records
        self.started_at = attempt.started_at
        self.usage: Usage | None = None
        self.model = self.hop.model
        self.session: str | None = None  # what the hop did with a kept CLI session
        self.ignored_params = ignored
        self._ledger = walk.engine.ledger if attempt.spawned else None  # a hit used nothing
        self._source = attempt.source
        self._engine = walk.engine
        self._pending = deque(prelude)
        self._done = False
        for event in prelude:  # its quota reports were noted as they came
            if not isinstance(event, QuotaReport):
                self._note(event)

    def _note(self, event: Event) -> None:
        if isinstance(event, QuotaReport):
            self._engine.note_quota(self.hop.slot, event)
        elif isinstance(event, Start):
            self.model = event.model
            self.session = event.session or self.session
        elif isinstance(event, Usage):
            self.usage = event
            if self._ledger is not None:
                self._ledger.add_tokens(self.hop.slot, event.total_tokens)

    def __aiter__(self) -> Answer:
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        if self._pending:
            event = self._pending.popleft()
        else:
            try:
                event = await self._source.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                event = _lost(self.hop)
            self._note(event)
        if is_terminal(event):
            self._done = True
            self.close()
        return event

    def close(self) -> None:
        self._source.abandon()


@dataclass(slots=True)
class Completion:
    """A whole non-streamed answer: its events (ending in :class:`Stop`) and where it came
    from. ``truncated``: every hop failed and this is the partial text of the first hop that
    produced any (``finish_reason`` ``length``). ``seconds``: how long its hop ran."""

    hop: Hop
    index: int
    events: list[Event]
    records: list[HopRecord]
    ignored_params: tuple[str, ...]
    cache: CacheStatus
    truncated: bool = False
    seconds: float = 0.0

    @property
    def usage(self) -> Usage | None:
        """The last usage report (the one that counts)."""
        return next((e for e in reversed(self.events) if isinstance(e, Usage)), None)

    @property
    def model(self) -> str:
        starts = [e.model for e in self.events if isinstance(e, Start)]
        return starts[-1] if starts else self.hop.model

    @property
    def session(self) -> str | None:
        """What the hop did with a kept CLI session (``X-OLP-Session``), if it keeps them."""
        states = [e.session for e in self.events if isinstance(e, Start) and e.session]
        return states[-1] if states else None


class Engine:
    """Routes requests to provider actors, hop by hop, under the caller's cancellation.

    A config reload swaps ``router``, ``actors`` and the retry budgets (:meth:`reconfigure`);
    a request keeps the route and actors it started with.
    """

    def __init__(self, router: Router, actors: Mapping[str, ProviderActor], *,
                 health: HealthBook | None = None, ledger: Ledger | None = None,
                 sources: Sources | None = None,
                 on_change: Callable[[], None] | None = None,
                 cli_retry_budget_s: Mapping[str, float] | None = None) -> None:
        self.router = router
        self.actors = actors
        self.sources = sources or Sources()
        self.health = health or HealthBook(clock=time.time)
        self.ledger = ledger or Ledger()
        self._on_change = on_change
        self._notified: tuple[int, int] | None = None  # the versions last told on_change
        self._retry_budgets = dict(cli_retry_budget_s or {})

    def reconfigure(self, router: Router, actors: Mapping[str, ProviderActor], *,
                    cli_retry_budget_s: Mapping[str, float]) -> None:
        """Serve new requests with ``router`` and ``actors`` (sync: no request sees half)."""
        self.router, self.actors = router, actors
        self._retry_budgets = dict(cli_retry_budget_s)

    def retry_budget(self, provider: str) -> float:
        """How long ``provider``'s CLI may retry on its own when no other hop could take
        over (``providers.<name>.cli_retry_budget_s``)."""
        return self._retry_budgets.get(provider, DEFAULT_CLI_RETRY_BUDGET_S)

    def changed(self) -> None:
        """Tell ``on_change`` (what persists the health book and the ledger) that one of
        them may have changed; only when one did (a spawn or a success usually changes
        nothing kept: no wake-up per request)."""
        if self._on_change is None:
            return
        versions = (self.health.version, self.ledger.version)
        if versions != self._notified:
            self._notified = versions
            self._on_change()

    def note_quota(self, provider: str, event: QuotaReport) -> None:
        """A CLI's report on one of its usage windows: kept by the ledger (soft triggers and
        the quota view read it)."""
        self.ledger.report(provider, event)
        self.changed()

    def skip_reason(self, hop: Hop, request: ChatRequest, *,
                    after: tuple[Hop, Error] | None) -> Skip | None:
        """Why ``hop`` must not be spawned for ``request`` now, or ``None``."""
        if after is not None and after[1].category == "context_length":
            before = after[0].context_window
            if before is not None and hop.context_window is not None \
                    and hop.context_window <= before:
                return Skip(Code.CONTEXT_WINDOW, f"{hop.name} has no larger context window "
                            f"({hop.context_window} <= {before})", None)
        refused = refused_for(hop, request)
        if refused:
            return Skip(Code.CAPABILITY, f"{hop.name} cannot take {', '.join(refused)}", None,
                        refused)
        return self.ledger.check(hop.slot) or self.health.check(hop.slot, hop.model)

    async def _walk(self, request: ChatRequest, context: RequestContext) -> Walk:
        """The request's walk: its route, each hop repeated for the accounts its key may use
        (the one keeping this conversation first)."""
        actors = self.actors
        route = for_key(self.router.resolve(request.model), context.accounts)
        return Walk(self, await conversation_first(route, request, context, actors), request,
                    context, actors)

    async def open(self, request: ChatRequest,
                   context: RequestContext = NO_CONTEXT) -> Answer:
        """Blocks until some hop produced content (or finished with none) and returns it.

        Raises :class:`~olp.engine.UnknownModel` or :class:`ChainFailed`. If cancelled (the
        client went away), the hop in progress is abandoned: its process group is killed
        and its slot returned by its actor.
        """
        walk = await self._walk(request, context)
        while (attempt := await walk.next_attempt()) is not None:
            try:
                outcome = await _until_first_content(attempt.source, attempt.hop, walk)
            except BaseException:
                attempt.source.abandon()
                walk.interrupted(attempt)
                raise
            if isinstance(outcome, list):
                return Answer(walk, attempt, outcome, walk.succeeded(attempt))
            attempt.source.abandon()
            walk.failed(attempt, outcome)
        raise walk.exhausted()

    async def complete(self, request: ChatRequest,
                       context: RequestContext = NO_CONTEXT) -> Completion:
        """The whole answer of the first hop that completes one. A hop that fails after
        partial output is passed over like any other (the client has received nothing);
        if every hop fails, the first partial answer is returned ``truncated``.

        Raises like :meth:`open`; cancellation abandons the hop in progress.
        """
        walk = await self._walk(request, context)
        partial: Completion | None = None
        while (attempt := await walk.next_attempt()) is not None:
            hop, source = attempt.hop, attempt.source
            try:
                first = await _until_first_content(source, hop, walk)
                outcome = await _rest(source, hop, first, self) if isinstance(first, list) \
                    else ([], first)
            except BaseException:
                source.abandon()
                walk.interrupted(attempt)
                raise
            source.abandon()
            if isinstance(outcome, list):
                ignored = walk.succeeded(attempt)
                for event in outcome:
                    if isinstance(event, Usage) and attempt.spawned:
                        self.ledger.add_tokens(hop.slot, event.total_tokens)
                return Completion(hop, attempt.index, outcome, walk.records, ignored,
                                  attempt.cache,
                                  seconds=trio.current_time() - attempt.started_at)
            events, error = outcome
            walk.failed(attempt, error)
            if partial is None and any(is_content(e) for e in events):
                partial = Completion(hop, attempt.index, [*events, Stop(finish_reason="length")],
                                     walk.records, ignored_params(hop, request),
                                     attempt.cache, truncated=True,
                                     seconds=trio.current_time() - attempt.started_at)
        if partial is not None:
            return partial
        raise walk.exhausted()


async def _until_first_content(source: EventSource, hop: Hop, walk: Walk
                               ) -> list[Event] | Error:
    """The events up to and including the first content (or a content-less Stop), or the
    hop's error. Blocks on the source; cancellation propagates (the caller abandons it).

    A CLI retrying on its own (a storm, see :mod:`._storm`) for a cause another hop could
    avoid is abandoned at once (a 429 otherwise takes claude minutes of retries); with no
    such hop it is stopped after the provider's retry budget, or at the hop's deadline, with
    the storm's own category, never a timeout that hides it.
    """
    prelude: list[Event] = []
    storm: Storm | None = None
    engine = walk.engine
    while True:
        until = math.inf if storm is None else \
            storm.started_at + engine.retry_budget(hop.provider)
        event: Event | None = None
        try:
            if storm is None:  # no deadline of its own: no cancel scope to set up
                event = await source.receive()
            else:
                with trio.move_on_at(until):  # every source's receive is cancel-safe
                    event = await source.receive()
        except trio.EndOfChannel:
            return _lost(hop)
        if event is None or (storm is not None and isinstance(event, Error)
                             and event.code in DEADLINE_CODES):
            assert storm is not None
            return storm.error(hop, now=trio.current_time(), deadline=event is not None,
                               resting_s=engine.health.resting(hop.slot, hop.model))
        if isinstance(event, QuotaReport):
            engine.note_quota(hop.slot, event)
        if isinstance(event, Error):
            return event
        if isinstance(event, Retrying) and is_storm(event):
            if walk.viable_next(event.category):
                return abandoned(hop, event)
            storm = Storm(trio.current_time(), event) if storm is None else storm.then(event)
        prelude.append(event)
        if is_content(event) or isinstance(event, Stop):
            return prelude


async def _rest(source: EventSource, hop: Hop, events: list[Event], engine: Engine
                ) -> list[Event] | tuple[list[Event], Error]:
    """Collect the rest of a hop's answer: all events, or those before its error."""
    while not is_terminal(events[-1]):
        try:
            event = await source.receive()
        except trio.EndOfChannel:
            event = _lost(hop)
        if isinstance(event, QuotaReport):
            engine.note_quota(hop.slot, event)
        if isinstance(event, Error):
            return events, event
        events.append(event)
    return events


def _lost(hop: Hop) -> Error:
    return failure(Code.JOB_LOST, f"{hop.name} stopped without an answer")

