"""Kept CLI sessions under the MockClock (issue #25): a session idle for ``session_ttl_s`` is
evicted at exactly that virtual time, and two concurrent turns of one conversation run side
by side (one resumes, one forks afresh) with no wait between them. The store runs in the
Trio thread here: a worker thread would let the clock jump to the runner's deadlines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from test_kept_sessions import ANSWER, SessionAdapter, answer, argv, state, turn
from test_settle_before_kill import inline

from olp.actors import CliConfig, CliRunner, SessionPolicy, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Line, Step, event_line
from olp.ir import ChatRequest, Event, TextDelta
from olp.store import AsyncSessionStore, Database, SessionStore, StoredSession


class InlineStore(AsyncSessionStore):
    """:class:`AsyncSessionStore` without worker threads (each call a checkpoint, then the
    SQLite call in the Trio thread)."""

    async def put(self, session: StoredSession, *, expire_before: float | None = None) -> bool:
        await trio.lowlevel.checkpoint()
        return self.sync.put(session, expire_before=expire_before)

    async def take(self, digest: str, *, key: str, provider: str,
                   newer_than: float) -> StoredSession | None:
        await trio.lowlevel.checkpoint()
        return self.sync.take(digest, key=key, provider=provider, newer_than=newer_than)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


def runner(db: Database, script: list[list[Step]]) -> tuple[CliRunner, FakeSpawner]:
    plays = iter(script)
    spawner = FakeSpawner(lambda spec: next(plays))
    policy = SessionPolicy(InlineStore(SessionStore(db)), ttl_s=600, clock=trio.current_time,
                           offload=inline)
    return CliRunner(SessionAdapter(), spawner, CliConfig(
        binary="fake", timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={}, sessions=policy)), spawner


async def run(r: CliRunner, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await r.run(request, "m", emit, owner="1")
    return events


async def test_a_session_idle_for_its_ttl_is_evicted_at_that_time(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    r, spawner = runner(db, [answer()] * 4)
    await run(r, turn("one"))  # kept at t=0
    await trio.sleep(599.0)
    assert state(await run(r, turn("one", "two"))) == "resumed"  # kept again at t=599
    assert trio.current_time() == 599.0
    await trio.sleep(600.0)  # t=1199: idle exactly session_ttl_s
    assert state(await run(r, turn("one", "two", "three"))) == "new"
    assert SessionStore(db).count()[0] == 1  # the new turn's own session
    assert ["--resume" in argv(x.spec) for x in spawner.runs] == [False, True, False]
    assert spawner.alive == 0


async def test_concurrent_turns_of_one_conversation_run_side_by_side(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    slow: list[Step] = [Line(3.0, event_line(TextDelta(text=ANSWER))), Exit(0, 0)]
    r, spawner = runner(db, [answer(), slow, slow])
    await run(r, turn("one"))
    started = trio.current_time()
    ended: list[tuple[str | None, float]] = []

    async def second() -> None:
        events = await run(r, turn("one", "two"))
        ended.append((state(events), trio.current_time() - started))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        nursery.start_soon(second)
    # neither waited for the other: both answered after exactly the CLI's 3 s
    assert sorted(ended, key=str) == [("new", 3.0), ("resumed", 3.0)]
    assert [("--resume" in argv(x.spec)) for x in spawner.runs[1:]].count(True) == 1
    assert spawner.alive == 0
    # both kept their answer's session under the same continuation: the later one wins
    assert SessionStore(db).count()[0] == 1
