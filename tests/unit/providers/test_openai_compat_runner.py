"""The HTTP runner against ``httpx.MockTransport`` (no sockets): what it sends, how it reads a
whole answer, and the retry timing under trio's MockClock. Faults over real sockets are in
tests/integration/test_openai_compat_faults.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from olp.actors import Timeouts
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Message,
    Retrying,
    Start,
    Stop,
    TextDelta,
    TextPart,
    Usage,
)
from olp.providers.openai_compat import HttpConfig, OpenAICompatRunner, RetryPolicy

Handler = Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]


def request() -> ChatRequest:
    return ChatRequest(model="alias", messages=(Message(role="user",
                                                        content=(TextPart(text="hi"),)),),
                       temperature=0.5)


def sse(*payloads: Any, done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads)
    return out + (b"data: [DONE]\n\n" if done else b"")


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"model": "served-1", "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}], **extra}


OK_STREAM = sse(chunk("Hi"), chunk(None, "stop"),
                {"model": "served-1", "choices": [],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1}})


def runner_for(handler: Handler, **config: Any) -> OpenAICompatRunner:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config.setdefault("retry", RetryPolicy(random=lambda: 0.0))
    return OpenAICompatRunner(HttpConfig(base_url="https://up.example/v1/", **config),
                              client=client)


async def run(runner: OpenAICompatRunner) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(request(), "served-model", emit)
    await runner.client.aclose()
    return events


def sse_response(body: bytes = OK_STREAM, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, content=body,
                          headers={"content-type": "text/event-stream", **headers})


async def test_request_shape_and_answer() -> None:
    seen: list[httpx.Request] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return sse_response()

    events = await run(runner_for(handler, api_key=" sk-live-123\n",
                                  headers={"HTTP-Referer": "https://olp.local"}))
    assert events == [Start(model="served-1"), TextDelta(text="Hi"),
                      Usage(prompt_tokens=3, completion_tokens=1), Stop(finish_reason="stop")]
    (req,) = seen
    assert req.method == "POST" and str(req.url) == "https://up.example/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-live-123"
    assert req.headers["accept"] == "text/event-stream"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["http-referer"] == "https://olp.local"
    body = json.loads(await req.aread())
    assert body["model"] == "served-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["temperature"] == 0.5


async def test_no_key_no_authorization_header() -> None:
    seen: list[httpx.Request] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return sse_response()

    await run(runner_for(handler))
    assert "authorization" not in seen[0].headers


async def test_missing_key_fails_before_any_request() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    events = await run(runner_for(handler, api_key_env="ROUTER_KEY"))
    assert len(events) == 1 and isinstance(events[0], Error)
    assert events[0].code == "AUTH_MISSING" and events[0].category == "auth"
    assert "ROUTER_KEY" in events[0].message


async def test_json_answer_to_a_stream_request_is_tolerated() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "model": "served-2", "choices": [{"index": 0, "finish_reason": "length",
                                              "message": {"role": "assistant", "content": "Hey"}}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 5}})

    assert await run(runner_for(handler)) == [
        Start(model="served-2"), TextDelta(text="Hey"), Usage(prompt_tokens=2, completion_tokens=5),
        Stop(finish_reason="length")]


async def test_error_status_is_classified_with_the_upstream_message() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {
            "message": "Invalid value for 'temperature'", "type": "invalid_request_error",
            "code": "invalid_value"}})

    (event,) = await run(runner_for(handler))
    assert event == Error(code="UPSTREAM_CLIENT_ERROR", category="client_error",
                          message="Invalid value for 'temperature'", status=400)


async def test_passed_in_client_is_not_closed_by_the_runner() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        return sse_response()

    runner = runner_for(handler)
    await runner.aclose()
    assert not runner.client.is_closed
    await runner.client.aclose()
    own = OpenAICompatRunner(HttpConfig(base_url="http://127.0.0.1:9/v1", trust_env=False))
    await own.aclose()
    assert own.client.is_closed


# --- retry timing on the virtual clock ---


def scripted(*responses: httpx.Response) -> tuple[Handler, list[float]]:
    times: list[float] = []
    queue = list(responses)

    async def handler(req: httpx.Request) -> httpx.Response:
        times.append(trio.current_time())
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handler, times


def too_many(retry_after: str) -> httpx.Response:
    return httpx.Response(429, headers={"retry-after": retry_after},
                          json={"error": {"message": "slow down", "type": "requests"}})


async def test_429_waits_out_retry_after_then_succeeds(
        autojump_clock: trio.testing.MockClock) -> None:
    handler, times = scripted(too_many("3"), sse_response())
    events = await run(runner_for(handler))
    assert events[0] == Retrying(attempt=1, category="rate_limited", max_retries=1, delay_s=3.0,
                                 status=429, bounded=True)
    assert isinstance(events[-1], Stop)
    assert times[1] - times[0] == 3.0


async def test_retry_after_over_the_cap_is_not_retried(
        autojump_clock: trio.testing.MockClock) -> None:
    handler, times = scripted(too_many("30"), sse_response())
    (event,) = await run(runner_for(handler))
    assert isinstance(event, Error) and event.category == "rate_limited"
    assert event.retry_after_s == 30.0 and len(times) == 1


async def test_no_retry_that_cannot_finish_before_the_first_output_deadline(
        autojump_clock: trio.testing.MockClock) -> None:
    handler, times = scripted(too_many("3"), sse_response())
    (event,) = await run(runner_for(handler, timeouts=Timeouts(first_output_s=2.0, idle_s=5.0,
                                                               total_s=10.0)))
    assert isinstance(event, Error) and event.code == "RATE_LIMITED" and len(times) == 1


async def test_500_backoff_is_jittered(autojump_clock: trio.testing.MockClock) -> None:
    error = httpx.Response(500, json={"error": {"message": "oops", "type": "server_error"}})
    handler, times = scripted(error, sse_response())
    policy = RetryPolicy(random=lambda: 0.5, backoff_base_s=1.0)
    events = await run(runner_for(handler, retry=policy))
    assert isinstance(events[0], Retrying) and events[0].delay_s == 0.75
    assert times[1] - times[0] == 0.75 and isinstance(events[-1], Stop)


@pytest.mark.parametrize("status", [400, 401, 402, 404])
async def test_terminal_statuses_are_not_retried(
        status: int, autojump_clock: trio.testing.MockClock) -> None:
    handler, times = scripted(httpx.Response(status, json={"error": {"message": "no"}}))
    (event,) = await run(runner_for(handler))
    assert isinstance(event, Error) and len(times) == 1


@pytest.mark.parametrize(("exc", "code", "attempts"), [
    (httpx.ConnectTimeout("timed out"), "CONNECT_TIMEOUT", 1),
    (httpx.ConnectError("refused"), "CONNECTION_FAILED", 2),
    (httpx.RemoteProtocolError("Server disconnected without sending a response."),
     "CONNECTION_FAILED", 2),
    (httpx.ReadError("reset"), "CONNECTION_FAILED", 2),
    (httpx.UnsupportedProtocol("bad scheme"), "REQUEST_FAILED", 1),
])
async def test_transport_failures(exc: httpx.HTTPError, code: str, attempts: int,
                                  autojump_clock: trio.testing.MockClock) -> None:
    calls: list[float] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        calls.append(trio.current_time())
        raise exc

    events = await run(runner_for(handler))
    assert isinstance(events[-1], Error) and events[-1].code == code
    assert events[-1].category == ("unknown" if code == "REQUEST_FAILED" else "unavailable")
    assert len(calls) == attempts
    assert [type(e) for e in events] == [Retrying] * (attempts - 1) + [Error]


@pytest.mark.parametrize(("silence_s", "attempts"), [(5.0, 1), (1.0, 1), (0.5, 2)])
async def test_a_route_that_stayed_silent_is_not_retried(
        silence_s: float, attempts: int, autojump_clock: trio.testing.MockClock) -> None:
    calls: list[float] = []

    async def handler(req: httpx.Request) -> httpx.Response:
        calls.append(trio.current_time())
        await trio.sleep(silence_s)  # the upstream holds the request, then hangs up
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    events = await run(runner_for(handler))
    assert isinstance(events[-1], Error) and events[-1].code == "CONNECTION_FAILED"
    assert len(calls) == attempts  # silent for 1 s (silent_after_s) or more: left at once
    assert [type(e) for e in events] == [Retrying] * (attempts - 1) + [Error]


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", ""])
async def test_an_sse_body_under_another_content_type_is_read(content_type: str) -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        headers = {"content-type": content_type} if content_type else {}
        return httpx.Response(200, content=OK_STREAM, headers=headers)

    assert await run(runner_for(handler)) == [
        Start(model="served-1"), TextDelta(text="Hi"), Usage(prompt_tokens=3, completion_tokens=1),
        Stop(finish_reason="stop")]


async def test_an_echoed_key_never_reaches_the_error_message() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {
            "message": "Incorrect API key provided: sk-live-123", "code": "invalid_api_key"}})

    (event,) = await run(runner_for(handler, api_key="sk-live-123\n"))
    assert isinstance(event, Error) and event.category == "auth"
    assert "sk-live-123" not in event.message


async def test_an_unusable_key_is_a_request_failure_without_the_key() -> None:
    async def handler(req: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    (event,) = await run(runner_for(handler, api_key="sk-ünïcode"))
    assert isinstance(event, Error) and event.code == "REQUEST_FAILED"
    assert "ünïcode" not in event.message
