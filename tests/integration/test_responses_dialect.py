"""The OpenAI Responses dialect through ``olp start`` with the official ``openai`` SDK
(``client.responses``), answered by the fake ``claude`` (real subprocesses): text and function
calls, streamed and not, a failure after content that never looks like success, and the
parameters OLP refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import trio
from olp_harness import FAKE_CLAUDE, Proxy, descendants, in_thread, run_proxy, wait_until

MODEL = "claude-sonnet-4-6"
WEATHER: dict[str, Any] = {
    "type": "function", "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}


def config(tmp_path: Path, scenario: str = "success") -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 2,
                      "env": {"FAKE_CLAUDE_SCENARIO": scenario,
                              "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 30}}


async def nothing_left(proxy: Proxy) -> bool:
    return await wait_until(lambda: not descendants(proxy.process.pid), within=10)


async def test_text_non_streaming_and_streaming(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().responses.with_raw_response.create(
                model=MODEL, instructions="Be terse.", input="Say hello."))

            def stream() -> list[Any]:
                return list(proxy.client().responses.create(
                    model=MODEL, input=[{"role": "user", "content": "Say hello, streamed."}],
                    stream=True))

            events = await in_thread(stream)
            assert await nothing_left(proxy)
    response = raw.parse()
    assert response.object == "response" and response.status == "completed"
    assert response.id.startswith("resp_")
    assert response.output_text == "Hello from the mock upstream."
    assert response.usage is not None and response.usage.output_tokens > 0
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Hello from the mock upstream."
    assert events[-1].response.output_text == text


async def test_function_call_round_trip(tmp_path: Path) -> None:
    ask: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            first = await in_thread(lambda: proxy.client().responses.create(
                model=MODEL, input=ask, tools=[WEATHER]))
            calls = [item for item in first.output if item.type == "function_call"]
            follow_up = [*ask, *[item.model_dump(exclude_none=True) for item in first.output],
                         {"type": "function_call_output", "call_id": calls[0].call_id,
                          "output": '{"temp_c": 18}'}]
            second = await in_thread(lambda: proxy.client().responses.create(
                model=MODEL, input=follow_up, tools=[WEATHER]))
            assert await nothing_left(proxy)
    assert [item.type for item in first.output] == ["message", "function_call"]
    assert first.output_text == "Let me check the weather."
    assert calls[0].name == "get_weather" and calls[0].arguments == '{"city": "Paris"}'
    assert second.output_text == 'The weather tool said: {"temp_c": 18, "sky": "sunny"}'


async def test_streamed_function_calls(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_parallel")) as proxy:
            def consume() -> Any:
                with proxy.client().responses.stream(
                        model=MODEL, tools=[WEATHER],
                        input="What is the weather in Paris and Oslo?") as stream:
                    for _ in stream:
                        pass
                    return stream.get_final_response()

            final = await in_thread(consume)
            assert await nothing_left(proxy)
    calls = [item for item in final.output if item.type == "function_call"]
    assert [c.arguments for c in calls] == ['{"city": "Paris"}', '{"city": "Oslo"}']
    assert final.status == "completed"


async def test_a_failure_after_content_is_never_a_completed_response(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home",
                             config(tmp_path, "crash_mid_stream")) as proxy:
            events = await in_thread(lambda: list(proxy.client().responses.create(
                model=MODEL, input="Say hello.", stream=True)))
            assert await nothing_left(proxy)
    kinds = [e.type for e in events]
    assert "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    assert "response.completed" not in kinds
    assert events[-1].response.status == "failed"


async def test_refused_and_dropped_parameters_are_said(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            def calls() -> tuple[openai.APIStatusError | None, Any, openai.NotFoundError]:
                refused = None
                try:
                    proxy.client().responses.create(model=MODEL, input="x",
                                                    previous_response_id="resp_1")
                except openai.APIStatusError as exc:
                    refused = exc
                dropped = proxy.client().responses.with_raw_response.create(
                    model=MODEL, input="Say hello.",
                    tools=[{"type": "web_search"}])  # type: ignore[list-item]
                try:
                    proxy.client().responses.retrieve(dropped.parse().id)
                except openai.NotFoundError as exc:
                    return refused, dropped, exc
                raise AssertionError("a response was stored")

            refused, dropped, not_stored = await in_thread(calls)
    assert refused is not None and refused.status_code == 400
    assert refused.body["param"] == "previous_response_id"  # type: ignore[index]
    # A server tool no hop can run is dropped, and said so; the answer is as without it.
    assert "tools.web_search" in dropped.headers["x-olp-ignored-params"].split(",")
    assert dropped.parse().output_text == "Hello from the mock upstream."
    assert not_stored.body["code"] == "response_not_found"  # type: ignore[index]
