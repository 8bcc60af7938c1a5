"""One request's account: what the audit trail and the usage ledger keep of it.

A :class:`Trace` is made when a request arrives, filled in as it is answered (the key, the
model asked for, the hop that served it or the hops that failed), and ended once: by the
app's ``after_request`` for a complete response, or by the stream's end for SSE. Ending it
settles the key's limiter reservation and queues the rows (:class:`olp.accounting.Recorder`;
no I/O on the request path; it bounds the row's text and the 401/404 rows per source).
Nothing of the prompt or the answer is kept, only its counts.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import trio

from olp.accounting import AuditRow, Recorder, RequestLimiter, Reservation, UsageDelta
from olp.engine import ChainFailed, HopRecord
from olp.ir import Usage
from olp.store import DEFAULT_ACCOUNT

#: Outcomes of a request that got its answer (``served`` in the ledger).
SERVED = frozenset({"ok", "truncated"})
#: Cache results that spent no spawn of the request's own (a hit counts, spends no tokens).
NOT_SPAWNED = frozenset({"hit", "attached"})


def new_request_id() -> str:
    """``req_`` and 24 hex digits (``X-Request-Id``)."""
    return "req_" + secrets.token_hex(12)


@dataclass(slots=True)
class Trace:
    """The account of one request (see the module docstring)."""

    endpoint: str
    request_id: str = field(default_factory=new_request_id)
    at: float = field(default_factory=time.time)
    t0: float = field(default_factory=trio.current_time)
    key: str | None = None
    key_name: str | None = None
    model_request: bool = False  # a chat view: counted in the ledger and the key's limits
    requested_model: str | None = None
    stream: bool = False
    provider: str | None = None
    account: str | None = None  # the provider's login that served it, or was tried first
    model: str | None = None
    entry: str | None = None
    index: int = 0
    cache: str | None = None
    records: Sequence[HopRecord] = ()
    usage: Usage | None = None
    seconds: float = 0.0  # how long the serving hop ran
    refused: bool = False  # by the key's policy (a limit or its allow-list)
    outcome: str | None = None
    reservation: Reservation | None = None
    rate_headers: Mapping[str, str] = field(default_factory=dict)
    dialect: str = "-"  # openai, anthropic, responses
    first_content_s: float | None = None  # a stream: arrival to its first content in hand
    deferred: bool = False  # a stream: its end ends the trace
    action: str | None = None  # a management action and its target (describe_action)
    client: str | None = None  # the client's address: a keyless row's throttle source
    ended: bool = False

    def served(self, *, provider: str, account: str, model: str, entry: str, index: int,
               cache: str, records: Sequence[HopRecord], usage: Usage | None,
               seconds: float) -> None:
        self.provider, self.account, self.model, self.entry = provider, account, model, entry
        self.index, self.cache, self.records = index, cache, records
        self.usage, self.seconds = usage, seconds

    def failed(self, exc: ChainFailed) -> None:
        self.records = exc.records
        self.refused = self.refused or exc.not_allowed
        tried = [r for r in exc.records if r.trigger_type != "soft"]
        if tried:
            first = tried[0]
            self.provider, self.account = first.provider, first.account
            self.model = first.model

    @property
    def spawned(self) -> bool:
        return self.cache is not None and self.cache not in NOT_SPAWNED

    @property
    def tokens(self) -> tuple[int, int] | None:
        """(prompt, completion) tokens the request spent (a cache hit spent none)."""
        if self.usage is None or not self.spawned:
            return None
        return self.usage.prompt_tokens, self.usage.completion_tokens

    @property
    def cached_tokens(self) -> int:
        """Of the prompt tokens it spent, those the vendor read from its prompt cache."""
        return self.usage.cached_tokens if self.usage is not None and self.spawned else 0

    def audit_row(self, status: int, outcome: str) -> AuditRow:
        tried = sum(1 for r in self.records if r.trigger_type != "soft")
        tokens = self.tokens
        return AuditRow(
            at=self.at, request_id=self.request_id, key=self.key, key_name=self.key_name,
            endpoint=self.endpoint, requested_model=self.requested_model,
            provider=self.provider, model=self.model, entry=self.entry,
            hops=tried + (1 if self.entry is not None else 0), status=status,
            cache=self.cache, stream=self.stream,
            latency_ms=round((trio.current_time() - self.t0) * 1000),
            prompt_tokens=None if tokens is None else tokens[0],
            completion_tokens=None if tokens is None else tokens[1], outcome=outcome,
            action=self.action, account=self.account)

    def usage_deltas(self, outcome: str) -> list[UsageDelta]:
        """The ledger additions: the failed hops (each on its provider, account and model),
        and the request itself on the row of the hop that served it, else the first hop
        tried, else ``-``/``-``/``-``."""
        if not self.model_request:
            return []
        deltas = [UsageDelta(r.provider, r.model, account=r.account, failed_hops=1,
                             spawn_seconds=r.seconds or 0.0)
                  for r in self.records if r.trigger_type != "soft"]
        tokens = self.tokens or (0, 0)
        deltas.append(UsageDelta(
            self.provider or "-", self.model or "-", account=self.account or DEFAULT_ACCOUNT,
            requests=1,
            served=int(self.entry is not None and outcome in SERVED),
            refused=int(self.refused), fallbacks=int(self.entry is not None and self.index > 0),
            cache_hits=int(self.cache in NOT_SPAWNED), prompt_tokens=tokens[0],
            completion_tokens=tokens[1], cached_tokens=self.cached_tokens,
            spawn_seconds=self.seconds if self.entry is not None and self.spawned else 0.0))
        return deltas

    def end(self, status: int, outcome: str, *, limiter: RequestLimiter | None,
            recorder: Recorder | None, metrics: Observer | None = None) -> None:
        """Settle the reservation (or release it, if the key's policy refused the request),
        queue the rows and count it in the metrics. Only the first call counts; never
        blocks."""
        if self.ended:
            return
        self.ended = True
        if limiter is not None and self.reservation is not None:
            if self.refused:
                limiter.release(self.reservation)
            else:
                limiter.settle(self.reservation, sum(self.tokens or (0, 0)))
        if recorder is not None:
            recorder.record(self.audit_row(status, outcome), self.usage_deltas(outcome),
                            client=self.client)
        if metrics is not None:
            metrics.observe(self, status, outcome)


class Observer(Protocol):
    """What :meth:`Trace.end` tells besides the ledger (:class:`~._metrics.Metrics`)."""

    def observe(self, trace: Trace, status: int, outcome: str) -> None: ...
