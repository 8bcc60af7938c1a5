"""One request's walk along its route: which hop comes next (skips and the ``on`` gate
recorded on the way), what each attempt did, and :class:`ChainFailed` when none answered.
Synchronous bookkeeping plus one await per hop (opening its event source); the engine
(:mod:`._engine`) drives it and applies the first-chunk rule.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import msgspec
import trio

from olp.actors import ProviderActor
from olp.failures import DEFAULT_CATEGORY, Code
from olp.ir import Category, ChatRequest, Error, EventSource
from olp.store import Binding, bound_accounts

from ._detail import HopRecord, TriggerType
from ._health import Skip
from ._routes import Hop, Route
from ._sources import CacheStatus, RequestContext

if TYPE_CHECKING:
    from ._engine import Engine

from ._capabilities import CAPABILITIES, for_hop, ignored_params

log = logging.getLogger("olp.engine")

#: Categories that move a request into the next hop when the hop sets no ``on``
#: (docs/adr/0005): an unclassifiable error advances; ``auth`` only where an entry opts in;
#: ``client_error`` never.
DEFAULT_ON: frozenset[Category] = frozenset(
    {"usage_window", "billing", "rate_limited", "unavailable", "context_length", "unknown"})
#: Categories that move a request to the key's next account of the same entry (issue #30,
#: docs/adr/0025): the failures that belong to one login. Any other failure would repeat
#: on every login of the CLI, so the walk goes straight to the next entry's gate.
ACCOUNT_ON: frozenset[Category] = frozenset(
    {"usage_window", "billing", "rate_limited", "auth"})


class ChainFailed(Exception):
    """No hop produced content. ``first`` (the first hop actually attempted, and its error)
    decides the response; when every hop was skipped, ``retry_after_s`` is the soonest reset
    and ``skip_codes`` says why."""

    def __init__(self, route: Route, records: list[HopRecord],
                 first: tuple[Hop, Error] | None) -> None:
        super().__init__(f"{route.requested}: " + "; ".join(
            f"{r.provider}:{r.code}" for r in records))
        self.route = route
        self.records = records
        self.first = first
        resets = [r.retry_after_s for r in records
                  if r.trigger_type == "soft" and r.retry_after_s is not None]
        self.retry_after_s = min(resets) if resets else None
        self.skip_codes = frozenset(r.code for r in records if r.trigger_type == "soft")

    @property
    def not_allowed(self) -> bool:
        """No hop was tried, and every one was outside the key's allow-list."""
        return self.first is None and self.skip_codes == {Code.KEY_POLICY}

    @property
    def tried(self) -> list[str]:
        """Providers actually attempted, in order, each once (``X-OLP-Fallback-Exhausted``;
        a provider's accounts are one provider there)."""
        return list(dict.fromkeys(r.provider for r in self.records if r.trigger_type != "soft"))


