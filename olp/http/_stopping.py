"""The end of the server's drain grace, as seen by the requests still in flight.

On the first SIGTERM/SIGINT the server stops accepting connections and lets in-flight
requests run for ``server.drain_grace_s``; :mod:`olp.runtime.server` sets :class:`Stopping` when
that grace is over, a moment before Hypercorn cancels what is left. A stream then ends with
an ``error`` event (``server_shutting_down``) and a complete body; a request whose response
has not started gets a ``503`` instead (see ``docs/architecture.md``, shutdown). The server
wraps the app in :func:`drain_aware` for the second, and for the shielded last ``send``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import trio

from ._dialect import dialect_for_path
from ._errors import ApiError

log = logging.getLogger("olp.http")

SHUTDOWN_MESSAGE = "server shutting down"
SHUTDOWN_CODE = "server_shutting_down"
#: What a request cut before its response started is told.
SHUTDOWN_ERROR = ApiError(503, SHUTDOWN_MESSAGE, "api_error", SHUTDOWN_CODE)


class Stopping:
    """Set by the server once its drain grace is over: the waits run under :meth:`cut`
    are cancelled then (at once, for any entered later), so what is still in flight can
    tell its client before the connections close."""

    def __init__(self) -> None:
        self._scopes: set[trio.CancelScope] = set()
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        for scope in self._scopes:
            scope.cancel(reason=SHUTDOWN_MESSAGE)

    @contextmanager
    def cut(self) -> Iterator[trio.CancelScope]:
        """A cancel scope (to be entered in this task only) cancelled when this is set;
        check its ``cancelled_caught`` afterwards."""
        scope = trio.CancelScope()
        if self._set:
            scope.cancel(reason=SHUTDOWN_MESSAGE)
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def release(self, scope: trio.CancelScope) -> None:
        """Stop cancelling ``scope`` when this is set (it stays entered)."""
        self._scopes.discard(scope)


#: The running server's :class:`Stopping` (set by :mod:`olp.runtime.server` for its tasks); ``None``
#: when the app runs without one (tests): streams then never end for a shutdown.
STOPPING: ContextVar[Stopping | None] = ContextVar("olp_stopping", default=None)


def drain_aware(app: Any, stopping: Stopping) -> Any:
    """The ASGI ``app``, for HTTP requests, with its last body message sent shielded and the
    end of the drain grace answered.

    Hypercorn arms a connection's keep-alive timer from inside that last ``send``, after it
    has told the app the stream is closed; Quart-Trio cancels its request task on hearing so.
    Cancelled there, the timer never starts: the idle connection would stay open forever and
    hold a SIGTERM drain for its whole grace period. (Hypercorn shields the socket write
    itself already, so this adds no new wait.)

    A request whose response has not started when ``stopping`` is set is cancelled (its
    engine work, and so its CLI, with it) and answered ``503 server_shutting_down``; once the
    response has started, its body ends itself (a chat stream with an ``error`` event)."""
    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = False
        with stopping.cut() as cut:
            async def send_http(message: Any) -> None:
                nonlocal started
                if not started:
                    if cut.cancel_called:  # too late: the 503 below goes out instead
                        await trio.lowlevel.checkpoint()  # raises Cancelled
                        return
                    started = True
                    stopping.release(cut)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    with trio.CancelScope(shield=True):
                        await send(message)
                else:
                    await send(message)

            await app(scope, receive, send_http)
        if not started and cut.cancel_called:
            await _answer_shutting_down(scope, send)

    return asgi


async def _answer_shutting_down(scope: Any, send: Any) -> None:
    body = dialect_for_path(str(scope.get("path", ""))).error_body(SHUTDOWN_ERROR)
    await send({"type": "http.response.start", "status": SHUTDOWN_ERROR.status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    with trio.CancelScope(shield=True):
        await send({"type": "http.response.body", "body": body, "more_body": False})
    log.info("request cut by the end of the drain", extra={
        "path": scope.get("path"), "status": SHUTDOWN_ERROR.status, "outcome": "shutdown"})
