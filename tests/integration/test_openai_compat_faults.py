"""The HTTP fault tier: ``ProviderActor`` + ``OpenAICompatRunner`` against the fault-injecting
mock upstream over real loopback sockets, on the real clock (short deadlines; every test has
a ``trio.fail_after`` hang guard). Each test asserts the IR events and how many requests the
upstream saw; the fixture's teardown asserts that no connection, job slot or async generator
was left behind.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing
from mock_openai_upstream import DEFAULT_DELTAS, PROMPT_TOKENS, MockOpenAI, serve_mock
from sample_requests import user_says

from olp.actors import ProviderActor, Timeouts
from olp.failures import Code
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Retrying,
    Start,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from olp.providers.openai_compat import HttpConfig, OpenAICompatRunner, RetryPolicy

GUARD_S = 10
KEY = "sk-test-not-a-real-key"
REQ = user_says("hi", model="alias")
MODEL = "gpt-mock"
SERVED = f"{MODEL}-2025-01-01"
ANSWER = [TextDelta(text=t) for t in DEFAULT_DELTAS]
USAGE = Usage(prompt_tokens=PROMPT_TOKENS, completion_tokens=len(DEFAULT_DELTAS))


def config(base_url: str, **overrides: Any) -> HttpConfig:
    settings: dict[str, Any] = dict(
        base_url=base_url, api_key=KEY, trust_env=False, connect_s=2.0, first_byte_s=0.5,
        timeouts=Timeouts(first_output_s=1.5, idle_s=0.5, total_s=5.0),
        retry=RetryPolicy(random=lambda: 0.0, backoff_base_s=0.02),
    )
    settings.update(overrides)
    return HttpConfig(**settings)


@dataclass
class Upstream:
    mock: MockOpenAI
    nursery: trio.Nursery
    actors: list[tuple[ProviderActor, OpenAICompatRunner]]

    async def actor(self, **overrides: Any) -> ProviderActor:
        runner = OpenAICompatRunner(config(overrides.pop("base_url", self.mock.base_url),
                                           **overrides))
        actor = ProviderActor("compat", runner, max_concurrent=4)
        await self.nursery.start(actor.run)
        self.actors.append((actor, runner))
        return actor

    async def run(self, request: ChatRequest = REQ, **overrides: Any) -> list[Event]:
        """One job through a fresh actor; all of its events."""
        actor = await self.actor(**overrides)
        ticket = await actor.submit(request, MODEL)
        events: list[Event] = []
        while True:
            try:
                events.append(await ticket.receive())
            except trio.EndOfChannel:
                return events


@pytest.fixture
async def upstream(nursery: trio.Nursery) -> AsyncIterator[Upstream]:
    mock = await nursery.start(serve_mock)
    up = Upstream(mock, nursery, [])
    try:
        yield up
    finally:
        with trio.fail_after(GUARD_S):
            for actor, runner in up.actors:
                await trio.testing.wait_all_tasks_blocked()
                assert actor.statistics().in_flight == 0, "a job slot leaked"
                await runner.aclose()
            await mock.wait_open_connections(0)  # every connection closed, none leaked
        gc.collect()  # an abandoned async generator would warn (an error) here


def only(events: list[Event], kind: type) -> list[Event]:
    return [e for e in events if isinstance(e, kind)]


def error_of(events: list[Event]) -> Error:
    last = events[-1]
    assert isinstance(last, Error), events
    assert not only(events[:-1], Error) and not only(events, Stop)
    return last


# --- success -------------------------------------------------------------------------------


async def test_served_model_and_usage_are_reported(upstream: Upstream) -> None:
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
        record = await upstream.mock.wait_for_outcome(1)
    assert events == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]
    assert upstream.mock.request_count == 1
    assert record["body"]["model"] == MODEL and record["body"]["stream"] is True
    assert record["body"]["stream_options"] == {"include_usage": True}
    assert record["headers"]["authorization"] == f"<redacted len={len('Bearer ' + KEY)}>"
    assert record["outcome"] == "completed"


async def test_connections_are_reused_between_jobs(upstream: Upstream) -> None:
    with trio.fail_after(GUARD_S):
        actor = await upstream.actor()
        for _ in range(3):
            ticket = await actor.submit(REQ, MODEL)
            while not isinstance(await ticket.receive(), Stop | Error):
                pass
    assert upstream.mock.request_count == 3 and upstream.mock.connections_total == 1


async def test_tool_calls_stream_as_deltas(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", tool_call=("get_weather", '{"city": "Paris"}'),
                               finish_reason="tool_calls")
    request = ChatRequest(model="alias", messages=REQ.messages,
                          tools=(ToolSpec(name="get_weather", parameters={"type": "object"}),),
                          tool_choice="auto")
    with trio.fail_after(GUARD_S):
        events = await upstream.run(request)
    assert only(events, ToolCallDelta) == [
        ToolCallDelta(index=0, id="call_mock1", name="get_weather", arguments=""),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDelta(index=0, arguments=' "Paris"}')]
    assert events[-1] == Stop(finish_reason="tool_calls")
    body = upstream.mock.requests[0]["body"]
    assert body["tools"][0]["function"]["name"] == "get_weather" and body["tool_choice"] == "auto"


async def test_crlf_and_keepalive_comments(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", crlf=True, keepalive=True)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]


async def test_malformed_event_is_skipped_and_the_answer_completes(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", malformed=True)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]
    assert upstream.mock.request_count == 1


async def test_no_done_after_finish_reason_is_success(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", done=False)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]


async def test_clean_eof_without_finish_after_content_ended_early(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", done=False, finish=False, usage=False)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert only(events, TextDelta) == ANSWER
    error = error_of(events)
    assert (error.code, error.category) == (Code.STREAM_ENDED_EARLY, "unavailable")
    assert "ended early" in error.message and upstream.mock.request_count == 1


# --- retried on the same hop ---------------------------------------------------------------


async def test_429_with_retry_after_once_is_retried(upstream: Upstream) -> None:
    upstream.mock.push("rate_limit", retry_after=0.2)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events[0] == Retrying(attempt=1, category="rate_limited", max_retries=1,
                                 delay_s=0.2, status=429, bounded=True)
    assert events[1:] == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]
    assert upstream.mock.request_count == 2


async def test_429_persistent_is_rate_limited_with_retry_after(upstream: Upstream) -> None:
    upstream.mock.set_scenario("rate_limit", retry_after=0.1)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert [type(e) for e in events] == [Retrying, Error]
    error = error_of(events)
    assert (error.code, error.category, error.status) == ("RATE_LIMITED", "rate_limited", 429)
    assert error.retry_after_s == 0.1
    assert upstream.mock.request_count == 2


async def test_429_with_a_long_retry_after_is_not_retried(upstream: Upstream) -> None:
    upstream.mock.set_scenario("rate_limit", retry_after=60)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    error = error_of(events)
    assert (error.category, error.retry_after_s) == ("rate_limited", 60.0)
    assert len(events) == 1 and upstream.mock.request_count == 1


async def test_500_once_is_retried(upstream: Upstream) -> None:
    upstream.mock.push("server_error")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert isinstance(events[0], Retrying) and events[0].status == 500
    assert events[0].category == "unavailable"
    assert events[1:] == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]
    assert upstream.mock.request_count == 2


async def test_503_persistent_is_unavailable_after_one_retry(upstream: Upstream) -> None:
    upstream.mock.set_scenario("unavailable")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert [type(e) for e in events] == [Retrying, Error]
    error = error_of(events)
    assert (error.code, error.category, error.status) == ("UPSTREAM_5XX", "unavailable", 503)
    assert "overloaded" in error.message
    assert upstream.mock.request_count == 2


@pytest.mark.parametrize("fault", ["reset", "drop"])
async def test_connection_lost_before_headers_once_is_retried(upstream: Upstream,
                                                              fault: str) -> None:
    upstream.mock.push(fault)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events[0] == Retrying(attempt=1, category="unavailable", max_retries=1,
                                 delay_s=0.01, status=None, bounded=True)
    assert events[1:] == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]
    assert upstream.mock.request_count == 2
    assert upstream.mock.requests[0]["outcome"] == ("reset" if fault == "reset" else "dropped")


async def test_connection_reset_persistent_is_unavailable(upstream: Upstream) -> None:
    upstream.mock.set_scenario("reset")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert [type(e) for e in events] == [Retrying, Error]
    error = error_of(events)
    assert (error.code, error.category) == (Code.CONNECTION_FAILED, "unavailable")
    assert upstream.mock.request_count == 2


async def test_connection_refused_is_retried_once_then_unavailable(upstream: Upstream) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with trio.fail_after(GUARD_S):
        events = await upstream.run(base_url=f"http://127.0.0.1:{port}/v1")
    assert [type(e) for e in events] == [Retrying, Error]
    assert error_of(events).code == Code.CONNECTION_FAILED


# --- deadlines -----------------------------------------------------------------------------


async def test_no_response_at_all_is_a_first_byte_timeout(upstream: Upstream) -> None:
    upstream.mock.set_scenario("hang")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
        record = await upstream.mock.wait_for_outcome(1, "client_disconnected")
    error = error_of(events)
    assert (error.code, error.category) == (Code.FIRST_BYTE_TIMEOUT, "unavailable")
    assert len(events) == 1 and upstream.mock.request_count == 1
    assert record["status"] is None


async def test_slow_first_token_is_a_first_output_timeout(upstream: Upstream) -> None:
    # headers, the role chunk and keepalive comments arrive at once: none of them is content
    upstream.mock.set_scenario("slow_first", first_delay=5.0)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
        await upstream.mock.wait_for_outcome(1, "client_disconnected")
    assert events[0] == Start(model=SERVED)
    error = error_of(events)
    assert (error.code, error.category) == (Code.FIRST_OUTPUT_TIMEOUT, "unavailable")
    assert upstream.mock.request_count == 1


async def test_slow_first_token_within_the_deadline_is_fine(upstream: Upstream) -> None:
    upstream.mock.set_scenario("slow_first", first_delay=0.6, interval=0.1)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events == [Start(model=SERVED), *ANSWER, USAGE, Stop(finish_reason="stop")]


async def test_stream_stalled_with_the_connection_open_is_an_idle_timeout(
        upstream: Upstream) -> None:
    upstream.mock.set_scenario("stall", cut_after=2)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
        await upstream.mock.wait_for_outcome(1, "client_disconnected")
    assert only(events, TextDelta) == ANSWER[:2]
    error = error_of(events)
    assert (error.code, error.category) == (Code.IDLE_TIMEOUT, "unavailable")
    assert upstream.mock.request_count == 1


async def test_slow_steady_stream_hits_the_total_deadline(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", deltas=tuple(f" t{i}" for i in range(50)), delay=0.1)
    with trio.fail_after(GUARD_S):
        events = await upstream.run(timeouts=Timeouts(first_output_s=1.0, idle_s=0.5,
                                                      total_s=0.8))
        await upstream.mock.wait_for_outcome(1, "client_disconnected")
    assert only(events, TextDelta)
    assert error_of(events).code == Code.TOTAL_TIMEOUT


# --- failures after content are terminal -----------------------------------------------------


async def test_stream_cut_mid_answer_is_not_retried(upstream: Upstream) -> None:
    upstream.mock.set_scenario("cut", cut_after=2)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert events[:3] == [Start(model=SERVED), *ANSWER[:2]]
    error = error_of(events)
    assert (error.code, error.category) == (Code.STREAM_ENDED_EARLY, "unavailable")
    assert not only(events, Retrying) and upstream.mock.request_count == 1


async def test_in_stream_error_after_content(upstream: Upstream) -> None:
    upstream.mock.set_scenario("stream_error", cut_after=1, message="model crashed")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert only(events, TextDelta) == ANSWER[:1]
    error = error_of(events)
    assert (error.category, error.message) == ("unavailable", "model crashed")
    assert upstream.mock.request_count == 1


async def test_in_stream_server_error_before_content_is_not_retried(upstream: Upstream) -> None:
    # no status to go by: only the listed transient failures are retried
    upstream.mock.set_scenario("stream_error", cut_after=0, message="model crashed")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    assert not only(events, TextDelta) and error_of(events).code == "UPSTREAM_UNAVAILABLE"
    assert upstream.mock.request_count == 1


# --- never retried -------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "category", "code", "status"), [
    ("context_length", "context_length", "CONTEXT_LENGTH", 400),
    ("content_policy", "client_error", "CONTENT_POLICY", 400),
    ("insufficient_quota", "billing", "BILLING", 429),
    ("auth", "auth", "UPSTREAM_AUTH", 401),
])
async def test_terminal_upstream_errors(upstream: Upstream, scenario: str, category: str,
                                        code: str, status: int) -> None:
    upstream.mock.set_scenario(scenario, retry_after=1)  # a Retry-After changes nothing
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    error = error_of(events)
    assert (error.category, error.code, error.status) == (category, code, status)
    assert len(events) == 1 and upstream.mock.request_count == 1
    assert KEY not in error.message


async def test_usage_window_is_not_retried_and_carries_its_reset(upstream: Upstream) -> None:
    upstream.mock.set_scenario("usage_limit", retry_after=2)
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    error = error_of(events)
    assert (error.category, error.code, error.retry_after_s) == ("usage_window",
                                                                 "USAGE_WINDOW", 2.0)
    assert len(events) == 1 and upstream.mock.request_count == 1


async def test_bad_request_keeps_status_and_message(upstream: Upstream) -> None:
    upstream.mock.set_scenario("error", status=422, message="temperature: out of range")
    with trio.fail_after(GUARD_S):
        events = await upstream.run()
    error = error_of(events)
    assert (error.category, error.status, error.message) == (
        "client_error", 422, "temperature: out of range")


# --- cancellation --------------------------------------------------------------------------


async def test_abandoning_the_job_closes_the_stream_promptly(upstream: Upstream) -> None:
    upstream.mock.set_scenario("success", deltas=tuple(f" t{i}" for i in range(100)),
                               delay=0.05)
    with trio.fail_after(GUARD_S):
        actor = await upstream.actor()
        ticket = await actor.submit(REQ, MODEL)
        while not isinstance(await ticket.receive(), TextDelta):
            pass
        ticket.abandon()
        record = await upstream.mock.wait_for_outcome(1, "client_disconnected")
        # the aborted connection is closed, not pooled, while the client itself lives on
        await upstream.mock.wait_open_connections(0)
        await trio.testing.wait_all_tasks_blocked()
    assert record["outcome"] == "client_disconnected"
    assert actor.statistics().in_flight == 0


async def test_cancelling_while_waiting_for_headers(upstream: Upstream) -> None:
    upstream.mock.set_scenario("hang")
    with trio.fail_after(GUARD_S):
        actor = await upstream.actor(first_byte_s=30.0,
                                     timeouts=Timeouts(first_output_s=30.0, idle_s=30.0,
                                                       total_s=30.0))
        ticket = await actor.submit(REQ, MODEL)
        await upstream.mock.wait_for_requests(1)
        ticket.abandon()
        await upstream.mock.wait_for_outcome(1, "client_disconnected")
        await upstream.mock.wait_open_connections(0)
