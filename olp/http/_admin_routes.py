"""The owner's routes: ``GET /health`` (any key; the owner's gets the details), ``GET
/cache/stats`` and ``DELETE /cache``, ``GET /metrics`` (``server.metrics``), ``POST
/v0/management/cooldowns/reset``, the usage, audit and quota views (:mod:`._views`) and the
dashboard's state and actions (:mod:`._dashboard`). Every one but ``/health``, ``/v0/usage``
and the dashboard's login is the owner's only."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final

import trio
from quart import Response, g, request
from quart_trio import QuartTrio

from olp import __version__
from olp.accounting import (
    audit_page,
    day_of,
    describe_action,
    quota_figures,
    quota_view,
    usage_report,
)
from olp.actors import ProviderActor
from olp.engine import split_slot
from olp.store import AsyncResponseStore, AsyncSessionStore, Database, ResponseStore, SessionStore

from . import _dashboard, _views
from ._auth import METRICS_SCRAPER, owner_only
from ._errors import ApiError
from ._json_response import json_response
from ._metrics import CONTENT_TYPE, Metrics
from ._services import Services


def add_routes(app: QuartTrio, services: Services, metrics: Metrics,
               sessions: _dashboard.Sessions,
               authenticate: Callable[[str], Awaitable[Any]]) -> None:
    """Register the owner's routes on ``app``: ``metrics`` is what ``/metrics`` renders,
    ``sessions`` the dashboard's logins, ``authenticate`` the key check (with its
    back-off, :class:`._auth.Gate`) its login form uses."""

    @app.get("/health")
    async def health() -> Response:
        return json_response(health_body(services, owner=g.principal.tier == "owner"))

    @app.get("/cache/stats")
    async def cache_stats() -> Response:
        owner_only()
        if services.cache is None:
            return json_response({"enabled": False})
        stats = await services.cache.stats()
        flights = services.flights.statistics() if services.flights else None
        return json_response({"enabled": True, "hits": stats.hits, "misses": stats.misses,
                              "writes": stats.writes, "refused": stats.refused,
                              "evicted": stats.evicted, "expired": stats.expired,
                              "entries": stats.entries, "bytes": stats.bytes,
                              "in_flight": flights.in_flight if flights else 0,
                              "providers": {name: dataclasses.asdict(p)
                                            for name, p in stats.providers.items()}})

    @app.delete("/cache")
    async def cache_clear() -> Response:
        """Every entry, or one key's (``?key=<key id>``), and the CLI sessions and
        Responses answers kept for those conversations (ADR 0023)."""
        key = request.args.get("key")
        g.trace.action = describe_action("clear_cache", key)  # refused ones too
        owner_only()
        sessions, responses = await _clear_sessions(services, key)
        deleted = await services.cache.clear(key) if services.cache is not None else 0
        return json_response({"deleted": deleted, "sessions_deleted": sessions,
                              "responses_deleted": responses})

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus text format (``server.metrics``: the owner's key, or no key from a
        loopback address with ``"loopback"``, or a 404 with ``"off"``)."""
        if services.metrics_access == "off":
            raise ApiError(404, "Metrics are off here (server.metrics).",
                           "invalid_request_error", "not_found")
        if g.principal is not METRICS_SCRAPER:
            owner_only()
        return Response(metrics.render(), status=200, content_type=CONTENT_TYPE)

    @app.post("/v0/management/cooldowns/reset")
    async def reset_cooldowns() -> Response:
        g.trace.action = describe_action("reset_cooldowns")
        owner_only()
        cleared = services.engine.health.reset()
        services.engine.changed()
        return json_response({"reset": cleared})

    _views.add_routes(app, services.db, owner_only=owner_only,
                      quota_inputs=partial(_quota_inputs, services))
    _dashboard.add_routes(app, sessions, authenticate=authenticate,
                          state=partial(_dashboard_state, services),
                          action=partial(_dashboard_action, services))


