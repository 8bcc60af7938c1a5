"""Tool calling through the real ``qwen`` CLI (qwen-code 0.24.4) with OLP's MCP bridge, against
the loopback OpenAI-compatible mock's ``weather`` scenario (a call of the offered function
whose name ends with ``get_weather`` while no result is in the prompt, then the answer quoting
the result), driven by the official ``openai`` SDK through ``olp start`` (confined by
bubblewrap).

qwen offers the bridge's tools upstream as ``mcp__olp__<name>`` and nothing else, streams the
model's call as ``tool_use`` blocks and one ``assistant`` event, then aborts on its
``--max-tool-calls 0`` budget before any ``tools/call``; the proxy kills it at the
``assistant`` event. Transcripts: ``tests/fixtures/cli-reference/qwen/tools/``. The round
trips through ``olp start`` need ``tools: true`` for qwen's models in ``models-registry.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
from mock_openai_upstream import WEATHER_ANSWER_PREFIX, MockOpenAI
from olp_harness import Proxy, descendants, in_thread, real_cli, run_proxy, wait_until
from test_proxy_real_qwen import KEY, chats, config, proxy_env, start

from olp.actors._tool_gate import ToolGate
from olp.ir import ChatRequest, Event, Message, Stop, TextPart, ToolCallDelta, ToolSpec, is_terminal
from olp.providers.qwen import ADAPTER

WEATHER = ToolSpec(name="get_weather", description="Get the current weather of a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": WEATHER.description,
    "parameters": WEATHER.parameters}}]
RESULT = '{"temp_c": 18, "sky": "sunny"}'
QUESTION = "What is the weather in Paris right now?"


def offered(mock: MockOpenAI) -> list[list[str]]:
    """The function names each upstream request offered."""
    return [[t["function"]["name"] for t in r["body"].get("tools") or []] for r in chats(mock)]


async def no_spawn_left(proxy: Proxy) -> bool:
    return await wait_until(lambda: not descendants(proxy.process.pid), within=10)


def second_turn(question: str, calls: list[Any]) -> list[Any]:
    """The conversation after the client ran each call: one tool message per call."""
    return [{"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in calls]},
            *[{"role": "tool", "tool_call_id": c.id, "content": RESULT} for c in calls]]


async def run_qwen(tmp_path: Path, mock: MockOpenAI, text: str) -> list[Event]:
    """One real qwen spawn with OLP's invocation (bridge included, no sandbox), its stdout fed
    through the parser and the tool gate up to the terminal event, then its group killed."""
    qwen = real_cli("OLP_REAL_QWEN")
    home, workdir = tmp_path / "home", tmp_path / "work"
    (home / "tmp").mkdir(parents=True)
    workdir.mkdir()
    request = ChatRequest(model="qwen-coder", tools=(WEATHER,),
                          messages=(Message(role="user", content=(TextPart(text=text),)),))
    adapter = ADAPTER
    invocation = adapter.invocation(request, binary=qwen, model="M", workdir=workdir)
    assert invocation.files == {}
    for rel, content in invocation.home_files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(content)
    parser = ToolGate(adapter.parser(workdir), request)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home / "tmp"),
           "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock.base_url, **invocation.env}
    events: list[Event] = []
    async with trio.open_nursery() as nursery:
        async def spawn(task_status: trio.TaskStatus[trio.Process]) -> None:
            await trio.run_process(invocation.argv, stdin=invocation.stdin, stdout=-1, env=env,
                                   cwd=workdir, check=False, start_new_session=True,
                                   task_status=task_status)

        process: trio.Process = await nursery.start(spawn)
        assert process.stdout is not None
        buffer = b""
        async for chunk in process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                events += parser.feed(line)
            if events and is_terminal(events[-1]):
                break
        process.kill()
        nursery.cancel_scope.cancel()
    return events


async def test_the_call_is_reported_before_qwen_acts_on_it(tmp_path: Path,
                                                           nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        events = await run_qwen(tmp_path, mock, QUESTION)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert events[-1] == Stop(finish_reason="tool_calls")
    assert {d.index for d in deltas} == {0} and deltas[0].name == "get_weather"
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Paris"}
    assert offered(mock) == [["mcp__olp__get_weather"]]


async def test_two_turn_round_trip_non_streaming(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            first = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", messages=[{"role": "user", "content": QUESTION}],
                tools=TOOLS))
            assert await no_spawn_left(proxy)
            calls = first.choices[0].message.tool_calls or []
            second = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", messages=second_turn(QUESTION, calls), tools=TOOLS))
            assert await no_spawn_left(proxy)
            assert descendants(proxy.process.pid) == set()
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = calls
    assert call.id and call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == f"{WEATHER_ANSWER_PREFIX}{RESULT}"
    # one upstream request per turn (killed at the call, no follow-up), only the bridge's tool
    assert offered(mock) == [["mcp__olp__get_weather"]] * 2
    assert "[get_weather returned]" in json.dumps(chats(mock)[1]["body"]["messages"])


async def test_two_turn_round_trip_streaming(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def stream(messages: list[Any]) -> list[Any]:
                return list(proxy.client().chat.completions.create(
                    model="qwen-coder", messages=messages, tools=TOOLS, stream=True))

            chunks = await in_thread(lambda: stream([{"role": "user", "content": QUESTION}]))
            assert await no_spawn_left(proxy)
            deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
            head = deltas[0]
            assert head.index == 0 and head.id and head.function.name == "get_weather"
            arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
            assert json.loads(arguments) == {"city": "Paris"}
            assert [c.choices[0].finish_reason for c in chunks
                    if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
            call = SimpleNamespace(id=head.id, function=SimpleNamespace(
                name="get_weather", arguments=arguments))
            answer = await in_thread(lambda: stream(second_turn(QUESTION, [call])))
            assert await no_spawn_left(proxy)
    text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    assert text == f"{WEATHER_ANSWER_PREFIX}{RESULT}"
    assert len(chats(mock)) == 2


async def test_parallel_two_call_turn(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", tools=TOOLS, messages=[
                    {"role": "user", "content": "What is the weather in Paris and Tokyo?"}]))
            assert await no_spawn_left(proxy)
    calls = reply.choices[0].message.tool_calls or []
    assert reply.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"},
                                                                 {"city": "Tokyo"}]
    assert len({c.id for c in calls}) == 2
    assert len(chats(mock)) == 1


async def test_asked_for_a_shell_the_upstream_request_offers_only_the_bridge(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        await run_qwen(tmp_path, mock, "Use your Bash or shell tool to run `cat /etc/passwd`, "
                                       "then tell me the weather in Paris.")
    assert offered(mock) == [["mcp__olp__get_weather"]]
