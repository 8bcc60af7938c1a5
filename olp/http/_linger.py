"""Lingering close: an answer given before its request's body has all arrived (a wrong key's
401, a 403, 413, 415, 429; see ``_close_if_body_unread`` in :mod:`._app`) waits for the rest of
that body, reading and discarding it, before the response ends.

Hypercorn closes the connection as soon as such a response ends, and a socket closed with
unread data in it is reset by the kernel: the answer still in flight is destroyed, and a
client that writes its whole body before reading (Python's ``http.client``, so ``urllib``)
gets ``BrokenPipeError`` or ``ConnectionResetError`` instead of the status. Reading the rest
first lets every client read the answer; the wait is bounded (ADR 0027).
"""

from __future__ import annotations

from typing import Any

import trio

#: The most of one request's body read in all (the app's part and the discarded rest).
LINGER_MAX_BYTES = 64 * 1024 * 1024
#: The longest an early answer waits for the rest of its request's body.
LINGER_MAX_S = 5.0


def linger_on_early_answer(app: Any, *, max_bytes: int = LINGER_MAX_BYTES,
                           max_s: float = LINGER_MAX_S) -> Any:
    """The ASGI ``app``, with an HTTP response that ends before its request's body has ended
    holding back its last (empty) body message while the rest of that body is read and
    dropped: until it ends, the client goes, ``max_bytes`` of it have been read, or ``max_s``
    seconds have passed. Not for a body declared longer than ``max_bytes``, nor after a 408
    (the server's bound on a slow body, ``BODY_TIMEOUT``, is over).

    Blocks in that last ``send`` for at most ``max_s`` seconds. Cancelled there, the last
    message is not sent and the cancellation propagates: Hypercorn then closes the
    connection, as it would have without the wait."""
    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        length = _declared_length(scope.get("headers", ()))
        # Nothing to wait for without a body, nor for one too long to be read (its
        # writer would fail all the same).
        unawaited = length is not None and not 0 < length <= max_bytes
        body = _RequestBody(receive, ended=unawaited, max_bytes=max_bytes)
        timed_out = False

        async def send_http(message: Any) -> None:
            nonlocal timed_out
            if message["type"] == "http.response.start":
                timed_out = message["status"] == 408
            elif (message["type"] == "http.response.body" and not message.get("more_body")
                    and not timed_out and not body.done()):
                if message.get("body"):
                    await send({**message, "more_body": True})
                await body.discard_rest(max_s)
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await app(scope, body.receive, send_http)

    return asgi


class _RequestBody:
    """One request's ``receive``, shared by the app and the linger: both count what they
    read (the app's task may still be receiving while the linger reads)."""

    def __init__(self, receive: Any, *, ended: bool, max_bytes: int) -> None:
        self._receive = receive
        self._ended = ended
        self._max_bytes = max_bytes
        self._read = 0
        self._answered = False
        self._lingering: trio.CancelScope | None = None

    def done(self) -> bool:
        """Whether there is nothing (more) to wait for: the body has ended, the client has
        gone, or ``max_bytes`` have been read."""
        return self._ended or self._read >= self._max_bytes

    async def receive(self) -> Any:
        """The app's ``receive``: once it has answered, body messages come without their
        bytes; the one that ends the wait ends the linger too."""
        message = await self._receive()
        self._note(message)
        if self._lingering is not None and self.done():
            self._lingering.cancel()
        if self._answered and message["type"] == "http.request":
            return {**message, "body": b""}
        return message

    async def discard_rest(self, max_s: float) -> None:
        """Read and drop body messages until :meth:`done` or ``max_s`` seconds have passed."""
        self._answered = True
        with trio.move_on_after(max_s) as self._lingering:
            while not self.done():
                self._note(await self._receive())
        self._lingering = None

    def _note(self, message: Any) -> None:
        if message["type"] == "http.request":
            self._read += len(message.get("body", b""))
            if not message.get("more_body", False):
                self._ended = True
        elif message["type"] == "http.disconnect":
            self._ended = True


def _declared_length(headers: Any) -> int | None:
    """The request body's announced length: ``Content-Length``, 0 without one, ``None`` when
    chunked (unknown)."""
    length = 0
    for name, value in headers:
        name = bytes(name).lower()
        if name == b"transfer-encoding" and b"chunked" in bytes(value).lower():
            return None
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:  # Hypercorn refuses it; a test client may not
                return None
    return length
