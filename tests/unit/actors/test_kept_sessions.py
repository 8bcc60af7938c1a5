"""Kept CLI sessions in the runner (issue #25) with a scripted fake CLI and a real SQLite
store: a continued conversation resumes its own session with only the new turns; anything
else starts afresh; a failed resume is replayed once; nothing is kept from a cancelled turn,
an answer with tool calls, or for another key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import trio

from olp.actors import CliConfig, CliRunner, SessionPolicy, Timeouts
from olp.actors._process import SpawnSpec
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.ir import (
    ChatRequest,
    Error,
    Event,
    Message,
    Start,
    Stop,
    TextDelta,
    TextPart,
    ToolCallDelta,
    Usage,
)
from olp.store import AsyncSessionStore, Database, SessionStore

ANSWER = "Hello there."


class FakeKit:
    """Sessions of a fake CLI: each spawn "writes" one, numbered."""

    system_in_prompt = False
    takes_tool_results = False
    continue_prompt = "Continue."
    settle_s = 0.0

    def __init__(self) -> None:
        self.written_n = 0
        self.whole = True

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        return [*argv, "--keep"]

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        return [*argv, "--keep", "--resume", session_id]

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        self.written_n += 1
        return f"sid-{self.written_n}", {"s.jsonl": f"session {self.written_n}\n".encode()}

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        return self.whole and answer.text() == ANSWER

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        return None

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        return None


class SessionAdapter(JsonLinesAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.sessions = FakeKit()


def answer(text: str = ANSWER) -> list[Step]:
    return [Line(0, event_line(TextDelta(text=text))), Exit(0, 0)]


def user(text: str) -> Message:
    return Message(role="user", content=(TextPart(text=text),))


def turn(*texts: str) -> ChatRequest:
    """A conversation: user texts with the answer between them."""
    messages: list[Message] = [Message(role="system", content=(TextPart(text="Be brief."),))]
    for i, text in enumerate(texts):
        if i:
            messages.append(Message(role="assistant", content=(TextPart(text=ANSWER),)))
        messages.append(user(text))
    return ChatRequest(model="m", messages=tuple(messages))


@pytest.fixture
def db(tmp_path: Path) -> Database:
    with Database(tmp_path / "olp.db") as database:
        yield database


def runner(db: Database, script: list[list[Step]], *, now: list[float] | None = None,
           ) -> tuple[CliRunner, FakeSpawner]:
    plays = iter(script)
    spawner = FakeSpawner(lambda spec: next(plays))
    clock = (lambda: now[0]) if now is not None else (lambda: 1000.0)
    policy = SessionPolicy(AsyncSessionStore(SessionStore(db)), ttl_s=600, clock=clock)
    return CliRunner(SessionAdapter(), spawner, CliConfig(
        binary="fake", timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={}, sessions=policy)), spawner


async def run(r: CliRunner, request: ChatRequest, owner: str | None = "1") -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    with trio.fail_after(10):
        await r.run(request, "m", emit, owner=owner)
    return events


def state(events: list[Event]) -> str | None:
    states = [e.session for e in events if isinstance(e, Start) and e.session]
    return states[-1] if states else None


def argv(spec: SpawnSpec) -> list[str]:
    return list(spec.argv)


async def test_a_continued_conversation_resumes_with_only_the_new_turn(db: Database) -> None:
    r, spawner = runner(db, [answer(), answer(), answer()])
    first = await run(r, turn("one"))
    second = await run(r, turn("one", "two"))
    third = await run(r, turn("one", "two", "three"))
    assert [state(first), state(second), state(third)] == ["new", "resumed", "resumed"]
    assert argv(spawner.runs[0].spec)[-1] == "--keep"
    assert argv(spawner.runs[1].spec)[-2:] == ["--resume", "sid-1"]
    assert argv(spawner.runs[2].spec)[-2:] == ["--resume", "sid-2"]
    assert spawner.runs[0].spec.stdin == b"Be brief.\none"  # the test adapter's texts
    assert spawner.runs[1].spec.stdin == b"Be brief.\ntwo"  # system text + the new turn only
    assert SessionStore(db).count() == (1, len(b"session 3\n"))
    assert isinstance(third[-1], Stop) and spawner.alive == 0


async def test_another_key_a_changed_history_or_an_idle_session_start_afresh(
        db: Database) -> None:
    now = [1000.0]
    r, spawner = runner(db, [answer()] * 5, now=now)
    await run(r, turn("one"))
    assert state(await run(r, turn("one", "two"), owner="2")) == "new"  # never key 1's
    assert state(await run(r, turn("ONE", "two"))) == "new"  # an edited history
    assert state(await run(r, turn("one", "two"))) == "resumed"
    now[0] += 601  # idle past session_ttl_s
    assert state(await run(r, turn("one", "two", "three"))) == "new"
    assert all("--resume" not in argv(run_.spec) for i, run_ in enumerate(spawner.runs)
               if i != 3)


async def test_no_owner_no_sessions(db: Database) -> None:
    r, spawner = runner(db, [answer(), answer()])
    await run(r, turn("one"), owner=None)
    assert state(await run(r, turn("one", "two"), owner=None)) is None
    assert SessionStore(db).count() == (0, 0) and "--resume" not in argv(spawner.runs[1].spec)


async def test_a_failed_resume_is_replayed_once_as_a_new_session(db: Database) -> None:
    r, spawner = runner(db, [answer(), [Exit(0, 1, b"No conversation found")], answer(),
                             answer()])
    await run(r, turn("one"))
    events = await run(r, turn("one", "two"))
    # the resumed spawn failed before saying anything: the answer says what happened
    assert [e.session for e in events if isinstance(e, Start)] == ["evicted:resume_failed"]
    assert isinstance(events[-1], Stop)
    assert argv(spawner.runs[2].spec)[-1] == "--keep"  # afresh, the whole history
    assert b"one" in spawner.runs[2].spec.stdin
    assert state(await run(r, turn("one", "two", "three"))) == "resumed"  # from the replay


async def test_nothing_is_kept_from_a_cancelled_turn_or_a_tool_call(db: Database) -> None:
    call = ToolCallDelta(index=0, id="c1", name="read", arguments="{}")
    r, spawner = runner(db, [answer(), [Line(0, event_line(TextDelta(text="Hel"))), Hang()],
                             [Line(0, event_line(call)), Exit(0, 0)], answer()])
    await run(r, turn("one"))
    with trio.move_on_after(1):  # the client went away mid-answer
        await run(r, turn("one", "two"))
    assert SessionStore(db).count() == (0, 0)  # the resumed session was taken, none put back
    assert spawner.alive == 0
    await run(r, turn("one", "two"))  # answered with a tool call: nothing to resume
    assert SessionStore(db).count() == (0, 0)
    assert state(await run(r, turn("one", "two"))) == "new"


async def test_a_session_that_is_not_whole_is_not_kept(db: Database) -> None:
    r, _ = runner(db, [answer(), answer()])
    r.adapter.sessions.whole = False  # type: ignore[attr-defined]
    await run(r, turn("one"))
    assert state(await run(r, turn("one", "two"))) == "new"


async def test_two_concurrent_turns_of_one_conversation_never_share_a_session(
        db: Database) -> None:
    """The session is taken out while a turn runs: the second turn at the same time finds
    nothing and starts afresh (a fork, never two CLIs writing one session)."""
    slow = [Line(0.2, event_line(TextDelta(text=ANSWER))), Exit(0, 0)]
    r, spawner = runner(db, [answer(), slow, slow])
    await run(r, turn("one"))
    states: list[str | None] = []

    async def second() -> None:
        states.append(state(await run(r, turn("one", "two"))))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        nursery.start_soon(second)
    assert sorted(map(str, states)) == ["new", "resumed"]
    resumed = [x for x in spawner.runs[1:] if "--resume" in argv(x.spec)]
    assert len(resumed) == 1 and spawner.alive == 0


async def test_a_resumed_turn_that_hits_a_limit_falls_through_and_its_session_is_gone(
        db: Database) -> None:
    """A limit is not the session's fault: no replay (the next hop answers, with the whole
    history: a session is never replayed into another provider), and the session taken for
    the turn is not put back."""
    from olp.failures import Code, failure

    limited = [Line(0, event_line(failure(Code.RATE_LIMITED, "slow down"))), Exit(0, 1)]
    r, spawner = runner(db, [answer(), limited, answer()])
    await run(r, turn("one"))
    events = await run(r, turn("one", "two"))
    assert isinstance(events[-1], Error) and events[-1].category == "rate_limited"
    assert len(spawner.runs) == 2  # not replayed here: the engine moves to its next hop
    assert SessionStore(db).count() == (0, 0)
    assert state(await run(r, turn("one", "two"))) == "new"
