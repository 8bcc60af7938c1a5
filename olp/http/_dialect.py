"""The wire dialects the chat endpoints speak: one engine answer, written as OpenAI Chat
Completions (``/v1/chat/completions``), Anthropic Messages (``/v1/messages``) or OpenAI
Responses (``/v1/responses``).

A :class:`Dialect` knows its bodies — a complete answer, an error — and makes a
:class:`StreamWriter` per streamed answer. Everything else (auth, routing, the engine, the
cache, OLP's headers, the first-chunk rule) is the same for every dialect. Pure, but for
the Responses dialect's memory of answers (``previous_response_id``: :mod:`._response_memory`).

The model's thinking (:class:`~olp.ir.ReasoningDelta`) reaches a writer or ``complete`` only
when the request asked for it back (:func:`shows_reasoning`); otherwise the HTTP edge drops it
(:func:`visible`). It is never content: a writer's ``reasoning`` is not the first content.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Protocol

from olp.ir import ChatRequest, Event, FinishReason, ReasoningDelta, ToolCallDelta, Usage
from olp.ir import anthropic as anthropic_wire
from olp.ir import responses as responses_wire
from olp.ir.openai import DONE, ChunkEncoder, CompletionBuilder, completion_id, error_body

if TYPE_CHECKING:
    from ._response_memory import ResponseMemory


class WireError(Protocol):
    """What a dialect needs of an error (``ApiError`` has it)."""

    status: int
    message: str
    type: str
    code: str | None
    param: str | None


class StreamWriter(Protocol):
    """The frames of one streamed answer. ``model`` may change until the first frame."""

    model: str

    def begin(self) -> bytes:
        """What goes before the first content (OpenAI's role delta, Anthropic's
        ``message_start``)."""
        ...

    def text(self, text: str) -> bytes: ...

    def reasoning(self, text: str) -> bytes:
        """A piece of the model's thinking (chat ``reasoning_content``, a Responses
        ``reasoning`` item, a Messages ``thinking`` block)."""
        ...

    def tool_call(self, delta: ToolCallDelta) -> bytes: ...

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes:
        """The clean end of the stream."""
        ...

    def error(self, error: WireError) -> bytes:
        """The in-band error that ends a stream after it was committed (never a clean end)."""
        ...


def shows_reasoning(chat: ChatRequest) -> bool:
    """Whether the client asked for the model's thinking back (``Reasoning.show``)."""
    return chat.reasoning is not None and chat.reasoning.show


def visible(chat: ChatRequest, events: Iterable[Event]) -> list[Event]:
    """``events`` as the client may see them: without the model's thinking unless it was
    asked for (a cached answer keeps its thinking whoever asked first)."""
    if shows_reasoning(chat):
        return list(events)
    return [e for e in events if not isinstance(e, ReasoningDelta)]


class Dialect(Protocol):
    @property
    def name(self) -> str: ...

    def error_body(self, error: WireError) -> bytes: ...

    def complete(self, events: Iterable[Event], model: str) -> bytes:
        """The JSON body of a complete (non-streamed) answer."""
        ...

    def writer(self, model: str, *, include_usage: bool) -> StreamWriter: ...

    async def prepare(self, chat: ChatRequest) -> ChatRequest:
        """The request to answer, from the one decoded (Responses: with the conversation of
        its ``previous_response_id`` in front; raises an ``ApiError``)."""
        ...

    async def answered(self) -> None:
        """The answer ended cleanly: called before its body or last frame goes out
        (Responses: keeps it for a later ``previous_response_id``)."""
        ...


class _Plain:
    """The :class:`Dialect` hooks of a dialect that keeps nothing between requests."""

    async def prepare(self, chat: ChatRequest) -> ChatRequest:
        return chat

    async def answered(self) -> None:
        return None


class _OpenAIWriter:
    def __init__(self, model: str, include_usage: bool) -> None:
        self._enc = ChunkEncoder(id=completion_id(), created=int(time.time()), model=model,
                                 include_usage=include_usage)

    @property
    def model(self) -> str:
        return self._enc.model

    @model.setter
    def model(self, value: str) -> None:
        self._enc.model = value

    def begin(self) -> bytes:
        return self._enc.role()

    def text(self, text: str) -> bytes:
        return self._enc.text(text)

    def reasoning(self, text: str) -> bytes:
        return self._enc.reasoning(text)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        return self._enc.tool_call(delta)

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes:
        out = self._enc.finish(reason)
        if usage is not None:
            out += self._enc.usage(usage)
        return out + DONE

    def error(self, error: WireError) -> bytes:
        return ChunkEncoder.error(message=error.message, type=error.type, code=error.code,
                                  param=error.param)


