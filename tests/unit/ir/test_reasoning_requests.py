"""Reasoning in (issue #27, ADR 0026): each dialect's fields onto the IR's one
:class:`~olp.ir.Reasoning`, every value the official SDKs send taken, anything else a 400 naming
the field; fuzzed like the rest of each body."""

from __future__ import annotations

import json
from typing import Any, get_args, get_type_hints

import msgspec
import pytest
from anthropic.types import OutputConfigParam, ThinkingConfigParam
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.shared import Reasoning as OpenAIReasoning
from openai.types.shared import ReasoningEffort

from olp.ir import ChatRequest, Message, Reasoning, TextPart
from olp.ir.anthropic import decode_count_tokens_request, decode_messages_request
from olp.ir.openai import InvalidRequest, decode_chat_request
from olp.ir.responses import decode_responses_request


def chat(**body: Any) -> ChatRequest:
    return decode_chat_request(json.dumps({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], **body}).encode())


def responses(**body: Any) -> ChatRequest:
    return decode_responses_request(json.dumps({"model": "m", "input": "hi", **body}).encode())


def messages(**body: Any) -> ChatRequest:
    return decode_messages_request(json.dumps({
        "model": "m", "max_tokens": 64_000, "messages": [{"role": "user", "content": "hi"}],
        **body}).encode())


def literals(annotation: Any) -> list[str]:
    """The strings of a ``Literal`` (inside ``Optional`` too)."""
    found: list[str] = []
    for arg in get_args(annotation):
        found += [arg] if isinstance(arg, str) else literals(arg)
    return found


def refused(decode: Any, **body: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        decode(**body)
    return info.value


# --- chat completions: reasoning_effort -------------------------------------------------------

def test_chat_takes_every_effort_the_sdk_sends() -> None:
    """``xhigh`` and ``max`` are above the IR's top level: ``high``, the nearest."""
    sent = literals(ReasoningEffort)
    assert {"none", "minimal", "low", "medium", "high", "xhigh", "max"} <= set(sent)
    expected = {"xhigh": "high", "max": "high"}
    for effort in sent:
        level = expected.get(effort, effort)
        assert chat(reasoning_effort=effort).reasoning == Reasoning(effort=level,  # type: ignore[arg-type]
                                                                    show=effort != "none")


def test_chat_without_reasoning_effort_asks_nothing() -> None:
    assert chat().reasoning is None
    assert chat(reasoning_effort=None).reasoning is None


@pytest.mark.parametrize(("value", "code"), [("extreme", "invalid_value"), ("", "invalid_value"),
                                             (3, "invalid_type"), ({"effort": "low"},
                                                                   "invalid_type")])
def test_chat_refuses_an_unknown_effort_naming_it(value: Any, code: str) -> None:
    e = refused(chat, reasoning_effort=value)
    assert (e.param, e.code, e.type) == ("reasoning_effort", code, "invalid_request_error")
    assert "reasoning_effort" in e.message


# --- responses: reasoning.effort and reasoning.summary ----------------------------------------

def test_responses_take_every_effort_and_summary_the_sdk_sends() -> None:
    summaries = literals(OpenAIReasoning.model_fields["summary"].annotation)
    assert set(summaries) == {"auto", "concise", "detailed"}
    for summary in summaries:
        for effort in literals(ReasoningEffort):
            level = "high" if effort in ("xhigh", "max") else effort
            assert responses(reasoning={"effort": effort, "summary": summary}).reasoning == \
                Reasoning(effort=level, summary=summary,  # type: ignore[arg-type]
                          show=effort != "none")
        assert responses(reasoning={"generate_summary": summary}).reasoning == \
            Reasoning(summary=summary, show=True)


@pytest.mark.parametrize(("reasoning", "expected"), [
    (None, None), ({}, None), ({"effort": None, "summary": None}, None),
    ({"effort": "medium"}, Reasoning(effort="medium")),  # no summary: nothing back
    ({"summary": "detailed"}, Reasoning(summary="detailed", show=True)),
    ({"summary": "concise", "generate_summary": "detailed"},
     Reasoning(summary="concise", show=True)),
    ({"effort": "low", "context": "all_turns", "mode": "pro"}, Reasoning(effort="low")),
])
def test_responses_reasoning(reasoning: Any, expected: Reasoning | None) -> None:
    assert responses(reasoning=reasoning).reasoning == expected


@pytest.mark.parametrize(("reasoning", "param"), [
    ({"effort": "extreme"}, "reasoning.effort"), ({"summary": "long"}, "reasoning.summary"),
    ({"generate_summary": "brief"}, "reasoning.generate_summary"),
    ({"effort": 1}, "reasoning.effort"), ("high", "reasoning"),
])
def test_responses_refuse_bad_reasoning_naming_the_field(reasoning: Any, param: str) -> None:
    assert refused(responses, reasoning=reasoning).param == param


def test_responses_reasoning_items_in_input_stay_dropped() -> None:
    """What a client echoes back (codex sends its reasoning items with encrypted content)."""
    req = responses(input=[
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA",
         "summary": [{"type": "summary_text", "text": "musing"}],
         "content": [{"type": "reasoning_text", "text": "musing"}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Hello"}]},
        {"role": "user", "content": "again"}])
    assert [m.text() for m in req.messages] == ["hi", "Hello", "again"]


# --- messages: thinking and output_config.effort ----------------------------------------------

@pytest.mark.parametrize(("body", "expected"), [
    ({}, None),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}},
     Reasoning(effort="low", budget_tokens=1024, show=True)),
    ({"thinking": {"type": "enabled", "budget_tokens": 4097}},
     Reasoning(effort="medium", budget_tokens=4097, show=True)),
    ({"thinking": {"type": "enabled", "budget_tokens": 32_000, "display": "summarized"}},
     Reasoning(effort="high", budget_tokens=32_000, show=True)),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}},
     Reasoning(effort="low", budget_tokens=2048)),
    ({"thinking": {"type": "disabled"}}, Reasoning(effort="none")),
    ({"thinking": {"type": "adaptive"}}, Reasoning(show=True)),
    ({"thinking": {"type": "between_tools"}}, Reasoning(show=True)),
    # What claude 2.1 sends with --effort: thinking it does not want back, and a level.
    ({"thinking": {"type": "adaptive", "display": "omitted"}, "output_config": {"effort": "low"}},
     Reasoning(effort="low")),
    ({"output_config": {"effort": "medium"}}, Reasoning(effort="medium")),
    ({"output_config": {"effort": "max", "format": {"type": "json_schema"}}},
     Reasoning(effort="high")),
    ({"output_config": {}}, None),
    # Both: output_config.effort sets the level; the budget is kept as sent.
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}, "output_config": {"effort": "high"}},
     Reasoning(effort="high", budget_tokens=2048, show=True)),
])
def test_messages_thinking_and_effort(body: dict[str, Any], expected: Reasoning | None) -> None:
    assert messages(**body).reasoning == expected
    assert decode_count_tokens_request(json.dumps({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], **body}).encode()
    ).reasoning == expected


