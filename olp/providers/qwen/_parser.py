"""qwen ``-o stream-json --include-partial-messages`` → IR events.

What qwen shares with claude (text and thinking deltas, the bridge's ``tool_use`` blocks,
``result``, the exit) is read by :class:`~olp.providers._stream_json.StreamJsonParser`; this
parser adds qwen's own: ``system/init`` listing a built-in tool → ``CONFIG_ERROR``;
``system/retry`` → :class:`Retrying` (or ``STREAM_ABANDONED`` when qwen would continue printed
text from a new request); text that is or may become ``[API Error: ...]`` held until it is
known to be content; a ``tool_use`` of a built-in tool → ``TOOL_CALL_INVALID``; an
``assistant`` message ending in ``tool_use`` → its calls, :class:`~olp.ir.Usage` and the
terminal ``Stop(finish_reason="tool_calls")``; a non-zero exit classified from stderr and the
exit code.
Every line and every exit: ``tests/fixtures/cli-reference/qwen/README.md``, "How OLP reads
stdout".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from olp.failures import Code, failure
from olp.ir import Error, Event, Retrying, Stop
from olp.providers._exit import stderr_excerpt
from olp.providers._finish import STDERR_LIMIT
from olp.providers._stream_json import (
    Assistant,
    Block,
    Envelope,
    Init,
    Result,
    ResultError,
    StreamJsonParser,
    client_name,
)

from ._classify import Failure, classify

API_ERROR_PREFIX: Final = "[API Error"


class _RetryData(msgspec.Struct):
    attempt: int | None = None
    maxRetries: int | None = None  # noqa: N815 - qwen's name
    delayMs: float | None = None  # noqa: N815
    preserveText: bool = False  # noqa: N815


class _Retry(msgspec.Struct):
    data: _RetryData | None = None


_RETRY: Final = msgspec.json.Decoder(_Retry)


class QwenParser(StreamJsonParser):
    """Per-job state for one qwen run. ``now`` is the clock for usage-window resets."""

    cli = "qwen"
    bridge_lists_tools = True

    def _other(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        if envelope.type == "system" and envelope.subtype == "retry":
            return self._retry(_RETRY.decode(line))
        return ()

    def _init_problem(self, line: Init) -> Error | None:
        own = [t for t in line.tools if client_name(t) is None]
        if own:
            names = ", ".join(str(t) for t in own[:5])
            return failure(Code.CONFIG_ERROR, f"qwen started with built-in tools ({names}); "
                           "OLP's settings did not take effect", category="unavailable")
        return self._bridge_problem(line)

    def _retry(self, line: _Retry) -> Sequence[Event]:
        data = line.data
        if data is None:
            return ()
        if data.attempt is not None:
            delay = None if data.delayMs is None else data.delayMs / 1000
            return (Retrying(attempt=data.attempt, max_retries=data.maxRetries, delay_s=delay,
                             category="rate_limited"),)
        if data.preserveText and (self._emitted_text or self._held):
            return self._end_with(failure(
                Code.STREAM_ABANDONED, "qwen re-asked after a stalled stream and would "
                "continue the answer from a new request"))
        return ()

    def _holds(self, text: str) -> bool:
        return text.startswith(API_ERROR_PREFIX) or API_ERROR_PREFIX.startswith(text)

    def _own_tool(self, block: Block) -> Sequence[Event]:
        return self._end_with(failure(
            Code.TOOL_CALL_INVALID, f"the model called qwen's built-in tool "
            f"{block.name or '(unnamed)'!r}, which OLP does not offer; nothing ran"))

    def _assistant(self, line: Assistant) -> Sequence[Event]:
        message = line.message
        if message is None or message.stop_reason != "tool_use" \
                or isinstance(message.content, str):
            return ()
        events = self._whole_tool_calls(message)
        if self._terminal is not None or not self._calls:
            return events
        if message.usage is not None:
            events.append(self._usage(message.usage))
        self._terminal = Stop(finish_reason="tool_calls")
        events.append(self._terminal)
        return events

    def _failed(self, line: Result) -> Error:
        reported = line.error.message if isinstance(line.error, ResultError) else line.error
        text = reported or line.result or self._held \
            or f"qwen reported {line.subtype or 'an error'}"
        self._held = ""
        return classify(Failure(text=text), now=self._now())

    def _explain_exit(self, returncode: int, stderr_tail: bytes) -> Error | None:
        excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
        error = classify(Failure(text=excerpt, exit_code=returncode), now=self._now())
        return error if error.code != Code.UPSTREAM_ERROR else None