class OpenAIChat(_Plain):
    """OpenAI Chat Completions: ``chat.completion`` bodies, ``chat.completion.chunk`` SSE
    ending in ``[DONE]``, ``{"error": {...}}`` errors (in a stream too, with no ``[DONE]``)."""

    name: Final = "openai"

    def error_body(self, error: WireError) -> bytes:
        return error_body(message=error.message, type=error.type, code=error.code,
                          param=error.param)

    def complete(self, events: Iterable[Event], model: str) -> bytes:
        builder = CompletionBuilder(id=completion_id(), created=int(time.time()), model=model)
        for event in events:
            builder.add(event)
        return builder.body()

    def writer(self, model: str, *, include_usage: bool) -> StreamWriter:
        return _OpenAIWriter(model, include_usage)


class _Encoder(Protocol):
    """What the Messages and Responses stream encoders of ``olp.ir`` have in common."""

    model: str

    def begin(self) -> bytes: ...

    def text(self, text: str) -> bytes: ...

    def reasoning(self, text: str) -> bytes: ...

    def tool_call(self, delta: ToolCallDelta) -> bytes: ...

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes: ...


class _EncoderWriter:
    """A :class:`StreamWriter` over one of those encoders; ``error`` writes the dialect's
    in-band error with it."""

    def __init__(self, enc: _Encoder, error: Callable[[Any, WireError], bytes]) -> None:
        self._enc = enc
        self._error = error

    @property
    def model(self) -> str:
        return self._enc.model

    @model.setter
    def model(self, value: str) -> None:
        self._enc.model = value

    def begin(self) -> bytes:
        return self._enc.begin()

    def text(self, text: str) -> bytes:
        return self._enc.text(text)

    def reasoning(self, text: str) -> bytes:
        return self._enc.reasoning(text)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        return self._enc.tool_call(delta)

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes:
        return self._enc.finish(reason, usage)

    def error(self, error: WireError) -> bytes:
        return self._error(self._enc, error)


class AnthropicMessages(_Plain):
    """Anthropic Messages: ``message`` bodies, the ``message_start`` … ``message_stop`` event
    sequence, ``{"type": "error", "error": {"type", "message"}}`` errors (``event: error`` in
    a stream). The error ``type`` follows the HTTP status, as Anthropic's API sets it."""

    name: Final = "anthropic"

    def error_body(self, error: WireError) -> bytes:
        return anthropic_wire.error_body(type=anthropic_wire.error_type(error.status),
                                         message=error.message)

    def complete(self, events: Iterable[Event], model: str) -> bytes:
        builder = anthropic_wire.MessageBuilder(id=anthropic_wire.message_id(), model=model)
        for event in events:
            builder.add(event)
        return builder.body()

    def writer(self, model: str, *, include_usage: bool) -> StreamWriter:
        enc = anthropic_wire.MessageStreamEncoder(id=anthropic_wire.message_id(), model=model)
        return _EncoderWriter(enc, lambda e, error: e.error(
            type=anthropic_wire.error_type(error.status), message=error.message))


class OpenAIResponses:
    """OpenAI Responses: ``response`` objects, the ``response.created`` …
    ``response.completed`` event sequence (``error`` and ``response.failed`` for a failure
    after content), and OpenAI's ``{"error": {...}}`` error bodies. With a ``memory`` (one
    per request: :mod:`._response_memory`) the answer has that memory's id, and
    ``previous_response_id`` works."""

    name: Final = "responses"

    def __init__(self, memory: ResponseMemory | None = None) -> None:
        self._memory = memory
        self._last: responses_wire.ResponseBuilder | responses_wire.ResponseStreamEncoder | \
            None = None

    def _id(self) -> str:
        return self._memory.id if self._memory is not None else responses_wire.response_id()

    def error_body(self, error: WireError) -> bytes:
        return OPENAI.error_body(error)

    def complete(self, events: Iterable[Event], model: str) -> bytes:
        builder = responses_wire.ResponseBuilder(id=self._id(), model=model)
        for event in events:
            builder.add(event)
        self._last = builder
        return builder.body()

    def writer(self, model: str, *, include_usage: bool) -> StreamWriter:
        enc = responses_wire.ResponseStreamEncoder(id=self._id(), model=model)
        self._last = enc
        return _EncoderWriter(enc, lambda e, error: e.error(code=error.code,
                                                            message=error.message))

    async def prepare(self, chat: ChatRequest) -> ChatRequest:
        return chat if self._memory is None else await self._memory.expand(chat)

    async def answered(self) -> None:
        if self._memory is not None and self._last is not None:
            await self._memory.keep(self._last.answer())


OPENAI: Final = OpenAIChat()
ANTHROPIC: Final = AnthropicMessages()
RESPONSES: Final = OpenAIResponses()


def dialect_for_path(path: str) -> Dialect:
    """The dialect of an error answered on ``path``: Anthropic's under ``/v1/messages``,
    OpenAI's everywhere else (the Responses dialect's errors are OpenAI's)."""
    return ANTHROPIC if path == "/v1/messages" or path.startswith("/v1/messages/") else OPENAI
