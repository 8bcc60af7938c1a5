"""The raw h11 client the mocks' self-tests use: one HTTP/1.1 connection, so that a test
hangs up exactly where it says."""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import urlsplit

import h11
import trio

_RECV = 65536


class Bound(Protocol):
    host: str
    port: int


class MockClient:
    """One HTTP/1.1 connection to a mock."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)
        self._sse = b""

    @classmethod
    async def open(cls, mock: Bound) -> MockClient:
        """Connect to a mock's handle (its ``host`` and ``port``)."""
        return cls(await trio.open_tcp_stream(mock.host, mock.port))

    @classmethod
    async def open_url(cls, url: str) -> MockClient:
        """Connect to the host and port of ``url`` (e.g. a ``LISTENING`` line's)."""
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None, url
        return cls(await trio.open_tcp_stream(parts.hostname, parts.port))

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def send(self, method: str, path: str, body: Any = None,
                   headers: tuple[tuple[str, str], ...] = (), raw: bytes | None = None) -> None:
        """Send a request: ``body`` as JSON, or the ``raw`` bytes."""
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        hdrs = [("host", "mock"), ("content-length", str(len(data))), *headers]
        if body is not None:
            hdrs.append(("content-type", "application/json"))
        for event in (h11.Request(method=method, target=path, headers=hdrs), h11.Data(data=data)):
            await self.stream.send_all(self.conn.send(event))
        await self.stream.send_all(self.conn.send(h11.EndOfMessage()))

    async def event(self) -> Any:
        """The next h11 event of the response."""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive_some(_RECV))
                continue
            return event

    async def response(self) -> h11.Response:
        event = await self.event()
        assert isinstance(event, h11.Response), event
        return event

    async def body(self) -> bytes:
        out = b""
        while not isinstance(event := await self.event(), h11.EndOfMessage):
            out += event.data
        return out

    async def sse_block(self) -> str | None:
        """The next SSE event's lines (up to the blank line), or None at the end."""
        while b"\n\n" not in self._sse:
            event = await self.event()
            if isinstance(event, h11.EndOfMessage):
                assert self._sse == b""
                return None
            self._sse += event.data
        block, self._sse = self._sse.split(b"\n\n", 1)
        return block.decode()

    async def sse(self) -> tuple[str, dict[str, Any]] | None:
        """The next SSE event as ``(event, JSON data)``, or None at the end."""
        block = await self.sse_block()
        if block is None:
            return None
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        return fields["event"], json.loads(fields["data"])

    async def request(self, method: str, path: str, body: Any = None,
                      **kw: Any) -> tuple[h11.Response, Any]:
        """Send a request; the response and its JSON body."""
        await self.send(method, path, body, **kw)
        response = await self.response()
        return response, json.loads(await self.body())

    def start_next(self) -> None:
        """Ready the connection for its next request (keep-alive)."""
        self.conn.start_next_cycle()


def header(response: h11.Response, name: str) -> str | None:
    """The value of header ``name`` (lower case), or None."""
    for key, value in response.headers:
        if key.decode() == name:
            return value.decode()
    return None
