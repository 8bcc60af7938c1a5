"""The body of a streaming chat response: an :class:`~olp.engine.Answer` as SSE frames."""

from __future__ import annotations

from collections.abc import Callable

import trio

from olp.engine import Answer
from olp.ir import Error, Event, Stop, TextDelta, ToolCallDelta, Usage
from olp.ir.openai import DONE, ChunkEncoder

KEEPALIVE = b": keepalive\n\n"


class SseBody:
    """An async iterator of SSE frames (a class, not an async generator: no finalisation
    surprises when a client disconnects; STYLE pitfall 17).

    The first frame carries the role delta and the first content together. The stream ends
    with ``finish``, the usage chunk when asked for, and ``[DONE]`` — or, when the hop fails
    after content was sent, with an ``error`` event and no ``[DONE]``, so clients raise.
    ``on_end(outcome)`` is called once, with ``"ok"``, the error code, or ``"disconnected"``.
    With ``keepalive_s``, a ``: keepalive`` comment is sent after that much silence.
    """

    OnEnd = Callable[[str], None]

    def __init__(self, answer: Answer, encoder: ChunkEncoder, on_end: OnEnd, *,
                 keepalive_s: float | None = None) -> None:
        self._keepalive_s = keepalive_s
        self._answer = answer
        self._enc = encoder
        self._on_end = on_end
        self._usage: Usage | None = None
        self._started = False
        self._finished = False

    def __aiter__(self) -> SseBody:
        return self

    async def __anext__(self) -> bytes:
        if self._finished:
            raise StopAsyncIteration
        out = bytearray()
        if not self._started:
            self._started = True
            out += self._enc.role()
        while True:
            if self._keepalive_s is None or out:
                event = await self._answer.__anext__()
            else:
                # The event sources are cancel-safe: a timed-out receive loses nothing.
                received: Event | None = None
                with trio.move_on_after(self._keepalive_s):
                    received = await self._answer.__anext__()
                if received is None:
                    return KEEPALIVE
                event = received
            self._enc.model = self._answer.model
            match event:
                case TextDelta(text=text):
                    out += self._enc.text(text)
                    return bytes(out)
                case ToolCallDelta():
                    out += self._enc.tool_call(event)
                    return bytes(out)
                case Usage():
                    self._usage = event
                case Stop(finish_reason=reason):
                    out += self._enc.finish(reason)
                    if self._usage is not None and self._enc.include_usage:
                        out += self._enc.usage(self._usage)
                    out += DONE
                    self._end("ok")
                    return bytes(out)
                case Error():
                    out += self._enc.error(message=event.message, type="api_error",
                                           code=event.code.lower())
                    self._end(event.code)
                    return bytes(out)
                case _:
                    pass  # Start, Retrying: not for the client

    def _end(self, outcome: str) -> None:
        if not self._finished:
            self._finished = True
            self._answer.close()
            self._on_end(outcome)

    async def aclose(self) -> None:
        """Called by Quart when the response ends, normally or not. No checkpoint."""
        self._end("disconnected")

