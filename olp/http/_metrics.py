"""Prometheus metrics (``GET /metrics``, the text exposition format, via ``prometheus-client``).

Counters and histograms are moved when a request's :class:`~._trace.Trace` ends (the same
single point that feeds the ledger and the audit trail: no extra work on the path beyond a
few label lookups); gauges — in flight per provider, cooldowns, open circuits, spawn
refusals — are read from the actors and the engine when the page is scraped. Each app has
its own registry (never the process-global one), so tests and two apps in one process do not
share counts. Labels hold names only (providers, accounts, models, codes), never a key or a
prompt. Every metric labelled ``provider`` is labelled ``account`` too (issue #30: which login
of the provider; ``default`` without accounts, ``-`` where ``provider`` is ``-``). Account
names are validated (1-32 of ``a-z0-9-_``) and come from the config, so the label stays as
bounded as the provider's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from olp.actors import PoolStatistics
from olp.store import DEFAULT_ACCOUNT, split_slot

from ._trace import NOT_SPAWNED, Trace

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Seconds: a CLI spawn takes from a fraction of a second to minutes.
SPAWN_BUCKETS = (0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
#: The labels naming where a request went: the provider and which of its logins.
ACCOUNT_LABELS: Final = ("provider", "account")


@dataclass(frozen=True, slots=True)
class ActorGauge:
    """What the scrape reads of one provider actor."""

    in_flight: int
    max_concurrent: int
    jobs_refused: int
    warm: PoolStatistics | None = None


class _LiveState(Collector):
    """Gauges read at scrape time from the running actors and the engine's health book."""

    def __init__(self, actors: Callable[[], Mapping[str, ActorGauge]],
                 health: Callable[[], Mapping[str, Any]]) -> None:
        self._actors, self._health = actors, health

    def collect(self) -> Iterable[Metric]:
        actors = self._actors()
        in_flight = GaugeMetricFamily("olp_in_flight", "CLI jobs or upstream requests running "
                                      "now, per provider", labels=ACCOUNT_LABELS)
        limit = GaugeMetricFamily("olp_max_concurrent", "Each provider's concurrency limit",
                                  labels=ACCOUNT_LABELS)
        refused = CounterMetricFamily("olp_spawn_refusals", "Jobs a provider refused because "
                                      "every slot was busy (CONCURRENCY_LIMIT)",
                                      labels=ACCOUNT_LABELS)
        warm = GaugeMetricFamily("olp_warm_processes", "Warm pool units by state (warm: "
                                 "waiting for a request; booting; in_use)",
                                 labels=[*ACCOUNT_LABELS, "state"])
        warm_memory = GaugeMetricFamily("olp_warm_memory_bytes", "Resident memory of the "
                                        "warm processes waiting", labels=ACCOUNT_LABELS)
        warm_results = CounterMetricFamily("olp_warm_requests", "Warmable requests: hit (a "
                                           "warm process served it) or miss (spawned cold)",
                                           labels=[*ACCOUNT_LABELS, "result"])
        warm_failures = CounterMetricFamily("olp_warm_failures", "Warm processes that failed "
                                            "to start or were found dead", labels=ACCOUNT_LABELS)
        for name, a in actors.items():
            slot = list(split_slot(name))
            in_flight.add_metric(slot, a.in_flight)
            limit.add_metric(slot, a.max_concurrent)
            refused.add_metric(slot, a.jobs_refused)
            if (w := a.warm) is not None:
                for state, count in (("warm", w.warm), ("booting", w.booting),
                                     ("in_use", w.in_use)):
                    warm.add_metric([*slot, state], count)
                warm_memory.add_metric(slot, w.memory_bytes)
                warm_results.add_metric([*slot, "hit"], w.hits)
                warm_results.add_metric([*slot, "miss"], w.misses)
                warm_failures.add_metric(slot, w.failures)
        health = self._health()
        cooling = GaugeMetricFamily("olp_cooldown_active", "1 while a provider (or one of its "
                                    "models) rests until a usage window or rate limit resets",
                                    labels=ACCOUNT_LABELS)
        remaining = GaugeMetricFamily("olp_cooldown_remaining_seconds", "Seconds until the "
                                      "provider's soonest cooldown ends", labels=ACCOUNT_LABELS)
        circuit = GaugeMetricFamily("olp_circuit_open", "1 while a provider's circuit is open",
                                    labels=ACCOUNT_LABELS)
        cooldowns = health.get("cooldowns", [])
        circuits = {c["provider"] for c in health.get("circuits", [])}
        for name in actors:  # the health book is kept per slot, as the actors are
            slot = list(split_slot(name))
            mine = [c["remaining_s"] for c in cooldowns if c["provider"] == name]
            cooling.add_metric(slot, 1 if mine else 0)
            remaining.add_metric(slot, min(mine) if mine else 0)
            circuit.add_metric(slot, 1 if name in circuits else 0)
        yield from (in_flight, limit, refused, cooling, remaining, circuit, warm, warm_memory,
                    warm_results, warm_failures)


