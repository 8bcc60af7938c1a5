"""The audit trail and the usage ledger, written in batches off the request path.

A request ends by handing :meth:`Recorder.record` one :class:`AuditRow` and its
:class:`UsageDelta` list: that is a list append and a few dictionary additions on the Trio
thread, no I/O. :meth:`Recorder.run` commits what has gathered every ``interval_s`` (250 ms)
in one transaction in a worker thread, so a row is durable (WAL, ``synchronous=NORMAL``:
it survives the process being killed) within about a quarter of a second of its answer;
:meth:`Recorder.flush` writes the rest at shutdown. Old rows are pruned in the background
(``audit.max_age_days``, ``audit.max_rows``; ledger days past ``usage_days``).
"""

from __future__ import annotations

import logging
import operator
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Final

import trio

from olp.store import DEFAULT_ACCOUNT, Database

from ._audit_row import AUDIT_COLUMNS, AuditRow, bounded
from ._throttle import AuditThrottle
from ._windows import day_of

log = logging.getLogger("olp.accounting")

#: Rows kept in memory while the database cannot be written (the oldest are dropped).
MAX_PENDING_ROWS = 100_000
#: The provider, account and model of a request no hop took.
NO_PROVIDER: Final = "-"


@dataclass(frozen=True, slots=True)
class UsageDelta:
    """What one request adds to one ledger row (key x provider x account x model x day).
    ``account`` is the provider's login (issue #30); a request no hop took (provider ``-``)
    is on account ``-``."""

    provider: str
    model: str
    requests: int = 0
    served: int = 0
    refused: int = 0
    failed_hops: int = 0
    fallbacks: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0  # every input token, the cached ones included
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those read from the vendor's prompt cache
    spawn_seconds: float = 0.0
    account: str = DEFAULT_ACCOUNT

    def __post_init__(self) -> None:
        if self.provider == NO_PROVIDER:
            object.__setattr__(self, "account", NO_PROVIDER)


_NAMES: Final = ("provider", "model", "account")
COUNTERS = tuple(f.name for f in fields(UsageDelta) if f.name not in _NAMES)
_LedgerKey = tuple[str, str, str, str, str, str]  # day, key, key_name, provider, account, model


@dataclass(frozen=True, slots=True)
class Retention:
    """How long the trail is kept: rows older than ``max_age_days`` go, and the oldest
    beyond ``max_rows``; ledger rows older than ``usage_days``."""

    max_age_days: float = 90.0
    max_rows: int = 1_000_000
    usage_days: int = 400
    prune_every_s: float = 3600.0


