"""The Mistral mock's ``get_weather`` behaviour (tool-calling tests) over a real loopback socket:
a call when a ``*get_weather`` tool is offered and no result is in the conversation (two for
two cities, all in one streamed delta the way the real API sends them), text quoting the
result once it is there (a ``role: "tool"`` message or a CLI-rendered ``Tool result`` block).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio
from mock_mistral import WEATHER_ANSWER_PREFIX, MockMistral, serve_mock

TOOL = {"type": "function", "function": {
    "name": "olp_get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
OTHER = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}


def body(user: str, *, tools: list[Any], stream: bool = True, **extra: Any) -> dict[str, Any]:
    messages: list[Any] = [{"role": "system", "content": "sys"},
                           {"role": "user", "content": user}, *extra.get("more", [])]
    return {"model": "m", "messages": messages, "tools": tools, "stream": stream}


def sse_chunks(text: str) -> list[dict[str, Any]]:
    lines = [ln.removeprefix("data: ") for ln in text.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


async def post(mock: MockMistral, payload: dict[str, Any]) -> httpx.Response:
    def call() -> httpx.Response:
        return httpx.post(f"{mock.api_base}/chat/completions", json=payload, timeout=10)

    return await trio.to_thread.run_sync(call)


async def test_one_call_streamed_whole_with_finish_and_usage(nursery: trio.Nursery) -> None:
    mock: MockMistral = await nursery.start(serve_mock)
    with trio.fail_after(20):
        response = await post(mock, body("What is the weather in Lyon?", tools=[OTHER, TOOL]))
    chunks = sse_chunks(response.text)
    assert [c["choices"][0]["delta"] for c in chunks[:1]] == [{"role": "assistant",
                                                               "content": ""}]
    [last] = chunks[1:]
    choice = last["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert last["usage"]["total_tokens"] > 0
    [call] = choice["delta"]["tool_calls"]
    assert call["index"] == 0 and len(call["id"]) == 9 and call["id"].isalnum()
    assert call["function"] == {"name": "olp_get_weather", "arguments": '{"city": "Lyon"}'}
    assert mock.chat_requests()[0]["tool_calls"] == ["olp_get_weather"]


async def test_two_cities_two_calls_in_one_delta(nursery: trio.Nursery) -> None:
    mock: MockMistral = await nursery.start(serve_mock)
    with trio.fail_after(20):
        response = await post(mock, body("weather in Paris and Tokyo, please", tools=[TOOL]))
    calls = sse_chunks(response.text)[1]["choices"][0]["delta"]["tool_calls"]
    assert [(c["index"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (0, {"city": "Paris"}), (1, {"city": "Tokyo"})]
    assert len({c["id"] for c in calls}) == 2


async def test_rendered_result_is_quoted(nursery: trio.Nursery) -> None:
    mock: MockMistral = await nursery.start(serve_mock)
    prompt = ("User:\nWhat is the weather in Paris?\n\nAssistant:\n"
              '[tool call W1: get_weather({"city": "Paris"})]\n\n'
              "Tool result (W1):\nSunny, 21 C\n\n---\nContinue.")
    with trio.fail_after(20):
        response = await post(mock, body(prompt, tools=[TOOL]))
    texts = [c["choices"][0]["delta"].get("content") for c in sse_chunks(response.text)]
    assert f"{WEATHER_ANSWER_PREFIX}Sunny, 21 C" in texts
    assert "tool_calls" not in mock.chat_requests()[0]


async def test_tool_message_result_non_streaming(nursery: trio.Nursery) -> None:
    mock: MockMistral = await nursery.start(serve_mock)
    more = [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "W1", "type": "function",
                 "function": {"name": "olp_get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "W1", "content": "Rain"}]
    with trio.fail_after(20):
        first = await post(mock, body("weather in Oslo", tools=[TOOL], stream=False))
        second = await post(mock, body("weather in Oslo", tools=[TOOL], stream=False,
                                       more=more))
    choice = first.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    assert second.json()["choices"][0]["message"]["content"] == WEATHER_ANSWER_PREFIX + "Rain"


async def test_no_weather_tool_plain_text(nursery: trio.Nursery) -> None:
    mock: MockMistral = await nursery.start(serve_mock)
    with trio.fail_after(20):
        response = await post(mock, body("weather in Paris", tools=[OTHER]))
    chunks = sse_chunks(response.text)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == \
        "Hello from the mock upstream."
