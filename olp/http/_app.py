"""The Quart-Trio application: OpenAI-compatible routes in front of the engine, and the
Anthropic Messages (``/v1/messages``) and OpenAI Responses (``/v1/responses``) dialects on the
same engine (:mod:`._dialect`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from olp import __version__
from olp.accounting import (
    LimitExceeded,
    Recorder,
    RequestLimiter,
    audit_page,
    day_of,
    quota_figures,
    quota_view,
    usage_report,
)
from olp.actors import ProviderActor
from olp.cache import CacheStore, Singleflight
from olp.engine import Answer, ChainFailed, Engine, UnknownModel, UnusableChain
from olp.ir import ChatRequest, ImagePart, TextPart
from olp.ir.anthropic import decode_messages_request
from olp.ir.openai import InvalidRequest, decode_chat_request
from olp.ir.responses import decode_responses_request
from olp.store import Database

from . import _chat, _dashboard, _views
from ._dialect import ANTHROPIC, OPENAI, RESPONSES, Dialect, dialect_for_path
from ._errors import ApiError
from ._metrics import CONTENT_TYPE, ActorGauge, Metrics
from ._trace import Trace

log = logging.getLogger("olp.http")

JSON = "application/json"


class Principal(Protocol):
    """Who is calling: a key's id (its cache namespace), name and tier (owner or guest)."""

    @property
    def key_id(self) -> int | str: ...

    @property
    def name(self) -> str: ...

    @property
    def tier(self) -> str: ...


class KeyAuthenticator(Protocol):
    async def authenticate(self, token: str) -> Principal | None:
        """The key's principal, or ``None`` for an unknown or revoked key."""
        ...


@dataclass(slots=True)
class Services:
    """What the app needs from the rest of OLP (built by :mod:`olp.runtime.server`, or by tests)."""

    engine: Engine
    keys: KeyAuthenticator
    models: Callable[[], list[dict[str, Any]]]
    actors: Mapping[str, ProviderActor] = field(default_factory=dict)
    provider_info: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    headers: _chat.HeaderPolicy = field(default_factory=_chat.HeaderPolicy)
    cache: CacheStore | None = None
    flights: Singleflight | None = None
    allow_anonymous: bool = False  # auth.allow_anonymous: no key = the "anonymous" guest
    heartbeat_s: float = 0.0  # streaming.heartbeat_interval_ms / 1000; 0 = off
    background: trio.Nursery | None = None  # where heartbeat streams' engine work runs
    max_body_bytes: int = 5 * 1024 * 1024
    started_at: float = field(default_factory=time.time)
    limiter: RequestLimiter | None = None  # per-key limits (None: none are enforced)
    recorder: Recorder | None = None  # the audit trail and usage ledger (None: not kept)
    db: Database | None = None  # where the usage and audit views read from
    metrics_access: str = "owner"  # server.metrics: owner | loopback | off
    config_state: Callable[[], dict[str, Any]] | None = None  # the config reloads (/health)
    dashboard: str = "loopback"  # server.dashboard: loopback | on | off


@dataclasses.dataclass(frozen=True, slots=True)
class _Anonymous:
    key_id: str = "anonymous"  # its own cache namespace
    name: str = "anonymous"
    tier: str = "guest"


ANONYMOUS = _Anonymous()
#: Who scrapes ``/metrics`` without a key from a loopback address (``server.metrics``
#: ``"loopback"``); it can read nothing else.
METRICS_SCRAPER = _Anonymous(key_id="metrics", name="metrics")
#: A dashboard visitor not logged in: it can reach the login page only.
VISITOR = _Anonymous(key_id="visitor", name="visitor")


