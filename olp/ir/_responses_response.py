"""Encoding IR events as OpenAI Responses: a ``response`` object, or its SSE event sequence.

Output items in the order they began: a ``reasoning`` item (one ``summary_text``) per run of
the model's thinking (:class:`ReasoningDelta`; the HTTP edge passes it on only when the request
asked for a summary), the assistant ``message`` (one ``output_text`` part) when there is text,
one ``function_call`` item per call. Stream: ``response.created``, ``response.in_progress``;
per item ``response.output_item.added``, for thinking ``response.reasoning_summary_part.added``
→ ``response.reasoning_summary_text.delta``… → ``response.reasoning_summary_text.done`` →
``response.reasoning_summary_part.done``, for text ``response.content_part.added`` →
``response.output_text.delta``… → ``response.output_text.done`` →
``response.content_part.done``, for a call ``response.function_call_arguments.delta``… →
``response.function_call_arguments.done``; ``response.output_item.done``; then
``response.completed`` with the whole response. A failure after content is an ``error`` event
and ``response.failed``, never ``response.completed``. Every event carries ``sequence_number``.
A ``length`` finish is ``status: "incomplete"`` (``max_output_tokens``). Pure: no I/O.
"""

from __future__ import annotations

import secrets
import time
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
from ._request import Message, TextPart, ToolCall

_ENCODER: Final = msgspec.json.Encoder()
_THINKING: Final = -2  # the stream's open item is the last reasoning item (-1: the message)


def response_id() -> str:
    """A fresh response id, ``resp_`` and 24 random hex digits."""
    return "resp_" + secrets.token_hex(12)


