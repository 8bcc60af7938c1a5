"""OpenAI chunks → IR events (the stream half of the reverse codec)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from olp.ir import Error, ReasoningDelta, Start, TextDelta, ToolCallDelta, Usage
from olp.providers.openai_compat import ChunkReader, SSEEvent


def on_error(payload: dict[str, Any] | str) -> Error:
    message = payload if isinstance(payload, str) else json.dumps(payload)
    return Error(code="X", category="unknown", message=message)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *,
          model: str = "gpt-4o-2024-08-06", **extra: Any) -> SSEEvent:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return SSEEvent(json.dumps({"id": "c", "object": "chat.completion.chunk", "model": model,
                                "choices": choices, **extra}))


def test_text_stream() -> None:
    reader = ChunkReader(on_error)
    events = [e for sse in (chunk({"role": "assistant", "content": ""}),
                            chunk({"content": "Hel"}), chunk({"content": "lo"}),
                            chunk({}, "stop"),
                            chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 2,
                                               "total_tokens": 5}),
                            SSEEvent("[DONE]"))
              for e in reader.feed(sse)]
    assert events == [Start(model="gpt-4o-2024-08-06"), TextDelta(text="Hel"),
                      TextDelta(text="lo")]
    assert reader.finish_reason == "stop"
    assert reader.usage == Usage(prompt_tokens=3, completion_tokens=2)
    assert reader.done and reader.error is None and reader.malformed == 0


def test_events_after_done_are_ignored() -> None:
    reader = ChunkReader(on_error)
    reader.feed(SSEEvent("[DONE]"))
    assert reader.feed(chunk({"content": "late"})) == []


def test_tool_call_deltas() -> None:
    reader = ChunkReader(on_error)
    events = []
    for sse in (
        chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "type": "function"}]}),  # carries nothing
        chunk({}, "tool_calls"),
    ):
        events += reader.feed(sse)
    assert events[1:] == [
        ToolCallDelta(index=0, id="call_1", name="get_weather", arguments=""),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDelta(index=0, arguments='"Paris"}'),
    ]
    assert reader.finish_reason == "tool_calls"


@pytest.mark.parametrize(("raw", "mapped"), [
    ("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls"),
    ("content_filter", "content_filter"), ("function_call", "tool_calls"), ("eos", "stop"),
    ("end_turn", "stop"),
])
def test_finish_reasons(raw: str, mapped: str) -> None:
    reader = ChunkReader(on_error)
    reader.feed(chunk({}, raw))
    assert reader.finish_reason == mapped


def test_finish_reason_error_is_an_error() -> None:
    reader = ChunkReader(on_error)
    reader.feed(chunk({"content": ""}, "error"))
    assert reader.error is not None and reader.finish_reason is None


def test_start_once_and_only_choice_zero() -> None:
    reader = ChunkReader(on_error)
    first = reader.feed(chunk({"content": "a"}))
    second = reader.feed(SSEEvent(json.dumps({"model": "other", "choices": [
        {"index": 1, "delta": {"content": "b"}}, {"index": 0, "delta": {"content": "c"}}]})))
    assert first == [Start(model="gpt-4o-2024-08-06"), TextDelta(text="a")]
    assert second == [TextDelta(text="c")]


@pytest.mark.parametrize("data", [
    "{not json", '{"choices": "nope"}', '{"choices": [{"delta": {"content": 5}}]}', "[1, 2",
    '{"usage": {"prompt_tokens": "many"}}',
])
def test_malformed_events_are_skipped_and_counted(data: str) -> None:
    reader = ChunkReader(on_error)
    assert reader.feed(SSEEvent(data)) == []
    assert reader.malformed == 1 and reader.error is None


def test_unknown_fields_are_ignored_and_reasoning_is_passed_on_as_reasoning() -> None:
    reader = ChunkReader(on_error)
    events = reader.feed(chunk({"reasoning_content": "hm"},
                               provider="x", system_fingerprint=None))
    assert events == [Start(model="gpt-4o-2024-08-06"), ReasoningDelta(text="hm")]
    # a gateway's own name for it (OpenRouter: ``reasoning``); never content
    assert ChunkReader(on_error).feed(chunk({"reasoning": "so"}, model="")) == [
        ReasoningDelta(text="so")]


def test_refusal_is_text() -> None:
    assert ChunkReader(on_error).feed(chunk({"refusal": "I can't"}, model=""))\
        == [TextDelta(text="I can't")]


def test_in_stream_error_object() -> None:
    reader = ChunkReader(on_error)
    reader.feed(SSEEvent(json.dumps({"error": {"message": "boom", "code": 502}})))
    assert reader.error is not None and "boom" in reader.error.message
    assert reader.feed(chunk({"content": "after"})) == []


@pytest.mark.parametrize("data", ['{"message": "Overloaded"}', "plain text failure"])
def test_error_event_type(data: str) -> None:
    reader = ChunkReader(on_error)
    reader.feed(SSEEvent(data, event="error"))
    assert reader.error is not None
    assert ("Overloaded" if "Overloaded" in data else "plain text") in reader.error.message


def test_usage_input_output_names_and_last_one_wins() -> None:
    reader = ChunkReader(on_error)
    reader.feed(chunk(None, usage={"input_tokens": 1, "output_tokens": 1}))
    reader.feed(chunk(None, usage={"input_tokens": 4, "output_tokens": 9}))
    reader.feed(chunk(None, usage=None))
    assert reader.usage == Usage(prompt_tokens=4, completion_tokens=9)


@pytest.mark.parametrize(("usage", "expected"), [
    # OpenAI Chat Completions: prompt_tokens counts the cached ones
    ({"prompt_tokens": 1200, "completion_tokens": 5, "total_tokens": 1205,
      "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}},
     Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024)),
    ({"prompt_tokens": 1200, "completion_tokens": 5,
      "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1100}},
     Usage(prompt_tokens=1200, completion_tokens=5, cache_write_tokens=1100)),
    # OpenAI Responses names: input_tokens counts them too
    ({"input_tokens": 1200, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 1024}},
     Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024)),
    # Anthropic's names: input_tokens does not count what was read from or written to the cache
    ({"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 1024,
      "cache_creation_input_tokens": 100},
     Usage(prompt_tokens=1127, completion_tokens=5, cached_tokens=1024, cache_write_tokens=100)),
    ({"prompt_tokens": 7, "completion_tokens": 5, "prompt_tokens_details": None},
     Usage(prompt_tokens=7, completion_tokens=5)),
])
def test_cached_input_tokens(usage: dict[str, Any], expected: Usage) -> None:
    reader = ChunkReader(on_error)
    reader.feed(chunk(None, usage=usage))
    assert reader.usage == expected and reader.malformed == 0


def test_whole_completion_body() -> None:
    reader = ChunkReader(on_error)
    body = json.dumps({"model": "m-1", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "ok", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[]"}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2}}).encode()
    assert reader.feed_completion(body) == [
        Start(model="m-1"), TextDelta(text="ok"),
        ToolCallDelta(index=0, id="a", name="f", arguments="{}"),
        ToolCallDelta(index=1, id="b", name="g", arguments="[]")]
    assert reader.finish_reason == "tool_calls"
    assert reader.usage == Usage(prompt_tokens=1, completion_tokens=2)
