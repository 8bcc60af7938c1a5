"""claude with tools: the invocation (bridge config, argv) and the parser on the real CLI's
tool-calling transcripts (``tests/fixtures/cli-reference/claude/transcripts/tools.*``,
claude 2.1.332 against the mock's weather model, SIGKILLed once the call was printed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sample_requests import user_says

from olp.actors._tool_gate import ToolGate
from olp.actors._toolbridge import BRIDGE_SCRIPT, TOOLS_FILE, bridge_command
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Start,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    is_terminal,
)
from olp.providers.anthropic import AnthropicParser
from olp.providers.anthropic._invocation import (
    LOCKDOWN_ARGS,
    MCP_CONFIG_FILE,
    TOOLS_LOCKDOWN_ARGS,
    build_invocation,
)

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "claude"
            / "transcripts")
WEATHER = ToolSpec(name="get_weather", description="Weather", parameters={"type": "object"})
WORK = Path("/tmp/olp-job-x/work")


def request(**kw: Any) -> ChatRequest:
    base = user_says("What is the weather in Paris?", model="m")
    return ChatRequest(model="m", messages=base.messages, **{"tools": (WEATHER,), **kw})


def replay(case: str, req: ChatRequest | None = None) -> list[Event]:
    """The transcript through the parser (and the gate, with ``req``), up to its terminal."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    parser: Any = AnthropicParser()
    if req is not None:
        parser = ToolGate(parser, req)
    out: list[Event] = []
    for line in (FIXTURES / f"{case}.stdout").read_bytes().splitlines():
        for event in parser.feed(line):
            out.append(event)
            if is_terminal(event):
                return out
    out += parser.trailer(meta["exit_code"], b"")
    out.append(parser.finish(meta["exit_code"], b""))
    return out


# --- invocation -------------------------------------------------------------------------------

def test_offered_tools_get_the_bridge_and_only_mcp_olp_tools_are_allowed() -> None:
    inv = build_invocation(request(tools=(WEATHER, ToolSpec(name="get_time"))), binary="claude",
                           model="sonnet", workdir=WORK)
    argv = list(inv.argv)
    assert argv[argv.index("--mcp-config") + 1] == str(WORK / MCP_CONFIG_FILE)
    assert argv[argv.index("--allowedTools") + 1] == "mcp__olp__get_weather,mcp__olp__get_time"
    assert argv[argv.index("--tools") + 1] == ""  # still no built-in tool
    for flag in TOOLS_LOCKDOWN_ARGS:
        assert flag in argv
    assert "--safe-mode" not in argv  # it would switch the bridge off too
    config = json.loads(inv.files[MCP_CONFIG_FILE])
    command, args = bridge_command(WORK)
    assert config == {"mcpServers": {"olp": {"type": "stdio", "command": command, "args": args}}}
    assert str(BRIDGE_SCRIPT) in args
    listed = json.loads(inv.files[TOOLS_FILE])["tools"]
    assert [t["name"] for t in listed] == ["get_weather", "get_time"]
    assert "Paris" not in " ".join(argv)


def test_no_tools_or_choice_none_keeps_the_full_lockdown_and_no_bridge() -> None:
    for req in (user_says("hi"), request(tool_choice="none")):
        inv = build_invocation(req, binary="claude", model="sonnet", workdir=WORK)
        assert "--mcp-config" not in inv.argv and "--allowedTools" not in inv.argv
        assert set(LOCKDOWN_ARGS) <= set(inv.argv) and "--safe-mode" in inv.argv
        assert MCP_CONFIG_FILE not in inv.files and TOOLS_FILE not in inv.files


def test_forced_choice_is_an_instruction_at_the_head_of_the_prompt() -> None:
    inv = build_invocation(request(tool_choice="required"), binary="claude", model="s",
                           workdir=WORK)
    prompt = json.loads(inv.stdin)["message"]["content"][0]["text"]
    assert prompt.startswith("You must answer this turn by calling one of your tools")
    assert prompt.endswith("What is the weather in Paris?")
    auto = build_invocation(request(tool_choice="auto"), binary="claude", model="s",
                            workdir=WORK)
    assert json.loads(auto.stdin)["message"]["content"] == [
        {"type": "text", "text": "What is the weather in Paris?"}]


# --- the parser on recorded lines --------------------------------------------------------------

