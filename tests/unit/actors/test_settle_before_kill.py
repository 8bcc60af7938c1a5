"""At a tool call, a CLI that writes its session late (claude: ~50 ms after the answer) is
given up to its kit's ``settle_s`` to write the call before OLP's kill, so the session can
take the client's results next turn (issue #25). MockClock: the kill comes as soon as the
session holds the call, or at ``settle_s``; a CLI that needs no wait is killed at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import trio
import trio.testing

from olp.actors import CliConfig, CliRunner, SessionPolicy, Timeouts
from olp.actors.testing import FakeSpawner, Hang, JsonLinesAdapter, Line, event_line
from olp.ir import (
    ChatRequest,
    Event,
    Message,
    Stop,
    TextPart,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from olp.store import AsyncSessionStore, Database, SessionStore

CALL = ToolCallDelta(index=0, id="c1", name="read", arguments="{}")


class LateKit:
    """A CLI whose session holds the call once ``ready`` is set."""

    system_in_prompt = False
    takes_tool_results = True
    continue_prompt = "Continue."

    def __init__(self, settle_s: float) -> None:
        self.settle_s = settle_s
        self.ready = False

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        return [*argv, "--resume", session_id]

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        return ("sid", {"s.jsonl": b"call\n"}) if self.ready else None

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        return [c.name for c in answer.tool_calls] == ["read"]

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        return dict(files)

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        return None


class LateAdapter(JsonLinesAdapter):
    def __init__(self, kit: LateKit) -> None:
        super().__init__()
        self.sessions = kit


T = TypeVar("T")


async def inline(fn: Callable[[], T]) -> T:
    """A session file read in the Trio thread: a worker thread would let the MockClock jump."""
    await trio.lowlevel.checkpoint()
    return fn()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


async def call_turn(db: Database, kit: LateKit, *, ready_at: float | None) -> FakeSpawner:
    """One turn answered with a tool call by a CLI that then waits (on ``tools/call``)."""
    spawner = FakeSpawner(lambda spec: [Line(0, event_line(CALL)),
                                        Line(0, event_line(Stop(finish_reason="tool_calls"))),
                                        Hang()])
    policy = SessionPolicy(AsyncSessionStore(SessionStore(db)), ttl_s=600, clock=lambda: 1.0,
                           offload=inline)
    runner = CliRunner(LateAdapter(kit), spawner, CliConfig(
        binary="fake", timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={}, sessions=policy))
    request = ChatRequest(model="m", tools=(ToolSpec(name="read"),), messages=(
        Message(role="user", content=(TextPart(text="go"),)),))
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    async def write_late() -> None:
        assert ready_at is not None
        await trio.sleep(ready_at)
        kit.ready = True

    async with trio.open_nursery() as nursery:
        if ready_at is not None:
            nursery.start_soon(write_late)
        # no fail_after: keeping the session waits on worker threads, and a deadline would
        # let the MockClock jump to it meanwhile
        await runner.run(request, "m", emit, owner="1")
    assert isinstance(events[-1], Stop) and events[-1].finish_reason == "tool_calls"
    assert spawner.alive == 0 and spawner.runs[0].killed_at_once
    return spawner


async def test_the_kill_waits_for_the_session_to_hold_the_call(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    spawner = await call_turn(db, LateKit(settle_s=2.0), ready_at=0.5)
    ended = spawner.runs[0].ended_at
    assert ended is not None and 0.5 <= ended <= 0.55  # the next poll after it was written
    assert SessionStore(db).count() == (1, len(b"call\n"))  # kept for the results


async def test_the_wait_is_bounded_and_nothing_half_written_is_kept(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    spawner = await call_turn(db, LateKit(settle_s=2.0), ready_at=None)
    assert spawner.runs[0].ended_at == pytest.approx(2.0)
    assert SessionStore(db).count() == (0, 0)


async def test_a_cli_that_needs_no_wait_is_killed_at_once(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    kit = LateKit(settle_s=0.0)
    kit.ready = True
    spawner = await call_turn(db, kit, ready_at=None)
    assert spawner.runs[0].ended_at == 0.0
    assert SessionStore(db).count() == (1, len(b"call\n"))
