"""The real ``claude`` CLI (pinned, from npm) through ``olp start``, against the loopback mock
Anthropic Messages API in ``tests/support/mock_anthropic``, driven by the official ``openai``
SDK."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_anthropic import MockAnthropic, serve_mock
from olp_harness import Proxy, alive, descendants, in_thread, real_cli, run_proxy, wait_until

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello in four words."},
]


def config(claude: str, mock: MockAnthropic) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {
                "binary": claude,
                # the mock's API key is metered spend: the provider consents (registry models)
                "metered": True,
                "max_concurrent": 2,
                "env": {
                    "ANTHROPIC_BASE_URL": mock.base_url,
                    "ANTHROPIC_API_KEY": "sk-ant-mock-0000",
                    "CLAUDE_CODE_MAX_RETRIES": "1",
                },
                "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55},
            },
        },
        "server": {"kill_grace_s": 1},
    }


async def start(nursery: trio.Nursery, scenario: str, **options: Any) -> MockAnthropic:
    mock: MockAnthropic = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options)
    )
    return mock


async def test_stream_and_usage(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:

            def consume() -> tuple[list[str], Any, dict[str, str], str]:
                with proxy.client().chat.completions.with_streaming_response.create(
                    model="sonnet",
                    messages=MESSAGES,
                    stream=True,
                    stream_options={"include_usage": True},
                ) as response:
                    texts, usage, model = [], None, ""
                    for chunk in response.parse():
                        model = chunk.model
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                        if chunk.usage:
                            usage = chunk.usage
                    return texts, usage, dict(response.headers), model

            texts, usage, headers, model = await in_thread(consume)
    assert texts == ["Hello", " from", " the mock", " upstream."]  # token deltas, live
    assert usage.prompt_tokens == 25 and usage.completion_tokens == 7
    assert model == "claude-sonnet-4-6" and headers["x-olp-provider-used"] == "anthropic"
    [request] = mock.requests
    body = request["body"]
    assert body["model"] == "claude-sonnet-4-6" and body["stream"] is True
    assert "tools" not in body or body["tools"] == []
    assert "You are terse." in str(body["system"])  # from --system-prompt-file
    assert "Say hello in four words." in str(body["messages"])  # from stdin


async def test_non_stream(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            completion = await in_thread(
                lambda: proxy.client().chat.completions.create(
                    model="claude-sonnet-4-6", messages=MESSAGES
                )
            )
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (25, 7)


@pytest.mark.parametrize(
    ("scenario", "status", "code"),
    [("rate_limit", 429, "rate_limited"), ("auth", 502, "upstream_auth_failed")],
)
async def test_upstream_errors(
    tmp_path: Path, nursery: trio.Nursery, scenario: str, status: int, code: str
) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(60):
        mock = await start(nursery, scenario, retry_after=1)
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:

            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="sonnet", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == status
    assert err.response.json()["error"]["code"] == code


async def test_disconnect_mid_stream_leaves_no_claude(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(60):
        mock = await start(nursery, "slow", interval=0.5)
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            seen: dict[str, set[int]] = {}
            got_first = threading.Event()

            def read_then_hang_up(proxy: Proxy = proxy) -> None:
                stream = proxy.client().chat.completions.create(
                    model="sonnet", messages=MESSAGES, stream=True
                )
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        got_first.set()
                        seen["cli"] = descendants(proxy.process.pid)
                        break
                stream.close()

            await in_thread(read_then_hang_up)
            assert got_first.is_set() and seen["cli"]  # claude (and its helpers) were running
            gone = await wait_until(lambda: not any(alive(p) for p in seen["cli"]), within=1.0)
            assert gone, "a claude process outlived the client's disconnect by a second"
            assert descendants(proxy.process.pid) == set()
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["anthropic"]["in_flight"] == 0


async def test_a_429_retry_storm_is_abandoned_for_the_next_hop(tmp_path: Path,
                                                                nursery: trio.Nursery) -> None:
    from mock_openai_upstream import MockOpenAI
    from mock_openai_upstream import serve_mock as serve_openai

    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(45):  # claude alone would retry a 429 for about three minutes
        mock = await start(nursery, "rate_limit")
        upstream: MockOpenAI = await nursery.start(serve_openai)
        cfg = config(claude, mock)
        del cfg["providers"]["anthropic"]["env"]["CLAUDE_CODE_MAX_RETRIES"]  # its default: 10
        cfg["providers"]["router"] = {"kind": "openai-compatible", "base_url": upstream.base_url,
                                      "api_key_env": "ROUTER_KEY", "metered": True}
        cfg["routing"] = {"chains": {"sonnet": [
            # claude spends ANTHROPIC_API_KEY against the mock: metered, so it consents too
            {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True},
            {"provider": "router", "model": "backup-model", "metered": True}]}}
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-r"}) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=MESSAGES))
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert completion.model == "backup-model-2025-01-01"
    assert mock.request_count <= 2  # claude was stopped at its first announced retry
    assert upstream.request_count == 1
