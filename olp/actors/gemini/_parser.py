"""gemini-cli ``-o stream-json`` (JSONL, one object per line) → IR events.

Line handling (schema in ``cli-reference/gemini/README.md``, "stdout: ``-o stream-json``"):

* ``message`` with ``role: "assistant"`` → one :class:`TextDelta` with its ``content`` (one
  line per upstream chunk, ``delta: true``, as it arrives). The echoed prompt (``role:
  "user"``), ``init``, ``tool_use``/``tool_result`` (never produced: no tools), unknown types,
  lines that are not JSON objects (slash commands print plain text) → nothing.
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
  successful result → ``CLI_FAILED``.

Both are computed once and idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from olp.actors._exit import describe_exit, mask_secrets, stderr_excerpt
from olp.failures import Code
from olp.ir import Error, Event, Stop, TextDelta, Usage

from ._classify import Failure, classify

STDERR_LIMIT: Final = 300
_LINE_LIMIT: Final = 2000  # one line of the CLI's own words (the message is cut later)
#: stderr lines every run prints (``TERM=dumb``, no ripgrep): not the error.
_NOISE: Final = ("Warning: Basic terminal detected", "Warning: 256-color support not detected",
                 "Ripgrep is not available", "Usage: ")


class _Envelope(msgspec.Struct):
    type: str = ""


class _Message(msgspec.Struct):
    role: str = ""
    content: str = ""


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
_ERROR: Final = msgspec.json.Decoder(_ErrorLine)
_RESULT: Final = msgspec.json.Decoder(_Result)


class GeminiParser:
    """Per-job state for one gemini run. ``now`` is the clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._result: _Result | None = None
        self._error_line = ""
        self._terminal: Error | Stop | None = None

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._result is not None:
            return ()
        try:
            kind = _ENVELOPE.decode(line).type
            if kind == "message":
                message = _MESSAGE.decode(line)
                if message.role == "assistant" and message.content:
                    return (TextDelta(text=message.content),)
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
        return ()

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event after exit (see the module docstring); idempotent."""
        if self._terminal is None:
            self._terminal = self._exit_event(returncode, stderr_tail)
        return self._terminal

    def _on_result(self, result: _Result) -> Sequence[Event]:
        self._result = result
        if result.status != "success" or result.stats is None:
            return ()
        return (Usage(prompt_tokens=result.stats.input_tokens,
                      completion_tokens=result.stats.output_tokens),)

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
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
