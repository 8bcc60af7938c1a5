"""gemini-cli ``-o stream-json`` (JSONL, one object per line) → IR events.

* ``message`` ``role: "assistant"`` → one :class:`TextDelta` per line, as it arrives;
* a ``tool_use`` of a bridge tool (``mcp_olp_<name>``) → one :class:`ToolCallDelta` (gemini's
  ``wait_for_previous`` removed from the arguments) and at once the terminal
  ``Stop(finish_reason="tool_calls")``; another tool's → nothing;
* ``error`` lines are remembered; ``result`` ``success`` → :class:`Usage`, an error result is
  classified at the exit, with the exit code;
* at the exit: stderr saying the bridge failed → ``TOOL_BRIDGE_FAILED``; no ``result`` line is
  never a success; a ``success`` whose stats name no model (gemini called none: it sends
  nothing when the conversation overflows the model's window, and says only "success") →
  ``CONTEXT_LENGTH``; otherwise classified from the result, stderr and exit code.

A run with OLP's bridge (``hold_text``) holds text and usage back until the exit
(:meth:`GeminiParser.trailer`): only stderr tells that the bridge failed. Every line, every
exit and why: ``tests/fixtures/cli-reference/gemini/README.md``, "How OLP reads stdout".
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME, TOOLS_FILE
from olp.failures import Code, failure
from olp.ir import Error, Event, Stop, TextDelta, ToolCallDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets, stderr_excerpt
from olp.providers._jsonl import Envelope, JsonLinesParser

from ._classify import Failure, classify
from ._invocation import spawn_home

STDERR_LIMIT: Final = 300
#: How gemini names an MCP tool of the bridge: ``mcp_<server>_<tool>``.
TOOL_PREFIX: Final = f"mcp_{SERVER_NAME}_"
#: The parameter gemini adds to every tool it declares (not the client's; removed from calls).
WAIT_FOR_PREVIOUS: Final = "wait_for_previous"
#: gemini's stderr when an MCP server (the bridge) failed to start or to list its tools.
BRIDGE_FAILED: Final = "MCP issues detected"
#: The message of a ``success`` without an upstream call (measured: a history over the window;
#: ``tests/fixtures/cli-reference/gemini/sessions/README.md``, "What OLP does (built)").
NOTHING_SENT: Final = ("gemini sent nothing upstream and reported success: the conversation "
                       "does not fit the model's context window")
_LINE_LIMIT: Final = 2000  # one line of the CLI's own words (the message is cut later)
#: stderr lines every run prints (``TERM=dumb``, no ripgrep): not the error.
_NOISE: Final = ("Warning: Basic terminal detected", "Warning: 256-color support not detected",
                 "Ripgrep is not available", "Usage: ")


class _Message(msgspec.Struct):
    role: str = ""
    content: str = ""


class _ToolUse(msgspec.Struct):
    tool_name: str = ""
    parameters: msgspec.Raw = msgspec.Raw(b"")


class _ErrorLine(msgspec.Struct):
    severity: str = ""
    message: str = ""


class _ResultError(msgspec.Struct):
    type: str = ""
    message: str = ""


class _Stats(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    cached: int = 0
    models: dict[str, Any] | None = None  # per model called; ``{}``: no upstream call


class _Result(msgspec.Struct):
    status: str = ""
    error: _ResultError | None = None
    stats: _Stats | None = None


_MESSAGE: Final = msgspec.json.Decoder(_Message)
_TOOL_USE: Final = msgspec.json.Decoder(_ToolUse)
_ERROR: Final = msgspec.json.Decoder(_ErrorLine)
_RESULT: Final = msgspec.json.Decoder(_Result)


class GeminiParser(JsonLinesParser):
    """Per-job state for one gemini run. ``now`` is the clock for usage-window resets;
    ``hold_text`` (a run with OLP's bridge) holds the answer's text and usage back until the
    exit (see the module docstring)."""

    def __init__(self, *, now: Callable[[], float] = time.time,
                 new_id: Callable[[], str] = lambda: f"call_{secrets.token_hex(12)}",
                 hold_text: bool = False) -> None:
        self._now = now
        self._new_id = new_id
        self._hold = hold_text
        self._held: list[Event] = []
        self._result: _Result | None = None
        self._error_line = ""

    def _ended(self) -> bool:
        return self._result is not None or self._terminal is not None  # result is the last

    def _read(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        kind = envelope.type
        if kind == "tool_use":
            return self._tool_use(_TOOL_USE.decode(line))
        if kind == "message":
            message = _MESSAGE.decode(line)
            if message.role == "assistant" and message.content:
                return self._out(TextDelta(text=message.content))
        elif kind == "error":
            error = _ERROR.decode(line)
            if error.message:
                self._error_line = error.message
        elif kind == "result":
            return self._on_result(_RESULT.decode(line))
        return ()

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """The held text and usage when the run succeeded; dropped when the bridge failed
        (the answer was made without the request's tools) or the run failed (nothing was
        sent, so the chain can still fall back)."""
        held, self._held = self._held, []
        succeeded = self._result is not None and self._result.status == "success"
        return held if succeeded and BRIDGE_FAILED.encode() not in stderr_tail else ()

    def _out(self, *events: Event) -> Sequence[Event]:
        if not self._hold:
            return events
        self._held += events
        return ()

    def _tool_use(self, line: _ToolUse) -> Sequence[Event]:
        """A bridge tool's call → the call and the terminal Stop; another tool's → ()."""
        name = line.tool_name.removeprefix(TOOL_PREFIX)
        if not line.tool_name.startswith(TOOL_PREFIX) or not name:
            return ()
        arguments = without_wait_for_previous(
            bytes(line.parameters).decode("utf-8", "replace").strip() or "{}")
        self._terminal = Stop(finish_reason="tool_calls")
        held, self._held = self._held, []  # the call proves the bridge ran: the preamble
        return (*held, ToolCallDelta(index=0, id=self._new_id(), name=name,
                                     arguments=arguments), self._terminal)

    def _on_result(self, result: _Result) -> Sequence[Event]:
        self._result = result
        if result.status != "success" or result.stats is None or _called_none(result):
            return ()
        return self._out(Usage(prompt_tokens=result.stats.input_tokens,
                               completion_tokens=result.stats.output_tokens,
                               cached_tokens=result.stats.cached))

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        if BRIDGE_FAILED.encode() in stderr_tail:
            return failure(Code.TOOL_BRIDGE_FAILED, "gemini could not start OLP's tool bridge "
                           "(its MCP server) and answered without the request's tools")
        result = self._result
        if result is not None and result.status == "success":
            if returncode == 0 and _called_none(result):
                return failure(Code.CONTEXT_LENGTH, NOTHING_SENT)
            if returncode == 0:
                return Stop(finish_reason="stop")
            return failure(Code.CLI_FAILED,
                           f"gemini {describe_exit(returncode)} after a complete answer")
        if result is not None:
            text = (result.error.message if result.error is not None else "") \
                or self._error_line or f"gemini reported status {result.status or 'error'}"
            return classify(Failure(text=text, exit_code=returncode), now=self._now())
        if returncode <= 0:
            how = "exited with code 0" if returncode == 0 else describe_exit(returncode)
            return failure(Code.CLI_TERMINATED, f"gemini {how} without a result line "
                           "(interrupted)")
        text = mask_secrets(self._error_line) or stderr_message(stderr_tail)
        return classify(Failure(text=text, exit_code=returncode), now=self._now())


def _called_none(result: _Result) -> bool:
    """A ``success`` with no model in its stats: gemini sent nothing upstream."""
    return result.stats is not None and result.stats.models == {}


def parser_for(workdir: Path) -> GeminiParser:
    """A parser for the spawn in ``workdir``. The runner writes the spawn's files first, so a
    tools file in its private home means a run with OLP's bridge: the parser then holds the
    text back (one ``stat``)."""
    return GeminiParser(hold_text=(spawn_home(workdir) / TOOLS_FILE).exists())


def without_wait_for_previous(arguments: str) -> str:
    """The call's arguments without gemini's own ``wait_for_previous`` flag (a boolean it
    adds to every declared tool's schema to sequence its own tool runs, and passes through
    when the model sets it); other text unchanged."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(value, dict) or not isinstance(value.get(WAIT_FOR_PREVIOUS), bool):
        return arguments
    del value[WAIT_FOR_PREVIOUS]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def stderr_message(stderr_tail: bytes) -> str:
    """The CLI's own words on stderr: the first line that is not start-up noise (the terminal
    warnings, the ripgrep notice), a stack frame, an indented usage or object line or a
    brace; secrets masked. Falls back to the end of stderr (at most :data:`STDERR_LIMIT`
    characters)."""
    for raw in stderr_tail.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if (not line or raw[:1].isspace() or line.startswith(_NOISE)
                or line in ("{", "}")):
            continue
        return stderr_excerpt(line.encode(), limit=_LINE_LIMIT)
    return stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