def create_app(services: Services) -> QuartTrio:
    """Build the app. Every route needs an OLP key (``Authorization: Bearer`` or
    ``x-api-key``); views raise :class:`ApiError` for OpenAI-shaped failures."""
    app = QuartTrio("olp")
    sessions = _dashboard.Sessions()
    metrics = Metrics(actors=lambda: {n: _gauge(a) for n, a in services.actors.items()},
                      health=services.engine.health.snapshot)
    app.config["MAX_CONTENT_LENGTH"] = services.max_body_bytes
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False

    @app.errorhandler(ApiError)
    async def _api_error(exc: ApiError) -> Response:
        """In the dialect of the path asked for (Anthropic's shape under ``/v1/messages``)."""
        g.error_code = exc.code or exc.type
        return Response(dialect_for_path(request.path).error_body(exc), status=exc.status,
                        content_type=JSON, headers=dict(exc.headers))

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        code = {404: "not_found", 405: "method_not_allowed",
                413: "request_too_large"}.get(status)
        message = exc.description or exc.name
        if status == 413:
            message = f"Request body is larger than {services.max_body_bytes} bytes."
        return await _api_error(ApiError(status, message, "invalid_request_error", code))

    upkeep = trio.CancelScope()

    @app.before_serving
    async def _start_upkeep() -> None:
        """While the app serves, the cache writes its hits' last-used times every few
        seconds (see :meth:`CacheStore.run`) and the recorder commits the audit trail and
        the ledger every 250 ms (:meth:`Recorder.run`)."""
        runs = [service.run for service in (services.cache, services.recorder)
                if service is not None]
        await app.nursery.start(_upkeep, runs, upkeep)

    @app.after_serving
    async def _stop_upkeep() -> None:
        """At shutdown (after the last request), what is left is written before the
        database closes."""
        upkeep.cancel(reason="stopped serving")
        if services.cache is not None:
            await services.cache.flush()
        if services.recorder is not None:
            await services.recorder.flush()

    @app.after_request
    async def _close_if_body_unread(response: Response) -> Response:
        """An answer given before the request's body was read (a wrong key, a body too large,
        a wrong content type, an unknown route) closes the connection: the rest of that body
        may still be on its way, and the connection must not be left waiting on it."""
        if _has_body() and not g.get("body_read", False):
            response.headers["Connection"] = "close"
        return response

    @app.after_request
    async def _account(response: Response) -> Response:
        """Every response says its ``X-Request-Id`` and, to a limited key, its
        ``x-ratelimit-*``; a request that changes something or was refused (anything but a
        successful ``GET``) is audited here, or at the end of its stream."""
        trace: Trace | None = g.get("trace")
        if trace is None:
            return response
        response.headers["X-Request-Id"] = trace.request_id
        for name, value in trace.rate_headers.items():
            response.headers.setdefault(name, value)
        if not trace.deferred and (request.method != "GET" or response.status_code >= 400):
            status = response.status_code
            outcome = trace.outcome or ("ok" if status < 400 else
                                        str(g.get("error_code") or status))
            trace.end(status, outcome, limiter=services.limiter, recorder=services.recorder,
                      metrics=metrics)
        return response

    @app.before_request
    async def _authenticate() -> None:
        g.t0 = trio.current_time()
        rule = request.url_rule.rule if request.url_rule is not None else request.path
        g.trace = Trace(f"{request.method} {rule}", t0=g.t0)
        if _dashboard.is_dashboard_path(request.path):
            if services.dashboard == "off":
                raise ApiError(404, "The dashboard is off here (server.dashboard).",
                               "invalid_request_error", "not_found")
            if services.dashboard == "loopback" and not _from_loopback():
                raise ApiError(403, "The dashboard answers only on this machine (set "
                               "server.dashboard to \"on\" to open it).", "permission_error",
                               "dashboard_loopback_only")
            principal = _dashboard.session_principal(sessions)
            g.principal = principal or VISITOR
            if principal is not None:
                g.trace.key, g.trace.key_name = str(principal.key_id), principal.name
            return
        token = _token_from_headers()
        if request.path == "/metrics" and services.metrics_access == "loopback" \
                and token is None and _from_loopback():
            g.principal = METRICS_SCRAPER  # server.metrics "loopback": no key from here
            return
        principal = await services.keys.authenticate(token) if token else None
        if token is None and services.allow_anonymous:
            principal = ANONYMOUS  # opt-in (auth.allow_anonymous); a wrong key is still a 401
        if principal is None:
            raise ApiError(401, "Invalid or missing OLP API key: send `Authorization: Bearer "
                                "<key>` or `x-api-key: <key>`.", "invalid_request_error",
                           "invalid_api_key")
        g.principal = principal
        g.trace.key, g.trace.key_name = str(principal.key_id), principal.name

    @app.get("/health")
    async def health() -> Response:
        return _json(health_body(owner=g.principal.tier == "owner"))

    def health_body(*, owner: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "ok", "version": __version__}
        if owner:
            body["uptime_s"] = round(time.time() - services.started_at, 1)
            body["pid"] = os.getpid()
            if services.config_state is not None:
                body["config"] = services.config_state()
            resilience = services.engine.health.snapshot()
            body["providers"] = {
                name: {**services.provider_info.get(name, {}), **_actor_stats(actor),
                       "cooling": [c for c in resilience["cooldowns"] if c["provider"] == name],
                       "circuit_open": any(c["provider"] == name
                                           for c in resilience["circuits"])}
                for name, actor in services.actors.items()}
            for name, info in services.provider_info.items():
                body["providers"].setdefault(name, {**info, "running": False})
            body["resilience"] = resilience
            body["chains"] = services.engine.router.chain_status()
        return body

    @app.get("/v1/models")
    async def models() -> Response:
        return _json({"object": "list", "data": services.models()})

    @app.get("/v1/models/<path:model>")
    async def model(model: str) -> Response:
        """One row of the listing, or a 404 naming the cause when the model is known."""
        found = next((m for m in services.models() if m["id"] == model), None)
        if found is not None:
            return _json(found)
        try:
            services.engine.router.resolve(model)
        except UnknownModel as exc:
            message = exc.message
        else:  # pragma: no cover - every routable id is listed
            message = f"The model `{model}` does not exist or is not served here."
        raise ApiError(404, message, "invalid_request_error", "model_not_found", "model")

    async def _chat_body() -> bytes:
        """The request body of a chat view, after the media type and size checks."""
        mimetype = request.mimetype
        if mimetype != JSON:
            raise ApiError(415, f"Content-Type must be {JSON}, not {mimetype or 'missing'}.",
                           "invalid_request_error", "unsupported_media_type")
        if (request.content_length or 0) > services.max_body_bytes:
            raise ApiError(413, f"Request body is larger than {services.max_body_bytes} bytes.",
                           "invalid_request_error", "request_too_large")
        body = await request.get_data(cache=False)
        assert isinstance(body, bytes)
        g.body_read = True
        return body

    def _reserve(trace: Trace) -> None:
        """Count the request against its key's limits, or refuse it with a 429."""
        if services.limiter is None:
            return
        limits = _chat.key_policy(g.principal).limits
        try:
            trace.reservation = services.limiter.reserve(str(g.principal.key_id), limits)
        except LimitExceeded as exc:
            trace.refused, trace.rate_headers = True, exc.headers
            raise ApiError(429, exc.message, "rate_limit_error", "rate_limit_exceeded",
                           headers=exc.headers) from None
        trace.rate_headers = trace.reservation.headers

    def _stream_end(trace: Trace) -> _chat.StreamEnd:
        def end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
            if answer is not None:
                trace.served(provider=answer.hop.provider, model=answer.model,
                             entry=answer.hop.name, index=answer.index, cache=answer.cache,
                             records=answer.records, usage=answer.usage,
                             seconds=trio.current_time() - answer.started_at)
            if failure is not None:
                trace.failed(failure)
            trace.end(200, outcome, limiter=services.limiter, recorder=services.recorder,
                      metrics=metrics)

        return end

    async def _answer(decode: Callable[[bytes], ChatRequest], dialect: Dialect) -> Response:
        """Decode, run the engine, answer in ``dialect``: the one path of every chat view.
        The request counts against its key's limits from here, whatever its outcome."""
        trace: Trace = g.trace
        trace.model_request, trace.dialect = True, dialect.name
        _reserve(trace)
        try:
            chat = decode(await _chat_body())
        except InvalidRequest as exc:
            raise ApiError(400, exc.message, "invalid_request_error", exc.code,
                           exc.param) from None
        trace.requested_model, trace.stream = chat.model, chat.stream
        try:
            context = _chat.context()
            if chat.stream:
                response = await _chat.stream(
                    services.engine, chat, context, services.headers,
                    heartbeat_s=services.heartbeat_s, background=services.background,
                    dialect=dialect, on_end=_stream_end(trace))
                trace.deferred = True
                if response.headers.get("X-OLP-Heartbeat") is None:  # its content is in hand
                    trace.first_content_s = trio.current_time() - trace.t0
                return response
            done = await services.engine.complete(chat, context)
            trace.served(provider=done.hop.provider, model=done.model, entry=done.hop.name,
                         index=done.index, cache=done.cache, records=done.records,
                         usage=done.usage, seconds=done.seconds)
            trace.outcome = "truncated" if done.truncated else "ok"
            return _chat.complete(chat, done, services.headers, dialect)
        except UnusableChain as exc:
            raise ApiError(503, exc.message, "api_error", "chain_unusable", "model") from None
        except UnknownModel as exc:
            raise ApiError(404, exc.message, "invalid_request_error", "model_not_found",
                           "model") from None
        except ChainFailed as exc:
            trace.failed(exc)
            raise _chat.exhausted(chat, exc, services.headers) from None

    @app.post("/v1/chat/completions")
    async def chat_completions() -> Response:
        return await _answer(decode_chat_request, OPENAI)

    @app.post("/v1/messages")
    async def messages() -> Response:
        """Anthropic Messages (``anthropic-version`` and ``anthropic-beta`` are accepted and
        change nothing)."""
        return await _answer(decode_messages_request, ANTHROPIC)

    @app.post("/v1/responses")
    async def responses() -> Response:
        """OpenAI Responses. OLP keeps no responses: ``previous_response_id`` is a 400 and
        ``store`` changes nothing (docs/adr/0015)."""
        return await _answer(decode_responses_request, RESPONSES)

    @app.get("/v1/responses/<response_id>")
    async def stored_response(response_id: str) -> Response:
        """OLP keeps no responses (``store`` changes nothing), so none can be fetched."""
        raise ApiError(404, f"No response with id '{response_id}': OLP does not store "
                       "responses; keep the answer you were sent, and send the whole "
                       "conversation in 'input' to continue it.", "invalid_request_error",
                       "response_not_found")

    @app.post("/v1/messages/count_tokens")
    async def count_tokens() -> Response:
        """An estimate (no CLI has a tokenizer to ask): about four characters a token over
        the text, tool definitions and images of the request; ``X-OLP-Token-Count:
        estimate`` says so."""
        body = await _chat_body()
        try:
            wire = json.loads(body)
        except ValueError:
            wire = None
        if isinstance(wire, dict):  # count_tokens takes no max_tokens; decoding needs one
            wire.setdefault("max_tokens", 1)
            body = json.dumps(wire).encode()
        try:
            chat = decode_messages_request(body)
        except InvalidRequest as exc:
            raise ApiError(400, exc.message, "invalid_request_error", exc.code,
                           exc.param) from None
        response = _json({"input_tokens": estimate_tokens(chat)})
        response.headers["X-OLP-Token-Count"] = "estimate"
        return response

    @app.get("/cache/stats")
    async def cache_stats() -> Response:
        _owner_only()
        if services.cache is None:
            return _json({"enabled": False})
        stats = await services.cache.stats()
        flights = services.flights.statistics() if services.flights else None
        return _json({"enabled": True, "hits": stats.hits, "misses": stats.misses,
                      "writes": stats.writes, "refused": stats.refused,
                      "evicted": stats.evicted, "expired": stats.expired,
                      "entries": stats.entries, "bytes": stats.bytes,
                      "in_flight": flights.in_flight if flights else 0,
                      "providers": {name: dataclasses.asdict(p)
                                    for name, p in stats.providers.items()}})

    @app.delete("/cache")
    async def cache_clear() -> Response:
        """Every entry, or one key's (``?key=<key id>``)."""
        _owner_only()
        if services.cache is None:
            return _json({"deleted": 0})
        key = request.args.get("key")
        return _json({"deleted": await services.cache.clear(key)})

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus text format (``server.metrics``: the owner's key, or no key from a
        loopback address with ``"loopback"``, or a 404 with ``"off"``)."""
        if services.metrics_access == "off":
            raise ApiError(404, "Metrics are off here (server.metrics).",
                           "invalid_request_error", "not_found")
        if g.principal is not METRICS_SCRAPER:
            _owner_only()
        return Response(metrics.render(), status=200, content_type=CONTENT_TYPE)

    @app.post("/v0/management/cooldowns/reset")
    async def reset_cooldowns() -> Response:
        _owner_only()
        cleared = services.engine.health.reset()
        services.engine.changed()
        return _json({"reset": cleared})

    def quota_inputs() -> dict[str, Any]:
        """The running proxy's side of the quota view (:func:`olp.accounting.quota_view`)."""
        names = list(dict.fromkeys([*services.provider_info, *services.actors]))
        ledger = services.engine.ledger
        soft = {n: (skip.message, skip.retry_after_s) for n in names
                if (skip := ledger.check(n)) is not None}
        unavailable = {n: "; ".join(info.get("problems") or []) or "disabled"
                       for n, info in services.provider_info.items()
                       if n not in services.actors}
        return {"providers": names, "health": services.engine.health.snapshot(),
                "reported": ledger.snapshot().get("reported", {}), "soft": soft,
                "unavailable": unavailable}

    _views.add_routes(app, services.db, owner_only=_owner_only, quota_inputs=quota_inputs)

    async def dashboard_state() -> dict[str, Any]:
        """Everything the dashboard shows, in one answer."""
        state = health_body(owner=True)
        now = time.time()
        state["now"] = now
        if services.db is not None:
            state.update(await trio.to_thread.run_sync(_dashboard_figures, services.db, now))
            state["quota"] = quota_view(**quota_inputs(), figures=state.pop("figures"), now=now)
        else:
            state.update({"recent": [], "trend": [], "usage_today": {}, "quota": quota_view(
                **quota_inputs(), figures={}, now=now)})
        keys = await services.keys.list() if hasattr(services.keys, "list") else []
        usage = state.pop("usage_today")
        state["keys"] = [{"id": k.id, "name": k.name, "tier": k.tier,
                          "today": usage.get(str(k.id), {"requests": 0, "tokens": 0})}
                         for k in keys if k.active]
        if services.cache is None:
            state["cache"] = {"enabled": False}
        else:
            stats = await services.cache.stats()
            state["cache"] = {"enabled": True, "hits": stats.hits, "misses": stats.misses,
                              "entries": stats.entries, "bytes": stats.bytes}
        return state

    async def dashboard_action(name: str, body: dict[str, Any]) -> dict[str, Any]:
        """One of the dashboard's buttons (the caller checked the session and CSRF)."""
        key = str(body.get("key") or "")
        if name == "reset_cooldowns":
            cleared = services.engine.health.reset()
            services.engine.changed()
            return {"message": f"Reset {cleared} cooldown(s) and circuit(s)."}
        if name == "clear_cache" and key:
            deleted = await services.cache.clear(key) if services.cache is not None else 0
            return {"message": f"Deleted {deleted} cached answer(s) of key {key}."}
        if name == "revoke_key" and key and hasattr(services.keys, "revoke"):
            if await services.keys.revoke(key):
                return {"message": f"Revoked the key {key}."}
            raise ApiError(404, f"No active key named {key!r}.", "invalid_request_error",
                           "key_not_found")
        raise ApiError(400, f"Unknown action {name!r}.", "invalid_request_error",
                       "invalid_action")

    _dashboard.add_routes(app, sessions, authenticate=services.keys.authenticate,
                          state=dashboard_state, action=dashboard_action)
    return app


