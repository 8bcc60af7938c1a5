"""codex ``exec --json`` (JSONL on stdout) → IR events.

* ``item.completed`` ``agent_message`` → one :class:`TextDelta` with its whole text (codex
  streams no token deltas; a later message of the same turn follows a blank line);
  ``reasoning`` → one :class:`ReasoningDelta` with its text (the summary's parts joined by
  codex; a later reasoning item follows a blank line);
* an ``mcp_tool_call`` on OLP's bridge → one :class:`ToolCallDelta` and at once the terminal
  ``Stop(finish_reason="tool_calls")``;
* ``turn.completed`` → :class:`Usage` (``reasoning_output_tokens`` as its reasoning tokens);
  ``error`` ``Reconnecting...`` → :class:`Retrying`, any other ``error`` is remembered;
  ``turn.failed`` → the classified terminal :class:`Error`;
* the exit (:func:`~olp.providers._finish.exit_event`): a bridge that did not start →
  ``TOOL_BRIDGE_FAILED``; exit 0 after ``turn.completed`` → :class:`Stop`; else the
  remembered error, ``PROTOCOL_ERROR`` or ``CLI_FAILED``. Other lines → nothing.

Every line type and why: ``tests/fixtures/cli-reference/codex/README.md``, "How OLP reads
stdout".
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from datetime import tzinfo
from typing import Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code, failure
from olp.ir import (
    Error,
    Event,
    ReasoningDelta,
    Retrying,
    Stop,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from olp.providers._finish import exit_event
from olp.providers._jsonl import Envelope, JsonLinesParser

from ._classify import classify, parse_reconnect

MESSAGE_SEPARATOR: Final = "\n\n"
#: codex's stderr when a ``required`` MCP server (the bridge) did not start.
BRIDGE_FAILED: Final = "required mcp servers failed to initialize"


class _Item(msgspec.Struct):
    type: str = ""
    text: str | None = None
    server: str | None = None
    tool: str | None = None
    arguments: msgspec.Raw = msgspec.Raw(b"")


class _ItemLine(msgspec.Struct):
    item: _Item | None = None


class _TurnUsage(msgspec.Struct):
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_output_tokens: int | None = None


class _TurnCompleted(msgspec.Struct):
    usage: _TurnUsage | None = None


class _ErrorLine(msgspec.Struct):
    message: str | None = None


class _TurnError(msgspec.Struct):
    message: str | None = None


class _TurnFailed(msgspec.Struct):
    error: _TurnError | None = None


_ITEM: Final = msgspec.json.Decoder(_ItemLine)
_TURN_COMPLETED: Final = msgspec.json.Decoder(_TurnCompleted)
_ERROR: Final = msgspec.json.Decoder(_ErrorLine)
_TURN_FAILED: Final = msgspec.json.Decoder(_TurnFailed)


class CodexParser(JsonLinesParser):
    """Per-job state for one codex run. ``now``/``tz`` anchor usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time, tz: tzinfo | None = None,
                 new_id: Callable[[], str] = lambda: f"call_{secrets.token_hex(12)}",
                 ) -> None:
        self._now = now
        self._new_id = new_id
        self._tz = tz
        self._completed = False
        self._last_error: str | None = None
        self._emitted_text = False
        self._emitted_reasoning = False
        self._network_waits = 0

    def _read(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        kind = envelope.type
        if kind == "item.started":
            return self._tool_call(_ITEM.decode(line))
        if kind == "item.completed":
            item = _ITEM.decode(line)
            return self._tool_call(item) or self._item(item)
        if kind == "turn.completed":
            return self._turn_completed(_TURN_COMPLETED.decode(line))
        if kind == "error":
            return self._error(_ERROR.decode(line))
        if kind == "turn.failed":
            return self._turn_failed(_TURN_FAILED.decode(line))
        return ()

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        return exit_event("codex", returncode, stderr_tail,
                          answered="stop" if self._completed else None,
                          missing="a turn.completed line",
                          explain=lambda: self._explain_exit(stderr_tail), drop=NOTICES)

    def _explain_exit(self, stderr_tail: bytes) -> Error | None:
        if BRIDGE_FAILED in stderr_tail.decode("utf-8", "replace").lower():
            return failure(Code.TOOL_BRIDGE_FAILED,
                           "codex could not start OLP's tool bridge (its MCP server)")
        if not self._completed and self._last_error is not None:
            return self._classify(self._last_error)  # killed between `error` and turn.failed
        return None

    def _tool_call(self, line: _ItemLine) -> Sequence[Event]:
        """The model's call of a bridge tool → the call and the terminal Stop; else ()."""
        item = line.item
        if (item is None or item.type != "mcp_tool_call" or item.server != SERVER_NAME
                or not item.tool):
            return ()
        arguments = bytes(item.arguments).decode("utf-8", "replace").strip() or "{}"
        self._terminal = Stop(finish_reason="tool_calls")
        return (ToolCallDelta(index=0, id=self._new_id(), name=item.tool, arguments=arguments),
                self._terminal)

    def _item(self, line: _ItemLine) -> Sequence[Event]:
        item = line.item
        if item is None or not item.text:
            return ()
        if item.type == "reasoning":
            text = MESSAGE_SEPARATOR + item.text if self._emitted_reasoning else item.text
            self._emitted_reasoning = True
            return (ReasoningDelta(text=text),)
        if item.type != "agent_message":
            return ()
        text = MESSAGE_SEPARATOR + item.text if self._emitted_text else item.text
        self._emitted_text = True
        return (TextDelta(text=text),)

    def _turn_completed(self, line: _TurnCompleted) -> Sequence[Event]:
        self._completed = True
        self._last_error = None
        u = line.usage
        if u is None:
            return ()
        return (Usage(prompt_tokens=u.input_tokens or 0, completion_tokens=u.output_tokens or 0,
                      cached_tokens=u.cached_input_tokens or 0,
                      cache_write_tokens=u.cache_write_input_tokens or 0,
                      reasoning_tokens=u.reasoning_output_tokens or 0),)

    def _error(self, line: _ErrorLine) -> Sequence[Event]:
        message = line.message or ""
        retry = parse_reconnect(message)
        if retry is None:
            self._last_error = message or "codex reported an error without a message"
            return ()
        attempt = retry.attempt
        if attempt is None:
            self._network_waits += 1
            attempt = self._network_waits
        return (Retrying(attempt=attempt, max_retries=retry.max_retries,
                         category=retry.category, status=retry.status),)

    def _turn_failed(self, line: _TurnFailed) -> Sequence[Event]:
        message = (line.error.message if line.error is not None else None) or self._last_error
        self._terminal = self._classify(message or "codex reported turn.failed")
        return (self._terminal,)

    def _classify(self, message: str) -> Error:
        return classify(message, now=self._now(), tz=self._tz)


#: codex's constant notices on stderr, not worth an error message.
NOTICES: Final = ("Reading additional input from stdin...", "Reading prompt from stdin...")
