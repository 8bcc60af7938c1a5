"""vibe ``--output streaming`` (JSONL, one line per finished conversation entry) → IR events.

Line handling (schema in ``cli-reference/vibe/README.md``):

* ``{"type": "message", "role": "assistant", "content": [{"type": "text", "text"}], "outcome":
  {...}}`` → one :class:`TextDelta` with the message's whole text (vibe prints no token
  deltas), unless the entry's ``outcome.type`` is ``"discarded"`` (a partial answer vibe gave
  up on): that text is **never** sent. A later assistant message (a multi-step run) is
  separated from the earlier text by a blank line.
* The echoed user prompt (``role: "user"``), other entry types, lines that are not JSON
  objects or have unexpected types → nothing.

After the process has exited, ``<workdir>/out/export.json`` (absent or unreadable is
tolerated) gives the usage and the error code:

* :meth:`VibeParser.trailer` → :class:`Usage` (input/output tokens) when ``export.json`` has a
  usage block and either the run succeeded or tokens were spent; otherwise nothing. These are
  the events that exist only after exit; the runner emits them before the terminal event.
* :meth:`VibeParser.finish` → exit 0 with assistant text → :class:`Stop`; exit 0 without any
  → ``PROTOCOL_ERROR``; exit 3 with assistant text and a length-type outcome (``length``,
  ``token_limit``, ``turn_limit``, ``price_limit``) → ``Stop(finish_reason="length")``; killed
  by a signal, or a crash (no ``export.json`` and no ``Error:`` line) → ``CLI_FAILED``;
  any other non-zero exit → :func:`._classify.classify` from the
  exit code, ``export.json`` (``outcome``, ``error.code``, ``error.message``) and the stderr
  ``Error:``/``Stopped:`` line (secrets masked).

Both are computed once, on the first call of either, and are idempotent.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from olp.failures import Code
from olp.ir import Error, Event, Stop, TextDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets, stderr_excerpt

from ._classify import Failure, classify
from ._invocation import export_path

MAX_EXPORT_BYTES: Final = 4 << 20
STDERR_LIMIT: Final = 300
MESSAGE_SEPARATOR: Final = "\n\n"
_LENGTH_OUTCOMES: Final = frozenset({"length", "token_limit", "turn_limit", "price_limit"})


class _Part(msgspec.Struct):
    type: str = ""
    text: str | None = None


class _Outcome(msgspec.Struct):
    type: str | None = None


class _Entry(msgspec.Struct):
    type: str = ""
    role: str | None = None
    content: list[_Part] | str | None = None
    outcome: _Outcome | None = None


class _ExportError(msgspec.Struct):
    message: str | None = None
    code: str | None = None


class _ExportUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _Export(msgspec.Struct):
    outcome: str | None = None
    stop_reason: str | None = None
    error: _ExportError | None = None
    usage: _ExportUsage | None = None


_ENTRY: Final = msgspec.json.Decoder(_Entry)
_EXPORT: Final = msgspec.json.Decoder(_Export)


def read_export(path: Path | None) -> _Export | None:
    """``export.json`` decoded, or ``None`` when absent, too big or not the expected shape.

    A small local file read once after the CLI exited (like the runner's temp-dir set-up)."""
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            data = f.read(MAX_EXPORT_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_EXPORT_BYTES:
        return None
    try:
        return _EXPORT.decode(data)
    except msgspec.DecodeError:
        return None


class VibeParser:
    """Per-job state for one vibe run. ``workdir`` is the spawn's working directory (the
    export is read from ``<workdir>/out/export.json``); ``None`` reads no export.
    ``now`` is the clock for usage-window resets."""

    def __init__(self, workdir: Path | None = None, *,
                 now: Callable[[], float] = time.time) -> None:
        self._export_path = export_path(workdir) if workdir is not None else None
        self._now = now
        self._emitted_text = False
        self._settled: tuple[tuple[Event, ...], Error | Stop] | None = None

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._settled is not None:
            return ()
        try:
            entry = _ENTRY.decode(line)
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
        if entry.type != "message" or entry.role != "assistant":
            return ()
        if entry.outcome is not None and entry.outcome.type == "discarded":
            return ()
        text = _text_of(entry.content)
        if not text:
            return ()
        if self._emitted_text:
            text = MESSAGE_SEPARATOR + text
        self._emitted_text = True
        return (TextDelta(text=text),)

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """The non-terminal events known only after exit (:class:`Usage` from
        ``export.json``); emit them before :meth:`finish`'s terminal event."""
        return self._settle(returncode, stderr_tail)[0]

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event after exit (see the module docstring); idempotent."""
        return self._settle(returncode, stderr_tail)[1]

    def _settle(self, returncode: int, stderr_tail: bytes,
                ) -> tuple[tuple[Event, ...], Error | Stop]:
        if self._settled is None:
            export = read_export(self._export_path)
            terminal = self._terminal(returncode, stderr_tail, export)
            self._settled = (self._usage(export, isinstance(terminal, Stop)), terminal)
        return self._settled

    def _usage(self, export: _Export | None, succeeded: bool) -> tuple[Event, ...]:
        usage = export.usage if export is not None else None
        if usage is None:
            return ()
        prompt, completion = max(0, usage.input_tokens or 0), max(0, usage.output_tokens or 0)
        if not succeeded and prompt + completion == 0:
            return ()
        return (Usage(prompt_tokens=prompt, completion_tokens=completion),)

    def _terminal(self, returncode: int, stderr_tail: bytes,
                  export: _Export | None) -> Error | Stop:
        outcome = export.outcome if export is not None else None
        if returncode == 0:
            if self._emitted_text:
                return Stop(finish_reason="stop")
            return Error(code=Code.PROTOCOL_ERROR, category="unknown",
                         message="vibe exited with code 0 without an assistant message")
        if returncode == 3 and self._emitted_text and outcome in _LENGTH_OUTCOMES:
            return Stop(finish_reason="length")
        marked = _marked_line(stderr_tail)
        killed = returncode < 0 or 128 < returncode <= 128 + 64
        if killed or (export is None and marked is None):  # a signal, or a crash
            message = f"vibe {describe_exit(returncode)}"
            excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
            return Error(code=Code.CLI_FAILED, category="unknown",
                         message=f"{message}; stderr: {excerpt}" if excerpt else message)
        error = export.error if export is not None else None
        text = ((error.message if error is not None else None) or marked
                or stderr_excerpt(stderr_tail, limit=STDERR_LIMIT))
        if outcome is None:  # no export.json: "Stopped: terminated" / "Stopped: deadline"
            outcome = _stopped_reason(stderr_tail)
        failure = Failure(text=mask_secrets(text), code=error.code if error else None,
                          outcome=outcome, exit_code=returncode)
        return classify(failure, now=self._now())


def _text_of(content: list[_Part] | str | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if p.type == "text" and p.text)


_PREFIX: Final = re.compile(r"^(Error|Stopped):\s*")


def _marked_line(stderr_tail: bytes) -> str | None:
    """The last ``Error:``/``Stopped:`` line of stderr without its prefix, or ``None`` (vibe
    also prints notes such as "Reading API keys from the system keyring ...")."""
    lines = [ln.strip() for ln in stderr_tail.decode("utf-8", "replace").splitlines()]
    marked = [ln for ln in lines if _PREFIX.match(ln)]
    return _PREFIX.sub("", marked[-1]) if marked else None


def _stopped_reason(stderr_tail: bytes) -> str | None:
    """``terminated`` for a last stderr line ``Stopped: terminated``; else ``None``."""
    lines = stderr_tail.decode("utf-8", "replace").strip().splitlines()
    if lines and lines[-1].startswith("Stopped:"):
        return lines[-1].removeprefix("Stopped:").strip() or None
    return None


__all__ = ["VibeParser", "read_export"]