@dataclass(slots=True)
class Walk:
    """One request's progress along its route: records, the first error, the gate."""

    engine: Engine
    route: Route
    request: ChatRequest
    context: RequestContext
    actors: Mapping[str, ProviderActor]  # the engine's when the request came (a reload swaps)
    _chain_id: str = ""  # made when first logged (most requests log no hop)
    records: list[HopRecord] = field(default_factory=list)
    first: tuple[Hop, Error] | None = None
    last: tuple[Hop, Error] | None = None
    index: int = -1
    stopped: bool = False

    @property
    def chain_id(self) -> str:
        """The id that ties this request's ``hop`` log lines together."""
        if not self._chain_id:
            self._chain_id = secrets.token_hex(6)
        return self._chain_id

    async def next_attempt(self) -> Attempt | None:
        """The next hop to try, with its event source; ``None`` once the chain is done.
        Hops that are skipped or gated out are recorded on the way."""
        hops = self.route.hops
        while not self.stopped and self.index + 1 < len(hops):
            self.index += 1
            hop = hops[self.index]
            if self.last is not None and _same_entry(hop, self.last[0]):
                if self.last[1].category not in ACCOUNT_ON:
                    continue  # not this login's failure: the next entry's gate decides
            elif self.last is not None and not self._stop_unless_gate_admits(hop):
                return None
            allowed = self.context.providers
            skip = Skip(Code.KEY_POLICY, f"this API key may not use {hop.provider}", None) \
                if allowed is not None and hop.provider not in allowed else \
                Skip(Code.KEY_POLICY, f"no login of {hop.provider} serves this API key",
                     None) if not hop.accounts else \
                self._login_ended(hop) or \
                self.engine.skip_reason(hop, self.request, after=self.last)
            if skip is not None:
                self._record(hop, skip.code, _skip_category(skip), skip.message, "soft",
                             skip.retry_after_s, lacks=skip.lacks)
                continue
            source, status = await self.engine.sources.open(
                self.actors[hop.slot], hop, for_hop(self.request, hop), self.context)
            if status in ("miss", "bypass"):
                self.engine.ledger.record(hop.slot)
                self.engine.changed()
            return Attempt(self.index, hop, source, status, trio.current_time())
        return None

    def _login_ended(self, hop: Hop) -> Skip | None:
        """A skip when ``hop``'s login has ended (its refresh was refused for good: issue
        #41): it is left out until it is logged in again."""
        actor = self.actors.get(hop.slot)
        login = actor.login if actor is not None else None
        why = login.ended() if login is not None else None
        return None if why is None else Skip(Code.LOGIN_EXPIRED, f"login expired: {why}", None)

    def _stop_unless_gate_admits(self, hop: Hop) -> bool:
        """Whether ``hop``'s ``on`` gate admits the last failure; when it does not, the walk
        stops here and the last record says why (``non_trigger`` or ``auth_missing``)."""
        assert self.last is not None
        error = self.last[1]
        if error.category in (hop.on if hop.on is not None else DEFAULT_ON):
            return True
        self.stopped = True
        trigger: TriggerType = "auth_missing" if error.code == Code.AUTH_MISSING else "non_trigger"
        self.records[-1] = replace(self.records[-1], trigger_type=trigger)
        return False

    def viable_next(self, category: Category) -> bool:
        """Whether some later hop would be entered after a failure of ``category``: another
        account of this entry (for a login's own failure), or a later entry."""
        here = self.route.hops[self.index]
        return any(category in ACCOUNT_ON if _same_entry(h, here) else
                   category in (h.on if h.on is not None else DEFAULT_ON)
                   for h in self.route.hops[self.index + 1:])

    def failed(self, attempt: Attempt, error: Error) -> None:
        hop = attempt.hop
        if attempt.spawned:  # a joined flight's failure was the leader's to record
            self.engine.health.record_failure(hop.slot, hop.model, error)
            self.engine.changed()
        if self.first is None:
            self.first = (hop, error)
        self.last = (hop, error)
        trigger: TriggerType = "hard"
        if error.category == "client_error":
            trigger, self.stopped = "client_error", True
        self._record(hop, error.code, error.category, error.message, trigger,
                     error.retry_after_s, trio.current_time() - attempt.started_at)

    def succeeded(self, attempt: Attempt) -> tuple[str, ...]:
        """Notes the hop that answered; returns what it answers without
        (``X-OLP-Ignored-Params``). A hop that serves without a capability the request asked
        for (its entry lets that degrade) logs a ``hop`` line naming it (``degraded``)."""
        hop = attempt.hop
        if attempt.spawned:
            self.engine.health.record_success(hop.slot)
            self.engine.changed()
        ignored = ignored_params(hop, self.request)
        lacks = [p for p in ignored if p in CAPABILITIES] if ignored else None
        if lacks:
            log.info("hop", extra={
                "event": "hop", "chain_id": self.chain_id, "hop": self.index,
                "provider": hop.provider, "account": hop.account, "model": hop.model,
                "trigger_type": "degraded", "code": Code.CAPABILITY, "lacks": lacks,
                "ir_request_hash": request_hash(self.request), "next_provider": None})
        return ignored

    def interrupted(self, attempt: Attempt) -> None:
        if attempt.spawned:
            self.engine.health.abandon_probe(attempt.hop.slot)

    def _record(self, hop: Hop, code: str, category: str, message: str,
                trigger: TriggerType, retry_after_s: float | None,
                seconds: float | None = None, *, lacks: tuple[str, ...] = ()) -> None:
        self.records.append(HopRecord(self.index, hop.provider, hop.model, code, category,
                                      message, trigger, retry_after_s, seconds, hop.account,
                                      lacks))
        nxt = self.route.hops[self.index + 1].provider \
            if self.index + 1 < len(self.route.hops) and not self.stopped else None
        extra = {
            "event": "hop", "chain_id": self.chain_id, "hop": self.index,
            "provider": hop.provider, "account": hop.account, "model": hop.model,
            "trigger_type": trigger,
            "code": code, "category": category, "ir_request_hash": request_hash(self.request),
            "next_provider": nxt}
        if lacks:
            extra["lacks"] = list(lacks)
        log.info("hop", extra=extra)

    def exhausted(self) -> ChainFailed:
        return ChainFailed(self.route, self.records, self.first)


