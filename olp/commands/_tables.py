"""How the commands print: a view as JSON or for a person, aligned columns, local times, short
durations."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO


def show(view: Mapping[str, Any], *, as_json: bool,
         for_person: Callable[[Mapping[str, Any], TextIO], None]) -> int:
    """``view`` on stdout, as one JSON object (``--json``) or as ``for_person`` prints it;
    the exit code 0."""
    if as_json:
        print(json.dumps(view))
    else:
        for_person(view, sys.stdout)
    return 0


def print_rows(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """``rows`` (the first one a header) as left-aligned columns two spaces apart."""
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
