"""Decoding OpenAI chat request bodies: good requests, bad ones (with the param named), fuzz."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from olp.ir import ChatRequest, ImagePart, Message, Reasoning, TextPart, ToolCall, ToolSpec
from olp.ir.openai import InvalidRequest, decode_chat_request

USER_HI: dict[str, Any] = {"role": "user", "content": "hi"}
HI = Message(role="user", content=(TextPart(text="hi"),))


def _req(**fields: Any) -> bytes:
    return json.dumps({"model": "gpt-x", "messages": [USER_HI], **fields}).encode()


def _ir(**fields: Any) -> ChatRequest:
    return ChatRequest(**{"model": "gpt-x", "messages": (HI,), **fields})


WEATHER_CALL = {"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "weather", "description": "Get it", "parameters": {"type": "object"}}}

GOOD: list[tuple[str, bytes, ChatRequest]] = [
    ("string content", _req(), _ir()),
    ("an empty message beside one with text", json.dumps({"model": "m", "messages": [
        {"role": "user", "content": ""}, {"role": "assistant", "content": "?"}]}).encode(),
     ChatRequest(model="m", messages=(Message(role="user", content=(TextPart(text=""),)),
                                      Message(role="assistant",
                                              content=(TextPart(text="?"),))))),
    ("an image without text", _req(messages=[{"role": "user", "content": [
        {"type": "text", "text": " "}, {"type": "image_url", "image_url": "https://x/a.png"}]}]),
     _ir(messages=(Message(role="user", content=(
         TextPart(text=" "), ImagePart(url="https://x/a.png"))),))),
    ("a blank tool result", _req(messages=[
        {"role": "system", "content": "s"}, {"role": "user", "content": ""},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": ""}]),
     _ir(messages=(Message(role="system", content=(TextPart(text="s"),)),
                   Message(role="user", content=(TextPart(text=""),)),
                   Message(role="assistant", content=(TextPart(text=""),), tool_calls=(
                       ToolCall(id="call_1", name="weather", arguments='{"city":"Oslo"}'),)),
                   Message(role="tool", tool_call_id="call_1",
                           content=(TextPart(text=""),))))),
    ("parts with image", _req(messages=[{"role": "user", "name": "ann", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": "data:image/png;base64,AAAA"},
    ]}]), _ir(messages=(Message(role="user", name="ann", content=(
        TextPart(text="what is this?"), ImagePart(url="https://x/a.png", detail="low"),
        ImagePart(url="data:image/png;base64,AAAA"))),))),
    ("system and developer", _req(messages=[
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "really"}]}, USER_HI]),
     _ir(messages=(Message(role="system", content=(TextPart(text="be brief"),)),
                   Message(role="developer", content=(TextPart(text="really"),)), HI))),
    ("assistant tool_calls and tool result", _req(messages=[
        USER_HI, {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
        tools=[WEATHER_TOOL], tool_choice="auto"),
     _ir(messages=(HI, Message(role="assistant", tool_calls=(
         ToolCall(id="call_1", name="weather", arguments='{"city":"Oslo"}'),)),
        Message(role="tool", tool_call_id="call_1", content=(TextPart(text="sunny"),))),
        tools=(ToolSpec(name="weather", description="Get it", parameters={"type": "object"}),),
        tool_choice="auto")),
    ("assistant tool_calls without content", _req(messages=[
        {"role": "assistant", "tool_calls": [WEATHER_CALL]}]),
     _ir(messages=(Message(role="assistant", tool_calls=(
         ToolCall(id="call_1", name="weather", arguments='{"city":"Oslo"}'),)),))),
    ("max_tokens", _req(max_tokens=10), _ir(max_tokens=10)),
    ("max_completion_tokens wins", _req(max_tokens=10, max_completion_tokens=20),
     _ir(max_tokens=20)),
    ("max_completion_tokens alone", _req(max_completion_tokens=5), _ir(max_tokens=5)),
    ("stop string", _req(stop="END"), _ir(stop=("END",))),
    ("stop list", _req(stop=["a", "b", "c", "d"]), _ir(stop=("a", "b", "c", "d"))),
    ("stop null", _req(stop=None), _ir()),
    ("stream_options", _req(stream=True, stream_options={"include_usage": True}),
     _ir(stream=True, include_usage=True)),
    ("stream without options", _req(stream=True), _ir(stream=True)),
    ("include_usage kept without stream", _req(stream_options={"include_usage": True}),
     _ir(include_usage=True)),
    ("sampling (ints as floats)", _req(temperature=1, top_p=0.5, seed=42, presence_penalty=-2,
                                       frequency_penalty=1.5, n=1, user="u-1"),
     _ir(temperature=1.0, top_p=0.5, seed=42, presence_penalty=-2.0, frequency_penalty=1.5,
         user="u-1")),
    ("nulls mean absent", _req(temperature=None, n=None, tools=None, stream=None), _ir()),
    ("tool_choice object", _req(tools=[WEATHER_TOOL], tool_choice={
        "type": "function", "function": {"name": "weather"}}),
     _ir(tools=(ToolSpec(name="weather", description="Get it", parameters={"type": "object"}),),
         tool_choice={"type": "function", "function": {"name": "weather"}})),
    ("response_format json_schema", _req(response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}),
     _ir(response_format={"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "object"}}})),
    ("response_format json_object", _req(response_format={"type": "json_object"}),
     _ir(response_format={"type": "json_object"})),
    ("unknown fields ignored", _req(logprobs=False, metadata={"a": 1},
                                    messages=[{**USER_HI, "extra": [1, 2]}]), _ir()),
    ("parallel_tool_calls false", _req(tools=[WEATHER_TOOL], parallel_tool_calls=False),
     _ir(tools=(ToolSpec(name="weather", description="Get it", parameters={"type": "object"}),),
         parallel_tool_calls=False)),
    ("parallel_tool_calls true", _req(parallel_tool_calls=True), _ir(parallel_tool_calls=True)),
    ("parallel_tool_calls null", _req(parallel_tool_calls=None), _ir()),
    ("legacy fields sent as null", _req(functions=None, function_call=None), _ir()),
    ("reasoning_effort", _req(reasoning_effort="xhigh"),
     _ir(reasoning=Reasoning(effort="high", show=True))),
]


@pytest.mark.parametrize(("body", "expected"), [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_good_requests(body: bytes, expected: ChatRequest) -> None:
    assert decode_chat_request(body) == expected


def _msgs(*messages: Any) -> bytes:
    return _req(messages=list(messages))


BAD: list[tuple[bytes, str | None]] = [
    (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
    (_req(model=5), "model"),
    (_req(model=""), "model"),
    (b'{"model": "m"}', "messages"),
    (_req(messages=[]), "messages"),
    (_req(messages={"role": "user"}), "messages"),
    (_req(messages=["hi"]), "messages[0]"),
    (_msgs({"content": "hi"}), "messages[0].role"),
    (_msgs({"role": "function", "content": "hi", "name": "f"}), "messages[0].role"),
    (_msgs(USER_HI, {"role": "assistant", "content": 5}), "messages[1].content"),
    (_msgs({"role": "user", "content": None}), "messages[0].content"),
    (_msgs({"role": "user"}), "messages[0].content"),
    (_msgs({"role": "user", "content": []}), "messages[0].content"),
    (_msgs({"role": "assistant", "content": None}), "messages[0].content"),
    (_msgs({"role": "user", "content": "hi", "name": 5}), "messages[0].name"),
    (_msgs({"role": "user", "content": [{"text": "hi"}]}), "messages[0].content[0].type"),
    (_msgs({"role": "user", "content": [{"type": "text"}]}), "messages[0].content[0].text"),
    (_msgs({"role": "user", "content": [{"type": "text", "text": 1}]}),
     "messages[0].content[0].text"),
    (_msgs({"role": "user", "content": [{"type": "text", "text": "a"}, {
        "type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}]}),
     "messages[0].content[1].type"),
    (_msgs({"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}),
     "messages[0].content[0].type"),
    (_msgs({"role": "user", "content": [{"type": "image_url"}]}),
     "messages[0].content[0].image_url"),
    (_msgs({"role": "user", "content": [{"type": "image_url", "image_url": {"url": 5}}]}),
     "messages[0].content[0].image_url.url"),
    (_msgs({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}),
     "messages[0].content[0].image_url.url"),
    (_msgs({"role": "system", "content": [{"type": "image_url", "image_url": "https://x"}]}),
     "messages[0].content[0].type"),
    (_msgs(USER_HI, {"role": "tool", "content": "sunny"}), "messages[1].tool_call_id"),
    (_msgs(USER_HI, {"role": "tool", "content": "sunny", "tool_call_id": 1}),
     "messages[1].tool_call_id"),
    (_msgs(USER_HI, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
     "messages[1].tool_calls[0].id"),
    (_msgs(USER_HI, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]}),
     "messages[1].tool_calls[0].function.arguments"),
    (_msgs(USER_HI, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "custom", "function": {"name": "f", "arguments": "{}"}}]}),
     "messages[1].tool_calls[0].type"),
    (_msgs(USER_HI, {"role": "assistant", "tool_calls": {"id": "c"}}),
     "messages[1].tool_calls"),
    (_msgs({**USER_HI, "tool_calls": [WEATHER_CALL]}), "messages[0].tool_calls"),
    (_req(temperature=2.5), "temperature"),
    (_req(temperature=-0.1), "temperature"),
    (_req(temperature="1"), "temperature"),
    (_req(temperature=True), "temperature"),
    (_req(top_p=1.01), "top_p"),
    (_req(max_tokens=0), "max_tokens"),
    (_req(max_tokens=1.5), "max_tokens"),
    (_req(max_tokens="10"), "max_tokens"),
    (_req(max_completion_tokens=-1), "max_completion_tokens"),
    (_req(stop=["a", "b", "c", "d", "e"]), "stop"),
    (_req(stop=5), "stop"),
    (_req(stop=["a", 1]), "stop[1]"),
    (_req(seed="1"), "seed"),
    (_req(seed=2**63), "seed"),
    (_req(max_tokens=2**31), "max_tokens"),
    (_req(presence_penalty=-2.5), "presence_penalty"),
    (_req(frequency_penalty=3), "frequency_penalty"),
    (_req(n=2), "n"),
    (_req(n=0), "n"),
    (_req(n="1"), "n"),
    (_req(stream="yes"), "stream"),
    (_req(stream_options=1), "stream_options"),
    (_req(stream_options={"include_usage": "yes"}), "stream_options.include_usage"),
    (_req(tools={"type": "function"}), "tools"),
    (_req(tools=[{"type": "retrieval", "function": {"name": "f"}}]), "tools[0].type"),
    (_req(tools=[{"type": "function"}]), "tools[0].function"),
    (_req(tools=[{"type": "function", "function": {}}]), "tools[0].function.name"),
    (_req(tools=[{"type": "function", "function": {"name": ""}}]), "tools[0].function.name"),
    (_req(tools=[{"type": "function", "function": {"name": "f,Bash"}}]),
     "tools[0].function.name"),
    (_req(tools=[{"type": "function", "function": {"name": "mcp__*"}}]),
     "tools[0].function.name"),
    (_req(tools=[{"type": "function", "function": {"name": "a" * 65}}]),
     "tools[0].function.name"),
    (_req(tools=[{"type": "function", "function": {"name": "f", "parameters": []}}]),
     "tools[0].function.parameters"),
    (_req(tools=[WEATHER_TOOL, {"type": "function", "function": {"name": "g",
                                                                  "description": 1}}]),
     "tools[1].function.description"),
    (_req(tool_choice="any"), "tool_choice"),
    (_req(tool_choice=5), "tool_choice"),
    (_req(tool_choice={"function": {"name": "f"}}), "tool_choice.type"),
    (_req(tool_choice={"type": "function"}), "tool_choice.function.name"),
    (_req(tool_choice={"type": "function", "function": {"name": 3}}),
     "tool_choice.function.name"),
    (_req(tool_choice={"type": "function", "function": {"name": "other"}},
          tools=[WEATHER_TOOL]), "tool_choice.function.name"),
    (_req(tool_choice={"type": "function", "function": {"name": "weather"}}),
     "tool_choice.function.name"),
    (_req(parallel_tool_calls="no"), "parallel_tool_calls"),
    (_req(response_format="json"), "response_format"),
    (_req(response_format={"type": "xml"}), "response_format.type"),
    (_req(response_format={}), "response_format.type"),
    (_req(response_format={"type": "json_schema"}), "response_format.json_schema"),
    (_req(user=5), "user"),
    # nothing to answer: no CLI would get a prompt
    (_msgs({"role": "user", "content": ""}), "messages[0].content"),
    (_msgs({"role": "user", "content": " \n\t "}), "messages[0].content"),
    (_msgs({"role": "user", "content": [{"type": "text", "text": ""}]}),
     "messages[0].content"),
    (_msgs({"role": "system", "content": "be brief"}, {"role": "user", "content": "  "}),
     "messages[1].content"),
    (_msgs({"role": "system", "content": "be brief"}), "messages"),
    (_msgs({"role": "system", "content": "a"}, {"role": "developer", "content": "b"}),
     "messages"),
    (_msgs({"role": "user", "content": ""}, {"role": "assistant", "content": " "},
           {"role": "user", "content": ""}), "messages"),
    (b"[]", None),
    (b'"hello"', None),
    (b"null", None),
    (b"", None),
    (b"{", None),
    (b'{"model": "m",}', None),
    (b'{"model": "\xff\xfe", "messages": []}', None),
    (b'{"model": "\\ud800", "messages": []}', None),
    (b"\xef\xbb\xbf{}", None),
    (b'{"model": "m", "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None),
]


@pytest.mark.parametrize(("body", "param"), BAD, ids=[str(p) for _, p in BAD])
def test_bad_requests_name_the_param(body: bytes, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_chat_request(body)
    err = info.value
    assert err.param == param
    assert err.message and err.type == "invalid_request_error"
    if param is not None:
        assert f"'{param}'" in err.message


def test_error_codes_and_messages() -> None:
    def err(body: bytes) -> InvalidRequest:
        with pytest.raises(InvalidRequest) as info:
            decode_chat_request(body)
        return info.value

    e = err(b"{")
    assert e.message.startswith("Invalid JSON body: ") and e.code is None
    e = err(b'{"model": "\xff", "messages": []}')
    assert e.message.startswith("Invalid JSON body: ")
    assert err(b"[1]").code == "invalid_type"
    e = err(b'{"model": "m"}')
    assert (e.code, e.message) == ("missing_required_parameter",
                                   "Missing required parameter: 'messages'.")
    e = err(_req(temperature="hot"))
    assert e.code == "invalid_type" and "`float | null`" in e.message
    e = err(_req(temperature=3))
    assert e.code == "invalid_value" and "between 0 and 2" in e.message
    e = err(_req(n=3))
    assert e.code == "unsupported_value" and "only n=1 is supported" in e.message
    e = err(_msgs({"role": "system", "content": "be brief"}))
    assert (e.code, e.param) == ("invalid_value", "messages")
    assert "only system or developer messages" in e.message
    e = err(_msgs({"role": "user", "content": ""}))
    assert "the conversation has no text" in e.message
    e = err(_req(max_tokens=10**400))
    assert e.code == "invalid_value" and e.param == "max_tokens" and len(e.message) < 200


# --- fuzz: nothing but a ChatRequest or an InvalidRequest comes out, whatever goes in ---

KEYS = ["model", "messages", "role", "content", "type", "text", "image_url", "url", "detail",
        "name", "tool_calls", "tool_call_id", "id", "function", "arguments", "tools",
        "tool_choice", "response_format", "json_schema", "stop", "n", "stream",
        "stream_options", "include_usage", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "seed", "parameters", "description", "user",
        "reasoning_effort"]
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10)
           | st.sampled_from(["user", "assistant", "tool", "system", "developer", "function",
                              "text", "image_url", "input_audio", "auto", "none", "required",
                              "json_schema", "json_object", "", "minimal", "low", "xhigh"]))


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function, not a multi-line lambda: hypothesis reads the extend function's
    # source to check that it uses its argument, and a lambda's source is not always found.
    return (st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5))


JSON = st.recursive(SCALARS, _containers, max_leaves=25)
BASES = [json.loads(g[1]) for g in GOOD]


def _check(body: bytes) -> None:
    try:
        req = decode_chat_request(body)
    except InvalidRequest as e:
        assert isinstance(e.message, str) and e.message
        assert e.param is None or (isinstance(e.param, str) and e.param)
        return
    assert isinstance(req, ChatRequest)
    # The result is a valid IR value: it survives a strict round trip.
    assert msgspec.json.decode(msgspec.json.encode(req), type=ChatRequest) == req


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*path, i))
    return found


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=200))
def test_fuzz_bytes(body: bytes) -> None:
    _check(body)


@settings(max_examples=300, deadline=None, database=None)
@given(JSON)
def test_fuzz_json(value: Any) -> None:
    _check(json.dumps(value).encode())


@settings(max_examples=300, deadline=None, database=None)
@given(st.data())
def test_fuzz_mutated_good_requests(data: st.DataObject) -> None:
    body = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(body)))
        if not path:
            continue
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JSON)
    _check(json.dumps(body).encode())


@pytest.mark.parametrize(("body", "param"), [
    (_req(functions=[{"name": "weather", "parameters": {"type": "object"}}]), "functions"),
    (_req(function_call="auto"), "function_call"),
    (_req(function_call={"name": "weather"}), "function_call"),
    (_msgs(USER_HI, {"role": "assistant", "content": None,
                     "function_call": {"name": "weather", "arguments": "{}"}}),
     "messages[1].function_call"),
    (_msgs(USER_HI, {"role": "function", "name": "weather", "content": "sunny"}),
     "messages[1].role"),
])
def test_the_legacy_functions_shape_is_a_clear_400(body: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        decode_chat_request(body)
    assert err.value.param == param
    assert err.value.code == "unsupported_parameter"
    assert "'tools'" in err.value.message and "deprecated" in err.value.message
