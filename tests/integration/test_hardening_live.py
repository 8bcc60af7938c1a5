"""The red team's findings (#29) against a real ``olp start`` over real sockets: a rebound
``Host`` is refused (with ``auth.allow_anonymous`` and ``server.metrics: "loopback"``, where
the peer address alone let it in), a body that never finishes is cut at
``server.body_timeout_s``, and ``config.json`` is made 0600 at start."""

from __future__ import annotations

import socket
import stat
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy


def config() -> dict[str, Any]:
    claude = {"binary": str(FAKE_CLAUDE), "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}
    return {"providers": {"enabled": {"openai": False, "mistral": False}, "anthropic": claude},
            "auth": {"allow_anonymous": True},
            "server": {"metrics": "loopback", "dashboard": "loopback", "body_timeout_s": 1}}


def raw_exchange(url: str, request: bytes) -> bytes:
    """Send ``request`` on a fresh connection and read until the proxy closes it."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_rebinding_slow_bodies_and_the_config_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chat = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}]}
    with trio.fail_after(90):
        async with run_proxy(home, config()) as proxy:
            mode = stat.S_IMODE((home / "config.json").stat().st_mode)

            def rebound(path: str, method: str = "GET") -> httpx.Response:
                return httpx.request(method, f"{proxy.url}{path}", timeout=10,
                                     json=chat if method == "POST" else None,
                                     headers={"Host": "attacker.example:4567",
                                              "Origin": "http://attacker.example:4567"})

            metrics = await in_thread(lambda: rebound("/metrics"))
            answer = await in_thread(lambda: rebound("/v1/chat/completions", "POST"))
            dashboard = await in_thread(lambda: rebound("/dashboard"))
            local = await in_thread(lambda: httpx.get(f"{proxy.url}/metrics", timeout=10))
            slow = await in_thread(lambda: raw_exchange(proxy.url, (
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                b'{"model": "claude-sonnet-4-6", ')))
    assert mode == 0o600
    for refused in (metrics, answer, dashboard):
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "host_not_allowed"
    assert local.status_code == 200 and "olp_requests_total" in local.text
    assert slow.startswith(b"HTTP/1.1 408 ")
    assert b"request_timeout" in slow
