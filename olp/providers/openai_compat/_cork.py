"""A request's head and body in one ``send``: network streams that hold writes until a read.

httpcore writes an HTTP/1.1 request as two socket writes (the head, then the body), so the
upstream is woken twice and the proxy pays two system calls and two scheduler passes before
it can wait for the answer. :class:`CorkedBackend` wraps httpcore's network backend so each
connection's stream keeps what is written until the next read (when the request is complete
and the answer is awaited) or until :data:`FLUSH_AT` bytes are held, whichever comes first.
A write that fails then fails in that read, as the same ``httpcore.WriteError``.
"""

from __future__ import annotations

import ssl
import typing
from collections.abc import Iterable
from typing import Final

import httpcore
import httpx

#: Held bytes that are sent at once, without waiting for a read (a large request body).
FLUSH_AT: Final = 64 * 1024

class CorkedStream(httpcore.AsyncNetworkStream):
    """Holds writes until the next read, :meth:`flush` or :data:`FLUSH_AT` bytes."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held = bytearray()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._held += buffer
        if len(self._held) >= FLUSH_AT:
            await self.flush(timeout)

    async def flush(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Send what is held (nothing to send: no checkpoint)."""
        if self._held:
            data = bytes(self._held)
            self._held.clear()
            await self._stream.write(data, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        await self.flush(timeout)
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held.clear()
        await self._stream.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109
        await self.flush(timeout)  # e.g. a proxy's CONNECT, already answered by now
        return CorkedStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class CorkedBackend(httpcore.AsyncNetworkBackend):
    """``backend`` with every stream it opens wrapped in :class:`CorkedStream`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[typing.Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        return CorkedStream(await self._backend.connect_tcp(
            host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109
                                  socket_options: Iterable[typing.Any] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        return CorkedStream(await self._backend.connect_unix_socket(
            path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def cork(transport: httpx.AsyncHTTPTransport) -> bool:
    """Make ``transport``'s connection pool open corked streams; whether it could.

    httpx has no public way to give its transport a network backend, so this replaces the
    one its httpcore pool keeps; with an httpcore whose pool has none, nothing changes.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(backend, httpcore.AsyncNetworkBackend):
        return False
    if not isinstance(backend, CorkedBackend):
        pool._network_backend = CorkedBackend(backend)  # type: ignore[union-attr]
    return True
