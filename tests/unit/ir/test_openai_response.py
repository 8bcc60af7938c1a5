"""The OpenAI response encoders, checked against the official SDK's own models."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import ErrorObject
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from olp.ir import Error, Retrying, Start, Stop, TextDelta, ToolCallDelta, Usage
from olp.ir.openai import DONE, ChunkEncoder, CompletionBuilder, completion_id, error_body


def _payload(frame: bytes) -> bytes:
    """The JSON of one SSE frame, after checking the framing."""
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    payload = frame.removeprefix(b"data: ").removesuffix(b"\n\n")
    assert b"\n" not in payload
    return payload


def _chunk(frame: bytes) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate_json(_payload(frame))


def _raw(frame: bytes) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(_payload(frame))
    return raw


def _encoder(include_usage: bool = False) -> ChunkEncoder:
    return ChunkEncoder(id="chatcmpl-1", created=1700000000, model="m-1",
                        include_usage=include_usage)


def test_completion_id() -> None:
    ids = {completion_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"chatcmpl-[0-9a-f]{24}", i) for i in ids)


def test_role_chunk() -> None:
    c = _chunk(_encoder().role())
    assert (c.id, c.object, c.created, c.model) == (
        "chatcmpl-1", "chat.completion.chunk", 1700000000, "m-1")
    assert len(c.choices) == 1
    choice = c.choices[0]
    assert choice.index == 0 and choice.finish_reason is None
    assert choice.delta.role == "assistant" and choice.delta.content == ""
    assert choice.delta.tool_calls is None


def test_text_chunk_escapes_and_unicode() -> None:
    text = 'héllo "wörld"\n\t\u2028 🙂'
    c = _chunk(_encoder().text(text))
    assert c.choices[0].delta.content == text
    assert c.choices[0].delta.role is None


def test_tool_call_chunks() -> None:
    enc = _encoder()
    first = _chunk(enc.tool_call(ToolCallDelta(index=1, id="call_a", name="get_weather")))
    (tc,) = first.choices[0].delta.tool_calls or []
    assert (tc.index, tc.id, tc.type) == (1, "call_a", "function")
    assert tc.function is not None
    assert (tc.function.name, tc.function.arguments) == ("get_weather", "")

    raw = _raw(enc.tool_call(ToolCallDelta(index=1, arguments='{"city":')))
    assert raw["choices"][0]["delta"]["tool_calls"] == [
        {"index": 1, "function": {"arguments": '{"city":'}}]
    (tc,) = _chunk(enc.tool_call(ToolCallDelta(index=1, arguments='"Oslo"}'))).choices[0] \
        .delta.tool_calls or []
    assert tc.id is None and tc.type is None
    assert tc.function is not None and tc.function.arguments == '"Oslo"}'


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter"])
def test_finish_chunk(reason: Any) -> None:
    c = _chunk(_encoder().finish(reason))
    assert c.choices[0].finish_reason == reason
    assert _raw(_encoder().finish(reason))["choices"][0]["delta"] == {}


def test_without_include_usage_there_is_no_usage_key() -> None:
    enc = _encoder()
    for frame in (enc.role(), enc.text("x"), enc.finish("stop")):
        assert "usage" not in _raw(frame)
    assert enc.usage(Usage(prompt_tokens=1, completion_tokens=1)) == b""


def test_include_usage() -> None:
    enc = _encoder(include_usage=True)
    frames = [enc.role(), enc.text("x"), enc.tool_call(ToolCallDelta(index=0, id="c", name="f")),
              enc.finish("stop")]
    for frame in frames:
        raw = _raw(frame)
        assert "usage" in raw and raw["usage"] is None
        assert _chunk(frame).usage is None
    last = _chunk(enc.usage(Usage(prompt_tokens=7, completion_tokens=5)))
    assert last.choices == [] and last.id == "chatcmpl-1"
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens,
            last.usage.total_tokens) == (7, 5, 12)


def test_model_is_mutable() -> None:
    enc = _encoder()
    enc.model = "m-1-2025-01-01"
    assert _chunk(enc.role()).model == "m-1-2025-01-01"


def test_error_frame() -> None:
    frame = ChunkEncoder.error(message="upstream died", type="server_error",
                               code="upstream_failed")
    raw = _raw(frame)
    assert raw == {"error": {"message": "upstream died", "type": "server_error",
                             "param": None, "code": "upstream_failed"}}
    err = ErrorObject.model_validate(raw["error"])
    assert (err.message, err.type, err.code, err.param) == (
        "upstream died", "server_error", "upstream_failed", None)


def test_constants() -> None:
    assert DONE == ChunkEncoder.DONE == b"data: [DONE]\n\n"
    assert _encoder().keepalive() == b": keepalive\n\n"


def test_sdk_accumulates_a_whole_stream() -> None:
    """The SDK's own stream accumulator rebuilds the completion from our chunks."""
    enc = _encoder(include_usage=True)
    frames = [
        enc.role(), enc.text("Let me "), enc.text("check."),
        enc.tool_call(ToolCallDelta(index=0, id="call_1", name="lookup")),
        enc.tool_call(ToolCallDelta(index=0, arguments='{"q":')),
        enc.tool_call(ToolCallDelta(index=0, arguments='"x"}')),
        enc.finish("tool_calls"), enc.usage(Usage(prompt_tokens=3, completion_tokens=4)),
    ]
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for frame in frames:
        state.handle_chunk(_chunk(frame))
    final = state.get_final_completion()
    choice = final.choices[0]
    assert choice.message.content == "Let me check."
    assert choice.finish_reason == "tool_calls"
    (tc,) = choice.message.tool_calls or []
    assert tc.id == "call_1" and tc.type == "function"
    assert tc.function.name == "lookup" and tc.function.arguments == '{"q":"x"}'
    assert final.usage is not None and final.usage.total_tokens == 7


