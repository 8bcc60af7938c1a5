"""A ``codex app-server`` thread's notifications → IR events.

* ``item/agentMessage/delta`` → :class:`TextDelta` as it comes (a later message of the same
  turn follows a blank line, as on ``exec``);
* ``item/reasoning/summaryTextDelta`` → :class:`ReasoningDelta` (a later summary part or
  reasoning item follows a blank line);
* ``thread/tokenUsage/updated`` → the turn's :class:`Usage` (its ``last`` breakdown), sent at
  ``turn/completed``;
* ``account/rateLimits/updated`` → a :class:`QuotaReport` per window with a figure
  (:func:`quota_reports`);
* a request's tools (``dynamicTools``, with raw events on): each ``rawResponseItem/completed``
  ``function_call`` is kept, and ``rawResponse/completed`` after any → one
  :class:`ToolCallDelta` per call, the response's :class:`Usage` and at once the terminal
  ``Stop(finish_reason="tool_calls")`` (the runner then interrupts the turn: codex's
  ``item/tool/call`` requests are never answered, so the model is not asked again);
* ``error`` with ``willRetry`` → :class:`Retrying`; without → remembered;
* ``turn/completed`` → :class:`Stop` (``completed``) or the classified :class:`Error`
  (``failed``, ``interrupted``); the synthetic ``olp/turnStartFailed`` → its error;
* the thread ending without ``turn/completed`` (the server died) → ``CLI_FAILED``.

Measured: ``tests/fixtures/cli-reference/codex/app_server/README.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import tzinfo
from typing import Any, Final

import msgspec

from olp.failures import Code, failure
from olp.ir import (
    Error,
    Event,
    QuotaReport,
    ReasoningDelta,
    Retrying,
    Stop,
    TextDelta,
    ToolCallDelta,
    Usage,
)

from ._app_thread import KILLED, TURN_START_FAILED
from ._classify import category_of, classify, read_failure

__all__ = ["CodexAppParser", "quota_reports", "window_name"]

MESSAGE_SEPARATOR: Final = "\n\n"
#: codex's own error kinds (``codexErrorInfo``) → OLP's code, for a message the text rules
#: leave unexplained.
_INFO_CODES: Final[Mapping[str, Code]] = {
    "usageLimitExceeded": Code.USAGE_WINDOW, "unauthorized": Code.UPSTREAM_AUTH,
    "contextWindowExceeded": Code.CONTEXT_LENGTH, "rateLimitExceeded": Code.RATE_LIMITED,
    "serverOverloaded": Code.OVERLOADED, "internalServerError": Code.UPSTREAM_5XX,
    "modelNotFound": Code.UPSTREAM_CLIENT_ERROR, "badRequest": Code.UPSTREAM_CLIENT_ERROR,
}
#: A window's length in minutes → the name OLP's quota and soft triggers know it by.
_WINDOW_NAMES: Final[Mapping[int, str]] = {300: "five_hour", 10080: "seven_day"}


class _TurnError(msgspec.Struct):
    message: str = ""
    codexErrorInfo: Any = None  # noqa: N815 - codex's name
    additionalDetails: str | None = None  # noqa: N815


class _Turn(msgspec.Struct):
    status: str = ""
    error: _TurnError | None = None


class _Breakdown(msgspec.Struct):
    inputTokens: int = 0  # noqa: N815
    cachedInputTokens: int = 0  # noqa: N815
    cacheWriteInputTokens: int = 0  # noqa: N815
    outputTokens: int = 0  # noqa: N815
    reasoningOutputTokens: int = 0  # noqa: N815


class _TokenUsage(msgspec.Struct):
    last: _Breakdown | None = None


class _Window(msgspec.Struct):
    usedPercent: float | None = None  # noqa: N815
    windowDurationMins: int | None = None  # noqa: N815
    resetsAt: float | None = None  # noqa: N815


class _RateLimits(msgspec.Struct):
    primary: _Window | None = None
    secondary: _Window | None = None
    rateLimitReachedType: Any = None  # noqa: N815


class _RawItem(msgspec.Struct):
    type: str = ""
    name: Any = None
    arguments: Any = None
    call_id: Any = None


class _Params(msgspec.Struct):
    itemId: str | None = None  # noqa: N815
    item: _RawItem | None = None
    usage: _Breakdown | None = None
    delta: str | None = None
    summaryIndex: int | None = None  # noqa: N815
    turn: _Turn | None = None
    tokenUsage: _TokenUsage | None = None  # noqa: N815
    rateLimits: _RateLimits | None = None  # noqa: N815
    error: _TurnError | None = None
    willRetry: bool | None = None  # noqa: N815
    code: Any = None
    message: str | None = None


class _Line(msgspec.Struct):
    method: str = ""
    params: _Params | None = None


_LINE: Final = msgspec.json.Decoder(_Line)


class CodexAppParser:
    """Per-thread state: a :class:`~olp.actors.LineParser` of an app-server thread's lines.
    ``now``/``tz`` anchor usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time,
                 tz: tzinfo | None = None) -> None:
        self._now = now
        self._calls: list[_RawItem] = []
        self._tz = tz
        self._terminal: Error | Stop | None = None
        self._usage: Usage | None = None
        self._last_error: _TurnError | None = None
        self._text_item: str | None = None
        self._reasoning_at: tuple[str | None, int | None] | None = None
        self._retries = 0

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one line; never raises (odd lines give nothing)."""
        if self._terminal is not None:
            return ()
        try:
            decoded = _LINE.decode(line)
        except msgspec.DecodeError:
            return ()
        params = decoded.params
        if params is None:
            return ()
        method = decoded.method
        if method == "item/agentMessage/delta":
            return self._text(params)
        if method == "item/reasoning/summaryTextDelta":
            return self._reasoning(params)
        if method == "rawResponseItem/completed" and params.item is not None \
                and params.item.type == "function_call" and isinstance(params.item.name, str):
            self._calls.append(params.item)
            return ()
        if method == "rawResponse/completed" and self._calls:
            return self._tool_calls(params.usage)
        if method == "thread/tokenUsage/updated":
            self._usage = _usage(params.tokenUsage)
            return ()
        if method == "account/rateLimits/updated" and params.rateLimits is not None:
            return quota_reports(params.rateLimits)
        if method == "error" and params.error is not None:
            return self._error(params.error, bool(params.willRetry))
        if method == "turn/completed" and params.turn is not None:
            return self._completed(params.turn)
        if method == TURN_START_FAILED:
            self._terminal = failure(Code.PROTOCOL_ERROR, "codex app-server refused the turn: "
                                     f"{params.message or params.code}")
            return (self._terminal,)
        return ()

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        return ()

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event once the thread has ended (idempotent)."""
        if self._terminal is None:
            if self._last_error is not None:
                self._terminal = self._classify(self._last_error)
            elif returncode == KILLED:
                self._terminal = failure(Code.CLI_FAILED, "codex app-server ended before the "
                                         "turn completed")
            else:
                self._terminal = failure(Code.PROTOCOL_ERROR, "codex app-server ended the "
                                         "thread without turn/completed")
        return self._terminal

    # -- lines -------------------------------------------------------------------------

    def _text(self, params: _Params) -> Sequence[Event]:
        if not params.delta:
            return ()
        text = params.delta
        if self._text_item is not None and params.itemId != self._text_item:
            text = MESSAGE_SEPARATOR + text
        self._text_item = params.itemId
        return (TextDelta(text=text),)

    def _reasoning(self, params: _Params) -> Sequence[Event]:
        if not params.delta:
            return ()
        at = (params.itemId, params.summaryIndex)
        text = params.delta
        if self._reasoning_at is not None and at != self._reasoning_at:
            text = MESSAGE_SEPARATOR + text
        self._reasoning_at = at
        return (ReasoningDelta(text=text),)

    def _tool_calls(self, usage: _Breakdown | None) -> Sequence[Event]:
        calls = self._calls
        events: list[Event] = [
            ToolCallDelta(index=i, id=call.call_id if isinstance(call.call_id, str) else None,
                          name=call.name, arguments=call.arguments
                          if isinstance(call.arguments, str) and call.arguments.strip()
                          else "{}")
            for i, call in enumerate(calls)]
        spent = _usage(_TokenUsage(last=usage))
        if spent is not None:
            events.append(spent)
        self._terminal = Stop(finish_reason="tool_calls")
        events.append(self._terminal)
        return events

    def _error(self, error: _TurnError, will_retry: bool) -> Sequence[Event]:
        if not will_retry:
            self._last_error = error
            return ()
        self._retries += 1
        found = read_failure(_message(error))
        _, category = category_of(found)
        return (Retrying(attempt=self._retries, category=category, status=found.status),)

    def _completed(self, turn: _Turn) -> Sequence[Event]:
        if turn.status == "completed":
            self._terminal = Stop()
            return (*((self._usage,) if self._usage is not None else ()), self._terminal)
        error = turn.error or self._last_error
        if turn.status == "interrupted" and error is None:
            self._terminal = failure(Code.CANCELLED, "the codex turn was interrupted")
        else:
            self._terminal = self._classify(error or _TurnError(f"codex turn {turn.status}"))
        return (*((self._usage,) if self._usage is not None else ()), self._terminal)

    def _classify(self, error: _TurnError) -> Error:
        found = classify(_message(error), now=self._now(), tz=self._tz)
        info = error.codexErrorInfo
        code = _INFO_CODES.get(info) if isinstance(info, str) else None
        if found.code == Code.UPSTREAM_ERROR and code is not None:
            return failure(code, found.message, status=found.status,
                           retry_after_s=found.retry_after_s)
        return found


