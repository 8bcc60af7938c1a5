"""Where a hop's events come from: the cache, a flight already in progress, or a new job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import trio

from olp.actors import ProviderActor
from olp.cache import CacheService, ReplaySource, Singleflight, cache_key
from olp.ir import ChatRequest, Error, Event, EventSource, Stop
from olp.providers import kit
from olp.store import Binding

from ._routes import Hop

CacheMode = Literal["default", "no-cache", "no-store"]
CacheStatus = Literal["hit", "miss", "attached", "bypass"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Per-request facts the engine needs besides the request: whose cache namespace (the
    API key's id; ``None`` disables the cache), the client's ``Cache-Control``:
    ``no-cache`` (no read, no singleflight, still write) or ``no-store`` (neither), and the
    providers the key may reach (a hop of another is skipped as ``KEY_POLICY``), and the
    accounts it is bound to (:mod:`olp.store._bindings`)."""

    namespace: str | None = None
    cache_mode: CacheMode = "default"
    providers: frozenset[str] | None = None  # the key's allow-list; None = every provider
    accounts: Binding = ()  # the key's binding; () = unbound for every provider


NO_CONTEXT = RequestContext()  # no cache namespace: the cache is not used


@dataclass(slots=True)
class Sources:
    """The cache and the flights in progress (either ``None``: no cache), and the providers'
    cache policy: ``bypass(provider, request)`` is true when a hop must run the request
    rather than use the cache (by default each provider spec's ``cache_bypass``, see
    :func:`olp.providers.kit.cache_bypass`)."""

    cache: CacheService | None = None
    flights: Singleflight | None = None
    bypass: Callable[[str, ChatRequest], bool] = kit.cache_bypass

    async def open(self, actor: ProviderActor, hop: Hop, request: ChatRequest,
                   context: RequestContext) -> tuple[EventSource, CacheStatus]:
        """The hop's event source and what the cache did. Only a ``miss`` or ``bypass``
        starts a job (and takes a provider slot); a ``hit`` replays, ``attached`` joins."""
        start = partial(actor.submit, request, hop.model, owner=context.namespace)
        if (self.cache is None or self.flights is None or context.namespace is None
                or context.cache_mode == "no-store"
                or self.bypass(hop.provider, request)):
            return await start(), "bypass"
        key = cache_key(request, provider=hop.provider, model=hop.model)
        store = partial(self.cache.put, context.namespace, key, hop.provider)
        if context.cache_mode == "no-cache":
            return _Recording(await start(), store), "miss"
        flight_key = f"{context.namespace}:{key}"
        # A finished flight stays joinable until its answer is written: checking it first
        # means a request never falls between a flight that just ended and its cache entry.
        if not self.flights.joinable(flight_key):
            events = await self.cache.get(context.namespace, key)
            if events is not None:
                return ReplaySource(events), "hit"
        source, attached = await self.flights.open(flight_key, start, on_complete=store)
        return source, "attached" if attached else "miss"


class _Recording:
    """A job's source that stores the answer once it completed (for ``no-cache``)."""

    def __init__(self, source: EventSource,
                 store: Callable[[Sequence[Event]], Awaitable[bool]]) -> None:
        self._source = source
        self._store = store
        self._events: list[Event] = []

    async def receive(self) -> Event:
        event = await self._source.receive()
        self._events.append(event)
        if isinstance(event, Stop) and not any(isinstance(e, Error) for e in self._events):
            with trio.CancelScope(shield=True):  # receive() stays cancel-safe
                await self._store(self._events)
        return event

    def abandon(self) -> None:
        self._source.abandon()
