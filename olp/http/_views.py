"""The usage, audit and quota views: ``GET /v0/usage`` (any key: its own usage, never
another's), ``GET /v0/management/usage``, ``/audit`` and ``/quota`` (the owner's key only).

Each reads the database in a worker thread (the recorder commits every 250 ms, so a request
is in them within about a quarter of a second of its end).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import trio
from quart import Response, g, request
from quart_trio import QuartTrio

from olp.accounting import (
    MAX_AUDIT_LIMIT,
    audit_page,
    parse_since,
    quota_figures,
    quota_view,
    usage_report,
    usage_totals,
)
from olp.store import Database

from ._errors import ApiError
from ._json_response import json_response

MAX_DAYS = 400


def add_routes(app: QuartTrio, db: Database | None, *, owner_only: Callable[[], None],
               quota_inputs: Callable[[], dict[str, Any]]) -> None:
    """Register the views on ``app`` (none without a database). ``quota_inputs`` gives the
    running proxy's side of the quota view (providers, health, reports, soft skips)."""
    if db is None:
        return

    @app.get("/v0/management/quota")
    async def quota() -> Response:
        """Per provider: its state (ok, cooling until, circuit open, soft budget spent,
        unavailable), the usage windows its CLI reported, OLP's own count over the last five
        hours and today, and the soonest reset. Owner only."""
        owner_only()
        now = time.time()
        figures = await trio.to_thread.run_sync(quota_figures, db, now)
        return json_response(quota_view(**quota_inputs(), figures=figures, now=now))

    @app.get("/v0/usage")
    async def own_usage() -> Response:
        """The calling key's ledger rows over ``?days=`` (default 30) and their totals."""
        days = _int_arg("days", 30, 1, MAX_DAYS)
        rows = await trio.to_thread.run_sync(partial(
            usage_report, db, time.time(), days=days, key=str(g.principal.key_id)))
        return json_response({"object": "usage", "key": g.principal.name, "days": days,
                              "totals": usage_totals(rows), "data": rows})

    @app.get("/v0/management/usage")
    async def all_usage() -> Response:
        """Every key's ledger rows (or ``?key=NAME``'s) over ``?days=``, with totals per
        key. Owner only."""
        owner_only()
        days = _int_arg("days", 30, 1, MAX_DAYS)
        name = request.args.get("key") or None
        rows = await trio.to_thread.run_sync(partial(
            usage_report, db, time.time(), days=days, key_name=name))
        keys: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            keys.setdefault(row["key_name"], []).append(row)
        return json_response({"object": "usage", "days": days, "totals": usage_totals(rows),
                              "keys": {k: usage_totals(v) for k, v in keys.items()},
                              "data": rows})

    @app.get("/v0/management/audit")
    async def audit() -> Response:
        """Audit rows, oldest first: ``?key=NAME``, ``?since=`` (ISO 8601 or Unix seconds),
        ``?limit=`` (at most 1,000), ``?cursor=`` (the previous page's ``next_cursor``: the
        rows after it). Owner only."""
        owner_only()
        limit = _int_arg("limit", 100, 1, MAX_AUDIT_LIMIT)
        cursor = _int_arg("cursor", None, 0, 2**62)
        since = _since_arg()
        rows, next_cursor = await trio.to_thread.run_sync(partial(
            audit_page, db, key_name=request.args.get("key") or None, since=since,
            cursor=cursor, limit=limit))
        return json_response({"object": "list", "data": rows, "next_cursor": next_cursor})


def _since_arg() -> float | None:
    text = request.args.get("since")
    if not text:
        return None
    try:
        return parse_since(text)
    except ValueError:
        raise ApiError(400, f"since={text!r} is not a time: give ISO 8601 "
                       "(2026-12-01T08:00:00Z) or Unix seconds.", "invalid_request_error",
                       "invalid_parameter", "since") from None


def _int_arg(name: str, default: int | None, low: int, high: int) -> Any:
    text = request.args.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be a whole number from {low} to {high}.",
                       "invalid_request_error", "invalid_parameter", name)
    return value
