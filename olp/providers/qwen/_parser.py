"""qwen ``-o stream-json --include-partial-messages`` → IR events.

Line handling (schema in ``tests/fixtures/cli-reference/qwen/README.md``):

* ``system/init`` → nothing, unless it lists a tool other than OLP's bridge's
  (``mcp__olp__<name>``; the no-tools recipe gives ``"tools": []``): then a terminal
  ``CONFIG_ERROR`` before the model is asked anything with it. When it lists the bridge (the
  MCP server ``olp``, configured only when tools were offered) with a status other than
  ``connected``, or connected without any of its tools → a terminal ``TOOL_BRIDGE_FAILED``
  (qwen would answer without the tools: it only warns on stderr).
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
  error: dropped). A ``content_block_start`` of a ``tool_use`` block of the bridge →
  :class:`ToolCallDelta` (a running index over the whole run, since qwen numbers the blocks
  of each message from 0; the block's id; the client's name, prefix stripped), flushing any
  held text first; its ``input_json_delta`` → the call's argument fragment (qwen prints the
  arguments whole, re-serialised). A ``tool_use`` of any other tool (qwen's own: none is
  offered, so the model made one up) → a terminal ``TOOL_CALL_INVALID``: it is never an
  answer (``--max-tool-calls 0`` stops qwen before the tool runs).
* ``assistant`` with ``stop_reason: "tool_use"`` after bridge calls (the model's message is
  complete: every block of it was printed before) → any bridge ``tool_use`` block not seen
  as a stream event as one whole :class:`ToolCallDelta`, :class:`Usage` (the message's
  ``input_tokens``/``output_tokens``) and a terminal ``Stop(finish_reason="tool_calls")``:
  qwen now aborts on its ``--max-tool-calls 0`` budget (exit 55), and the runner kills it. A
  text-only ``assistant`` (a preamble; qwen prints it as a message of its own before the
  calls' message) → nothing.
* ``result``: success → held text, the ``result`` text when no text was emitted at all, and
  :class:`Usage` (``input_tokens``/``output_tokens``: the upstream's prompt/completion
  tokens); :class:`Stop` at :meth:`QwenParser.finish`. Error → the classified terminal
  :class:`Error` at once (``error.message``).
* Any other ``assistant``, ``user``, other ``stream_event`` types and unknown lines →
  nothing. Lines that are not JSON objects, or whose fields have unexpected types → nothing.
* :meth:`QwenParser.finish`: exit 0 after a successful result → :class:`Stop`; exit 0 without
  one → ``PROTOCOL_ERROR``; a non-zero exit without a result → classified from the exit code
  and stderr (the tool-call budget, an empty prompt, a signal, ...), else ``CLI_FAILED``
  naming the exit and a sanitised stderr excerpt.

After a terminal event :meth:`QwenParser.feed` returns nothing and :meth:`QwenParser.finish`
returns that same event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code, failure
from olp.ir import Error, Event, Retrying, Stop, TextDelta, ToolCallDelta, Usage
from olp.providers._exit import describe_exit, stderr_excerpt

from ._classify import Failure, classify

API_ERROR_PREFIX: Final = "[API Error"
STDERR_LIMIT: Final = 200
_TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"


class _Envelope(msgspec.Struct):
    type: str = ""
    subtype: str | None = None


class _McpServer(msgspec.Struct):
    name: str = ""
    status: str = ""


class _Init(msgspec.Struct):
    tools: list[Any] = []
    mcp_servers: list[_McpServer] = []


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
    partial_json: str | None = None


class _Block(msgspec.Struct):
    type: str = ""
    id: str | None = None
    name: str | None = None
    input: Any = None


class _SseEvent(msgspec.Struct):
    type: str = ""
    index: int | None = None
    delta: _Delta | None = None
    content_block: _Block | None = None


class _StreamEvent(msgspec.Struct):
    event: _SseEvent | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _AssistantMessage(msgspec.Struct):
    content: list[_Block] | str = []
    stop_reason: str | None = None
    usage: _Usage | None = None


class _Assistant(msgspec.Struct):
    message: _AssistantMessage | None = None


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
_ASSISTANT: Final = msgspec.json.Decoder(_Assistant)


class QwenParser:
    """Per-job state for one qwen run. ``now`` is the clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._terminal: Error | Stop | None = None
        self._succeeded = False
        self._emitted_text = False
        self._held = ""  # text that may be an "[API Error: ...]" report
        self._calls = 0  # bridge calls reported (their indices are 0 .. calls-1)
        self._call_blocks: dict[int, int] = {}  # this message's block index -> call index
        self._tool_ids: set[str] = set()  # tool_use ids already reported

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
        own = [t for t in line.tools if _client_name(t) is None]
        if own:
            names = ", ".join(str(t) for t in own[:5])
            self._terminal = failure(
                Code.CONFIG_ERROR, f"qwen started with built-in tools ({names}); OLP's "
                "settings did not take effect", category="unavailable")
            return (self._terminal,)
        for server in line.mcp_servers:
            if server.name != SERVER_NAME:
                continue
            if server.status != "connected" or not line.tools:
                state = "no tools" if server.status == "connected" else server.status
                self._terminal = failure(
                    Code.TOOL_BRIDGE_FAILED, f"qwen started without OLP's tool bridge (MCP "
                    f"server {SERVER_NAME!r}: {state or 'no status'})", status=502)
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
        if event.type == "message_start":
            self._call_blocks.clear()
            return ()
        block = event.content_block
        if event.type == "content_block_start" and block is not None \
                and block.type == "tool_use":
            return self._call_start(block, event.index)
        delta = event.delta
        if (event.type == "content_block_delta" and delta is not None
                and delta.type == "input_json_delta"):
            call = self._call_blocks.get(event.index) if event.index is not None else None
            if call is None or not delta.partial_json:
                return ()
            return (ToolCallDelta(index=call, arguments=delta.partial_json),)
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

    def _call_start(self, block: _Block, index: int | None) -> Sequence[Event]:
        name = _client_name(block.name)
        if name is None:
            self._terminal = failure(
                Code.TOOL_CALL_INVALID, f"the model called qwen's built-in tool "
                f"{block.name or '(unnamed)'!r}, which OLP does not offer; nothing ran")
            return (self._terminal,)
        events = self._flush_held()
        if index is not None:
            self._call_blocks[index] = self._calls
        if block.id is not None:
            self._tool_ids.add(block.id)
        events.append(ToolCallDelta(index=self._calls, id=block.id, name=name))
        self._calls += 1
        return events

    def _flush_held(self) -> list[Event]:
        if not self._held:
            return []
        text, self._held = self._held, ""
        self._emitted_text = True
        return [TextDelta(text=text)]

    def _assistant(self, line: _Assistant) -> Sequence[Event]:
        message = line.message
        if message is None or message.stop_reason != "tool_use" \
                or isinstance(message.content, str):
            return ()
        events: list[Event] = []
        for block in message.content:
            if block.type != "tool_use" or (block.id is not None and block.id in self._tool_ids):
                continue
            name = _client_name(block.name)
            if name is None:
                return self._call_start(block, None)  # the built-in tool's terminal error
            if block.id is not None:
                self._tool_ids.add(block.id)
            events += self._flush_held()
            events.append(ToolCallDelta(
                index=self._calls, id=block.id, name=name,
                arguments=json.dumps(block.input if block.input is not None else {},
                                     ensure_ascii=False)))
            self._calls += 1
        if not self._calls:
            return events
        if message.usage is not None:
            events.append(Usage(prompt_tokens=message.usage.input_tokens or 0,
                                completion_tokens=message.usage.output_tokens or 0))
        self._terminal = Stop(finish_reason="tool_calls")
        events.append(self._terminal)
        return events

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


def _client_name(name: object) -> str | None:
    """The client's tool name: qwen's ``mcp__olp__<name>`` without the prefix; ``None`` for a
    tool that is not the bridge's (qwen's own). The tool gate refuses a name the request did
    not offer."""
    if isinstance(name, str) and name.startswith(_TOOL_PREFIX) and len(name) > len(_TOOL_PREFIX):
        return name.removeprefix(_TOOL_PREFIX)
    return None
