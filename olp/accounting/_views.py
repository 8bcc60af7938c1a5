"""Reading the ledger and the trail back: ``olp usage``, ``olp audit``, the ``/v0`` views and
the limiter's seed. Every function blocks on the database (run it in a worker thread from
Trio code)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

from olp.store import DEFAULT_ACCOUNT, Database, slot_name, split_slot

from ._audit_row import AUDIT_COLUMNS, clip_columns
from ._limiter import Seed
from ._recorder import COUNTERS
from ._windows import WINDOWS, day_of, window_start

MAX_AUDIT_LIMIT = 1000
FIVE_HOURS: Final = 5 * 3600.0


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
    """Ledger rows of the last ``days`` UTC days (today included), newest day first, one
    per key x provider x account x model x day; only ``key``'s (its id as text) or
    ``key_name``'s when given."""
    first = (dt.date.fromisoformat(day_of(now)) - dt.timedelta(days=max(1, days) - 1))
    where, args = ["day >= ?"], [first.isoformat()]
    if key is not None:
        where.append("key = ?")
        args.append(key)
    if key_name is not None:
        where.append("key_name = ?")
        args.append(key_name)
    columns = ("day", "key", "key_name", "provider", "account", "model", *COUNTERS)
    rows = db.read(lambda c: c.execute(
        f"SELECT {', '.join(columns)} FROM usage WHERE {' AND '.join(where)} "
        "ORDER BY day DESC, key_name, provider, account, model", args).fetchall())
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
    from that time; else the latest ``limit`` rows. Text is clipped as the recorder clips it
    (rows an older OLP stored whole included)."""
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
    out = [clip_columns(dict(zip(columns, row, strict=True))) for row in rows]
    for row in out:
        row["stream"] = bool(row["stream"])
    return out, (out[-1]["id"] if out else cursor)


def quota_figures(db: Database, now: float) -> dict[str, dict[str, dict[str, int]]]:
    """OLP's own count per provider account (keyed by its slot name: ``claude``,
    ``claude@bob``; :func:`olp.store.slot_name`) over the soft-trigger windows: the last
    five hours (from the audit trail: requests served or tried first there; a row from
    before accounts is the default account's) and today (UTC, from the ledger; failed hops
    included)."""

    def read(c: sqlite3.Connection) -> dict[str, dict[str, dict[str, int]]]:
        out: dict[str, dict[str, dict[str, int]]] = {}
        for provider, account, requests, tokens in c.execute(
                "SELECT provider, COALESCE(account, ?) AS acct, COUNT(*), "
                "SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)) FROM audit "
                "WHERE at >= ? AND provider IS NOT NULL GROUP BY provider, acct",
                (DEFAULT_ACCOUNT, now - FIVE_HOURS)):
            out.setdefault(slot_name(provider, account), _empty_figures())["five_hour"] = {
                "requests": int(requests), "tokens": int(tokens or 0)}
        for provider, account, requests, failed, tokens in c.execute(
                "SELECT provider, account, SUM(requests), SUM(failed_hops), "
                "SUM(prompt_tokens + completion_tokens) FROM usage WHERE day = ? AND "
                "provider != '-' GROUP BY provider, account", (day_of(now),)):
            out.setdefault(slot_name(provider, account), _empty_figures())["day"] = {
                "requests": int(requests), "failed_hops": int(failed), "tokens": int(tokens)}
        return out

    return db.read(read)


def _empty_figures() -> dict[str, dict[str, int]]:
    return {"five_hour": {"requests": 0, "tokens": 0},
            "day": {"requests": 0, "failed_hops": 0, "tokens": 0}}


def quota_view(providers: Sequence[str], *, health: Mapping[str, Any],
               reported: Mapping[str, Mapping[str, Mapping[str, Any]]],
               soft: Mapping[str, tuple[str, float | None]],
               unavailable: Mapping[str, str],
               figures: Mapping[str, Mapping[str, Mapping[str, int]]],
               now: float) -> dict[str, Any]:
    """Each provider account's quota state, from plain data (the running proxy's, or what a
    stopped one saved). ``providers`` are slot names (``claude`` for a provider's default
    account, ``claude@bob`` for another: :func:`olp.store.slot_name`), and so are the keys
    of ``health`` (:meth:`HealthBook.snapshot`'s shape), ``reported`` (the CLIs' window
    reports), ``soft`` (the soft triggers that skip one now: message, seconds left) and
    ``figures`` (:func:`quota_figures`); ``unavailable`` names slots or whole providers that
    cannot run (and why).

    Each entry names its ``provider`` and ``account``. Its ``state`` is the first of
    ``unavailable``, ``cooling`` (until a usage window or rate limit resets),
    ``circuit_open``, ``soft_budget_spent``, ``ok``; ``next_reset`` the soonest future reset
    it knows of; the top-level ``soonest_reset`` the soonest of those."""
    out: dict[str, Any] = {}
    for name in providers:
        provider, account = split_slot(name)
        cooling = [c for c in health.get("cooldowns", [])
                   if c["provider"] == name and c["until"] > now]
        circuits = [c for c in health.get("circuits", [])
                    if c["provider"] == name and c["open_until"] > now]
        windows = {w: dict(r) for w, r in reported.get(name, {}).items()}
        resets = [float(r["resets_at"]) for r in windows.values()
                  if r.get("resets_at") is not None and r["resets_at"] > now]
        state, until, reason = "ok", None, None
        down = unavailable.get(name, unavailable.get(provider))
        if down is not None:
            state, reason = "unavailable", down
        elif cooling:
            first = min(cooling, key=lambda c: c["until"])
            state, until, reason = "cooling", float(first["until"]), first["reason"]
        elif circuits:
            state, until = "circuit_open", float(circuits[0]["open_until"])
            reason = f"{circuits[0].get('recent_failures', 0)} recent failures"
        elif name in soft:
            message, left = soft[name]
            state, reason = "soft_budget_spent", message
            until = None if left is None else now + left
        if until is not None:
            resets.append(until)
        out[name] = {"provider": provider, "account": account, "state": state,
                     "until": until, "reason": reason, "reported": windows,
                     "ledger": figures.get(name, _empty_figures()),
                     "next_reset": min(resets) if resets else None}
    soonest = [p["next_reset"] for p in out.values() if p["next_reset"] is not None]
    return {"object": "quota", "now": now, "soonest_reset": min(soonest) if soonest else None,
            "providers": out}
