"""Prometheus metrics (``GET /metrics``, the text exposition format, via ``prometheus-client``).

Counters and histograms are moved when a request's :class:`~._trace.Trace` ends (the same
single point that feeds the ledger and the audit trail: no extra work on the path beyond a
few label lookups); gauges — in flight per provider, cooldowns, open circuits, spawn
refusals — are read from the actors and the engine when the page is scraped. Each app has
its own registry (never the process-global one), so tests and two apps in one process do not
share counts. Labels hold names only (providers, models, codes), never a key or a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from olp.actors import PoolStatistics

from ._trace import NOT_SPAWNED, Trace

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Seconds: a CLI spawn takes from a fraction of a second to minutes.
SPAWN_BUCKETS = (0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)


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
                                      "now, per provider", labels=["provider"])
        limit = GaugeMetricFamily("olp_max_concurrent", "Each provider's concurrency limit",
                                  labels=["provider"])
        refused = CounterMetricFamily("olp_spawn_refusals", "Jobs a provider refused because "
                                      "every slot was busy (CONCURRENCY_LIMIT)",
                                      labels=["provider"])
        warm = GaugeMetricFamily("olp_warm_processes", "Warm pool units by state (warm: "
                                 "waiting for a request; booting; in_use)",
                                 labels=["provider", "state"])
        warm_memory = GaugeMetricFamily("olp_warm_memory_bytes", "Resident memory of the "
                                        "warm processes waiting", labels=["provider"])
        warm_results = CounterMetricFamily("olp_warm_requests", "Warmable requests: hit (a "
                                           "warm process served it) or miss (spawned cold)",
                                           labels=["provider", "result"])
        warm_failures = CounterMetricFamily("olp_warm_failures", "Warm processes that failed "
                                            "to start or were found dead", labels=["provider"])
        for name, a in actors.items():
            in_flight.add_metric([name], a.in_flight)
            limit.add_metric([name], a.max_concurrent)
            refused.add_metric([name], a.jobs_refused)
            if (w := a.warm) is not None:
                for state, count in (("warm", w.warm), ("booting", w.booting),
                                     ("in_use", w.in_use)):
                    warm.add_metric([name, state], count)
                warm_memory.add_metric([name], w.memory_bytes)
                warm_results.add_metric([name, "hit"], w.hits)
                warm_results.add_metric([name, "miss"], w.misses)
                warm_failures.add_metric([name], w.failures)
        health = self._health()
        cooling = GaugeMetricFamily("olp_cooldown_active", "1 while a provider (or one of its "
                                    "models) rests until a usage window or rate limit resets",
                                    labels=["provider"])
        remaining = GaugeMetricFamily("olp_cooldown_remaining_seconds", "Seconds until the "
                                      "provider's soonest cooldown ends", labels=["provider"])
        circuit = GaugeMetricFamily("olp_circuit_open", "1 while a provider's circuit is open",
                                    labels=["provider"])
        cooldowns = health.get("cooldowns", [])
        circuits = {c["provider"] for c in health.get("circuits", [])}
        for name in actors:
            mine = [c["remaining_s"] for c in cooldowns if c["provider"] == name]
            cooling.add_metric([name], 1 if mine else 0)
            remaining.add_metric([name], min(mine) if mine else 0)
            circuit.add_metric([name], 1 if name in circuits else 0)
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
                                ["provider", "model", "status", "dialect"], registry=r)
        self.failed_hops = Counter("olp_failed_hops", "Hops that were tried and failed, by "
                                   "provider and failure category", ["provider", "category"],
                                   registry=r)
        self.skipped_hops = Counter("olp_skipped_hops", "Hops skipped before spawning, by "
                                    "provider and code (COOLDOWN, KEY_POLICY, ...)",
                                    ["provider", "code"], registry=r)
        self.fallbacks = Counter("olp_fallbacks", "Requests answered by a later hop than the "
                                 "first", ["provider"], registry=r)
        self.cache = Counter("olp_cache_results", "Where answers came from: hit, attached (a "
                             "flight in progress), miss, bypass", ["result"], registry=r)
        self.key_refusals = Counter("olp_key_limit_refusals", "Requests refused by their key's "
                                    "policy (a limit: 429; its allow-list: 403)", ["status"],
                                    registry=r)
        self.tokens = Counter("olp_tokens", "Tokens spent, by provider and kind",
                              ["provider", "kind"], registry=r)
        self.cached_tokens = Counter("olp_cached_input_tokens", "Of the prompt tokens spent, "
                                     "those read from the vendor's prompt cache",
                                     ["provider"], registry=r)
        self.spawn_seconds = Histogram("olp_spawn_duration_seconds", "How long the hop that "
                                       "answered ran (cache hits excluded)", ["provider"],
                                       buckets=SPAWN_BUCKETS, registry=r)
        self.ttft = Histogram("olp_time_to_first_token_seconds", "Streamed requests: from "
                              "arrival to the first content in hand", ["provider"],
                              buckets=TTFT_BUCKETS, registry=r)
        r.register(_LiveState(actors, health))

    def observe(self, trace: Trace, status: int, outcome: str) -> None:
        """Count one ended request (only model requests move the counters)."""
        if not trace.model_request:
            return
        provider = trace.provider if trace.entry is not None and trace.provider else "-"
        model = trace.model if trace.entry is not None and trace.model else "-"
        self.requests.labels(provider, model, str(status), trace.dialect).inc()
        for record in trace.records:
            if record.trigger_type == "soft":
                self.skipped_hops.labels(record.provider, record.code).inc()
            else:
                self.failed_hops.labels(record.provider, record.category).inc()
        if trace.refused:
            self.key_refusals.labels(str(status)).inc()
        if trace.entry is None:
            return
        if trace.index > 0:
            self.fallbacks.labels(provider).inc()
        if trace.cache is not None:
            self.cache.labels(trace.cache).inc()
        tokens = trace.tokens
        if tokens is not None:
            self.tokens.labels(provider, "prompt").inc(tokens[0])
            self.tokens.labels(provider, "completion").inc(tokens[1])
            self.cached_tokens.labels(provider).inc(trace.cached_tokens)
        if trace.cache not in NOT_SPAWNED:
            self.spawn_seconds.labels(provider).observe(trace.seconds)
        if trace.first_content_s is not None:
            self.ttft.labels(provider).observe(trace.first_content_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)