class Metrics:
    """The app's metrics. :meth:`observe` is called once per ended request; :meth:`render`
    is the ``/metrics`` body."""

    def __init__(self, *, actors: Callable[[], Mapping[str, ActorGauge]],
                 health: Callable[[], Mapping[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("olp_requests", "Model requests by provider, model, HTTP "
                                "status and dialect ('-' when no hop answered)",
                                [*ACCOUNT_LABELS, "model", "status", "dialect"], registry=r)
        self.failed_hops = Counter("olp_failed_hops", "Hops that were tried and failed, by "
                                   "provider and failure category", [*ACCOUNT_LABELS, "category"],
                                   registry=r)
        self.skipped_hops = Counter("olp_skipped_hops", "Hops skipped before spawning, by "
                                    "provider and code (COOLDOWN, KEY_POLICY, ...)",
                                    [*ACCOUNT_LABELS, "code"], registry=r)
        self.fallbacks = Counter("olp_fallbacks", "Requests answered by a later hop than the "
                                 "first", ACCOUNT_LABELS, registry=r)
        self.cache = Counter("olp_cache_results", "Where answers came from: hit, attached (a "
                             "flight in progress), miss, bypass", ["result"], registry=r)
        self.key_refusals = Counter("olp_key_limit_refusals", "Requests refused by their key's "
                                    "policy (a limit: 429; its allow-list: 403)", ["status"],
                                    registry=r)
        self.tokens = Counter("olp_tokens", "Tokens spent, by provider and kind",
                              [*ACCOUNT_LABELS, "kind"], registry=r)
        self.cached_tokens = Counter("olp_cached_input_tokens", "Of the prompt tokens spent, "
                                     "those read from the vendor's prompt cache",
                                     ACCOUNT_LABELS, registry=r)
        self.spawn_seconds = Histogram("olp_spawn_duration_seconds", "How long the hop that "
                                       "answered ran (cache hits excluded)", ACCOUNT_LABELS,
                                       buckets=SPAWN_BUCKETS, registry=r)
        self.ttft = Histogram("olp_time_to_first_token_seconds", "Streamed requests: from "
                              "arrival to the first content in hand", ACCOUNT_LABELS,
                              buckets=TTFT_BUCKETS, registry=r)
        r.register(_LiveState(actors, health))
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once per label set (the sets are few: names
        from the config, statuses, dialects)."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe(self, trace: Trace, status: int, outcome: str) -> None:
        """Count one ended request (only model requests move the counters)."""
        if not trace.model_request:
            return
        provider = trace.provider if trace.entry is not None and trace.provider else "-"
        account = (trace.account or DEFAULT_ACCOUNT) if provider != "-" else "-"
        model = trace.model if trace.entry is not None and trace.model else "-"
        self._child(self.requests, provider, account, model, str(status), trace.dialect).inc()
        for record in trace.records:
            if record.trigger_type == "soft":
                self._child(self.skipped_hops, record.provider, record.account,
                            record.code).inc()
            else:
                self._child(self.failed_hops, record.provider, record.account,
                            record.category).inc()
        if trace.refused:
            self._child(self.key_refusals, str(status)).inc()
        if trace.entry is None:
            return
        if trace.index > 0:
            self._child(self.fallbacks, provider, account).inc()
        if trace.cache is not None:
            self._child(self.cache, trace.cache).inc()
        tokens = trace.tokens
        if tokens is not None:
            self._child(self.tokens, provider, account, "prompt").inc(tokens[0])
            self._child(self.tokens, provider, account, "completion").inc(tokens[1])
            self._child(self.cached_tokens, provider, account).inc(trace.cached_tokens)
        if trace.cache not in NOT_SPAWNED:
            self._child(self.spawn_seconds, provider, account).observe(trace.seconds)
        if trace.first_content_s is not None:
            self._child(self.ttft, provider, account).observe(trace.first_content_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)
