"""Tool calling through ``olp start`` with the fake ``claude`` (real subprocesses, the real
bridge launched by the fake as claude does) and the official ``openai`` SDK as the client.

The registry says ``tools: true`` for claude's models, so the hop takes the request with its
tools; the adapter, the bridge and the tool gate do the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, Proxy, descendants, in_thread, run_proxy, wait_until

WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


def config(scenario: str, *fallback: dict[str, Any]) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 2,
                      "env": {"FAKE_CLAUDE_SCENARIO": scenario,
                              "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "routing": {"chains": {"agent": [
            {"provider": "anthropic", "model": "claude-sonnet-4-6"},
            *fallback]}},
        "server": {"kill_grace_s": 30}}  # a tool call must not wait for the grace


async def no_spawn_left(proxy: Proxy) -> bool:
    return await wait_until(lambda: not descendants(proxy.process.pid), within=5)


async def test_call_with_preamble_non_streaming(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config("success")) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=ASK, tools=[WEATHER]))
            assert await no_spawn_left(proxy)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check the weather."
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].type == "function"
    assert calls[0].id == "toolu_mock000001_0"
    assert calls[0].function.name == "get_weather"  # no mcp__olp__ prefix
    assert isinstance(calls[0].function.arguments, str)
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert reply.usage is not None and reply.usage.prompt_tokens == 25


async def test_streamed_call_is_keyed_by_index_with_id_and_name_first(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config("tools_parallel")) as proxy:
            def consume() -> list[Any]:
                stream = proxy.client().chat.completions.create(
                    model="agent", messages=ASK, tools=[WEATHER], stream=True)
                return list(stream)

            chunks = await in_thread(consume)
            assert await no_spawn_left(proxy)
    deltas = [c for ch in chunks if ch.choices for c in ch.choices[0].delta.tool_calls or ()]
    first: dict[int, Any] = {}
    args: dict[int, str] = {}
    for d in deltas:
        if d.index not in first:
            first[d.index] = d
            assert d.id and d.function and d.function.name == "get_weather"
        else:
            assert d.id is None
        args[d.index] = args.get(d.index, "") + ((d.function and d.function.arguments) or "")
    assert sorted(first) == [0, 1]
    assert [json.loads(args[i]) for i in (0, 1)] == [{"city": "Paris"}, {"city": "Oslo"}]
    finishes = [ch.choices[0].finish_reason for ch in chunks
                if ch.choices and ch.choices[0].finish_reason]
    assert finishes == ["tool_calls"]


async def test_second_turn_is_answered_from_the_rendered_result(tmp_path: Path) -> None:
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "toolu_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": '{"temp_c": 18}'}]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config("success")) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=history, tools=[WEATHER]))
            assert await no_spawn_left(proxy)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == (
        'The weather tool said: {"temp_c": 18, "sky": "sunny"}')  # the recorded answer
    assert not reply.choices[0].message.tool_calls


@pytest.mark.parametrize(("scenario", "code"), [
    ("tools_malformed", "tool_call_invalid"), ("tools_bridge_crash", "tool_bridge_failed")])
async def test_bad_call_or_dead_bridge_is_an_error_not_an_answer(tmp_path: Path, scenario: str,
                                                                 code: str) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(scenario)) as proxy:
            with pytest.raises(openai.APIStatusError) as err:
                await in_thread(lambda: proxy.client().chat.completions.create(
                    model="agent", messages=ASK, tools=[WEATHER]))
            assert await no_spawn_left(proxy)
    assert err.value.status_code == 503
    assert err.value.code == code


async def test_cli_ignoring_the_tools_is_prose_under_auto_and_unmet_under_required(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config("tools_ignore")) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=ASK, tools=[WEATHER], tool_choice="auto"))
            assert reply.choices[0].message.content == "Hello from the mock upstream."
            assert reply.choices[0].finish_reason == "stop"
            with pytest.raises(openai.APIStatusError) as err:
                await in_thread(lambda: proxy.client().chat.completions.create(
                    model="agent", messages=ASK, tools=[WEATHER], tool_choice="required"))
            assert await no_spawn_left(proxy)
    assert err.value.status_code == 503 and err.value.code == "tool_choice_unmet"


async def test_a_tool_call_answer_is_cached_with_the_tools_in_the_key(tmp_path: Path) -> None:
    other = {"type": "function", "function": {"name": "get_weather", "description": "other",
                                              "parameters": {"type": "object"}}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config("success")) as proxy:
            def ask(tools: list[Any]) -> Any:
                return proxy.client().chat.completions.with_raw_response.create(
                    model="agent", messages=ASK, tools=tools)

            first = await in_thread(lambda: ask([WEATHER]))
            again = await in_thread(lambda: ask([WEATHER]))
            changed = await in_thread(lambda: ask([other]))
            assert await no_spawn_left(proxy)
    assert first.headers["x-olp-cache"] == "miss"
    assert again.headers["x-olp-cache"] == "hit"
    assert changed.headers["x-olp-cache"] == "miss"
    replayed = again.parse().choices[0]
    assert replayed.finish_reason == "tool_calls"
    assert replayed.message.tool_calls[0].function.name == "get_weather"
    assert json.loads(replayed.message.tool_calls[0].function.arguments) == {"city": "Paris"}
