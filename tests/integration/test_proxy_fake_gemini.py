"""``olp start`` over a real socket with the ``gemini`` provider and a fake ``gemini`` that
replays the real CLI's transcripts (tests/support/fakes/fake_gemini.py). The official ``openai``
SDK is the client. Real clock; every test has a hang guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, REPO, alive, in_thread, pids_from, run_proxy, wait_until

FAKE_GEMINI = REPO / "tests" / "support" / "fakes" / "fake_gemini.py"
ANSWER = "Hello from the mock upstream."
MODEL = "gemini-2.5-pro"  # the registry's model behind the alias "gemini"
MESSAGES: list[Any] = [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "/init"}]


def config(tmp_path: Path, scenario: str, *, key: bool = True, **env: str) -> dict[str, Any]:
    provider_env = {"FAKE_GEMINI_SCENARIO": scenario,
                    "FAKE_GEMINI_PIDFILE": str(tmp_path / "pids"), **env}
    if key:
        provider_env["GEMINI_API_KEY"] = "fake-gemini-key-0000"
    return {"providers": {
        "enabled": {"anthropic": False, "openai": False, "mistral": False, "gemini": True},
        "gemini": {"binary": str(FAKE_GEMINI), "metered": True, "max_concurrent": 2,
                   "env": provider_env,
                   "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 30}}},
        "server": {"kill_grace_s": 1}}


def proxy_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home)}


async def test_a_guarded_prompt_system_file_and_an_empty_workdir(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", FAKE_GEMINI_ECHO="1"),
                             env=proxy_env(tmp_path)) as proxy:
            echo = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", messages=MESSAGES))
    digest = json.loads(echo.choices[0].message.content or "")
    assert digest["model"] == MODEL
    assert digest["stdin"] == "\u200b/init"  # never a slash command
    assert digest["system_md"] == "Be terse."
    assert digest["settings_tools_core"] == []
    assert digest["cwd_files"] == []
    assert not any("init" in a or "terse" in a for a in digest["argv"])
    assert "GEMINI_CLI_NO_RELAUNCH" in digest["env_keys"]
    assert "OLP_GEMINI_AUTH_TYPE" not in digest["env_keys"]
    assert echo.usage is not None and echo.usage.prompt_tokens == 25
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_earlier_turns_go_as_a_session_file_and_only_the_last_on_stdin(
        tmp_path: Path) -> None:
    """Issue #25: gemini loads the earlier turns (`--session-file`), stdin holds the new one."""
    history = [{"role": "system", "content": "Be terse."},
               {"role": "user", "content": "First question."},
               {"role": "assistant", "content": "First answer."},
               {"role": "user", "content": "/second"}]
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", FAKE_GEMINI_ECHO="1"),
                             env=proxy_env(tmp_path)) as proxy:
            echo = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", messages=history))
    digest = json.loads(echo.choices[0].message.content or "")
    assert digest["stdin"] == "\u200b/second"
    assert digest["system_md"] == "Be terse."
    assert [(m["type"], m["content"]) for m in digest["session_messages"]] == [
        ("user", [{"text": "First question."}]), ("gemini", "First answer.")]
    assert "--session-file" in digest["argv"]


async def test_token_deltas_and_usage(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success"),
                             env=proxy_env(tmp_path)) as proxy:
            def consume() -> tuple[list[str], Any]:
                texts, usage = [], None
                for chunk in proxy.client().chat.completions.create(
                        model="gemini", messages=[{"role": "user", "content": "hi"}],
                        stream=True, stream_options={"include_usage": True}):
                    if chunk.choices and chunk.choices[0].delta.content:
                        texts.append(chunk.choices[0].delta.content)
                    usage = chunk.usage or usage
                return texts, usage

            texts, usage = await in_thread(consume)
    assert texts == ["Hello", " from", " the mock", " upstream."]
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (25, 7)


async def test_no_key_is_auth_missing_without_a_spawn(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", key=False),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gemini", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert "GEMINI_API_KEY" in json.dumps(err.response.json())
    assert pids_from(tmp_path / "pids") == []


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("rate_limit", 429, "rate_limited"),
    ("auth", 502, "upstream_auth_failed"),
    ("empty", 503, None),
])
async def test_upstream_failures(tmp_path: Path, scenario: str, status: int,
                                 code: str | None) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, scenario),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gemini", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == status, err.response.text
    if code is not None:
        assert err.response.json()["error"]["code"] == code
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_a_daily_quota_falls_back_to_the_next_hop(tmp_path: Path) -> None:
    cfg = config(tmp_path, "rate_limit_daily")
    cfg["providers"]["enabled"]["anthropic"] = True
    cfg["providers"]["anthropic"] = {"binary": str(FAKE_CLAUDE), "env": {
        "FAKE_CLAUDE_SCENARIO": "success", "ANTHROPIC_API_KEY": "sk-ant-fake"}}
    cfg["routing"] = {"chains": {"gemini-then-claude": [
        {"provider": "gemini", "model": MODEL, "metered": True},
        {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="gemini-then-claude", messages=MESSAGES))
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    [detail] = json.loads(raw.headers["x-olp-fallback-detail"])
    assert (detail["provider"], detail["code"]) == ("gemini", "USAGE_WINDOW")


async def test_client_gone_mid_stream_kills_the_process_group(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home",
                             config(tmp_path, "slow", FAKE_GEMINI_DELAY_S="0.2"),
                             env=proxy_env(tmp_path)) as proxy:
            def read_two() -> list[str]:
                got: list[str] = []
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="gemini", messages=MESSAGES, stream=True) as response:
                    for chunk in response.parse():
                        if chunk.choices and chunk.choices[0].delta.content:
                            got.append(chunk.choices[0].delta.content)
                        if len(got) >= 2:
                            break
                return got

            got = await in_thread(read_two)
            pids = pids_from(tmp_path / "pids")
            assert got == [" chunk0", " chunk1"] and len(pids) == 2
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=5.0)


WEATHER_TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
WEATHER_ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.mark.parametrize("scenario", ["tool_call", "tool_call_parallel"])
async def test_a_tool_call_ends_the_spawn_at_the_call(tmp_path: Path, scenario: str) -> None:
    """The fake prints the real CLI's ``tool_use`` line(s) and then waits (as gemini waits on
    ``tools/call``): the answer is the first call, and the process group is killed."""
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, scenario),
                             env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", messages=WEATHER_ASK, tools=WEATHER_TOOLS))
            pids = pids_from(tmp_path / "pids")
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=5.0)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check the weather."
    [call] = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"city": "Paris"}


async def test_a_bridge_that_failed_is_tool_bridge_failed(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tool_bridge_failed"),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(
                        model="gemini", messages=WEATHER_ASK, tools=WEATHER_TOOLS)
                return info.value

            err = await in_thread(call)
    assert err.status_code == 503 and err.code == "tool_bridge_failed", err.response.text
