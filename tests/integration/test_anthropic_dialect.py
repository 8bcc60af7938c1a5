"""The Anthropic Messages dialect through ``olp start`` with the official ``anthropic`` SDK as
the client, answered by the fake ``claude`` (real subprocesses): text and tool use, streamed
and not, errors in Anthropic's shape, a failure after content that the SDK raises, and the
token-count estimate. Same engine, headers and cache as Chat Completions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import trio
from olp_harness import FAKE_CLAUDE, Proxy, descendants, in_thread, run_proxy, wait_until

MODEL = "claude-sonnet-4-6"  # as Claude Code sends it: the registry routes it to claude
WEATHER: dict[str, Any] = {
    "name": "get_weather", "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


def config(tmp_path: Path, scenario: str = "success") -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 2,
                      "env": {"FAKE_CLAUDE_SCENARIO": scenario,
                              "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"),
                              "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 30}}  # a tool call must not wait for the grace


def client(proxy: Proxy, key: str | None = None) -> anthropic.Anthropic:
    return proxy.anthropic_client(key)


async def nothing_left(proxy: Proxy) -> bool:
    return await wait_until(lambda: not descendants(proxy.process.pid), within=10)


async def test_text_non_streaming_with_olps_headers(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            raw = await in_thread(lambda: client(proxy).messages.with_raw_response.create(
                model=MODEL, max_tokens=200, system="Be terse.",
                messages=[{"role": "user", "content": "Say hello."}]))
            again = await in_thread(lambda: client(proxy).messages.with_raw_response.create(
                model=MODEL, max_tokens=200, system="Be terse.",
                messages=[{"role": "user", "content": "Say hello."}]))
            # The cache key is over the IR: the same request in the other dialect is a hit.
            openai_raw = await in_thread(
                lambda: proxy.client().chat.completions.with_raw_response.create(
                    model=MODEL, max_tokens=200,
                    messages=[{"role": "system", "content": "Be terse."},
                              {"role": "user", "content": "Say hello."}]))
            assert await nothing_left(proxy)
    assert openai_raw.headers["x-olp-cache"] == "hit"
    assert openai_raw.parse().choices[0].message.content == "Hello from the mock upstream."
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello from the mock upstream."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    assert raw.headers["x-olp-requested-model"] == MODEL
    assert (raw.headers["x-olp-cache"], again.headers["x-olp-cache"]) == ("miss", "hit")
    assert again.parse().content[0].text == message.content[0].text  # type: ignore[union-attr]


async def test_text_streaming(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            def consume() -> tuple[str, Any, list[str]]:
                with client(proxy).messages.stream(model=MODEL, max_tokens=200,
                                                   messages=[{"role": "user",
                                                              "content": "Say hello."}]) as s:
                    text = "".join(s.text_stream)
                    final = s.get_final_message()
                return text, final, []

            text, final, _ = await in_thread(consume)
            assert await nothing_left(proxy)
    assert text == "Hello from the mock upstream."
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


async def test_tool_use_round_trip(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            first = await in_thread(lambda: client(proxy).messages.create(
                model=MODEL, max_tokens=200, messages=ASK, tools=[WEATHER]))
            [text, call] = first.content
            history = [*ASK, {"role": "assistant", "content": [b.model_dump() for b in
                                                               first.content]},
                       {"role": "user", "content": [
                           {"type": "tool_result", "tool_use_id": call.id,  # type: ignore
                            "content": '{"temp_c": 18}'}]}]
            second = await in_thread(lambda: client(proxy).messages.create(
                model=MODEL, max_tokens=200, messages=history, tools=[WEATHER]))
            assert await nothing_left(proxy)
    assert first.stop_reason == "tool_use"
    assert text.type == "text" and text.text == "Let me check the weather."
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Paris"} and call.id
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == (  # type: ignore[union-attr]
        'The weather tool said: {"temp_c": 18, "sky": "sunny"}')  # the recorded answer


async def test_streamed_parallel_tool_use(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_parallel")) as proxy:
            def consume() -> tuple[Any, list[str]]:
                with client(proxy).messages.stream(model=MODEL, max_tokens=200, messages=ASK,
                                                   tools=[WEATHER]) as s:
                    kinds = [event.type for event in s]
                    return s.get_final_message(), kinds

            final, kinds = await in_thread(consume)
            assert await nothing_left(proxy)
    assert final.stop_reason == "tool_use"
    calls = [b for b in final.content if b.type == "tool_use"]
    assert [c.input for c in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"


async def test_a_failure_after_content_is_an_error_event_the_sdk_raises(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home",
                             config(tmp_path, "crash_mid_stream")) as proxy:
            def consume() -> tuple[list[str], BaseException | None]:
                texts: list[str] = []
                try:
                    with client(proxy).messages.stream(
                            model=MODEL, max_tokens=200,
                            messages=[{"role": "user", "content": "Say hello."}]) as s:
                        for text in s.text_stream:
                            texts.append(text)
                except anthropic.APIError as exc:
                    return texts, exc
                return texts, None

            texts, error = await in_thread(consume)
            assert await nothing_left(proxy)
    assert texts  # content was sent, then the stream failed: no clean message_stop
    assert isinstance(error, anthropic.APIStatusError)


async def test_errors_are_in_anthropics_shape(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            def errors() -> list[Any]:
                out: list[Any] = []
                for key, model in (("olp_wrong", MODEL), (None, "no-such-model")):
                    try:
                        client(proxy, key).messages.create(
                            model=model, max_tokens=10,
                            messages=[{"role": "user", "content": "x"}])
                    except anthropic.APIStatusError as exc:
                        out.append(exc)
                bad = httpx.post(f"{proxy.url}/v1/messages", timeout=10,
                                 headers={"x-api-key": proxy.token,
                                          "anthropic-version": "2023-06-01"},
                                 json={"model": MODEL, "messages": []})
                return [*out, bad]

            unauthorized, unknown, bad = await in_thread(errors)
    assert isinstance(unauthorized, anthropic.AuthenticationError)
    assert unauthorized.body["error"]["type"] == "authentication_error"  # type: ignore
    assert isinstance(unknown, anthropic.NotFoundError)
    assert unknown.body["type"] == "error"  # type: ignore[index]
    assert unknown.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert bad.status_code == 400
    assert bad.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": bad.json()["error"]["message"]}}
    assert "max_tokens" in bad.json()["error"]["message"]


async def test_count_tokens_is_an_estimate_and_says_so(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            raw = await in_thread(lambda: client(proxy).messages.with_raw_response.count_tokens(
                model=MODEL, messages=[{"role": "user", "content": "x" * 400}],
                tools=[WEATHER]))
    assert raw.headers["x-olp-token-count"] == "estimate"
    counted = raw.parse()
    assert counted.input_tokens >= 100
    assert json.loads(raw.http_response.content) == {"input_tokens": counted.input_tokens}
