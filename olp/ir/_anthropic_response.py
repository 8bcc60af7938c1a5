"""Encoding IR events as Anthropic Messages: a ``message`` body, or its SSE event sequence.

Stream: ``message_start`` and a ``ping``, then per content block ``content_block_start`` →
``content_block_delta`` (``thinking_delta`` / ``text_delta`` / ``input_json_delta``) →
``content_block_stop``, then ``message_delta`` (``stop_reason``, the cumulative ``usage`` with
the cache's reads and writes) and ``message_stop``; a failure after content is ``event:
error``, never a clean ``message_stop``.
Finish reasons map ``stop`` → ``end_turn``, ``length`` → ``max_tokens``, ``tool_calls`` →
``tool_use``, ``content_filter`` → ``refusal``. Pure: no I/O.

The model's thinking (:class:`ReasoningDelta`, passed on by the HTTP edge only when the
request asked for it) is a ``thinking`` block: in a body one block before the text, holding
all of it; in a stream a block per run of thinking. Its ``signature`` is ``""``: Anthropic
signs its thinking so that a client can send it back and the API can check it, and OLP has no
signature to give (the CLIs print none). A client that sends such a block back gets it
dropped, as every thinking block is on input (ADR 0026).
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Final

import msgspec

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

_ENCODER: Final = msgspec.json.Encoder()
STOP_REASONS: Final[dict[FinishReason, str]] = {
    "stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
    "content_filter": "refusal"}
#: Anthropic's error ``type`` for an HTTP status (what its API answers with that status).
_ERROR_TYPES: Final = {400: "invalid_request_error", 401: "authentication_error",
                       403: "permission_error", 404: "not_found_error",
                       413: "request_too_large", 415: "invalid_request_error",
                       429: "rate_limit_error", 503: "overloaded_error"}


def message_id() -> str:
    """A fresh message id, ``msg_`` and 24 random hex digits."""
    return "msg_" + secrets.token_hex(12)


def error_type(status: int) -> str:
    """Anthropic's error ``type`` for ``status`` (``api_error`` for any other 5xx)."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(*, type: str, message: str) -> bytes:
    """``{"type": "error", "error": {"type", "message"}}``."""
    return _ENCODER.encode({"type": "error", "error": {"type": type, "message": message}})


def _usage(u: Usage | None) -> dict[str, int]:
    """Anthropic's convention: ``input_tokens`` leaves out the tokens read from the cache and
    written to it, which are counted apart (the IR's prompt tokens count all three)."""
    if u is None:
        u = Usage(prompt_tokens=0, completion_tokens=0)
    return {"input_tokens": u.uncached_prompt_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_read_input_tokens": u.cached_tokens, "output_tokens": u.completion_tokens}


def _thinking(text: str) -> dict[str, str]:
    """A ``thinking`` block; ``signature`` empty, as OLP cannot sign (see above)."""
    return {"type": "thinking", "thinking": text, "signature": ""}


def _tool_input(arguments: str) -> Any:
    """A call's arguments as the JSON value Anthropic's ``input`` is; text that is not JSON
    is kept under ``_unparsed_arguments`` rather than lost."""
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {"_unparsed_arguments": arguments}


class MessageBuilder:
    """Accumulates one job's events into a non-streamed ``message`` body (errors are the
    caller's business)."""

    def __init__(self, *, id: str, model: str) -> None:
        self.id = id
        self.model = model
        self.finish_reason: FinishReason = "stop"
        self.usage: Usage | None = None
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, argument fragments]

    @property
    def text(self) -> str:
        return "".join(self._text)

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self._text.append(text)
            case ReasoningDelta(text=text):
                self._thinking.append(text)
            case ToolCallDelta():
                call = self._calls.setdefault(event.index, [None, None, []])
                call[0] = call[0] or event.id
                call[1] = call[1] or event.name
                call[2].append(event.arguments)
            case Usage():
                self.usage = event
            case Stop(finish_reason=reason):
                self.finish_reason = reason
            case Start(model=model):
                self.model = model
            case _:
                pass

    def body(self) -> bytes:
        content: list[dict[str, Any]] = []
        if thinking := "".join(self._thinking):
            content.append(_thinking(thinking))
        if self.text:
            content.append({"type": "text", "text": self.text})
        for _, (call_id, name, fragments) in sorted(self._calls.items()):
            content.append({"type": "tool_use", "id": call_id or "toolu_" + secrets.token_hex(12),
                            "name": name or "", "input": _tool_input("".join(fragments))})
        return _ENCODER.encode({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": content, "stop_reason": STOP_REASONS[self.finish_reason],
            "stop_sequence": None, "usage": _usage(self.usage)})


