"""The body of a streamed chat answer: SSE frames, with heartbeats as an option.

Without heartbeats the view returns the response only once the engine holds an answer whose
first content is in hand, so until then a failure can still be an HTTP status and the chain
can still fall back. With heartbeats (``streaming.heartbeat_interval_ms``) the view waits one
interval for that answer; if none came, it commits a 200 whose body sends ``: keepalive``
comments while the chain is still choosing a hop (comments are not content, so fallback
proceeds meanwhile). A chain that then fails ends the stream with the in-band form of the
error the view would have returned. Either way, once the answer is open a keep-alive is sent
after every silent interval. See ``docs/adr/0005-fallback-engine.md``.

A stream still running when the server's drain grace ends (see :mod:`._stopping`) ends with
an ``error`` event (``server_shutting_down``) and a complete body, and logs ``"shutdown"``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from olp.engine import Answer, ChainFailed, Engine, RequestContext
from olp.ir import ChatRequest, Error, Event, ReasoningDelta, Stop, TextDelta, ToolCallDelta, Usage
from olp.ir.openai import ChunkEncoder

from ._dialect import OPENAI, Dialect, StreamWriter, WireError, shows_reasoning
from ._errors import chain_error_frame, stream_error_frame
from ._stopping import SHUTDOWN_ERROR, STOPPING

KEEPALIVE = ChunkEncoder.keepalive()


class PendingAnswer:
    """``engine.open`` running in a background task, under a cancel scope the request owns;
    :meth:`result` waits for it, :meth:`cancel` stops it (the client left)."""

    def __init__(self, engine: Engine, chat: ChatRequest, context: RequestContext) -> None:
        self._engine, self._chat, self._context = engine, chat, context
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self._answer: Answer | None = None
        self._error: Exception | None = None
        self._abandoned = False

    async def run(self) -> None:
        """Run in a long-lived nursery; never raises (the error is kept for :meth:`result`)."""
        with self._scope:
            try:
                self._answer = await self._engine.open(self._chat, self._context)
            except Exception as exc:  # ChainFailed, UnknownModel: the request's to report
                self._error = exc
        self._done.set()
        if self._abandoned and self._answer is not None:
            self._answer.close()

    async def result(self) -> Answer:
        """The answer; raises what ``engine.open`` raised. Blocks until it is known."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        if self._answer is None:
            raise trio.ClosedResourceError("the opening was cancelled")
        return self._answer

    def cancel(self) -> None:
        """The request is gone: stop the engine, or close an answer nobody will read."""
        self._abandoned = True
        self._scope.cancel(reason="client gone")
        if self._answer is not None:
            self._answer.close()


