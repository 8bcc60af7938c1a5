"""Encoding IR events as OpenAI ``chat.completion`` bodies and ``chat.completion.chunk`` SSE.

The model's thinking (:class:`ReasoningDelta`) goes out as ``reasoning_content``, the name
DeepSeek's API gave it and OpenAI-compatible clients read: ``delta.reasoning_content`` chunks
beside the ``content`` ones, ``message.reasoning_content`` in a whole completion. Whether it
goes out at all (the request asked for it) is the HTTP edge's business.
"""

from __future__ import annotations

import secrets
from typing import Final

import msgspec
from msgspec import UNSET, UnsetType

from ._events import (
    Event,
    FinishReason,
    ReasoningDelta,
    Start,
    Stop,
    TextDelta,
    ToolCallDelta,
    Usage,
)

DONE: Final = b"data: [DONE]\n\n"
_KEEPALIVE: Final = b": keepalive\n\n"


def completion_id() -> str:
    """A fresh completion id, ``chatcmpl-`` and 24 random hex digits."""
    return "chatcmpl-" + secrets.token_hex(12)


# --- the wire shapes (field order is the JSON key order; UNSET fields are omitted) ---


class _PromptDetails(msgspec.Struct, kw_only=True):
    cached_tokens: int
    cache_write_tokens: int


class _CompletionDetails(msgspec.Struct, kw_only=True):
    reasoning_tokens: int


class _UsageOut(msgspec.Struct, kw_only=True):
    prompt_tokens: int  # the cached ones included
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: _PromptDetails
    completion_tokens_details: _CompletionDetails


class _FunctionDelta(msgspec.Struct, kw_only=True):
    name: str | UnsetType = UNSET
    arguments: str | UnsetType = UNSET


class _ToolCallDeltaOut(msgspec.Struct, kw_only=True):
    index: int
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: _FunctionDelta


class _Delta(msgspec.Struct, kw_only=True):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[_ToolCallDeltaOut] | UnsetType = UNSET


class _ChunkChoice(msgspec.Struct, kw_only=True):
    index: int = 0
    delta: _Delta
    logprobs: None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[_ChunkChoice]
    usage: _UsageOut | None | UnsetType = UNSET


class _FunctionOut(msgspec.Struct, kw_only=True):
    name: str
    arguments: str


class _ToolCallOut(msgspec.Struct, kw_only=True):
    id: str
    type: str = "function"
    function: _FunctionOut


class _MessageOut(msgspec.Struct, kw_only=True):
    role: str = "assistant"
    content: str | None
    reasoning_content: str | UnsetType = UNSET
    refusal: None = None
    tool_calls: list[_ToolCallOut] | UnsetType = UNSET


class _Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    message: _MessageOut
    logprobs: None = None
    finish_reason: str


