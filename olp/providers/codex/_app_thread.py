"""One request's thread on a ``codex app-server``, read like a CLI process."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import trio

if TYPE_CHECKING:
    from ._app_server import AppServer

__all__ = ["KILLED", "TURN_COMPLETED", "TURN_START_FAILED", "AppThread"]

log = logging.getLogger("olp.providers.codex._app_server")  # the server's: one per process

#: The return code of a thread whose server died or that was killed.
KILLED: Final = -9
TURN_COMPLETED: Final = "turn/completed"
#: The synthetic line a thread ends with when codex refused ``turn/start``.
TURN_START_FAILED: Final = "olp/turnStartFailed"


class AppThread:
    """One single-use thread on an :class:`~._app_server.AppServer`, read like a
    :class:`~olp.actors._process.CliProcess`:

    * :meth:`send_input` starts its one turn (``turn/start``) with the bytes OLP gives
      ``codex exec`` on stdin as its text, plus :attr:`turn_params` (images, the output
      schema, the reasoning effort and summary);
    * :meth:`receive_line` returns the raw JSON line of each notification for this thread,
      ending with ``turn/completed`` (or one synthetic :data:`TURN_START_FAILED` line), then
      None;
    * :meth:`wait` returns 0 after ``turn/completed``, 1 when ``turn/start`` was refused,
      -9 when the server ended first or the thread was killed and codex did not end the turn
      in time.

    Made by :meth:`AppServer.start_thread`; unsubscribed once over. A reader that stops
    before the end must call :meth:`kill`.
    """

    def __init__(self, server: AppServer, thread_id: str, *,
                 stderr_tail: Callable[[], bytes]) -> None:
        self._server = server
        self.thread_id = thread_id
        self.turn_id: str | None = None
        self.turn_params: Mapping[str, Any] = {}
        #: Started with the request's tools: codex's ``item/tool/call`` reaches the parser.
        self.takes_tool_calls = False
        self._stderr_tail = stderr_tail
        self._send, self._recv = trio.open_memory_channel[bytes](math.inf)
        # Unbounded on purpose: the server's one reader must never wait on one thread's
        # consumer, and a thread's lines are bounded by its one answer.
        self._state: Literal["idle", "turning", "over"] = "idle"
        self._turn_started = trio.Event()
        self._over = trio.Event()
        self._killed = False
        self.returncode: int | None = None

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        """Start the thread's one turn with ``data`` (UTF-8 text) as its input. ``close`` is
        accepted for the protocol's sake. Raises :class:`trio.BrokenResourceError` when the
        server has ended, :class:`RuntimeError` on a second call; a refused ``turn/start``
        ends the thread with a :data:`TURN_START_FAILED` line."""
        del close
        from ._app_server import AppServerError, AppServerGone

        if self._state != "idle":
            raise RuntimeError("an app-server thread takes exactly one turn")
        self._state = "turning"
        text = data.decode("utf-8", "replace")
        params = {"threadId": self.thread_id, **self.turn_params,
                  "input": [{"type": "text", "text": text, "text_elements": []},
                            *self.turn_params.get("input", ())]}
        try:
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
        """Block until the thread is over; 0 completed, 1 refused, -9 ended/killed."""
        await self._over.wait()
        assert self.returncode is not None
        return self.returncode

    def stderr_tail(self) -> bytes:
        """The server's stderr tail (shared by all its threads)."""
        return self._stderr_tail()

    def kill(self) -> None:
        """Stop the thread now; never blocks. A turn in flight gets ``turn/interrupt``
        (after the server's grace the thread ends as -9 regardless); an unused thread ends
        at once."""
        if self._over.is_set() or self._killed:
            return
        self._killed = True
        if self._state == "idle":
            self._state = "over"
            self._turn_started.set()
            self._end(KILLED)
        elif not self._server._spawn(self._server._interrupt, self):
            self._end(KILLED)

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
            self._end(0)

    def _end(self, returncode: int, final_line: bytes | None = None) -> None:
        if self._over.is_set():
            return
        if final_line is not None:
            self._send.send_nowait(final_line)
        self._send.close()
        self._state = "over"
        self.returncode = returncode
        self._over.set()
        self._server._thread_over(self)

