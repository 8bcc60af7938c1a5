"""The provider's connection pool (``olp.providers.openai_compat._pool.StackPool``) over real
loopback sockets, on the real clock, through httpx as the runner uses it: reuse, the limits
it keeps from httpcore's pool, connections the server closed or that expired, cancellation,
and closing. Every test has a ``trio.fail_after`` hang guard; the mock counts connections."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from functools import partial

import httpcore
import httpx
import pytest
import trio
import trio.testing
from mock_openai_upstream import MockOpenAI, serve_mock

from olp.providers.openai_compat import HttpConfig
from olp.providers.openai_compat._pool import StackPool, stack_pool
from olp.providers.openai_compat._runner import make_client

GUARD_S = 10
BODY = json.dumps({"model": "gpt-mock", "stream": True,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()


def client(limits: httpx.Limits | None = None, **kwargs: object) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(limits=limits or httpx.Limits(), **kwargs)  # type: ignore[arg-type]
    assert stack_pool(transport)
    return httpx.AsyncClient(transport=transport, trust_env=False)


def pool_of(c: httpx.AsyncClient) -> StackPool:
    pool = c._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, StackPool)
    return pool


async def answer(c: httpx.AsyncClient, url: str) -> str:
    response = await c.post(url + "/chat/completions", content=BODY,
                            headers={"content-type": "application/json"})
    assert response.status_code == 200
    return response.text


@pytest.fixture
async def mock(nursery: trio.Nursery) -> AsyncIterator[MockOpenAI]:
    yield await nursery.start(serve_mock)


def test_only_a_plain_http1_pool_is_replaced() -> None:
    assert stack_pool(httpx.AsyncHTTPTransport())
    assert not stack_pool(httpx.AsyncHTTPTransport(http2=True))
    assert not stack_pool(httpx.AsyncHTTPTransport(proxy="http://127.0.0.1:9"))
    replaced = httpx.AsyncHTTPTransport()
    stack_pool(replaced)
    assert not stack_pool(replaced)  # once


async def test_requests_one_after_another_share_one_connection(mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client() as c:
            for _ in range(5):
                assert "[DONE]" in await answer(c, mock.base_url)
            assert pool_of(c).idle == 1
        await mock.wait_open_connections(0)  # closing the client closed it
    assert mock.request_count == 5 and mock.connections_total == 1


async def test_concurrent_requests_each_get_a_connection_then_reuse_them(
        mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client() as c:
            for _ in range(3):
                mock.push("success", delay=0.05)
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(answer, c, mock.base_url)
            assert mock.connections_total == 3 and pool_of(c).idle == 3
            for _ in range(4):
                await answer(c, mock.base_url)
            assert mock.connections_total == 3 and mock.open_connections == 3
    assert mock.request_count == 7


async def test_idle_connections_beyond_the_keepalive_limit_are_closed(
        mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(max_keepalive_connections=1)) as c:
            for _ in range(3):
                mock.push("success", delay=0.05)
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(answer, c, mock.base_url)
            await mock.wait_open_connections(1)
            assert pool_of(c).idle == 1


async def test_max_connections_makes_the_next_request_wait(mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(max_connections=1)) as c:
            first = await c.send(c.build_request(
                "POST", mock.base_url + "/chat/completions", content=BODY), stream=True)
            done = trio.Event()

            async def second() -> None:
                await answer(c, mock.base_url)
                done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(second)
                await trio.testing.wait_all_tasks_blocked()
                assert not done.is_set()  # waiting for the one connection
                await first.aread()
                await first.aclose()
            assert done.is_set()
    assert mock.connections_total == 1 and mock.request_count == 2


async def test_a_request_waits_no_longer_than_its_pool_timeout(mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(max_connections=1)) as c:
            first = await c.send(c.build_request(
                "POST", mock.base_url + "/chat/completions", content=BODY), stream=True)
            with pytest.raises(httpx.PoolTimeout):
                await c.post(mock.base_url + "/chat/completions", content=BODY,
                             timeout=httpx.Timeout(None, pool=0.05))
            await first.aclose()
            assert "[DONE]" in await answer(c, mock.base_url)  # its slot was not kept


async def test_a_response_cancelled_mid_body_closes_its_connection_and_frees_its_slot(
        mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(max_connections=1)) as c:
            mock.push("success", delay=0.3)
            with trio.move_on_after(0.1):
                async with c.stream("POST", mock.base_url + "/chat/completions",
                                    content=BODY) as response:
                    async for _ in response.aiter_raw():
                        pass
            await mock.wait_open_connections(0)  # a body cut short cannot be reused
            assert pool_of(c).idle == 0
            assert "[DONE]" in await answer(c, mock.base_url)  # the one slot is free
    assert mock.connections_total == 2


async def test_a_request_cancelled_before_its_answer_frees_its_slot(mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(max_connections=1)) as c:
            mock.push("hang")
            with trio.move_on_after(0.1):
                await answer(c, mock.base_url)
            await mock.wait_open_connections(0)
            assert "[DONE]" in await answer(c, mock.base_url)


async def test_connections_past_their_keepalive_expiry_are_not_reused(
        mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(keepalive_expiry=0.05)) as c:
            for _ in range(2):
                mock.push("success", delay=0.05)
            async with trio.open_nursery() as nursery:
                for _ in range(2):
                    nursery.start_soon(answer, c, mock.base_url)
            assert pool_of(c).idle == 2
            await trio.sleep(0.1)  # both expire
            await answer(c, mock.base_url)
            await mock.wait_open_connections(1)  # both expired ones closed, one new kept
            assert pool_of(c).idle == 1
    assert mock.connections_total == 3


async def test_the_oldest_idle_connection_is_retired_once_expired(mock: MockOpenAI) -> None:
    """Requests take the newest idle connection, so the oldest may never be taken again: the
    end of a response closes it once it has expired."""
    with trio.fail_after(GUARD_S):
        async with client(httpx.Limits(keepalive_expiry=0.4)) as c:
            for _ in range(2):
                mock.push("success", delay=0.05)
            async with trio.open_nursery() as nursery:
                for _ in range(2):
                    nursery.start_soon(answer, c, mock.base_url)
            assert pool_of(c).idle == 2
            await trio.sleep(0.3)
            await answer(c, mock.base_url)  # takes the newest: its expiry starts again
            await trio.sleep(0.2)  # the oldest has expired, the newest not
            await answer(c, mock.base_url)
            await mock.wait_open_connections(1)
            assert pool_of(c).idle == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    """A server that closes a keep-alive connection after its answer (without saying so):
    the next request finds it readable (at its end) and opens another, without an error."""
    accepted = 0

    async def serve(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await stream.aclose()

    with trio.fail_after(GUARD_S):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, serve, 0,
                                                    host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            async with client() as c:
                for _ in range(3):
                    response = await c.post(f"http://127.0.0.1:{port}/", content=b"{}")
                    assert response.text == "ok"
                    await trio.sleep(0.05)  # the server's close has arrived
            nursery.cancel_scope.cancel()
    assert accepted == 3


async def test_closing_the_pool_closes_idle_connections_and_keeps_no_more(
        mock: MockOpenAI) -> None:
    with trio.fail_after(GUARD_S):
        transport = httpx.AsyncHTTPTransport()
        assert stack_pool(transport)
        pool = transport._pool
        assert isinstance(pool, StackPool)
        request = httpcore.Request("POST", mock.base_url + "/chat/completions", content=BODY,
                                   headers=[(b"host", b"127.0.0.1"),
                                            (b"content-length", str(len(BODY)).encode())])
        open_response = await pool.handle_async_request(request)
        idle_response = await pool.handle_async_request(request)
        await idle_response.aread()
        await idle_response.aclose()
        assert pool.idle == 1
        await pool.aclose()
        await mock.wait_open_connections(1)  # the one in use is still open
        await open_response.aread()
        await open_response.aclose()
        await mock.wait_open_connections(0)  # its end closed it: a closed pool keeps none
        assert pool.idle == 0


async def test_a_scheme_other_than_http_is_refused() -> None:
    pool = StackPool(httpcore.AsyncConnectionPool())
    with pytest.raises(httpcore.UnsupportedProtocol):
        await pool.handle_async_request(httpcore.Request("GET", "ftp://127.0.0.1/"))



async def test_a_providers_client_uses_it() -> None:
    async with make_client(HttpConfig(base_url="http://127.0.0.1:9/v1", trust_env=False)) as c:
        assert isinstance(pool_of(c), StackPool)


async def test_a_busy_providers_connections_are_all_kept(mock: MockOpenAI) -> None:
    """More jobs at once than httpx keeps idle by default (20): every connection is found
    again by the next wave, none is closed and opened anew."""
    async with make_client(HttpConfig(base_url=mock.base_url, trust_env=False)) as c:
        with trio.fail_after(GUARD_S):
            for _wave in range(2):
                for _ in range(30):
                    mock.push("success", delay=0.05)
                async with trio.open_nursery() as nursery:
                    for _ in range(30):
                        nursery.start_soon(answer, c, mock.base_url)
                assert pool_of(c).idle == 30
    assert mock.request_count == 60 and mock.connections_total == 30