@dataclass(frozen=True, slots=True)
class Attempt:
    index: int
    hop: Hop
    source: EventSource
    cache: CacheStatus
    started_at: float  # trio.current_time() when the hop was entered

    @property
    def spawned(self) -> bool:
        return self.cache in ("miss", "bypass")



def _same_entry(hop: Hop, other: Hop) -> bool:
    """Two accounts' hops of one chain entry (a route holds each provider and model once)."""
    return hop.provider == other.provider and hop.model == other.model


def for_key(route: Route, binding: Binding) -> Route:
    """``route`` with each hop repeated for the accounts the key may use, in order: those
    its ``binding`` names for the hop's provider (that the entry may use), else the entry's
    accounts that serve every key. A hop with none is kept once, its ``accounts`` empty, for
    the walk to record as not allowed. Names no account the key may not use."""
    hops: list[Hop] = []
    for hop in route.hops:
        bound = bound_accounts(binding, hop.provider)
        usable = [a for a in bound if a in hop.accounts] if bound is not None else \
            [a for a in hop.accounts if a in hop.shared]
        hops += [hop if hop.account == a else replace(hop, account=a) for a in usable] \
            or [replace(hop, accounts=())]
    return Route(route.requested, tuple(hops))


async def conversation_first(route: Route, request: ChatRequest, context: RequestContext,
                             actors: Mapping[str, ProviderActor]) -> Route:
    """``route`` with, among an entry's accounts, the one keeping this conversation's CLI
    session moved first: a continued conversation stays on its account, where the vendor's
    prompt cache is warm (issue #30); when that account is cooling, the walk skips it as
    any other. Asks only where the key may use several accounts of one entry (the session
    store is read in worker threads)."""
    owner = context.namespace
    groups: list[list[Hop]] = []
    for hop in route.hops:
        if groups and _same_entry(groups[-1][0], hop):
            groups[-1].append(hop)
        else:
            groups.append([hop])
    if owner is None or all(len(group) == 1 for group in groups):
        return route
    for group in groups:
        for i, hop in enumerate(group if len(group) > 1 else ()):
            actor = actors.get(hop.slot)
            if actor is not None and await actor.holds_session(request, hop.model, owner):
                group.insert(0, group.pop(i))
                break
    return Route(route.requested, tuple(hop for group in groups for hop in group))


def request_hash(request: ChatRequest) -> str:
    """A short stable digest of the IR request, for correlating logs (never the prompt)."""
    return hashlib.sha256(msgspec.json.encode(request)).hexdigest()[:16]


def _skip_category(skip: Skip) -> Category:
    return DEFAULT_CATEGORY[skip.code]
