"""vibe ``--output streaming`` (JSONL, one line per finished conversation entry) → IR events.

An assistant ``message`` → one :class:`TextDelta` with its whole text (a later one after a
blank line), unless its outcome is ``discarded``: that text is never sent. A ``reasoning`` entry
(the model's thinking, whole, before the message it led to) → one :class:`ReasoningDelta`, on
the same terms. After the exit,
``<workdir>/out/export.json`` gives :meth:`VibeParser.trailer`'s :class:`Usage` and, with the
exit code and stderr, :meth:`VibeParser.finish`'s terminal event
(:func:`~olp.providers._finish.exit_event`): exit 0 with text → :class:`Stop`, exit 3 after a
length limit → ``Stop(finish_reason="length")``, a signal or a crash → ``CLI_FAILED``, other
exits classified. Every line and exit: ``tests/fixtures/cli-reference/vibe/README.md``, "How
OLP reads stdout".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from olp.ir import Error, Event, ReasoningDelta, Stop, TextDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets, stderr_excerpt
from olp.providers._finish import TerminalOnce, cli_failed, exit_event

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
    text: str | None = None  # a reasoning entry's
    outcome: _Outcome | None = None


class _ExportError(msgspec.Struct):
    message: str | None = None
    code: str | None = None


class _ExportUsage(msgspec.Struct):
    input_tokens: int | None = None  # cached ones included
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


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


class VibeParser(TerminalOnce):
    """Per-job state for one vibe run. ``workdir`` is the spawn's working directory (the
    export is read from ``<workdir>/out/export.json``); ``None`` reads no export.
    ``now`` is the clock for usage-window resets."""

    def __init__(self, workdir: Path | None = None, *,
                 now: Callable[[], float] = time.time) -> None:
        self._export_path = export_path(workdir) if workdir is not None else None
        self._now = now
        self._emitted_text = False
        self._emitted_reasoning = False
        self._after_exit: tuple[Event, ...] = ()

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._terminal is not None:
            return ()
        try:
            entry = _ENTRY.decode(line)
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
        if entry.outcome is not None and entry.outcome.type == "discarded":
            return ()
        if entry.type == "reasoning":
            return self._reasoning(entry.text)
        if entry.type != "message" or entry.role != "assistant":
            return ()
        text = _text_of(entry.content)
        if not text:
            return ()
        if self._emitted_text:
            text = MESSAGE_SEPARATOR + text
        self._emitted_text = True
        return (TextDelta(text=text),)

    def _reasoning(self, text: str | None) -> Sequence[Event]:
        if not text:
            return ()
        if self._emitted_reasoning:
            text = MESSAGE_SEPARATOR + text
        self._emitted_reasoning = True
        return (ReasoningDelta(text=text),)

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """The non-terminal events known only after exit (:class:`Usage` from
        ``export.json``); emit them before :meth:`finish`'s terminal event."""
        self.finish(returncode, stderr_tail)
        return self._after_exit

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        export = read_export(self._export_path)
        terminal = exit_event(
            "vibe", returncode, stderr_tail, answered="stop" if self._emitted_text else None,
            missing="an assistant message",
            explain=lambda: self._explain_exit(returncode, stderr_tail, export))
        self._after_exit = self._usage(export, isinstance(terminal, Stop))
        return terminal

    def _usage(self, export: _Export | None, succeeded: bool) -> tuple[Event, ...]:
        usage = export.usage if export is not None else None
        if usage is None:
            return ()
        prompt, completion = max(0, usage.input_tokens or 0), max(0, usage.output_tokens or 0)
        if not succeeded and prompt + completion == 0:
            return ()
        return (Usage(prompt_tokens=prompt, completion_tokens=completion,
                      cached_tokens=max(0, usage.cached_input_tokens or 0)),)

    def _explain_exit(self, returncode: int, stderr_tail: bytes,
                      export: _Export | None) -> Error | Stop:
        outcome = export.outcome if export is not None else None
        if returncode == 3 and self._emitted_text and outcome in _LENGTH_OUTCOMES:
            return Stop(finish_reason="length")
        marked = _marked_line(stderr_tail)
        killed = returncode < 0 or 128 < returncode <= 128 + 64
        if killed or (export is None and marked is None):  # a signal, or a crash
            return cli_failed(f"vibe {describe_exit(returncode)}", stderr_tail,
                              limit=STDERR_LIMIT)
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
