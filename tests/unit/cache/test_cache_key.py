"""The cache key: exactly the answer-changing input, normalised (docs/adr/0006-cache.md)."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from olp.cache import cache_key
from olp.ir import ChatRequest, ImagePart, Message, TextPart, ToolCall, ToolSpec
from olp.ir.openai import decode_chat_request

# --- strategies -------------------------------------------------------------------------------

_scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
            | st.floats(-2, 2, allow_nan=False))
json_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=12)
json_objects = st.dictionaries(st.text(max_size=4), json_values, min_size=2, max_size=5)
texts = st.text(max_size=12)
parts = st.one_of(st.builds(TextPart, text=texts),
                  st.builds(ImagePart, url=st.just("https://x/y.png"),
                            detail=st.none() | st.just("low")))
messages = st.builds(
    Message, role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=st.lists(parts, min_size=1, max_size=2).map(tuple),
    name=st.none() | st.just("bob"),
    tool_calls=st.lists(st.builds(ToolCall, id=texts, name=texts, arguments=texts),
                        max_size=1).map(tuple))
tools = st.builds(ToolSpec, name=st.text(min_size=1, max_size=6),
                  description=st.none() | texts, parameters=st.none() | json_objects)
tool_choices = (st.none() | st.sampled_from(["auto", "none", "required"])
                | st.fixed_dictionaries({"type": st.just("function"),
                                         "function": st.fixed_dictionaries({"name": texts})},
                                        optional={"extra": json_values}))
response_formats = st.none() | json_objects
requests = st.builds(
    ChatRequest, model=st.just("alias"),
    messages=st.lists(messages, min_size=1, max_size=3).map(tuple),
    temperature=st.none() | st.floats(0, 2), top_p=st.none() | st.floats(0, 1),
    max_tokens=st.none() | st.integers(1, 10**6),
    stop=st.lists(texts, max_size=3).map(tuple),
    presence_penalty=st.none() | st.floats(-2, 2),
    frequency_penalty=st.none() | st.floats(-2, 2),
    tools=st.lists(tools, max_size=2).map(tuple), tool_choice=tool_choices,
    response_format=response_formats)


def key(request: ChatRequest, provider: str = "anthropic", model: str = "sonnet-4") -> str:
    return cache_key(request, provider=provider, model=model)


def reorder(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every dict's keys in a new order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: reorder(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [reorder(v, rnd) for v in value]
    return value


# --- insensitivity ----------------------------------------------------------------------------

@given(requests, st.randoms(use_true_random=False))
def test_key_ignores_dict_key_order(request: ChatRequest, rnd: random.Random) -> None:
    shuffled = msgspec.structs.replace(
        request,
        tools=tuple(msgspec.structs.replace(t, parameters=reorder(t.parameters, rnd))
                    for t in request.tools),
        tool_choice=reorder(request.tool_choice, rnd),
        response_format=reorder(request.response_format, rnd))
    assert key(shuffled) == key(request)


@given(requests, st.booleans(), st.booleans(), st.none() | texts,
       st.none() | st.integers(0, 2**63 - 1), texts)
def test_key_ignores_transport_and_bookkeeping_fields(
        request: ChatRequest, stream: bool, include_usage: bool, user: str | None,
        seed: int | None, alias: str) -> None:
    other = msgspec.structs.replace(request, stream=stream, include_usage=include_usage,
                                    user=user, seed=seed, model=alias)
    assert key(other) == key(request)


@given(requests)
def test_empty_list_none_and_absent_are_the_same(request: ChatRequest) -> None:
    empty = msgspec.structs.replace(request, tools=(), stop=())
    as_none = msgspec.structs.replace(request, tools=None, stop=None)
    assert key(empty) == key(as_none)


@pytest.mark.parametrize("extra", [
    {"tools": []}, {"tools": None}, {"stop": []}, {"stop": None}, {"tool_choice": None},
    {"response_format": None}, {"temperature": None}, {"stream": True},
    {"stream": True, "stream_options": {"include_usage": True}}, {"user": "ann"},
    {"seed": 7},
])
def test_wire_spellings_of_nothing_share_a_key(extra: dict[str, Any]) -> None:
    base = {"model": "sonnet", "messages": [{"role": "user", "content": "hi"}]}
    plain = decode_chat_request(msgspec.json.encode(base))
    assert key(decode_chat_request(msgspec.json.encode({**base, **extra}))) == key(plain)


def test_integral_floats_and_negative_zero_are_normalised() -> None:
    base = ChatRequest(model="m", messages=(Message(role="user", content=(TextPart(text="x"),)),))
    one = msgspec.structs.replace(base, temperature=1)  # an int, as Python callers may pass
    assert key(one) == key(msgspec.structs.replace(base, temperature=1.0))
    assert key(msgspec.structs.replace(base, top_p=-0.0)) == key(
        msgspec.structs.replace(base, top_p=0.0))


# --- sensitivity ------------------------------------------------------------------------------

_FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "messages": st.lists(messages, min_size=1, max_size=3).map(tuple),
    "tools": st.lists(tools, max_size=2).map(tuple),
    "temperature": st.none() | st.floats(0, 2),
    "top_p": st.none() | st.floats(0, 1),
    "max_tokens": st.none() | st.integers(1, 10**6),
    "stop": st.lists(texts, max_size=3).map(tuple),
    "presence_penalty": st.none() | st.floats(-2, 2),
    "frequency_penalty": st.none() | st.floats(-2, 2),
    "tool_choice": tool_choices,
    "response_format": response_formats,
}


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return value + 0.0
    return msgspec.json.encode(value or None, order="sorted")


@given(requests, st.sampled_from(sorted(_FIELD_VALUES)), st.data())
def test_key_changes_with_each_answer_changing_field(request: ChatRequest, field: str,
                                                     data: st.DataObject) -> None:
    value = data.draw(_FIELD_VALUES[field], label=field)
    assume(_normal(value) != _normal(getattr(request, field)))
    assert key(msgspec.structs.replace(request, **{field: value})) != key(request)


@given(requests, texts, texts)
def test_key_changes_with_provider_and_model(request: ChatRequest, a: str, b: str) -> None:
    assume(a != b)
    assert key(request, provider=a) != key(request, provider=b)
    assert key(request, model=a) != key(request, model=b)


def test_provider_and_model_do_not_run_together() -> None:
    req = ChatRequest(model="m", messages=(Message(role="user", content=(TextPart(text="x"),)),))
    assert key(req, provider="ab", model="c") != key(req, provider="a", model="bc")


def test_only_parallel_tool_calls_false_changes_the_key() -> None:
    req = ChatRequest(model="m", messages=(Message(role="user", content=(TextPart(text="x"),)),),
                      tools=(ToolSpec(name="f"),))
    assert key(msgspec.structs.replace(req, parallel_tool_calls=True)) == key(req)
    assert key(msgspec.structs.replace(req, parallel_tool_calls=False)) != key(req)


def test_key_is_sha256_of_the_documented_canonical_json() -> None:
    # A change here silently empties every cache: bump KEY_VERSION on purpose instead.
    req = ChatRequest(model="alias", messages=(Message(role="user",
                                                       content=(TextPart(text="hi"),)),),
                      temperature=0.5, tools=(ToolSpec(name="f", parameters={"b": 1, "a": 2}),))
    canonical = (
        '{"cache_control":false,"frequency_penalty":null,"max_tokens":null,'
        '"messages":[{"content":[{"text":"hi","type":"text"}],"name":null,"role":"user",'
        '"tool_call_id":null,"tool_calls":[]}],"model":"sonnet-4","presence_penalty":null,'
        '"provider":"anthropic","response_format":null,"stop":null,"temperature":0.5,'
        '"tool_choice":null,"tools":[{"description":null,"name":"f","parameters":{"a":2,"b":1}}],'
        '"top_p":null,"v":1}')
    assert key(req) == hashlib.sha256(canonical.encode()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", key(req))


def test_the_reasoning_asked_for_is_part_of_the_key() -> None:
    from olp.ir import Reasoning

    base = ChatRequest(model="m", messages=(Message(role="user",
                                                    content=(TextPart(text="hi"),)),))
    keys = {cache_key(msgspec.structs.replace(base, reasoning=r), provider="p", model="m")
            for r in (None, Reasoning(effort="low"), Reasoning(effort="high"),
                      Reasoning(effort="high", show=True), Reasoning(summary="detailed"))}
    assert len(keys) == 5
    # a request that asks nothing keeps the key it had before the field existed
    assert cache_key(base, provider="p", model="m") == cache_key(
        msgspec.structs.replace(base, reasoning=None), provider="p", model="m")