def _dashboard_figures(db: Database, now: float) -> dict[str, Any]:
    """The database's part of the dashboard (blocks): today per key, 30 days, recent rows."""
    rows = usage_report(db, now, days=30)
    today = day_of(now)
    per_key: dict[str, dict[str, int]] = {}
    per_day: dict[str, dict[str, int]] = {}
    for r in rows:
        tokens = int(r["prompt_tokens"]) + int(r["completion_tokens"])
        day = per_day.setdefault(r["day"], {"requests": 0, "tokens": 0})
        day["requests"] += int(r["requests"])
        day["tokens"] += tokens
        if r["day"] == today:
            mine = per_key.setdefault(r["key"], {"requests": 0, "tokens": 0})
            mine["requests"] += int(r["requests"])
            mine["tokens"] += tokens
    start = dt.date.fromisoformat(today) - dt.timedelta(days=29)
    trend = [{"day": d, **per_day.get(d, {"requests": 0, "tokens": 0})}
             for d in ((start + dt.timedelta(days=i)).isoformat() for i in range(30))]
    rows_seen, _ = audit_page(db, limit=200)
    recent = [r for r in reversed(rows_seen) if r["requested_model"]][:20]  # model requests
    return {"usage_today": per_key, "trend": trend, "recent": recent,
            "figures": quota_figures(db, now)}


