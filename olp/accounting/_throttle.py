"""How many 401 and 404 rows the audit trail takes from one source (docs/adr/0021-bounded-audit.md).

A request without a valid key costs its sender nothing, and neither does a 404: one keyless
connection can send hundreds a second, each an audit row, and push the real rows out past
the trail's ``max_rows``. So a source — a key (its id) when the request had one, else the
client's address — has a window of ``window_s`` from its first such row, in which its first
``burst`` 401/404 rows (and a keyless request's other 4xx: :func:`throttled`) are kept and the
rest are dropped and counted; and all sources together keep at most ``global_burst`` per
window (many addresses, one attacker). When the window ends
(:meth:`AuditThrottle.expire`, called by the recorder every 250 ms; or that source's next
401/404 after it; or shutdown: :meth:`AuditThrottle.close`) each status with drops becomes one
summary row: outcome ``suppressed``, ``suppressed`` = how many rows it stands for, the first
dropped row's time, key and endpoint (``… (and other endpoints)`` when they differed).

Every other status passes untouched, and nothing here waits: :meth:`AuditThrottle.admit` is a
few dictionary operations on the Trio thread. At most ``max_sources`` windows are tracked;
sources beyond them share one overflow window, so memory stays bounded whatever the number
of addresses.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ._audit_row import MAX_ENDPOINT_CHARS, AuditRow, clip

#: The statuses whose rows are rate-limited whoever sent them: a wrong or missing key, a path
#: or model that does not exist. So are a keyless request's other 4xx (the wrong-key
#: back-off's 429, a Host or dashboard 403: refused before any key was known, as free to send
#: as a 401). Everything else — a success, a 5xx, any other refusal of a valid key — is
#: always kept.
THROTTLED: Final = frozenset({401, 404})
BURST: Final = 10  # rows kept per source per window (401s and 404s together)
WINDOW_S: Final = 60.0
GLOBAL_BURST: Final = 100  # rows kept per window from all sources together
MAX_SOURCES: Final = 256  # windows tracked at once (plus one overflow window)
SUPPRESSED: Final = "suppressed"  # a summary row's outcome
#: The columns a summary copies from the first row it stands for when every dropped row had
#: the same value (else ``None``; the endpoint says "and other endpoints").
_SAMPLED: Final = ("key", "key_name", "endpoint", "requested_model")
_OTHERS: Final = " (and other endpoints)"


@dataclass(slots=True)
class _Drops:
    first: AuditRow
    count: int = 1
    differs: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Window:
    start: float  # monotonic
    admitted: int = 0
    drops: dict[int, _Drops] = field(default_factory=dict)  # status -> rows dropped


class AuditThrottle:
    """The 401/404 burst per source (see the module docstring). ``monotonic`` is the windows'
    clock (``trio.current_time`` in tests under ``MockClock``)."""

    def __init__(self, *, burst: int = BURST, window_s: float = WINDOW_S,
                 global_burst: int = GLOBAL_BURST, max_sources: int = MAX_SOURCES,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._burst, self._window_s = burst, window_s
        self._global_burst, self._max_sources = global_burst, max_sources
        self._monotonic = monotonic
        self._windows: dict[str, _Window] = {}  # oldest start first (insertion order)
        self._overflow: _Window | None = None
        self._all = _Window(-math.inf)  # every source's admitted rows, this global window
        self.dropped = 0  # rows dropped so far (each counted in a summary row)

    @property
    def tracked(self) -> int:
        """Windows held in memory (at most ``max_sources`` + 1)."""
        return len(self._windows) + (self._overflow is not None)

    def admit(self, row: AuditRow, client: str | None) -> list[AuditRow]:
        """The rows to record for ``row`` from ``client`` (its address): ``[row]``; or, for a
        401/404 over its source's burst, none (counted); preceded by the summaries of any
        windows that have ended."""
        if not throttled(row):
            return [row]
        now = self._monotonic()
        out = self.expire(now)
        source = f"key {row.key}" if row.key is not None else f"address {client or '-'}"
        window = self._windows.get(source)
        if window is None:
            if len(self._windows) < self._max_sources:
                window = self._windows[source] = _Window(now)
            else:
                if self._overflow is None:
                    self._overflow = _Window(now)
                window = self._overflow
        if self._ended(self._all, now):
            self._all = _Window(now)
        if window.admitted < self._burst and self._all.admitted < self._global_burst:
            window.admitted += 1
            self._all.admitted += 1
            out.append(row)
            return out
        self.dropped += 1
        drops = window.drops.get(row.status)
        if drops is None:
            window.drops[row.status] = _Drops(row)
        else:
            drops.count += 1
            for name in _SAMPLED:
                if name not in drops.differs and getattr(row, name) != getattr(drops.first,
                                                                               name):
                    drops.differs.add(name)
        return out

    def expire(self, now: float | None = None) -> list[AuditRow]:
        """Forget the windows that have ended; the summary rows of those that dropped rows."""
        now = self._monotonic() if now is None else now
        out: list[AuditRow] = []
        while self._windows:
            source, window = next(iter(self._windows.items()))
            if not self._ended(window, now):
                break  # the rest started later
            del self._windows[source]
            out.extend(_summaries(window))
        if self._overflow is not None and self._ended(self._overflow, now):
            out.extend(_summaries(self._overflow))
            self._overflow = None
        return out

    def close(self) -> list[AuditRow]:
        """End every window now (at shutdown): the summary rows of those that dropped
        rows."""
        windows = [*self._windows.values(), *([self._overflow] if self._overflow else [])]
        self._windows, self._overflow = {}, None
        return [summary for window in windows for summary in _summaries(window)]

    def _ended(self, window: _Window, now: float) -> bool:
        return now >= window.start + self._window_s


def throttled(row: AuditRow) -> bool:
    """Whether ``row`` counts against its source's burst (see :data:`THROTTLED`)."""
    return row.status in THROTTLED or (row.key is None and 400 <= row.status < 500)


def _summaries(window: _Window) -> list[AuditRow]:
    return [_summary(status, drops) for status, drops in window.drops.items()]


def _summary(status: int, drops: _Drops) -> AuditRow:
    first, differs = drops.first, drops.differs
    endpoint = first.endpoint
    if "endpoint" in differs:
        endpoint = clip(endpoint, MAX_ENDPOINT_CHARS - len(_OTHERS)) + _OTHERS
    return AuditRow(
        at=first.at, request_id="sup_" + secrets.token_hex(12),
        key=None if "key" in differs else first.key,
        key_name=None if "key_name" in differs else first.key_name, endpoint=endpoint,
        requested_model=None if "requested_model" in differs else first.requested_model,
        provider=None, model=None, entry=None, hops=0, status=status, cache=None,
        stream=False, latency_ms=0, prompt_tokens=None, completion_tokens=None,
        outcome=SUPPRESSED, suppressed=drops.count)
