"""Reading newline-delimited output from a byte stream, without async generators."""

from __future__ import annotations

import trio


class LineTooLong(Exception):
    """A line grew past the reader's limit without a newline."""


class LineReader:
    """Splits a :class:`trio.abc.ReceiveStream` into lines (``\\n`` removed, ``\\r\\n`` too).

    A class, not an async generator, so a half-read stream needs no finalisation (an async
    generator abandoned mid-read would be finalised later, outside any cancel scope).
    :meth:`receive_line` is cancel-safe: a cancelled call loses no data.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, *, max_line: int = 16 << 20) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._scanned = 0
        self._eof = False
        self._max = max_line

    async def receive_line(self) -> bytes | None:
        """The next line, or ``None`` at end of stream. Blocks until a line is complete.

        Raises :class:`LineTooLong` when a line exceeds ``max_line`` bytes.
        """
        while True:
            idx = self._buf.find(b"\n", self._scanned)
            if idx >= 0:
                line = bytes(self._buf[:idx])
                del self._buf[: idx + 1]
                self._scanned = 0
                return line.removesuffix(b"\r")
            self._scanned = len(self._buf)
            if self._eof:
                if not self._buf:
                    return None
                line = bytes(self._buf)
                self._buf.clear()
                self._scanned = 0
                return line
            if len(self._buf) > self._max:
                raise LineTooLong(f"line longer than {self._max} bytes")
            chunk = await self._stream.receive_some(65536)
            if chunk:
                self._buf += chunk
            else:
                self._eof = True
