"""The Anthropic Messages codec (``olp.ir.anthropic``): request bodies into the one IR, and IR
events back out as a ``message`` body or Anthropic's SSE event sequence — checked against the
event sequence the real API sent claude (the CLI's ``stream_event`` lines are those events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import given
from hypothesis import strategies as st

from olp.actors._tool_gate import ToolGate
from olp.ir import (
    ChatRequest,
    Event,
    ImagePart,
    Message,
    Start,
    Stop,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
    is_terminal,
)
from olp.ir.anthropic import (
    InvalidRequest,
    MessageBuilder,
    MessageStreamEncoder,
    decode_messages_request,
    error_body,
    error_type,
)
from olp.providers.anthropic import AnthropicParser

TRANSCRIPTS = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "claude"
               / "transcripts")
WEATHER = {"name": "get_weather", "description": "Weather",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def decode(**body: Any) -> ChatRequest:
    base: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 100,
                            "messages": [{"role": "user", "content": "hi"}]}
    return decode_messages_request(json.dumps({**base, **body}).encode())


def refused(**body: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        decode(**body)
    return info.value


# --- requests ---------------------------------------------------------------------------------

def test_a_whole_conversation_maps_onto_the_ir() -> None:
    req = decode(
        system=[{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris? And this:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": "18 C"}]},
                {"type": "text", "text": "Thanks; and tomorrow?"}]},
        ],
        tools=[WEATHER], tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        stop_sequences=["END"], temperature=0.5, top_p=0.9, top_k=5,
        metadata={"user_id": "u-1"}, stream=True)
    assert req.messages == (
        Message(role="system", content=(TextPart(text="Be terse.",
                                                 cache_control={"type": "ephemeral"}),)),
        Message(role="user", content=(TextPart(text="Weather in Paris? And this:"),
                                      ImagePart(url="data:image/png;base64,AAAA"))),
        Message(role="assistant", content=(TextPart(text="Checking."),),
                tool_calls=(ToolCall(id="toolu_1", name="get_weather",
                                     arguments='{"city": "Paris"}'),)),
        Message(role="tool", content=(TextPart(text="18 C"),), tool_call_id="toolu_1"),
        Message(role="user", content=(TextPart(text="Thanks; and tomorrow?"),)),
    )
    assert req.tools == (ToolSpec(name="get_weather", description="Weather",
                                  parameters=WEATHER["input_schema"]),)
    assert (req.tool_choice, req.parallel_tool_calls) == ("auto", False)
    assert (req.stop, req.temperature, req.top_p, req.max_tokens) == (("END",), 0.5, 0.9, 100)
    assert (req.user, req.stream, req.include_usage) == ("u-1", True, True)
    assert req.has_cache_control_markers()


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, ("auto", None)),
    ({"type": "any"}, ("required", None)),
    ({"type": "none"}, ("none", None)),
    ({"type": "tool", "name": "get_weather"},
     ({"type": "function", "function": {"name": "get_weather"}}, None)),
])
def test_tool_choice(choice: dict[str, Any], expected: tuple[Any, Any]) -> None:
    req = decode(tools=[WEATHER], tool_choice=choice)
    assert (req.tool_choice, req.parallel_tool_calls) == expected


def test_plain_strings_an_error_result_and_a_url_image() -> None:
    req = decode(system="S", messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": True},
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}])
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool", "user"]
    assert req.messages[3].text() == "Error: boom"
    assert req.messages[4].content == (ImagePart(url="https://x/y.png"),)
    assert (req.stream, req.tool_choice, req.parallel_tool_calls) == (False, None, None)


@pytest.mark.parametrize(("body", "param"), [
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": "10"}, "max_tokens"),
    ({"temperature": 1.5}, "temperature"),
    ({"model": ""}, "model"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": []}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {
        "type": "base64", "media_type": "application/pdf", "data": "x"}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "image"}]}]},
     "messages[0].content[0].source"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
     "messages[0].content[0].tool_use_id"),
    ({"messages": [{"role": "user", "content": " "}]}, "messages[0].content"),
    ({"system": [{"type": "image"}]}, "system[0].type"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"name": "f,Bash", "input_schema": {}}]}, "tools[0].name"),
    ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "other"}}, "tool_choice.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
])
def test_bad_bodies_are_refused_naming_the_field(body: dict[str, Any], param: str) -> None:
    assert refused(**body).param == param


def test_missing_max_tokens_is_named() -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_messages_request(b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
    assert info.value.param == "max_tokens"


_KEYS = ["model", "max_tokens", "messages", "role", "content", "type", "text", "system",
         "tools", "name", "input_schema", "tool_choice", "source", "tool_use_id", "input", "id",
         "thinking", "budget_tokens", "display", "output_config", "effort", "signature"]


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(_KEYS) | st.text(max_size=5), inner, max_size=5)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    _containers, max_leaves=20)


@given(_json)
def test_any_json_decodes_or_is_a_clear_400(value: Any) -> None:
    try:
        decode_messages_request(json.dumps(value).encode())
    except InvalidRequest as exc:
        assert exc.message


# --- responses --------------------------------------------------------------------------------

def test_a_message_body_with_text_a_call_and_usage() -> None:
    builder = MessageBuilder(id="msg_1", model="asked")
    for event in [Start(model="claude-sonnet-4-6"), TextDelta(text="Let me "),
                  TextDelta(text="check."),
                  ToolCallDelta(index=0, id="toolu_9", name="get_weather"),
                  ToolCallDelta(index=0, arguments='{"city": '),
                  ToolCallDelta(index=0, arguments='"Paris"}'),
                  Usage(prompt_tokens=12, completion_tokens=7), Stop(finish_reason="tool_calls")]:
        builder.add(event)
    assert json.loads(builder.body()) == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                     "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 7}}


CACHED = Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024, cache_write_tokens=100)


def test_cached_input_in_a_message_body() -> None:
    """Anthropic's convention: ``input_tokens`` is what was neither read from nor written
    to the cache; those two are counted apart."""
    builder = MessageBuilder(id="msg_1", model="m")
    for event in (TextDelta(text="x"), CACHED, Stop()):
        builder.add(event)
    usage = anthropic.types.Message.model_validate_json(builder.body()).usage
    assert (usage.input_tokens, usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens, usage.output_tokens) == (76, 1024, 100, 5)


def test_cached_input_in_a_stream_reaches_the_sdk_s_final_message() -> None:
    """``message_start`` is sent before the usage is known (zeros, as Anthropic sends them
    before output); ``message_delta`` carries the cumulative figures, cache ones included,
    and the SDK's accumulator takes them into the final message."""
    enc = MessageStreamEncoder(id="msg_1", model="m")
    out = enc.begin() + enc.text("x") + enc.finish("stop", CACHED)
    snapshot: Any = None
    for name, payload in frames(out):
        if name != "ping":
            snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs={})
    usage = snapshot.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens, usage.output_tokens) == (76, 1024, 100, 5)
    start = frames(out)[0][1]["message"]["usage"]
    assert start == {"input_tokens": 0, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0, "output_tokens": 0}