class MessageStreamEncoder:
    """SSE frames for one streamed message; every method returns whole frames (``b""`` when
    there is nothing to send). Tracks the open content block: a run of thinking, text and
    each tool call get a block of their own, numbered in order."""

    def __init__(self, *, id: str, model: str) -> None:
        self.id = id
        self.model = model
        #: ("text", -1), ("thinking", -1) or ("tool", IR index)
        self._open: tuple[str, int] | None = None
        self._blocks = 0  # blocks opened so far (the next one's index)

    @staticmethod
    def _frame(name: str, data: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + _ENCODER.encode(data) + b"\n\n"

    def begin(self) -> bytes:
        """``message_start`` (usage is known only at the end: it comes in ``message_delta``),
        then a ``ping``, as Anthropic's API sends them."""
        return self._frame("message_start", {"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": _usage(None)}}) + self.ping()

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return self._frame("content_block_stop", {"type": "content_block_stop",
                                                  "index": self._blocks - 1})

    def _open_block(self, kind: tuple[str, int], block: dict[str, Any]) -> bytes:
        out = self._close()
        self._open = kind
        self._blocks += 1
        return out + self._frame("content_block_start", {
            "type": "content_block_start", "index": self._blocks - 1, "content_block": block})

    def text(self, text: str) -> bytes:
        out = b"" if self._open == ("text", -1) else self._open_block(
            ("text", -1), {"type": "text", "text": ""})
        return out + self._frame("content_block_delta", {
            "type": "content_block_delta", "index": self._blocks - 1,
            "delta": {"type": "text_delta", "text": text}})

    def reasoning(self, text: str) -> bytes:
        """A piece of the model's thinking: a ``thinking_delta`` of the open ``thinking``
        block (opened with an empty ``signature``, which no ``signature_delta`` follows)."""
        out = b"" if self._open == ("thinking", -1) else self._open_block(
            ("thinking", -1), _thinking(""))
        return out + self._frame("content_block_delta", {
            "type": "content_block_delta", "index": self._blocks - 1,
            "delta": {"type": "thinking_delta", "thinking": text}})

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        """A call's first delta (with its id and name) opens its ``tool_use`` block; argument
        fragments become ``input_json_delta``s of the open block."""
        out = b""
        if self._open != ("tool", delta.index):
            out = self._open_block(("tool", delta.index), {
                "type": "tool_use", "id": delta.id or "toolu_" + secrets.token_hex(12),
                "name": delta.name or "", "input": {}})
        if delta.arguments:
            out += self._frame("content_block_delta", {
                "type": "content_block_delta", "index": self._blocks - 1,
                "delta": {"type": "input_json_delta", "partial_json": delta.arguments}})
        return out

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes:
        """Close the open block, then ``message_delta`` and ``message_stop``."""
        return self._close() + self._frame("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": STOP_REASONS[reason], "stop_sequence": None},
            "usage": _usage(usage)}) + self._frame("message_stop", {"type": "message_stop"})

    def error(self, *, type: str, message: str) -> bytes:
        """``event: error``, for a failure after the stream started (never ``message_stop``)."""
        return self._frame("error", {"type": "error",
                                     "error": {"type": type, "message": message}})

    def ping(self) -> bytes:
        return self._frame("ping", {"type": "ping"})
