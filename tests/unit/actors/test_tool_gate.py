"""The tool gate: a parser's tool calls checked against the request (olp/actors/_tool_gate.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sample_requests import user_says

from olp.actors._tool_gate import ToolGate
from olp.actors.testing import JsonLinesAdapter, event_line
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    is_terminal,
)

WEATHER = ToolSpec(name="get_weather", parameters={"type": "object"})
CLOCK = ToolSpec(name="get_time")


def req(**kw: Any) -> ChatRequest:
    base = user_says("weather?", model="m")
    return ChatRequest(**{**{f: getattr(base, f) for f in base.__struct_fields__},
                          "tools": (WEATHER, CLOCK), **kw})


def run(request: ChatRequest, events: list[Event], *, exit_code: int | None = None) -> list[Event]:
    """Feed ``events`` through the gate as lines; stop at its terminal event, or (with
    ``exit_code``) let the fake CLI exit after the lines, as the runner does."""
    gate = ToolGate(JsonLinesAdapter().parser(Path()), request)
    out: list[Event] = []
    for event in events:
        for got in gate.feed(event_line(event)):
            out.append(got)
            if is_terminal(got):
                return out
    if exit_code is not None:
        out += gate.trailer(exit_code, b"")
        out.append(gate.finish(exit_code, b""))
    return out


def call(index: int, name: str | None = None, args: str = "", id: str | None = None) -> Event:
    return ToolCallDelta(index=index, id=id, name=name, arguments=args)


def code(event: Event) -> str:
    assert isinstance(event, Error), event
    return event.code


def test_a_call_is_released_whole_with_id_and_name_first_then_stops() -> None:
    out = run(req(), [TextDelta(text="Let me check. "),
                      call(1, "get_weather", "", "toolu_1"), call(1, args='{"ci'),
                      call(1, args='ty": "Paris"}'), Usage(prompt_tokens=5, completion_tokens=3),
                      Stop(finish_reason="tool_calls"), TextDelta(text="never read")])
    assert out == [TextDelta(text="Let me check. "), Usage(prompt_tokens=5, completion_tokens=3),
                   ToolCallDelta(index=0, id="toolu_1", name="get_weather"),
                   ToolCallDelta(index=0, arguments='{"ci'),
                   ToolCallDelta(index=0, arguments='ty": "Paris"}'),
                   Stop(finish_reason="tool_calls")]


def test_parallel_calls_are_renumbered_in_order() -> None:
    out = run(req(), [call(3, "get_weather", '{"city":"Paris"}', "a"),
                      call(5, "get_time", "", "b"), Stop(finish_reason="tool_calls")])
    assert out == [ToolCallDelta(index=0, id="a", name="get_weather"),
                   ToolCallDelta(index=0, arguments='{"city":"Paris"}'),
                   ToolCallDelta(index=1, id="b", name="get_time"),
                   ToolCallDelta(index=1, arguments="{}"),
                   Stop(finish_reason="tool_calls")]


def test_a_call_without_an_id_gets_one() -> None:
    out = run(req(), [call(0, "get_time", "{}"), Stop(finish_reason="tool_calls")])
    first = out[0]
    assert isinstance(first, ToolCallDelta) and first.id and first.id.startswith("call_")


def test_parallel_tool_calls_false_keeps_the_first_and_stops_at_the_second() -> None:
    out = run(req(parallel_tool_calls=False),
              [call(0, "get_weather", '{"city":"Paris"}', "a"), call(1, "get_weather", "", "b"),
               call(1, args='{"city":"Oslo"}'), Stop(finish_reason="tool_calls")])
    assert out == [ToolCallDelta(index=0, id="a", name="get_weather"),
                   ToolCallDelta(index=0, arguments='{"city":"Paris"}'),
                   Stop(finish_reason="tool_calls")]


@pytest.mark.parametrize("events", [
    [call(0, "rm_rf", "{}", "a"), Stop(finish_reason="tool_calls")],
    [call(0, None, "{}", "a"), Stop(finish_reason="tool_calls")],
    [call(0, "get_weather", '{"city": ', "a"), Stop(finish_reason="tool_calls")],
    [call(0, "get_weather", '["Paris"]', "a"), Stop(finish_reason="tool_calls")],
    [call(0, "get_weather", '{"city":"Paris"}', "a"), call(1, "nope", "{}", "b"),
     Stop(finish_reason="tool_calls")],
])
def test_unknown_tools_and_non_object_arguments_are_invalid_before_anything_is_sent(
        events: list[Event]) -> None:
    out = run(req(), events)
    assert len(out) == 1 and code(out[0]) == "TOOL_CALL_INVALID"
    assert isinstance(out[0], Error) and out[0].category == "unavailable"


def test_a_call_when_no_tool_is_offered_is_invalid() -> None:
    out = run(req(tool_choice="none"), [call(0, "get_weather", "{}", "a"),
                                        Stop(finish_reason="tool_calls")])
    assert [code(e) for e in out] == ["TOOL_CALL_INVALID"]


def test_auto_passes_prose_through() -> None:
    assert run(req(), [TextDelta(text="It is sunny."), Stop()]) == [
        TextDelta(text="It is sunny."), Stop()]


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_weather"}}])
def test_forced_choice_holds_text_until_the_call(choice: Any) -> None:
    out = run(req(tool_choice=choice), [TextDelta(text="Checking. "),
                                        call(0, "get_weather", '{"city":"Paris"}', "a"),
                                        Stop(finish_reason="tool_calls")])
    assert out == [TextDelta(text="Checking. "),
                   ToolCallDelta(index=0, id="a", name="get_weather"),
                   ToolCallDelta(index=0, arguments='{"city":"Paris"}'),
                   Stop(finish_reason="tool_calls")]


@pytest.mark.parametrize("exit_code", [None, 0])
def test_forced_choice_answered_in_prose_is_unmet_and_no_text_leaks(exit_code: int | None) -> None:
    events: list[Event] = [TextDelta(text="I'd rather chat."),
                           Usage(prompt_tokens=1, completion_tokens=1)]
    if exit_code is None:
        events.append(Stop())
    out = run(req(tool_choice="required"), events, exit_code=exit_code)
    assert out[:-1] == [Usage(prompt_tokens=1, completion_tokens=1)]
    assert code(out[-1]) == "TOOL_CHOICE_UNMET"
    assert isinstance(out[-1], Error) and out[-1].category == "unavailable"


def test_named_choice_with_another_tool_called_is_unmet() -> None:
    out = run(req(tool_choice={"type": "function", "function": {"name": "get_time"}}),
              [call(0, "get_weather", "{}", "a"), Stop(finish_reason="tool_calls")])
    assert [code(e) for e in out] == ["TOOL_CHOICE_UNMET"]


def test_calls_then_exit_without_a_stop_line_still_end_as_tool_calls() -> None:
    out = run(req(), [call(0, "get_time", "{}", "a")], exit_code=0)
    assert out == [ToolCallDelta(index=0, id="a", name="get_time"),
                   ToolCallDelta(index=0, arguments="{}"), Stop(finish_reason="tool_calls")]


def test_a_cli_error_passes_through_and_drops_held_calls() -> None:
    failed = Error(code="CLI_FAILED", category="unknown", message="boom")
    assert run(req(), [call(0, "get_time", "{}", "a"), failed]) == [failed]


def test_a_tool_use_stop_without_any_call_is_a_plain_stop() -> None:
    assert run(req(), [TextDelta(text="hm"), Stop(finish_reason="tool_calls")]) == [
        TextDelta(text="hm"), Stop()]


def test_without_tools_the_gate_changes_nothing() -> None:
    plain = user_says("hi", model="m")
    events: list[Event] = [TextDelta(text="a"), Usage(prompt_tokens=1, completion_tokens=2),
                           Stop(finish_reason="length")]
    assert run(plain, events) == events


def test_arguments_reassemble_to_the_json_the_cli_printed() -> None:
    args = json.dumps({"city": "São Paulo", "days": [1, 2]})
    pieces = [args[i:i + 3] for i in range(0, len(args), 3)]
    out = run(req(), [call(0, "get_weather", "", "a"), *[call(0, args=p) for p in pieces],
                      Stop(finish_reason="tool_calls")])
    deltas = [e for e in out if isinstance(e, ToolCallDelta)]
    assert (deltas[0].id, deltas[0].name, deltas[0].arguments) == ("a", "get_weather", "")
    assert all(d.id is None and d.name is None for d in deltas[1:])
    assert json.loads("".join(d.arguments for d in deltas)) == json.loads(args)