@pytest.mark.parametrize(("reason", "wire"), [("stop", "end_turn"), ("length", "max_tokens"),
                                              ("content_filter", "refusal")])
def test_stop_reasons(reason: Any, wire: str) -> None:
    builder = MessageBuilder(id="msg_1", model="m")
    builder.add(TextDelta(text="x"))
    builder.add(Stop(finish_reason=reason))
    assert json.loads(builder.body())["stop_reason"] == wire


def test_arguments_that_are_not_json_are_kept_not_lost() -> None:
    builder = MessageBuilder(id="msg_1", model="m")
    builder.add(ToolCallDelta(index=0, id="t", name="f", arguments="{oops"))
    [call] = json.loads(builder.body())["content"]
    assert call["input"] == {"_unparsed_arguments": "{oops"}


def frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in data.decode().split("\n\n"):
        if frame:
            name_line, data_line = frame.split("\n")
            name = name_line.removeprefix("event: ")
            payload = json.loads(data_line.removeprefix("data: "))
            assert payload["type"] == name  # Anthropic repeats the event name in the data
            out.append((name, payload))
    return out


def shape(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    return [(name, e.get("index"), (e.get("content_block") or {}).get("type"),
             (e.get("delta") or {}).get("type")) for name, e in events]


def encode(events: list[Event]) -> bytes:
    enc = MessageStreamEncoder(id="msg_1", model="claude-sonnet-4-6")
    out, usage, reason = enc.begin(), None, "stop"
    for event in events:
        if isinstance(event, TextDelta):
            out += enc.text(event.text)
        elif isinstance(event, ToolCallDelta):
            out += enc.tool_call(event)
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Stop):
            reason = event.finish_reason
    return out + enc.finish(reason, usage)  # type: ignore[arg-type]