def health_body(services: Services, *, owner: bool) -> dict[str, Any]:
    """``/health``: status and version; for the owner, the process, the config reloads, each
    provider's actor and resilience state, and the chains."""
    body: dict[str, Any] = {"status": "ok", "version": __version__}
    if owner:
        body["uptime_s"] = round(time.time() - services.started_at, 1)
        body["pid"] = os.getpid()
        if services.config_state is not None:
            body["config"] = services.config_state()
        resilience = services.engine.health.snapshot()
        body["providers"] = {
            name: {**_slot_info(services.provider_info, name), **_actor_stats(actor),
                   "cooling": [c for c in resilience["cooldowns"] if c["provider"] == name],
                   "circuit_open": any(c["provider"] == name
                                       for c in resilience["circuits"])}
            for name, actor in services.actors.items()}
        for name, info in services.provider_info.items():
            body["providers"].setdefault(name, {**info, "running": False})
        body["resilience"] = resilience
        body["chains"] = services.engine.router.chain_status()
    return body


def _slot_info(info: Mapping[str, Mapping[str, Any]], slot: str) -> dict[str, Any]:
    """What ``/health`` says of one actor: its provider's facts and, for a provider with
    several logins (issue #30), its account's: ``account``, and the login's ``credentials``,
    ``metered`` and ``metered_by`` (each account is a row of its own)."""
    provider, account = split_slot(slot)
    facts = dict(info.get(provider, {}))
    accounts = facts.get("accounts") or {}
    login = accounts.get(account)
    if login is None or (slot == provider and len(accounts) <= 1 and not login.get("home")):
        return facts
    facts.update(provider=provider, account=account, credentials=login["credentials"],
                 metered=login["metered"], metered_by=login["metered_by"],
                 home=login["home"], serves=login["serves"],
                 problems=[*(facts.get("problems") or []),
                           *([login["problem"]] if login.get("problem") else [])])
    if slot != provider:
        facts.pop("accounts", None)
    return facts


def _quota_inputs(services: Services) -> dict[str, Any]:
    """The running proxy's side of the quota view (:func:`olp.accounting.quota_view`): one
    entry per slot (a provider's account: ``claude``, ``claude@bob``), those of the
    providers OLP knows and of their accounts that run or have engine state."""
    ledger, health = services.engine.ledger, services.engine.health.snapshot()
    reported = ledger.snapshot().get("reported", {})
    known = [*services.provider_info, *services.actors]
    seen = [*(c["provider"] for c in (*health.get("cooldowns", []),
                                      *health.get("circuits", []))), *reported]
    names = list(dict.fromkeys([*known, *(s for s in seen if split_slot(s)[0] in known)]))
    soft = {n: (skip.message, skip.retry_after_s) for n in names
            if (skip := ledger.check(n)) is not None}
    unavailable = {n: "; ".join(info.get("problems") or []) or "disabled"
                   for n, info in services.provider_info.items()
                   if n not in services.actors}
    return {"providers": names, "health": health, "reported": reported, "soft": soft,
            "unavailable": unavailable}


#: A key's day and a provider's day on the dashboard before any request (copied, then summed).
_NO_USAGE: Final = {"requests": 0, "tokens": 0, "prompt_tokens": 0, "cached_tokens": 0}
_NO_PROMPTS: Final = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0}


async def _dashboard_state(services: Services) -> dict[str, Any]:
    """Everything the dashboard shows, in one answer (the database read in a worker
    thread)."""
    state = health_body(services, owner=True)
    now = time.time()
    state["now"] = now
    if services.db is not None:
        state.update(await trio.to_thread.run_sync(_dashboard_figures, services.db, now))
        state["quota"] = quota_view(**_quota_inputs(services), figures=state.pop("figures"),
                                    now=now)
    else:
        state.update({"recent": [], "trend": [], "usage_today": {}, "prompt_cache_today": {},
                      "quota": quota_view(**_quota_inputs(services), figures={}, now=now)})
    keys = await services.keys.list() if hasattr(services.keys, "list") else []
    usage = state.pop("usage_today")
    state["keys"] = [{"id": k.id, "name": k.name, "tier": k.tier,
                      "today": usage.get(str(k.id), dict(_NO_USAGE))}
                     for k in keys if k.active]
    spent = state.pop("prompt_cache_today")  # every provider, those with no traffic too
    state["prompt_cache"] = {name: spent.get(name, dict(_NO_PROMPTS))
                             for name in dict.fromkeys([*state["providers"], *spent])}
    if services.cache is None:
        state["cache"] = {"enabled": False}
    else:
        stats = await services.cache.stats()
        state["cache"] = {"enabled": True, "hits": stats.hits, "misses": stats.misses,
                          "entries": stats.entries, "bytes": stats.bytes}
    return state


