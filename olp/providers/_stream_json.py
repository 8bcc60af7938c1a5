"""The stream-json lines claude and qwen both print → IR events.

Both CLIs wrap Anthropic's streaming events in ``stream_event`` lines, print each finished
message as an ``assistant`` line and end with a ``result``; both name the tools of OLP's bridge
(the MCP server ``olp``) ``mcp__olp__<name>``. :class:`StreamJsonParser` reads what they share:
a bridge not connected at ``system/init`` → ``TOOL_BRIDGE_FAILED``; ``text_delta`` →
:class:`TextDelta`; ``thinking_delta`` → :class:`ReasoningDelta`; a bridge ``tool_use`` block
(streamed, or whole in an ``assistant`` message) → :class:`ToolCallDelta`; ``result`` → an
error at once, or text, :class:`Usage` and the :class:`Stop` at the exit
(:func:`~olp.providers._finish.exit_event`). Odd lines give nothing; after a terminal event,
nothing more. Each CLI's parser subclasses it and fills in what differs through the hooks.
The line schemas: ``tests/fixtures/cli-reference/claude/`` and
``tests/fixtures/cli-reference/qwen/`` (``README.md``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code, failure
from olp.ir import (
    Error,
    Event,
    FinishReason,
    ReasoningDelta,
    Stop,
    TextDelta,
    ToolCallDelta,
    Usage,
)

from ._finish import exit_event
from ._jsonl import Envelope, JsonLinesParser

__all__ = ["TOOL_PREFIX", "Assistant", "AssistantMessage", "Block", "Envelope", "Init",
           "Result", "ResultError", "SseEvent", "StreamEvent", "StreamJsonParser", "TokenUsage",
           "client_name"]

#: How both CLIs name a tool of OLP's bridge: ``mcp__<server>__<tool>``.
TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"


class _McpServer(msgspec.Struct):
    name: str = ""
    status: str = ""


class Init(msgspec.Struct):
    tools: list[Any] = []
    mcp_servers: list[_McpServer] = []


class OutputDetails(msgspec.Struct):
    thinking_tokens: int | None = None


class TokenUsage(msgspec.Struct):
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_details: OutputDetails | None = None

    @property
    def thinking_tokens(self) -> int:
        """Of the output tokens, those spent thinking (0 when not reported)."""
        details = self.output_tokens_details
        return (details.thinking_tokens or 0) if details is not None else 0


class _SseMessage(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None


class _SseDelta(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None


class SseEvent(msgspec.Struct):
    type: str = ""
    index: int | None = None
    message: _SseMessage | None = None
    delta: _SseDelta | None = None
    content_block: Block | None = None
    usage: TokenUsage | None = None


class StreamEvent(msgspec.Struct):
    event: SseEvent | None = None
    api_message_id: str | None = None
    abandoned_blocks: Any = None


class AssistantMessage(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    content: list[Block] | str = []
    stop_reason: str | None = None
    usage: TokenUsage | None = None


class Assistant(msgspec.Struct):
    message: AssistantMessage | None = None
    error: str | None = None
    is_api_error_message: bool = False
    api_error_status: int | None = None
    api_error_type: str | None = None
    api_error: str | None = None


class ResultError(msgspec.Struct):
    message: str | None = None


class Result(msgspec.Struct):
    subtype: str | None = None
    is_error: bool = False
    result: str | None = None
    stop_reason: str | None = None
    api_error_status: int | None = None
    api_error_type: str | None = None
    api_error: str | None = None
    usage: TokenUsage | None = None
    error: ResultError | str | None = None


_INIT: Final = msgspec.json.Decoder(Init)
_STREAM_EVENT: Final = msgspec.json.Decoder(StreamEvent)
_ASSISTANT: Final = msgspec.json.Decoder(Assistant)
_RESULT: Final = msgspec.json.Decoder(Result)


class StreamJsonParser(JsonLinesParser):
    """Per-job state for one stream-json run (see the module docstring); a CLI's parser
    subclasses it. ``now`` is the clock for usage-window resets."""

    #: The CLI's name in messages (``claude``, ``qwen``).
    cli: ClassVar[str]
    #: Whether a connected bridge must also have listed its tools in ``system/init``.
    bridge_lists_tools: ClassVar[bool] = False

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._answered: FinishReason | None = None  # set by a successful result
        self._emitted_text = False
        self._held = ""  # text a subclass holds back (:meth:`_holds`)
        self._calls = 0  # bridge calls reported
        self._whole_calls = 0  # of them, calls seen only in an ``assistant`` message
        self._call_blocks: dict[int, int] = {}  # this message's block index -> call index
        self._tool_ids: set[str] = set()  # tool_use ids already reported

    def _read(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        if envelope.type == "stream_event":
            return self._stream_event(_STREAM_EVENT.decode(line))
        if envelope.type == "assistant":
            return self._assistant(_ASSISTANT.decode(line))
        if envelope.type == "result":
            return self._result(_RESULT.decode(line))
        if envelope.type == "system" and envelope.subtype == "init":
            return self._end_with(self._init_problem(_INIT.decode(line)))
        return self._other(envelope, line)

    # -- hooks ---------------------------------------------------------------------------

    def _other(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        """Events for a line of another type (the CLI's own; may raise DecodeError)."""
        return ()

    def _init_problem(self, line: Init) -> Error | None:
        """Why the run cannot go on as ``system/init`` shows it, or ``None``."""
        return self._bridge_problem(line)

    def _message_start(self, line: StreamEvent, event: SseEvent) -> Sequence[Event]:
        return ()

    def _message_delta(self, event: SseEvent) -> Sequence[Event]:
        return ()

    def _message_stop(self, line: StreamEvent) -> Sequence[Event]:
        return ()

    def _text_delta(self, line: StreamEvent, text: str) -> Sequence[Event]:
        """A streamed piece of text (non-empty)."""
        return self._text(text)

    def _thinking_delta(self, line: StreamEvent, text: str) -> Sequence[Event]:
        """A streamed piece of the model's thinking (non-empty)."""
        return (ReasoningDelta(text=text),)

    def _holds(self, text: str) -> bool:
        """Whether ``text`` (held text and the new delta) must wait for what follows."""
        return False

    def _own_tool(self, block: Block) -> Sequence[Event]:
        """A ``tool_use`` of a tool that is not the bridge's: nothing by default (the CLI
        runs its own tool); a subclass may end the job instead."""
        return ()

    def _call_number(self, block_index: int | None) -> int | None:
        """The index a streamed call is reported under (``None``: not reported)."""
        return self._calls

    def _whole_call_number(self) -> int:
        """The index a call seen only in an ``assistant`` message is reported under."""
        return self._calls

    def _assistant(self, line: Assistant) -> Sequence[Event]:
        return ()

    def _failed(self, line: Result) -> Error:
        """The terminal error of a ``result`` that reports a failure."""
        raise NotImplementedError

    def _finish_reason(self, line: Result) -> FinishReason:
        return "stop"

    def _usage(self, usage: TokenUsage) -> Usage:
        """The result's usage; by default ``input_tokens`` counts the cached ones, of which
        ``cache_read_input_tokens`` tells how many (qwen's: the upstream's prompt count)."""
        return Usage(prompt_tokens=usage.input_tokens or 0,
                     completion_tokens=usage.output_tokens or 0,
                     cached_tokens=usage.cache_read_input_tokens or 0)

    def _explain_exit(self, returncode: int, stderr_tail: bytes) -> Error | None:
        """What a non-zero exit means, when the run tells more than ``CLI_FAILED``."""
        return None

    # -- the shared reading --------------------------------------------------------------

    def _end_with(self, terminal: Error | Stop | None) -> Sequence[Event]:
        if terminal is None:
            return ()
        self._terminal = terminal
        return (terminal,)

    def _bridge_problem(self, line: Init) -> Error | None:
        for server in line.mcp_servers:
            if server.name != SERVER_NAME:
                continue
            if server.status != "connected":
                state = server.status or "no status"
            elif self.bridge_lists_tools and not line.tools:
                state = "no tools"
            else:
                continue
            return failure(Code.TOOL_BRIDGE_FAILED, f"{self.cli} started without OLP's tool "
                           f"bridge (MCP server {SERVER_NAME!r}: {state})", status=502)
        return None

    def _stream_event(self, line: StreamEvent) -> Sequence[Event]:
        event = line.event
        if event is None:
            return ()
        if event.type == "message_start":
            self._call_blocks.clear()
            return self._message_start(line, event)
        block, delta = event.content_block, event.delta
        if event.type == "content_block_start" and block is not None \
                and block.type == "tool_use":
            return self._call_start(block, event.index)
        if event.type == "content_block_delta" and delta is not None:
            if delta.type == "input_json_delta":
                call = self._call_blocks.get(event.index) if event.index is not None else None
                if call is None or not delta.partial_json:
                    return ()
                return (ToolCallDelta(index=call, arguments=delta.partial_json),)
            if delta.type == "text_delta" and delta.text:
                return self._text_delta(line, delta.text)
            if delta.type == "thinking_delta" and delta.thinking:
                return self._thinking_delta(line, delta.thinking)
            return ()
        if event.type == "message_delta":
            return self._message_delta(event)
        if event.type == "message_stop":
            return self._message_stop(line)
        return ()

    def _text(self, text: str) -> Sequence[Event]:
        text = self._held + text
        if self._holds(text):
            self._held = text
            return ()
        self._held = ""
        self._emitted_text = True
        return (TextDelta(text=text),)

    def _release_held(self) -> list[Event]:
        if not self._held:
            return []
        text, self._held = self._held, ""
        self._emitted_text = True
        return [TextDelta(text=text)]

    def _call_start(self, block: Block, index: int | None) -> Sequence[Event]:
        name = client_name(block.name)
        if name is None:
            return self._own_tool(block)
        number = self._call_number(index)
        if number is None:
            return ()
        events = self._release_held()
        if index is not None:
            self._call_blocks[index] = number
        if block.id is not None:
            self._tool_ids.add(block.id)
        self._calls += 1
        events.append(ToolCallDelta(index=number, id=block.id, name=name))
        return events

    def _whole_tool_calls(self, message: AssistantMessage) -> list[Event]:
        """The bridge ``tool_use`` blocks of an ``assistant`` message not seen as stream
        events, each as one whole call; what :meth:`_own_tool` says for another tool's block
        (when that is something, it replaces the calls)."""
        if isinstance(message.content, str):
            return []
        events: list[Event] = []
        for block in message.content:
            if block.type != "tool_use" or (block.id is not None and block.id in self._tool_ids):
                continue
            name = client_name(block.name)
            if name is None:
                own = self._own_tool(block)
                if own:
                    return list(own)
                continue
            if block.id is not None:
                self._tool_ids.add(block.id)
            events += self._release_held()
            events.append(ToolCallDelta(
                index=self._whole_call_number(), id=block.id, name=name,
                arguments=json.dumps(block.input if block.input is not None else {},
                                     ensure_ascii=False)))
            self._calls += 1
            self._whole_calls += 1
        return events

    def _result(self, line: Result) -> Sequence[Event]:
        if line.is_error or (line.subtype or "").startswith("error"):
            return self._end_with(self._failed(line))
        self._answered = self._finish_reason(line)
        events = self._release_held()
        if not self._emitted_text and line.result:
            events.append(TextDelta(text=line.result))
            self._emitted_text = True
        if line.usage is not None:
            events.append(self._usage(line.usage))
        return events

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        return exit_event(self.cli, returncode, stderr_tail, answered=self._answered,
                          missing="a result line",
                          explain=lambda: self._explain_exit(returncode, stderr_tail))


def client_name(name: object) -> str | None:
    """The client's tool name: ``mcp__olp__<name>`` without the prefix; ``None`` for a tool
    that is not the bridge's (the CLI's own). The tool gate refuses a name the request did
    not offer."""
    if isinstance(name, str) and name.startswith(TOOL_PREFIX) and len(name) > len(TOOL_PREFIX):
        return name.removeprefix(TOOL_PREFIX)
    return None
