"""claude ``--output-format stream-json --verbose --include-partial-messages`` → IR events.

What claude shares with qwen (text and thinking deltas, the bridge's ``tool_use`` blocks,
``result``, the exit) is read by :class:`~olp.providers._stream_json.StreamJsonParser`; this
parser adds claude's own: ``rate_limit_event`` → one :class:`QuotaReport` per window,
``system/api_retry`` → :class:`Retrying`, a new model → :class:`Start`, the text (and the
thinking, as :class:`ReasoningDelta`) of an ``assistant`` message that was not streamed as
deltas, the usage's ``output_tokens_details.thinking_tokens`` as reasoning tokens, a
``message_delta`` ``tool_use`` after bridge calls → :class:`Usage` and the terminal
``Stop(finish_reason="tool_calls")``, a stalled stream abandoned after text →
``STREAM_ABANDONED``, an API-error message kept for classification. A ``tool_use`` of another
tool is claude's own: not reported. Every line and every exit:
``tests/fixtures/cli-reference/claude/README.md``, "How OLP reads stdout".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import msgspec

from olp.failures import Code, failure
from olp.ir import (
    Error,
    Event,
    FinishReason,
    QuotaReport,
    ReasoningDelta,
    Retrying,
    Start,
    Stop,
    Usage,
)
from olp.providers._stream_json import (
    Assistant,
    AssistantMessage,
    Envelope,
    Result,
    SseEvent,
    StreamEvent,
    StreamJsonParser,
    TokenUsage,
)

from ._classify import Failure, classify, retry_category


class _Window(msgspec.Struct):
    utilization: float | None = None
    resetsAt: float | None = None  # noqa: N815 - claude's name
    status: str | None = None


class _RateLimitInfo(msgspec.Struct):
    status: str = "allowed"
    resetsAt: float | None = None  # noqa: N815
    rateLimitType: str | None = None  # noqa: N815
    utilization: float | None = None
    unifiedWindows: dict[str, _Window] = msgspec.field(default_factory=dict)  # noqa: N815


class _RateLimitEvent(msgspec.Struct):
    rate_limit_info: _RateLimitInfo


class _ApiRetry(msgspec.Struct):
    attempt: int = 0
    max_retries: int | None = None
    retry_delay_ms: float | None = None
    error_status: int | None = None
    error: str | None = None


_API_RETRY: Final = msgspec.json.Decoder(_ApiRetry)
_RATE_LIMIT_EVENT: Final = msgspec.json.Decoder(_RateLimitEvent)

_FINISH: Final[dict[str, FinishReason]] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "tool_use": "tool_calls", "refusal": "content_filter",
}
_SYNTHETIC_MODEL: Final = "<synthetic>"
_WHOLE_CALL_INDEX: Final = 1_000_000  # indices of calls seen only in ``assistant`` events


class AnthropicParser(StreamJsonParser):
    """Per-job state for one claude run. ``now`` is the clock for usage-window resets."""

    cli = "claude"

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        super().__init__(now=now)
        self._api_error: Assistant | None = None
        self._model: str | None = None
        self._current_id: str | None = None
        self._delta_ids: set[str] = set()
        self._deltas_since_assistant = False
        self._thinking_ids: set[str] = set()  # messages whose thinking came as deltas
        self._thinking_since_assistant = False
        self._input_usage: TokenUsage | None = None  # of the current message (message_start)

    def _other(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        if envelope.type == "rate_limit_event":
            return _quota_reports(_RATE_LIMIT_EVENT.decode(line).rate_limit_info)
        if envelope.type == "system" and envelope.subtype == "api_retry":
            return (self._retry(_API_RETRY.decode(line)),)
        return ()

    def _retry(self, line: _ApiRetry) -> Retrying:
        delay = None if line.retry_delay_ms is None else line.retry_delay_ms / 1000
        return Retrying(attempt=line.attempt, max_retries=line.max_retries, delay_s=delay,
                        status=line.error_status,
                        category=retry_category(line.error, line.error_status))

    def _message_start(self, line: StreamEvent, event: SseEvent) -> Sequence[Event]:
        if event.message is None:
            return ()
        self._current_id = line.api_message_id or event.message.id
        self._input_usage = event.message.usage
        return self._start(event.message.model)

    def _call_number(self, block_index: int | None) -> int | None:
        return block_index  # claude numbers a message's blocks across its whole run

    def _whole_call_number(self) -> int:
        return _WHOLE_CALL_INDEX + self._whole_calls

    def _message_delta(self, event: SseEvent) -> Sequence[Event]:
        if event.delta is None or event.delta.stop_reason != "tool_use" \
                or not self._call_blocks:
            return ()
        self._terminal = Stop(finish_reason="tool_calls")
        output = event.usage.output_tokens if event.usage is not None else None
        if event.usage is None or output is None:
            return (self._terminal,)
        return (_ir_usage(self._input_usage, output, event.usage.thinking_tokens),
                self._terminal)

    def _text_delta(self, line: StreamEvent, text: str) -> Sequence[Event]:
        message_id = line.api_message_id or self._current_id
        if message_id is not None:
            self._delta_ids.add(message_id)
        self._deltas_since_assistant = True
        return self._text(text)

    def _thinking_delta(self, line: StreamEvent, text: str) -> Sequence[Event]:
        message_id = line.api_message_id or self._current_id
        if message_id is not None:
            self._thinking_ids.add(message_id)
        self._thinking_since_assistant = True
        return (ReasoningDelta(text=text),)

    def _message_stop(self, line: StreamEvent) -> Sequence[Event]:
        if line.abandoned_blocks is None or not self._emitted_text:
            return ()
        return self._end_with(failure(
            Code.STREAM_ABANDONED, "claude abandoned a stalled stream after text was sent and "
            "would answer again from the start"))

    def _assistant(self, line: Assistant) -> Sequence[Event]:
        message = line.message
        if line.is_api_error_message or (message is not None
                                         and message.model == _SYNTHETIC_MODEL):
            self._api_error = line
            return ()
        streamed, thought = self._deltas_since_assistant, self._thinking_since_assistant
        self._deltas_since_assistant = self._thinking_since_assistant = False
        if message is None:
            return ()
        if message.id is not None:
            streamed = message.id in self._delta_ids
            thought = message.id in self._thinking_ids
        text = "" if streamed else _text_of(message)
        thinking = "" if thought else _thinking_of(message)
        calls = self._whole_tool_calls(message)
        if not text and not thinking and not calls:
            return ()
        events: list[Event] = [*self._start(message.model)]
        if thinking:
            events.append(ReasoningDelta(text=thinking))
        if text:
            events.extend(self._text(text))
        return (*events, *calls)

    def _failed(self, line: Result) -> Error:
        return self._classify(line)

    def _finish_reason(self, line: Result) -> FinishReason:
        return _FINISH.get(line.stop_reason or "", "stop")

    def _usage(self, usage: TokenUsage) -> Usage:
        return _ir_usage(usage, usage.output_tokens or 0, usage.thinking_tokens)

    def _explain_exit(self, returncode: int, stderr_tail: bytes) -> Error | None:
        if self._answered is None and self._api_error is not None:
            return self._classify(None)  # killed between the error message and its result
        return None

    def _classify(self, result: Result | None) -> Error:
        a = self._api_error
        a_text = _text_of(a.message) if a is not None and a.message is not None else ""
        text = (result.result if result is not None else None) or a_text
        if not text and result is not None and result.subtype:
            text = f"claude reported {result.subtype}"
        r = result if result is not None else Result()
        b = a if a is not None else Assistant()
        failure = Failure(
            text=text,
            status=_first(r.api_error_status, b.api_error_status),
            error_type=_first(r.api_error_type, b.api_error_type),
            api_error=_first(r.api_error, b.api_error),
            assistant_error=b.error,
        )
        return classify(failure, now=self._now())

    def _start(self, model: str | None) -> Sequence[Event]:
        if not model or model == _SYNTHETIC_MODEL or model == self._model:
            return ()
        self._model = model
        return (Start(model=model),)


def _ir_usage(usage: TokenUsage | None, output: int, thinking: int = 0) -> Usage:
    """Anthropic's figures in the IR's convention: its ``input_tokens`` leaves out what was
    read from the cache (``cache_read_input_tokens``) and written to it
    (``cache_creation_input_tokens``); the IR's prompt tokens count both. ``thinking``: of
    the ``output`` tokens, those spent thinking."""
    if usage is None:
        return Usage(prompt_tokens=0, completion_tokens=output, reasoning_tokens=thinking)
    read, written = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    return Usage(prompt_tokens=(usage.input_tokens or 0) + read + written,
                 completion_tokens=output, cached_tokens=read, cache_write_tokens=written,
                 reasoning_tokens=thinking)


def _text_of(message: AssistantMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b.text for b in message.content if b.type == "text" and b.text)


def _thinking_of(message: AssistantMessage) -> str:
    if isinstance(message.content, str):
        return ""
    return "".join(b.thinking for b in message.content if b.type == "thinking" and b.thinking)


_T = TypeVar("_T")


def _first(*values: _T | None) -> _T | None:
    return next((v for v in values if v is not None), None)


def _quota_reports(info: _RateLimitInfo) -> tuple[QuotaReport, ...]:
    """A ``rate_limit_event``'s windows as reports. A window's own ``status`` when it has
    one; else the event's, if the event is about that window (``rateLimitType``); else
    ``allowed``."""
    def status(window: str, own: str | None) -> str:
        return own or (info.status if window == info.rateLimitType else "allowed")

    reports = [QuotaReport(window=name, status=status(name, w.status),
                           utilization=w.utilization, resets_at=w.resetsAt)
               for name, w in info.unifiedWindows.items()]
    if info.rateLimitType is not None and info.rateLimitType not in info.unifiedWindows:
        reports.append(QuotaReport(window=info.rateLimitType, status=info.status,
                                   utilization=info.utilization, resets_at=info.resetsAt))
    return tuple(reports)
