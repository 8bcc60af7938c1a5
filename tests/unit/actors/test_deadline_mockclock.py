"""The deadline clock shared by the CLI and HTTP runners, under trio's MockClock.

The clock is driven directly first (exact virtual times of every expiry and the error it
builds), then through each runner, whose timeout messages are part of what clients see.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, DeadlineClock, Timeouts, TimeoutWording
from olp.actors.testing import FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.failures import Code
from olp.ir import Error, Event, Start, TextDelta
from olp.providers.openai_compat import HttpConfig, OpenAICompatRunner, RetryPolicy

TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=30)


async def expire(clock: DeadlineClock) -> tuple[float, Error]:
    """Wait on the clock's current deadline with nothing happening; when and what expired."""
    deadline = clock.deadline
    with trio.move_on_at(deadline):
        await trio.sleep_forever()
    return trio.current_time(), clock.timeout_error(deadline)


# -- the clock itself --------------------------------------------------------------------------


async def test_deadlines_are_taken_from_the_start(autojump_clock: trio.testing.MockClock) -> None:
    await trio.sleep(2)
    clock = DeadlineClock(TIMEOUTS)
    assert clock.start == 2
    assert clock.first_output_deadline == 12 and clock.total_deadline == 32
    assert clock.deadline == 12 and not clock.content_seen
    assert DeadlineClock(TIMEOUTS, start=100).deadline == 110


async def test_first_output_expiry(autojump_clock: trio.testing.MockClock) -> None:
    clock = DeadlineClock(TIMEOUTS)
    await trio.sleep(3)
    clock.activity()  # no content yet: the first-output deadline stays
    at, err = await expire(clock)
    assert at == 10
    assert err.code == Code.FIRST_OUTPUT_TIMEOUT == "FIRST_OUTPUT_TIMEOUT"
    assert err.category == "unavailable"
    assert err.message == "no output within 10 s"


async def test_idle_expiry_after_content(autojump_clock: trio.testing.MockClock) -> None:
    clock = DeadlineClock(TIMEOUTS)
    await trio.sleep(2)
    clock.content()
    assert clock.content_seen and clock.deadline == 7
    await trio.sleep(4)
    clock.activity()  # any sign of life after content restarts the idle deadline
    assert clock.deadline == 11
    at, err = await expire(clock)
    assert at == 11
    assert err.code == Code.IDLE_TIMEOUT == "IDLE_TIMEOUT"
    assert err.category == "unavailable"
    assert err.message == "went silent for 5 s mid-answer"


async def test_total_caps_the_idle_deadline(autojump_clock: trio.testing.MockClock) -> None:
    clock = DeadlineClock(TIMEOUTS)
    for _ in range(7):  # content every 4 s: 4, 8, ..., 28
        await trio.sleep(4)
        clock.content()
    assert clock.deadline == 30  # not 28 + 5
    at, err = await expire(clock)
    assert at == 30
    assert err.code == Code.TOTAL_TIMEOUT == "TOTAL_TIMEOUT"
    assert err.category == "unavailable"
    assert err.message == "no complete answer within 30 s"


async def test_total_caps_the_first_output_deadline(
        autojump_clock: trio.testing.MockClock) -> None:
    clock = DeadlineClock(Timeouts(first_output_s=50, idle_s=5, total_s=30))
    assert clock.first_output_deadline == clock.total_deadline == 30
    at, err = await expire(clock)
    assert at == 30
    assert err.code == Code.TOTAL_TIMEOUT and err.category == "unavailable"


async def test_an_earlier_deadline_of_the_caller_is_first_output_or_idle(
        autojump_clock: trio.testing.MockClock) -> None:
    # e.g. the HTTP runner's headers deadline: classified by the clock's state.
    clock = DeadlineClock(TIMEOUTS)
    assert clock.expired(4) is Code.FIRST_OUTPUT_TIMEOUT
    assert clock.expired(30) is Code.TOTAL_TIMEOUT
    clock.content()
    assert clock.expired(4) is Code.IDLE_TIMEOUT
    assert clock.expired(31) is Code.TOTAL_TIMEOUT


def test_wording_and_prefix() -> None:
    wording = TimeoutWording(first_output="nothing in {first_output_s:g} s",
                             idle="quiet for {idle_s:g} s", total="over {total_s:g} s",
                             prefix="up: ")
    clock = DeadlineClock(Timeouts(first_output_s=1.5, idle_s=2, total_s=3), wording=wording,
                          start=0)
    assert clock.timeout_error(1.5).message == "up: nothing in 1.5 s"
    assert clock.timeout_error(3).message == "up: over 3 s"
    clock.content_seen = True
    assert clock.timeout_error(2).message == "up: quiet for 2 s"