async def _clear_sessions(services: Services, key: str | None) -> tuple[int, int]:
    """Forget the CLI sessions and the Responses answers kept for ``key``'s conversations
    (every key's: ``None``); how many of each."""
    if services.db is None:
        return 0, 0
    return (await AsyncSessionStore(SessionStore(services.db)).clear(key),
            await AsyncResponseStore(ResponseStore(services.db)).clear(key))


async def _dashboard_action(services: Services, name: str,
                            body: dict[str, Any]) -> dict[str, Any]:
    """One of the dashboard's buttons (the caller checked the session and CSRF). Its audit
    row says which, and on what (``revoke_key bob``), whatever the outcome."""
    key = str(body.get("key") or "")
    g.trace.action = describe_action(name, key)
    if name == "reset_cooldowns":
        cleared = services.engine.health.reset()
        services.engine.changed()
        return {"message": f"Reset {cleared} cooldown(s) and circuit(s)."}
    if name == "clear_cache" and key:
        deleted = await services.cache.clear(key) if services.cache is not None else 0
        sessions, responses = await _clear_sessions(services, key)
        return {"message": f"Deleted {deleted} cached answer(s), {sessions} kept "
                           f"session(s) and {responses} kept response(s) of key {key}."}
    if name == "revoke_key" and key and hasattr(services.keys, "revoke"):
        if await services.keys.revoke(key):
            return {"message": f"Revoked the key {key}."}
        raise ApiError(404, f"No active key named {key!r}.", "invalid_request_error",
                       "key_not_found")
    raise ApiError(400, f"Unknown action {name!r}.", "invalid_request_error",
                   "invalid_action")


def _dashboard_figures(db: Database, now: float) -> dict[str, Any]:
    """The database's part of the dashboard (blocks): today per key (requests, tokens, the
    prompt tokens and of them the cached input tokens) and per provider (every key's prompt
    and cached input tokens: the prompt-cache reuse), 30 days, recent rows."""
    rows = usage_report(db, now, days=30)
    today = day_of(now)
    per_key: dict[str, dict[str, int]] = {}
    per_provider: dict[str, dict[str, int]] = {}
    per_day: dict[str, dict[str, int]] = {}
    for r in rows:
        tokens = int(r["prompt_tokens"]) + int(r["completion_tokens"])
        day = per_day.setdefault(r["day"], {"requests": 0, "tokens": 0})
        day["requests"] += int(r["requests"])
        day["tokens"] += tokens
        if r["day"] == today:
            mine = per_key.setdefault(r["key"], dict(_NO_USAGE))
            mine["requests"] += int(r["requests"])
            mine["tokens"] += tokens
            mine["prompt_tokens"] += int(r["prompt_tokens"])
            mine["cached_tokens"] += int(r["cached_tokens"])
            if r["provider"] != "-":  # a request no provider took (refused, cache hit)
                spent = per_provider.setdefault(r["provider"], dict(_NO_PROMPTS))
                spent["requests"] += int(r["requests"])
                spent["prompt_tokens"] += int(r["prompt_tokens"])
                spent["cached_tokens"] += int(r["cached_tokens"])
    start = dt.date.fromisoformat(today) - dt.timedelta(days=29)
    trend = [{"day": d, **per_day.get(d, {"requests": 0, "tokens": 0})}
             for d in ((start + dt.timedelta(days=i)).isoformat() for i in range(30))]
    rows_seen, _ = audit_page(db, limit=200)
    recent = [r for r in reversed(rows_seen) if r["requested_model"]][:20]  # model requests
    return {"usage_today": per_key, "prompt_cache_today": per_provider, "trend": trend,
            "recent": recent, "figures": quota_figures(db, now)}


def _actor_stats(actor: ProviderActor) -> dict[str, Any]:
    stats = actor.statistics()
    return {"running": True, "in_flight": stats.in_flight,
            "max_concurrent": stats.max_concurrent, "jobs_started": stats.jobs_started,
            "jobs_refused": stats.jobs_refused,
            "warm": dataclasses.asdict(stats.warm) if stats.warm is not None else None,
            "app_server": dataclasses.asdict(stats.threads) if stats.threads is not None
            else None,
            "lockdown": actor.admission.status() if actor.admission is not None else None,
            "login": actor.login.status() if actor.login is not None else None}
