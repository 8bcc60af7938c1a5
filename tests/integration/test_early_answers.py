"""An answer given before the request body was read (401 wrong key, 413 too large, 415 wrong
content type) never leaves the connection hanging: the server says ``Connection: close`` and
closes it, so the client's next request goes out on a fresh connection and is answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy

from olp.http._linger import LINGER_MAX_S

MIB = 1024 * 1024


def config() -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE),
                      "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"max_body_bytes": 5 * MIB}}


async def test_the_sdk_gets_a_413_then_its_next_call_on_the_same_client_succeeds(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config()) as proxy:
            client = proxy.client().with_options(timeout=20)
            big = [{"role": "user", "content": "x" * (6 * MIB)}]
            small = [{"role": "user", "content": "hi"}]

            def too_large() -> None:
                client.chat.completions.create(model="sonnet", messages=big)  # type: ignore

            with pytest.raises(openai.APIStatusError) as caught:
                await in_thread(too_large)
            assert caught.value.status_code == 413
            assert caught.value.response.headers["connection"] == "close"
            done = await in_thread(lambda: client.chat.completions.create(
                model="sonnet", messages=small))  # type: ignore[arg-type]
            assert done.choices[0].message.content == "Hello from the mock upstream."


async def _exchange(stream: trio.SocketStream, request: bytes) -> tuple[bytes, bytes]:
    """Send ``request`` (which may not be read at all: a send that fails because the server
    closed is fine) and read one response: (head, whatever followed the head)."""
    async def send() -> None:
        try:
            await stream.send_all(request)
        except trio.BrokenResourceError:
            pass  # the server answered early and closed: what is tested is the answer

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = await stream.receive_some(65536)
            assert chunk, f"closed before a response head: {buf!r}"
            buf += chunk
        nursery.cancel_scope.cancel()
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _post(proxy: Proxy, token: str, body: bytes, content_type: str = "application/json"
          ) -> bytes:
    host = proxy.url.removeprefix("http://")
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("whole_body", [True, False])
@pytest.mark.parametrize(("token", "content_type", "status"), [
    ("wrong-key", "application/json", b"401"),
    (None, "text/plain", b"415")])
async def test_a_raw_connection_after_an_early_answer_is_closed_never_left_hanging(
        tmp_path: Path, token: str | None, content_type: str, status: bytes,
        whole_body: bool) -> None:
    """A 2 MB body, sent whole (the answer may come while it is still arriving) or only its
    first half (the answer surely comes before the rest)."""
    body = json.dumps({"model": "sonnet", "messages": [
        {"role": "user", "content": "x" * (2 * MIB)}]}).encode()
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config()) as proxy:
            host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            async with stream:
                request = _post(proxy, token or proxy.token, body, content_type)
                if not whole_body:
                    request = request[:len(request) - len(body) // 2]
                head, _ = await _exchange(stream, request)
                assert head.split(b" ")[1] == status
                assert b"\r\nconnection: close" in head.lower()
                # The next request on the same connection is never left unanswered: the
                # server has closed it (EOF or reset) within a bounded time: at most the
                # lingering close's wait for the rest of the unfinished body (ADR 0027).
                with trio.fail_after(LINGER_MAX_S + 10):
                    try:
                        await stream.send_all(_post(proxy, proxy.token, b"{}"))
                        while await stream.receive_some(65536):
                            pass  # the rest of the answer's body, then EOF
                    except trio.BrokenResourceError:
                        pass  # reset: closed too
