"""The answering side every mock builds on: the ``/_mock/`` control API, recording each other
request, and settling its record once it is answered."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

import h11
import trio

from ._h11 import Exchange, serve_http, while_watching
from ._record import RequestLog

L = TypeVar("L", bound=RequestLog[Any])


class Responder(Generic[L]):
    """Serves a mock's handle: ``/_mock/`` routes go to :func:`control` (unless
    ``CONTROL_API`` is False), every other request is recorded in the handle and answered by
    the mock's :meth:`answer`."""

    CONTROL_API: ClassVar[bool] = True
    REASONS: ClassVar[Mapping[int, bytes]] = {}  # status-line phrases http.HTTPStatus lacks

    def __init__(self, handle: L) -> None:
        self.handle = handle

    async def serve(self, *, host: str, port: int,
                    task_status: trio.TaskStatus[L] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; hands the handle to ``task_status`` once bound."""
        await serve_http(self.handle, self.dispatch, host=host, port=port,
                         bad_request=self.bad_request, reasons=self.REASONS,
                         on_connection=self.connection, task_status=task_status)

    def connection(self, delta: int) -> None:
        """Called with +1 as a connection opens and -1 once it is closed."""

    async def dispatch(self, ex: Exchange, request: h11.Request, body: bytes) -> bool:
        """Answer one request; returns False when the connection must be closed."""
        if self.CONTROL_API:
            route = urlsplit(request.target.decode("latin-1")).path
            if route.startswith("/_mock/"):
                await control(ex, self.handle, request.method.decode("latin-1"), route, body)
                return True
        record = self.handle._record(request, body)
        gate = self.handle.gate
        if gate is not None and (refused := gate(request)) is not None:
            record["refused_by_gate"] = True
            return await self.reply_json(ex, record, *refused)
        return await self.answer(ex, record)

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        """Answer the request ``record`` stands for (its ``method``, ``route``, ``body``) and
        settle the record; returns False when the connection must be closed."""
        raise NotImplementedError

    def bad_request(self, message: str) -> Any:
        """The JSON body of the answer to a malformed request (the vendor's error shape)."""
        raise NotImplementedError

    @staticmethod
    def model_problem(payload: Any) -> str | None:
        """Why a request body is not a JSON object with a string ``model`` (None: it is)."""
        if isinstance(payload, dict) and isinstance(payload.get("model"), str):
            return None
        return "body is not JSON" if payload is None else "model: a string is required"

    def take_scenario(self, record: dict[str, Any]) -> Any:
        """The scenario this request gets (noted in its record)."""
        scenario = self.handle._take_scenario()
        record["scenario"] = scenario.name
        return scenario

    async def reply_json(self, ex: Exchange, record: dict[str, Any], status: int, payload: Any,
                         extra: Sequence[tuple[str, str]] = ()) -> bool:
        """Answer with a whole JSON response and settle the record as completed."""
        record["status"] = status
        await ex.respond_json(status, payload, extra)
        self.handle._finish(record, "completed")
        return True

    def drop(self, record: dict[str, Any], outcome: str = "dropped") -> bool:
        """Settle the record without an answer; returns False: close the connection."""
        self.handle._finish(record, outcome)
        return False

    async def watched(self, ex: Exchange, record: dict[str, Any],
                      respond: Callable[[], Awaitable[str | None]]) -> bool:
        """Run ``respond`` while watching the client (``while_watching``), then settle the
        record: with the outcome ``respond`` returned, else ``completed`` if the whole
        response went out, else ``client_disconnected``. Returns whether the connection can
        serve another request."""
        outcome: str | None = None

        async def run() -> None:
            nonlocal outcome
            outcome = await respond()

        eof = await while_watching(ex, run)
        self.handle._finish(record, outcome or ("completed" if ex.complete
                                                 else "client_disconnected"))
        return ex.complete and not eof


def serve_mock_of(handle_type: Callable[[Any], L], scenario_type: Any,
                  responder_type: Callable[[L], Responder[L]]) -> Callable[..., Awaitable[None]]:
    """A mock's ``serve_mock(*, scenario="success", host="127.0.0.1", port=0, task_status,
    **options)``: serves until cancelled; ``await nursery.start(serve_mock, ...)`` returns the
    handle (a ``handle_type`` with the scenario ``scenario_type.build(scenario, **options)``)
    once the socket is bound."""

    async def serve_mock(*, scenario: str = "success", host: str = "127.0.0.1", port: int = 0,
                         task_status: trio.TaskStatus[L] = trio.TASK_STATUS_IGNORED,
                         **options: Any) -> None:
        handle = handle_type(scenario_type.build(scenario, **options))
        await responder_type(handle).serve(host=host, port=port, task_status=task_status)

    return serve_mock


async def control(ex: Exchange, log: RequestLog[Any], method: str, route: str,
                  body: bytes) -> None:
    """Answer a ``/_mock/...`` request: ``GET|DELETE /_mock/requests``, ``GET|POST
    /_mock/scenario`` (``{"scenario": name, **options}``), ``GET /_mock/health``."""
    if route == "/_mock/requests" and method == "GET":
        await ex.respond_json(200, {"count": log.request_count, "requests": log.requests})
    elif route == "/_mock/requests" and method == "DELETE":
        log.clear_requests()
        await ex.respond_json(200, {"count": 0})
    elif route == "/_mock/scenario" and method == "GET":
        await ex.respond_json(200, {"scenario": log.scenario.as_json()})
    elif route == "/_mock/scenario" and method == "POST":
        try:
            options = json.loads(body or b"{}")
            if not isinstance(options, dict):
                raise ValueError("body must be a JSON object")
            name = options.pop("scenario", None)
            if not isinstance(name, str):
                raise ValueError('"scenario" (a string) is required')
            scenario = log.set_scenario(name, **options)
        except (ValueError, TypeError) as exc:
            await ex.respond_json(400, {"error": str(exc)})
        else:
            await ex.respond_json(200, {"scenario": scenario.as_json()})
    elif route == "/_mock/health" and method == "GET":
        await ex.respond_json(200, {"ok": True})
    else:
        await ex.respond_json(404, {"error": f"no control route {method} {route}"})
