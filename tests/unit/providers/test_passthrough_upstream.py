"""The HTTP runner's lean request path: one prepared request sent through the client's
transport (no cookie jar between jobs), and corked network streams (a request's head and
body leave in one write)."""

from __future__ import annotations

import typing
from collections.abc import Iterable

import httpcore
import httpx
import pytest

from olp.ir import ChatRequest, Event, Message, Stop, TextPart
from olp.providers.openai_compat import HttpConfig, OpenAICompatRunner, make_client
from olp.providers.openai_compat._cork import FLUSH_AT, CorkedBackend, CorkedStream, cork

OK = (b'data: {"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},'
      b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
REQ = ChatRequest(model="alias", messages=(Message(role="user", content=(TextPart(text="hi"),)),))


async def run(runner: OpenAICompatRunner) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(REQ, "served", emit)
    return events


async def test_upstream_cookies_are_not_carried_into_the_next_job() -> None:
    seen: list[httpx.Request] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, content=OK, headers={
            "content-type": "text/event-stream", "set-cookie": "session=caller-a; Path=/"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    runner = OpenAICompatRunner(HttpConfig(base_url="https://up.example/v1"), client=client)
    for _ in range(2):
        assert (await run(runner))[-1] == Stop(finish_reason="stop")
    await client.aclose()
    assert [r.headers.get("cookie") for r in seen] == [None, None]


async def test_request_headers_host_length_and_overrides() -> None:
    seen: list[httpx.Request] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, content=OK, headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    runner = OpenAICompatRunner(HttpConfig(base_url="https://up.example:8443/v1",
                                           api_key="sk-1", headers={"User-Agent": "mine"}),
                                client=client)
    await run(runner)
    await client.aclose()
    (req,) = seen
    body = await req.aread()
    assert req.headers["host"] == "up.example:8443"
    assert req.headers["content-length"] == str(len(body))
    assert req.headers.get_list("user-agent") == ["mine"]  # one value: the config's wins
    assert req.headers["authorization"] == "Bearer sk-1"
    assert req.headers["accept-encoding"] == "identity"


async def test_a_closed_client_sends_nothing() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    runner = OpenAICompatRunner(HttpConfig(base_url="https://up.example/v1"), client=client)
    await client.aclose()
    with pytest.RaisesGroup(RuntimeError, allow_unwrapped=True):
        await run(runner)


class _Recorder(httpcore.AsyncNetworkStream):
    """Records each write; answers every request with a small SSE response."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self._answer = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"content-length: %d\r\n\r\n" % len(OK)) + OK

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self.writes.append(bytes(buffer))

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        answer, self._answer = self._answer, b""
        return answer

    async def aclose(self) -> None:
        pass

    def get_extra_info(self, info: str) -> typing.Any:
        return None


class _RecordingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.streams: list[_Recorder] = []

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[typing.Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        self.streams.append(_Recorder())
        return self.streams[-1]

    async def sleep(self, seconds: float) -> None:
        pass


def _client_over(backend: httpcore.AsyncNetworkBackend) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport()
    transport._pool = httpcore.AsyncConnectionPool(network_backend=backend)
    return httpx.AsyncClient(transport=transport)


async def test_corked_request_head_and_body_leave_in_one_write() -> None:
    plain, corked = _RecordingBackend(), _RecordingBackend()
    for backend in (plain, CorkedBackend(corked)):
        client = _client_over(backend)
        runner = OpenAICompatRunner(HttpConfig(base_url="http://up.test/v1"), client=client)
        assert (await run(runner))[-1] == Stop(finish_reason="stop")
        await client.aclose()
    (sent,) = corked.streams[0].writes
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert sent.endswith(b'"stream_options":{"include_usage":true}}')
    head, body = (w for w in plain.streams[0].writes if w)  # uncorked: two sends
    assert head + body == sent


async def test_corked_stream_sends_a_large_body_without_waiting_for_a_read() -> None:
    inner = _Recorder()
    stream = CorkedStream(inner)
    await stream.write(b"x" * (FLUSH_AT - 1))
    assert inner.writes == []
    await stream.write(b"y")
    assert inner.writes == [b"x" * (FLUSH_AT - 1) + b"y"]
    await stream.write(b"tail")
    await stream.read(100)
    assert inner.writes[-1] == b"tail"


def test_make_client_corks_its_pool() -> None:
    client = make_client(HttpConfig(base_url="http://up.test/v1"))
    transport = client._transport
    assert isinstance(transport, httpx.AsyncHTTPTransport)
    assert isinstance(transport._pool._network_backend, CorkedBackend)
    assert cork(transport)  # idempotent: still corked, not wrapped twice
    assert not isinstance(transport._pool._network_backend._backend,  # type: ignore[attr-defined]
                          CorkedBackend)
