"""codex ``exec --json`` (JSONL on stdout) → IR events.

Line handling (schema in ``cli-reference/codex/README.md``; codex-cli 0.171.0):

* ``thread.started``, ``turn.started``, ``item.updated`` and unknown types → nothing.
* ``item.started`` (or ``item.completed``) of an ``mcp_tool_call`` on OLP's bridge (``server``
  ``olp``) → the model's tool call: one :class:`ToolCallDelta` (a fresh ``call_...`` id, the
  bridge's ``tool`` name — the client's own — and ``arguments``, the JSON value codex printed,
  as text) and at once the terminal ``Stop(finish_reason="tool_calls")``. codex
  prints it as soon as the call's output item is complete upstream and before it would ask
  for approval (which ``exec`` refuses, so no ``tools/call`` is ever sent); nothing on stdout
  marks the end of the model's response, so a parallel second call is not waited for (the
  model makes it on the next turn) and no :class:`Usage` is known yet (``turn.completed``
  comes only after codex's own follow-up request, which the kill prevents).
* Lines that are not JSON objects, or whose fields have unexpected types → nothing.
* ``item.completed``: an ``agent_message`` → one :class:`TextDelta` with its whole text
  (codex surfaces no token deltas); a later ``agent_message`` in the same turn (an agent that
  said something, ran a tool, then answered) is emitted too, after a blank line. ``error``
  items are warnings ("Model metadata for `x` not found ...", "Falling back from WebSockets
  ...") → nothing; other item types (reasoning, commands, ...) → nothing.
* ``turn.completed`` → :class:`Usage` (``input_tokens``, which already includes
  ``cached_input_tokens``, as prompt tokens; ``output_tokens``, which includes
  ``reasoning_output_tokens``, as completion tokens); :class:`Stop` follows at
  :meth:`CodexParser.finish`.
* ``error``: ``Reconnecting... n/N (cause)`` → :class:`Retrying` (category and status from the
  cause; ``Reconnecting... waiting for network (cause)`` counts its own attempts with no
  maximum); any other message is the failure, remembered for ``turn.failed``.
* ``turn.failed`` → the classified terminal :class:`Error` at once (its ``error.message``,
  else the last ``error`` message).
* :meth:`CodexParser.finish`: a non-zero exit whose stderr says "required MCP servers failed
  to initialize" (the bridge did not start; codex exits 1 before any upstream request) →
  ``TOOL_BRIDGE_FAILED``; exit 0 after ``turn.completed`` → ``Stop``; exit 0 without it →
  ``PROTOCOL_ERROR``; a non-zero exit after an ``error`` line but before ``turn.failed`` →
  that error, classified; otherwise a non-zero exit (including death by SIGTERM/SIGKILL, when
  codex prints nothing more) → ``CLI_FAILED`` naming the exit code or signal and a sanitised
  stderr excerpt (≤ 200 chars, secrets masked).

codex does not say which model served (the request's ``model`` is exactly ``-m``), so no
:class:`Start` is emitted. After a terminal event :meth:`CodexParser.feed` returns nothing and
:meth:`CodexParser.finish` returns that same event.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from datetime import tzinfo
from typing import Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code
from olp.ir import Error, Event, Retrying, Stop, TextDelta, ToolCallDelta, Usage
from olp.providers._exit import describe_exit, stderr_excerpt

from ._classify import classify, parse_reconnect

STDERR_LIMIT: Final = 200
MESSAGE_SEPARATOR: Final = "\n\n"
#: codex's stderr when a ``required`` MCP server (the bridge) did not start.
BRIDGE_FAILED: Final = "required mcp servers failed to initialize"


class _Envelope(msgspec.Struct):
    type: str = ""


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


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_ITEM: Final = msgspec.json.Decoder(_ItemLine)
_TURN_COMPLETED: Final = msgspec.json.Decoder(_TurnCompleted)
_ERROR: Final = msgspec.json.Decoder(_ErrorLine)
_TURN_FAILED: Final = msgspec.json.Decoder(_TurnFailed)


class CodexParser:
    """Per-job state for one codex run. ``now``/``tz`` anchor usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time, tz: tzinfo | None = None,
                 new_id: Callable[[], str] = lambda: f"call_{secrets.token_hex(12)}",
                 ) -> None:
        self._now = now
        self._new_id = new_id
        self._tz = tz
        self._terminal: Error | Stop | None = None
        self._completed = False
        self._last_error: str | None = None
        self._emitted_text = False
        self._network_waits = 0

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._terminal is not None:
            return ()
        try:
            kind = _ENVELOPE.decode(line).type
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
        if returncode != 0 and BRIDGE_FAILED in stderr_tail.decode("utf-8", "replace").lower():
            return Error(code=Code.TOOL_BRIDGE_FAILED, category="unavailable",
                         message="codex could not start OLP's tool bridge (its MCP server)")
        if self._completed and returncode == 0:
            return Stop(finish_reason="stop")
        if not self._completed and self._last_error is not None and returncode != 0:
            return self._classify(self._last_error)  # killed between `error` and turn.failed
        if returncode == 0:
            return Error(code=Code.PROTOCOL_ERROR, category="unknown",
                         message="codex exited with code 0 without a turn.completed line")
        after = " after a complete answer" if self._completed else ""
        message = f"codex {describe_exit(returncode)}{after}"
        excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT, drop=NOTICES)
        if excerpt:
            message = f"{message}; stderr: {excerpt}"
        return Error(code=Code.CLI_FAILED, category="unknown", message=message)

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
        if item is None or item.type != "agent_message" or not item.text:
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
        return (Usage(prompt_tokens=u.input_tokens or 0, completion_tokens=u.output_tokens or 0),)

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