def _message(error: _TurnError) -> str:
    """The error's text as ``codex exec`` prints it, with any HTTP status codex knew."""
    text = error.message
    if error.additionalDetails:
        text = f"{text} {error.additionalDetails}"
    info = error.codexErrorInfo
    if isinstance(info, dict):
        for detail in info.values():
            status = detail.get("httpStatusCode") if isinstance(detail, dict) else None
            if isinstance(status, int) and "status" not in text.lower():
                text = f"{text} (status {status})"
    return text


def _usage(token_usage: _TokenUsage | None) -> Usage | None:
    last = token_usage.last if token_usage is not None else None
    if last is None:
        return None
    return Usage(prompt_tokens=last.inputTokens, completion_tokens=last.outputTokens,
                 cached_tokens=last.cachedInputTokens,
                 cache_write_tokens=last.cacheWriteInputTokens,
                 reasoning_tokens=last.reasoningOutputTokens)


def window_name(minutes: int | None, fallback: str) -> str:
    """OLP's name for a usage window ``minutes`` long (``five_hour``, ``seven_day``);
    ``fallback`` (codex's ``primary``/``secondary``) for a length it has no name for."""
    return _WINDOW_NAMES.get(minutes, fallback) if minutes is not None else fallback


def quota_reports(limits: _RateLimits) -> tuple[QuotaReport, ...]:
    """The login's usage windows as reports: one per window codex gave a figure for (its
    ``usedPercent`` as a fraction; ``rejected`` at 100 % or when codex says a limit was
    reached, else ``allowed``)."""
    reports = []
    for fallback, window in (("primary", limits.primary), ("secondary", limits.secondary)):
        if window is None or window.usedPercent is None:
            continue
        used = window.usedPercent / 100.0
        status = "rejected" if used >= 1.0 else "allowed"
        reports.append(QuotaReport(window=window_name(window.windowDurationMins, fallback),
                                   status=status, utilization=used,
                                   resets_at=window.resetsAt))
    return tuple(reports)