def test_messages_take_every_thinking_type_and_effort_the_sdk_sends() -> None:
    types = [literals(get_type_hints(t)["type"])[0] for t in get_args(ThinkingConfigParam)]
    assert set(types) == {"enabled", "disabled", "adaptive", "between_tools"}
    for kind in types:
        thinking: dict[str, Any] = {"type": kind, "budget_tokens": 1024} \
            if kind == "enabled" else {"type": kind}
        efforts = literals(get_type_hints(OutputConfigParam)["effort"])
        assert set(efforts) == {"low", "medium", "high", "xhigh", "max"}
        for effort in efforts:
            reasoning = messages(thinking=thinking, output_config={"effort": effort}).reasoning
            assert reasoning is not None
            assert reasoning.effort == ("high" if effort in ("xhigh", "max") else effort)


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens", "missing_required_parameter"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1023}}, "thinking.budget_tokens",
     "invalid_value"),
    ({"thinking": {"type": "enabled", "budget_tokens": "lots"}}, "thinking.budget_tokens",
     "invalid_type"),
    ({"thinking": {"type": "sometimes"}}, "thinking.type", "invalid_value"),
    ({"thinking": {}}, "thinking.type", "missing_required_parameter"),
    ({"thinking": {"type": "adaptive", "display": "loud"}}, "thinking.display", "invalid_value"),
    ({"thinking": True}, "thinking", "invalid_type"),
    ({"output_config": {"effort": "none"}}, "output_config.effort", "invalid_value"),
    ({"output_config": {"effort": "minimal"}}, "output_config.effort", "invalid_value"),
    ({"output_config": "high"}, "output_config", "invalid_type"),
])
def test_messages_refuse_bad_thinking_naming_the_field(body: dict[str, Any], param: str,
                                                       code: str) -> None:
    e = refused(messages, **body)
    assert (e.param, e.code) == (param, code)


def test_thinking_blocks_sent_back_are_dropped_empty_signature_and_all() -> None:
    """OLP's own thinking blocks carry ``"signature": ""``; a client sends them back within a
    turn of tool calls. They are dropped (no hop can replay them), never a 400."""
    req = messages(messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "they want weather", "signature": ""},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
            {"type": "thinking", "thinking": "also", "signature": "EqQBCgIYAhIM"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "18 C"}]}],
        tools=[{"name": "get_weather", "input_schema": {"type": "object"}}])
    assistant = req.messages[1]
    assert assistant.content == (TextPart(text="Checking."),)
    assert [c.name for c in assistant.tool_calls] == ["get_weather"]
    assert req.messages[0] == Message(role="user", content=(TextPart(text="weather?"),))


# --- fuzz: any value in the reasoning fields is a ChatRequest or a clear 400 ------------------

SCALARS = (st.none() | st.booleans() | st.integers(-2**40, 2**40)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
           | st.sampled_from(["none", "minimal", "low", "medium", "high", "xhigh", "max",
                              "auto", "concise", "detailed", "enabled", "disabled", "adaptive",
                              "between_tools", "summarized", "omitted", 1024, 5000, 20000]))
KEYS = st.sampled_from(["effort", "summary", "generate_summary", "type", "budget_tokens",
                        "display", "format", "context", "mode"]) | st.text(max_size=5)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(KEYS, inner, max_size=4), max_leaves=10)
FIELDS = [(chat, "reasoning_effort"), (responses, "reasoning"), (messages, "thinking"),
          (messages, "output_config")]


def _check(decode: Any, body: dict[str, Any]) -> None:
    try:
        req = decode(**body)
    except InvalidRequest as e:
        assert e.message and (e.param is None or e.param.split(".")[0] in body)
        return
    # A valid IR value: a strict round trip checks the effort is one of the IR's levels.
    assert msgspec.json.decode(msgspec.json.encode(req), type=ChatRequest) == req


@settings(max_examples=400, deadline=None, database=None)
@given(st.data())
def test_fuzz_reasoning_fields(data: st.DataObject) -> None:
    decode, field = data.draw(st.sampled_from(FIELDS))
    body = {field: data.draw(JSON)}
    if decode is messages and data.draw(st.booleans()):  # both Messages fields at once
        other = "output_config" if field == "thinking" else "thinking"
        body[other] = data.draw(JSON)
    _check(decode, body)
