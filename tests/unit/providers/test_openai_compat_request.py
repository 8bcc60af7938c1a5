"""IR request → OpenAI body (the request half of the reverse codec)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import assume, given
from hypothesis import strategies as st

from olp.ir import ChatRequest, ImagePart, Message, TextPart, ToolCall, ToolSpec
from olp.ir.openai import decode_chat_request
from olp.providers.openai_compat import encode_chat_request


def encode(request: ChatRequest, model: str = "served-model", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(encode_chat_request(request, model, **kw))
    return out


def user(text: str) -> Message:
    return Message(role="user", content=(TextPart(text=text),))


def test_minimal_body_always_streams_with_usage() -> None:
    body = encode(ChatRequest(model="alias", messages=(user("hi"),)))
    assert body == {"model": "served-model", "messages": [{"role": "user", "content": "hi"}],
                    "stream": True, "stream_options": {"include_usage": True}}


def test_everything_passes_through() -> None:
    request = ChatRequest(
        model="alias",
        messages=(
            Message(role="developer", content=(TextPart(text="be brief"),)),
            Message(role="system", content=(TextPart(text="sys"),)),
            Message(role="user", content=(TextPart(text="what is this?"),
                                          ImagePart(url="data:image/png;base64,AAAA",
                                                    detail="low")), name="ann"),
            Message(role="assistant", tool_calls=(ToolCall(id="call_1", name="look",
                                                           arguments='{"q": 1}'),)),
            Message(role="tool", content=(TextPart(text="42"),), tool_call_id="call_1"),
            Message(role="assistant", content=(TextPart(text="a"), TextPart(text="b"))),
        ),
        stream=False, include_usage=False, temperature=0.2, top_p=0.9, max_tokens=100,
        stop=("\n\n", "END"), seed=7, presence_penalty=0.1, frequency_penalty=-0.1,
        tools=(ToolSpec(name="look", description="Look it up",
                        parameters={"type": "object", "properties": {}}),
               ToolSpec(name="bare")),
        tool_choice={"type": "function", "function": {"name": "look"}},
        response_format={"type": "json_object"}, user="u-1",
    )
    body = encode(request)
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "sys"},
        {"role": "user", "name": "ann", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA",
                                                "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "look", "arguments": '{"q": 1}'}}]},
        {"role": "tool", "content": "42", "tool_call_id": "call_1"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"}]},
    ]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    for key, value in [("temperature", 0.2), ("top_p", 0.9), ("max_tokens", 100),
                       ("stop", ["\n\n", "END"]), ("seed", 7), ("presence_penalty", 0.1),
                       ("frequency_penalty", -0.1), ("response_format", {"type": "json_object"}),
                       ("tool_choice", {"type": "function", "function": {"name": "look"}}),
                       ("user", "u-1")]:
        assert body[key] == value, key
    assert body["tools"] == [
        {"type": "function", "function": {"name": "look", "description": "Look it up",
                                          "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "bare"}}]


def test_parallel_tool_calls_passes_through_only_with_tools() -> None:
    tools = (ToolSpec(name="look"),)
    for value in (True, False):
        body = encode(ChatRequest(model="alias", messages=(user("hi"),), tools=tools,
                                  parallel_tool_calls=value))
        assert body["parallel_tool_calls"] is value
    # OpenAI refuses the field on a request without tools; absent stays absent.
    assert "parallel_tool_calls" not in encode(
        ChatRequest(model="alias", messages=(user("hi"),), parallel_tool_calls=False))
    assert "parallel_tool_calls" not in encode(
        ChatRequest(model="alias", messages=(user("hi"),), tools=tools))


def test_max_completion_tokens_field() -> None:
    request = ChatRequest(model="m", messages=(user("x"),), max_tokens=5)
    body = encode(request, max_tokens_field="max_completion_tokens")
    assert body["max_completion_tokens"] == 5 and "max_tokens" not in body


def test_unset_parameters_are_absent() -> None:
    body = encode(ChatRequest(model="m", messages=(user("x"),), temperature=0.0, seed=0))
    assert body["temperature"] == 0.0 and body["seed"] == 0
    for key in ("top_p", "max_tokens", "stop", "tools", "tool_choice", "response_format",
                "user", "presence_penalty"):
        assert key not in body


_texts = st.text(max_size=20)
_parts = st.lists(st.one_of(st.builds(TextPart, text=_texts),
                            st.builds(ImagePart, url=st.just("https://x/y.png"),
                                      detail=st.none() | st.sampled_from(["low", "high"]))),
                  min_size=1, max_size=3)
_messages = st.one_of(
    st.builds(lambda c: Message(role="user", content=tuple(c)), _parts),
    st.builds(lambda t: Message(role="system", content=(TextPart(text=t),)), _texts),
    st.builds(lambda t: Message(role="assistant", content=(TextPart(text=t),)), _texts),
)


@given(st.lists(_messages, min_size=1, max_size=4),
       st.none() | st.floats(min_value=0, max_value=2),
       st.none() | st.integers(min_value=1, max_value=10_000),
       st.lists(st.text(min_size=1, max_size=5), max_size=4))
def test_round_trip_through_the_forward_codec(messages: list[Message],
                                              temperature: float | None,
                                              max_tokens: int | None, stop: list[str]) -> None:
    # a conversation with nothing to answer is refused by the decoder (a 400, not a round trip)
    assume(any(m.role != "system" and (m.text().strip() or len(m.content) > len(
        [p for p in m.content if isinstance(p, TextPart)])) for m in messages))
    request = ChatRequest(model="served", messages=tuple(messages), temperature=temperature,
                          max_tokens=max_tokens, stop=tuple(stop))
    decoded = decode_chat_request(encode_chat_request(request, "served"))
    # the upstream body always streams with usage; everything else survives unchanged
    assert msgspec.structs.replace(decoded, stream=False, include_usage=False) == request


def test_the_reasoning_effort_goes_upstream_as_asked() -> None:
    from olp.ir import ChatRequest, Message, Reasoning, TextPart

    request = ChatRequest(model="m", messages=(Message(role="user",
                                                       content=(TextPart(text="hi"),)),),
                          reasoning=Reasoning(effort="high", show=True))
    assert json.loads(encode_chat_request(request, "up"))["reasoning_effort"] == "high"
    plain = msgspec.structs.replace(request, reasoning=None)
    assert "reasoning_effort" not in json.loads(encode_chat_request(plain, "up"))
