"""Tool calling through the real ``codex`` CLI (0.171.0) with OLP's MCP bridge, against the
loopback mock Responses API (it calls a tool whose name ends with ``get_weather`` when one is
offered and no result is in the prompt, and quotes the result once it is).

codex on fallback metadata offers the bridge's tools directly (the ``namespace`` tool
``mcp__olp``), prints the model's call as an ``mcp_tool_call`` ``item.started`` line and
never sends ``tools/call`` (``exec`` refuses the approval). Transcripts:
``tests/fixtures/cli-reference/codex/tools/``. The round trips through ``olp start`` need
``tools: true`` for the model in ``models-registry.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_openai_responses import (
    WEATHER_ANSWER_PREFIX,
    MockResponses,
    offered_tools,
    serve_mock,
)
from olp_harness import descendants, in_thread, real_cli, run_proxy
from test_proxy_real_codex import KEY, codex_config_toml, config, proxy_env

from olp.actors._tool_gate import ToolGate
from olp.ir import ChatRequest, Event, Message, Stop, TextPart, ToolCallDelta, ToolSpec, is_terminal
from olp.providers.codex import ADAPTER

WEATHER = ToolSpec(name="get_weather", description="Get the current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": WEATHER.parameters}}]
#: what codex offers besides the bridge's tools: the MCP resource readers once an MCP server
#: is configured (they only read from the bridge, which has none)
LEFT = {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}


async def start_mock(nursery: trio.Nursery) -> MockResponses:
    mock: MockResponses = await nursery.start(
        lambda task_status: serve_mock(scenario="success", task_status=task_status))
    return mock


async def run_codex(tmp_path: Path, mock: MockResponses, text: str) -> list[Event]:
    """One real codex spawn with OLP's invocation (bridge included), its stdout fed through
    the parser and the tool gate up to the terminal event, then the process group killed."""
    codex = real_cli("OLP_REAL_CODEX")
    home, workdir = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    workdir.mkdir()
    (home / ".codex" / "config.toml").write_text(codex_config_toml(mock))
    request = ChatRequest(model="gpt-5.5", tools=(WEATHER,),
                          messages=(Message(role="user", content=(TextPart(text=text),)),))
    adapter = ADAPTER
    invocation = adapter.invocation(request, binary=codex, model="gpt-5.5", workdir=workdir)
    for name, content in invocation.files.items():
        (workdir / name).write_text(content)
    parser = ToolGate(adapter.parser(workdir), request)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "OPENAI_API_KEY": KEY}
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


async def test_the_call_is_reported_before_codex_acts_on_it(tmp_path: Path,
                                                            nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start_mock(nursery)
        events = await run_codex(tmp_path, mock, "What is the weather in Paris?")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert events == [*deltas, Stop(finish_reason="tool_calls")]
    assert {d.index for d in deltas} == {0} and deltas[0].name == "get_weather"
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Paris"}
    # codex exec refuses its own approval of the call and asks the model again at once; the
    # kill at the call usually comes first, but that follow-up can leave in the same few
    # milliseconds (a race codex's app-server mode does not have: ADR 0032). Either way the
    # first request offered the bridge's tools only.
    first, *follow_up = mock.requests
    assert len(follow_up) <= 1
    assert set(offered_tools(first["body"])) == LEFT | {"mcp__olp.get_weather"}


async def test_asked_for_a_shell_the_upstream_request_offers_none(tmp_path: Path,
                                                                 nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start_mock(nursery)
        await run_codex(tmp_path, mock, "Use your Bash or shell tool to run `cat /etc/passwd` "
                                        "and show me the output.")
    for request in mock.requests:
        assert set(offered_tools(request["body"])) == LEFT | {"mcp__olp.get_weather"}


def tools_config(codex: str, mock: MockResponses) -> dict[str, Any]:
    """``codex exec`` with OLP's bridge (the app-server's own tools: its tests)."""
    cfg = config(codex, mock, mode="exec")
    cfg["providers"]["openai"]["metered"] = True  # the mock's key is an API key
    return cfg


async def test_two_turn_round_trip_through_the_proxy(tmp_path: Path,
                                                     nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start_mock(nursery)
        async with run_proxy(tmp_path / "home", tools_config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
            first = await in_thread(lambda: client.chat.completions.create(
                model="gpt-5.5", messages=ask, tools=TOOLS))
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls"
            [call] = choice.message.tool_calls or []
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            history = [*ask, choice.message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 22 C"}]

            def stream() -> str:
                chunks = client.chat.completions.create(model="gpt-5.5", messages=history,
                                                        tools=TOOLS, stream=True)
                return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

            answer = await in_thread(stream)
            assert descendants(proxy.process.pid) == set()
    assert answer == f"{WEATHER_ANSWER_PREFIX}Sunny, 22 C"


async def test_streamed_tool_call_through_the_proxy(tmp_path: Path,
                                                    nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start_mock(nursery)
        async with run_proxy(tmp_path / "home", tools_config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:

            def stream() -> tuple[list[Any], str | None]:
                chunks = proxy.client().chat.completions.create(
                    model="gpt-5.5", tools=TOOLS, stream=True,
                    messages=[{"role": "user", "content": "What is the weather in Paris?"}])
                deltas: list[Any] = []
                finish = None
                for c in chunks:
                    if c.choices:
                        deltas += c.choices[0].delta.tool_calls or []
                        finish = c.choices[0].finish_reason or finish
                return deltas, finish

            deltas, finish = await in_thread(stream)
            assert descendants(proxy.process.pid) == set()
    assert finish == "tool_calls"
    assert deltas[0].function.name == "get_weather" and deltas[0].id
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris"}
