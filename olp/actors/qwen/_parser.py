"""qwen ``-o stream-json --include-partial-messages`` → IR events.

Line handling (schema in ``tests/fixtures/cli-reference/qwen/README.md``):

* ``system/init`` → nothing, unless it lists tools (the no-tools recipe gives ``"tools": []``):
  then a terminal ``CONFIG_ERROR`` before the model is asked anything with them.
* ``system/retry`` with ``attempt`` (the CLI's rate-limit rounds, announced before each wait;
  ``model.generationConfig.maxRetries: 0`` normally removes them) → :class:`Retrying`
  (``rate_limited``: only rate limits get these rounds), which lets the engine abandon the
  storm when a later hop could answer. Without ``attempt`` (the retried attempt starts) →
  nothing, unless ``preserveText`` is true after text was emitted: qwen re-asked after a
  stalled stream and would continue the printed answer from a new request → a terminal
  ``STREAM_ABANDONED``.
* ``stream_event`` ``content_block_delta`` ``text_delta`` → :class:`TextDelta`, except that
  qwen streams an upstream error as text (``[API Error: ...]``, then ``result``
  ``is_error``): a delta that starts with, or could still grow into, :data:`API_ERROR_PREFIX`
  is held until a later delta shows it is content, or the ``result`` decides (success: sent;
  error: dropped). A ``content_block_start`` of a ``tool_use`` block (qwen's own tool: no
  tool is offered, so the model made one up) → a terminal ``TOOL_CALL_INVALID``: it is never
  an answer (``--max-tool-calls 0`` stops qwen before the tool runs).
* ``result``: success → held text, the ``result`` text when no text was emitted at all, and
  :class:`Usage` (``input_tokens``/``output_tokens``: the upstream's prompt/completion
  tokens); :class:`Stop` at :meth:`QwenParser.finish`. Error → the classified terminal
  :class:`Error` at once (``error.message``).
* ``assistant``, ``user``, other ``stream_event`` types and unknown lines → nothing. Lines that
  are not JSON objects, or whose fields have unexpected types → nothing.
* :meth:`QwenParser.finish`: exit 0 after a successful result → :class:`Stop`; exit 0 without
  one → ``PROTOCOL_ERROR``; a non-zero exit without a result → classified from the exit code
  and stderr (the tool-call budget, an empty prompt, a signal, ...), else ``CLI_FAILED``
  naming the exit and a sanitised stderr excerpt.

After a terminal event :meth:`QwenParser.feed` returns nothing and :meth:`QwenParser.finish`
returns that same event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from olp.actors._exit import describe_exit, stderr_excerpt
from olp.failures import Code, failure
from olp.ir import Error, Event, Retrying, Stop, TextDelta, Usage

from ._classify import Failure, classify

API_ERROR_PREFIX: Final = "[API Error"
STDERR_LIMIT: Final = 200


class _Envelope(msgspec.Struct):
    type: str = ""
    subtype: str | None = None


class _Init(msgspec.Struct):
    tools: list[Any] = []


class _RetryData(msgspec.Struct):
    attempt: int | None = None
    maxRetries: int | None = None  # noqa: N815 - qwen's name
    delayMs: float | None = None  # noqa: N815
    preserveText: bool = False  # noqa: N815


class _Retry(msgspec.Struct):
    data: _RetryData | None = None


class _Delta(msgspec.Struct):
    type: str = ""
    text: str | None = None


class _Block(msgspec.Struct):
    type: str = ""
    name: str | None = None


class _SseEvent(msgspec.Struct):
    type: str = ""
    delta: _Delta | None = None
    content_block: _Block | None = None


class _StreamEvent(msgspec.Struct):
    event: _SseEvent | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _ErrorInfo(msgspec.Struct):
    message: str | None = None


class _Result(msgspec.Struct):
    subtype: str | None = None
    is_error: bool = False
    result: str | None = None
    usage: _Usage | None = None
    error: _ErrorInfo | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_INIT: Final = msgspec.json.Decoder(_Init)
_RETRY: Final = msgspec.json.Decoder(_Retry)
_STREAM_EVENT: Final = msgspec.json.Decoder(_StreamEvent)
_RESULT: Final = msgspec.json.Decoder(_Result)


class QwenParser:
    """Per-job state for one qwen run. ``now`` is the clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._terminal: Error | Stop | None = None
        self._succeeded = False
        self._emitted_text = False
        self._held = ""  # text that may be an "[API Error: ...]" report

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._terminal is not None:
            return ()
        try:
            envelope = _ENVELOPE.decode(line)
            if envelope.type == "stream_event":
                return self._stream_event(_STREAM_EVENT.decode(line))
            if envelope.type == "result":
                return self._result(_RESULT.decode(line))
            if envelope.type == "system" and envelope.subtype == "retry":
                return self._retry(_RETRY.decode(line))
            if envelope.type == "system" and envelope.subtype == "init":
                return self._init(_INIT.decode(line))
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
        return ()

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        return ()

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event after exit (see the module docstring); idempotent."""
        if self._terminal is None:
            self._terminal = self._exit_event(returncode, stderr_tail)
        return self._terminal

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        if self._succeeded and returncode == 0:
            return Stop(finish_reason="stop")
        if returncode == 0:
            return failure(Code.PROTOCOL_ERROR, "qwen exited with code 0 without a result line")
        excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
        error = classify(Failure(text=excerpt, exit_code=returncode), now=self._now())
        if error.code != Code.UPSTREAM_ERROR:
            return error
        after = " after a complete answer" if self._succeeded else ""
        message = f"qwen {describe_exit(returncode)}{after}"
        if excerpt:
            message = f"{message}; stderr: {excerpt}"
        return failure(Code.CLI_FAILED, message)

    def _init(self, line: _Init) -> Sequence[Event]:
        if line.tools:
            names = ", ".join(str(t) for t in line.tools[:5])
            self._terminal = failure(
                Code.CONFIG_ERROR, f"qwen started with built-in tools ({names}); OLP's "
                "settings did not take effect", category="unavailable")
            return (self._terminal,)
        return ()

    def _retry(self, line: _Retry) -> Sequence[Event]:
        data = line.data
        if data is None:
            return ()
        if data.attempt is not None:
            delay = None if data.delayMs is None else data.delayMs / 1000
            return (Retrying(attempt=data.attempt, max_retries=data.maxRetries, delay_s=delay,
                             category="rate_limited"),)
        if data.preserveText and (self._emitted_text or self._held):
            self._terminal = failure(
                Code.STREAM_ABANDONED, "qwen re-asked after a stalled stream and would "
                "continue the answer from a new request")
            return (self._terminal,)
        return ()

    def _stream_event(self, line: _StreamEvent) -> Sequence[Event]:
        event = line.event
        if event is None:
            return ()
        block = event.content_block
        if event.type == "content_block_start" and block is not None \
                and block.type == "tool_use":
            self._terminal = failure(
                Code.TOOL_CALL_INVALID, f"the model called qwen's built-in tool "
                f"{block.name or '(unnamed)'!r}, which OLP does not offer; nothing ran")
            return (self._terminal,)
        delta = event.delta
        if event.type != "content_block_delta" or delta is None or delta.type != "text_delta" \
                or not delta.text:
            return ()
        text = self._held + delta.text
        if text.startswith(API_ERROR_PREFIX) or API_ERROR_PREFIX.startswith(text):
            self._held = text
            return ()
        self._held = ""
        self._emitted_text = True
        return (TextDelta(text=text),)

    def _result(self, line: _Result) -> Sequence[Event]:
        if line.is_error or (line.subtype or "").startswith("error"):
            text = (line.error.message if line.error is not None else None) or line.result \
                or self._held or f"qwen reported {line.subtype or 'an error'}"
            self._held = ""
            self._terminal = classify(Failure(text=text), now=self._now())
            return (self._terminal,)
        self._succeeded = True
        events: list[Event] = []
        if self._held:
            events.append(TextDelta(text=self._held))
            self._held = ""
            self._emitted_text = True
        if not self._emitted_text and line.result:
            events.append(TextDelta(text=line.result))
            self._emitted_text = True
        if line.usage is not None:
            events.append(Usage(prompt_tokens=line.usage.input_tokens or 0,
                                completion_tokens=line.usage.output_tokens or 0))
        return events
