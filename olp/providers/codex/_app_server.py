"""``codex app-server`` as a long-lived *model*: one process, a fresh thread per request.

:class:`AppServer` drives one ``codex app-server`` process, spawned by the caller with an
open stdin (``SpawnSpec(stdin=None)``): JSON-RPC in newline-delimited JSON over stdio
(``initialize`` and ``initialized`` once, then a ``thread/start`` per request).
:class:`~._app_thread.AppThread` is that request's conversation, read by the runner exactly
like a :class:`~olp.actors._process.CliProcess`. The rules OLP keeps:

* every server→client request (an approval, ``item/tool/requestUserInput``, a token refresh)
  is refused with ``-32601`` and logged, never left unanswered; the one exception is
  ``item/tool/call`` on a thread started with the request's tools (``dynamicTools``): that is
  the model calling the client's tool, which OLP returns to the client as ``tool_calls`` and
  ends the turn with ``turn/interrupt`` (codex then fails the call itself; answering it would
  let the model go on, a second billed request);
* a thread takes one turn per job; between jobs it is either kept for its conversation's
  next turn (its owner's choice, ``_app_units``) or closed: unsubscribed, after
  ``turn/interrupt`` when its turn is still running or paused on the client's tools;
  notifications no job reads are dropped;
* a killed thread gets ``turn/interrupt`` and ends as killed after :data:`CANCEL_GRACE_S`;
* ``account/rateLimits/updated`` (which names no thread) goes to every thread in a turn;
* prompt text is never logged (method names, thread ids and error codes are).

The protocol, its timings and memory: ``tests/fixtures/cli-reference/codex/app_server/``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from olp.actors._lines import LineTooLong
from olp.actors._process import CliProcess

from ._app_thread import KILLED, AppThread

__all__ = ["CANCEL_GRACE_S", "RATE_LIMITS", "AppServer", "AppServerError", "AppServerGone",
           "AppServerStatistics"]

log = logging.getLogger(__name__)

#: After :meth:`AppThread.kill`, how long codex gets to end the turn before the thread is
#: ended as killed anyway.
CANCEL_GRACE_S: Final = 5.0
#: A write to the server's stdin that takes longer means it stopped reading: it is killed.
WRITE_TIMEOUT_S: Final = 10.0
#: The notification that carries the login's usage windows (it names no thread).
RATE_LIMITS: Final = "account/rateLimits/updated"
#: codex asking the client to run one of the request's tools (``dynamicTools``).
TOOL_CALL: Final = "item/tool/call"


class AppServerError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.error_message = str(error.get("message", ""))
        super().__init__(f"{method}: JSON-RPC error {self.code}: {self.error_message}")


class AppServerGone(trio.BrokenResourceError):
    """The server process ended (or stopped reading) before it answered."""


@dataclass(frozen=True, slots=True)
class AppServerStatistics:
    alive: bool
    threads: int  # open threads (started and not yet over)
    pending_calls: int
    refused_requests: int  # server→client requests refused


@dataclass(slots=True)
class _Call:
    method: str
    done: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None  # None: the server ended first


class AppServer:
    """One running ``codex app-server`` on ``process`` (spawned by the caller with an open
    stdin; the caller owns spawning, the sandbox and the process's lifetime).

    Run :meth:`serve` with ``await nursery.start(server.serve)``: it returns once
    ``initialize`` has been answered (raising :class:`AppServerError` or
    :class:`AppServerGone` if it could not be), then reads the server until the process ends.
    Every write goes through one lock, so JSON lines never interleave.
    """

    def __init__(self, process: CliProcess, *, client_version: str = "",
                 cancel_grace: float = CANCEL_GRACE_S,
                 write_timeout: float = WRITE_TIMEOUT_S) -> None:
        self._process = process
        self._client_info = {"name": "olp", "title": None, "version": client_version}
        self._cancel_grace = cancel_grace
        self._write_timeout = write_timeout
        self._write_lock = trio.Lock()
        self._pending: dict[int, _Call] = {}
        self._threads: dict[str, AppThread] = {}
        self._next_id = 1
        self._nursery: trio.Nursery | None = None
        self._initialized = False
        self._ended = False
        self._refused = 0
        self.user_agent = ""
        self.returncode: int | None = None

    # -- public ------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                    ) -> None:
        """Read the server, refuse its requests, and initialize it; ``task_status
        .started()`` once initialized (~0.7 s measured; bound it with ``trio.fail_after``
        around ``nursery.start``). Returns when the process has ended (every open thread
        then ends with return code -9); cancelling it ends them the same way. The process
        itself is the caller's to stop."""
        failure: AppServerError | AppServerGone | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._read)
                try:
                    result = await self._call("initialize", {
                        "clientInfo": self._client_info,
                        "capabilities": {"experimentalApi": True}})
                    await self._write({"method": "initialized"})
                except (AppServerError, AppServerGone) as exc:
                    failure = exc  # raised below, alone (not in an exception group)
                    nursery.cancel_scope.cancel()
                else:
                    agent = result.get("userAgent")
                    self.user_agent = agent if isinstance(agent, str) else ""
                    self._initialized = True
                    log.info("codex app-server initialized: %s", self.user_agent)
                    task_status.started()
        finally:
            self._nursery = None
            self._end_everything()
        if failure is not None:
            raise failure

    async def start_thread(self, params: Mapping[str, Any]) -> AppThread:
        """A fresh thread (``thread/start`` with ``params``). Raises :class:`AppServerError`
        if codex refuses, :class:`AppServerGone` if the server ended. Cancelled while
        waiting: a thread codex starts anyway is unsubscribed when its answer comes."""
        result = await self._call("thread/start", params)
        thread = result.get("thread")
        thread_id = thread.get("id") if isinstance(thread, dict) else None
        if not isinstance(thread_id, str) or not thread_id:
            raise AppServerError("thread/start", {"code": None, "message": "no thread id"})
        made = AppThread(self, thread_id, stderr_tail=self._process.stderr_tail)
        if self._ended:
            made._end(KILLED)
        else:
            self._threads[thread_id] = made
        return made

    def alive(self) -> bool:
        """Initialized, being read, and the process has not ended."""
        return self._initialized and not self._ended and self._process.running()

    def open_threads(self) -> int:
        return len(self._threads)

    def rss_bytes(self) -> int:
        """The server's resident memory (its process group; reads ``/proc``)."""
        return self._process.rss_bytes()

    def statistics(self) -> AppServerStatistics:
        return AppServerStatistics(alive=self.alive(), threads=len(self._threads),
                                   pending_calls=len(self._pending),
                                   refused_requests=self._refused)

    # -- requests and writes (also used by AppThread) ---------------------------------

    async def _call(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its result; raises :class:`AppServerError` on an
        error response, :class:`AppServerGone` if the server ends first."""
        request_id = self._next_id
        self._next_id += 1
        call = _Call(method)
        self._pending[request_id] = call
        try:
            await self._write({"id": request_id, "method": method, "params": dict(params)})
            await call.done.wait()
        finally:
            self._pending.pop(request_id, None)
            if method == "thread/start" and not call.done.is_set() and not self._ended:
                self._pending[request_id] = _Call("thread/start (abandoned)")
        if call.response is None:
            raise AppServerGone(f"codex app-server ended before it answered {method}")
        if "error" in call.response:
            error = call.response["error"]
            raise AppServerError(method, error if isinstance(error, dict) else {})
        result = call.response.get("result")
        return result if isinstance(result, dict) else {}

    async def _write(self, message: Mapping[str, Any]) -> None:
        """One JSON line to the server. The write itself is shielded (a line cut in half
        would corrupt the stream for every thread) but bounded: a server that does not take
        it is killed."""
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            if self._ended:
                raise AppServerGone("codex app-server has ended")
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self._write_timeout
                try:
                    await self._process.send_input(line, close=False)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise AppServerGone("codex app-server no longer reads its stdin") from exc
            if scope.cancelled_caught:
                log.warning("codex app-server took no input for %g s: killing it",
                            self._write_timeout)
                self._process.kill()
                raise AppServerGone("codex app-server stopped reading its stdin")

    async def _call_quietly(self, method: str, params: Mapping[str, Any]) -> None:
        """:meth:`_call` whose answer nobody needs (housekeeping)."""
        try:
            await self._call(method, params)
        except (AppServerError, AppServerGone) as exc:
            log.debug("codex app-server: %s", exc)

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
                    log.error("codex app-server wrote a line over the limit: killing it")
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
        log.info("codex app-server ended (return code %s)", self.returncode)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()  # serve() returns

    def _route(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.debug("codex app-server: a stdout line that is not JSON (%d bytes)", len(line))
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            params = message.get("params")
            thread_id = params.get("threadId") if isinstance(params, dict) else None
            asker = self._threads.get(thread_id) if isinstance(thread_id, str) else None
            if method == TOOL_CALL and asker is not None and asker.takes_tool_calls \
                    and isinstance(params, dict):
                asker._ask(params.get("callId"), message["id"])  # the client's tool: see above
                asker._deliver(line, method)
            else:
                self._refuse(message["id"], method)
        elif isinstance(method, str):
            params = message.get("params")
            if method == RATE_LIMITS:
                for thread in list(self._threads.values()):
                    thread._deliver(line, method)
                return
            thread_id = params.get("threadId") if isinstance(params, dict) else None
            found = self._threads.get(thread_id) if isinstance(thread_id, str) else None
            if found is not None:
                found._deliver(line, method)
        elif "id" in message:
            request_id = message["id"]
            call = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
            if call is None:
                return
            if call.method == "thread/start (abandoned)":  # started for nobody: let it go
                result = message.get("result")
                started = result.get("thread") if isinstance(result, dict) else None
                thread_id = started.get("id") if isinstance(started, dict) else None
                if isinstance(thread_id, str):
                    self._spawn(self._call_quietly, "thread/unsubscribe",
                                {"threadId": thread_id})
                return
            call.response = message
            call.done.set()

    def _refuse(self, request_id: Any, method: str) -> None:
        """Refuse a server→client request: OLP offers codex nothing to ask for."""
        self._refused += 1
        log.warning("codex app-server sent a %s request: refused", method)
        self._spawn(self._write_quietly, {
            "id": request_id, "error": {"code": -32601, "message": f"{method} is not supported"}})

    async def _write_quietly(self, message: Mapping[str, Any]) -> None:
        try:
            await self._write(message)
        except AppServerGone:
            pass

    def _end_everything(self) -> None:
        """The server is gone: every pending call fails, every open thread ends (-9)."""
        if self._ended:
            return
        self._ended = True
        for call in list(self._pending.values()):
            call.done.set()
        self._pending.clear()
        for thread in list(self._threads.values()):
            thread._end(KILLED)
        self._threads.clear()

    # -- thread housekeeping (called by AppThread) -------------------------------------

    def _release(self, thread: AppThread) -> None:
        """Forget a thread for good: interrupt a turn still paused on the client's tools,
        then unsubscribe it."""
        if self._threads.pop(thread.thread_id, None) is None:
            return
        paused = thread.turn_id if thread.asked else None
        thread.asked = {}
        self._spawn(self._unsubscribe, thread.thread_id, paused)

    async def _unsubscribe(self, thread_id: str, paused_turn: str | None) -> None:
        if paused_turn is not None:
            await self._call_quietly("turn/interrupt", {"threadId": thread_id,
                                                        "turnId": paused_turn})
        await self._call_quietly("thread/unsubscribe", {"threadId": thread_id})

    async def _interrupt(self, thread: AppThread) -> None:
        """``turn/interrupt`` once the turn has started, then end the thread as killed if
        codex has not ended the turn within the grace."""
        with trio.move_on_after(self._cancel_grace):
            await thread._turn_started.wait()
            if not thread._over.is_set() and thread.turn_id is not None:
                log.info("interrupting codex thread %s", thread.thread_id)
                await self._call_quietly("turn/interrupt", {"threadId": thread.thread_id,
                                                            "turnId": thread.turn_id})
            await thread._over.wait()
        thread._end(KILLED)  # a no-op when codex ended the turn