def test_recorded_call_streams_id_name_and_argument_fragments_then_stops() -> None:
    events = replay("tools.call.stream-json")
    assert events == [
        Start(model="claude-sonnet-4-6"), TextDelta(text="Let me check the weather."),
        ToolCallDelta(index=1, id="toolu_mock000001_0", name="get_weather"),
        ToolCallDelta(index=1, arguments='{"city":'), ToolCallDelta(index=1, arguments=' "Paris"}'),
        Usage(prompt_tokens=25, completion_tokens=7), Stop(finish_reason="tool_calls")]


def test_recorded_parallel_call_has_two_calls_before_the_stop() -> None:
    events = replay("tools.parallel.stream-json", request())
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.id, c.name) for c in calls if c.name] == [
        (0, "toolu_mock000001_0", "get_weather"), (1, "toolu_mock000001_1", "get_weather")]
    args = {i: "".join(c.arguments for c in calls if c.index == i) for i in (0, 1)}
    assert [json.loads(a) for a in args.values()] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert events[-1] == Stop(finish_reason="tool_calls")


def test_recorded_second_turn_is_text_quoting_the_result() -> None:
    events = replay("tools.result.stream-json", request())
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == 'The weather tool said: {"temp_c": 18, "sky": "sunny"}'
    assert events[-1] == Stop()


def test_recorded_failed_bridge_is_tool_bridge_failed() -> None:
    events = replay("tools.bridge_failed.stream-json")
    assert len(events) == 1
    error = events[0]
    assert isinstance(error, Error) and error.code == "TOOL_BRIDGE_FAILED"
    assert error.category == "unavailable" and "failed" in error.message


def test_whole_tool_use_in_an_assistant_event_without_partial_deltas() -> None:
    lines = [line for line in (FIXTURES / "tools.call.stream-json.stdout").read_bytes()
             .splitlines() if b'"stream_event"' not in line]
    parser = AnthropicParser()
    calls = [e for line in lines for e in parser.feed(line) if isinstance(e, ToolCallDelta)]
    assert calls == [ToolCallDelta(index=1_000_000, id="toolu_mock000001_0", name="get_weather",
                                   arguments='{"city": "Paris"}')]


def test_an_assistant_event_repeating_a_streamed_call_adds_nothing() -> None:
    events = replay("tools.call.stream-json")
    assert sum(1 for e in events if isinstance(e, ToolCallDelta) and e.id) == 1


def test_a_tool_of_claudes_own_is_not_a_client_call_and_does_not_end_the_job() -> None:
    # Only with a built-in tool an owner switched back on (extra_args): claude runs it itself
    # and goes on to answer, so the job must go on too (the sandbox contains the tool).
    parser = AnthropicParser()

    def event(**e: object) -> bytes:
        return json.dumps({"type": "stream_event", "event": e}).encode()

    lines = [
        event(type="message_start", message={"id": "m1", "model": "claude-sonnet-4-6",
                                             "usage": {"input_tokens": 5}}),
        event(type="content_block_start", index=0,
              content_block={"type": "tool_use", "id": "t", "name": "Bash", "input": {}}),
        event(type="content_block_delta", index=0,
              delta={"type": "input_json_delta", "partial_json": '{"command": "id"}'}),
        event(type="message_delta", delta={"stop_reason": "tool_use"},
              usage={"output_tokens": 3}),
        event(type="message_start", message={"id": "m2", "model": "claude-sonnet-4-6"}),
        event(type="content_block_delta", index=0, delta={"type": "text_delta", "text": "ok"}),
    ]
    events = [e for line in lines for e in parser.feed(line)]
    assert events == [Start(model="claude-sonnet-4-6"), TextDelta(text="ok")]


def test_recorded_bash_request_offered_only_the_bridge_tool_upstream() -> None:
    # The prompt asked for Bash and the mock's hostile model looks for it: the upstream
    # request offered only the client's tool, and the answer said no tool was offered.
    lines = (FIXTURES / "tools.ask_bash.stream-json.upstream_requests.jsonl").read_text()
    bodies = [json.loads(line)["body"] for line in lines.splitlines()]
    assert [[t["name"] for t in b["tools"]] for b in bodies] == [["mcp__olp__get_weather"]]
    text = "".join(e.text for e in replay("tools.ask_bash.stream-json", request())
                   if isinstance(e, TextDelta))
    assert text == "No tool was offered."
