"""codex on its app-server under trio's MockClock: the codex runner with
:class:`~olp.providers.codex._app_units.AppServers` and a spawner whose every process is the
scripted fake of ``fake_codex_app_server``. Exact virtual times; every server ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import trio
import trio.testing
from fake_codex_app_server import AppSpawner, Script

from olp.actors import CliConfig, CliRunner, LoginPass, SessionPolicy
from olp.actors._warm_units import WarmStartError
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Message,
    QuotaReport,
    Reasoning,
    ReasoningDelta,
    Start,
    Stop,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from olp.providers.codex import ADAPTER
from olp.providers.codex._app_units import AppServers
from olp.providers.codex._invocation import TOOLS_OFF
from olp.store import AsyncSessionStore, Database, SessionStore, StoredSession

MODEL = "gpt-5.5"
T = TypeVar("T")
START = 0.7  # the fake's initialize
DELAY = 0.25  # the fake's pace per delta


def asked(text: str, **fields: object) -> ChatRequest:
    return ChatRequest(model=MODEL, messages=(
        Message(role="system", content=(TextPart(text="Be terse."),)),
        Message(role="user", content=(TextPart(text=text),))), **fields)  # type: ignore[arg-type]


def make_runner(tmp_path: Path, spawner: AppSpawner, **servers: float) -> CliRunner:
    home = tmp_path / "realhome"
    home.mkdir(exist_ok=True)
    return CliRunner(ADAPTER, spawner,  # type: ignore[arg-type]
                     CliConfig(binary="/opt/codex/bin/codex", env={"OPENAI_API_KEY": "k"},
                               real_home=home, proxy_env={"PATH": "/usr/bin"}),
                     threads=AppServers(**servers))  # type: ignore[arg-type]


class Timed:
    """An emit that keeps each event with its virtual time since ``t0``."""

    def __init__(self) -> None:
        self.t0 = trio.current_time()
        self.events: list[tuple[float, Event]] = []

    async def __call__(self, event: Event) -> None:
        self.events.append((round(trio.current_time() - self.t0, 6), event))

    def of(self, kind: type) -> list[tuple[float, Event]]:
        return [(t, e) for t, e in self.events if isinstance(e, kind)]


async def answer(runner: CliRunner, request: ChatRequest) -> Timed:
    timed = Timed()
    await runner.run(request, MODEL, timed)
    return timed


async def serving(nursery: trio.Nursery, runner: CliRunner) -> AppServers:
    assert isinstance(runner.threads, AppServers)
    await nursery.start(runner.threads.serve)
    return runner.threads


async def test_deltas_stream_as_they_come_and_one_server_answers_in_fresh_threads(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner()
    runner = make_runner(tmp_path, spawner)
    servers = await serving(nursery, runner)
    first = await answer(runner, asked("one"))
    assert [(t, e.text) for t, e in first.of(TextDelta)] == [  # type: ignore[attr-defined]
        (START + DELAY, "Hello"), (START + 2 * DELAY, " from"), (START + 3 * DELAY, " codex.")]
    assert [e for _, e in first.of(Usage)] == [Usage(prompt_tokens=25, completion_tokens=7,
                                                     cached_tokens=5, reasoning_tokens=2)]
    assert [e for _, e in first.of(QuotaReport)] == [
        QuotaReport(window="five_hour", status="allowed", utilization=0.42, resets_at=1000),
        QuotaReport(window="seven_day", status="allowed", utilization=0.13, resets_at=2000)]
    assert isinstance(first.events[-1][1], Stop)
    second = await answer(runner, asked("two"))  # the server is up: no start-up this time
    assert [t for t, _ in second.of(TextDelta)] == [DELAY, 2 * DELAY, 3 * DELAY]
    [spec] = spawner.specs
    assert spec.argv[:2] == ["/opt/codex/bin/codex", "app-server"] and spec.stdin is None
    assert all(flag in spec.argv for flag in TOOLS_OFF)
    assert spec.env["OPENAI_API_KEY"] == "k"
    fake = spawner.fakes[0]
    starts = [m["params"] for m in fake.received if m.get("method") == "thread/start"]
    assert [(p["model"], p["ephemeral"], p["approvalPolicy"], p["sandbox"]) for p in starts] \
        == [(MODEL, True, "never", "read-only")] * 2
    assert starts[0]["cwd"] != starts[1]["cwd"]  # a fresh directory per thread
    turns = [m["params"] for m in fake.received if m.get("method") == "turn/start"]
    text = turns[1]["input"][0]["text"]
    assert text.startswith("System instructions:\nBe terse.") and "two" in text
    assert "one" not in text
    await trio.sleep(0.1)
    assert fake.threads == set()  # both threads unsubscribed
    stats = servers.statistics()
    assert (stats.running, stats.threads, stats.started, stats.served) == (True, 0, 1, 2)


async def test_reasoning_effort_summary_and_schema_ride_on_the_turn(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(reasoning=("Thinking", " hard"), deltas=('{"a": 1}',))])
    runner = make_runner(tmp_path, spawner)
    await serving(nursery, runner)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    timed = await answer(runner, asked("json please", reasoning=Reasoning(
        effort="high", show=True), response_format={
            "type": "json_schema", "json_schema": {"name": "x", "strict": True,
                                                   "schema": schema}}))
    assert "".join(e.text for _, e in timed.of(ReasoningDelta)) == \
        "Thinking\n\n hard"  # type: ignore[attr-defined]
    [turn] = [m["params"] for m in spawner.fakes[0].received if m.get("method") == "turn/start"]
    assert (turn["effort"], turn["summary"], turn["outputSchema"]) == ("high", "auto", schema)


async def test_the_request_s_tools_are_the_thread_s_and_its_calls_end_the_turn(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(deltas=("Checking.",), calls=("Paris", "Tokyo"))])
    runner = make_runner(tmp_path, spawner)
    await serving(nursery, runner)
    tool = ToolSpec(name="get_weather", description="Weather.",
                    parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    timed = await answer(runner, asked("weather?", tools=(tool,)))
    calls = [e for _, e in timed.of(ToolCallDelta)]
    assert [(c.index, c.id, c.name) for c in calls if c.name] == [
        (0, "call_0", "get_weather"), (1, "call_1", "get_weather")]
    assert "".join(c.arguments for c in calls if c.index == 1) == '{"city": "Tokyo"}'
    end = timed.events[-1]
    assert isinstance(end[1], Stop) and end[1].finish_reason == "tool_calls"
    assert end[0] == START + 3 * DELAY  # as soon as the response is complete
    await trio.sleep(0.1)
    fake = spawner.fakes[0]
    [start] = [m["params"] for m in fake.received if m.get("method") == "thread/start"]
    assert start["dynamicTools"] == [{"type": "function", "name": "get_weather",
                                      "description": "Weather.",
                                      "inputSchema": tool.parameters}]
    assert start["experimentalRawEvents"] is True
    assert fake.methods()[-2:] == ["turn/interrupt", "thread/unsubscribe"]
    assert fake.answers == []  # codex's tool calls are never answered: no second request


async def test_a_server_that_dies_mid_turn_fails_it_and_the_next_request_restarts_one(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(stall=True)])
    runner = make_runner(tmp_path, spawner)
    servers = await serving(nursery, runner)
    async with trio.open_nursery() as inner:
        result: list[Timed] = []

        async def one() -> None:
            result.append(await answer(runner, asked("one")))

        inner.start_soon(one)
        await trio.sleep(START + 4 * DELAY)
        spawner.fakes[0].exit(-9)
    [timed] = result
    end = timed.events[-1]
    assert isinstance(end[1], Error) and end[1].code == "CLI_FAILED"
    assert end[0] == START + 4 * DELAY  # at once, not at a deadline
    again = await answer(runner, asked("two"))
    assert isinstance(again.events[-1][1], Stop)
    assert again.of(TextDelta)[0][0] == START + DELAY  # a fresh server started
    assert len(spawner.fakes) == 2 and spawner.alive == 1
    assert servers.statistics().started == 2


async def test_a_cancelled_job_interrupts_its_turn_and_leaves_no_thread(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(stall=True)])
    runner = make_runner(tmp_path, spawner)
    servers = await serving(nursery, runner)
    with trio.move_on_after(START + 2 * DELAY):  # the client went away mid-answer
        await answer(runner, asked("one"))
    await trio.sleep(0.1)
    fake = spawner.fakes[0]
    assert fake.methods()[-2:] == ["turn/interrupt", "thread/unsubscribe"], fake.methods()
    assert fake.threads == set() and servers.statistics().threads == 0
    assert fake.returncode is None  # the server stays up for the next request


async def test_a_new_login_token_retires_the_server_once_its_turns_are_done(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(deltas=("a", "b", "c", "d"))])
    runner = make_runner(tmp_path, spawner)
    servers = await serving(nursery, runner)
    async with trio.open_nursery() as inner:
        done: list[Timed] = []

        async def in_thread(generation: int, text: str) -> None:
            timed = Timed()
            async with servers.open(runner, asked(text), MODEL,
                                    LoginPass(generation=generation)) as unit:
                done.append(timed)
                end = await runner._answer_warm(asked(text), MODEL, unit, timed)
                assert end is not None
                await timed(end)

        inner.start_soon(in_thread, 1, "old")
        await trio.sleep(START + DELAY)
        servers.renew()  # the keeper took a new token
        inner.start_soon(in_thread, 2, "new")
        await trio.sleep(START)
        assert len(spawner.fakes) == 2 and spawner.alive == 2  # the old one drains
    assert [isinstance(t.events[-1][1], Stop) for t in done] == [True, True]
    await trio.sleep(0.1)
    assert spawner.fakes[0].returncode is not None and spawner.fakes[1].returncode is None
    assert servers.statistics().started == 2


async def test_a_server_is_replaced_after_its_threads_and_ends_when_idle(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner()
    runner = make_runner(tmp_path, spawner, idle_s=60.0, refresh_s=math.inf,
                         threads_per_server=2)
    servers = await serving(nursery, runner)
    for text in ("one", "two", "three"):
        await answer(runner, asked(text))
    await trio.sleep(0.1)
    assert len(spawner.fakes) == 2 and spawner.alive == 1
    t0 = trio.current_time()
    while spawner.alive:  # noqa: ASYNC110 - virtual time
        await trio.sleep(1)
    assert trio.current_time() - t0 == pytest.approx(60.0, abs=1.0)
    assert servers.statistics().running is False


async def test_an_idle_server_that_has_answered_is_replaced_by_a_fresh_one(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner()
    runner = make_runner(tmp_path, spawner, idle_s=600.0, refresh_s=30.0)
    servers = await serving(nursery, runner)
    await answer(runner, asked("one"))
    t0 = trio.current_time()
    while len(spawner.fakes) < 2:  # noqa: ASYNC110 - virtual time
        await trio.sleep(0.5)
    assert trio.current_time() - t0 == pytest.approx(30.0, abs=0.6)
    await trio.sleep(START + 0.1)
    assert spawner.fakes[0].returncode is not None and spawner.fakes[1].returncode is None
    assert servers.statistics().running  # fresh, never used: it waits for the next request
    second = await answer(runner, asked("two"))
    assert second.of(TextDelta)[0][0] == DELAY  # served at once by the fresh server
    assert len(spawner.fakes) == 2


async def test_codex_s_requests_to_the_client_are_refused_not_left_hanging(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner([Script(ask="item/commandExecution/requestApproval")])
    runner = make_runner(tmp_path, spawner)
    await serving(nursery, runner)
    timed = await answer(runner, asked("one"))
    assert isinstance(timed.events[-1][1], Stop)
    [reply] = spawner.fakes[0].answers
    assert reply["id"] == 900 and reply["error"]["code"] == -32601


async def test_a_server_that_cannot_start_backs_off(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    spawner = AppSpawner(fail=2)
    runner = make_runner(tmp_path, spawner)
    servers = await serving(nursery, runner)
    for _ in range(2):
        with pytest.raises(WarmStartError):
            async with servers.open(runner, asked("one"), MODEL, None):
                pass
    assert len(spawner.fakes) == 1  # the second attempt came within the back-off
    await trio.sleep(1.0)
    with pytest.raises(WarmStartError):
        async with servers.open(runner, asked("one"), MODEL, None):
            pass
    await trio.sleep(2.0)  # the back-off doubled
    async with servers.open(runner, asked("one"), MODEL, None) as unit:
        assert unit.process.running()
    assert len(spawner.fakes) == 3


# -- conversations kept in their threads (kept sessions on) ---------------------------------


class InlineStore(AsyncSessionStore):
    """The store in the Trio thread (a worker thread would let the MockClock jump)."""

    async def put(self, session: StoredSession, *, expire_before: float | None = None) -> bool:
        await trio.lowlevel.checkpoint()
        return self.sync.put(session, expire_before=expire_before)

    async def take(self, digest: str, *, key: str, provider: str,
                   newer_than: float) -> StoredSession | None:
        await trio.lowlevel.checkpoint()
        return self.sync.take(digest, key=key, provider=provider, newer_than=newer_than)

    async def holds(self, digest: str, *, key: str, provider: str, newer_than: float) -> bool:
        await trio.lowlevel.checkpoint()
        return self.sync.holds(digest, key=key, provider=provider, newer_than=newer_than)


async def inline(fn: Callable[[], T]) -> T:
    await trio.lowlevel.checkpoint()
    return fn()


def kept_runner(tmp_path: Path, db: Database, spawner: AppSpawner) -> CliRunner:
    home = tmp_path / "realhome"
    home.mkdir(exist_ok=True)
    policy = SessionPolicy(InlineStore(SessionStore(db)), ttl_s=600, clock=trio.current_time,
                           offload=inline)
    return CliRunner(ADAPTER, spawner,  # type: ignore[arg-type]
                     CliConfig(binary="/opt/codex/bin/codex", env={"OPENAI_API_KEY": "k"},
                               real_home=home, proxy_env={"PATH": "/usr/bin"},
                               sessions=policy),
                     threads=AppServers())


async def chat(runner: CliRunner, messages: list[Message], **fields: object) -> Timed:
    timed = Timed()
    request = ChatRequest(model=MODEL, messages=tuple(messages), **fields)  # type: ignore[arg-type]
    await runner.run(request, MODEL, timed, owner="1")
    return timed


def said(timed: Timed) -> str:
    return "".join(e.text for _, e in timed.of(TextDelta))  # type: ignore[attr-defined]


def user(text: str) -> Message:
    return Message(role="user", content=(TextPart(text=text),))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


async def test_a_conversation_continues_in_its_kept_thread(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path,
        db: Database) -> None:
    spawner = AppSpawner()
    runner = kept_runner(tmp_path, db, spawner)
    await serving(nursery, runner)
    system = Message(role="system", content=(TextPart(text="Be terse."),))
    history = [system, user("first")]
    first = await chat(runner, history)
    history += [Message(role="assistant", content=(TextPart(text=said(first)),)),
                user("second")]
    assert await runner.holds_session(ChatRequest(model=MODEL, messages=tuple(history)),
                                      MODEL, "1")
    second = await chat(runner, history)
    assert [e.session for _, e in first.of(Start)] == ["new"]  # type: ignore[attr-defined]
    assert [e.session for _, e in second.of(Start)] == ["resumed"]  # type: ignore[attr-defined]
    assert second.of(TextDelta)[0][0] == DELAY  # no thread/start: straight to the turn
    fake = spawner.fakes[0]
    [(thread, texts)] = fake.inputs.items()  # one thread, two turns
    assert "first" in texts[0] and texts[1] == "second"  # only the new turn, no system text
    assert fake.methods().count("thread/start") == 1
    # a different history (an edited answer) is not that conversation: a fresh thread
    history[2] = Message(role="assistant", content=(TextPart(text="something else"),))
    third = await chat(runner, history)
    assert [e.session for _, e in third.of(Start)] == ["new"]  # type: ignore[attr-defined]
    assert fake.methods().count("thread/start") == 2


async def test_a_tool_loop_goes_on_in_the_paused_turn_and_a_stale_one_is_interrupted(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path,
        db: Database) -> None:
    spawner = AppSpawner([Script(deltas=(), calls=("Paris", "Tokyo"), then=("Both sunny.",)),
                          Script(deltas=(), calls=("Oslo",))])
    runner = kept_runner(tmp_path, db, spawner)
    await serving(nursery, runner)
    tool = ToolSpec(name="get_weather", description="Weather.",
                    parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    ask = [user("weather in Paris and Tokyo?")]
    first = await chat(runner, ask, tools=(tool,))
    deltas = [e for _, e in first.of(ToolCallDelta)]
    calls = [ToolCall(id=d.id or "", name=d.name or "", arguments="".join(  # type: ignore
        a.arguments for a in deltas if a.index == d.index))  # type: ignore[attr-defined]
        for d in deltas if d.name]  # type: ignore[attr-defined]
    assert [c.id for c in calls] == ["call_0", "call_1"]
    history = [*ask, Message(role="assistant", tool_calls=tuple(calls)),
        Message(role="tool", tool_call_id="call_0", content=(TextPart(text="Sunny, Paris"),)),
        Message(role="tool", tool_call_id="call_1", content=(TextPart(text="Sunny, Tokyo"),))]
    second = await chat(runner, history, tools=(tool,))
    assert said(second) == "Both sunny."
    assert [e.session for _, e in second.of(Start)] == ["resumed"]  # type: ignore[attr-defined]
    fake = spawner.fakes[0]
    answers = sorted((a["id"], a["result"]["contentItems"][0]["text"]) for a in fake.answers)
    assert answers == [(800, "Sunny, Paris"), (801, "Sunny, Tokyo")]
    assert fake.methods().count("turn/start") == 1  # codex's own turn went on
    # a kept turn paused on a call whose result never comes: a new question starts afresh
    # and the paused turn is interrupted, never left waiting
    oslo = [user("weather in Oslo?")]
    asked = await chat(runner, oslo, tools=(tool,))
    [call] = [d for _, d in asked.of(ToolCallDelta) if d.name]  # type: ignore[attr-defined]
    called = Message(role="assistant", tool_calls=(ToolCall(
        id=call.id or "", name="get_weather", arguments='{"city": "Oslo"}'),))  # type: ignore
    assert fake.methods().count("turn/interrupt") == 0  # kept, paused on the call
    later = await chat(runner, [*oslo, called, user("never mind")], tools=(tool,))
    assert [e.session for _, e in later.of(Start)] == ["new"]  # type: ignore[attr-defined]
    await trio.sleep(0.1)
    assert fake.methods().count("turn/interrupt") == 1


async def test_kept_threads_end_after_the_session_ttl(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path,
        db: Database) -> None:
    spawner = AppSpawner()
    runner = kept_runner(tmp_path, db, spawner)
    servers = await serving(nursery, runner)
    first = await chat(runner, [user("first")])
    history = [user("first"), Message(role="assistant", content=(TextPart(text=said(first)),)),
               user("second")]
    request = ChatRequest(model=MODEL, messages=tuple(history))
    await trio.sleep(599)
    assert servers.holds(request, f"1|openai|{MODEL}")
    await trio.sleep(2)
    assert not servers.holds(request, f"1|openai|{MODEL}")
    second = await chat(runner, history)
    assert [e.session for _, e in second.of(Start)] == ["new"]  # type: ignore[attr-defined]


async def test_a_continued_thread_that_fails_before_content_is_answered_afresh(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path,
        db: Database) -> None:
    spawner = AppSpawner([Script(), Script(deltas=(), status="failed",
                                           error={"message": "something odd happened"})])
    runner = kept_runner(tmp_path, db, spawner)
    await serving(nursery, runner)
    first = await chat(runner, [user("first")])
    second = await chat(runner, [user("first"), Message(
        role="assistant", content=(TextPart(text=said(first)),)), user("second")])
    assert said(second) == "Hello from codex." and isinstance(second.events[-1][1], Stop)
    assert [e.session for _, e in second.of(Start)] == [  # type: ignore[attr-defined]
        "resumed", "evicted:resume_failed"]
    fake = spawner.fakes[0]
    assert fake.methods().count("thread/start") == 2  # the replay: a fresh thread
    [fresh] = [texts for texts in fake.inputs.values() if len(texts) == 1 and
               "second" in texts[0]]
    assert "first" in fresh[0]  # with the whole history
