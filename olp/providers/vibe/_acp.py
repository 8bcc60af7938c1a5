"""vibe's ACP server (``vibe-acp``) as a long-lived *model*: one process, single-use sessions.

``vibe -p`` costs ~5 s per request, most of it start-up. ``vibe-acp`` (same package) speaks
ACP, JSON-RPC 2.0 in newline-delimited JSON over stdio; one process answers many sessions.
:class:`AcpServer` drives one such process (already spawned by the caller, stdin an open pipe:
``SpawnSpec(stdin=None)``) and :class:`AcpSession` is one request's conversation, read by the
runner exactly like a :class:`~olp.actors._process.CliProcess`. Measured against the loopback
mock (``tests/fixtures/cli-reference/vibe/acp/README.md``, medians): ``initialize`` ~5 s once
per process, ``session/new`` 0.4-1.8 s, and a session made ahead of time shows its first text
~0.5 s after ``session/prompt``.

The protocol as vibe 3.0.2 speaks it (captured in ``tests/fixtures/cli-reference/vibe/acp``):

* ``initialize`` → ``{"protocolVersion": 1, "agentCapabilities": {...}}``. The client offers
  no file system, no terminal and no elicitation, so vibe never asks the client to run
  anything.
* ``session/new {"cwd", "mcpServers": []}`` → ``{"sessionId", ...}``. Sends no upstream
  request. Sessions share nothing the model sees: each upstream request holds only its own
  session's prompt (isolation checked on the real binary).
* ``session/prompt {"sessionId", "prompt": [{"type": "text", "text"}]}``: ``session/update``
  notifications stream (``agent_message_chunk`` text deltas, ``usage_update``,
  ``user_message_chunk`` echo, ``session_info_update`` title), ``_session/retrying``
  notifications while vibe retries the upstream, then the response: a result
  ``{"stopReason": "end_turn" | "cancelled" | "max_tokens" | ..., "usage": {...}}`` or a
  JSON-RPC error (``-31001`` rate limited, ``-31002`` configuration, e.g. a bad API key,
  ``-32603`` anything else, with vibe's message). Notifications for a session can still
  arrive after its result (a title, a usage update): they are dropped.
* ``session/cancel`` (a notification) makes the pending prompt answer ``stopReason:
  "cancelled"`` within ~0.1 s and closes the upstream connection.
* ``_session/delete {"sessionId"}`` (vibe's extension) closes a session *and* removes its
  stored transcript from ``$VIBE_HOME`` (``session/close`` leaves ~50 KB per session there,
  forever); a session is deleted once its prompt is over.
* Client-bound requests: ``session/request_permission`` is answered with the ``cancelled``
  outcome, which vibe maps to *deny* (with :data:`TOOLS_OFF_ENV` none arrives: tools are
  denied by policy before any request); any other method gets JSON-RPC ``-32601``.

vibe-acp takes no ``--disabled-tools`` (its argv is ``[-h] [-v] [--setup]``; anything else
exits 2), so the tools are off through the environment only (:func:`server_env`).

A prompt whose first word starts with ``/`` is a vibe *command* in ACP (``/proxy-setup KEY
value`` writes ``$VIBE_HOME/.env``, ``/teleport``, ``/leanstall``, ``/reload``, ...) and is
never sent to the model: :func:`guard_prompt` puts a zero-width space in front of such a
prompt, so it reaches the model as text, as it does with ``vibe -p``.

Prompt text is never logged (method names, session ids and error codes are).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import trio

from olp.actors._lines import LineTooLong
from olp.actors._process import CliProcess

from ._invocation import TOOLS_OFF_ENV, model_env

__all__ = ["ACP_BINARY", "ACP_ENV", "CANCEL_GRACE_S", "DENY_PERMISSION", "AcpError",
           "AcpServer", "AcpServerGone", "AcpServerStatistics", "AcpSession", "acp_binary",
           "guard_prompt", "open_session", "server_env"]

log = logging.getLogger(__name__)

ACP_BINARY: Final = "vibe-acp"
PROTOCOL_VERSION: Final = 1
#: What OLP offers in ``initialize``: nothing the agent could ask the client to do.
CLIENT_CAPABILITIES: Final[Mapping[str, Any]] = {
    "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
#: The ``session/request_permission`` result that denies (vibe: not ``AllowedOutcome`` →
#: ``ApprovalDecisionType.DENY``, with no "try something else" feedback to the model).
DENY_PERMISSION: Final[Mapping[str, Any]] = {"outcome": {"outcome": "cancelled"}}
#: Added for a long-lived process: no background title-generation request (a second billed
#: upstream call carrying the whole exchange) after every prompt. Session logging stays on:
#: with it off vibe keeps transcripts in a throwaway store ``_session/delete`` cannot clean,
#: and ``session/new`` began failing after six sessions (measured).
ACP_ENV: Final[Mapping[str, str]] = {"VIBE_SESSION_LOGGING__GENERATE_TITLES": "false"}
#: After :meth:`AcpSession.kill`, how long vibe gets to answer the cancel before the session
#: is ended as killed anyway.
CANCEL_GRACE_S: Final = 5.0
#: A write to the server's stdin that takes longer means it stopped reading: it is killed
#: (a half-written line would corrupt the stream for every session).
WRITE_TIMEOUT_S: Final = 10.0
#: What the :class:`AcpSession` protocol line carries after the updates.
RESULT_KEY: Final = "olp_prompt_result"
ERROR_KEY: Final = "olp_prompt_error"
COMMAND_GUARD: Final = "\u200b"  # ZERO WIDTH SPACE: not whitespace to str.split()

_CANCELLED = -9  # the return code of a session whose server died or that was killed


def acp_binary(vibe_binary: str) -> str:
    """``vibe-acp`` beside ``vibe_binary`` (the same installation) when that is a path,
    else the bare name (looked up on ``PATH``)."""
    if os.sep in vibe_binary:
        return str(Path(vibe_binary).with_name(ACP_BINARY))
    return ACP_BINARY


def server_env(model: str, vibe_home: Path) -> dict[str, str]:
    """The variables a ``vibe-acp`` process for ``model`` adds to the runner's base
    environment: ``VIBE_HOME``, :func:`model_env`, :data:`TOOLS_OFF_ENV` (as for ``vibe -p``)
    and :data:`ACP_ENV`."""
    return {"VIBE_HOME": str(vibe_home), **model_env(model), **TOOLS_OFF_ENV, **ACP_ENV}


def guard_prompt(text: str) -> str:
    """``text`` unchanged, unless vibe-acp would run it as a command (its first
    whitespace-separated word starts with ``/``): then with :data:`COMMAND_GUARD` in front."""
    words = text.split(None, 1)
    if words and words[0].startswith("/"):
        return COMMAND_GUARD + text
    return text


@contextlib.asynccontextmanager
async def open_session(server: AcpServer, cwd: Path) -> AsyncIterator[AcpSession]:
    """:meth:`AcpServer.new_session`, killed on the way out (a no-op once it is over), so a
    reader that stops early - a deadline, a client gone, a terminal event from the parser -
    never leaves a turn running in vibe."""
    session = await server.new_session(cwd)
    try:
        yield session
    finally:
        session.kill()


class AcpError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.error_message = str(error.get("message", ""))
        super().__init__(f"{method}: JSON-RPC error {self.code}: {self.error_message}")


class AcpServerGone(trio.BrokenResourceError):
    """The server process ended (or stopped reading) before it answered."""


@dataclass(frozen=True, slots=True)
class AcpServerStatistics:
    alive: bool
    initialized: bool
    sessions: int  # open sessions (made and not yet over)
    pending_calls: int
    denied_requests: int  # client-bound requests refused (permissions and others)


@dataclass(slots=True)
class _Call:
    method: str
    done: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None  # None: the server ended first


class AcpServer:
    """One running ``vibe-acp``, on ``process`` (spawned by the caller with an open stdin;
    the caller owns spawning, the sandbox and the process's lifetime).

    Run :meth:`serve` in a nursery with ``await nursery.start(server.serve)``: it returns
    once ``initialize`` has been answered (raising :class:`AcpError` or
    :class:`AcpServerGone` if it could not be), then reads the server until the process
    ends. Every write goes through one lock, so JSON lines never interleave.
    """

    def __init__(self, process: CliProcess, *, client_name: str = "olp",
                 client_version: str = "", cancel_grace: float = CANCEL_GRACE_S,
                 write_timeout: float = WRITE_TIMEOUT_S) -> None:
        self._process = process
        self._client_info = {"name": client_name, "version": client_version}
        self._cancel_grace = cancel_grace
        self._write_timeout = write_timeout
        self._write_lock = trio.Lock()
        self._pending: dict[int, _Call | AcpSession] = {}
        self._orphans: set[int] = set()  # session/new calls given up on: delete if answered
        self._sessions: dict[str, AcpSession] = {}
        self._next_id = 0
        self._nursery: trio.Nursery | None = None
        self._initialized = False
        self._ended = False
        self._denied = 0
        self.agent_info: Mapping[str, Any] = {}
        self.returncode: int | None = None

    # -- public ------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                    ) -> None:
        """Read the server, answer its requests, and ``initialize`` it; ``task_status
        .started()`` once initialized (bound that with ``trio.fail_after`` around
        ``nursery.start``: 4-11 s measured). Returns when the process has ended (every open
        session then ends with return code -9). Cancelling it ends the sessions the same
        way; the process itself is the caller's to stop."""
        failure: AcpError | AcpServerGone | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._read)
                try:
                    response = await self._call("initialize", {
                        "protocolVersion": PROTOCOL_VERSION,
                        "clientCapabilities": dict(CLIENT_CAPABILITIES),
                        "clientInfo": self._client_info})
                except (AcpError, AcpServerGone) as exc:
                    failure = exc  # raised below, alone (not in an exception group)
                    nursery.cancel_scope.cancel()
                else:
                    result = response.get("result")
                    info = result.get("agentInfo") if isinstance(result, dict) else None
                    self.agent_info = info if isinstance(info, dict) else {}
                    self._initialized = True
                    log.info("vibe-acp initialized: %s %s", self.agent_info.get("name"),
                             self.agent_info.get("version"))
                    task_status.started()
        finally:
            self._nursery = None
            self._end_everything()
        if failure is not None:
            raise failure

    async def new_session(self, cwd: Path) -> AcpSession:
        """A fresh session whose working directory is ``cwd`` (use an empty private
        directory: vibe inlines ``@file`` mentions from it into the prompt). Raises
        :class:`AcpError` if vibe refuses, :class:`AcpServerGone` if the server ended."""
        response = await self._call("session/new", {"cwd": str(cwd), "mcpServers": []})
        result = response.get("result")
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AcpError("session/new", {"code": None, "message": "no sessionId"})
        session = AcpSession(self, session_id, stderr_tail=self._process.stderr_tail)
        if self._ended:  # the server ended while we were being answered
            session._end(None, _CANCELLED)
        else:
            self._sessions[session_id] = session
        return session

    def alive(self) -> bool:
        """Initialized, being read, and the process has not ended."""
        return self._initialized and not self._ended and self._process.running()

    def rss_bytes(self) -> int:
        """The server's resident memory (its process group; reads ``/proc``). It grows by
        ~0.5-1 MB per session (measured): recycle a server after a few hundred sessions."""
        return self._process.rss_bytes()

    def statistics(self) -> AcpServerStatistics:
        return AcpServerStatistics(alive=self.alive(), initialized=self._initialized,
                                   sessions=len(self._sessions),
                                   pending_calls=sum(isinstance(p, _Call)
                                                     for p in self._pending.values()),
                                   denied_requests=self._denied)

    # -- requests and writes -----------------------------------------------------------

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    async def _call(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its response; raises :class:`AcpError` on an error
        response, :class:`AcpServerGone` if the server ends first."""
        request_id = self._new_id()
        call = _Call(method)
        self._pending[request_id] = call
        try:
            await self._write({"jsonrpc": "2.0", "id": request_id, "method": method,
                               "params": dict(params)})
            await call.done.wait()
        finally:
            self._pending.pop(request_id, None)
            if method == "session/new" and not call.done.is_set():
                self._orphans.add(request_id)  # cancelled: vibe may still make the session
        if call.response is None:
            raise AcpServerGone(f"vibe-acp ended before it answered {method}")
        if "error" in call.response:
            error = call.response["error"]
            raise AcpError(method, error if isinstance(error, dict) else {})
        return call.response

    async def _send_prompt(self, session: AcpSession, text: str) -> None:
        request_id = self._new_id()
        session._prompt_id = request_id
        self._pending[request_id] = session
        try:
            await self._write({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                               "params": {"sessionId": session.session_id,
                                          "prompt": [{"type": "text", "text": text}]}})
        except BaseException:
            self._pending.pop(request_id, None)
            raise

    async def _write(self, message: Mapping[str, Any]) -> None:
        """One JSON line to the server. The write itself is shielded (a line cut in half
        would corrupt the stream) but bounded: a server that does not take it is killed."""
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            if self._ended:
                raise AcpServerGone("vibe-acp has ended")
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self._write_timeout
                try:
                    await self._process.send_input(line, close=False)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise AcpServerGone("vibe-acp no longer reads its stdin") from exc
            if scope.cancelled_caught:
                log.warning("vibe-acp took no input for %g s: killing it", self._write_timeout)
                self._process.kill()
                raise AcpServerGone("vibe-acp stopped reading its stdin")

    async def _write_quietly(self, message: Mapping[str, Any]) -> None:
        """:meth:`_write` for replies and notifications nobody waits on."""
        try:
            await self._write(message)
        except AcpServerGone:
            pass

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` in the server's nursery; False once the server has ended."""
        if self._nursery is None or self._ended:
            return False
        self._nursery.start_soon(fn, *args)
        return True

    # -- reading -----------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                try:
                    line = await self._process.receive_line()
                except LineTooLong:
                    log.error("vibe-acp wrote a line over the limit: killing it")
                    self._process.kill()
                    line = None
                if line is None:
                    break
                self._route(line)
        finally:
            self._end_everything()
        with trio.move_on_after(5):  # stdout closed: the process is on its way out
            self.returncode = await self._process.wait()
        if self.returncode is None:
            self._process.kill()
            self.returncode = await self._process.wait()
        log.info("vibe-acp ended (return code %s)", self.returncode)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()  # serve() returns

    def _route(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.debug("vibe-acp: a stdout line that is not JSON (%d bytes)", len(line))
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self._answer_request(message["id"], method, message.get("params"))
        elif isinstance(method, str):
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            session = self._sessions.get(session_id) if isinstance(session_id, str) else None
            if session is not None:
                session._deliver(line)
        elif "id" in message:
            request_id = message["id"]
            pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
            if isinstance(pending, _Call):
                pending.response = message
                pending.done.set()
            elif isinstance(pending, AcpSession):
                pending._prompt_answered(message)
            elif request_id in self._orphans:
                self._orphans.discard(request_id)
                result = message.get("result")
                session_id = result.get("sessionId") if isinstance(result, dict) else None
                if isinstance(session_id, str):
                    self._spawn(self._delete, session_id)

    def _answer_request(self, request_id: Any, method: str, params: Any) -> None:
        """Deny every client-bound request: a permission with the deny outcome, anything
        else with "method not found"."""
        self._denied += 1
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if method == "session/request_permission":
            log.warning("vibe-acp asked permission for a tool (session %s): denied",
                        session_id)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                                     "result": dict(DENY_PERMISSION)}
        else:
            log.warning("vibe-acp sent a %s request: refused", method)
            reply = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": -32601, "message": f"{method} is not supported"}}
        self._spawn(self._write_quietly, reply)

    def _end_everything(self) -> None:
        """The server is gone: every pending call fails, every open session ends (-9)."""
        if self._ended:
            return
        self._ended = True
        for pending in list(self._pending.values()):
            if isinstance(pending, _Call):
                pending.done.set()
        self._pending.clear()
        for session in list(self._sessions.values()):
            session._end(None, _CANCELLED)
        self._sessions.clear()

    # -- session housekeeping ----------------------------------------------------------

    def _session_over(self, session: AcpSession) -> None:
        """A session's prompt is over (or it was never used): forget it, and delete it in
        vibe (which also removes its stored transcript)."""
        if self._sessions.pop(session.session_id, None) is not None:
            self._spawn(self._delete, session.session_id)
        if session._prompt_id is not None:
            self._pending.pop(session._prompt_id, None)

    async def _delete(self, session_id: str) -> None:
        try:
            await self._call("_session/delete", {"sessionId": session_id})
        except AcpError:  # not this vibe's extension: at least close it
            try:
                await self._call("session/close", {"sessionId": session_id})
            except (AcpError, AcpServerGone):
                pass
        except AcpServerGone:
            pass

    async def _cancel(self, session: AcpSession) -> None:
        """``session/cancel`` once the prompt is written, then end the session as killed if
        vibe has not answered within the grace."""
        with trio.move_on_after(self._cancel_grace):
            await session._prompt_written.wait()
            if not session._over.is_set():
                log.info("cancelling vibe-acp session %s", session.session_id)
                await self._write_quietly({"jsonrpc": "2.0", "method": "session/cancel",
                                           "params": {"sessionId": session.session_id}})
            await session._over.wait()
        session._end(None, _CANCELLED)  # no-op when vibe answered


class AcpSession:
    """One single-use session on an :class:`AcpServer`, read like a
    :class:`~olp.actors._process.CliProcess`:

    * :meth:`send_input` sends the one prompt (the bytes OLP gives ``vibe -p`` on stdin);
    * :meth:`receive_line` returns the raw JSON line of each notification for this session
      from then on (``session/update``, ``_session/retrying``), then one synthetic line
      ``{"olp_prompt_result": <result>}`` or ``{"olp_prompt_error": <error>}``, then None;
    * :meth:`wait` returns 0 after a result, 1 after an error response, -9 when the server
      ended first or the session was killed and vibe did not answer the cancel in time.

    Made by :meth:`AcpServer.new_session` (or :func:`open_session`, which kills it on the way
    out); deleted in vibe once its prompt is over (or when :meth:`kill` ends it unused). A
    reader that stops before the end must call :meth:`kill`.
    """

    def __init__(self, server: AcpServer, session_id: str, *,
                 stderr_tail: Callable[[], bytes]) -> None:
        self._server = server
        self.session_id = session_id
        self._stderr_tail = stderr_tail
        self._send, self._recv = trio.open_memory_channel[bytes](math.inf)
        # Unbounded on purpose: the server's one reader must never wait on one session's
        # consumer, and a session's lines are bounded by its one answer.
        self._state: Literal["idle", "prompting", "over"] = "idle"
        self._prompt_id: int | None = None
        self._prompt_written = trio.Event()
        self._over = trio.Event()
        self._killed = False
        self.returncode: int | None = None

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        """Send ``data`` (UTF-8 text) as the session's one prompt, through
        :func:`guard_prompt`. ``close`` is accepted for the protocol's sake: the input is
        always complete. Raises :class:`trio.BrokenResourceError` when the server has
        ended, :class:`RuntimeError` on a second call."""
        del close
        if self._state != "idle":
            raise RuntimeError("an ACP session takes exactly one prompt")
        self._state = "prompting"
        text = guard_prompt(data.decode("utf-8", "replace"))
        try:
            await self._server._send_prompt(self, text)
        except AcpServerGone as exc:
            self._end(None, _CANCELLED)
            raise trio.BrokenResourceError("vibe-acp has ended") from exc
        except BaseException:  # cancelled before the line was written
            self._end(None, _CANCELLED)
            raise
        finally:
            self._prompt_written.set()

    async def receive_line(self) -> bytes | None:
        """The next line (see the class docstring), None at the end. Cancel-safe."""
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            return None

    async def wait(self) -> int:
        """Block until the session is over; 0 result, 1 error response, -9 ended/killed."""
        await self._over.wait()
        assert self.returncode is not None
        return self.returncode

    def stderr_tail(self) -> bytes:
        """The server's stderr tail (shared by all its sessions)."""
        return self._stderr_tail()

    def kill(self) -> None:
        """Stop the session now; never blocks. A prompt in flight gets ``session/cancel``
        (vibe answers ``stopReason: "cancelled"``, usually within 0.1 s; after
        :data:`CANCEL_GRACE_S` the session ends as -9 regardless); an unused session ends
        at once."""
        if self._over.is_set() or self._killed:
            return
        self._killed = True
        if self._state == "idle":
            self._state = "over"
            self._prompt_written.set()
            self._end(None, _CANCELLED)
        elif not self._server._spawn(self._server._cancel, self):
            self._end(None, _CANCELLED)

    def running(self) -> bool:
        return not self._over.is_set()

    def rss_bytes(self) -> int:
        """The server's resident memory (shared by all its sessions)."""
        return self._server.rss_bytes()

    # -- called by the server ----------------------------------------------------------

    def _deliver(self, line: bytes) -> None:
        if self._state == "prompting" and not self._over.is_set():
            self._send.send_nowait(line)

    def _prompt_answered(self, message: Mapping[str, Any]) -> None:
        if "error" in message:
            error = message["error"]
            final = {ERROR_KEY: error if isinstance(error, dict) else {"message": str(error)}}
            code = 1
            log.info("vibe-acp session %s: error %s", self.session_id, final[ERROR_KEY].get(
                "code"))
        else:
            result = message.get("result")
            final = {RESULT_KEY: result if isinstance(result, dict) else {}}
            code = 0
        self._end(json.dumps(final, ensure_ascii=False, separators=(",", ":")).encode(), code)

    def _end(self, final_line: bytes | None, returncode: int) -> None:
        if self._over.is_set():
            return
        if final_line is not None:
            self._send.send_nowait(final_line)
        self._send.close()
        self._state = "over"
        self.returncode = returncode
        self._over.set()
        self._server._session_over(self)
