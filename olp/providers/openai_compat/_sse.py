"""A tolerant, incremental Server-Sent Events decoder (the WHATWG parsing rules).

Bytes go in as they arrive, split anywhere; whole events come out. Lines end in CRLF, LF or
CR (a CR at the end of one chunk and an LF at the start of the next are one line end).
``data:`` lines accumulate (joined with ``\\n``), ``event:`` names the event, a blank line
dispatches it; comments (``: keepalive``) are counted, ``id:``/``retry:`` and unknown fields
ignored. Two tolerances beyond the spec: a trailing line without its line end and a last
event without its blank line are still delivered at EOF (an incomplete JSON payload is then
rejected by the chunk parser, not here), and undecodable UTF-8 is replaced, not fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_LINE_END: Final = re.compile(rb"[\r\n]")
_BOM: Final = "\ufeff"


class SSETooLarge(Exception):
    """One line or event grew beyond the decoder's limit."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str = "message"


class SSEDecoder:
    """Feed bytes with :meth:`feed`, then call :meth:`close` once at EOF."""

    def __init__(self, *, max_event_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_event_bytes = max_event_bytes
        self.comments = 0
        self._buf = bytearray()
        self._skip_lf = False  # the last chunk ended in CR: an LF next is part of that end
        self._first_line = True
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``; raises :class:`SSETooLarge` past the limit."""
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf
        buf += chunk
        out: list[SSEEvent] = []
        pos = 0
        if b"\r" not in buf:  # the usual case, LF line ends only: split at once
            last = buf.rfind(b"\n")
            if last >= 0:
                for line in bytes(buf[:last]).split(b"\n"):
                    self._line(line, out)
                pos = last + 1
        while (m := _LINE_END.search(buf, pos)) is not None:
            end = m.start()
            line = bytes(buf[pos:end])
            if buf[end] == 0x0D:  # CR, maybe CRLF
                if end + 1 < len(buf):
                    pos = end + 2 if buf[end + 1] == 0x0A else end + 1
                else:
                    pos = end + 1
                    self._skip_lf = True
            else:
                pos = end + 1
            self._line(line, out)
        del buf[:pos]
        if len(buf) + self._data_size > self.max_event_bytes:
            raise SSETooLarge(f"an SSE event is over {self.max_event_bytes} bytes")
        return out

    def close(self) -> list[SSEEvent]:
        """EOF: the events still pending (see the module docstring's tolerances)."""
        out: list[SSEEvent] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            self._line(line, out)
        self._dispatch(out)
        return out

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        line = raw.decode("utf-8", "replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            self.comments += 1
            return
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(raw)
            if self._data_size > self.max_event_bytes:
                raise SSETooLarge(f"an SSE event is over {self.max_event_bytes} bytes")
        elif name == "event":
            self._event = value

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._data:
            out.append(SSEEvent(data="\n".join(self._data), event=self._event or "message"))
        self._data = []
        self._data_size = 0
        self._event = ""
