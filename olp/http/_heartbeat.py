"""``streaming.heartbeat_interval_ms``: ``: keepalive`` comments while a stream is silent.

Without heartbeats the response is returned (its headers committed) only with the first
content. With them, if no content arrived within one interval, a 200 is committed and
keep-alive comments flow until it does; a chain that then fails ends the stream with an
in-band error event (fallback still proceeds meanwhile: comments are not content). The
engine keeps working in a task of the app's background nursery, under a cancel scope this
request owns, so a client that leaves cancels it.
"""

from __future__ import annotations

import time

import trio

from olp.engine import Answer, ChainFailed, Engine, RequestContext
from olp.failures import Code
from olp.ir import ChatRequest
from olp.ir.openai import ChunkEncoder, completion_id

from ._sse import KEEPALIVE, SseBody


class Opening:
    """``engine.open`` running in a background task; :meth:`result` waits for it."""

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


class HeartbeatBody:
    """The body of a stream committed before its first content: keep-alive comments every
    ``interval`` until the answer is open, then the answer's frames (with keep-alives
    during its silences too)."""

    def __init__(self, opening: Opening, chat: ChatRequest, interval: float,
                 on_end: SseBody.OnEnd) -> None:
        self._opening = opening
        self._chat = chat
        self._interval = interval
        self._on_end = on_end
        self._inner: SseBody | None = None
        self._finished = False
        self._committed = False

    def __aiter__(self) -> HeartbeatBody:
        return self

    async def __anext__(self) -> bytes:
        if self._inner is not None:
            return await self._inner.__anext__()
        if self._finished:
            raise StopAsyncIteration
        if not self._committed:  # the heartbeat that committed the response goes out now
            self._committed = True
            return KEEPALIVE
        with trio.move_on_after(self._interval):
            try:
                answer = await self._opening.result()
            except ChainFailed as exc:
                self._finished = True
                self._on_end(exc.first[1].code if exc.first else Code.ALL_HOPS_COOLING)
                first = exc.first
                message = f"{first[0].provider}: {first[1].message}" if first else str(exc)
                code = first[1].code.lower() if first else "all_hops_cooling"
                return ChunkEncoder.error(message=message, type="api_error", code=code)
            encoder = ChunkEncoder(id=completion_id(), created=int(time.time()),
                                   model=answer.model, include_usage=self._chat.include_usage)
            self._inner = SseBody(answer, encoder, self._on_end, keepalive_s=self._interval)
            return await self._inner.__anext__()
        return KEEPALIVE

    async def aclose(self) -> None:
        """Called by Quart when the response ends, normally or not. No checkpoint."""
        self._opening.cancel()
        if self._inner is not None:
            await self._inner.aclose()
        elif not self._finished:
            self._finished = True
            self._on_end("disconnected")