def _item_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _usage(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    return {"input_tokens": u.prompt_tokens,  # the cached ones included
            "input_tokens_details": {"cached_tokens": u.cached_tokens,
                                     "cache_write_tokens": u.cache_write_tokens},
            "output_tokens": u.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.total_tokens}


class _Thought:
    """One run of the model's thinking: a ``reasoning`` item with one ``summary_text``."""

    __slots__ = ("item_id", "output_index", "text")

    def __init__(self, output_index: int) -> None:
        self.item_id = _item_id("rs")
        self.output_index = output_index
        self.text: list[str] = []

    def part(self) -> dict[str, str]:
        return {"type": "summary_text", "text": "".join(self.text)}

    def item(self, status: str) -> dict[str, Any]:
        return {"id": self.item_id, "type": "reasoning",
                "summary": [self.part()] if status == "completed" else []}


class _Call:
    __slots__ = ("item_id", "call_id", "name", "arguments", "output_index")

    def __init__(self, call_id: str | None, name: str | None, output_index: int) -> None:
        self.item_id = _item_id("fc")
        self.call_id = call_id or _item_id("call")
        self.name = name or ""
        self.arguments: list[str] = []
        self.output_index = output_index

    def item(self, status: str) -> dict[str, Any]:
        return {"id": self.item_id, "type": "function_call", "status": status,
                "call_id": self.call_id, "name": self.name,
                "arguments": "".join(self.arguments) if status == "completed" else ""}


class _Answer:
    """What one job said, in output-item order (shared by the body and the stream)."""

    def __init__(self, *, id: str, model: str) -> None:
        self.id = id
        self.model = model
        self.created_at = int(time.time())
        self.message_id = _item_id("msg")
        self.text: list[str] = []
        self.message_index: int | None = None  # the message's output index, once it has text
        self.calls: dict[int, _Call] = {}  # IR index -> call
        self.thoughts: list[_Thought] = []
        self.items = 0
        self.usage: Usage | None = None
        self.finish: FinishReason = "stop"

    def message_item(self, status: str) -> dict[str, Any]:
        text = "".join(self.text) if status == "completed" else ""
        content = [{"type": "output_text", "text": text, "annotations": []}] \
            if status == "completed" else []
        return {"id": self.message_id, "type": "message", "status": status,
                "role": "assistant", "content": content}

    def think(self) -> _Thought:
        """A new run of thinking: the next output item."""
        thought = _Thought(self.items)
        self.items += 1
        self.thoughts.append(thought)
        return thought

    def message(self) -> Message:
        """The answer as the client echoes it back in a later ``input``: its text, then its
        function calls (``call_id``, name, arguments) in output order."""
        text = "".join(self.text)
        calls = sorted(self.calls.values(), key=lambda c: c.output_index)
        return Message(role="assistant", content=(TextPart(text=text),) if text else (),
                       tool_calls=tuple(ToolCall(id=c.call_id, name=c.name,
                                                 arguments="".join(c.arguments) or "{}")
                                        for c in calls))

    def output(self) -> list[dict[str, Any]]:
        items: list[tuple[int, dict[str, Any]]] = []
        if self.message_index is not None:
            items.append((self.message_index, self.message_item("completed")))
        items += [(c.output_index, c.item("completed")) for c in self.calls.values()]
        items += [(t.output_index, t.item("completed")) for t in self.thoughts]
        return [item for _, item in sorted(items, key=lambda pair: pair[0])]

    def response(self, status: str, *, error: dict[str, str] | None = None) -> dict[str, Any]:
        incomplete = status == "completed" and self.finish == "length"
        return {
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": "incomplete" if incomplete else status,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "model": self.model,
            "output": self.output() if status != "in_progress" else [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": _usage(self.usage) if status != "in_progress" else None,
        }


class ResponseBuilder:
    """Accumulates one job's events into a non-streamed ``response`` body."""

    def __init__(self, *, id: str, model: str) -> None:
        self._answer = _Answer(id=id, model=model)
        self._thinking = False  # thinking came after the last text or call

    def add(self, event: Event) -> None:
        a = self._answer
        if isinstance(event, TextDelta | ToolCallDelta):
            self._thinking = False
        match event:
            case ReasoningDelta(text=text) if text:
                if not self._thinking:
                    self._thinking = True
                    a.think()
                a.thoughts[-1].text.append(text)
            case TextDelta(text=text):
                if a.message_index is None:
                    a.message_index, a.items = a.items, a.items + 1
                a.text.append(text)
            case ToolCallDelta():
                call = a.calls.get(event.index)
                if call is None:
                    call = a.calls[event.index] = _Call(event.id, event.name, a.items)
                    a.items += 1
                call.arguments.append(event.arguments)
            case Usage():
                a.usage = event
            case Stop(finish_reason=reason):
                a.finish = reason
            case Start(model=model):
                a.model = model
            case _:
                pass

    def body(self) -> bytes:
        return _ENCODER.encode(self._answer.response("completed"))

    def answer(self) -> Message:
        """What was answered, as an assistant :class:`Message` (see ``_Answer.message``)."""
        return self._answer.message()


class ResponseStreamEncoder:
    """SSE frames for one streamed response; every method returns whole frames."""

    def __init__(self, *, id: str, model: str) -> None:
        self._answer = _Answer(id=id, model=model)
        self._sequence = 0
        #: The open item: the IR index of a call, -1 for the message, ``_THINKING``.
        self._open: int | None = None

    @property
    def model(self) -> str:
        return self._answer.model

    @model.setter
    def model(self, value: str) -> None:
        self._answer.model = value

    def answer(self) -> Message:
        """What was streamed so far, as an assistant :class:`Message`."""
        return self._answer.message()

    def _frame(self, type: str, **fields: Any) -> bytes:
        data = {"type": type, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return b"event: " + type.encode() + b"\ndata: " + _ENCODER.encode(data) + b"\n\n"

    def begin(self) -> bytes:
        return (self._frame("response.created", response=self._answer.response("in_progress"))
                + self._frame("response.in_progress",
                              response=self._answer.response("in_progress")))

    def _close(self) -> bytes:
        a, open_ = self._answer, self._open
        self._open = None
        if open_ is None:
            return b""
        if open_ == _THINKING:
            thought = a.thoughts[-1]
            where = {"item_id": thought.item_id, "output_index": thought.output_index,
                     "summary_index": 0}
            return (self._frame("response.reasoning_summary_text.done", **where,
                                text=thought.part()["text"])
                    + self._frame("response.reasoning_summary_part.done", **where,
                                  part=thought.part())
                    + self._frame("response.output_item.done",
                                  output_index=thought.output_index,
                                  item=thought.item("completed")))
        if open_ == -1:
            assert a.message_index is not None
            text = "".join(a.text)
            part = {"type": "output_text", "text": text, "annotations": []}
            where = {"item_id": a.message_id, "output_index": a.message_index}
            return (self._frame("response.output_text.done", **where, content_index=0,
                                text=text)
                    + self._frame("response.content_part.done", **where, content_index=0,
                                  part=part)
                    + self._frame("response.output_item.done", output_index=a.message_index,
                                  item=a.message_item("completed")))
        call = a.calls[open_]
        return (self._frame("response.function_call_arguments.done", item_id=call.item_id,
                            output_index=call.output_index, arguments="".join(call.arguments))
                + self._frame("response.output_item.done", output_index=call.output_index,
                              item=call.item("completed")))

    def reasoning(self, text: str) -> bytes:
        """A piece of the model's thinking; a run of them is one ``reasoning`` item."""
        a = self._answer
        out = b""
        if self._open != _THINKING:
            out = self._close()
            thought = a.think()
            out += self._frame("response.output_item.added", output_index=thought.output_index,
                               item=thought.item("in_progress"))
            out += self._frame("response.reasoning_summary_part.added",
                               item_id=thought.item_id, output_index=thought.output_index,
                               summary_index=0, part={"type": "summary_text", "text": ""})
            self._open = _THINKING
        thought = a.thoughts[-1]
        thought.text.append(text)
        return out + self._frame("response.reasoning_summary_text.delta",
                                 item_id=thought.item_id, output_index=thought.output_index,
                                 summary_index=0, delta=text)

    def text(self, text: str) -> bytes:
        a = self._answer
        out = b""
        if self._open != -1:
            out = self._close()
            if a.message_index is None:
                a.message_index, a.items = a.items, a.items + 1
                out += self._frame("response.output_item.added", output_index=a.message_index,
                                   item=a.message_item("in_progress"))
                out += self._frame("response.content_part.added", item_id=a.message_id,
                                   output_index=a.message_index, content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": []})
            self._open = -1
        a.text.append(text)
        return out + self._frame("response.output_text.delta", item_id=a.message_id,
                                 output_index=a.message_index, content_index=0, delta=text)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        a = self._answer
        out = b""
        if self._open != delta.index:
            out = self._close()
            call = a.calls.get(delta.index)
            if call is None:
                call = a.calls[delta.index] = _Call(delta.id, delta.name, a.items)
                a.items += 1
                out += self._frame("response.output_item.added",
                                   output_index=call.output_index, item=call.item("in_progress"))
            self._open = delta.index
        call = a.calls[delta.index]
        if delta.arguments:
            call.arguments.append(delta.arguments)
            out += self._frame("response.function_call_arguments.delta", item_id=call.item_id,
                               output_index=call.output_index, delta=delta.arguments)
        return out

    def finish(self, reason: FinishReason, usage: Usage | None) -> bytes:
        self._answer.finish, self._answer.usage = reason, usage
        return self._close() + self._frame("response.completed",
                                           response=self._answer.response("completed"))

    def error(self, *, code: str | None, message: str) -> bytes:
        """An ``error`` event and ``response.failed``: the stream ends without success."""
        error = {"code": code or "server_error", "message": message}
        return (self._frame("error", code=error["code"], message=message, param=None)
                + self._frame("response.failed", response=self._answer.response(
                    "failed", error=error)))
