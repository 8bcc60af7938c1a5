"""Back-off on failed authentication, per source address.

Each wrong key (``Authorization``/``x-api-key``, or the dashboard's login form) counts
against the client's address. The first :data:`FREE_FAILURES` cost nothing; each one after
closes that address to wrong keys for twice as long as the last (1 s, 2 s, 4 s … up to
:data:`MAX_BACKOFF_S`): each is answered 429 with ``Retry-After`` and not counted, so a guesser
gets a handful of answers a minute. A source with no failure for :data:`FORGET_S` starts
afresh.

It never slows a correct key (issue #42): the gate looks a key up first, in memory (a wrong
key is a dictionary miss: :class:`~olp.store.AsyncKeyStore`), and asks here only about a
wrong one. So a correct key is served from any address whatever its state, and a tool on
this machine that keeps sending a revoked key cannot lock out the others that share
127.0.0.1. Nothing here blocks; the clock is injectable (Trio's by default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import trio

FREE_FAILURES = 10
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
FORGET_S = 600.0
MAX_SOURCES = 4096


@dataclass(slots=True)
class _Source:
    failures: int = 0
    last_failure: float = 0.0
    closed_until: float = 0.0


class AuthThrottle:
    """Failed-authentication counts by source (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        self._clock = clock
        self._sources: dict[str, _Source] = {}

    def retry_after(self, source: str) -> int | None:
        """Whole seconds until a wrong key from ``source`` is answered 401 again (429
        meanwhile), or ``None`` if it is now."""
        entry = self._sources.get(source)
        if entry is None:
            return None
        wait = entry.closed_until - self._clock()
        if wait <= 0:
            return None
        return max(1, math.ceil(wait))

    def failed(self, source: str) -> None:
        """Count a wrong key from ``source``; past the free ones, close it for a while."""
        now = self._clock()
        entry = self._sources.get(source)
        if entry is None or now - entry.last_failure > FORGET_S:
            if len(self._sources) >= MAX_SOURCES:
                self._forget(now)
            entry = self._sources[source] = _Source()
        entry.failures += 1
        entry.last_failure = now
        over = entry.failures - FREE_FAILURES
        if over > 0:
            entry.closed_until = now + min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** min(over - 1, 16))

    def _forget(self, now: float) -> None:
        """Drop sources quiet for :data:`FORGET_S`; if none is, the one quiet longest."""
        stale = [s for s, e in self._sources.items() if now - e.last_failure > FORGET_S]
        for source in stale or [min(self._sources,
                                    key=lambda s: self._sources[s].last_failure)]:
            del self._sources[source]
