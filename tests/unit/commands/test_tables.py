"""How the commands print: columns, times, durations, and a view as JSON or for a person."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping
from typing import Any, TextIO

import pytest

from olp.commands._tables import duration, minute, print_rows, show


def test_columns_are_aligned_without_trailing_spaces() -> None:
    out = io.StringIO()
    print_rows([("A", "LONGER"), ("wide cell", "x")], out)
    assert out.getvalue() == "A          LONGER\nwide cell  x\n"


def test_every_cell_is_printed_escaped_and_aligned_as_shown() -> None:
    """A cell cannot end its row, move the cursor or reorder the text after it; the columns
    line up on the escaped text (what the terminal shows)."""
    out = io.StringIO()
    print_rows([("ENDPOINT", "MODEL"), ("GET:/\x1b[2J\r\nFAKE", "m\u202e"), ("x", "日本")], out)
    assert out.getvalue() == ("ENDPOINT" + " " * 14 + "MODEL\n"
                              "GET:/\\x1b[2J\\r\\nFAKE  m\\u202e\n"
                              "x" + " " * 21 + "日本\n")


def test_times_and_durations() -> None:
    assert minute(None) == "-"
    assert minute(0) == time.strftime("%Y-%m-%d %H:%M", time.localtime(0))
    assert [duration(s) for s in (-5, 42, 187, 3900)] == ["0s", "42s", "3m07s", "1h05m"]


def test_a_view_as_json_or_for_a_person(capsys: pytest.CaptureFixture[str]) -> None:
    def person(view: Mapping[str, Any], out: TextIO) -> None:
        print(f"n is {view['n']}", file=out)

    assert show({"n": 1}, as_json=True, for_person=person) == 0
    assert json.loads(capsys.readouterr().out) == {"n": 1}
    assert show({"n": 2}, as_json=False, for_person=person) == 0
    assert capsys.readouterr().out == "n is 2\n"
