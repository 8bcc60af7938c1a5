"""The real ``qwen`` CLI (npm ``@qwen-code/qwen-code@0.24.4``, pinned) through ``olp start``,
confined by bubblewrap, against the loopback OpenAI-compatible mock in
``tests/support/mock_openai_upstream``, driven by the official ``openai`` SDK.

qwen is pointed at the mock by ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` in the provider's
``env`` (a per-token key: ``metered: true``; qwen is risk tier B: ``consent: true``). OLP's
own settings (``model.generationConfig.maxRetries: 0``) leave qwen only its 7 silent attempts
on a 429. Needs ``OLP_REAL_QWEN``; qwen takes ~2-4 s to start.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_openai_upstream import MockOpenAI, serve_mock
from olp_harness import alive, descendants, in_thread, real_cli, run_proxy, wait_until

KEY = "sk-mock-qwen-0000"
MODEL = "qwen3-coder-plus"  # the registry's model behind the alias "qwen-coder"
ANSWER = "Hello from the mock upstream."
SYSTEM = "SYSTEM-MARKER-71c2: you are terse."
USER = "USER-MARKER-4e0a: say hello in four words."
MESSAGES: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
STREAM_MESSAGES: list[Any] = [*MESSAGES[:1], {"role": "user", "content": f"{USER} Stream it."}]


def config(qwen: str, mock: MockOpenAI, **block: Any) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"anthropic": False, "openai": False, "mistral": False, "qwen": True},
            "qwen": {
                "binary": qwen,
                "consent": True,  # tier B: the owner accepts the key-revocation risk
                "metered": True,  # the mock's key is a per-token OPENAI_API_KEY
                "max_concurrent": 2,
                "env": {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock.base_url},
                "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55},
                **block,
            },
        },
        "server": {"kill_grace_s": 1},
    }


def proxy_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "user-home"  # no developer's own ~/.qwen or keys leak into a spawn
    home.mkdir(exist_ok=True)
    return {"HOME": str(home)}


async def start(nursery: trio.Nursery, scenario: str = "success", **options: Any) -> MockOpenAI:
    mock: MockOpenAI = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options))
    return mock


def chats(mock: MockOpenAI) -> list[dict[str, Any]]:
    return [r for r in mock.requests if r["route"] == "/v1/chat/completions"]


def user_text(body: dict[str, Any]) -> str:
    """The prompt qwen sent: the last text part of its user message."""
    [user] = [m for m in body["messages"] if m["role"] == "user"]
    content = user["content"]
    if isinstance(content, str):
        return content
    return str([p["text"] for p in content if p.get("type") == "text"][-1])


async def test_stream_with_token_deltas_and_usage(tmp_path: Path,
                                                  nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "success", delay=0.05)
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:

            def consume() -> tuple[list[str], Any, dict[str, str]]:
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="qwen-coder", messages=STREAM_MESSAGES, stream=True,
                        stream_options={"include_usage": True}) as response:
                    texts, usage = [], None
                    for chunk in response.parse():
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                        usage = chunk.usage or usage
                    return texts, usage, dict(response.headers)

            texts, usage, headers = await in_thread(consume)
            assert descendants(proxy.process.pid) == set()
    assert texts == ["Hello", " from", " the mock", " upstream."]  # token deltas
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (21, 4)
    assert headers["x-olp-provider-used"] == "qwen"
    [request] = chats(mock)
    body = request["body"]
    assert body["model"] == MODEL and body["stream"] is True and body["tools"] == []
    assert request["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(SYSTEM)  # QWEN_SYSTEM_MD
    assert f"{USER} Stream it." in user_text(body) and SYSTEM not in user_text(body)


async def test_non_stream(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery)
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="qwen-coder", messages=[MESSAGES[1]]))
            assert descendants(proxy.process.pid) == set()
    completion = raw.parse()
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 4)
    assert raw.headers["x-olp-provider-used"] == "qwen"
    [request] = chats(mock)
    assert user_text(request["body"]).startswith(USER)


async def test_a_401_is_an_auth_failure_not_content(tmp_path: Path,
                                                    nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "auth")
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    for _ in proxy.client().chat.completions.create(
                            model="qwen-coder", messages=MESSAGES, stream=True):
                        pass
                return info.value

            err = await in_thread(call)
            assert descendants(proxy.process.pid) == set()
    assert err.response.json()["error"]["code"] == "upstream_auth_failed"
    assert "[API Error" not in err.response.text or "error" in err.response.json()
    assert len(chats(mock)) == 1  # no retry of a 401


async def test_a_429_is_answered_by_the_next_hop(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "rate_limit", retry_after=1)
        backup = await start(nursery)
        cfg = config(qwen, mock)
        cfg["providers"]["router"] = {"kind": "openai-compatible", "base_url": backup.base_url,
                                      "api_key_env": "ROUTER_KEY", "metered": True}
        cfg["auth"] = {"fallback_detail_header_policy": "all"}
        cfg["routing"] = {"chains": {"family": [
            {"name": "qwen", "provider": "qwen", "model": MODEL, "metered": True},
            {"name": "backup", "provider": "router", "model": "backup-model",
             "metered": True}]}}
        started = trio.current_time()
        async with run_proxy(tmp_path / "home", cfg,
                             env={**proxy_env(tmp_path), "ROUTER_KEY": "sk-r"}) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="family", messages=MESSAGES))
            elapsed = trio.current_time() - started
            assert descendants(proxy.process.pid) == set()
    completion = raw.parse()
    assert completion.choices[0].message.content == ANSWER
    assert raw.headers["x-olp-served-by"] == "backup"
    assert '"RATE_LIMITED"' in raw.headers["x-olp-fallback-detail"]
    # maxRetries 0: qwen's own 7 attempts only (Retry-After 1 s), then it reports the 429
    assert 1 <= len(chats(mock)) <= 7
    assert len(chats(backup)) == 1
    print(f"429 on qwen -> backup answered after {elapsed:.1f} s")


async def test_client_gone_mid_stream_leaves_no_process(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "success", delay=0.5,
                           deltas=tuple(f" chunk{i}" for i in range(60)))
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            # a raw socket: the client hangs up exactly when told, no generator left behind
            host, port = proxy.url.removeprefix("http://").split(":")
            payload = json.dumps({"model": "qwen-coder", "messages": MESSAGES,
                                  "stream": True}).encode()
            head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                    f"Authorization: Bearer {proxy.token}\r\n"
                    "Content-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n").encode()
            sock = await trio.open_tcp_stream(host, int(port))
            received = b""
            async with sock:
                await sock.send_all(head + payload)
                while b"chunk" not in received:  # qwen is mid-answer ...
                    data = await sock.receive_some(65536)
                    assert data, received
                    received += data
                seen = descendants(proxy.process.pid)
                commands = [_cmdline(p) for p in seen]
                assert any(c.split(" ", 1)[0].endswith("bwrap") for c in commands)  # confined
                assert any(c.split(" ", 1)[0].endswith("node") for c in commands), commands
            # ... and the client has hung up
            gone = await wait_until(lambda: not any(alive(p) for p in seen), within=10.0)
            assert gone, "a qwen process outlived the client's disconnect"
            assert descendants(proxy.process.pid) == set()
            [chat] = chats(mock)
            with trio.fail_after(5):
                record = await mock.wait_for_outcome(chat["n"])
            assert record["outcome"] == "client_disconnected"
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["qwen"]["in_flight"] == 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
