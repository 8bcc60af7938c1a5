"""qwen with OLP's tool bridge: the invocation for a request with tools, and the parser (alone
and inside the tool gate) against the real transcripts of ``cli-reference/qwen/tools``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olp.actors._tool_gate import ToolGate
from olp.actors._toolbridge import TOOLS_FILE, bridge_command, tools_file_text
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
)
from olp.providers.qwen import QwenParser
from olp.providers.qwen import _invocation as qi

TOOLS_DIR = Path(__file__).resolve().parents[2] / "fixtures/cli-reference/qwen/tools"
WORKDIR = Path("/tmp/olp-run-1-x/job/work")
HOME = WORKDIR.parent / "home"
WEATHER = ToolSpec(name="get_weather", description="Get the weather",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def request(text: str = "What is the weather in Paris?", **fields: Any) -> ChatRequest:
    fields.setdefault("tools", (WEATHER,))
    message = Message(role="user", content=(TextPart(text=text),))
    return ChatRequest(model="qwen-coder", messages=(message,), **fields)


def invocation(req: ChatRequest, extra_args: tuple[str, ...] = ()) -> Any:
    return qi.build_invocation(req, binary="qwen", model="M", workdir=WORKDIR,
                               extra_args=extra_args)


def transcript(case: str) -> tuple[list[bytes], int, bytes]:
    meta = json.loads((TOOLS_DIR / f"{case}.meta.json").read_text())
    lines = (TOOLS_DIR / f"{case}.stdout.jsonl").read_bytes().splitlines()
    return [ln for ln in lines if ln.strip()], meta["exit_code"], \
        (TOOLS_DIR / f"{case}.stderr").read_bytes()


def parse(lines: list[bytes]) -> list[Event]:
    """Events up to and including the first terminal one (the runner stops feeding there)."""
    parser = QwenParser(now=lambda: 0.0)
    events: list[Event] = []
    for ln in lines:
        events.extend(parser.feed(ln))
    return events


def line(**fields: Any) -> bytes:
    return json.dumps({"uuid": "u", "session_id": "s", **fields}).encode()


# -- invocation ---------------------------------------------------------------------------


def test_without_tools_the_spawn_is_the_no_tools_recipe() -> None:
    for req in (request(tools=()), request(tool_choice="none")):
        inv = invocation(req)
        assert inv.home_files[qi.SETTINGS_FILE] == qi.SETTINGS_TEXT
        assert qi.TRUSTED_FOLDERS_FILE not in inv.home_files
        assert f"{qi.BRIDGE_DIR}/{TOOLS_FILE}" not in inv.home_files
        assert "--allowed-mcp-server-names" not in inv.argv


def test_with_tools_qwen_starts_exactly_the_bridge() -> None:
    inv = invocation(request(), extra_args=("--owner-flag",))
    settings = json.loads(inv.home_files[qi.SETTINGS_FILE])
    command, args = bridge_command(HOME / qi.BRIDGE_DIR)
    assert settings["mcpServers"] == {"olp": {"command": command, "args": args}}
    assert settings["mcp"] == {"allowed": ["olp"]}
    assert inv.home_files[f"{qi.BRIDGE_DIR}/{TOOLS_FILE}"] == tools_file_text((WEATHER,))
    assert args[-1] == str(HOME / qi.BRIDGE_DIR / TOOLS_FILE)  # the home, not the workdir
    # every built-in tool stays denied and disabled, the rest of the lockdown stays
    assert settings["permissions"]["deny"] == list(qi.ALL_TOOLS)
    assert settings["tools"]["disabled"] == list(qi.ALL_TOOLS)
    for key in ("memory", "skills", "slashCommands", "disableAllHooks", "general", "model"):
        assert settings[key] == qi.SETTINGS[key]
    assert settings["security"]["folderTrust"] == {"enabled": True}
    argv = list(inv.argv)
    assert argv[argv.index("--max-tool-calls") + 1] == "0"
    assert argv[-3:] == ["--allowed-mcp-server-names", "olp", "--owner-flag"]
    assert not any("Paris" in a for a in argv)  # no client text on argv
    assert inv.files == {}  # the workdir stays empty


def test_only_the_workdir_is_trusted_and_no_context_file_can_be_planted() -> None:
    inv = invocation(request())
    trusted = json.loads(inv.home_files[qi.TRUSTED_FOLDERS_FILE])
    assert trusted == {"/": "DO_NOT_TRUST", str(WORKDIR): "TRUST_FOLDER"}
    names = {json.loads(invocation(request()).home_files[qi.SETTINGS_FILE])["context"]
             ["fileName"][0] for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("olp-no-context-") for n in names)
    assert not names & {"QWEN.md", "AGENTS.md"}


def test_a_forced_tool_choice_is_an_instruction_at_the_head_of_the_prompt() -> None:
    choice = {"type": "function", "function": {"name": "get_weather"}}
    prompt = invocation(request(tool_choice=choice)).stdin.decode()
    assert prompt.startswith("You must answer this turn by calling the tool get_weather now.")
    assert prompt.endswith("What is the weather in Paris?")
    assert invocation(request()).stdin.decode() == "What is the weather in Paris?"


# -- parser, on the real transcripts ------------------------------------------------------


def test_one_call_ends_the_job_at_the_assistant_event() -> None:
    lines, code, _ = transcript("single")
    assert code == 55  # left alone, qwen aborts on its tool-call budget
    events = parse(lines)
    assert events == [
        ToolCallDelta(index=0, id="call_mock000001_0", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":"Paris"}'),
        Usage(prompt_tokens=21, completion_tokens=1),
        Stop(finish_reason="tool_calls"),
    ]


def test_parallel_calls_are_all_reported_before_the_stop() -> None:
    events = parse(transcript("parallel")[0])
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.name, c.arguments) for c in calls] == [
        (0, "get_weather", ""), (0, None, '{"city":"Paris"}'),
        (1, "get_weather", ""), (1, None, '{"city":"Tokyo"}')]
    assert events[-1] == Stop(finish_reason="tool_calls")


def test_a_preamble_is_text_and_its_own_assistant_event_does_not_stop() -> None:
    events = parse(transcript("preamble")[0])
    assert events[0] == TextDelta(text="Let me check.")
    assert events[1] == ToolCallDelta(index=0, id="call_mock000001_0", name="get_weather")
    assert events[-1] == Stop(finish_reason="tool_calls")


def test_the_second_turn_is_answered_with_text() -> None:
    lines, code, stderr = transcript("result")
    parser = QwenParser(now=lambda: 0.0)
    events = [e for ln in lines for e in parser.feed(ln)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        'Weather report: {"temp_c": 18, "sky": "sunny"}'
    assert not any(isinstance(e, ToolCallDelta) for e in events)
    assert parser.finish(code, stderr) == Stop(finish_reason="stop")


def test_arguments_qwen_repaired_are_released_from_the_first_message() -> None:
    # the mock sent '{"city": "Par' (cut); qwen printed it repaired, then re-asked
    events = parse(transcript("malformed")[0])
    assert ToolCallDelta(index=0, arguments='{"city":"Par"}') in events
    assert events[-1] == Stop(finish_reason="tool_calls")
    assert sum(1 for e in events if isinstance(e, ToolCallDelta) and e.name) == 1


@pytest.mark.parametrize("case", ["bridge_missing", "untrusted"])
def test_a_bridge_that_did_not_connect_fails_at_init(case: str) -> None:
    [terminal] = parse(transcript(case)[0])
    assert isinstance(terminal, Error) and terminal.code == "TOOL_BRIDGE_FAILED"
    assert "disconnected" in terminal.message


def test_a_connected_bridge_without_its_tools_fails_at_init() -> None:
    init = line(type="system", subtype="init", tools=[],
                mcp_servers=[{"name": "olp", "status": "connected"}])
    [terminal] = parse([init])
    assert isinstance(terminal, Error) and terminal.code == "TOOL_BRIDGE_FAILED"


def test_an_init_with_a_built_in_tool_beside_the_bridge_ends_the_job() -> None:
    init = line(type="system", subtype="init",
                tools=["mcp__olp__get_weather", "run_shell_command"],
                mcp_servers=[{"name": "olp", "status": "connected"}])
    [terminal] = parse([init])
    assert isinstance(terminal, Error) and terminal.code == "CONFIG_ERROR"
    assert "run_shell_command" in terminal.message and "get_weather" not in terminal.message


def test_a_tool_use_not_on_the_bridge_is_invalid() -> None:
    start = line(type="stream_event", event={
        "type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "c1", "name": "mcp__other__x", "input": {}}})
    [terminal] = parse([start])
    assert isinstance(terminal, Error) and terminal.code == "TOOL_CALL_INVALID"


def test_a_call_seen_only_in_the_assistant_event_is_reported_whole() -> None:
    assistant = line(type="assistant", message={
        "id": "m", "content": [
            {"type": "tool_use", "id": "c1", "name": "mcp__olp__get_weather",
             "input": {"city": "Oslo"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 2}})
    assert parse([assistant]) == [
        ToolCallDelta(index=0, id="c1", name="get_weather", arguments='{"city": "Oslo"}'),
        Usage(prompt_tokens=5, completion_tokens=2), Stop(finish_reason="tool_calls")]


def test_text_held_as_a_possible_api_error_is_sent_before_the_call() -> None:
    text = line(type="stream_event", event={
        "type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "["}})
    start = line(type="stream_event", event={
        "type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "c1", "name": "mcp__olp__get_weather"}})
    assert parse([text, start]) == [
        TextDelta(text="["), ToolCallDelta(index=0, id="c1", name="get_weather")]


# -- through the tool gate ----------------------------------------------------------------


def gated(case: str, req: ChatRequest) -> list[Event]:
    gate = ToolGate(QwenParser(now=lambda: 0.0), req)
    lines, code, stderr = transcript(case)
    events: list[Event] = []
    for ln in lines:
        events.extend(gate.feed(ln))
        if events and isinstance(events[-1], Stop | Error):
            return events
    return [*events, gate.finish(code, stderr)]


def test_the_gate_releases_parallel_calls_in_openai_order() -> None:
    events = gated("parallel", request("What is the weather in Paris and Tokyo?"))
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.id, c.name) for c in calls if c.name] == [
        (0, "call_mock000001_0", "get_weather"), (1, "call_mock000001_1", "get_weather")]
    assert events[-1] == Stop(finish_reason="tool_calls")


def test_the_gate_refuses_a_call_of_a_tool_the_request_did_not_offer() -> None:
    other = ToolSpec(name="get_time")
    events = gated("single", request(tools=(other,)))
    assert isinstance(events[-1], Error) and events[-1].code == "TOOL_CALL_INVALID"
