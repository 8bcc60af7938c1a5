"""gemini-cli ``-o stream-json`` (JSONL, one object per line) → IR events.

Line handling (schema in ``cli-reference/gemini/README.md``, "stdout: ``-o stream-json``"):

* ``message`` with ``role: "assistant"`` → one :class:`TextDelta` with its ``content`` (one
  line per upstream chunk, ``delta: true``, as it arrives). The echoed prompt (``role:
  "user"``), ``init``, ``tool_result``, unknown types, lines that are not JSON objects (slash
  commands print plain text) → nothing.
* ``tool_use`` of a bridge tool (``tool_name`` ``mcp_olp_<name>``: gemini declares an MCP
  tool as ``mcp_<server>_<tool>``) → the model's call: one :class:`ToolCallDelta` (a fresh
  ``call_...`` id, the client's own name without the prefix, ``parameters`` as JSON text) and
  at once the terminal ``Stop(finish_reason="tool_calls")``. gemini prints the line after the
  model's response streamed and ~0.1 s *before* it sends ``tools/call`` to the bridge (which
  never answers; the runner kills the CLI at the Stop). A parallel second call's line follows
  a few milliseconds later with nothing after the last one, so the end of the model's calls
  cannot be told from stdout: the job ends at the first (the model makes the next call on
  the next turn, as with codex). A ``tool_use`` of any other tool is gemini's own (only
  possible when an owner switched a built-in back on with ``extra_args``): not reported.
  gemini adds a boolean ``wait_for_previous`` to every declared tool's parameters (to
  sequence its own runs) and passes it through when the model sets it: it is removed from
  the arguments (a client's own parameter of that name is overwritten by gemini anyway).
  Measured in ``cli-reference/gemini/tools/``.
* ``error`` lines (non-fatal: ``The model returned an empty response ...``) → remembered; the
  text of a failure without its own message.
* ``result`` with ``status: "success"`` → :class:`Usage` (``stats.input_tokens``, which
  includes ``cached``, and ``stats.output_tokens``) at once, :class:`Stop` at
  :meth:`GeminiParser.finish`. With ``status: "error"`` the error is classified at
  :meth:`GeminiParser.finish`, once the exit code (the HTTP status modulo 256) is known;
  ``result`` is the CLI's last line.
* :meth:`GeminiParser.finish`: exit 0 after a successful result → :class:`Stop`; an error
  result → :func:`._classify.classify` (its message, else the last ``error`` line, with the
  exit code); **no result line** → never a success, whatever the exit code: SIGTERM, SIGINT
  and a closed stdout end the CLI with exit 0 and no result (``CLI_TERMINATED``); a signal →
  ``CLI_TERMINATED``; another exit → classified from the stderr excerpt (secrets masked) and
  the exit code (41 auth, 42 no input, 55 untrusted folder, ...). A non-zero exit after a
  successful result → ``CLI_FAILED``. Before all of these: stderr saying ``MCP issues
  detected`` (:data:`BRIDGE_FAILED`; only an MCP server that failed prints it, and the
  bridge is the only one gemini may start) → ``TOOL_BRIDGE_FAILED``: gemini went on without
  the client's tools (there is no "required" server setting), so its answer is not one.
* **A run with OLP's bridge** (``hold_text``) holds the answer's text and usage back: only
  stderr tells that the bridge failed, and the runner shows it only at the exit, so text
  sent earlier would commit the answer (no fallback after content). A ``tool_use`` line
  releases the held preamble with the call (the bridge ran); otherwise
  :meth:`GeminiParser.trailer` releases it at the exit after a successful ``result``, or
  drops it when the bridge or the run failed (then nothing was sent: the chain falls back).
  The cost: a prose answer to a tool request arrives at once, at the end, not token by
  token (and its generation counts against the first-output deadline).

Both are computed once and idempotent.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from olp.actors._toolbridge import SERVER_NAME
from olp.failures import Code
from olp.ir import Error, Event, Stop, TextDelta, ToolCallDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets, stderr_excerpt

from ._classify import Failure, classify

STDERR_LIMIT: Final = 300
#: How gemini names an MCP tool of the bridge: ``mcp_<server>_<tool>``.
TOOL_PREFIX: Final = f"mcp_{SERVER_NAME}_"
#: The parameter gemini adds to every tool it declares (not the client's; removed from calls).
WAIT_FOR_PREVIOUS: Final = "wait_for_previous"
#: gemini's stderr when an MCP server (the bridge) failed to start or to list its tools.
BRIDGE_FAILED: Final = "MCP issues detected"
_LINE_LIMIT: Final = 2000  # one line of the CLI's own words (the message is cut later)
#: stderr lines every run prints (``TERM=dumb``, no ripgrep): not the error.
_NOISE: Final = ("Warning: Basic terminal detected", "Warning: 256-color support not detected",
                 "Ripgrep is not available", "Usage: ")


class _Envelope(msgspec.Struct):
    type: str = ""


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


class _Result(msgspec.Struct):
    status: str = ""
    error: _ResultError | None = None
    stats: _Stats | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_MESSAGE: Final = msgspec.json.Decoder(_Message)
_TOOL_USE: Final = msgspec.json.Decoder(_ToolUse)
_ERROR: Final = msgspec.json.Decoder(_ErrorLine)
_RESULT: Final = msgspec.json.Decoder(_Result)


class GeminiParser:
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
        self._terminal: Error | Stop | None = None

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._result is not None or self._terminal is not None:
            return ()
        try:
            kind = _ENVELOPE.decode(line).type
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
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
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

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event after exit (see the module docstring); idempotent."""
        if self._terminal is None:
            self._terminal = self._exit_event(returncode, stderr_tail)
        return self._terminal

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
        if result.status != "success" or result.stats is None:
            return ()
        return self._out(Usage(prompt_tokens=result.stats.input_tokens,
                               completion_tokens=result.stats.output_tokens))

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        if BRIDGE_FAILED.encode() in stderr_tail:
            return Error(code=Code.TOOL_BRIDGE_FAILED, category="unavailable",
                         message="gemini could not start OLP's tool bridge (its MCP server) "
                                 "and answered without the request's tools")
        result = self._result
        if result is not None and result.status == "success":
            if returncode == 0:
                return Stop(finish_reason="stop")
            return Error(code=Code.CLI_FAILED, category="unknown",
                         message=f"gemini {describe_exit(returncode)} after a complete answer")
        if result is not None:
            text = (result.error.message if result.error is not None else "") \
                or self._error_line or f"gemini reported status {result.status or 'error'}"
            return classify(Failure(text=text, exit_code=returncode), now=self._now())
        if returncode <= 0:
            how = "exited with code 0" if returncode == 0 else describe_exit(returncode)
            return Error(code=Code.CLI_TERMINATED, category="unavailable",
                         message=f"gemini {how} without a result line (interrupted)")
        text = mask_secrets(self._error_line) or stderr_message(stderr_tail)
        return classify(Failure(text=text, exit_code=returncode), now=self._now())


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
