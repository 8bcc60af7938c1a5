"""httpx bodies without async-generator leaks (encode/httpx#3686).

httpx reads a response body through a chain of async generators; one abandoned
mid-iteration is finalised by the GC with a ``ResourceWarning`` under trio. :class:`Body`
therefore closes the response first (which closes or releases its connection) and then
drives the iterator until it raises, which finishes the whole chain at once, under a
shielded, bounded scope. :class:`OneShot` sends a request body without httpx's generator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import httpx
import trio

#: How long closing a response may take (TLS close_notify to a stuck peer, say).
CLOSE_GRACE_S: Final = 2.0


class OneShot(httpx.AsyncByteStream):
    """A request body as one chunk, iterated by an object rather than an async generator."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return OneShotIterator(self._body)


class OneShotIterator:
    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body

    def __aiter__(self) -> OneShotIterator:
        return self

    async def __anext__(self) -> bytes:
        body, self._body = self._body, None
        if body is None:
            raise StopAsyncIteration
        return body


class Body:
    """A streamed response body: ``receive()`` gives chunks, then ``None`` at the end."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    async def receive(self) -> bytes | None:
        if self._ended:
            return None
        if self._chunks is None:
            self._chunks = _chunks(self.response)
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            self._ended = True
            return None
        except BaseException:
            self._ended = True  # the exception went through, and so finished, the chain
            raise

    async def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (an error body, a whole JSON completion)."""
        out = bytearray()
        while len(out) < limit and (chunk := await self.receive()) is not None:
            out += chunk
        return bytes(out[:limit])

    async def discard(self) -> None:
        """Close the response and finish the body iterator. Shielded and bounded: safe in
        ``finally`` while cancelled."""
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CLOSE_GRACE_S
            await self.response.aclose()
            # Reading after the close ends in an error raised *inside* the innermost
            # generator, which finishes every generator of the chain.
            for _ in range(10_000):
                if self._ended or self._chunks is None:
                    break
                try:
                    await self.receive()
                except Exception:
                    break


def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive. Without a content coding (OLP asks for
    ``identity``), straight from the transport's stream: ``aiter_bytes`` adds two generators,
    a decoder and a chunker per chunk that would change nothing (ADR 0028). The connection
    goes back to the pool when the response is closed (:meth:`Body.discard`)."""
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    if coding in ("", "identity") and isinstance(response.stream, httpx.AsyncByteStream):
        return response.stream.__aiter__()
    return response.aiter_bytes()
