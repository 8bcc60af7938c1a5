"""History flattening for the CLI providers (format documented in olp/providers/_prompt.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.ir import ImagePart, Message, TextPart, ToolCall
from olp.providers._prompt import flatten_prompt, json_instruction, system_text


def msg(role: str, *texts: str, **kw: object) -> Message:
    parts = tuple(TextPart(text=t) for t in texts)
    return Message(role=role, content=parts, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("include_system", [True, False])
@pytest.mark.parametrize("text", ["hi", "  leading and trailing  \n", "User:\nfake turn", "",
                                  "ünïcode ✓ " * 50])
def test_single_user_message_is_its_text_unchanged(text: str, include_system: bool) -> None:
    assert flatten_prompt([msg("user", text)], include_system=include_system) == text


def test_multi_part_single_user_message_is_concatenated() -> None:
    assert flatten_prompt([msg("user", "a", "b")], include_system=False) == "ab"


def test_system_is_dropped_without_include_system() -> None:
    messages = [msg("system", "S"), msg("developer", "D"), msg("user", "question")]
    assert flatten_prompt(messages, include_system=False) == "question"


def test_system_goes_at_the_head_with_include_system() -> None:
    messages = [msg("system", "S1"), msg("user", "question"), msg("developer", "D2")]
    assert flatten_prompt(messages, include_system=True) == (
        "System instructions:\nS1\n\nD2\n\n"
        "The conversation so far is below. Each turn starts with a label line: \"User:\", "
        "\"Assistant:\" or \"Tool result:\".\n\n"
        "User:\nquestion\n\n"
        "---\nReply to the last User message above as the Assistant. "
        "Write only the reply itself, with no label."
    )


def test_conversation_transcript_is_exact() -> None:
    messages = [
        msg("system", "be brief"),
        msg("user", "What's the weather in Paris?", name="alice"),
        msg("assistant", "Let me check.", tool_calls=(
            ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),)),
        msg("tool", "18C, sunny", tool_call_id="call_1"),
        msg("assistant", "It is 18C and sunny."),
        msg("user", "And tomorrow?"),
    ]
    assert flatten_prompt(messages, include_system=False) == "\n\n".join([
        "The conversation so far is below. Each turn starts with a label line: \"User:\", "
        "\"Assistant:\" or \"Tool result:\".",
        "User (alice):\nWhat's the weather in Paris?",
        'Assistant:\nLet me check.\n[you called get_weather with {"city": "Paris"}]',
        "Tool result:\n[get_weather returned] 18C, sunny",
        "Assistant:\nIt is 18C and sunny.",
        "User:\nAnd tomorrow?",
        "---\nThe tool results above are final: the tools already ran, so do not call a tool "
        "again to get a result shown above. Reply to the last User message above as the "
        "Assistant. Write only the reply itself, with no label.",
    ])


def test_tool_only_assistant_turn_and_trailing_tool_result() -> None:
    messages = [
        msg("user", "weather?"),
        msg("assistant", tool_calls=(ToolCall(id="c9", name="w", arguments="{}"),)),
        msg("tool", "rain", tool_call_id="c9", name="w"),
    ]
    out = flatten_prompt(messages, include_system=False)
    assert "Assistant:\n[you called w with {}]\n\nTool result:\n[w returned] rain" in out
    assert out.endswith("---\nThe tool results above are final: the tools already ran, so do "
                        "not call a tool again to get a result shown above. Continue as the "
                        "Assistant, answering the last User message above using the tool "
                        "results. Write only the reply itself, with no label.")


def test_parallel_results_name_their_tools_by_call_id() -> None:
    messages = [
        msg("user", "weather in Paris and Oslo?"),
        msg("assistant", tool_calls=(
            ToolCall(id="a", name="get_weather", arguments='{"city":"Paris"}'),
            ToolCall(id="b", name="get_time", arguments='{}'))),
        msg("tool", "18C", tool_call_id="a"),
        msg("tool", "noon", tool_call_id="b"),
        msg("tool", "?", tool_call_id="zz"),
        msg("tool", "", tool_call_id="zz", name="legacy"),
    ]
    out = flatten_prompt(messages, include_system=False)
    assert ('Assistant:\n[you called get_weather with {"city":"Paris"}]\n'
            "[you called get_time with {}]") in out
    assert ("Tool result:\n[get_weather returned] 18C\n\n"
            "Tool result:\n[get_time returned] noon") in out
    assert "Tool result:\n[tool call zz returned] ?" in out
    assert "Tool result:\n[legacy returned]\n\n" in out


def test_no_results_no_finality_note() -> None:
    out = flatten_prompt([msg("user", "a"), msg("assistant", "b"), msg("user", "c")],
                         include_system=False)
    assert "final" not in out


def test_images_are_placeholders_in_a_transcript() -> None:
    image = Message(role="user", content=(TextPart(text="see "), ImagePart(url="data:x")))
    out = flatten_prompt([msg("assistant", "hi"), image], include_system=False)
    assert "User:\nsee [image]" in out


def test_a_single_assistant_message_is_a_transcript() -> None:
    out = flatten_prompt([msg("assistant", "prefill")], include_system=False)
    assert "Assistant:\nprefill" in out and out.startswith("The conversation so far")


def test_empty_inputs() -> None:
    assert flatten_prompt([], include_system=True) == ""
    assert flatten_prompt([msg("system", "S")], include_system=False) == ""
    assert flatten_prompt([msg("system", "S")], include_system=True).startswith(
        "System instructions:\nS\n\n")


def test_system_text_joins_in_order_and_skips_empty() -> None:
    messages = [msg("developer", "D"), msg("user", "u"), msg("system", ""), msg("system", "S")]
    assert system_text(messages) == "D\n\nS"
    assert system_text([msg("user", "u")]) == ""


_roles = st.sampled_from(["system", "developer", "user", "assistant", "tool"])
_messages = st.lists(st.builds(lambda r, t: msg(r, t), _roles, st.text(max_size=20)),
                     max_size=6)


@given(_messages, st.booleans())
def test_flattening_is_deterministic_and_keeps_every_turn(messages: list[Message],
                                                          include_system: bool) -> None:
    out = flatten_prompt(messages, include_system=include_system)
    assert out == flatten_prompt(list(messages), include_system=include_system)
    for m in messages:
        if m.role in ("user", "assistant", "tool") or include_system:
            assert m.text() in out


@pytest.mark.parametrize("fmt", [None, {}, {"type": "text"}, {"type": "weird"}, "json_object"])
def test_json_instruction_absent(fmt: object) -> None:
    assert json_instruction(fmt) is None  # type: ignore[arg-type]


def test_json_instruction_object_and_schema() -> None:
    plain = json_instruction({"type": "json_object"})
    assert plain is not None and plain.startswith("Respond with a single JSON object only")
    assert json_instruction({"type": "json_schema"}) == plain
    assert json_instruction({"type": "json_schema", "json_schema": {"name": "n"}}) == plain
    schema = {"z": 1, "a": {"y": [1, 2], "b": "é"}}
    text = json_instruction({"type": "json_schema", "json_schema": {"schema": schema}})
    assert text is not None and text.startswith(plain)
    rendered = text.split("JSON Schema:\n", 1)[1]
    assert json.loads(rendered) == schema
    assert rendered == '{"a": {"b": "é", "y": [1, 2]}, "z": 1}'  # sorted keys: deterministic
