"""``olp start`` over a real socket: an answer given while the client is still sending its
body (413 too large, 401 wrong key, 415 wrong type) is read by every client, even one that
writes its whole body before reading (``http.client``, so ``urllib``), because the rest of
the body is read before the connection closes; a client that stalls mid-body is closed
within the time bound, and the server goes on serving (olp.http._linger, ADR 0027)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy

from olp.http._linger import LINGER_MAX_S

MIB = 1024 * 1024
HELLO = "Hello from the mock upstream."


def config() -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE),
                      "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"max_body_bytes": 5 * MIB}}


def chat(size: int) -> bytes:
    return json.dumps({"model": "sonnet", "messages": [
        {"role": "user", "content": "x" * size or "hi"}]}).encode()


def headers(token: str, content_type: str = "application/json") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": content_type}


def with_http_client(proxy: Proxy, body: bytes | Iterable[bytes], head: dict[str, str],
                     ) -> tuple[int, dict[str, Any]]:
    """One POST on a new ``http.client`` connection: the whole body is written, then the
    response read (an iterable body goes chunked)."""
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers=head,
                     encode_chunked=not isinstance(body, bytes))
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def test_http_client_reads_every_early_answer_then_its_next_request_succeeds(
        tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with run_proxy(tmp_path / "home", config()) as proxy:
            cases: list[tuple[bytes | list[bytes], dict[str, str], int, str]] = [
                (chat(6 * MIB), headers(proxy.token), 413, "request_too_large"),
                ([b"x" * MIB] * 6, headers(proxy.token), 413, "request_too_large"),
                # 1 MiB may all be in the socket buffers before the answer; 4 MiB is not
                (chat(1 * MIB), headers("wrong-key"), 401, "invalid_api_key"),
                (chat(4 * MIB), headers("wrong-key"), 401, "invalid_api_key"),
                (chat(4 * MIB), headers(proxy.token, "text/plain"), 415,
                 "unsupported_media_type")]
            for body, head, status, code in cases:
                got, answer = await in_thread(partial(with_http_client, proxy, body, head))
                assert (got, answer["error"]["code"]) == (status, code)
            status, answer = await in_thread(lambda: with_http_client(
                proxy, chat(0), headers(proxy.token)))
            assert status == 200, answer
            assert answer["choices"][0]["message"]["content"] == HELLO


async def test_httpx_reads_the_same_answers(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with run_proxy(tmp_path / "home", config()) as proxy:
            def post(body: bytes, token: str) -> httpx.Response:
                return httpx.post(f"{proxy.url}/v1/chat/completions", content=body,
                                  headers=headers(token), timeout=30)

            too_large = await in_thread(lambda: post(chat(6 * MIB), proxy.token))
            assert too_large.status_code == 413
            assert too_large.json()["error"]["code"] == "request_too_large"
            for size in (1 * MIB, 4 * MIB):
                wrong = await in_thread(partial(post, chat(size), "wrong-key"))
                assert wrong.status_code == 401
            ok = await in_thread(lambda: post(chat(0), proxy.token))
            assert ok.status_code == 200, ok.text
            assert ok.json()["choices"][0]["message"]["content"] == HELLO


async def test_a_client_that_stalls_mid_body_is_closed_within_the_bound(
        tmp_path: Path) -> None:
    """Content-Length 6 MiB, 100 KiB sent, then nothing: the 413 comes at once, the
    connection is closed once the linger's time bound is over (well before the guard), and
    the server still answers the next request."""
    async with run_proxy(tmp_path / "home", config()) as proxy:
        host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
        with trio.fail_after(60):
            stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(
                (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                 f"Authorization: Bearer {proxy.token}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {6 * MIB}\r\n\r\n").encode() + b"x" * (100 * 1024))
            received = b""
            with trio.fail_after(4 * LINGER_MAX_S):  # the hang guard: far over the bound
                try:
                    while chunk := await stream.receive_some(65536):
                        received += chunk
                except trio.BrokenResourceError:
                    pass  # reset: closed too
        head, _, body = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 ")
        assert b"\r\nconnection: close" in head.lower()
        assert json.loads(body)["error"]["code"] == "request_too_large"
        with trio.fail_after(60):
            ok = await in_thread(lambda: httpx.post(
                f"{proxy.url}/v1/chat/completions", content=chat(0),
                headers=headers(proxy.token), timeout=30))
        assert ok.status_code == 200, ok.text
