"""Soft triggers: skip a hop *before* spawning it when its provider's own budget is spent.

The counts are the proxy's own ledger (requests and tokens per provider, kept in memory on
an injectable wall clock): ``daily_request_count_threshold`` against today's requests (UTC),
``five_hour_window_percent_threshold`` against ``five_hour_window_budget_requests`` over the
last five hours, ``credit_pool_percent_threshold`` against ``credit_pool_budget_tokens`` for
the current calendar month (UTC).

Where the CLI itself reports a window's use (:class:`~olp.ir.QuotaReport`, e.g. claude's
``rate_limit_event`` for its five-hour window), that figure wins over the proxy's count: the
threshold is checked against the reported utilization, and the skip lasts until the window's
reported reset. Reports are kept (and persisted) for every provider, for the quota view.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from olp.failures import Code
from olp.ir import QuotaReport
from olp.store import split_slot

from ._health import Skip

FIVE_HOURS = 5 * 3600.0
#: The reported window that ``five_hour_window_percent_threshold`` reads.
FIVE_HOUR_WINDOW = "five_hour"
#: The reported window that ``credit_pool_percent_threshold`` reads, when a CLI reports one.
CREDIT_WINDOW = "credit_pool"


@dataclass(frozen=True, slots=True)
class SoftLimits:
    daily_request_count_threshold: int | None = None
    five_hour_window_percent_threshold: float | None = None
    credit_pool_percent_threshold: float | None = None
    five_hour_window_budget_requests: int | None = None
    credit_pool_budget_tokens: int | None = None


class Ledger:
    """The soft triggers' counts and the CLIs' quota reports, per slot: a provider's name for
    its default account, ``provider@account`` for another (:func:`olp.store.slot_name`)."""

    def __init__(self, limits: Mapping[str, SoftLimits] | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.limits = dict(limits or {})
        self._clock = clock
        self._requests: dict[str, deque[float]] = defaultdict(deque)
        self._tokens: dict[tuple[str, str], int] = defaultdict(int)  # (provider, month)
        # provider -> window -> (the CLI's last report, when it came)
        self._reported: dict[str, dict[str, tuple[QuotaReport, float]]] = {}
        self.version = 0  # bumped on every change, so callers know when to persist

    def report(self, provider: str, event: QuotaReport) -> None:
        """What ``provider``'s CLI said of one of its usage windows (the latest wins)."""
        self._reported.setdefault(provider, {})[event.window] = (event, self._clock())
        self.version += 1

    def reported(self, provider: str) -> dict[str, tuple[QuotaReport, float]]:
        """``provider``'s current reports by window, with when each came: a report whose
        window has reset since (or, without a reset time, older than five hours) is gone."""
        now = self._clock()
        return {window: (event, seen) for window, (event, seen)
                in self._reported.get(provider, {}).items()
                if (event.resets_at > now if event.resets_at is not None
                    else seen > now - FIVE_HOURS)}

    def record(self, provider: str, *, tokens: int = 0) -> None:
        """One request to ``provider`` (failed hops count too) and the tokens it used. Only
        providers with soft triggers are counted: the others' counts would only grow (and be
        persisted after every request) for nothing."""
        if self.limits_of(provider) is None:
            return
        now = self._clock()
        times = self._requests[provider]
        times.append(now)
        while times and times[0] < now - 86400.0:
            times.popleft()
        self._tokens[(provider, _month(now))] += tokens
        self.version += 1

    def add_tokens(self, provider: str, tokens: int) -> None:
        if self.limits_of(provider) is None:
            return
        self._tokens[(provider, _month(self._clock()))] += tokens
        self.version += 1

    def snapshot(self) -> dict[str, Any]:
        """The counts as plain data (the last day's request times, this month's tokens)."""
        month = _month(self._clock())
        return {"requests": {p: list(t) for p, t in self._requests.items() if t},
                "tokens": {p: n for (p, m), n in self._tokens.items() if m == month},
                "reported": {p: {w: {**msgspec.structs.asdict(e), "seen_at": seen}
                                 for w, (e, seen) in self.reported(p).items()}
                             for p in self._reported if self.reported(p)}}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Load a :meth:`snapshot` (times are absolute on this ledger's clock)."""
        now, month = self._clock(), _month(self._clock())
        for provider, times in snapshot.get("requests", {}).items():
            self._requests[provider] = deque(float(t) for t in times if t > now - 86400.0)
        for provider, tokens in snapshot.get("tokens", {}).items():
            self._tokens[(provider, month)] = int(tokens)
        for provider, windows in snapshot.get("reported", {}).items():
            for window, data in windows.items():
                try:
                    event = QuotaReport(window=window, status=str(data["status"]),
                                        utilization=data.get("utilization"),
                                        resets_at=data.get("resets_at"))
                    self._reported.setdefault(provider, {})[window] = (
                        event, float(data["seen_at"]))
                except (KeyError, TypeError, ValueError, msgspec.ValidationError):
                    continue  # a report OLP no longer reads: forget it
        self.version += 1

    def limits_of(self, slot: str) -> SoftLimits | None:
        """The soft triggers of a provider's account: its provider's, counted per account
        (``routing.soft_triggers.<provider>``; ``slot`` as :func:`olp.store.slot_name`)."""
        return self.limits.get(split_slot(slot)[0])

    def check(self, provider: str) -> Skip | None:
        limits = self.limits_of(provider)
        shown = split_slot(provider)[0]  # a message names no account (the record does)
        if limits is None:
            return None
        now = self._clock()
        times = self._requests.get(provider, deque())
        if limits.daily_request_count_threshold is not None:
            today = sum(1 for t in times if _day(t) == _day(now))
            if today >= limits.daily_request_count_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{shown}: {today} requests today reached "
                            f"daily_request_count_threshold", _seconds_to_next_day(now))
        reported = self.reported(provider)
        for threshold, window, what in (
                (limits.five_hour_window_percent_threshold, FIVE_HOUR_WINDOW, "five-hour window"),
                (limits.credit_pool_percent_threshold, CREDIT_WINDOW, "credit pool")):
            got = reported.get(window)
            if threshold is None or got is None or got[0].utilization is None:
                continue
            event = got[0]
            used = 100.0 * (event.utilization or 0.0)
            if used >= threshold:
                return Skip(Code.SOFT_TRIGGER, f"{shown}: {used:.0f}% of its {what} used "
                            "(as its CLI reported)",
                            None if event.resets_at is None else event.resets_at - now)
        if (limits.five_hour_window_percent_threshold is not None
                and not _has_figure(reported, FIVE_HOUR_WINDOW)
                and limits.five_hour_window_budget_requests):
            recent = [t for t in times if t > now - FIVE_HOURS]
            used = 100.0 * len(recent) / limits.five_hour_window_budget_requests
            if used >= limits.five_hour_window_percent_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{shown}: {used:.0f}% of the five-hour "
                            f"request budget used", recent[0] + FIVE_HOURS - now)
        if limits.credit_pool_percent_threshold is not None \
                and not _has_figure(reported, CREDIT_WINDOW) and limits.credit_pool_budget_tokens:
            used = 100.0 * self._tokens.get((provider, _month(now)), 0) \
                / limits.credit_pool_budget_tokens
            if used >= limits.credit_pool_percent_threshold:
                return Skip(Code.SOFT_TRIGGER, f"{shown}: {used:.0f}% of the monthly token "
                            f"budget used", None)
        return None


def _has_figure(reported: dict[str, tuple[QuotaReport, float]], window: str) -> bool:
    got = reported.get(window)
    return got is not None and got[0].utilization is not None


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _month(t: float) -> str:
    return time.strftime("%Y-%m", time.gmtime(t))


def _seconds_to_next_day(t: float) -> float:
    return 86400.0 - (t % 86400.0)
