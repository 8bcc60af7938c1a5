"""``olp.providers.vibe._acp`` (AcpServer, AcpSession) and ``_acp_parser`` under MockClock,
against a fake ``vibe-acp`` that replays the real server's captured transcripts
(``tests/fixtures/cli-reference/vibe/acp/*.jsonl``, vibe 3.0.2 against the loopback mock) with
their captured timings, with session ids and request ids rewritten to the fake's own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from olp.actors import LineParser
from olp.actors._lines import LineTooLong
from olp.actors._process import CliProcess
from olp.ir import Error, Event, ReasoningDelta, Retrying, Stop, TextDelta, Usage, is_terminal
from olp.providers.vibe._acp import (
    ACP_ENV,
    CANCEL_GRACE_S,
    COMMAND_GUARD,
    DENY_PERMISSION,
    AcpError,
    AcpServer,
    AcpServerGone,
    AcpServerStatistics,
    AcpSession,
    acp_binary,
    guard_prompt,
    open_session,
    server_env,
)
from olp.providers.vibe._acp_parser import VibeAcpParser
from olp.providers.vibe._invocation import TOOLS_OFF_ENV

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "vibe"
            / "acp")
ANSWER = "Hello from the mock upstream."
CWD = Path("/nonexistent/olp-acp-work")
NOW = 1767225600.0

# -- the captured transcripts ----------------------------------------------------------------


def transcript(name: str) -> list[dict[str, Any]]:
    with (FIXTURES / f"{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@dataclass(frozen=True)
class Script:
    """What the real server sent for one request, times relative to the request: the
    messages before the response, then the response (None: the process ended instead)."""

    before: list[tuple[float, dict[str, Any]]]
    response: tuple[float, dict[str, Any]] | None


def script_for(name: str, method: str, *, nth: int = 0) -> Script:
    """The ``nth`` ``method`` request in transcript ``name`` and what came back for it."""
    events = transcript(name)
    sends = [i for i, e in enumerate(events)
             if e["dir"] == "send" and e["msg"].get("method") == method and "id" in e["msg"]]
    start = sends[nth]
    request = events[start]["msg"]
    t0 = events[start]["t"]
    session = (request.get("params") or {}).get("sessionId")
    before: list[tuple[float, dict[str, Any]]] = []
    for e in events[start + 1:]:
        if e["dir"] == "exit" or (e["dir"] == "note" and e["text"] == "stdout EOF"):
            return Script(before, None)
        if e["dir"] != "recv":
            continue
        msg = e["msg"]
        if "method" not in msg and msg.get("id") == request["id"]:
            return Script(before, (e["t"] - t0, msg))
        if "method" not in msg:
            continue  # the response to another request of ours
        params = msg.get("params") or {}
        if session is None or params.get("sessionId") in (session, None):
            before.append((e["t"] - t0, msg))
    raise AssertionError(f"{name}: no response to {method}")


def session_id_of(name: str) -> str:
    for e in transcript(name):
        if e["dir"] == "send" and e["msg"].get("method") == "session/prompt":
            return str(e["msg"]["params"]["sessionId"])
    raise AssertionError(name)


def rewrite(message: dict[str, Any], old: str | None, new: str) -> dict[str, Any]:
    if old is None:
        return message
    rewritten: dict[str, Any] = json.loads(json.dumps(message).replace(old, new))
    return rewritten


INIT = script_for("initialize", "initialize")
NEW = script_for("session_new", "session/new")
NEW_SESSION_ID = NEW.response[1]["result"]["sessionId"] if NEW.response else ""


@dataclass
class Turn:
    """How the fake answers one session/prompt: a transcript's prompt, replayed."""

    name: str
    hold_after: int | None = None  # stop after this many text chunks (until cancelled)
    answer_cancel: bool = True

    def script(self) -> Script:
        return script_for(self.name, "session/prompt")


# -- the fake vibe-acp -----------------------------------------------------------------------


