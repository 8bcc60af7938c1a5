"""vibe's ACP server (``vibe-acp``) as a long-lived *model*: one process, single-use sessions.

:class:`AcpServer` drives one ``vibe-acp`` process, spawned by the caller with an open stdin
(``SpawnSpec(stdin=None)``): JSON-RPC 2.0 in newline-delimited JSON over stdio,
``initialize`` once, then a ``session/new`` per request. :class:`AcpSession` is that
request's conversation, read by the runner exactly like a
:class:`~olp.actors._process.CliProcess`. The rules OLP keeps:

* the client offers no file system, terminal or elicitation, and denies every client-bound
  request (a permission with the ``cancelled`` outcome, anything else ``-32601``);
* a session takes one prompt and is deleted in vibe (``_session/delete``, which also removes
  its stored transcript) once it is over; notifications after its result are dropped;
* a killed session gets ``session/cancel`` and ends as killed after :data:`CANCEL_GRACE_S`;
* prompt text is never logged (method names, session ids and error codes are).

The protocol, its timings and memory: ``tests/fixtures/cli-reference/vibe/acp/README.md``;
the wire constants and errors: :mod:`._acp_protocol`; the session: :mod:`._acp_session`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from olp.actors._lines import LineTooLong
from olp.actors._process import CliProcess

from ._acp_protocol import (
    ACP_BINARY,
    ACP_ENV,
    CLIENT_CAPABILITIES,
    COMMAND_GUARD,
    DENY_PERMISSION,
    ERROR_KEY,
    KILLED,
    PROTOCOL_VERSION,
    RESULT_KEY,
    AcpError,
    AcpServerGone,
    acp_binary,
    guard_prompt,
    server_env,
)
from ._acp_session import AcpSession

__all__ = ["ACP_BINARY", "ACP_ENV", "CANCEL_GRACE_S", "COMMAND_GUARD", "DENY_PERMISSION",
           "ERROR_KEY", "RESULT_KEY", "AcpError", "AcpServer", "AcpServerGone",
           "AcpServerStatistics", "AcpSession", "acp_binary", "guard_prompt", "open_session",
           "server_env"]

log = logging.getLogger(__name__)

#: After :meth:`AcpSession.kill`, how long vibe gets to answer the cancel before the session
#: is ended as killed anyway.
CANCEL_GRACE_S: Final = 5.0
#: A write to the server's stdin that takes longer means it stopped reading: it is killed
#: (a half-written line would corrupt the stream for every session).
WRITE_TIMEOUT_S: Final = 10.0


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
            session._end(None, KILLED)
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
            session._end(None, KILLED)
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
        session._end(None, KILLED)  # no-op when vibe answered
