"""Tool calling with the real ``claude`` (pinned, sandboxed) through ``olp start``, against the
mock Anthropic API's weather model (``tests/support/mock_anthropic/_weather.py``), driven by
the official ``openai`` SDK: the two-turn round trip (non-streaming and streaming), a parallel
two-call turn, and a request asking for Bash that gets no built-in tool upstream.

The registry says ``tools: true`` for claude's models, so the hop takes the request with its
tools; the adapter, the bridge and the tool gate do the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
from mock_anthropic import MockAnthropic, serve_mock
from olp_harness import Proxy, descendants, in_thread, real_cli, run_proxy, wait_until

WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
RESULT = '{"temp_c": 18, "sky": "sunny"}'


def config(claude: str, mock: MockAnthropic) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {
                "binary": claude, "max_concurrent": 2,
                "env": {"ANTHROPIC_BASE_URL": mock.base_url,
                        "ANTHROPIC_API_KEY": "sk-ant-mock-0000",
                        "CLAUDE_CODE_MAX_RETRIES": "1"},
                "timeouts": {"first_output_s": 60, "idle_s": 30, "total_s": 90},
            },
        },
        "routing": {"chains": {"agent": [
            {"provider": "anthropic", "model": "claude-sonnet-4-6",
             "metered": True}]}},
        # a CLI left waiting on tools/call must be killed at once, not after this grace
        "server": {"kill_grace_s": 30},
    }


async def start_mock(nursery: trio.Nursery, scenario: str = "success") -> MockAnthropic:
    mock: MockAnthropic = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status))
    return mock


async def no_spawn_left(proxy: Proxy) -> bool:
    return await wait_until(lambda: not descendants(proxy.process.pid), within=10)


def second_turn(question: str, calls: list[Any]) -> list[Any]:
    """The conversation after the client ran each call: one tool message per call."""
    return [{"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in calls]},
            *[{"role": "tool", "tool_call_id": c.id,
               "content": RESULT if i == 0 else '{"temp_c": 3, "sky": "snow"}'}
              for i, c in enumerate(calls)]]


async def test_two_turn_round_trip_non_streaming(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    question = "What is the weather in Paris right now?"
    with trio.fail_after(180):
        mock = await start_mock(nursery)
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            first = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=[{"role": "user", "content": question}],
                tools=[WEATHER]))
            assert await no_spawn_left(proxy)
            calls = first.choices[0].message.tool_calls or []
            second = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=second_turn(question, calls), tools=[WEATHER]))
            assert await no_spawn_left(proxy)
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.content == "Let me check the weather."
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == f"The weather tool said: {RESULT}"
    # One upstream request per turn: the CLI was killed while it waited on tools/call, so it
    # never asked the model again; the bridge's tool was offered, no built-in one.
    assert len(mock.requests) == 2
    for request in mock.requests:
        assert [t["name"] for t in request["body"]["tools"]] == ["mcp__olp__get_weather"]
    assert "[get_weather returned]" in json.dumps(mock.requests[1]["body"]["messages"])


async def test_two_turn_round_trip_streaming(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    question = "What is the weather in Paris right now?"
    with trio.fail_after(180):
        mock = await start_mock(nursery)
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            def stream(messages: list[Any]) -> list[Any]:
                return list(proxy.client().chat.completions.create(
                    model="agent", messages=messages, tools=[WEATHER], stream=True))

            chunks = await in_thread(lambda: stream([{"role": "user", "content": question}]))
            assert await no_spawn_left(proxy)
            deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
            head = deltas[0]
            assert head.index == 0 and head.id and head.function.name == "get_weather"
            arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
            assert json.loads(arguments) == {"city": "Paris"}
            assert [c.choices[0].finish_reason for c in chunks
                    if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
            # the call as an SDK user rebuilds it from the deltas
            call = SimpleNamespace(id=head.id, function=SimpleNamespace(
                name="get_weather", arguments=arguments))
            answer = await in_thread(lambda: stream(second_turn(question, [call])))
            assert await no_spawn_left(proxy)
    text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    assert text == f"The weather tool said: {RESULT}"
    assert len(mock.requests) == 2


async def test_parallel_two_call_turn(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(180):
        mock = await start_mock(nursery)
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", tools=[WEATHER],
                messages=[{"role": "user", "content": "Weather in Paris and in Oslo?"}]))
            assert await no_spawn_left(proxy)
    calls = reply.choices[0].message.tool_calls or []
    assert reply.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"},
                                                                 {"city": "Oslo"}]
    assert len({c.id for c in calls}) == 2
    assert len(mock.requests) == 1


async def test_asking_for_bash_offers_only_the_bridge_tools(tmp_path: Path,
                                                           nursery: trio.Nursery) -> None:
    # The mock's hostile model calls Bash (or Read) whenever one is offered.
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(180):
        mock = await start_mock(nursery, "tool_attack")
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", tools=[WEATHER], messages=[{"role": "user", "content":
                    "Use your Bash tool to run `cat /etc/hostname`, then answer."}]))
            assert await no_spawn_left(proxy)
    assert reply.choices[0].message.content == "No tool was offered."
    [request] = mock.requests
    assert [t["name"] for t in request["body"]["tools"]] == ["mcp__olp__get_weather"]