async def _upkeep(runs: list[Callable[..., Any]], scope: trio.CancelScope, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Each background ``run(task_status=...)`` started, under ``scope``, until cancelled."""
    with scope:
        async with trio.open_nursery() as nursery:
            for run in runs:
                await nursery.start(run)
            task_status.started()


def estimate_tokens(chat: ChatRequest) -> int:
    """About four characters a token over every text part, tool call, tool definition, and
    a flat 1,000 per image (what a CLI hop has no tokenizer to say exactly)."""
    chars = 0
    images = 0
    for message in chat.messages:
        for part in message.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ImagePart):
                images += 1
        chars += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    chars += sum(len(t.name) + len(t.description or "") + len(json.dumps(t.parameters or {}))
                 for t in chat.tools)
    return max(1, -(-chars // 4)) + 1000 * images


def _token_from_headers() -> str | None:
    auth = request.headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def _has_body() -> bool:
    """Whether the request announced a body (a length above 0, or chunked)."""
    return bool(request.content_length) or "chunked" in request.headers.get(
        "Transfer-Encoding", "").lower()


def _from_loopback() -> bool:
    """Whether the client's address is a loopback one (IPv4 127/8 or ``::1``)."""
    addr = request.remote_addr or ""
    return addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1")


def _gauge(actor: ProviderActor) -> ActorGauge:
    stats = actor.statistics()
    return ActorGauge(stats.in_flight, stats.max_concurrent, stats.jobs_refused, stats.warm)


def _actor_stats(actor: ProviderActor) -> dict[str, Any]:
    stats = actor.statistics()
    return {"running": True, "in_flight": stats.in_flight,
            "max_concurrent": stats.max_concurrent, "jobs_started": stats.jobs_started,
            "jobs_refused": stats.jobs_refused,
            "warm": dataclasses.asdict(stats.warm) if stats.warm is not None else None}


def _owner_only() -> None:
    if g.principal.tier != "owner":
        raise ApiError(403, "This endpoint is for the owner's key only.",
                       "permission_error", "owner_only")


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type=JSON)