def _build(*events: Any, model: str = "req-model") -> ChatCompletion:
    b = CompletionBuilder(id="chatcmpl-2", created=1700000001, model=model)
    for e in events:
        b.add(e)
    return ChatCompletion.model_validate_json(b.body())


def test_completion_text() -> None:
    c = _build(Start(model="served-2025"), TextDelta(text="Hel"), TextDelta(text="lo"),
               Usage(prompt_tokens=10, completion_tokens=2), Stop(finish_reason="length"))
    assert (c.id, c.object, c.created, c.model) == (
        "chatcmpl-2", "chat.completion", 1700000001, "served-2025")
    (choice,) = c.choices
    assert choice.index == 0 and choice.finish_reason == "length"
    assert choice.message.role == "assistant" and choice.message.content == "Hello"
    assert choice.message.tool_calls is None
    assert c.usage is not None
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (
        10, 2, 12)


def test_completion_defaults() -> None:
    b = CompletionBuilder(id="chatcmpl-3", created=1, model="m")
    raw = json.loads(b.body())
    assert "usage" not in raw
    c = ChatCompletion.model_validate(raw)
    assert c.usage is None and c.model == "m"
    assert c.choices[0].message.content == "" and c.choices[0].finish_reason == "stop"


def test_completion_tool_calls_only_merged_by_index() -> None:
    c = _build(
        ToolCallDelta(index=1, id="call_b", name="second", arguments="{"),
        ToolCallDelta(index=0, id="call_a", name="first"),
        ToolCallDelta(index=1, id="ignored", name="ignored", arguments="}"),
        ToolCallDelta(index=0, arguments='{"a":1}'),
        Retrying(attempt=1, category="rate_limited"),
        Stop(finish_reason="tool_calls"),
    )
    message = c.choices[0].message
    assert message.content is None
    calls = [(t.id, t.type, t.function.name, t.function.arguments)
             for t in message.tool_calls or [] if t.type == "function"]
    assert calls == [("call_a", "function", "first", '{"a":1}'),
                     ("call_b", "function", "second", "{}")]
    assert c.choices[0].finish_reason == "tool_calls"


def test_completion_text_and_tool_calls_and_missing_id() -> None:
    b = CompletionBuilder(id="x", created=1, model="m")
    for e in (TextDelta(text="Sure."), ToolCallDelta(index=0, name="f", arguments="{}"),
              Error(code="x", category="unknown", message="ignored")):
        b.add(e)
    assert b.text == "Sure."
    body = b.body()
    assert b.body() == body  # a generated tool-call id is stable
    message = ChatCompletion.model_validate_json(body).choices[0].message
    assert message.content == "Sure."
    (tc,) = message.tool_calls or []
    assert re.fullmatch(r"call_[0-9a-f]{24}", tc.id)


def test_error_body() -> None:
    raw = json.loads(error_body(message="bad", type="invalid_request_error",
                                code="invalid_type", param="messages[0].content"))
    assert raw == {"error": {"message": "bad", "type": "invalid_request_error",
                             "param": "messages[0].content", "code": "invalid_type"}}
    assert json.loads(error_body(message="m", type="t")) == {
        "error": {"message": "m", "type": "t", "param": None, "code": None}}
    ErrorObject.model_validate(raw["error"])


CACHED = Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024, cache_write_tokens=100)


def test_cached_input_is_in_the_prompt_tokens_details() -> None:
    """OpenAI's convention: ``prompt_tokens`` counts every input token, the cached ones
    (and the ones written to the cache) are told apart in ``prompt_tokens_details``; in the
    body and in the final usage chunk alike."""
    body = _build(TextDelta(text="x"), CACHED, Stop())
    streamed = _chunk(_encoder(include_usage=True).usage(CACHED))
    for usage in (body.usage, streamed.usage):
        assert usage is not None and usage.prompt_tokens_details is not None
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
            1200, 5, 1205)
        assert usage.prompt_tokens_details.cached_tokens == 1024
        assert usage.prompt_tokens_details.cache_write_tokens == 100
    nothing = _build(Usage(prompt_tokens=3, completion_tokens=4)).usage
    assert nothing is not None and nothing.prompt_tokens_details is not None
    assert nothing.prompt_tokens_details.cached_tokens == 0
