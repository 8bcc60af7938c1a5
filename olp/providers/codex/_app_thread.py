"""One conversation's thread on a ``codex app-server``, read like a CLI process, one job at a
time."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import trio

if TYPE_CHECKING:
    from ._app_server import AppServer

__all__ = ["KILLED", "TURN_COMPLETED", "TURN_START_FAILED", "AppThread"]

log = logging.getLogger("olp.providers.codex._app_server")  # the server's: one per process

#: The return code of a thread whose server died or that was killed.
KILLED: Final = -9
TURN_COMPLETED: Final = "turn/completed"
#: The synthetic line a job ends with when codex refused ``turn/start``.
TURN_START_FAILED: Final = "olp/turnStartFailed"


class AppThread:
    """A thread on an :class:`~._app_server.AppServer`, read like a
    :class:`~olp.actors._process.CliProcess` by one job at a time:

    * :meth:`send_input` starts the job's turn (``turn/start``) with the bytes OLP gives
      ``codex exec`` on stdin as its text (or :attr:`turn_text`, a continued conversation's
      new turns only), plus :attr:`turn_params` (images, the output schema, the reasoning
      effort and summary); or, with :attr:`tool_answers`, answers codex's pending
      ``item/tool/call`` requests instead, and the turn they paused goes on;
    * :meth:`receive_line` returns the raw JSON line of each notification for this thread,
      ending with ``turn/completed`` (or one synthetic :data:`TURN_START_FAILED` line), then
      None;
    * :meth:`wait` returns 0 after ``turn/completed``, 1 when ``turn/start`` was refused,
      -9 when the server ended first or the turn was killed and codex did not end it in time.

    Made by :meth:`AppServer.start_thread`. :meth:`reuse` readies it for the conversation's
    next job; :meth:`close` interrupts a running turn and unsubscribes it. A reader that
    stops before the end must call :meth:`kill` or :meth:`close`.
    """

    #: The runner does not kill a thread at the model's tool calls: its owner decides
    #: (``olp/actors/_cli_runner.py``).
    holds_tool_calls = True

    def __init__(self, server: AppServer, thread_id: str, *,
                 stderr_tail: Callable[[], bytes]) -> None:
        self._server = server
        self.thread_id = thread_id
        self.turn_id: str | None = None
        self.turn_params: Mapping[str, Any] = {}
        self.turn_text: str | None = None
        #: ``(request id, output text)``: what the next :meth:`send_input` answers.
        self.tool_answers: Sequence[tuple[Any, str]] = ()
        #: Started with the request's tools: codex's ``item/tool/call`` reaches the parser.
        self.takes_tool_calls = False
        #: codex's pending ``item/tool/call`` requests: call id → request id.
        self.asked: dict[str, Any] = {}
        self._asked_changed = trio.Event()
        self._closing = False
        self._open()

    def _open(self) -> None:
        self._send, self._recv = trio.open_memory_channel[bytes](math.inf)
        # Unbounded on purpose: the server's one reader must never wait on one thread's
        # consumer, and a job's lines are bounded by its one answer.
        self._state: Literal["idle", "turning", "over"] = "idle"
        self._turn_started = trio.Event()
        self._over = trio.Event()
        self._killed = False
        self.returncode: int | None = None

    def reuse(self) -> None:
        """Ready for the conversation's next job: a fresh stream of lines (whatever came
        since the last job read is dropped); codex's side of the thread is unchanged."""
        self._send.close()
        self._open()

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        """Start the job's turn (see the class docstring). ``close`` is accepted for the
        protocol's sake. Raises :class:`trio.BrokenResourceError` when the server has ended,
        :class:`RuntimeError` on a second call; a refused ``turn/start`` ends the job with a
        :data:`TURN_START_FAILED` line."""
        del close
        from ._app_server import AppServerError, AppServerGone

        if self._state != "idle":
            raise RuntimeError("an app-server thread takes one turn per job")
        self._state = "turning"
        try:
            if self.tool_answers:
                answers, self.tool_answers = self.tool_answers, ()
                for request_id, text in answers:
                    self.asked = {k: v for k, v in self.asked.items() if v != request_id}
                    await self._server._write({"id": request_id, "result": {
                        "contentItems": [{"type": "inputText", "text": text}],
                        "success": True}})
                return
            text = self.turn_text if self.turn_text is not None \
                else data.decode("utf-8", "replace")
            params = {"threadId": self.thread_id, **self.turn_params,
                      "input": [{"type": "text", "text": text, "text_elements": []},
                                *self.turn_params.get("input", ())]}
            result = await self._server._call("turn/start", params)
        except AppServerGone as exc:
            self._end(KILLED)
            raise trio.BrokenResourceError("codex app-server has ended") from exc
        except AppServerError as exc:
            log.info("codex thread %s: turn/start refused (%s)", self.thread_id, exc.code)
            line = json.dumps({"method": TURN_START_FAILED, "params": {
                "code": exc.code, "message": exc.error_message}}).encode()
            self._end(1, line)
            return
        except BaseException:  # cancelled before the answer came
            self._end(KILLED)
            raise
        finally:
            self._turn_started.set()
        turn = result.get("turn")
        turn_id = turn.get("id") if isinstance(turn, dict) else None
        self.turn_id = turn_id if isinstance(turn_id, str) else None

    async def receive_line(self) -> bytes | None:
        """The next line (see the class docstring), None at the end. Cancel-safe."""
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            return None

    async def wait(self) -> int:
        """Block until the job's turn is over; 0 completed, 1 refused, -9 ended/killed."""
        await self._over.wait()
        assert self.returncode is not None
        return self.returncode

    async def wait_asked(self, call_ids: Sequence[str]) -> bool:
        """Wait until codex has asked for every call in ``call_ids`` (its ``item/tool/call``
        can come just after the response that made the calls); False if the turn ended
        first. The caller bounds the wait."""
        while not all(c in self.asked for c in call_ids):
            if self._over.is_set() or not self._server.alive():
                return False
            self._asked_changed = trio.Event()
            with trio.move_on_after(0.05):  # the turn may end meanwhile (no event for that)
                await self._asked_changed.wait()
        return True

    def stderr_tail(self) -> bytes:
        """The server's stderr tail (shared by all its threads)."""
        return self._server._process.stderr_tail()

    def kill(self) -> None:
        """Stop the job now; never blocks. A turn in flight gets ``turn/interrupt`` (after
        the server's grace the job ends as -9 regardless); an unused thread ends at once."""
        if self._over.is_set() or self._killed:
            return
        self._killed = True
        if self._state == "idle":
            self._state = "over"
            self._turn_started.set()
            self._end(KILLED)
        elif not self._server._spawn(self._server._interrupt, self):
            self._end(KILLED)

    def close(self) -> None:
        """End the thread for good: interrupt a turn in flight (or one paused on the
        client's tools), then unsubscribe it. Sync; the rest happens in the server."""
        self._closing = True
        if self._over.is_set():
            self._server._release(self)
        else:
            self.kill()  # the release follows the turn's end

    def running(self) -> bool:
        return not self._over.is_set()

    def rss_bytes(self) -> int:
        """The server's resident memory (shared by all its threads)."""
        return self._server.rss_bytes()

    # -- called by the server ----------------------------------------------------------

    def _deliver(self, line: bytes, method: str) -> None:
        if self._state != "turning" or self._over.is_set():
            return
        self._send.send_nowait(line)
        if method == TURN_COMPLETED:
            self.asked.clear()
            self._end(0)

    def _ask(self, call_id: Any, request_id: Any) -> None:
        """codex asked for the client's tool (``item/tool/call``)."""
        if isinstance(call_id, str):
            self.asked[call_id] = request_id
            self._asked_changed.set()

    def _end(self, returncode: int, final_line: bytes | None = None) -> None:
        if self._over.is_set():
            return
        if final_line is not None:
            self._send.send_nowait(final_line)
        self._send.close()
        self._state = "over"
        self.returncode = returncode
        self._over.set()
        self._asked_changed.set()
        if self._closing:
            self._server._release(self)
