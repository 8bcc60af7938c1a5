"""Reasoning out (issue #27, ADR 0026): each dialect's encoders write the model's thinking in
that dialect's own shape, and the official SDKs read it: chat ``reasoning_content``, a
Responses ``reasoning`` item with its summary events, a Messages ``thinking`` block with an
empty signature; and the reasoning tokens in usage. Without thinking, nothing of it is written.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from olp.ir import Event, ReasoningDelta, Stop, TextDelta, ToolCallDelta, Usage
from olp.ir.anthropic import MessageBuilder, MessageStreamEncoder
from olp.ir.openai import ChunkEncoder, CompletionBuilder
from olp.ir.responses import ResponseBuilder, ResponseStreamEncoder

USAGE = Usage(prompt_tokens=10, completion_tokens=30, reasoning_tokens=12)
CALL = ToolCallDelta(index=0, id="call_1", name="lookup", arguments='{"q":"x"}')
EVENTS: list[Event] = [ReasoningDelta(text="Hmm, "), ReasoningDelta(text="lookup."),
                       TextDelta(text="Let me check."), CALL, USAGE,
                       Stop(finish_reason="tool_calls")]


def write(enc: Any, events: list[Event]) -> bytes:
    """The stream a writer makes of ``events`` (``begin`` … ``finish``)."""
    out: bytes = enc.begin() if hasattr(enc, "begin") else enc.role()
    usage = None
    for event in events:
        match event:
            case ReasoningDelta(text=text):
                out += enc.reasoning(text)
            case TextDelta(text=text):
                out += enc.text(text)
            case ToolCallDelta():
                out += enc.tool_call(event)
            case Usage():
                usage = event
            case Stop(finish_reason=reason):
                if isinstance(enc, ChunkEncoder):
                    out += enc.finish(reason) + (enc.usage(usage) if usage else b"")
                else:
                    out += enc.finish(reason, usage)
    return out


def data(raw: bytes) -> list[str]:
    return [line.removeprefix("data: ") for frame in raw.decode().split("\n\n")
            for line in frame.split("\n") if line.startswith("data: ")]


# --- chat completions -------------------------------------------------------------------------

def test_chat_chunks_carry_reasoning_content_beside_content() -> None:
    raw = write(ChunkEncoder(id="c", created=1, model="m", include_usage=True), EVENTS)
    chunks = [ChatCompletionChunk.model_validate_json(d) for d in data(raw)]
    assert [json.loads(d)["choices"][0]["delta"] for d in data(raw)[1:3]] == [
        {"reasoning_content": "Hmm, "}, {"reasoning_content": "lookup."}]
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    final = state.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Let me check." and message.tool_calls
    assert getattr(message, "reasoning_content", None) == "Hmm, lookup."
    assert final.usage is not None and final.usage.completion_tokens_details is not None
    assert final.usage.completion_tokens_details.reasoning_tokens == 12


def test_a_chat_completion_has_reasoning_content_only_with_thinking() -> None:
    for events, thought in ((EVENTS, "Hmm, lookup."), (EVENTS[2:], None)):
        builder = CompletionBuilder(id="c", created=1, model="m")
        for event in events:
            builder.add(event)
        raw = json.loads(builder.body())
        assert raw["choices"][0]["message"].get("reasoning_content") == thought
        message = ChatCompletion.model_validate_json(builder.body()).choices[0].message
        assert getattr(message, "reasoning_content", None) == thought
        assert raw["usage"]["completion_tokens_details"] == {"reasoning_tokens": 12}


# --- responses --------------------------------------------------------------------------------

STRICT = TypeAdapter(ResponseStreamEvent)


def responses_events(raw: bytes) -> tuple[list[Any], Any]:
    """The events as the SDK reads a stream, and its own accumulation (which checks every
    output index and item identity); the reasoning events also pass strict validation."""
    events: list[Any] = [construct_type(type_=ResponseStreamEvent, value=json.loads(d))
                         for d in data(raw)]
    for d, event in zip(data(raw), events, strict=True):
        if "reasoning" in event.type or '"rs_' in d:
            STRICT.validate_json(d)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(event)
    completed = events[-1]
    assert completed.type == "response.completed"
    return events, completed.response


def test_a_responses_stream_has_a_reasoning_item_first() -> None:
    events, response = responses_events(write(ResponseStreamEncoder(id="r", model="m"), EVENTS))
    reasoning = [(e.type, e.output_index) for e in events if "reasoning" in e.type
                 or (e.type.startswith("response.output_item") and e.item.type == "reasoning")]
    assert reasoning == [
        ("response.output_item.added", 0), ("response.reasoning_summary_part.added", 0),
        ("response.reasoning_summary_text.delta", 0),
        ("response.reasoning_summary_text.delta", 0),
        ("response.reasoning_summary_text.done", 0), ("response.reasoning_summary_part.done", 0),
        ("response.output_item.done", 0)]
    done = next(e for e in events if e.type == "response.reasoning_summary_text.done")
    assert (done.text, done.summary_index) == ("Hmm, lookup.", 0)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    item: Any = response.output[0]
    assert item.summary[0].text == "Hmm, lookup."
    assert response.output_text == "Let me check."
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 12


def test_thinking_after_text_is_a_reasoning_item_of_its_own() -> None:
    events: list[Event] = [ReasoningDelta(text="a"), TextDelta(text="x"), ReasoningDelta(text="b"),
                           CALL, Stop()]
    _, streamed = responses_events(write(ResponseStreamEncoder(id="r", model="m"), events))
    builder = ResponseBuilder(id="r", model="m")
    for event in events:
        builder.add(event)
    body: Any = Response.model_validate_json(builder.body())
    for response in (streamed, body):
        assert [(i.type, getattr(i, "summary", None) and i.summary[0].text)
                for i in response.output] == [("reasoning", "a"), ("message", None),
                                               ("reasoning", "b"), ("function_call", None)]
        assert len({i.id for i in response.output}) == 4


def test_a_response_body_has_its_reasoning_item_only_with_thinking() -> None:
    for events, kinds in ((EVENTS, ["reasoning", "message", "function_call"]),
                          (EVENTS[2:], ["message", "function_call"])):
        builder = ResponseBuilder(id="r", model="m")
        for event in events:
            builder.add(event)
        response = Response.model_validate_json(builder.body())
        assert [i.type for i in response.output] == kinds
        assert response.usage is not None
        assert response.usage.output_tokens_details.reasoning_tokens == 12
        assert builder.answer().text() == "Let me check."  # kept for previous_response_id


# --- messages ---------------------------------------------------------------------------------

def test_a_messages_stream_opens_a_thinking_block_first() -> None:
    raw = write(MessageStreamEncoder(id="msg_1", model="m"), EVENTS)
    adapter = TypeAdapter(RawMessageStreamEvent)
    snapshot: Any = None
    starts, deltas = [], []
    for d in data(raw):
        payload = json.loads(d)
        if payload["type"] == "ping":
            continue
        event = adapter.validate_json(d)  # strictly: the SDK's own model of each event
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs={})
        if payload["type"] == "content_block_start":
            starts.append((payload["index"], payload["content_block"]["type"]))
        elif payload["type"] == "content_block_delta":
            deltas.append((payload["index"], payload["delta"]["type"]))
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    assert deltas == [(0, "thinking_delta"), (0, "thinking_delta"), (1, "text_delta"),
                      (2, "input_json_delta")]
    thinking, text, call = snapshot.content
    assert (thinking.type, thinking.thinking, thinking.signature) == ("thinking",
                                                                      "Hmm, lookup.", "")
    assert text.text == "Let me check." and call.input == {"q": "x"}


def test_a_message_body_has_its_thinking_block_first_only_with_thinking() -> None:
    for events, kinds in ((EVENTS, ["thinking", "text", "tool_use"]),
                          (EVENTS[2:], ["text", "tool_use"])):
        builder = MessageBuilder(id="msg_1", model="m")
        for event in events:
            builder.add(event)
        message = anthropic.types.Message.model_validate_json(builder.body())
        assert [b.type for b in message.content] == kinds
        if kinds[0] == "thinking":
            block: Any = message.content[0]
            assert block.type == "thinking"
            assert (block.thinking, block.signature) == ("Hmm, lookup.", "")
