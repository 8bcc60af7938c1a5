"""Reading the ledger and the trail back: ``olp usage``, ``olp audit``, the ``/v0`` views and
the limiter's seed. Every function blocks on the database (run it in a worker thread from
Trio code)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

from olp.store import Database

from ._limiter import Seed
from ._recorder import AUDIT_COLUMNS, COUNTERS
from ._windows import WINDOWS, day_of, window_start

MAX_AUDIT_LIMIT = 1000


def load_counts(db: Database, now: float) -> dict[str, Seed]:
    """Each key's requests this UTC day, week and month (refused ones do not count) and its
    tokens today: the :class:`~olp.accounting.RequestLimiter`'s seed at start-up."""
    starts = {w: window_start(w, now).isoformat() for w in WINDOWS}
    first = min(starts.values())

    def read(c: sqlite3.Connection) -> dict[str, Seed]:
        rows = c.execute(
            "SELECT key, day, SUM(requests - refused), SUM(prompt_tokens + completion_tokens) "
            "FROM usage WHERE day >= ? GROUP BY key, day", (first,)).fetchall()
        sums: dict[str, dict[str, int]] = {}
        for key, day, requests, tokens in rows:
            acc = sums.setdefault(key, {"day": 0, "week": 0, "month": 0, "tokens_today": 0})
            for window, start in starts.items():
                if day >= start:
                    acc[window] += int(requests)
            if day == starts["day"]:
                acc["tokens_today"] += int(tokens)
        return {key: Seed(**acc) for key, acc in sums.items()}

    return db.read(read)


def usage_report(db: Database, now: float, *, days: int = 30, key: str | None = None,
                 key_name: str | None = None) -> list[dict[str, Any]]:
    """Ledger rows of the last ``days`` UTC days (today included), newest day first;
    only ``key``'s (its id as text) or ``key_name``'s when given."""
    first = (dt.date.fromisoformat(day_of(now)) - dt.timedelta(days=max(1, days) - 1))
    where, args = ["day >= ?"], [first.isoformat()]
    if key is not None:
        where.append("key = ?")
        args.append(key)
    if key_name is not None:
        where.append("key_name = ?")
        args.append(key_name)
    columns = ("day", "key", "key_name", "provider", "model", *COUNTERS)
    rows = db.read(lambda c: c.execute(
        f"SELECT {', '.join(columns)} FROM usage WHERE {' AND '.join(where)} "
        "ORDER BY day DESC, key_name, provider, model", args).fetchall())
    return [dict(zip(columns, row, strict=True)) for row in rows]


def usage_totals(rows: list[dict[str, Any]]) -> dict[str, float | int]:
    """The counters of ``rows`` summed."""
    return {name: sum(r[name] for r in rows) for name in COUNTERS}


def today_by_key(db: Database, now: float) -> dict[str, tuple[int, int]]:
    """Requests (refused ones included) and tokens per key today (for ``olp keys list``)."""
    rows = db.read(lambda c: c.execute(
        "SELECT key, SUM(requests), SUM(prompt_tokens + completion_tokens) FROM usage "
        "WHERE day = ? GROUP BY key", (day_of(now),)).fetchall())
    return {key: (int(requests), int(tokens)) for key, requests, tokens in rows}


def audit_page(db: Database, *, key_name: str | None = None, since: float | None = None,
               cursor: int | None = None, limit: int = 100
               ) -> tuple[list[dict[str, Any]], int | None]:
    """Audit rows, oldest first, and the cursor to ask for the rows after them (``None``
    when none were found). With ``cursor``: the rows after it; else with ``since``: the rows
    from that time; else the latest ``limit`` rows."""
    limit = max(1, min(limit, MAX_AUDIT_LIMIT))
    where: list[str] = []
    args: list[Any] = []
    if key_name is not None:
        where.append("key_name = ?")
        args.append(key_name)
    if cursor is not None:
        where.append("id > ?")
        args.append(cursor)
    elif since is not None:
        where.append("at >= ?")
        args.append(since)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    columns = ("id", *AUDIT_COLUMNS)
    ascending = cursor is not None or since is not None
    sql = (f"SELECT {', '.join(columns)} FROM audit {clause} ORDER BY id "
           f"{'ASC' if ascending else 'DESC'} LIMIT ?")
    rows = db.read(lambda c: c.execute(sql, [*args, limit]).fetchall())
    if not ascending:
        rows.reverse()
    out = [dict(zip(columns, row, strict=True)) for row in rows]
    for row in out:
        row["stream"] = bool(row["stream"])
    return out, (out[-1]["id"] if out else cursor)
