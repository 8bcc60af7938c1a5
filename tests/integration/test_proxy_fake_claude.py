"""``olp start`` over a real socket, with a fake ``claude`` that replays real transcripts.

The official ``openai`` SDK is the client. Real clock; every test has a hang guard.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, alive, in_thread, pids_from, run_proxy, wait_until

MESSAGES: list[Any] = [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "Say hello in four words."}]


def config(tmp_path: Path, scenario: str, **env: str) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "max_concurrent": 2,
                      "env": {"FAKE_CLAUDE_SCENARIO": scenario,
                              "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"),
                              "ANTHROPIC_API_KEY": "sk-ant-fake", **env},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 1}}


async def test_stream_arrives_live_through_the_sdk(tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", FAKE_CLAUDE_HOLD_FILE=str(hold))) as proxy:
            def consume() -> tuple[list[str], Any, dict[str, str]]:
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="sonnet", messages=MESSAGES, stream=True,
                        stream_options={"include_usage": True}) as response:
                    texts, usage = [], None
                    for chunk in response.parse():
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                            # The fake holds its second line until we have the first: a proxy
                            # that buffered would hang here until its own deadline.
                            hold.touch()
                        if chunk.usage:
                            usage = chunk.usage
                    return texts, usage, dict(response.headers)

            texts, usage, headers = await in_thread(consume)
    assert "".join(texts) == "Hello from the mock upstream."
    assert len(texts) == 4
    assert usage.prompt_tokens == 25 and usage.completion_tokens == 7
    assert headers["x-olp-provider-used"] == "anthropic"
    assert headers["x-olp-model-used"] == "claude-sonnet-4-6"
    assert headers["x-olp-requested-model"] == "sonnet"
    assert headers["x-olp-fallback-hops"] == "0"
    assert int(headers["x-olp-latency-ms"]) >= 0
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_non_streaming_with_usage_and_served_model(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="claude-sonnet-4-6", messages=MESSAGES))
            logs = list(proxy.logs)
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "claude-sonnet-4-6"  # the fake echoes --model as the served model
    assert completion.usage is not None and completion.usage.total_tokens == 32
    chat = [e for e in logs if e.get("event") == "chat"]
    assert chat and chat[0]["status"] == 200 and chat[0]["provider"] == "anthropic"
    assert "Say hello" not in json.dumps(logs)  # prompts are never logged


async def test_prompt_on_stdin_and_system_in_a_file(tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", FAKE_CLAUDE_ECHO="1",
                FAKE_CLAUDE_ARGV_FILE=str(argv_file))) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=MESSAGES))
    argv = json.loads(argv_file.read_text())
    assert not any("Say hello" in a or "Be terse" in a for a in argv)
    assert "--system-prompt-file" in argv and "--include-partial-messages" in argv
    echoed = completion.choices[0].message.content or ""
    assert "Say hello in four words." in echoed and "Be terse." in echoed


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("rate_limit", 429, "rate_limited"),
    ("auth", 502, "upstream_auth_failed"),
    ("server_error", 503, "upstream_5xx"),
])
async def test_upstream_failures_are_real_statuses(tmp_path: Path, scenario: str, status: int,
                                                   code: str) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, scenario)) as proxy:
            for stream in (False, True):
                def call(stream: bool = stream) -> openai.APIStatusError:
                    with pytest.raises(openai.APIStatusError) as info:
                        proxy.client().chat.completions.create(
                            model="sonnet", messages=MESSAGES, stream=stream)
                    return info.value

                err = await in_thread(call)
                assert err.status_code == status
                body = err.response.json()
                assert body["error"]["code"] == code
                assert err.response.headers["x-olp-fallback-exhausted"] == "anthropic"
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_crash_mid_stream_ends_with_an_error_event_the_sdk_raises(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "crash_mid_stream")) as proxy:
            def consume() -> tuple[list[str], Exception | None]:
                texts: list[str] = []
                try:
                    for chunk in proxy.client().chat.completions.create(
                            model="sonnet", messages=MESSAGES, stream=True):
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                except openai.APIError as exc:
                    return texts, exc
                return texts, None

            texts, exc = await in_thread(consume)
    assert texts  # content reached the client before the crash ...
    assert exc is not None  # ... so the failure is in-band, and the SDK raises


async def test_disconnect_mid_stream_kills_the_process_group(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "slow", FAKE_CLAUDE_DELAY_S="0.2")) as proxy:
            got_first = threading.Event()

            def read_then_hang_up() -> None:
                stream = proxy.client().chat.completions.create(
                    model="sonnet", messages=MESSAGES, stream=True)
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        got_first.set()
                        break
                stream.close()  # the client goes away mid-answer

            await in_thread(read_then_hang_up)
            assert got_first.is_set()
            pids = pids_from(tmp_path / "pids")
            assert len(pids) == 2  # the fake and the grandchild it started
            # Within a second: the whole group is gone and the slot is back.
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=1.0)

            def in_flight() -> int:
                return int(proxy.get("/health").json()["providers"]["anthropic"]["in_flight"])

            assert await in_thread(in_flight) == 0


async def test_keys_and_errors_over_the_socket(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            def probe() -> dict[str, Any]:
                bad = proxy.client(token="olp_wrong")
                with pytest.raises(openai.AuthenticationError):
                    bad.models.list()
                models = [m.id for m in proxy.client().models.list()]
                with pytest.raises(openai.NotFoundError):
                    proxy.client().chat.completions.create(model="nope", messages=MESSAGES)
                with pytest.raises(openai.BadRequestError) as info:
                    proxy.client().chat.completions.create(
                        model="sonnet", messages=MESSAGES, temperature="hot")  # type: ignore
                return {"models": models, "param": info.value.body}

            out = await in_thread(probe)
    assert "sonnet" in out["models"] and "claude-sonnet-4-6" in out["models"]
    assert out["param"]["param"] == "temperature"


async def test_cli_killed_mid_stream_is_an_in_band_error_and_leaves_nothing(
        tmp_path: Path) -> None:
    import os
    import signal

    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "slow", FAKE_CLAUDE_DELAY_S="0.2")) as proxy:
            def consume() -> tuple[list[str], Exception | None]:
                texts: list[str] = []
                try:
                    for chunk in proxy.client().chat.completions.create(
                            model="sonnet", messages=MESSAGES, stream=True):
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                            if len(texts) == 2:  # mid-answer, the CLI is killed from outside
                                os.kill(pids_from(tmp_path / "pids")[0], signal.SIGKILL)
                except openai.APIError as exc:
                    return texts, exc
                return texts, None

            texts, exc = await in_thread(consume)
            assert len(texts) >= 2 and exc is not None
            pids = pids_from(tmp_path / "pids")
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=1.0)