def test_the_stream_has_the_event_sequence_the_real_api_sent() -> None:
    """The recorded claude run (text, then a tool call) → OLP's IR (parser and tool gate) →
    this encoder gives the same event sequence the Anthropic API sent that claude."""
    stdout = (TRANSCRIPTS / "tools.call.stream-json.stdout").read_bytes().splitlines()
    recorded = [json.loads(line)["event"] for line in stdout
                if json.loads(line)["type"] == "stream_event"]
    weather = ToolSpec(name="get_weather", parameters={"type": "object"})
    gate = ToolGate(AnthropicParser(), ChatRequest(
        model="m", messages=(Message(role="user", content=(TextPart(text="q"),)),),
        tools=(weather,)))
    events: list[Event] = []
    for line in stdout:
        events += gate.feed(line)
        if events and is_terminal(events[-1]):
            break
    ours = [f for f in frames(encode(events)) if f[0] != "ping"]  # claude does not print them
    assert shape(ours) == shape([(e["type"], e) for e in recorded])
    delta = ours[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 0
    call = ours[[n for n, _ in ours].index("content_block_start", 2)][1]["content_block"]
    assert call["name"] == "get_weather" and call["id"].startswith("toolu_")
    arguments = "".join(e["delta"]["partial_json"] for n, e in ours
                        if n == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
    assert json.loads(arguments) == {"city": "Paris"}


def test_two_calls_get_a_block_each_and_an_error_is_an_error_event() -> None:
    enc = MessageStreamEncoder(id="msg_1", model="m")
    out = enc.begin() + enc.tool_call(ToolCallDelta(index=0, id="a", name="f"))
    out += enc.tool_call(ToolCallDelta(index=0, arguments="{}"))
    out += enc.tool_call(ToolCallDelta(index=1, id="b", name="g", arguments="{}"))
    out += enc.error(type=error_type(503), message="upstream gone")
    assert shape(frames(out)) == [
        ("message_start", None, None, None),
        ("ping", None, None, None),
        ("content_block_start", 0, "tool_use", None),
        ("content_block_delta", 0, None, "input_json_delta"),
        ("content_block_stop", 0, None, None),
        ("content_block_start", 1, "tool_use", None),
        ("content_block_delta", 1, None, "input_json_delta"),
        ("error", None, None, None)]
    assert frames(out)[-1][1]["error"] == {"type": "overloaded_error", "message": "upstream gone"}
    assert "message_stop" not in out.decode()
    assert frames(enc.ping()) == [("ping", {"type": "ping"})]


def test_error_bodies_and_types() -> None:
    assert json.loads(error_body(type="rate_limit_error", message="slow down")) == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    assert [error_type(s) for s in (400, 401, 403, 404, 413, 429, 500, 502, 503)] == [
        "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
        "request_too_large", "rate_limit_error", "api_error", "api_error", "overloaded_error"]
