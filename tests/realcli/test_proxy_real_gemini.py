"""The real ``gemini`` CLI (``@google/gemini-cli`` 0.61.0, pinned, from npm) through
``olp start``, against the loopback mock Gemini API in ``tests/support/mock_gemini``, driven
by the official ``openai`` SDK.

gemini is pointed at the mock by the provider's ``env`` (``GOOGLE_GEMINI_BASE_URL``, a fake
``GEMINI_API_KEY``: metered, so the provider consents). gemini is risk tier C: enabled here
explicitly. Each test runs as few CLIs as it can (~2 s of start-up each).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_gemini import DEFAULT_DELTAS, MockGemini, serve_mock
from olp_harness import FAKE_CLAUDE, alive, descendants, in_thread, real_cli, run_proxy, wait_until

KEY = "fake-gemini-key-0000"
MODEL = "gemini-2.5-pro"  # the registry's model behind the alias "gemini"
ANSWER = "Hello from the mock upstream."
SYSTEM = "SYSTEM-MARKER-7c1a: you are terse."
USER = "USER-MARKER-3f9e: say hello in four words."
MESSAGES: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
# a different request (an identical one could be answered from OLP's cache)
STREAM_MESSAGES: list[Any] = [MESSAGES[0], {"role": "user", "content": f"{USER} Stream it."}]


def config(gemini: str, mock: MockGemini) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"gemini": True, "anthropic": False, "openai": False,
                        "mistral": False},
            "gemini": {
                "binary": gemini,
                # the mock's API key is metered spend: the provider consents (registry models)
                "metered": True,
                "max_concurrent": 2,
                "env": {"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": mock.base_url},
                "timeouts": {"first_output_s": 30, "idle_s": 20, "total_s": 50},
            },
        },
        "server": {"kill_grace_s": 1},
    }


def proxy_env(tmp_path: Path) -> dict[str, str]:
    """A fresh HOME (no developer's ~/.gemini login is linked) and TMPDIR (the proxy's run
    directory, where each spawn's job directory lives)."""
    for name in ("user-home", "tmp"):
        (tmp_path / name).mkdir(exist_ok=True)
    return {"HOME": str(tmp_path / "user-home"), "TMPDIR": str(tmp_path / "tmp")}


def job_dirs(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "tmp").glob("**/olp-job-*"))


async def start(nursery: trio.Nursery, scenario: str = "success", **options: Any) -> MockGemini:
    mock: MockGemini = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options))
    return mock


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def prompt_texts(body: dict[str, Any]) -> list[str]:
    """The user turn's parts after gemini's own ``<session_context>`` part."""
    [turn] = body["contents"]
    return [p["text"] for p in turn["parts"] if not p["text"].startswith("<session_context>")]


async def test_stream_with_token_deltas_usage_then_non_streamed(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(60):
        mock = await start(nursery)
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:

            def consume() -> tuple[list[str], Any, dict[str, str], str]:
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="gemini", messages=STREAM_MESSAGES, stream=True,
                        stream_options={"include_usage": True}) as response:
                    texts, usage, model = [], None, ""
                    for chunk in response.parse():
                        model = chunk.model or model
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                        if chunk.usage:
                            usage = chunk.usage
                    return texts, usage, dict(response.headers), model

            texts, usage, headers, model = await in_thread(consume)
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", messages=MESSAGES))
            assert descendants(proxy.process.pid) == set()
            assert job_dirs(tmp_path) == []
    assert texts == list(DEFAULT_DELTAS)  # token deltas, as the upstream sent them
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (25, 7)
    assert headers["x-olp-provider-used"] == "gemini" and model == MODEL
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens == 7
    requests = mock.generate_requests()
    assert len(requests) == 2
    for request, user in zip(requests, (STREAM_MESSAGES[1], MESSAGES[1]), strict=True):
        body = request["body"]
        assert request["model"] == MODEL
        assert request["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()
        assert request["tool_declarations"] == []
        # the system text replaces gemini's own agent prompt; the turn is exactly stdin
        assert body["systemInstruction"]["parts"] == [{"text": SYSTEM}]
        assert prompt_texts(body) == [user["content"]]


async def test_a_429_goes_to_the_next_hop_at_once(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``general.maxAttempts: 1``: one upstream request, no 4-minute retry storm."""
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(40):
        mock = await start(nursery, "rate_limit", retry_delay="7s")
        cfg = config(gemini, mock)
        cfg["providers"]["enabled"]["anthropic"] = True
        cfg["providers"]["anthropic"] = {"binary": str(FAKE_CLAUDE), "env": {
            "FAKE_CLAUDE_SCENARIO": "success", "ANTHROPIC_API_KEY": "sk-ant-fake"}}
        cfg["routing"] = {"chains": {"gemini-then-claude": [
            # both spend API keys: metered entries, each with its consent
            {"provider": "gemini", "model": MODEL, "metered": True},
            {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="gemini-then-claude", messages=MESSAGES))
            assert await wait_until(lambda: descendants(proxy.process.pid) == set(), within=2.0)
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    [detail] = json.loads(raw.headers["x-olp-fallback-detail"])
    assert (detail["provider"], detail["category"], detail["code"]) == (
        "gemini", "rate_limited", "RATE_LIMITED")
    assert mock.request_count == 1  # no retry storm: the 429 was reported at once


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("invalid_key_400", 502, "upstream_auth_failed"),
    ("not_found_404", 404, None),
])
async def test_upstream_errors(tmp_path: Path, nursery: trio.Nursery, scenario: str,
                               status: int, code: str | None) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(40):
        mock = await start(nursery, scenario)
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gemini", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert descendants(proxy.process.pid) == set()
    assert err.status_code == status
    if code is not None:
        assert err.response.json()["error"]["code"] == code
    assert mock.request_count == 1


async def test_client_gone_mid_stream_leaves_no_gemini(tmp_path: Path,
                                                       nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(45):
        mock = await start(nursery, "slow", interval=0.5)  # " chunkN" forever
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def read_two_then_hang_up() -> tuple[list[str], dict[int, str]]:
                got: list[str] = []
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="gemini", messages=MESSAGES, stream=True) as response:
                    for chunk in response.parse():
                        if chunk.choices and chunk.choices[0].delta.content:
                            got.append(chunk.choices[0].delta.content)
                        if len(got) >= 2:  # gemini is mid-answer, streaming to us ...
                            return got, {p: comm(p) for p in descendants(proxy.process.pid)}
                return got, {}  # ... and the client hangs up (the context closes it)

            got, seen = await in_thread(read_two_then_hang_up)
            assert got == [" chunk0", " chunk1"]
            # gemini runs confined: bubblewrap, and one node process inside (no relaunch)
            assert "bwrap" in seen.values(), seen
            assert list(seen.values()).count("node") == 1, seen
            gone = await wait_until(lambda: not any(alive(p) for p in seen), within=5.0)
            assert gone, "a gemini process outlived the client's disconnect"
            assert descendants(proxy.process.pid) == set()
            assert await wait_until(lambda: job_dirs(tmp_path) == [], within=2.0)
            record = await mock.wait_for_outcome(1)
            assert record["outcome"] == "client_disconnected"
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["gemini"]["in_flight"] == 0
