"""One request's conversation on a ``vibe-acp`` server, read like a CLI process."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import trio

from ._acp_protocol import ERROR_KEY, KILLED, RESULT_KEY, AcpServerGone, guard_prompt

if TYPE_CHECKING:
    from ._acp import AcpServer

__all__ = ["AcpSession"]

log = logging.getLogger("olp.providers.vibe._acp")  # the server's: one logger per process


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
            self._end(None, KILLED)
            raise trio.BrokenResourceError("vibe-acp has ended") from exc
        except BaseException:  # cancelled before the line was written
            self._end(None, KILLED)
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
        (vibe answers ``stopReason: "cancelled"``, usually within 0.1 s; after the server's
        cancel grace the session ends as -9 regardless); an unused session ends at once."""
        if self._over.is_set() or self._killed:
            return
        self._killed = True
        if self._state == "idle":
            self._state = "over"
            self._prompt_written.set()
            self._end(None, KILLED)
        elif not self._server._spawn(self._server._cancel, self):
            self._end(None, KILLED)

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
