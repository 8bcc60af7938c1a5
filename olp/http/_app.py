"""The Quart-Trio application, assembled: its error handlers, the auth hook (:mod:`._auth`),
the per-request accounting, the cache's and recorder's upkeep while it serves, then the model
routes (:mod:`._chat_routes`) and the owner's (:mod:`._admin_routes`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from olp.actors import ProviderActor

from . import _admin_routes, _chat_routes, _dashboard
from ._auth import Gate, add_auth
from ._dialect import dialect_for_path
from ._errors import ApiError
from ._json_response import JSON
from ._linger import linger_on_early_answer
from ._metrics import ActorGauge, Metrics
from ._services import Services
from ._trace import Trace


def create_app(services: Services) -> QuartTrio:
    """Build the app. Every route needs an OLP key (``Authorization: Bearer`` or
    ``x-api-key``); views raise :class:`ApiError` for OpenAI-shaped failures."""
    app = QuartTrio("olp")
    sessions = _dashboard.Sessions()
    metrics = Metrics(actors=lambda: {n: _gauge(a) for n, a in services.actors.items()},
                      health=services.engine.health.snapshot)
    app.config["MAX_CONTENT_LENGTH"] = services.max_body_bytes
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    app.config["BODY_TIMEOUT"] = services.body_timeout_s  # Quart's 60 s holds a slow guest

    @app.errorhandler(ApiError)
    async def _api_error(exc: ApiError) -> Response:
        """In the dialect of the path asked for (Anthropic's shape under ``/v1/messages``)."""
        g.error_code = exc.code or exc.type
        return Response(dialect_for_path(request.path).error_body(exc), status=exc.status,
                        content_type=JSON, headers=dict(exc.headers))

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        code = {404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
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
            services.recorder.end_windows()  # the 401/404 summaries still open
            await services.recorder.flush()

    @app.after_request
    async def _close_if_body_unread(response: Response) -> Response:
        """An answer given before the request's body was read (a wrong key, a body too large,
        a wrong content type, an unknown route) closes the connection: the rest of that body
        may still be on its way, and the connection must not be left waiting on it."""
        if _has_body() and not g.get("body_read", False):
            response.headers["Connection"] = "close"
        return response

    # ... and before it closes, the rest of that body is read (bounded): every client, even
    # one still writing its body, can then read the answer (:mod:`._linger`, ADR 0027).
    app.asgi_app = linger_on_early_answer(app.asgi_app)  # type: ignore[method-assign]

    @app.after_request
    async def _account(response: Response) -> Response:
        """Every response says its ``X-Request-Id`` and, to a limited key, its
        ``x-ratelimit-*``; a request that changes something or was refused (anything but a
        successful ``GET``) is audited here, or at the end of its stream (401s and 404s over
        a small burst per client are counted, not each written: ADR 0021)."""
        trace: Trace | None = g.get("trace")
        if trace is None:
            return response
        response.headers["X-Request-Id"] = trace.request_id
        trace.client = request.remote_addr  # whose 401s and 404s these are (the throttle)
        for name, value in trace.rate_headers.items():
            response.headers.setdefault(name, value)
        if not trace.deferred and (request.method != "GET" or response.status_code >= 400):
            status = response.status_code
            outcome = trace.outcome or ("ok" if status < 400 else
                                        str(g.get("error_code") or status))
            trace.end(status, outcome, limiter=services.limiter, recorder=services.recorder,
                      metrics=metrics)
        return response

    gate = Gate(services)
    add_auth(app, services, sessions, gate)
    _chat_routes.add_routes(app, services, metrics)
    _admin_routes.add_routes(app, services, metrics, sessions, gate.authenticate)
    return app


async def _upkeep(runs: list[Callable[..., Any]], scope: trio.CancelScope, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Each background ``run(task_status=...)`` started, under ``scope``, until cancelled."""
    with scope:
        async with trio.open_nursery() as nursery:
            for run in runs:
                await nursery.start(run)
            task_status.started()


def _has_body() -> bool:
    """Whether the request announced a body (a length above 0, or chunked)."""
    return bool(request.content_length) or "chunked" in request.headers.get(
        "Transfer-Encoding", "").lower()


def _gauge(actor: ProviderActor) -> ActorGauge:
    stats = actor.statistics()
    return ActorGauge(stats.in_flight, stats.max_concurrent, stats.jobs_refused, stats.warm)