class ChatStream:
    """An async iterator of the SSE frames of one chat answer (a class, not an async
    generator: nothing is left to a late finaliser when a client disconnects).

    ``answer`` is an open :class:`~olp.engine.Answer`, or, with ``heartbeat_s``, a
    :class:`PendingAnswer` (the response is committed before the first content: the first
    frame is a keep-alive). The first content frame carries the role delta too. The stream
    ends with ``finish``, the usage chunk when asked for, and ``[DONE]``; or, when the hop
    (or a pending chain) fails, with an ``error`` event and no ``[DONE]``, so clients raise.
    ``on_end(outcome, answer, failure)`` is called once, with ``"ok"``, the error code,
    ``"disconnected"``, or ``"shutdown"`` (the drain grace ended: an ``error`` event ends the
    body; see :class:`~._stopping.Stopping`, read from :data:`STOPPING` when the stream is
    made), the answer that streamed (``None`` if none opened) and, for a pending chain that
    failed, its :class:`ChainFailed`.
    With ``heartbeat_s``, a ``: keepalive`` comment is sent after that much silence.
    ``public_errors`` (a key that is not the owner's): error events carry no upstream text.
    ``dialect`` writes the frames (OpenAI's chunks, or Anthropic's events; see
    :mod:`._dialect`): the rules above are the same for every dialect. The model's thinking
    goes out as it comes when the request asked for it back, and is dropped otherwise; it is
    never content (the answer opened on content that followed it).
    """

    OnEnd = Callable[[str, "Answer | None", "ChainFailed | None"], None]

    def __init__(self, chat: ChatRequest, answer: Answer | PendingAnswer, on_end: OnEnd, *,
                 heartbeat_s: float | None = None, public_errors: bool = False,
                 dialect: Dialect = OPENAI) -> None:
        self._chat = chat
        self._show_reasoning = shows_reasoning(chat)
        self._dialect = dialect
        self._public = public_errors
        self._on_end = on_end
        self._heartbeat_s = heartbeat_s
        self._pending: PendingAnswer | None = None
        self._answer: Answer | None = None
        self._enc: StreamWriter | None = None
        self._usage: Usage | None = None
        self._committed = False  # a pending answer's first keep-alive has gone out
        self._started = False  # the role delta has gone out
        self._finished = False
        self._stopping = STOPPING.get()
        if isinstance(answer, PendingAnswer):
            if heartbeat_s is None:
                raise ValueError("a pending answer needs heartbeats to commit the response")
            self._pending = answer
        else:
            self._open(answer)

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> bytes:
        if self._finished:
            raise StopAsyncIteration
        if self._stopping is None:
            return await self._frame()
        frame: bytes | None = None
        if not self._stopping.is_set():
            with self._stopping.cut():  # the waits below are cancel-safe
                frame = await self._frame()
        if frame is None:  # the server is stopping
            return self._shutdown()
        return frame

    async def _frame(self) -> bytes:
        if self._answer is None:
            frame = await self._wait_for_answer()
            if frame is not None:
                return frame
        return await self._next_frame()

    def _shutdown(self) -> bytes:
        """The last frame of a stream cut by the end of the drain; the engine's work stops."""
        if self._pending is not None:
            self._pending.cancel()
        self._end("shutdown")
        return self._error_frame(SHUTDOWN_ERROR)

    async def _wait_for_answer(self) -> bytes | None:
        """A keep-alive while the chain is still choosing a hop, or its error as an event;
        ``None`` once the answer is open."""
        assert self._pending is not None and self._heartbeat_s is not None
        if not self._committed:  # the heartbeat that committed the response goes out now
            self._committed = True
            return KEEPALIVE
        with trio.move_on_after(self._heartbeat_s):
            try:
                self._open(await self._pending.result())
            except ChainFailed as exc:
                failure = chain_error_frame(self._chat, exc, public=self._public)
                self._end(failure.log_code, exc)
                return self._error_frame(failure.error)
            return None
        return KEEPALIVE

    def _error_frame(self, error: WireError) -> bytes:
        """An error event of this dialect, whether or not the answer opened."""
        enc = self._enc or self._dialect.writer(self._chat.model, include_usage=False)
        return enc.error(error)

    def _open(self, answer: Answer) -> None:
        self._answer = answer
        self._enc = self._dialect.writer(answer.model, include_usage=self._chat.include_usage)

    async def _next_frame(self) -> bytes:
        answer, enc = self._answer, self._enc
        assert answer is not None and enc is not None
        out = bytearray()
        if not self._started:
            self._started = True
            out += enc.begin()
        while True:
            if self._heartbeat_s is None or out:
                event = await answer.__anext__()
            else:
                # The event sources are cancel-safe: a timed-out receive loses nothing.
                received: Event | None = None
                with trio.move_on_after(self._heartbeat_s):
                    received = await answer.__anext__()
                if received is None:
                    return KEEPALIVE
                event = received
            enc.model = answer.model
            match event:
                case TextDelta(text=text):
                    out += enc.text(text)
                    return bytes(out)
                case ReasoningDelta(text=text):
                    if self._show_reasoning and text:
                        out += enc.reasoning(text)
                        return bytes(out)
                case ToolCallDelta():
                    out += enc.tool_call(event)
                    return bytes(out)
                case Usage():
                    self._usage = event
                case Stop(finish_reason=reason):
                    await self._dialect.answered()  # e.g. kept for previous_response_id
                    out += enc.finish(reason, self._usage)
                    self._end("ok")
                    return bytes(out)
                case Error():
                    out += stream_error_frame(enc, event, public=self._public)
                    self._end(event.code)
                    return bytes(out)
                case _:
                    pass  # Start, Retrying: not for the client

    def _end(self, outcome: str, failure: ChainFailed | None = None) -> None:
        if not self._finished:
            self._finished = True
            if self._answer is not None:
                self._answer.close()
            self._on_end(outcome, self._answer, failure)

    async def aclose(self) -> None:
        """Called by Quart when the response ends, normally or not. No checkpoint."""
        if self._pending is not None:
            self._pending.cancel()
        self._end("disconnected")
