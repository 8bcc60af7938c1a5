"""A provider's keep-alive connections, the newest idle one handed out first, in O(1).

httpcore's ``AsyncConnectionPool`` goes over every connection it holds on each request and
at each response's end, asking each whether it is idle and whether it has expired (for an
idle one, a readability poll of its socket), counting all of them again for each idle one,
and picks the first that is free: O(C²) work and up to C system calls per request with C
requests in flight (ADR 0029 measures what replacing it saved). A provider sends HTTP/1.1
requests to one origin, so :class:`StackPool` keeps a stack of idle connections per origin
instead: a request takes the newest (only that one is checked), and its response's end puts
it back, or closes it when it cannot be reused. Each end also retires the oldest idle
connection if it has expired, so connections no request takes again do not linger.

The connections themselves are httpcore's (connecting, TLS, HTTP/1.1, keep-alive expiry); the
pool keeps httpcore's limits: at most ``max_connections`` in use (a request waits for one to
be free, up to the request's ``pool`` timeout) and at most ``max_keepalive_connections`` idle.
"""

from __future__ import annotations

import sys
import typing
from collections import deque
from collections.abc import AsyncIterator

import httpcore
import httpx
import trio


class StackPool:
    """Takes over the settings of the plain HTTP/1.1 ``pool`` it replaces (:func:`stack_pool`).

    :meth:`handle_async_request` blocks while ``max_connections`` are in use, then while it
    connects and sends the request and until the response's head has arrived. Cancelled, the
    connection it was using is closed (httpcore does that) and dropped, and its slot freed.
    """

    def __init__(self, pool: httpcore.AsyncConnectionPool) -> None:
        self._ssl_context = pool._ssl_context
        self._keepalive_expiry = pool._keepalive_expiry
        self._retries = pool._retries
        self._local_address = pool._local_address
        self._uds = pool._uds
        self._network_backend = pool._network_backend
        self._socket_options = pool._socket_options
        self._max_idle = pool._max_keepalive_connections
        limit = pool._max_connections
        self._slots = trio.Semaphore(limit) if limit < sys.maxsize else None
        self._idle: dict[_Key, deque[httpcore.AsyncHTTPConnection]] = {}
        self._idle_count = 0
        self._closed = False

    @property
    def idle(self) -> int:
        """How many idle connections are kept."""
        return self._idle_count

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        scheme = request.url.scheme
        if scheme not in (b"http", b"https"):
            raise httpcore.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme.decode()}://'.")
        origin = request.url.origin
        await self._acquire(request.extensions.get("timeout", {}).get("pool"))
        try:
            while True:
                connection = await self._take(origin)
                try:
                    response = await connection.handle_async_request(request)
                except httpcore.ConnectionNotAvailable:
                    await self._close(connection)  # closed since taken: another
                    continue
                except BaseException:
                    await self._close(connection)
                    raise
                break
        except BaseException:
            self._release_slot()
            raise
        assert isinstance(response.stream, typing.AsyncIterable)
        return httpcore.Response(status=response.status, headers=response.headers,
                                 content=_Returning(response.stream, self, origin, connection),
                                 extensions=response.extensions)

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their responses end (the
        pool keeps none after this)."""
        self._closed = True
        idle = [c for stack in self._idle.values() for c in stack]
        self._idle.clear()
        self._idle_count = 0
        for connection in idle:
            await self._close(connection)

    async def __aenter__(self) -> StackPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _acquire(self, timeout: float | None) -> None:  # noqa: ASYNC109
        if self._slots is None:
            await trio.lowlevel.checkpoint()
            return
        if timeout is None:
            await self._slots.acquire()
            return
        with trio.move_on_after(timeout):
            await self._slots.acquire()
            return
        raise httpcore.PoolTimeout("no connection came free within the pool timeout")

    def _release_slot(self) -> None:
        if self._slots is not None:
            self._slots.release()

    async def _take(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        """The newest idle connection to ``origin`` that has not expired, or a new one."""
        stack = self._idle.get(_key(origin))
        while stack:
            connection = stack.pop()
            self._idle_count -= 1
            if connection.is_idle() and not connection.has_expired():
                return connection
            await self._close(connection)
        return httpcore.AsyncHTTPConnection(
            origin=origin, ssl_context=self._ssl_context, keepalive_expiry=self._keepalive_expiry,
            http1=True, http2=False, retries=self._retries, local_address=self._local_address,
            uds=self._uds, network_backend=self._network_backend,
            socket_options=self._socket_options)

    async def _returned(self, origin: httpcore.Origin,
                        connection: httpcore.AsyncHTTPConnection) -> None:
        """A response has ended: keep its connection if it can serve another request."""
        self._release_slot()
        stack = self._idle.setdefault(_key(origin), deque())
        if not self._closed and self._idle_count < self._max_idle and connection.is_idle():
            stack.append(connection)
            self._idle_count += 1
        else:
            await self._close(connection)
        if len(stack) > 1 and stack[0].has_expired():  # the oldest, which no one may take
            self._idle_count -= 1
            await self._close(stack.popleft())

    @staticmethod
    async def _close(connection: httpcore.AsyncHTTPConnection) -> None:
        with trio.CancelScope(shield=True):
            await connection.aclose()


_Key = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _Key:
    """``origin`` as a dict key (httpcore's ``Origin`` compares by value but has no hash)."""
    return origin.scheme, origin.host, origin.port


class _Returning:
    """A response's body; its end hands the connection back to the pool."""

    def __init__(self, stream: typing.AsyncIterable[bytes], pool: StackPool,
                 origin: httpcore.Origin, connection: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._pool = pool
        self._origin = origin
        self._connection: httpcore.AsyncHTTPConnection | None = connection

    def __aiter__(self) -> AsyncIterator[bytes]:
        # the connection's own stream: it closes itself if reading fails or is cancelled
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            with trio.CancelScope(shield=True):
                close = getattr(self._stream, "aclose", None)
                if close is not None:
                    await close()
        finally:
            await self._pool._returned(self._origin, connection)


def stack_pool(transport: httpx.AsyncHTTPTransport) -> bool:
    """Give ``transport`` a :class:`StackPool` in place of its httpcore pool; whether it
    could. Only a plain HTTP/1.1 pool is replaced: a proxy's, or one that may speak HTTP/2
    (where one connection serves many requests at once), is left as it is.

    httpx has no public way to give its transport a pool, so this replaces the one it keeps
    (httpx and httpcore are pinned: pyproject.toml, requirements/lock.txt)."""
    pool = getattr(transport, "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or pool._http2 or not pool._http1 \
            or pool._proxy is not None:
        return False
    transport._pool = StackPool(pool)  # type: ignore[assignment]
    return True
