"""The loopback HTTP/1.1 server core: h11 over trio, one task per connection.

Shared by the lockdown self-check's vendor mock (``olp.lockdown._vendor_mock``) and the test
suite's mock upstreams (``tests/support/mockhttp`` re-exports it), so both speak the same HTTP.

h11 rather than a framework so that every fault is exact: a mock can stay silent with the
socket open, close without a response or stop mid-body, streams are never cut by a framework
timeout, and a client that goes away is seen at once (``while_watching`` reads the socket while
a response is in flight).
"""

from __future__ import annotations

import functools
import http
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import h11
import trio

MAX_BODY = 64 * 1024 * 1024
_RECV = 65536


class ClientGone(Exception):
    """The peer closed or reset the connection while the mock was sending."""


class Exchange:
    """One request/response on an h11 connection (``stream`` is the raw socket stream)."""

    def __init__(self, conn: h11.Connection, stream: trio.SocketStream,
                 reasons: Mapping[int, bytes] | None = None) -> None:
        self.conn = conn
        self.stream = stream
        self.complete = False  # the whole response was handed to the socket
        self._reasons = reasons or {}

    async def send(self, event: h11.Event) -> None:
        """Send one h11 event; blocks until the socket takes the bytes. Raises ClientGone if
        the client has gone."""
        data = self.conn.send(event)
        if data:
            await self.send_raw(data)
        if isinstance(event, h11.EndOfMessage):
            self.complete = True

    async def send_raw(self, data: bytes) -> None:
        """Write bytes past h11 (e.g. a body h11 would frame); raises ClientGone likewise."""
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ClientGone from exc

    async def respond_json(self, status: int, payload: Any,
                           extra: Sequence[tuple[str, str]] = ()) -> None:
        """A whole JSON response with a content-length (``extra``: more headers)."""
        body = json.dumps(payload).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body))),
                   *extra]
        await self.send(h11.Response(status_code=status, headers=headers,
                                     reason=self._reason(status)))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())

    async def start_sse(self, extra: Sequence[tuple[str, str]] = ()) -> None:
        """The 200 status line and headers of an event stream (chunked); events follow."""
        await self.send(h11.Response(status_code=200, reason=b"OK", headers=[
            ("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache"),
            *extra]))

    async def send_sse(self, data: str, event: str | None = None) -> None:
        """One SSE event: an optional ``event:`` line, then ``data: <data>`` and a blank line."""
        head = "" if event is None else f"event: {event}\n"
        await self.send(h11.Data(data=f"{head}data: {data}\n\n".encode()))

    def _reason(self, status: int) -> bytes:
        if status in self._reasons:
            return self._reasons[status]
        try:
            return http.HTTPStatus(status).phrase.encode()
        except ValueError:
            return b""


Dispatch = Callable[[Exchange, h11.Request, bytes], Awaitable[bool]]
"""Answers one request; returns False when the connection must be closed afterwards."""


async def read_request(conn: h11.Connection,
                       stream: trio.SocketStream) -> tuple[h11.Request, bytes] | None:
    """Read one request and its whole body; None if the client closed cleanly between
    requests. Blocks until the request is complete; a body over MAX_BODY is a 413."""
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(_RECV))
            continue
        if isinstance(event, h11.ConnectionClosed):
            return None
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                raise h11.RemoteProtocolError("request body too large", 413)
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)


async def serve_connection(stream: trio.SocketStream, dispatch: Dispatch,
                           bad_request: Callable[[str], Any],
                           reasons: Mapping[int, bytes] | None = None) -> None:
    """Answer requests on one connection (keep-alive) until the client closes it, goes away,
    or ``dispatch`` says close. A malformed request gets ``bad_request(message)`` as a JSON
    error (status from h11) if a response can still be sent, then the connection is closed."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=256 * 1024)
    try:
        while True:
            got = await read_request(conn, stream)
            if got is None or not await dispatch(Exchange(conn, stream, reasons), *got):
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (ClientGone, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    except h11.RemoteProtocolError as exc:
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                await Exchange(conn, stream, reasons).respond_json(
                    exc.error_status_hint, bad_request(str(exc)))
            except (ClientGone, h11.LocalProtocolError):
                pass


async def while_watching(ex: Exchange, respond: Callable[[], Awaitable[None]]) -> bool:
    """Run ``respond`` while reading the socket, so that a client that goes away is seen at
    once, even while the mock is silent: ``respond`` is then cancelled (or its ClientGone
    swallowed). Returns True if the client closed its side. Bytes that arrive meanwhile (a
    pipelined next request) are buffered in h11."""
    eof = False

    async def watch(cancel_scope: trio.CancelScope) -> None:
        nonlocal eof
        while True:
            try:
                data = await ex.stream.receive_some(_RECV)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                eof = True
                cancel_scope.cancel()
                return
            ex.conn.receive_data(bytes(data))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        try:
            await respond()
        except ClientGone:
            eof = True
        nursery.cancel_scope.cancel()
    return eof


class Bindable(Protocol):
    host: str
    port: int


H = TypeVar("H", bound=Bindable)


async def serve_http(handle: H, dispatch: Dispatch, *, host: str, port: int,
                     bad_request: Callable[[str], Any],
                     reasons: Mapping[int, bytes] | None = None,
                     on_connection: Callable[[int], None] | None = None,
                     task_status: trio.TaskStatus[H] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``dispatch`` over TCP until cancelled. Once bound, sets ``handle.host``/``port``
    and hands ``handle`` to ``task_status.started``. ``on_connection(+1/-1)`` is called as a
    connection opens and after it is closed; ``reasons`` overrides status-line phrases."""

    async def handler(stream: trio.SocketStream) -> None:
        if on_connection is not None:
            on_connection(+1)
        try:
            await serve_connection(stream, dispatch, bad_request, reasons)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            if on_connection is not None:
                on_connection(-1)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handler, port, host=host))
        handle.host, handle.port = listeners[0].socket.getsockname()[:2]
        task_status.started(handle)


def fmt_seconds(value: float | str) -> str:
    """A ``retry-after`` value: whole seconds without ``.0``; a string as given."""
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)
