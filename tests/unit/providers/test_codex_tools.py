"""codex tool calling: the invocation with OLP's MCP bridge and the parser on the real CLI's
recorded lines (``tests/fixtures/cli-reference/codex/tools/``, codex-cli 0.171.0 against the
loopback mock with the bridge; see that folder's README)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from olp.actors._toolbridge import BRIDGE_SCRIPT, TOOLS_FILE, tool_instruction
from olp.failures import Code
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Message,
    Stop,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolSpec,
    Usage,
    is_terminal,
)
from olp.providers.codex import ADAPTER, CodexParser

TOOLS = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "codex" / "tools"
WORKDIR = Path("/run/olp/job-1")
WEATHER = ToolSpec(name="get_weather", description="Get the current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})


def invoke(req: ChatRequest) -> tuple[list[str], str, dict[str, str]]:
    inv = ADAPTER.invocation(req, binary="/usr/bin/codex", model="gpt-5.5",
                                    workdir=WORKDIR)
    return list(inv.argv), inv.stdin.decode("utf-8"), dict(inv.files)


def with_text(text: str, tools: tuple[ToolSpec, ...] = (),
              tool_choice: str | None = None) -> ChatRequest:
    return ChatRequest(model="gpt-5.5", tools=tools, tool_choice=tool_choice,
                       messages=(Message(role="user", content=(TextPart(text=text),)),))


# -- invocation ---------------------------------------------------------------------------


def test_offered_tools_launch_the_bridge_as_a_required_mcp_server() -> None:
    argv, stdin, files = invoke(with_text("What is the weather in Paris?", tools=(WEATHER,)))
    bridge_args = ["-I", "-S", str(BRIDGE_SCRIPT), str(WORKDIR / TOOLS_FILE)]
    i = argv.index("-m")
    assert argv[i - 6:i] == [
        "-c", f"mcp_servers.olp.command={json.dumps(sys.executable)}",
        "-c", f"mcp_servers.olp.args={json.dumps(bridge_args)}",
        "-c", "mcp_servers.olp.required=true"]
    assert json.loads(files[TOOLS_FILE]) == {"tools": [{
        "name": "get_weather", "description": "Get the current weather for a city.",
        "inputSchema": WEATHER.parameters}]}
    assert stdin == "What is the weather in Paris?"  # no client text on argv
    assert not any("weather" in a.lower() for a in argv)


def test_no_tools_or_tool_choice_none_means_no_bridge() -> None:
    for req in (with_text("hi"), with_text("hi", tools=(WEATHER,), tool_choice="none")):
        argv, _, files = invoke(req)
        assert TOOLS_FILE not in files
        assert not any("mcp_servers" in a for a in argv)


def test_a_forced_tool_choice_is_an_instruction_at_the_head_of_the_prompt() -> None:
    req = with_text("Weather?", tools=(WEATHER,), tool_choice="required")
    _, stdin, _ = invoke(req)
    instruction = tool_instruction(req)
    assert instruction is not None and stdin == f"{instruction}\n\nWeather?"


def test_the_captured_argv_is_olps_lockdown_plus_the_bridge() -> None:
    """The fixtures were recorded with exactly the argv OLP builds (paths aside), before the
    three switches added later (``image_gen`` and ``request_user_input`` off, re-verified with
    the real CLI in tests/realcli/test_security_real_codex.py; analytics off, issue #26)."""
    recorded = json.loads((TOOLS / "single.argv.json").read_text())
    argv, _, _ = invoke(with_text("x", tools=(WEATHER,)))
    later = {"features.image_generation", "tools.experimental_request_user_input",
             "analytics.enabled"}
    keys = [a.split("=", 1)[0] for a in argv[1:]]
    keys = [k for i, k in enumerate(keys) if k not in later
            and not (k == "-c" and i + 1 < len(keys) and keys[i + 1] in later)]
    assert keys == [a.split("=", 1)[0] for a in recorded[1:]]


# -- parser -------------------------------------------------------------------------------


def replay(case: str, returncode: int = 0) -> list[Event]:
    """Feed a recorded stdout as the runner does: up to the first terminal event, else the
    exit's."""
    ids = iter(f"call_{i}" for i in range(10))
    parser = CodexParser(new_id=lambda: next(ids))
    events: list[Event] = []
    for line in (TOOLS / f"{case}.stdout.jsonl").read_bytes().splitlines():
        events += parser.feed(line)
        if events and is_terminal(events[-1]):
            return events
    stderr = (TOOLS / f"{case}.stderr").read_bytes()
    return [*events, parser.finish(returncode, stderr)]


def test_a_call_ends_the_run_at_item_started() -> None:
    assert replay("single") == [
        ToolCallDelta(index=0, id="call_0", name="get_weather", arguments='{"city":"Paris"}'),
        Stop(finish_reason="tool_calls")]


def test_text_before_the_call_is_kept() -> None:
    assert replay("preamble") == [
        TextDelta(text="Let me check the weather."),
        ToolCallDelta(index=0, id="call_0", name="get_weather", arguments='{"city":"Paris"}'),
        Stop(finish_reason="tool_calls")]


def test_parallel_calls_end_at_the_first() -> None:
    """Nothing on stdout marks the end of the model's response: the first call is the answer."""
    assert replay("parallel") == [
        ToolCallDelta(index=0, id="call_0", name="get_weather", arguments='{"city":"Paris"}'),
        Stop(finish_reason="tool_calls")]


def test_the_second_turn_is_text() -> None:
    assert replay("result") == [TextDelta(text="Weather report: Sunny, 22 C"),
                                Usage(prompt_tokens=25, completion_tokens=7), Stop()]


def test_a_bridge_that_did_not_start_is_tool_bridge_failed() -> None:
    [event] = replay("bridge_failed_required", returncode=1)
    assert isinstance(event, Error)
    assert (event.code, event.category) == (Code.TOOL_BRIDGE_FAILED, "unavailable")


def test_calls_on_another_server_or_without_a_tool_are_ignored() -> None:
    parser = CodexParser()
    for item in ({"type": "mcp_tool_call", "server": "other", "tool": "x", "arguments": {}},
                 {"type": "mcp_tool_call", "server": "olp", "tool": "", "arguments": {}},
                 {"type": "command_execution", "command": "ls"}):
        assert parser.feed(json.dumps({"type": "item.started", "item": item}).encode()) == ()


def test_a_call_seen_only_as_completed_still_counts_and_arguments_stay_verbatim() -> None:
    parser = CodexParser(new_id=lambda: "call_x")
    line = {"type": "item.completed", "item": {
        "id": "item_1", "type": "mcp_tool_call", "server": "olp", "tool": "get_weather",
        "arguments": {"city": "Zürich", "n": [1, 2]}, "status": "failed"}}
    events = parser.feed(json.dumps(line, ensure_ascii=False).encode())
    assert events == (
        ToolCallDelta(index=0, id="call_x", name="get_weather",
                      arguments='{"city": "Zürich", "n": [1, 2]}'),
        Stop(finish_reason="tool_calls"))
    assert parser.feed(b'{"type":"turn.completed"}') == ()
    assert parser.finish(-9, b"") == Stop(finish_reason="tool_calls")
