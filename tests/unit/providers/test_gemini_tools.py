"""gemini tool calling: the invocation with OLP's MCP bridge (settings, policy, tools file in
the private home) and the parser on the real CLI's recorded lines
(``tests/fixtures/cli-reference/gemini/tools/``, gemini-cli 0.61.0 against the loopback mock
with the bridge; see that folder's README)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from olp.actors import Invocation
from olp.actors._tool_gate import ToolGate
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
from olp.providers.gemini import ADAPTER, GeminiParser
from olp.providers.gemini._invocation import (
    NO_MCP_SERVER,
    POLICY,
    POLICY_FILE,
    SETTINGS_FILE,
    SETTINGS_TEXT,
    TOOLS_POLICY,
)
from olp.providers.gemini._parser import without_wait_for_previous

TOOLS = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini"
         / "tools")
WORKDIR = Path("/run/olp/jobs/j1/work")
HOME = WORKDIR.parent / "home"
WEATHER = ToolSpec(name="get_weather", description="Get the current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})


def with_text(text: str, tools: tuple[ToolSpec, ...] = (), tool_choice: str | None = None,
              parallel: bool | None = None) -> ChatRequest:
    return ChatRequest(model="gemini", tools=tools, tool_choice=tool_choice,
                       parallel_tool_calls=parallel,
                       messages=(Message(role="user", content=(TextPart(text=text),)),))


def invoke(req: ChatRequest) -> Invocation:
    return ADAPTER.invocation(req, binary="/opt/gemini", model="gemini-2.5-pro",
                                      workdir=WORKDIR)


# -- invocation ---------------------------------------------------------------------------


def test_offered_tools_make_the_bridge_the_only_mcp_server() -> None:
    inv = invoke(with_text("What is the weather in Paris?", tools=(WEATHER,)))
    settings = json.loads(inv.home_files[SETTINGS_FILE])
    assert settings["mcpServers"] == {"olp": {
        "command": sys.executable,
        "args": ["-I", "-S", str(BRIDGE_SCRIPT), str(HOME / TOOLS_FILE)]}}
    assert settings["mcp"] == {"allowed": ["olp"]}
    assert settings["tools"]["core"] == []  # the built-ins stay off
    # every other setting is the no-tools recipe's
    recipe = json.loads(SETTINGS_TEXT)
    assert {k: v for k, v in settings.items() if k not in ("mcpServers", "mcp")} == {
        k: v for k, v in recipe.items() if k not in ("mcpServers", "mcp")}
    assert json.loads(inv.home_files[TOOLS_FILE]) == {"tools": [{
        "name": "get_weather", "description": "Get the current weather for a city.",
        "inputSchema": WEATHER.parameters}]}
    # the tools file is in the private home (``@path`` reads the workdir): nothing there
    assert inv.files == {} and inv.binary_files == {}
    assert inv.stdin == b"What is the weather in Paris?"
    assert not any("weather" in a.lower() for a in inv.argv)


def test_the_tools_policy_allows_only_the_bridge_above_a_deny_all() -> None:
    inv = invoke(with_text("hi", tools=(WEATHER,)))
    assert inv.home_files[POLICY_FILE] == TOOLS_POLICY == (
        '[[rule]]\nmcpName = "olp"\ntoolName = "*"\ndecision = "allow"\npriority = 999\n\n'
        '[[rule]]\ntoolName = "*"\ndecision = "deny"\npriority = 998\n')


def test_no_tools_or_tool_choice_none_means_no_bridge() -> None:
    for req in (with_text("hi"), with_text("hi", tools=(WEATHER,), tool_choice="none")):
        inv = invoke(req)
        assert TOOLS_FILE not in inv.home_files
        assert inv.home_files[SETTINGS_FILE] == SETTINGS_TEXT
        assert json.loads(SETTINGS_TEXT)["mcp"] == {"allowed": [NO_MCP_SERVER]}
        assert inv.home_files[POLICY_FILE] == POLICY


def test_a_forced_tool_choice_is_an_instruction_at_the_head_of_the_prompt() -> None:
    req = with_text("Weather?", tools=(WEATHER,), tool_choice="required")
    instruction = tool_instruction(req)
    assert instruction is not None
    assert invoke(req).stdin.decode() == f"{instruction}\n\nWeather?"
    # no forced choice: no instruction
    assert invoke(with_text("Weather?", tools=(WEATHER,))).stdin == b"Weather?"


def test_the_captured_home_files_are_olps() -> None:
    """The transcripts were recorded with exactly the files OLP writes (paths aside; the
    capture put a logging relay in front of the bridge)."""
    meta = json.loads((TOOLS / "single.meta.json").read_text(encoding="utf-8"))
    inv = invoke(with_text("What is the weather in Paris?", tools=(WEATHER,)))
    assert meta["home_files"][POLICY_FILE] == inv.home_files[POLICY_FILE]
    assert json.loads(meta["home_files"][TOOLS_FILE]) == json.loads(inv.home_files[TOOLS_FILE])
    captured = json.loads(meta["home_files"][SETTINGS_FILE])
    ours = json.loads(inv.home_files[SETTINGS_FILE])
    assert captured["mcp"] == ours["mcp"] and captured["tools"] == ours["tools"]
    assert captured["mcpServers"]["olp"]["args"][-1] == "<HOME>/olp-tools.json"


# -- the recorded runs ----------------------------------------------------------------------


def replay(case: str, request: ChatRequest | None = None, *,
           hold_text: bool = False) -> list[Event]:
    """Events up to the terminal one, the case's stdout fed through the parser (and the gate
    when ``request`` is given), then its exit code and stderr."""
    meta = json.loads((TOOLS / f"{case}.meta.json").read_text(encoding="utf-8"))
    parser = GeminiParser(new_id=lambda: "call_1", hold_text=hold_text)
    stage = ToolGate(parser, request) if request is not None else parser
    events: list[Event] = []
    for line in (TOOLS / f"{case}.stdout.jsonl").read_bytes().splitlines():
        events += stage.feed(line)
        if events and is_terminal(events[-1]):
            return events
    stderr = (TOOLS / f"{case}.stderr").read_bytes()
    events += stage.trailer(meta["exit_code"], stderr)
    return [*events, stage.finish(meta["exit_code"], stderr)]


def test_the_call_line_ends_the_job_with_the_clients_tool_name() -> None:
    events = replay("single")
    assert events == [TextDelta(text="Let me check the weather."),
                      ToolCallDelta(index=0, id="call_1", name="get_weather",
                                    arguments='{"city":"Paris"}'),
                      Stop(finish_reason="tool_calls")]


def test_through_the_gate_the_call_is_released_as_openai_streams_it() -> None:
    events = replay("single", with_text("What is the weather in Paris?", tools=(WEATHER,)))
    assert events == [TextDelta(text="Let me check the weather."),
                      ToolCallDelta(index=0, id="call_1", name="get_weather"),
                      ToolCallDelta(index=0, arguments='{"city":"Paris"}'),
                      Stop(finish_reason="tool_calls")]


def test_a_parallel_turn_is_answered_with_its_first_call() -> None:
    """gemini prints both calls, but nothing after the last one: the job ends at the first."""
    lines = (TOOLS / "parallel.stdout.jsonl").read_text(encoding="utf-8").splitlines()
    assert sum(json.loads(x)["type"] == "tool_use" for x in lines) == 2
    events = replay("parallel", with_text("Paris and Tokyo?", tools=(WEATHER,)))
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert json.loads("".join(c.arguments for c in calls)) == {"city": "Paris"}
    assert events[-1] == Stop(finish_reason="tool_calls")


def test_asked_for_a_shell_the_call_is_still_the_bridge_tool() -> None:
    events = replay("shell_ask")
    assert [e.name for e in events if isinstance(e, ToolCallDelta)] == ["get_weather"]


def test_the_second_turn_answers_with_text() -> None:
    events = replay("result", with_text("history", tools=(WEATHER,)))
    assert events == [TextDelta(text="The weather tool said: Sunny, 22 C"),
                      Usage(prompt_tokens=25, completion_tokens=7), Stop(finish_reason="stop")]


def test_a_bridge_that_did_not_start_is_tool_bridge_failed() -> None:
    """gemini answers without the tools (nothing on stdout says so; stderr does)."""
    upstream = (TOOLS / "bridge_failed.upstream.jsonl").read_text(encoding="utf-8")
    assert json.loads(upstream.splitlines()[0])["tool_declarations"] == []
    terminal = replay("bridge_failed")[-1]
    assert isinstance(terminal, Error) and terminal.code == Code.TOOL_BRIDGE_FAILED
    assert terminal.category == "unavailable"


@pytest.mark.parametrize(("line", "expected"), [
    # another tool (an owner switched a built-in back on): gemini runs it, not reported
    (b'{"type":"tool_use","tool_name":"read_file","tool_id":"x","parameters":{}}', ()),
    (b'{"type":"tool_use","tool_name":"mcp_other_get_weather","parameters":{}}', ()),
    (b'{"type":"tool_use","tool_name":"mcp_olp_","parameters":{}}', ()),
    (b'{"type":"tool_use","tool_name":7}', ()),
    (b'{"type":"tool_use","tool_name":"mcp_olp_ping"}',
     (ToolCallDelta(index=0, id="call_1", name="ping", arguments="{}"),
      Stop(finish_reason="tool_calls"))),
])
def test_tool_use_lines(line: bytes, expected: tuple[Event, ...]) -> None:
    parser = GeminiParser(new_id=lambda: "call_1")
    assert tuple(parser.feed(line)) == expected
    if expected:
        assert parser.feed(b'{"type":"message","role":"assistant","content":"x"}') == ()
        assert parser.finish(-9, b"") == Stop(finish_reason="tool_calls")


def test_parallel_false_keeps_the_first_call() -> None:
    events = replay("parallel", with_text("Paris and Tokyo?", tools=(WEATHER,), parallel=False))
    assert [e.name for e in events if isinstance(e, ToolCallDelta) and e.name] == [
        "get_weather"]


def test_geminis_own_wait_for_previous_flag_is_removed_from_the_arguments() -> None:
    """gemini adds ``wait_for_previous`` to every declared tool and passes the model's value
    through (on stdout and in ``tools/call``): the client never sees it."""
    upstream = json.loads((TOOLS / "wait_for_previous.upstream.jsonl").read_text(
        encoding="utf-8").splitlines()[0])
    [declaration] = upstream["body"]["tools"][0]["functionDeclarations"]
    assert set(declaration["parametersJsonSchema"]["properties"]) == {
        "city", "wait_for_previous"}
    stdout = (TOOLS / "wait_for_previous.stdout.jsonl").read_text(encoding="utf-8")
    assert '"wait_for_previous":false' in stdout
    calls = [e for e in replay("wait_for_previous") if isinstance(e, ToolCallDelta)]
    assert [c.arguments for c in calls] == ['{"city":"Paris"}']


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"city":"Paris","wait_for_previous":true}', '{"city":"Paris"}'),
    ('{"wait_for_previous":false}', "{}"),
    ('{"city":"Paris","wait_for_previous":"yes"}', '{"city":"Paris","wait_for_previous":"yes"}'),
    ('{"city":"Paris"}', '{"city":"Paris"}'),
    ("[1]", "[1]"),
    ("not json", "not json"),
])
def test_without_wait_for_previous(raw: str, expected: str) -> None:
    assert without_wait_for_previous(raw) == expected


def test_with_the_bridge_text_is_held_until_the_call_or_the_exit() -> None:
    """Only stderr (seen at the exit) tells that the bridge failed: a run with the bridge
    sends no text before a call or the exit, so a failed bridge can still fall back."""
    assert replay("single", hold_text=True) == replay("single")
    events = replay("result", with_text("history", tools=(WEATHER,)), hold_text=True)
    assert events == replay("result", with_text("history", tools=(WEATHER,)))
    parser = GeminiParser(hold_text=True)
    lines = (TOOLS / "result.stdout.jsonl").read_bytes().splitlines()
    assert [e for line in lines for e in parser.feed(line)] == []  # all held to the exit
    assert parser.trailer(0, b"")[0] == TextDelta(text="The weather tool said: Sunny, 22 C")


def test_a_failed_bridge_sends_nothing_and_falls_back() -> None:
    events = replay("bridge_failed", with_text("Weather?", tools=(WEATHER,)), hold_text=True)
    assert len(events) == 1
    assert isinstance(events[0], Error) and events[0].code == Code.TOOL_BRIDGE_FAILED


def test_the_adapter_holds_text_only_for_a_run_with_the_bridge(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    (tmp_path / "home").mkdir()
    lines = (TOOLS / "result.stdout.jsonl").read_bytes().splitlines()
    plain = ADAPTER.parser(workdir)
    assert any(isinstance(e, TextDelta) for line in lines for e in plain.feed(line))
    (tmp_path / "home" / TOOLS_FILE).write_text('{"tools": []}')
    bridged = ADAPTER.parser(workdir)
    assert [e for line in lines for e in bridged.feed(line)] == []


def test_with_the_bridge_a_failed_run_sends_no_partial_text() -> None:
    parser = GeminiParser(hold_text=True)
    assert parser.feed(b'{"type":"message","role":"assistant","content":"Hel","delta":true}'
                       ) == ()
    assert parser.feed(b'{"type":"result","status":"error","error":{"type":"unknown",'
                       b'"message":"[API Error: terminated]"}}') == ()
    assert parser.trailer(1, b"") == ()
    assert isinstance(parser.finish(1, b""), Error)