@dataclass
class FakeVibeAcp:
    """A :class:`CliProcess` that plays vibe-acp from the captured transcripts: initialize,
    session/new, session/prompt (one :class:`Turn` per prompt, in order), session/cancel (the
    captured cancel answer), _session/delete and session/close (``{}``)."""

    turns: list[Turn] = field(default_factory=list)
    init_fails: bool = False
    received: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # answers to our requests
    stderr: bytes = b""
    returncode: int | None = None
    too_long_after: int | None = None  # raise LineTooLong after this many stdout lines
    stop_reading: bool = False  # send_input blocks forever (a wedged server)

    def __post_init__(self) -> None:
        self._out_send, self._out_recv = trio.open_memory_channel[bytes | None](math.inf)
        self._exited = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._sessions = 0
        self._cancelled: dict[str, trio.Event] = {}
        self._lines_out = 0
        self._agent_request_id = 0

    async def run(self, *, task_status: trio.TaskStatus[FakeVibeAcp] = trio.TASK_STATUS_IGNORED,
                  ) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(self)
            await self._exited.wait()
            nursery.cancel_scope.cancel()

    # CliProcess
    async def receive_line(self) -> bytes | None:
        line = await self._out_recv.receive()
        if self.too_long_after is not None and self._lines_out >= self.too_long_after:
            raise LineTooLong("line longer than 16777216 bytes")
        self._lines_out += 1
        return line

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def stderr_tail(self) -> bytes:
        return self.stderr

    def kill(self) -> None:
        self.exit(-9)

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        await trio.lowlevel.checkpoint()
        if self.stop_reading:
            await trio.sleep_forever()
        if self.returncode is not None:
            raise trio.BrokenResourceError("the fake no longer reads stdin")
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data
        assert not close
        message = json.loads(data)
        self.received.append(message)
        assert self._nursery is not None
        try:
            self._nursery.start_soon(self._handle, message)
        except RuntimeError as exc:  # the fake is shutting down (the test is over)
            raise trio.BrokenResourceError("the fake has ended") from exc

    def running(self) -> bool:
        return self.returncode is None

    def rss_bytes(self) -> int:
        return 150 << 20

    # the fake's side
    def exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._out_send.send_nowait(None)
            self._exited.set()

    def emit(self, message: dict[str, Any]) -> None:
        if self.returncode is None:
            self._out_send.send_nowait(json.dumps(message).encode())

    def emit_raw(self, line: bytes) -> None:
        self._out_send.send_nowait(line)

    def agent_request(self, method: str, params: dict[str, Any]) -> int:
        """A client-bound request from the agent (its own id space)."""
        request_id = self._agent_request_id
        self._agent_request_id += 1
        self.emit({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    async def _replay(self, script: Script, request_id: int, old: str | None, new: str,
                      limit: int | None = None) -> bool:
        t0 = trio.current_time()
        chunks = 0
        for dt, msg in script.before:
            await trio.sleep_until(t0 + dt)
            msg = rewrite(msg, old, new)
            if "id" in msg and "method" in msg:  # an agent request: in the fake's id space
                self.agent_request(msg["method"], msg["params"])
                continue
            self.emit(msg)
            if msg.get("params", {}).get("update", {}).get(
                    "sessionUpdate") == "agent_message_chunk":
                chunks += 1
                if limit is not None and chunks >= limit:
                    return False
        if script.response is None:
            await trio.sleep(0.03)
            self.exit(-9)
            return True
        dt, response = script.response
        await trio.sleep_until(t0 + dt)
        self.emit({**rewrite(response, old, new), "id": request_id})
        return True

    async def _handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            self.replies.append(message)
            return
        request_id = int(message["id"]) if "id" in message else -1
        params = message.get("params") or {}
        if method == "initialize":
            if self.init_fails:
                await trio.sleep(1.0)
                self.exit(1)
                return
            await self._replay(INIT, request_id, None, "")
        elif method == "session/new":
            self._sessions += 1
            await self._replay(NEW, request_id, NEW_SESSION_ID, f"fake-session-{self._sessions}")
        elif method == "session/prompt":
            turn = self.turns.pop(0)
            session = params["sessionId"]
            cancelled = self._cancelled.setdefault(session, trio.Event())
            script = turn.script()
            old = session_id_of(turn.name)
            finished = await self._replay(script, request_id, old, session, turn.hold_after)
            if not finished:
                await cancelled.wait()
                if turn.answer_cancel:
                    cancel = script_for("cancel", "session/prompt")
                    assert cancel.response is not None
                    await trio.sleep(0.12)  # as captured: 0.1 s after session/cancel
                    self.emit({**cancel.response[1], "id": request_id})
        elif method == "session/cancel":
            self._cancelled.setdefault(params["sessionId"], trio.Event()).set()
        elif method in ("_session/delete", "session/close"):
            await trio.sleep(0.03)
            self.emit({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            self.emit({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": -32601, "message": f"Method not found: {method}"}})

    def methods(self) -> list[str]:
        return [m.get("method", "<reply>") for m in self.received]


# -- helpers ---------------------------------------------------------------------------------


async def start(nursery: trio.Nursery, fake: FakeVibeAcp, **options: Any) -> AcpServer:
    await nursery.start(fake.run)
    server = AcpServer(fake, client_version="test", **options)
    await nursery.start(server.serve)
    return server


async def read_all(session: AcpSession) -> list[bytes]:
    lines = []
    while (line := await session.receive_line()) is not None:
        lines.append(line)
    return lines


def parse(lines: Sequence[bytes], returncode: int, stderr: bytes = b"",
          ) -> tuple[list[Event], list[Event], Event]:
    parser: LineParser = VibeAcpParser(now=lambda: NOW)
    events: list[Event] = []
    for line in lines:
        for event in parser.feed(line):
            assert not is_terminal(event)
            events.append(event)
    trailer = list(parser.trailer(returncode, stderr))
    terminal = parser.finish(returncode, stderr)
    assert parser.finish(returncode, stderr) == terminal
    return events, trailer, terminal


async def ask(server: AcpServer, prompt: str = "say hello") -> tuple[AcpSession, list[bytes], int]:
    session = await server.new_session(CWD)
    await session.send_input(prompt.encode())
    lines = await read_all(session)
    return session, lines, await session.wait()


INIT_S = INIT.response[0] if INIT.response else 0.0
NEW_S = NEW.response[0] if NEW.response else 0.0

# -- tests -----------------------------------------------------------------------------------


def test_the_fixtures_are_there() -> None:
    assert 0.5 < INIT_S < 30 and 0.1 < NEW_S < 30
    assert NEW_SESSION_ID


async def test_initialize_new_session_and_a_streamed_answer(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    t0 = trio.current_time()
    server = await start(nursery, fake)
    assert trio.current_time() - t0 == pytest.approx(INIT_S)
    assert server.alive() and server.agent_info["name"] == "@mistralai/mistral-vibe"
    init = fake.received[0]
    assert init["method"] == "initialize"
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}

    t1 = trio.current_time()
    session = await server.new_session(CWD)
    assert trio.current_time() - t1 == pytest.approx(NEW_S)
    assert session.session_id == "fake-session-1" and session.running()
    process: CliProcess = session  # read like a CLI (checked by mypy)
    assert process.stderr_tail() == b"" and process.rss_bytes() == 150 << 20
    assert fake.received[1]["params"] == {"cwd": str(CWD), "mcpServers": []}

    await session.send_input(b"ISOLATION-MARKER-A-7f3e: say hello.")
    lines = await read_all(session)
    assert await session.wait() == 0 and not session.running()
    prompt = fake.received[2]
    assert prompt["method"] == "session/prompt"
    assert prompt["params"] == {"sessionId": "fake-session-1", "prompt": [
        {"type": "text", "text": "ISOLATION-MARKER-A-7f3e: say hello."}]}
    events, trailer, terminal = parse(lines, 0)
    assert events == [TextDelta(text="Hello"), TextDelta(text=" from"),
                      TextDelta(text=" the mock upstream.")]
    assert trailer == [Usage(prompt_tokens=25, completion_tokens=7)]
    assert terminal == Stop(finish_reason="stop")
    assert json.loads(lines[-1]) == {"olp_prompt_result": {
        "stopReason": "end_turn", "usage": {"totalTokens": 32, "inputTokens": 25,
                                            "outputTokens": 7}}}
    # every line but the last is a notification of this session
    for line in lines[:-1]:
        assert json.loads(line)["params"]["sessionId"] == "fake-session-1"
    # once over, the session is deleted (which also removes vibe's stored transcript)
    await trio.sleep(1)
    assert fake.received[-1] == {"jsonrpc": "2.0", "id": 3, "method": "_session/delete",
                                 "params": {"sessionId": "fake-session-1"}}
    assert server.statistics().sessions == 0 and server.statistics().pending_calls == 0


async def test_a_precreated_session_answers_in_its_captured_time(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    await trio.sleep(120)  # idle, then the request arrives
    t0 = trio.current_time()
    await session.send_input(b"hello")
    while True:
        line = await session.receive_line()
        assert line is not None
        if json.loads(line).get("params", {}).get("update", {}).get(
                "sessionUpdate") == "agent_message_chunk":
            break
    first_text = trio.current_time() - t0
    captured = [dt for dt, m in script_for("prompt_success", "session/prompt").before
                if m.get("params", {}).get("update", {}).get("sessionUpdate")
                == "agent_message_chunk"][0]
    assert first_text == pytest.approx(captured) and first_text < 1.5
    session.kill()  # leaving early: the session is cancelled, never left hanging
    await read_all(session)


async def test_notifications_before_the_prompt_and_after_the_result_are_dropped(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    await trio.sleep(1)  # the captured available_commands_update arrives meanwhile
    fake.emit({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": session.session_id, "update": {"sessionUpdate": "agent_message_chunk",
                                                    "content": {"type": "text",
                                                                "text": "stale"}}}})
    await trio.testing.wait_all_tasks_blocked()
    await session.send_input(b"hello")
    lines = await read_all(session)
    assert b"stale" not in b"".join(lines) and b"availableCommands" not in b"".join(lines)
    # the captured title update arrives after the result: nobody gets it, nothing breaks
    fake.emit({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": session.session_id, "update": {"sessionUpdate": "session_info_update",
                                                    "title": "late"}}})
    fake.emit({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "someone-else", "update": {}}})
    fake.emit_raw(b"not json")
    fake.emit_raw(b"[1, 2]")
    fake.emit({"jsonrpc": "2.0", "id": 999, "result": {}})  # an id nobody waits on
    await trio.testing.wait_all_tasks_blocked()
    assert server.alive()


async def test_two_sessions_at_once_each_get_only_their_own_lines(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success"), Turn("second_session")])
    server = await start(nursery, fake)
    a, b = await server.new_session(CWD), await server.new_session(CWD)
    results: dict[str, list[bytes]] = {}

    async def one(session: AcpSession, text: bytes) -> None:
        await session.send_input(text)
        results[session.session_id] = await read_all(session)

    async with trio.open_nursery() as inner:
        inner.start_soon(one, a, b"first")
        inner.start_soon(one, b, b"second")
    for session in (a, b):
        lines = results[session.session_id]
        for line in lines[:-1]:
            assert json.loads(line)["params"]["sessionId"] == session.session_id
        assert parse(lines, await session.wait())[2] == Stop(finish_reason="stop")
    # the writes never interleave: every line the fake got was one whole JSON message
    assert {m.get("method") for m in fake.received} >= {"session/prompt", "_session/delete"}


@pytest.mark.parametrize(("name", "code", "category", "status", "retries"), [
    ("error_429", "RATE_LIMITED", "rate_limited", None, 2),
    ("error_401", "UPSTREAM_AUTH", "auth", None, 0),
    ("error_500", "UPSTREAM_5XX", "unavailable", 500, 2),
])
async def test_upstream_errors_classify_as_vibe_p_does(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, name: str, code: str,
        category: str, status: int | None, retries: int) -> None:
    fake = FakeVibeAcp(turns=[Turn(name)])
    server = await start(nursery, fake)
    session, lines, returncode = await ask(server)
    assert returncode == 1
    assert "olp_prompt_error" in json.loads(lines[-1])
    events, trailer, terminal = parse(lines, returncode)
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category, terminal.status) == (code, category, status)
    assert terminal.retry_after_s is None  # vibe-acp's error names no reset time
    retrying = [e for e in events if isinstance(e, Retrying)]
    assert [r.attempt for r in retrying] == list(range(1, retries + 1))
    assert all(r.category == category for r in retrying)
    assert not [e for e in events if isinstance(e, TextDelta)] and trailer == []


async def test_a_retry_after_streamed_text_ends_the_job_instead_of_repeating_it(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """Captured: the upstream stalled after "Partial"; vibe retried and streamed the whole
    answer again under the same messageId."""
    fake = FakeVibeAcp(turns=[Turn("stall_retry"), Turn("stall_retry")])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    await session.send_input(b"Stall then retry.")
    parser = VibeAcpParser(now=lambda: NOW)
    events: list[Event] = []
    while (line := await session.receive_line()) is not None:
        out = parser.feed(line)
        events.extend(out)
        if out and is_terminal(out[-1]):
            session.kill()  # what the runner's caller does when it stops reading early
            break
    assert events[:-1] == [TextDelta(text="Partial")]
    terminal = events[-1]
    assert isinstance(terminal, Error) and terminal.code == "STREAM_ENDED_EARLY"
    assert terminal.category == "unavailable" and "(ProviderStreamStalled)" in terminal.message
    assert parser.finish(0, b"") == terminal and list(parser.trailer(0, b"")) == []
    await session.wait()

    _, lines, returncode = await ask(server)
    held = VibeAcpParser(now=lambda: NOW, hold_text=True)
    out = [e for line in lines for e in held.feed(line)]
    assert [e for e in out if isinstance(e, TextDelta)] == [TextDelta(text=ANSWER)]
    assert [type(e) for e in out] == [Retrying, TextDelta]
    assert held.finish(returncode, b"") == Stop(finish_reason="stop")
    assert list(held.trailer(returncode, b"")) == [Usage(prompt_tokens=25, completion_tokens=7)]


async def test_a_permission_request_is_denied_and_other_requests_refused(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("permission_control")])
    server = await start(nursery, fake)
    session, lines, returncode = await ask(server)
    await trio.testing.wait_all_tasks_blocked()
    [request] = [m for _, m in script_for("permission_control", "session/prompt").before
                 if m.get("method") == "session/request_permission"]
    assert [o["optionId"] for o in request["params"]["options"]][-1] == "reject_once"
    denials = [m for m in fake.replies if "result" in m]
    assert denials == [{"jsonrpc": "2.0", "id": 0, "result": dict(DENY_PERMISSION)}]
    assert DENY_PERMISSION == {"outcome": {"outcome": "cancelled"}}

    for method in ("fs/read_text_file", "terminal/create", "elicitation/create", "x/unknown"):
        request_id = fake.agent_request(method, {"sessionId": "s"})
        await trio.testing.wait_all_tasks_blocked()
        assert fake.replies[-1] == {"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32601, "message": f"{method} is not supported"}}
    assert server.statistics().denied_requests == 5
    assert returncode == 0 and parse(lines, 0)[2] == Stop(finish_reason="stop")


async def test_kill_cancels_the_prompt_and_vibe_answers_cancelled(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("cancel", hold_after=2)])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    await session.send_input(b"Stream slowly.")
    got: list[bytes] = []
    while len([ln for ln in got if b"agent_message_chunk" in ln]) < 2:
        line = await session.receive_line()
        assert line is not None
        got.append(line)
    t0 = trio.current_time()
    with trio.testing.assert_no_checkpoints():
        session.kill()  # sync, never blocks
        session.kill()  # idempotent
    got += await read_all(session)
    assert trio.current_time() - t0 == pytest.approx(0.12)
    assert await session.wait() == 0
    cancels = [m for m in fake.received if m.get("method") == "session/cancel"]
    assert cancels == [{"jsonrpc": "2.0", "method": "session/cancel",
                        "params": {"sessionId": session.session_id}}]
    events, trailer, terminal = parse(got, 0)
    assert [e.text for e in events if isinstance(e, TextDelta)] == [" chunk0", " chunk1"]
    assert isinstance(terminal, Error) and terminal.code == "CLI_TERMINATED"
    assert trailer == []  # 0 tokens counted for a cancelled turn


async def test_a_cancel_vibe_never_answers_ends_the_session_after_the_grace(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("cancel", hold_after=2, answer_cancel=False)])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    await session.send_input(b"Stream slowly.")
    await trio.sleep(2)
    t0 = trio.current_time()
    session.kill()
    lines = await read_all(session)
    assert trio.current_time() - t0 == pytest.approx(CANCEL_GRACE_S)
    assert await session.wait() == -9
    terminal = parse(lines, -9)[2]
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert server.alive()  # the server itself is fine


async def test_kill_of_an_unused_session_ends_it_at_once(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp()
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    session.kill()
    assert await session.receive_line() is None and await session.wait() == -9
    await trio.testing.wait_all_tasks_blocked()
    assert fake.methods()[-1] == "_session/delete"
    with pytest.raises(RuntimeError):
        await session.send_input(b"too late")


async def test_the_server_dying_mid_answer_ends_every_session(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("killed")], stderr=b"Traceback ...\nboom\n")
    server = await start(nursery, fake)
    idle = await server.new_session(CWD)
    session = await server.new_session(CWD)
    with trio.fail_after(30):
        await session.send_input(b"Stream slowly.")
        lines = await read_all(session)
        assert await session.wait() == -9 and await idle.wait() == -9
        assert await idle.receive_line() is None
    events, trailer, terminal = parse(lines, -9, session.stderr_tail())
    assert [e.text for e in events if isinstance(e, TextDelta)] == [" chunk0"]
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "boom" in terminal.message
    await trio.testing.wait_all_tasks_blocked()
    assert not server.alive() and server.returncode == -9
    with pytest.raises(AcpServerGone):
        await server.new_session(CWD)
    with pytest.raises(trio.BrokenResourceError):
        await AcpSession(server, "late", stderr_tail=lambda: b"").send_input(b"x")
    assert server.statistics() == AcpServerStatistics(
        alive=False, initialized=True, sessions=0, pending_calls=0, denied_requests=0)


async def test_serve_returns_when_the_process_ends_and_leaves_no_task(
        autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeVibeAcp()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(fake.run)
            server = AcpServer(fake)
            await nursery.start(server.serve)
            session = await server.new_session(CWD)
            fake.exit(0)
        # the nursery closed: serve returned, the fake ended, nothing left running
    assert await session.wait() == -9 and server.returncode == 0 and not server.alive()


async def test_a_process_that_dies_before_initialize_fails_start_with_one_error(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(init_fails=True)
    await nursery.start(fake.run)
    server = AcpServer(fake)
    with pytest.raises(AcpServerGone):  # not an exception group
        await nursery.start(server.serve)
    assert not server.alive()


async def test_an_initialize_error_fails_start_with_acp_error(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp()
    await nursery.start(fake.run)

    async def refuse(message: dict[str, Any]) -> None:
        fake.received.append(message)
        fake.emit({"jsonrpc": "2.0", "id": message["id"],
                   "error": {"code": -32602, "message": "bad protocol version"}})

    fake._handle = refuse  # type: ignore[method-assign]
    server = AcpServer(fake)
    with pytest.raises(AcpError) as info:
        await nursery.start(server.serve)
    assert info.value.code == -32602 and info.value.method == "initialize"


async def test_cancelling_serve_ends_the_sessions(autojump_clock: trio.testing.MockClock,
                                                   nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("cancel", hold_after=2, answer_cancel=False)])
    await nursery.start(fake.run)
    server = AcpServer(fake)
    async with trio.open_nursery() as inner:
        await inner.start(server.serve)
        session = await server.new_session(CWD)
        await session.send_input(b"x")
        await trio.sleep(3)
        inner.cancel_scope.cancel()
    assert await session.wait() == -9 and not server.alive()
    assert fake.running()  # the process is the caller's to stop


async def test_a_line_over_the_limit_kills_the_server(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    fake.too_long_after = fake._lines_out  # the next line is too long
    await session.send_input(b"hello")
    assert await read_all(session) == [] and await session.wait() == -9
    assert fake.returncode == -9 and not server.alive()


async def test_a_server_that_stops_reading_is_killed(autojump_clock: trio.testing.MockClock,
                                                     nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp()
    server = await start(nursery, fake, write_timeout=10.0)
    fake.stop_reading = True
    t0 = trio.current_time()
    with pytest.raises(AcpServerGone):
        await server.new_session(CWD)
    assert trio.current_time() - t0 == pytest.approx(10.0)
    assert fake.returncode == -9


async def test_a_cancelled_send_input_writes_nothing_and_ends_the_session(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp()
    server = await start(nursery, fake)
    session = await server.new_session(CWD)
    with trio.CancelScope() as scope:
        scope.cancel()
        await session.send_input(b"hello")
    assert "session/prompt" not in fake.methods()
    assert await session.wait() == -9


async def test_a_slash_command_prompt_reaches_the_model_as_text(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    server = await start(nursery, fake)
    await ask(server, "/proxy-setup HTTPS_PROXY http://127.0.0.1:9")
    [prompt] = [m for m in fake.received if m.get("method") == "session/prompt"]
    assert prompt["params"]["prompt"] == [
        {"type": "text", "text": "\u200b/proxy-setup HTTPS_PROXY http://127.0.0.1:9"}]


async def test_a_session_new_given_up_on_is_deleted_when_it_arrives(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp()
    server = await start(nursery, fake)
    with trio.move_on_after(0.5):
        await server.new_session(CWD)
    await trio.sleep(10)
    assert fake.methods()[-1] == "_session/delete"
    assert fake.received[-1]["params"] == {"sessionId": "fake-session-1"}
    assert server.statistics().sessions == 0 and server.statistics().pending_calls == 0


async def test_open_session_cancels_a_turn_its_reader_left(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("cancel", hold_after=2), Turn("prompt_success")])
    server = await start(nursery, fake)
    with trio.move_on_after(3):  # a deadline while the answer streams
        async with open_session(server, CWD) as session:
            await session.send_input(b"Stream slowly.")
            await read_all(session)
    await trio.sleep(1)
    assert "session/cancel" in fake.methods() and await session.wait() == 0
    async with open_session(server, CWD) as done:  # read to the end: nothing to cancel
        await done.send_input(b"hello")
        await read_all(done)
    await trio.sleep(1)
    assert fake.methods().count("session/cancel") == 1
    assert server.statistics().sessions == 0


async def test_a_second_prompt_is_refused(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    fake = FakeVibeAcp(turns=[Turn("prompt_success")])
    server = await start(nursery, fake)
    session, _, _ = await ask(server)
    with pytest.raises(RuntimeError):
        await session.send_input(b"again")


@pytest.mark.parametrize(("text", "guarded"), [
    ("/help", True), ("  /proxy-setup HTTPS_PROXY x", True), ("\n/teleport", True),
    ("hello /help", False), ("", False), ("http://x/", False), ("@file /x", False),
])
def test_guard_prompt(text: str, guarded: bool) -> None:
    out = guard_prompt(text)
    assert out == (COMMAND_GUARD + text if guarded else text)
    # vibe's own test (vibe/acp/commands/controller.py): the first word starts with "/"
    parts = out.strip().split(None, 1)
    assert not (parts and parts[0].startswith("/"))


def test_server_env_and_binary() -> None:
    env = server_env("devstral-2-25-12", Path("/h/.vibe"))
    assert env["VIBE_HOME"] == "/h/.vibe" and env["VIBE_ACTIVE_MODEL"] == "devstral-2-25-12"
    assert TOOLS_OFF_ENV.items() <= env.items() and ACP_ENV.items() <= env.items()
    assert acp_binary("/opt/vibe/bin/vibe") == "/opt/vibe/bin/vibe-acp"
    assert acp_binary("vibe") == "vibe-acp"


# -- the parser alone ------------------------------------------------------------------------


def update(kind: str, **fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": kind, **fields}}}).encode()


def chunk(text: str, message_id: str = "m1") -> bytes:
    return update("agent_message_chunk", content={"type": "text", "text": text},
                  messageId=message_id)


def result(stop: str, usage: tuple[int, int] | None = (25, 7)) -> bytes:
    body: dict[str, Any] = {"stopReason": stop}
    if usage is not None:
        body["usage"] = {"inputTokens": usage[0], "outputTokens": usage[1]}
    return json.dumps({"olp_prompt_result": body}).encode()


def error(code: int, message: str) -> bytes:
    return json.dumps({"olp_prompt_error": {"code": code, "message": message}}).encode()


def test_parser_separates_messages_like_vibe_p() -> None:
    events, _, terminal = parse([chunk("one"), chunk(" two"), chunk("three", "m2"), result(
        "end_turn")], 0)
    assert events == [TextDelta(text="one"), TextDelta(text=" two"),
                      TextDelta(text="\n\nthree")]
    assert terminal == Stop(finish_reason="stop")


@pytest.mark.parametrize(("lines", "terminal"), [
    ([result("end_turn")], Error(code="PROTOCOL_ERROR", category="unknown",
                                 message="vibe-acp ended the turn without an assistant message")),
    ([chunk("x"), result("max_tokens")], Stop(finish_reason="length")),
    ([chunk("x"), result("max_turn_requests")], Stop(finish_reason="length")),
])
def test_parser_stop_reasons(lines: list[bytes], terminal: Event) -> None:
    assert parse(lines, 0)[2] == terminal


@pytest.mark.parametrize(("line", "code", "category"), [
    (result("cancelled", (0, 0)), "CLI_TERMINATED", "unavailable"),
    (result("refusal"), "UPSTREAM_CLIENT_ERROR", "client_error"),
    (result("max_tokens"), "UPSTREAM_ERROR", "unknown"),
    (error(-31001, "Rate limit exceeded for mistral (model: m)."), "RATE_LIMITED",
     "rate_limited"),
    (error(-31002, "Invalid API key (from env var MISTRAL_API_KEY). Please check"),
     "UPSTREAM_AUTH", "auth"),
    (error(-31002, "Unknown model alias x"), "CONFIG_ERROR", "auth"),
    (error(-32000, "Missing API key for mistral provider."), "AUTH_MISSING", "auth"),
    (error(-31004, "Context too long for mistral (model: m)."), "CONTEXT_LENGTH",
     "context_length"),
    (error(-31005, "The model declined to respond"), "UPSTREAM_CLIENT_ERROR", "client_error"),
    (error(-32603, 'API error occurred: Status 503. Body: {"message": "x"}'), "UPSTREAM_5XX",
     "unavailable"),
    (error(-32603, "Connection error."), "CONNECTION_FAILED", "unavailable"),
    (error(-32603, "something odd"), "UPSTREAM_UNAVAILABLE", "unavailable"),
    (error(-32602, "Session not found: s"), "PROTOCOL_ERROR", "unknown"),
])
def test_parser_failures(line: bytes, code: str, category: str) -> None:
    terminal = parse([line], 0 if b"result" in line else 1)[2]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == (code, category)


def test_parser_usage_of_a_failed_turn_comes_from_the_last_usage_update() -> None:
    meta = {"promptTokens": 40, "completionTokens": 3}
    _, trailer, terminal = parse([update("usage_update", used=43, size=1, _meta=meta),
                                  error(-32603, "API error occurred: Status 500.")], 1)
    assert trailer == [Usage(prompt_tokens=40, completion_tokens=3)]
    assert isinstance(terminal, Error)


def prompt_lines(name: str, edit: Callable[[dict[str, Any]], None]) -> list[bytes]:
    """A transcript's answer to its first ``session/prompt`` as the session hands it to the
    parser (its notifications, then the result under ``olp_prompt_result``), each message
    passed to ``edit`` first."""
    events = transcript(name)
    [prompt_id] = [e["msg"]["id"] for e in events if e["dir"] == "send"
                   and e["msg"].get("method") == "session/prompt"][:1]
    lines: list[bytes] = []
    for e in events:
        msg = e["msg"] if e["dir"] == "recv" else None
        if msg is None:
            continue
        edit(msg)
        if msg.get("id") == prompt_id:
            return [*lines, json.dumps({"olp_prompt_result": msg["result"]}).encode()]
        if msg.get("method") == "session/update":
            lines.append(json.dumps(msg).encode())
    raise AssertionError(f"{name}: no answer to the prompt")


def _cached_meta(msg: dict[str, Any]) -> None:
    meta = ((msg.get("params") or {}).get("update") or {}).get("_meta")
    if meta is not None and "cachedTokens" in meta and meta["promptTokens"]:
        meta.update(promptTokens=1025, cachedTokens=1000)
    if "result" in msg and "usage" in (msg["result"] or {}):
        msg["result"]["usage"]["inputTokens"] = 1025


def test_parser_cached_input_comes_from_the_usage_updates() -> None:
    """Every ``usage_update``'s ``_meta`` carries ``cachedTokens`` (the prompt count,
    ``inputTokens``, includes them): the captured lines with a cache figure written in."""
    _, trailer, terminal = parse(prompt_lines("prompt_success", _cached_meta), 0)
    assert trailer == [Usage(prompt_tokens=1025, completion_tokens=7, cached_tokens=1000)]
    assert terminal == Stop(finish_reason="stop")


def test_parser_cached_input_of_the_prompt_result_comes_first() -> None:
    """vibe puts ACP's ``cachedReadTokens`` in the prompt result's usage when it is not 0
    (so the capture, with none cached, has none); it is the same session figure."""
    def cached_result(msg: dict[str, Any]) -> None:
        _cached_meta(msg)
        if "result" in msg and "usage" in (msg["result"] or {}):
            msg["result"]["usage"]["cachedReadTokens"] = 900

    _, trailer, _ = parse(prompt_lines("prompt_success", cached_result), 0)
    assert trailer == [Usage(prompt_tokens=1025, completion_tokens=7, cached_tokens=900)]


def test_parser_ignores_odd_lines_and_lines_after_the_end() -> None:
    lines = [b"", b"nope", b"[]", b'{"method": 3}', update("tool_call", content=[{"x": 1}]),
             update("agent_thought_chunk", content={"type": "text", "text": "hmm"}),
             update("user_message_chunk", content={"type": "text", "text": "prompt"}),
             json.dumps({"jsonrpc": "2.0", "method": "_session/retrying",
                         "params": {"sessionId": "s", "category": "mystery",
                                    "detail": "odd"}}).encode(),
             chunk("ok"), result("end_turn"), chunk("after")]
    events, trailer, terminal = parse(lines, 0)
    # a thought chunk is the model's thinking (issue #27: cli-reference/vibe/reasoning)
    assert events == [ReasoningDelta(text="hmm"), Retrying(attempt=1, category="unknown"),
                      TextDelta(text="ok")]
    assert terminal == Stop(finish_reason="stop")


def test_parser_without_a_final_line() -> None:
    _, trailer, terminal = parse([chunk("partial")], -9, b"Error: gone\n")
    assert trailer == []
    assert terminal == Error(code="CLI_FAILED", category="unknown", message=(
        "vibe-acp ended before it answered (session was killed by signal 9 (SIGKILL)); "
        "stderr: Error: gone"))
