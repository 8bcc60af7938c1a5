"""How the commands print: a view as JSON or for a person, aligned columns, local times, short
durations, and text from elsewhere made safe for a terminal (:func:`printable`)."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

#: What a terminal acts on rather than shows: C0 (tab, CR and LF included), DEL, C1, and the
#: Unicode bidi marks, embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as its Python escape
    (``\\x1b``, ``\\r``, ``\\n``, ``\\t``, ``\\x9b``, ``\\u202e``), so a request path,
    a model name or a server's message cannot clear the screen, set the window title, forge or
    hide a row, or reverse what follows it. Escaped: C0 (U+0000-U+001F), DEL, C1
    (U+0080-U+009F) and the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E,
    U+2066-U+2069); any other text, non-ASCII included, is unchanged.

    A backslash is left as it is, so ordinary text (a Windows path) reads the same: a
    literal ``\\x1b`` and an escaped ESC look alike here. This is for a person's eyes only;
    ``--json`` carries the exact value."""
    return _CONTROLS.sub(lambda m: _SHORT.get(m[0]) or _escape(ord(m[0])), text)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable_view(value: Any) -> Any:
    """``value`` (decoded JSON) with :func:`printable` applied to every string in it, keys
    included: what a command prints for a person."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable_view(k): printable_view(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_view(v) for v in value]
    return value


def show(view: Mapping[str, Any], *, as_json: bool,
         for_person: Callable[[Mapping[str, Any], TextIO], None]) -> int:
    """``view`` on stdout, as one JSON object (``--json``, exactly) or as ``for_person``
    prints it (every string in it :func:`printable`); the exit code 0."""
    if as_json:
        print(json.dumps(view))
    else:
        for_person(printable_view(view), sys.stdout)
    return 0


def print_rows(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """``rows`` (the first one a header) as left-aligned columns two spaces apart, every cell
    :func:`printable` (the widths are the escaped text's)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
              file=out)


def minute(ts: float | None) -> str:
    """Unix seconds as local ``YYYY-MM-DD HH:MM``; ``-`` for none."""
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def duration(seconds: float) -> str:
    """``1h05m``, ``3m07s`` or ``42s`` (never negative)."""
    s = max(0, int(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"
