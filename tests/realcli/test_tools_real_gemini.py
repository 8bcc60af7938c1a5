"""Tool calling through the real ``gemini`` CLI (0.61.0) with OLP's MCP bridge, against the
loopback mock Gemini API (scenario ``weather``: it calls a declared function whose name ends
with ``get_weather`` when no result is in the conversation, and quotes the result once it is).

gemini declares the bridge's tools as ``mcp_olp_<name>`` (and nothing else: ``tools.core:
[]``, a policy allowing only the bridge), prints the model's call as a ``tool_use`` line
~0.1 s before it sends ``tools/call`` (which the bridge never answers), and the job ends at
that line. Transcripts: ``tests/fixtures/cli-reference/gemini/tools/``. The round trips
through ``olp start`` need ``tools: true`` for the model in ``models-registry.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_gemini import MockGemini
from olp_harness import descendants, in_thread, real_cli, run_proxy
from test_proxy_real_gemini import KEY, MODEL, config, proxy_env, start

from olp.actors._tool_gate import ToolGate
from olp.actors._toolbridge import BRIDGE_SCRIPT
from olp.failures import Code
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Message,
    Stop,
    TextPart,
    ToolCallDelta,
    ToolSpec,
    is_terminal,
)
from olp.providers.gemini import ADAPTER

PREAMBLE = "Let me check the weather."  # the mock's weather model (mock_gemini/_weather.py)
RESULT_PREFIX = "The weather tool said: "
WEATHER = ToolSpec(name="get_weather", description="Get the current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": WEATHER.parameters}}]
#: what gemini declares upstream for the request's one tool: the bridge's, prefixed
DECLARED = ["mcp_olp_get_weather"]


async def run_gemini(tmp_path: Path, mock: MockGemini, text: str) -> list[Event]:
    """One real gemini spawn with OLP's invocation (bridge included), its stdout fed through
    the parser and the tool gate up to the terminal event, then the process group killed."""
    gemini = real_cli("OLP_REAL_GEMINI")
    home, workdir = tmp_path / "home", tmp_path / "work"
    (home / "tmp").mkdir(parents=True)
    workdir.mkdir()
    request = ChatRequest(model=MODEL, tools=(WEATHER,),
                          messages=(Message(role="user", content=(TextPart(text=text),)),))
    adapter = ADAPTER
    invocation = adapter.invocation(request, binary=gemini, model=MODEL, workdir=workdir)
    for name, content in invocation.home_files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(content)
    parser = ToolGate(adapter.parser(workdir), request)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home / "tmp"),
           "TERM": "dumb", "GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": mock.base_url,
           **invocation.env}
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


async def test_the_call_is_reported_before_gemini_acts_on_it(tmp_path: Path,
                                                             nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        events = await run_gemini(tmp_path, mock, "What is the weather in Paris?")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert events[-1] == Stop(finish_reason="tool_calls")
    assert {d.index for d in deltas} == {0} and deltas[0].name == "get_weather"
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Paris"}
    [request] = mock.generate_requests()  # killed before anything else reached the upstream
    assert request["tool_declarations"] == DECLARED


async def test_a_bridge_that_cannot_start_is_tool_bridge_failed_and_sends_nothing(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """gemini has no "required" MCP server: with the bridge's script missing it answers
    without the tools; only its stderr says so. The parser holds the text back and ends
    with TOOL_BRIDGE_FAILED, so nothing reaches the client and the chain can fall back."""
    gemini = real_cli("OLP_REAL_GEMINI")
    home, workdir = tmp_path / "home", tmp_path / "work"
    (home / "tmp").mkdir(parents=True)
    workdir.mkdir()
    request = ChatRequest(model=MODEL, tools=(WEATHER,), messages=(
        Message(role="user", content=(TextPart(text="Weather in Paris?"),)),))
    adapter = ADAPTER
    invocation = adapter.invocation(request, binary=gemini, model=MODEL, workdir=workdir)
    for name, content in invocation.home_files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(content.replace(str(BRIDGE_SCRIPT), "/nonexistent/bridge.py"))
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home / "tmp"),
               "TERM": "dumb", "GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": mock.base_url,
               **invocation.env}
        done = await trio.run_process(invocation.argv, stdin=invocation.stdin, env=env,
                                      cwd=workdir, capture_stdout=True, capture_stderr=True,
                                      check=False)
    parser = ToolGate(adapter.parser(workdir), request)
    events = [e for line in done.stdout.splitlines() for e in parser.feed(line)]
    events += parser.trailer(done.returncode, done.stderr)
    terminal = parser.finish(done.returncode, done.stderr)
    assert events == []
    assert isinstance(terminal, Error) and terminal.code == Code.TOOL_BRIDGE_FAILED
    [upstream] = mock.generate_requests()
    assert upstream["tool_declarations"] == []  # gemini asked the model without the tools


async def test_geminis_own_wait_for_previous_flag_never_reaches_the_client(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """gemini adds ``wait_for_previous`` to every declared tool and passes the model's value
    through: the parser removes it."""
    with trio.fail_after(60):
        mock = await start(nursery, "weather", extra_args={"wait_for_previous": True})
        events = await run_gemini(tmp_path, mock, "What is the weather in Paris?")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Paris"}
    [request] = mock.generate_requests()
    [declaration] = request["body"]["tools"][0]["functionDeclarations"]
    assert "wait_for_previous" in declaration["parametersJsonSchema"]["properties"]


async def test_asked_for_a_shell_the_upstream_request_declares_only_the_bridge(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        await run_gemini(tmp_path, mock, "Use your shell tool to run `cat /etc/passwd` and "
                                         "show me the output.")
    requests = mock.generate_requests()
    assert requests
    for request in requests:
        assert request["tool_declarations"] == DECLARED


async def test_two_turn_round_trip_through_the_proxy(tmp_path: Path,
                                                     nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
            first = await in_thread(lambda: client.chat.completions.create(
                model="gemini", messages=ask, tools=TOOLS))
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls"
            assert choice.message.content == PREAMBLE
            [call] = choice.message.tool_calls or []
            assert call.type == "function" and call.id
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            assert len(mock.generate_requests()) == 1
            history = [*ask, choice.message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 22 C"}]

            def stream() -> tuple[str, str | None]:
                chunks = client.chat.completions.create(model="gemini", messages=history,
                                                        tools=TOOLS, stream=True)
                text, finish = "", None
                for c in chunks:
                    if c.choices:
                        text += c.choices[0].delta.content or ""
                        finish = c.choices[0].finish_reason or finish
                return text, finish

            answer, finish = await in_thread(stream)
            assert descendants(proxy.process.pid) == set()
    assert (answer, finish) == (f"{RESULT_PREFIX}Sunny, 22 C", "stop")
    requests = mock.generate_requests()
    assert len(requests) == 2  # one per turn: no follow-up request by gemini itself
    for request in requests:
        assert request["tool_declarations"] == DECLARED


async def test_streamed_tool_call_through_the_proxy(tmp_path: Path,
                                                    nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:

            def stream() -> tuple[str, list[Any], str | None]:
                chunks = proxy.client().chat.completions.create(
                    model="gemini", tools=TOOLS, stream=True,
                    messages=[{"role": "user", "content": "What is the weather in Paris?"}])
                text, deltas, finish = "", [], None
                for c in chunks:
                    if c.choices:
                        text += c.choices[0].delta.content or ""
                        deltas += c.choices[0].delta.tool_calls or []
                        finish = c.choices[0].finish_reason or finish
                return text, deltas, finish

            text, deltas, finish = await in_thread(stream)
            assert descendants(proxy.process.pid) == set()
    assert finish == "tool_calls" and text == PREAMBLE
    assert {d.index for d in deltas} == {0}
    assert deltas[0].function.name == "get_weather" and deltas[0].id
    assert deltas[0].type == "function"
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris"}
    assert len(mock.generate_requests()) == 1


async def test_a_parallel_turn_is_answered_one_call_per_turn(tmp_path: Path,
                                                              nursery: trio.Nursery) -> None:
    """gemini prints both of the model's calls, but nothing marks the last one: OLP answers
    with the first (valid OpenAI; the model makes the second on the next turn)."""
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(60):
        mock = await start(nursery, "weather")
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", tools=TOOLS, messages=[
                    {"role": "user", "content": "What is the weather in Paris and Tokyo?"}]))
            assert descendants(proxy.process.pid) == set()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert len(mock.generate_requests()) == 1
