"""OpenAI ``chat.completion.chunk`` events (and whole ``chat.completion`` bodies) → IR events.

Lenient on fields, strict on types: an event whose JSON does not parse, or whose
known fields have the wrong types, is *malformed*: skipped and counted, never fatal. Only
choice 0 is read (OLP asks for ``n=1``). Reasoning deltas (``reasoning_content``, or
``reasoning`` as some gateways name it) are passed on as :class:`~olp.ir.ReasoningDelta`, not
content (issue #27); a ``refusal`` delta is passed on as text, the one place the IR can carry
it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from olp.ir import (
    Error,
    Event,
    FinishReason,
    ReasoningDelta,
    Start,
    TextDelta,
    ToolCallDelta,
    Usage,
)

from ._sse import SSEEvent

DONE_MARKER: Final = "[DONE]"

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop", "length": "length", "tool_calls": "tool_calls",
    "content_filter": "content_filter", "function_call": "tool_calls",
}


class _Function(msgspec.Struct, kw_only=True):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct, kw_only=True):
    index: int = 0
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct, kw_only=True):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    delta: _Delta | None = None
    message: _Delta | None = None  # whole (non-streamed) completions
    finish_reason: str | None = None


class _InputDetails(msgspec.Struct, kw_only=True):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class _Usage(msgspec.Struct, kw_only=True):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    prompt_tokens_details: _InputDetails | None = None
    input_tokens_details: _InputDetails | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Chunk(msgspec.Struct, kw_only=True):
    model: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: dict[str, Any] | str | None = None


_DECODER: Final = msgspec.json.Decoder(_Chunk)

ErrorFactory = Callable[[dict[str, Any] | str], Error]


class ChunkReader:
    """Reads one attempt's stream. :meth:`feed` returns the non-terminal events an SSE event
    carries (``Start``, ``TextDelta``, ``ToolCallDelta``); the rest is state: ``done``
    (``[DONE]`` seen), ``finish_reason``, ``usage`` (the last reported), ``error`` (an
    in-stream error, already classified by ``on_error``) and ``malformed`` (skipped events).
    """

    def __init__(self, on_error: ErrorFactory) -> None:
        self._on_error = on_error
        self.done = False
        self.finish_reason: FinishReason | None = None
        self.usage: Usage | None = None
        self.error: Error | None = None
        self.malformed = 0
        self._model_seen = False

    def feed(self, sse: SSEEvent) -> list[Event]:
        if self.done or self.error is not None:
            return []
        data = sse.data.strip()
        if data == DONE_MARKER:
            self.done = True
            return []
        if sse.event == "error":  # whatever it holds, it is the upstream's error
            try:
                payload = msgspec.json.decode(data)
            except (msgspec.DecodeError, RecursionError):
                payload = data
            self.error = self._on_error(payload if isinstance(payload, (dict, str)) else data)
            return []
        try:
            chunk = _DECODER.decode(data)
        except (msgspec.DecodeError, RecursionError):
            self.malformed += 1
            return []
        return self.chunk(chunk)

    def feed_completion(self, body: bytes) -> list[Event]:
        """A whole ``chat.completion`` body (an upstream that ignored ``stream: true``)."""
        try:
            chunk = _DECODER.decode(body)
        except (msgspec.DecodeError, RecursionError):
            self.malformed += 1
            return []
        events = self.chunk(chunk)
        if self.error is None and self.finish_reason is None:
            self.finish_reason = "stop"
        return events

    def chunk(self, chunk: _Chunk) -> list[Event]:
        out: list[Event] = []
        if chunk.model and not self._model_seen:
            self._model_seen = True
            out.append(Start(model=chunk.model))
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            if choice.delta is not None:
                _delta_events(choice.delta, out)
            elif choice.message is not None:  # a whole message: calls are numbered in order
                _delta_events(choice.message, out, number_calls=True)
            if choice.finish_reason:
                if choice.finish_reason == "error" and chunk.error is None:
                    self.error = self._on_error(
                        {"message": "the upstream ended the answer with finish_reason "
                                    "'error'", "type": "server_error"})
                else:
                    self.finish_reason = _FINISH.get(choice.finish_reason, "stop")
        usage = _usage(chunk.usage) if chunk.usage is not None else None
        if usage is not None:
            self.usage = usage
        if chunk.error is not None:
            self.error = self._on_error(chunk.error if isinstance(chunk.error, str)
                                        else {"error": chunk.error})
        return out


def _usage(u: _Usage) -> Usage | None:
    """The IR's usage (prompt tokens count the cached ones), from OpenAI's names (its
    ``prompt_tokens`` or ``input_tokens`` counts the cached ones, told in ``*_details``), or
    Anthropic's (``input_tokens`` leaves out ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``); ``None`` when it has no counts."""
    prompt = u.prompt_tokens if u.prompt_tokens is not None else u.input_tokens
    completion = u.completion_tokens if u.completion_tokens is not None else u.output_tokens
    if prompt is None and completion is None:
        return None
    details = u.prompt_tokens_details or u.input_tokens_details
    if details is not None:
        cached, written = details.cached_tokens or 0, details.cache_write_tokens or 0
    else:
        cached = u.cache_read_input_tokens or 0
        written = u.cache_creation_input_tokens or 0
        if u.prompt_tokens is None:  # Anthropic's input_tokens
            prompt = (prompt or 0) + cached + written
    return Usage(prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                 cached_tokens=cached, cache_write_tokens=written)


def _delta_events(delta: _Delta, out: list[Event], *, number_calls: bool = False) -> None:
    thought = delta.reasoning_content or delta.reasoning
    if thought:
        out.append(ReasoningDelta(text=thought))
    for text in (delta.content, delta.refusal):
        if text:
            out.append(TextDelta(text=text))
    for i, call in enumerate(delta.tool_calls or ()):
        name = call.function.name if call.function is not None else None
        arguments = (call.function.arguments if call.function is not None else None) or ""
        if call.id is None and name is None and not arguments:
            continue
        index = i if number_calls else call.index
        out.append(ToolCallDelta(index=index, id=call.id, name=name, arguments=arguments))