class Recorder:
    """Gathers audit rows and ledger additions; :meth:`run` commits them in batches."""

    def __init__(self, db: Database, *, interval_s: float = 0.25,
                 retention: Retention | None = None,
                 clock: Callable[[], float] = time.time,
                 throttle: AuditThrottle | None = None) -> None:
        self._db = db
        self._interval_s = interval_s
        self.retention = retention or Retention()
        self._clock = clock
        self.throttle = throttle or AuditThrottle()
        self._rows: list[AuditRow] = []
        self._usage: dict[_LedgerKey, list[float]] = {}
        self.dropped = 0  # rows lost while the database could not be written
        self.written = 0  # rows committed
        self.batches = 0  # transactions that committed them

    def record(self, row: AuditRow, usage: Sequence[UsageDelta] = (), *,
               client: str | None = None) -> None:
        """Queue one request's row, its text bounded (:func:`bounded`), and its ledger
        additions (no I/O; never blocks). A 401 or 404 over its source's burst is dropped
        and counted instead (:class:`AuditThrottle`; ``client`` is the client's address, the
        source of a row without a key); its ledger additions count all the same."""
        for kept in self.throttle.admit(bounded(row), client):
            self._queue(kept)
        if row.key is None:
            return
        day = day_of(row.at)
        for delta in usage:
            key = (day, row.key, row.key_name or "", delta.provider, delta.account,
                   delta.model)
            sums = self._usage.setdefault(key, [0.0] * len(COUNTERS))
            for i, name in enumerate(COUNTERS):
                sums[i] += getattr(delta, name)

    def _queue(self, row: AuditRow) -> None:
        self._rows.append(row)
        if len(self._rows) > MAX_PENDING_ROWS:
            del self._rows[0]
            self.dropped += 1

    def end_windows(self) -> None:
        """Queue the summary row of every 401/404 window still open (at shutdown, before
        the last :meth:`flush`)."""
        for summary in self.throttle.close():
            self._queue(summary)

    @property
    def pending(self) -> int:
        return len(self._rows)

    @property
    def suppressed(self) -> int:
        """401/404 rows dropped over their source's burst (each counted in a summary row)."""
        return self.throttle.dropped

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Commit every ``interval_s`` (with the summary rows of the 401/404 windows that
        have ended) and prune every ``prune_every_s`` until cancelled.
        A failed write is logged and retried with the next batch (the rows stay queued)."""
        task_status.started()
        next_prune = trio.current_time()
        while True:
            await trio.sleep(self._interval_s)
            for summary in self.throttle.expire():
                self._queue(summary)
            await self.flush()
            if trio.current_time() >= next_prune:
                next_prune = trio.current_time() + self.retention.prune_every_s
                try:
                    await self._db.write_async(self._prune)
                except sqlite3.Error as exc:
                    log.warning("audit prune failed", extra={"event": "audit_prune_failed",
                                                             "error": str(exc)})

    async def flush(self) -> None:
        """Write what is queued, in one transaction in a worker thread (waits for the
        thread even if cancelled, so a started commit always completes)."""
        if not self._rows and not self._usage:
            return
        rows, usage = self._rows, self._usage
        self._rows, self._usage = [], {}
        try:
            await self._db.write_async(lambda c: _write(c, rows, usage))
        except sqlite3.Error as exc:
            log.warning("audit write failed", extra={"event": "audit_write_failed",
                                                     "error": str(exc)})
            self._rows[:0] = rows[-(MAX_PENDING_ROWS - len(self._rows)):]
            for key, sums in usage.items():
                merged = self._usage.setdefault(key, [0.0] * len(COUNTERS))
                for i, value in enumerate(sums):
                    merged[i] += value
            return
        self.written += len(rows)
        self.batches += 1

    def _prune(self, c: sqlite3.Connection) -> None:
        now, keep = self._clock(), self.retention
        c.execute("DELETE FROM audit WHERE at < ?", (now - keep.max_age_days * 86400,))
        (count,) = c.execute("SELECT COUNT(*) FROM audit").fetchone()
        if count > keep.max_rows:
            c.execute("DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY id "
                      "LIMIT ?)", (count - keep.max_rows,))
        c.execute("DELETE FROM usage WHERE day < ?", (day_of(now - keep.usage_days * 86400),))


def _write(c: sqlite3.Connection, rows: list[AuditRow],
           usage: dict[_LedgerKey, list[float]]) -> None:
    marks = ", ".join("?" * len(AUDIT_COLUMNS))
    c.executemany(f"INSERT INTO audit ({', '.join(AUDIT_COLUMNS)}) VALUES ({marks})",
                  [_columns(r) for r in rows])
    sets = ", ".join(f"{n} = {n} + excluded.{n}" for n in COUNTERS)
    c.executemany(
        "INSERT INTO usage (day, key, key_name, provider, account, model, "
        f"{', '.join(COUNTERS)}) VALUES ({', '.join('?' * (6 + len(COUNTERS)))}) "
        f"ON CONFLICT (day, key, provider, account, model) DO UPDATE SET {sets}, "
        "key_name = excluded.key_name",
        [(*key, *(_number(n, v) for n, v in zip(COUNTERS, sums, strict=True)))
         for key, sums in usage.items()])


#: A row's values in column order (its fields are plain values: no deep copy needed, which
#: ``dataclasses.astuple`` would make of each).
_columns = operator.attrgetter(*AUDIT_COLUMNS)


def _number(name: str, value: float) -> float | int:
    return value if name == "spawn_seconds" else int(value)
