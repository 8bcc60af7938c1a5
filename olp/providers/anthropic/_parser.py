"""claude ``--output-format stream-json --verbose --include-partial-messages`` → IR events.

Line handling (schema in ``cli-reference/claude/README.md``):

* ``system/init`` → nothing, unless it lists OLP's tool bridge (the MCP server ``olp``,
  configured only when tools were offered) with a status other than ``connected``: then a
  terminal ``TOOL_BRIDGE_FAILED`` (claude would answer without the tools).
* ``rate_limit_event`` (claude signed in with a subscription's OAuth token derives it from
  the API's ``anthropic-ratelimit-unified-*`` headers; ``tests/fixtures/cli-reference/claude/
  rate_limit_event``) → one :class:`QuotaReport` per window in ``unifiedWindows``
  (``five_hour``, ``seven_day``, ...), and one for ``rateLimitType`` when it names another;
  a bare ``{"status": "allowed"}`` → nothing.
* ``system/status``, ``user`` and unknown types → nothing. Lines that are not JSON objects,
  or whose fields have unexpected types → nothing.
* ``system/api_retry`` → :class:`Retrying`.
* ``stream_event``: ``message_start`` → :class:`Start` (when the model changes);
  ``text_delta`` → :class:`TextDelta`; ``content_block_start`` of a ``tool_use`` block of
  OLP's bridge (``mcp__olp__<name>``) → :class:`ToolCallDelta` with the block's index, id and
  the client's name (prefix stripped); its ``input_json_delta`` → its argument fragment;
  ``message_delta`` with ``stop_reason`` ``tool_use`` after such a call → :class:`Usage`
  (``message_start``'s input tokens, the delta's output tokens) and a terminal
  ``Stop(finish_reason="tool_calls")`` — claude would now wait for the ``tools/call`` answer,
  and the runner kills it. A ``tool_use`` of any other tool is claude's own (one an owner
  deliberately switched back on with ``extra_args``; by default none is offered): claude runs
  it and goes on, so it is not reported and does not end the job. A ``message_stop`` with
  ``abandoned_blocks`` (claude gave up on a stalled stream and re-asks without retracting
  what it printed) → a terminal
  ``STREAM_ABANDONED`` error if text was already emitted, else nothing.
* ``assistant``: an API-error message is remembered for classification; otherwise its text
  is emitted as one delta unless deltas were already seen for that message id (the
  non-streaming re-ask, or output without partial messages), and each bridge ``tool_use``
  block not yet seen as a stream event becomes one whole :class:`ToolCallDelta`. A model not
  announced yet is announced first with :class:`Start`.
* ``result``: success → :class:`Usage` now (preceded by the ``result`` text when no text was
  emitted at all, as with ``--output-format json``), :class:`Stop` at
  :meth:`AnthropicParser.finish`; error → the classified terminal :class:`Error` at once.
* :meth:`AnthropicParser.finish`: exit 0 after a successful result → :class:`Stop`; exit 0
  without one → ``PROTOCOL_ERROR``; a non-zero exit without a result → the remembered API
  error if an error ``assistant`` line came, else ``CLI_FAILED`` naming the exit code or
  signal and a sanitised stderr excerpt (≤ 200 chars, secrets masked); a non-zero exit after
  a successful result → ``CLI_FAILED`` too.

After a terminal event :meth:`AnthropicParser.feed` returns nothing and
:meth:`AnthropicParser.finish` returns that same event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code, failure
from olp.ir import (
    Error,
    Event,
    FinishReason,
    QuotaReport,
    Retrying,
    Start,
    Stop,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from olp.providers._exit import describe_exit, stderr_excerpt

from ._classify import Failure, classify, retry_category

STDERR_LIMIT: Final = 200


class _Envelope(msgspec.Struct):
    type: str = ""
    subtype: str | None = None


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


class _McpServer(msgspec.Struct):
    name: str = ""
    status: str = ""


class _Init(msgspec.Struct):
    mcp_servers: list[_McpServer] = []


class _SseUsage(msgspec.Struct):
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None


class _SseMessage(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: _SseUsage | None = None


class _SseDelta(msgspec.Struct):
    type: str = ""
    text: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _SseBlock(msgspec.Struct):
    type: str = ""
    id: str | None = None
    name: str | None = None


class _SseEvent(msgspec.Struct):
    type: str = ""
    index: int | None = None
    message: _SseMessage | None = None
    delta: _SseDelta | None = None
    content_block: _SseBlock | None = None
    usage: _SseUsage | None = None


class _StreamEvent(msgspec.Struct):
    event: _SseEvent | None = None
    api_message_id: str | None = None
    abandoned_blocks: Any = None


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None


class _AssistantMessage(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    content: list[_Block] | str = []


class _Assistant(msgspec.Struct):
    message: _AssistantMessage | None = None
    error: str | None = None
    is_api_error_message: bool = False
    api_error_status: int | None = None
    api_error_type: str | None = None
    api_error: str | None = None


class _ResultUsage(msgspec.Struct):
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None


class _Result(msgspec.Struct):
    subtype: str | None = None
    is_error: bool = False
    result: str | None = None
    stop_reason: str | None = None
    api_error_status: int | None = None
    api_error_type: str | None = None
    api_error: str | None = None
    usage: _ResultUsage | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_INIT: Final = msgspec.json.Decoder(_Init)
_API_RETRY: Final = msgspec.json.Decoder(_ApiRetry)
_RATE_LIMIT_EVENT: Final = msgspec.json.Decoder(_RateLimitEvent)
_STREAM_EVENT: Final = msgspec.json.Decoder(_StreamEvent)
_ASSISTANT: Final = msgspec.json.Decoder(_Assistant)
_RESULT: Final = msgspec.json.Decoder(_Result)

_FINISH: Final[dict[str, FinishReason]] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "tool_use": "tool_calls", "refusal": "content_filter",
}
_SYNTHETIC_MODEL: Final = "<synthetic>"
_TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"
_WHOLE_CALL_INDEX: Final = 1_000_000  # indices of calls seen only in ``assistant`` events


class AnthropicParser:
    """Per-job state for one claude run. ``now`` is the clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._terminal: Error | Stop | None = None
        self._finish_reason: FinishReason | None = None  # set by a successful result
        self._api_error: _Assistant | None = None
        self._model: str | None = None
        self._current_id: str | None = None
        self._delta_ids: set[str] = set()
        self._deltas_since_assistant = False
        self._emitted_text = False
        self._tool_ids: set[str] = set()  # tool_use blocks already reported
        self._call_blocks: set[int] = set()  # stream indices of the bridge calls being read
        self._whole_calls = 0
        self._input_tokens = 0  # of the current message (message_start)

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._terminal is not None:
            return ()
        try:
            envelope = _ENVELOPE.decode(line)
            if envelope.type == "stream_event":
                return self._stream_event(_STREAM_EVENT.decode(line))
            if envelope.type == "assistant":
                return self._assistant(_ASSISTANT.decode(line))
            if envelope.type == "result":
                return self._result(_RESULT.decode(line))
            if envelope.type == "rate_limit_event":
                return _quota_reports(_RATE_LIMIT_EVENT.decode(line).rate_limit_info)
            if envelope.type == "system" and envelope.subtype == "api_retry":
                return (self._retry(_API_RETRY.decode(line)),)
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
        if self._finish_reason is not None and returncode == 0:
            return Stop(finish_reason=self._finish_reason)
        if self._finish_reason is None and self._api_error is not None and returncode != 0:
            return self._classify(None)  # killed between the error message and its result
        if returncode == 0:
            return Error(code=Code.PROTOCOL_ERROR, category="unknown",
                         message="claude exited with code 0 without a result line")
        after = " after a complete answer" if self._finish_reason is not None else ""
        message = f"claude {describe_exit(returncode)}{after}"
        excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
        if excerpt:
            message = f"{message}; stderr: {excerpt}"
        return Error(code=Code.CLI_FAILED, category="unknown", message=message)

    def _retry(self, line: _ApiRetry) -> Retrying:
        delay = None if line.retry_delay_ms is None else line.retry_delay_ms / 1000
        return Retrying(attempt=line.attempt, max_retries=line.max_retries, delay_s=delay,
                        status=line.error_status,
                        category=retry_category(line.error, line.error_status))

    def _init(self, line: _Init) -> Sequence[Event]:
        for server in line.mcp_servers:
            if server.name == SERVER_NAME and server.status != "connected":
                self._terminal = failure(
                    Code.TOOL_BRIDGE_FAILED, f"claude started without OLP's tool bridge (MCP "
                    f"server {SERVER_NAME!r}: {server.status or 'no status'})", status=502)
                return (self._terminal,)
        return ()

    def _stream_event(self, line: _StreamEvent) -> Sequence[Event]:
        event = line.event
        if event is None:
            return ()
        if event.type == "message_start" and event.message is not None:
            self._current_id = line.api_message_id or event.message.id
            self._input_tokens = _input_tokens(event.message.usage)
            self._call_blocks.clear()
            return self._start(event.message.model)
        block = event.content_block
        if (event.type == "content_block_start" and block is not None
                and block.type == "tool_use" and event.index is not None):
            name = _client_name(block.name)
            if name is None:
                return ()  # claude's own tool: it runs it itself
            if block.id is not None:
                self._tool_ids.add(block.id)
            self._call_blocks.add(event.index)
            return (ToolCallDelta(index=event.index, id=block.id, name=name),)
        if (event.type == "content_block_delta" and event.delta is not None
                and event.delta.type == "input_json_delta" and event.index is not None):
            fragment = event.delta.partial_json or ""
            if not fragment or event.index not in self._call_blocks:
                return ()
            return (ToolCallDelta(index=event.index, arguments=fragment),)
        if (event.type == "message_delta" and event.delta is not None
                and event.delta.stop_reason == "tool_use" and self._call_blocks):
            self._terminal = Stop(finish_reason="tool_calls")
            output = event.usage.output_tokens if event.usage is not None else None
            if output is None:
                return (self._terminal,)
            return (Usage(prompt_tokens=self._input_tokens, completion_tokens=output),
                    self._terminal)
        if (event.type == "content_block_delta" and event.delta is not None
                and event.delta.type == "text_delta" and event.delta.text):
            message_id = line.api_message_id or self._current_id
            if message_id is not None:
                self._delta_ids.add(message_id)
            self._deltas_since_assistant = True
            self._emitted_text = True
            return (TextDelta(text=event.delta.text),)
        if event.type == "message_stop" and line.abandoned_blocks is not None:
            if self._emitted_text:
                self._terminal = Error(
                    code=Code.STREAM_ABANDONED, category="unavailable",
                    message="claude abandoned a stalled stream after text was sent and would "
                            "answer again from the start")
                return (self._terminal,)
        return ()

    def _assistant(self, line: _Assistant) -> Sequence[Event]:
        message = line.message
        if line.is_api_error_message or (message is not None
                                         and message.model == _SYNTHETIC_MODEL):
            self._api_error = line
            return ()
        streamed = self._deltas_since_assistant
        self._deltas_since_assistant = False
        if message is None:
            return ()
        if message.id is not None:
            streamed = message.id in self._delta_ids
        text = _text_of(message)
        calls = self._whole_tool_calls(message)
        if (streamed or not text) and not calls:
            return ()
        events: list[Event] = [*self._start(message.model)]
        if text and not streamed:
            self._emitted_text = True
            events.append(TextDelta(text=text))
        return (*events, *calls)

    def _whole_tool_calls(self, message: _AssistantMessage) -> list[Event]:
        """The ``tool_use`` blocks of an ``assistant`` event not seen as stream events."""
        if isinstance(message.content, str):
            return []
        calls: list[Event] = []
        for block in message.content:
            name = _client_name(block.name)
            if (block.type != "tool_use" or name is None
                    or (block.id is not None and block.id in self._tool_ids)):
                continue
            if block.id is not None:
                self._tool_ids.add(block.id)
            calls.append(ToolCallDelta(
                index=_WHOLE_CALL_INDEX + self._whole_calls, id=block.id, name=name,
                arguments=json.dumps(block.input if block.input is not None else {},
                                     ensure_ascii=False)))
            self._whole_calls += 1
        return calls

    def _result(self, line: _Result) -> Sequence[Event]:
        if line.is_error or (line.subtype or "").startswith("error"):
            self._terminal = self._classify(line)
            return (self._terminal,)
        self._finish_reason = _FINISH.get(line.stop_reason or "", "stop")
        events: list[Event] = []
        if not self._emitted_text and line.result:
            self._emitted_text = True
            events.append(TextDelta(text=line.result))
        if line.usage is not None:
            u = line.usage
            prompt = ((u.input_tokens or 0) + (u.cache_creation_input_tokens or 0)
                      + (u.cache_read_input_tokens or 0))
            events.append(Usage(prompt_tokens=prompt, completion_tokens=u.output_tokens or 0))
        return events

    def _classify(self, result: _Result | None) -> Error:
        a = self._api_error
        a_text = _text_of(a.message) if a is not None and a.message is not None else ""
        text = (result.result if result is not None else None) or a_text
        if not text and result is not None and result.subtype:
            text = f"claude reported {result.subtype}"
        r = result if result is not None else _Result()
        b = a if a is not None else _Assistant()
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


def _client_name(name: str | None) -> str | None:
    """The client's tool name: claude's ``mcp__olp__<name>`` without the prefix; ``None`` for
    a tool that is not the bridge's (claude's own). The tool gate refuses a name the request
    did not offer."""
    if name is not None and name.startswith(_TOOL_PREFIX) and len(name) > len(_TOOL_PREFIX):
        return name.removeprefix(_TOOL_PREFIX)
    return None


def _input_tokens(usage: _SseUsage | None) -> int:
    if usage is None:
        return 0
    return ((usage.input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0))


def _text_of(message: _AssistantMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b.text for b in message.content if b.type == "text" and b.text)


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