class _Completion(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[_Choice]
    usage: _UsageOut | UnsetType = UNSET


class _ErrorOut(msgspec.Struct, kw_only=True):
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorEnvelope(msgspec.Struct, kw_only=True):
    error: _ErrorOut


_ENCODER: Final = msgspec.json.Encoder()


def _usage(u: Usage) -> _UsageOut:
    return _UsageOut(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                     total_tokens=u.total_tokens, prompt_tokens_details=_PromptDetails(
                         cached_tokens=u.cached_tokens, cache_write_tokens=u.cache_write_tokens),
                     completion_tokens_details=_CompletionDetails(
                         reasoning_tokens=u.reasoning_tokens))


def error_body(*, message: str, type: str, code: str | None = None,
               param: str | None = None) -> bytes:
    """An OpenAI error body, ``{"error": {"message", "type", "param", "code"}}``."""
    return _ENCODER.encode(_ErrorEnvelope(error=_ErrorOut(message=message, type=type,
                                                          param=param, code=code)))


class ChunkEncoder:
    """Frames for one streamed completion; every method returns a whole SSE frame.

    ``model`` may be reassigned (say, on :class:`~olp.ir.Start`) before the first frame.
    With ``include_usage`` every chunk carries ``"usage": null`` and :meth:`usage` emits the
    final usage chunk, as OpenAI does.
    """

    __slots__ = ("id", "created", "model", "include_usage")

    DONE: Final = DONE

    def __init__(self, *, id: str, created: int, model: str, include_usage: bool) -> None:
        self.id = id
        self.created = created
        self.model = model
        self.include_usage = include_usage

    def _frame(self, delta: _Delta, finish_reason: str | None = None) -> bytes:
        chunk = _Chunk(id=self.id, created=self.created, model=self.model,
                       choices=[_ChunkChoice(delta=delta, finish_reason=finish_reason)],
                       usage=None if self.include_usage else UNSET)
        return b"data: " + _ENCODER.encode(chunk) + b"\n\n"

    def role(self) -> bytes:
        """The first chunk: ``{"role": "assistant", "content": ""}``."""
        return self._frame(_Delta(role="assistant", content=""))

    def text(self, text: str) -> bytes:
        return self._frame(_Delta(content=text))

    def reasoning(self, text: str) -> bytes:
        """A piece of the model's thinking: ``{"reasoning_content": ...}``, no ``content``."""
        return self._frame(_Delta(reasoning_content=text))

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        """A tool-call fragment; ``id``, ``type`` and ``name`` only when the delta has them."""
        out = _ToolCallDeltaOut(
            index=delta.index,
            id=UNSET if delta.id is None else delta.id,
            type=UNSET if delta.id is None else "function",
            function=_FunctionDelta(name=UNSET if delta.name is None else delta.name,
                                    arguments=delta.arguments),
        )
        return self._frame(_Delta(tool_calls=[out]))

    def finish(self, reason: FinishReason) -> bytes:
        return self._frame(_Delta(), reason)

    def usage(self, u: Usage) -> bytes:
        """The final usage chunk (``choices: []``); ``b""`` unless ``include_usage``."""
        if not self.include_usage:
            return b""
        chunk = _Chunk(id=self.id, created=self.created, model=self.model, choices=[],
                       usage=_usage(u))
        return b"data: " + _ENCODER.encode(chunk) + b"\n\n"

    @staticmethod
    def error(*, message: str, type: str, code: str | None, param: str | None = None) -> bytes:
        """An in-stream error frame ``data: {"error": {...}}``, for after content was sent."""
        return b"data: " + error_body(message=message, type=type, code=code,
                                      param=param) + b"\n\n"

    @staticmethod
    def keepalive() -> bytes:
        """An SSE comment: keeps proxies from timing out an idle stream."""
        return _KEEPALIVE


class _ToolCallAcc:
    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class CompletionBuilder:
    """Accumulates one job's events into a non-streamed ``chat.completion`` body.

    Only :class:`Start`, :class:`TextDelta`, :class:`ReasoningDelta` (``reasoning_content``),
    :class:`ToolCallDelta`, :class:`Usage` and :class:`Stop` matter; other events are ignored
    (errors are the caller's business).
    """

    def __init__(self, *, id: str, created: int, model: str) -> None:
        self.id = id
        self.created = created
        self.model = model
        self.finish_reason: FinishReason = "stop"
        self.usage: Usage | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolCallAcc] = {}

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self._text.append(text)
            case ReasoningDelta(text=text):
                self._reasoning.append(text)
            case ToolCallDelta():
                acc = self._tools.get(event.index)
                if acc is None:
                    acc = self._tools[event.index] = _ToolCallAcc()
                if acc.id is None:
                    acc.id = event.id
                if acc.name is None:
                    acc.name = event.name
                acc.arguments.append(event.arguments)
            case Usage():
                self.usage = event
            case Stop(finish_reason=reason):
                self.finish_reason = reason
            case Start(model=model):
                self.model = model
            case _:
                pass

    def body(self) -> bytes:
        """The ``chat.completion`` JSON; ``content`` is ``null`` when there are only tool calls."""
        tool_calls = []
        for _, acc in sorted(self._tools.items()):
            if acc.id is None:  # the provider gave none; the client needs one to answer
                acc.id = "call_" + secrets.token_hex(12)
            function = _FunctionOut(name=acc.name or "", arguments="".join(acc.arguments))
            tool_calls.append(_ToolCallOut(id=acc.id, function=function))
        text = self.text
        message = _MessageOut(content=None if tool_calls and not text else text,
                              reasoning_content="".join(self._reasoning) or UNSET,
                              tool_calls=tool_calls or UNSET)
        completion = _Completion(
            id=self.id, created=self.created, model=self.model,
            choices=[_Choice(message=message, finish_reason=self.finish_reason)],
            usage=UNSET if self.usage is None else _usage(self.usage),
        )
        return _ENCODER.encode(completion)
