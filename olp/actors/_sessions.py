"""Keeping a CLI's own session between the turns of a conversation (issue #25, ADR 0023).

A turn of a conversation whose earlier answer this provider gave, to this key, resumes the
CLI's session (:class:`SessionKit` says how, per CLI) and sends only the new turns; any other
turn starts a new session from the whole history, as before. After a clean answer the
session the CLI wrote is kept (:class:`olp.store.SessionStore`) under the digest its next turn
will hold (:mod:`olp.ir._conversation`). What is resumed is taken out of the store first, so
a failed, cancelled or killed turn leaves nothing behind, and a concurrent turn of the same
conversation starts afresh.

Only turns a CLI can continue are resumed: new turns that are user messages, after the
results of the answer's tool calls for a CLI that takes them on resume (codex: written into
its rollout); any other turn starts afresh with the whole history.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec
import trio

from olp.ir import (
    ChatRequest,
    Event,
    Message,
    Start,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from olp.ir._conversation import continuation, resume_points
from olp.store import AsyncSessionStore, StoredSession

Emit = Callable[[Event], Awaitable[None]]
_T = TypeVar("_T")


class Offload(Protocol):
    """Runs a blocking call off the Trio thread (``trio.to_thread.run_sync``; tests under
    the MockClock run it inline, since a worker thread lets the clock jump)."""

    def __call__(self, fn: Callable[[], _T], /) -> Awaitable[_T]: ...


class SessionKit(Protocol):
    """How one CLI keeps and resumes its own sessions (an adapter's ``sessions``).
    ``system_in_prompt``: the CLI reads the system text in its prompt (not from a file or a
    flag), so a resumed turn's prompt leaves it out: the session already holds it."""

    system_in_prompt: bool
    #: Whether an answer that called tools keeps its session, and the next turn's tool
    #: results are written into it (:meth:`with_tool_results`) before it resumes.
    takes_tool_results: bool
    #: The prompt of a resumed turn that brings tool results and no user text.
    continue_prompt: str
    #: At a tool call, how long the runner may wait for the CLI (blocked on the bridge's
    #: ``tools/call``) to write the call into its session before the kill; 0: kill at once.
    settle_s: float

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` of a spawn whose session is to be kept (persistence on)."""
        ...

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        """``argv`` of a spawn that continues ``session_id`` (in a session of its own)."""
        ...

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        """The session this spawn wrote in ``home``: its id and files by path under the
        home; ``None`` when there is none (``resumed``: the id it continued, not its own).
        Blocks on a few small file reads."""
        ...

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        """Whether ``files`` hold a whole session that ends with ``answer`` (its text, or
        its tool calls) (the CLI reads a damaged one without complaint: OLP checks)."""
        ...

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        """``files`` with the results of the session's last tool calls, in order, written
        in as the CLI writes them; ``None`` when they do not fit the calls."""
        ...

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        """For a CLI that reports a resumed session's running total as a turn's usage: the
        total in ``files`` so far (subtracted from what it reports); else ``None``."""
        ...


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """A provider's kept sessions (``providers.<name>.sessions``, ``session_ttl_s``)."""

    store: AsyncSessionStore
    ttl_s: float = 3600.0
    clock: Callable[[], float] = time.time
    #: How session files are read and parsed (tests: inline, for the MockClock).
    offload: Offload = trio.to_thread.run_sync


@dataclass(slots=True)
class Turn:
    """One job's part in a conversation: the session it resumes (``stored``, with the
    ``new_turns`` to send), and what it answered, watched through :meth:`tap`."""

    request: ChatRequest
    scope: str
    owner: str
    provider: str
    stored: StoredSession | None = None
    new_turns: tuple[Message, ...] = ()
    evicted: str | None = None
    usage_before: Usage | None = None  # a running total to subtract (SessionKit.usage_before)
    text: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [id, name, args]
    called_tools: bool = False
    content: bool = False
    #: Continued in a thread a long-lived server kept (``olp/actors/_threads.py``): the
    #: session lives there, not in the store.
    continued: bool = False

    @property
    def state(self) -> str:
        """``X-OLP-Session``: ``resumed``, ``new`` or ``evicted:<why>``."""
        if self.stored is not None or self.continued:
            return "resumed"
        return f"evicted:{self.evicted}" if self.evicted else "new"

    def resumed_request(self, *, with_system: bool = True,
                        continue_prompt: str = "Continue.") -> ChatRequest:
        """The request a resumed spawn gets: only the new user turns (tool results are
        written into the session instead; ``continue_prompt`` when there is no user text),
        after the system text unless the CLI has it in its session already."""
        system = tuple(m for m in self.request.messages if m.role in ("system", "developer"))
        turns = tuple(m for m in self.new_turns if m.role != "tool") or (
            Message(role="user", content=(TextPart(text=continue_prompt),)),)
        return _replace_messages(self.request, (system if with_system else ()) + turns)

    def tap(self, emit: Emit, model: str) -> Emit:
        """``emit`` that says this turn's session state first (and again if it changes: a
        failed resume replayed) and watches the answer."""
        said: str | None = None

        async def tapped(event: Event) -> None:
            nonlocal said
            if said != self.state:
                said = self.state
                await emit(Start(model=model, session=said))
            if isinstance(event, Usage) and self.stored is not None \
                    and self.usage_before is not None:
                event = _less(event, self.usage_before)
            if isinstance(event, TextDelta):
                self.text.append(event.text)
                self.content = True
            elif isinstance(event, ToolCallDelta):
                self.called_tools = self.content = True
                call = self.calls.setdefault(event.index, ["", "", ""])
                call[0] = event.id or call[0]
                call[1] = event.name or call[1]
                call[2] += event.arguments or ""
            await emit(event)

        return tapped

    def answer(self) -> Message:
        """The answer as the client will echo it back: its text and its tool calls."""
        text = "".join(self.text)
        return Message(role="assistant", content=(TextPart(text=text),) if text else (),
                       tool_calls=tuple(ToolCall(id=c[0], name=c[1], arguments=c[2] or "{}")
                                        for _, c in sorted(self.calls.items())))


async def holds_session(policy: SessionPolicy, request: ChatRequest, *, provider: str,
                        model: str, owner: str) -> bool:
    """Whether this provider (an account's actor) keeps a live session ``request`` may
    continue: the account a conversation belongs to is tried first (issue #30). Reads the
    store (worker threads), takes nothing."""
    scope = f"{owner}|{provider}|{model}"
    newer_than = policy.clock() - policy.ttl_s
    for point in resume_points(request, scope):
        if await policy.store.holds(point.digest, key=owner, provider=provider,
                                    newer_than=newer_than):
            return True
    return False


async def open_turn(policy: SessionPolicy, kit: SessionKit, request: ChatRequest, *,
                    provider: str, model: str, owner: str) -> Turn:
    """This job's :class:`Turn`: the kept session it continues, taken from the store, if
    there is one it can continue (with the new turns' tool results written in, for a CLI
    that takes them). Waits on the store (a worker thread)."""
    scope = f"{owner}|{provider}|{model}"
    turn = Turn(request, scope, owner, provider)
    newer_than = policy.clock() - policy.ttl_s
    for point in resume_points(request, scope):
        results = [m for m in point.new_turns if m.role == "tool"]
        users = [m for m in point.new_turns if m.role != "tool"]
        if any(m.role != "user" for m in users) or (results and not kit.takes_tool_results) \
                or point.new_turns[:len(results)] != tuple(results):
            break  # only the latest answer, then its tool results, then user turns
        stored = await policy.store.take(point.digest, key=owner, provider=provider,
                                         newer_than=newer_than)
        if stored is None:
            break
        if results:  # parsing a rollout that may be megabytes: off the Trio thread
            outputs = [m.text() for m in results]
            files = await policy.offload(
                functools.partial(kit.with_tool_results, stored.files, outputs))
            if files is None:
                turn.evicted = "tool_results"
                break
            stored = dataclasses.replace(stored, files=files)
        turn.stored, turn.new_turns = stored, point.new_turns
        break
    return turn


async def settle_turn(kit: SessionKit, turn: Turn, home: Path, *, poll_s: float = 0.025,
                      offload: Offload = trio.to_thread.run_sync) -> None:
    """Return once the session the CLI is writing in ``home`` is whole and ends with this
    turn's answer so far (its tool calls): the caller bounds the wait (``kit.settle_s``) and
    then kills the CLI. Polls through ``offload`` (a worker thread); cancellation simply
    stops it."""
    answer = turn.answer()
    resumed = turn.stored.session_id if turn.stored else None

    def holds() -> bool:
        found = kit.written(home, resumed=resumed)
        return found is not None and kit.complete(found[1], answer)

    while True:  # a file another process writes: nothing to wait on but the clock
        if await offload(holds):
            return
        await trio.sleep(poll_s)


def settler(policy: SessionPolicy, kit: SessionKit, turn: Turn,
            home: Path) -> Callable[[], Awaitable[None]] | None:
    """What the runner awaits at a tool call before the kill: :func:`settle_turn` for at
    most ``kit.settle_s``; ``None`` for a CLI that needs no wait."""
    if not kit.takes_tool_results or kit.settle_s <= 0:
        return None

    async def settle() -> None:
        with trio.move_on_after(kit.settle_s):
            await settle_turn(kit, turn, home, offload=policy.offload)

    return settle


async def keep_turn(policy: SessionPolicy, kit: SessionKit, turn: Turn, home: Path) -> bool:
    """After a clean answer: keep the session the CLI wrote in ``home`` for the next turn
    (not when the session is not whole, nor after tool calls for a CLI that cannot take
    their results on resume). Waits on the store."""
    if turn.called_tools and not kit.takes_tool_results:
        return False
    answer = turn.answer()
    resumed = turn.stored.session_id if turn.stored else None

    def read() -> tuple[str, dict[str, bytes]] | None:
        found = kit.written(home, resumed=resumed)
        return found if found is not None and kit.complete(found[1], answer) else None

    found = await policy.offload(read)
    if found is None:
        return False
    now = policy.clock()
    return await policy.store.put(StoredSession(
        continuation(turn.request, turn.scope, answer), turn.owner, turn.provider, found[0],
        found[1], created_at=turn.stored.created_at if turn.stored else now, used_at=now),
        expire_before=now - policy.ttl_s)


def _less(total: Usage, before: Usage) -> Usage:
    """A turn's own usage from its session's running total and the total before it."""
    return Usage(prompt_tokens=max(0, total.prompt_tokens - before.prompt_tokens),
                 completion_tokens=max(0, total.completion_tokens - before.completion_tokens),
                 cached_tokens=max(0, total.cached_tokens - before.cached_tokens),
                 cache_write_tokens=max(0, total.cache_write_tokens - before.cache_write_tokens))


def _replace_messages(request: ChatRequest, messages: tuple[Message, ...]) -> ChatRequest:
    return msgspec.structs.replace(request, messages=messages)
