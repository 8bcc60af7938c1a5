"""Per-key request and token limits, reserved before the first hop and settled at the end.

Everything here is synchronous and runs on the Trio thread, so a check and its reservation
happen with no checkpoint between them: a burst of concurrent requests from one key can never
pass a limit together (20 at once against ``per_minute=5`` serve exactly 5). The counts live
in memory, seeded at start-up from the usage ledger (:func:`olp.accounting.load_counts`), so
the day, week and month counts survive a restart; the sliding minute starts empty.

What counts: every request of a key that passes its limits, whatever its outcome; a request
refused for a limit or its allow-list does not (its reservation is released). Tokens (prompt
+ completion) are added when the answer ends; a cache hit spends none.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from olp.store import Limits

from ._windows import WINDOWS, Window, day_of, duration_text, window_end, window_id

MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class Seed:
    """A key's counts when the server started: requests this day, week and month, and
    tokens today (from the usage ledger)."""

    day: int = 0
    week: int = 0
    month: int = 0
    tokens_today: int = 0


@dataclass(slots=True)
class _Counts:
    minute: deque[float] = field(default_factory=deque)  # monotonic times, oldest first
    windows: dict[Window, tuple[str, int]] = field(default_factory=dict)  # window -> (id, n)
    tokens: tuple[str, int] = ("", 0)  # (UTC day, tokens)


@dataclass(frozen=True, slots=True)
class Reservation:
    """One admitted request's slot: give it back with :meth:`RequestLimiter.release` or
    settle it with :meth:`RequestLimiter.settle` (each at most once)."""

    key: str
    at_monotonic: float
    windows: tuple[tuple[Window, str], ...]
    headers: Mapping[str, str]  # x-ratelimit-* for the response


class LimitExceeded(Exception):
    """A key is over one of its limits: answer 429 with ``headers`` (``Retry-After`` and
    OpenAI's ``x-ratelimit-*``)."""

    def __init__(self, message: str, retry_after_s: float, headers: Mapping[str, str]) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s
        self.headers = headers


class RequestLimiter:
    """The limits of every key, in memory. ``wall`` is the wall clock (calendar windows),
    ``monotonic`` the clock of the sliding minute (``trio.current_time`` in the server, so
    ``MockClock`` tests drive it)."""

    def __init__(self, seeds: Mapping[str, Seed] | None = None, *,
                 wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._counts: dict[str, _Counts] = {}
        now = wall()
        for key, seed in (seeds or {}).items():
            counts = self._counts[key] = _Counts()
            for window in WINDOWS:
                counts.windows[window] = (window_id(window, now), getattr(seed, window))
            counts.tokens = (day_of(now), seed.tokens_today)

    def reserve(self, key: str, limits: Limits) -> Reservation:
        """Admit one request of ``key`` under ``limits`` and count it, or raise
        :class:`LimitExceeded` (nothing counted). Never blocks."""
        now, mono = self._wall(), self._monotonic()
        counts = self._counts.setdefault(key, _Counts())
        _expire(counts, mono)
        refusals: list[tuple[str, float]] = []
        if limits.per_minute is not None and len(counts.minute) >= limits.per_minute:
            refusals.append((f"{limits.per_minute} requests per minute",
                             counts.minute[0] + MINUTE - mono))
        for window in WINDOWS:
            limit = getattr(limits, f"per_{window}")
            if limit is not None and self._count(counts, window, now) >= limit:
                refusals.append((f"{limit} requests per {window}", window_end(window, now) - now))
        if limits.tokens_per_day is not None and \
                self._tokens(counts, now) >= limits.tokens_per_day:
            refusals.append((f"{limits.tokens_per_day} tokens per day",
                             window_end("day", now) - now))
        if refusals:
            wait = max(0.001, max(s for _, s in refusals))
            headers = {**self._headers(counts, limits, now, mono),
                       "Retry-After": str(max(1, math.ceil(wait)))}
            what = " and ".join(name for name, _ in refusals)
            raise LimitExceeded(f"This API key is over its limit of {what}; retry in "
                                f"{duration_text(wait)}.", wait, headers)
        counts.minute.append(mono)
        ids = []
        for window in WINDOWS:
            current = window_id(window, now)
            counts.windows[window] = (current, self._count(counts, window, now) + 1)
            ids.append((window, current))
        return Reservation(key, mono, tuple(ids), self._headers(counts, limits, now, mono))

    def release(self, reservation: Reservation) -> None:
        """The request was refused after all (its allow-list): it no longer counts."""
        counts = self._counts.get(reservation.key)
        if counts is None:
            return
        try:
            counts.minute.remove(reservation.at_monotonic)
        except ValueError:
            pass  # already expired
        for window, reserved in reservation.windows:
            held = counts.windows.get(window)
            if held is not None and held[0] == reserved and held[1] > 0:
                counts.windows[window] = (reserved, held[1] - 1)

    def settle(self, reservation: Reservation, tokens: int) -> None:
        """The request ended having spent ``tokens`` (0 for a cache hit or a failure)."""
        if tokens <= 0:
            return
        counts = self._counts.setdefault(reservation.key, _Counts())
        now = self._wall()
        counts.tokens = (day_of(now), self._tokens(counts, now) + tokens)

    def usage(self, key: str) -> Seed:
        """``key``'s current counts (requests this day, week and month; tokens today)."""
        counts = self._counts.get(key, _Counts())
        now = self._wall()
        return Seed(day=self._count(counts, "day", now), week=self._count(counts, "week", now),
                    month=self._count(counts, "month", now),
                    tokens_today=self._tokens(counts, now))

    @staticmethod
    def _count(counts: _Counts, window: Window, now: float) -> int:
        held = counts.windows.get(window)
        return held[1] if held is not None and held[0] == window_id(window, now) else 0

    @staticmethod
    def _tokens(counts: _Counts, now: float) -> int:
        return counts.tokens[1] if counts.tokens[0] == day_of(now) else 0

    def _headers(self, counts: _Counts, limits: Limits, now: float,
                 mono: float) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*``: for requests, the limit with the fewest requests left
        (the shortest window on a tie); for tokens, ``tokens_per_day``."""
        options: list[tuple[int, float, int]] = []  # (remaining, reset_s, limit)
        if limits.per_minute is not None:
            reset = counts.minute[0] + MINUTE - mono if counts.minute else MINUTE
            options.append((limits.per_minute - len(counts.minute), reset, limits.per_minute))
        for window in WINDOWS:
            limit = getattr(limits, f"per_{window}")
            if limit is not None:
                options.append((limit - self._count(counts, window, now),
                                window_end(window, now) - now, limit))
        headers: dict[str, str] = {}
        if options:
            remaining, reset, limit = min(options, key=lambda o: (o[0], o[1]))
            headers.update({"x-ratelimit-limit-requests": str(limit),
                            "x-ratelimit-remaining-requests": str(max(0, remaining)),
                            "x-ratelimit-reset-requests": duration_text(reset)})
        if limits.tokens_per_day is not None:
            left = limits.tokens_per_day - self._tokens(counts, now)
            headers.update({"x-ratelimit-limit-tokens": str(limits.tokens_per_day),
                            "x-ratelimit-remaining-tokens": str(max(0, left)),
                            "x-ratelimit-reset-tokens": duration_text(
                                window_end("day", now) - now)})
        return headers


def _expire(counts: _Counts, mono: float) -> None:
    while counts.minute and counts.minute[0] <= mono - MINUTE:
        counts.minute.popleft()

