"""Tool calls through the provider actor and runner under MockClock: the terminal
``tool_calls`` Stop ends the spawn at once (the CLI would wait for ``tools/call`` forever)."""

from __future__ import annotations

import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Ticket, Timeouts
from olp.actors.testing import FakeSpawner, Hang, JsonLinesAdapter, Line, event_line
from olp.ir import ChatRequest, Error, Event, Stop, TextDelta, ToolCallDelta, ToolSpec, Usage

TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=30)
BASE = user_says("weather in Paris?", model="m")
REQ = ChatRequest(model="m", messages=BASE.messages, tools=(ToolSpec(name="get_weather"),))


def line(delay: float, event: Event) -> Line:
    return Line(delay, event_line(event))


async def drain(ticket: Ticket) -> list[tuple[float, Event]]:
    return [(trio.current_time(), event) async for event in ticket.events]


async def test_tool_calls_stop_ends_the_spawn_at_once(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    spawner = FakeSpawner(lambda spec: [
        line(1, TextDelta(text="Checking.")),
        line(0.5, ToolCallDelta(index=1, id="toolu_1", name="get_weather")),
        line(0.25, ToolCallDelta(index=1, arguments='{"city":"Paris"}')),
        line(0.25, Usage(prompt_tokens=9, completion_tokens=4)),
        line(0.25, Stop(finish_reason="tool_calls")),
        Hang()])  # as claude does: it waits for the tools/call answer
    runner = CliRunner(JsonLinesAdapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    events = await drain(await actor.submit(REQ, "m"))
    assert events == [
        (1, TextDelta(text="Checking.")), (2, Usage(prompt_tokens=9, completion_tokens=4)),
        (2.25, ToolCallDelta(index=0, id="toolu_1", name="get_weather")),
        (2.25, ToolCallDelta(index=0, arguments='{"city":"Paris"}')),
        (2.25, Stop(finish_reason="tool_calls"))]
    run = spawner.runs[0]
    assert run.killed and run.ended_at == 2.25
    assert not run.spec.cwd.exists() and not run.spec.cwd.parent.exists()  # job dir removed
    assert spawner.alive == 0 and actor.limiter.statistics().borrowed_tokens == 0


async def test_unmet_forced_choice_fails_the_job_when_the_message_ends(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    spawner = FakeSpawner(lambda spec: [line(1, TextDelta(text="prose")),
                                        line(1, Stop()), Hang()])
    runner = CliRunner(JsonLinesAdapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    forced = ChatRequest(model="m", messages=REQ.messages, tools=REQ.tools,
                         tool_choice="required")
    events = await drain(await actor.submit(forced, "m"))
    assert len(events) == 1 and events[0][0] == 2
    error = events[0][1]
    assert isinstance(error, Error) and error.code == "TOOL_CHOICE_UNMET"
    assert spawner.runs[0].ended_at == 2 and spawner.alive == 0


async def test_held_text_does_not_count_as_first_output(autojump_clock: trio.testing.MockClock,
                                                        nursery: trio.Nursery) -> None:
    # Under a forced choice the text is held back, so the first-output deadline still runs.
    spawner = FakeSpawner(lambda spec: [line(1, TextDelta(text="thinking out loud")), Hang()])
    runner = CliRunner(JsonLinesAdapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}))
    actor = ProviderActor("fake", runner, max_concurrent=1)
    await nursery.start(actor.run)
    forced = ChatRequest(model="m", messages=REQ.messages, tools=REQ.tools,
                         tool_choice="required")
    events = await drain(await actor.submit(forced, "m"))
    assert [(t, type(e).__name__) for t, e in events] == [(10, "Error")]
    assert isinstance(events[0][1], Error) and events[0][1].code == "FIRST_OUTPUT_TIMEOUT"