# -- through the CLI runner --------------------------------------------------------------------


async def run_cli(script: Sequence[Step]) -> list[tuple[float, Event]]:
    runner = CliRunner(JsonLinesAdapter(), FakeSpawner(lambda spec: script),
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    out: list[tuple[float, Event]] = []

    async def emit(event: Event) -> None:
        out.append((trio.current_time(), event))

    await runner.run(user_says("hi", model="m"), "m", emit)
    return out


def text(delay: float, t: str) -> Line:
    return Line(delay, event_line(TextDelta(text=t)))


@pytest.mark.parametrize(("script", "at", "code", "message"), [
    ([Line(1, event_line(Start(model="m"))), Hang()], 10, "FIRST_OUTPUT_TIMEOUT",
     "the CLI produced no output within 10 s"),
    # a non-content line after content restarts the idle deadline too
    ([text(2, "a"), Line(3, event_line(Start(model="m"))), Hang()], 10, "IDLE_TIMEOUT",
     "the CLI went silent for 5 s mid-answer"),
    ([text(4, f"{i}") for i in range(100)], 30, "TOTAL_TIMEOUT",
     "the CLI gave no complete answer within 30 s"),
])
async def test_cli_runner_timeouts(script: list[Step], at: float, code: str, message: str,
                                   autojump_clock: trio.testing.MockClock) -> None:
    events = await run_cli(script)
    when, err = events[-1]
    assert when == at
    assert err == Error(code=code, category="unavailable", message=message)


# -- through the HTTP runner -------------------------------------------------------------------


class Slow(httpx.AsyncByteStream):
    """A response body that sends each chunk after its delay (``math.inf``: hang)."""

    def __init__(self, steps: Sequence[tuple[float, bytes]]) -> None:
        self._steps = list(steps)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if not self._steps:
            raise StopAsyncIteration
        delay, data = self._steps.pop(0)
        await trio.sleep(delay)
        return data


def delta(content: str | None) -> bytes:
    """One SSE chunk; ``None``: a role-only chunk, which is not content."""
    d = {} if content is None else {"content": content}
    payload = {"model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def run_http(steps: Sequence[tuple[float, bytes]], *, headers_after: float = 0.0,
                   first_byte_s: float = 60.0) -> list[tuple[float, Event]]:
    async def handler(request: httpx.Request) -> httpx.Response:
        await trio.sleep(headers_after)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Slow(steps))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    runner = OpenAICompatRunner(
        HttpConfig(base_url="https://up.example/v1/", name="up", timeouts=TIMEOUTS,
                   first_byte_s=first_byte_s, retry=RetryPolicy(random=lambda: 0.0)),
        client=client)
    out: list[tuple[float, Event]] = []

    async def emit(event: Event) -> None:
        out.append((trio.current_time(), event))

    try:
        await runner.run(user_says("hi", model="m"), "m", emit)
    finally:
        await client.aclose()
    return out


async def test_http_runner_first_output_timeout(autojump_clock: trio.testing.MockClock) -> None:
    # a role-only chunk is not content
    events = await run_http([(1, delta(None)), (math.inf, b"")])
    assert events[-1] == (10, Error(code="FIRST_OUTPUT_TIMEOUT", category="unavailable",
                                    message="up: no output within 10 s"))


async def test_http_runner_idle_timeout(autojump_clock: trio.testing.MockClock) -> None:
    events = await run_http([(2, delta("a")), (3, delta(None)), (math.inf, b"")])
    assert events[-1] == (10, Error(code="IDLE_TIMEOUT", category="unavailable",
                                    message="up: the stream went silent for 5 s"))


async def test_http_runner_total_timeout(autojump_clock: trio.testing.MockClock) -> None:
    events = await run_http([(4, delta(f"{i}")) for i in range(100)])
    assert events[-1] == (30, Error(code="TOTAL_TIMEOUT", category="unavailable",
                                    message="up: no complete answer within 30 s"))


async def test_http_runner_headers_timeout(autojump_clock: trio.testing.MockClock) -> None:
    events = await run_http([], headers_after=math.inf, first_byte_s=4)
    assert events[-1] == (4, Error(code="FIRST_BYTE_TIMEOUT", category="unavailable",
                                   message="up: no response headers within 4 s"))


async def test_http_runner_headers_wait_is_capped_by_first_output(
        autojump_clock: trio.testing.MockClock) -> None:
    events = await run_http([], headers_after=math.inf, first_byte_s=60)
    assert events[-1] == (10, Error(code="FIRST_OUTPUT_TIMEOUT", category="unavailable",
                                    message="up: no output within 10 s"))
