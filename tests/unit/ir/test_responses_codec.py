"""The OpenAI Responses request codec (``olp.ir.responses``): bodies into the one IR."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseCompletedEvent

from olp.ir import (
    ImagePart,
    Message,
    Stop,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from olp.ir.responses import (
    InvalidRequest,
    ResponseBuilder,
    ResponseStreamEncoder,
    decode_responses_request,
)


def decode(**body: Any) -> Any:
    return decode_responses_request(json.dumps({"model": "gpt-5.5", "input": "hi",
                                                **body}).encode())


def test_items_map_onto_the_ir() -> None:
    req = decode(instructions="Be terse.", input=[
        {"role": "developer", "content": "Use metric units."},
        {"role": "user", "content": [
            {"type": "input_text", "text": "Weather here?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
    ], tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        tool_choice={"type": "function", "name": "get_weather"}, parallel_tool_calls=False,
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"},
                         "strict": True}},
        max_output_tokens=50, temperature=0.3, store=False, stream=True)
    assert req.messages == (
        Message(role="system", content=(TextPart(text="Be terse."),)),
        Message(role="developer", content=(TextPart(text="Use metric units."),)),
        Message(role="user", content=(TextPart(text="Weather here?"),
                                      ImagePart(url="data:image/png;base64,AA"))),
        Message(role="assistant", content=(TextPart(text="Checking."),),
                tool_calls=(ToolCall(id="c1", name="get_weather",
                                     arguments='{"city": "Paris"}'),)),
        Message(role="tool", content=(TextPart(text="18 C"),), tool_call_id="c1"),
    )
    assert req.tools == (ToolSpec(name="get_weather", parameters={"type": "object"}),)
    assert req.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert req.parallel_tool_calls is False
    assert req.response_format == {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object"}, "strict": True}}
    assert (req.max_tokens, req.temperature, req.stream, req.include_usage) == (50, 0.3, True,
                                                                                True)


@pytest.mark.parametrize(("body", "param"), [
    ({"previous_response_id": ""}, "previous_response_id"),
    ({"prompt_cache_key": "k" * 513}, "prompt_cache_key"),
    ({"input": []}, "input"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "computer_call"}]}, "input[0].type"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0].type"),
    ({"tools": [{"type": "function", "name": "a b"}]}, "tools[0].name"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "  "}, "messages[0].content"),
])
def test_bad_bodies_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode(**body)
    assert info.value.param == param


def test_tools_that_are_not_functions_are_dropped_and_named() -> None:
    req = decode(tools=[
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
        {"type": "tool_search", "execution": "client"}, {"type": "web_search"}])
    assert [t.name for t in req.tools] == ["exec_command"]
    assert req.dropped == ("tools.apply_patch", "tools.tool_search", "tools.web_search")


def test_a_dropped_tool_s_name_is_kept_short() -> None:
    """What is named in ``dropped`` (and so echoed in a header) is at most 128 characters of
    the tool's name or type, cut with a ``…``: a 70 KB name is not carried along."""
    req = decode(tools=[{"type": "custom", "name": "n" * 70_000},
                        {"type": "t" * 70_000}, {"type": "custom", "name": "x" * 128}])
    assert req.dropped == (f"tools.{'n' * 127}\u2026", f"tools.{'t' * 127}\u2026",
                           f"tools.{'x' * 128}")


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["model", "input", "role", "content", "type", "text", "tools",
                            "name", "call_id", "output", "arguments", "format", "reasoning",
                            "effort", "summary"])
    return st.lists(inner, max_size=3) | st.dictionaries(keys | st.text(max_size=4), inner,
                                                          max_size=5)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                    _containers, max_leaves=20))
def test_any_json_decodes_or_is_a_clear_400(value: Any) -> None:
    try:
        decode_responses_request(json.dumps(value).encode())
    except InvalidRequest as exc:
        assert exc.message


def test_a_length_finish_is_an_incomplete_response() -> None:
    builder = ResponseBuilder(id="resp_1", model="m")
    for event in (TextDelta(text="cut"), ToolCallDelta(index=0, id="c", name="f", arguments="{}"),
                  Usage(prompt_tokens=3, completion_tokens=4), Stop(finish_reason="length")):
        builder.add(event)
    body = json.loads(builder.body())
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [i["type"] for i in body["output"]] == ["message", "function_call"]
    assert body["output"][1]["arguments"] == "{}" and body["output"][1]["call_id"] == "c"
    assert body["usage"]["total_tokens"] == 7


CACHED = Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024, cache_write_tokens=100)


def test_cached_input_is_in_the_input_tokens_details() -> None:
    """OpenAI's convention: ``input_tokens`` counts every input token, of which
    ``input_tokens_details`` tells the cached and the written ones; in the body and in the
    streamed ``response.completed``."""
    builder = ResponseBuilder(id="resp_1", model="m")
    for event in (TextDelta(text="x"), CACHED, Stop()):
        builder.add(event)
    enc = ResponseStreamEncoder(id="resp_2", model="m")
    out = enc.begin() + enc.text("x") + enc.finish("stop", CACHED)
    last = out.decode().strip().split("\n\n")[-1].split("\n")[1].removeprefix("data: ")
    completed = ResponseCompletedEvent.model_validate_json(last).response
    for response in (Response.model_validate_json(builder.body()), completed):
        usage = response.usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (1200, 5, 1205)
        assert usage.input_tokens_details.cached_tokens == 1024
        assert usage.input_tokens_details.cache_write_tokens == 100
