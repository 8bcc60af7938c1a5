"""Soft triggers: skip a hop *before* spawning it when its provider's own budget is spent.

The counts are the proxy's own ledger (requests and tokens per provider, kept in memory on
an injectable wall clock): ``daily_request_count_threshold`` against today's requests (UTC),
``five_hour_window_percent_threshold`` against ``five_hour_window_budget_requests`` over the
last five hours, ``credit_pool_percent_threshold`` against ``credit_pool_budget_tokens`` for
the current calendar month (UTC).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from olp.failures import Code

from ._health import Skip

FIVE_HOURS = 5 * 3600.0


@dataclass(frozen=True, slots=True)
class SoftLimits:
    daily_request_count_threshold: int | None = None
    five_hour_window_percent_threshold: float | None = None
    credit_pool_percent_threshold: float | None = None
    five_hour_window_budget_requests: int | None = None
    credit_pool_budget_tokens: int | None = None


class Ledger:
    def __init__(self, limits: Mapping[str, SoftLimits] | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.limits = dict(limits or {})
        self._clock = clock
        self._requests: dict[str, deque[float]] = defaultdict(deque)
        self._tokens: dict[tuple[str, str], int] = defaultdict(int)  # (provider, month)
        self.version = 0  # bumped on every change, so callers know when to persist

    def record(self, provider: str, *, tokens: int = 0) -> None:
        """One request to ``provider`` (failed hops count too) and the tokens it used. Only
        providers with soft triggers are counted: the others' counts would only grow (and be
        persisted after every request) for nothing."""
        if provider not in self.limits:
            return
        now = self._clock()
        times = self._requests[provider]
        times.append(now)
        while times and times[0] < now - 86400.0:
            times.popleft()
        self._tokens[(provider, _month(now))] += tokens
        self.version += 1

    def add_tokens(self, provider: str, tokens: int) -> None:
        if provider not in self.limits:
            return
        self._tokens[(provider, _month(self._clock()))] += tokens
        self.version += 1

    def snapshot(self) -> dict[str, Any]:
        """The counts as plain data (the last day's request times, this month's tokens)."""
        month = _month(self._clock())
        return {"requests": {p: list(t) for p, t in self._requests.items() if t},
                "tokens": {p: n for (p, m), n in self._tokens.items() if m == month}}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Load a :meth:`snapshot` (times are absolute on this ledger's clock)."""
        now, month = self._clock(), _month(self._clock())
        for provider, times in snapshot.get("requests", {}).items():
            self._requests[provider] = deque(float(t) for t in times if t > now - 86400.0)
        for provider, tokens in snapshot.get("tokens", {}).items():
            self._tokens[(provider, month)] = int(tokens)
        self.version += 1

    def check(self, provider: str) -> Skip | None:
        limits = self.limits.get(provider)
        if limits is None:
            return None
        now = self._clock()
        times = self._requests.get(provider, deque())
        if limits.daily_request_count_threshold is not None:
            today = sum(1 for t in times if _day(t) == _day(now))
            if today >= limits.daily_request_count_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{provider}: {today} requests today reached "
                            f"daily_request_count_threshold", _seconds_to_next_day(now))
        if (limits.five_hour_window_percent_threshold is not None
                and limits.five_hour_window_budget_requests):
            recent = [t for t in times if t > now - FIVE_HOURS]
            used = 100.0 * len(recent) / limits.five_hour_window_budget_requests
            if used >= limits.five_hour_window_percent_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{provider}: {used:.0f}% of the five-hour "
                            f"request budget used", recent[0] + FIVE_HOURS - now)
        if limits.credit_pool_percent_threshold is not None and limits.credit_pool_budget_tokens:
            used = 100.0 * self._tokens.get((provider, _month(now)), 0) \
                / limits.credit_pool_budget_tokens
            if used >= limits.credit_pool_percent_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{provider}: {used:.0f}% of the monthly token "
                            f"budget used", None)
        return None


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _month(t: float) -> str:
    return time.strftime("%Y-%m", time.gmtime(t))


def _seconds_to_next_day(t: float) -> float:
    return 86400.0 - (t % 86400.0)
