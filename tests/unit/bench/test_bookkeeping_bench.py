"""bench.bookkeeping measures what it says: every part really runs (rows in SQLite, one log
line per request, the limiter's counts, the metrics' counters)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import trio

from bench import bookkeeping


def test_every_part_runs(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    with open(log_path, "a", encoding="utf-8") as log:
        seconds = trio.run(bookkeeping._measure, bookkeeping.PARTS, 150, tmp_path, log)
    assert seconds > 0
    lines = log_path.read_text().splitlines()
    assert len(lines) == 150
    assert json.loads(lines[0])["event"] == "chat"
    (db_path,) = tmp_path.glob("*.db")
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone() == (150,)
        assert conn.execute("SELECT SUM(requests), SUM(prompt_tokens) FROM usage"
                            ).fetchone() == (150, 150 * 21)


def test_nothing_but_the_trace_without_parts(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    with open(log_path, "a", encoding="utf-8") as log:
        trio.run(bookkeeping._measure, (), 20, tmp_path, log)
    assert log_path.read_text() == ""
    (db_path,) = tmp_path.glob("*.db")
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone() == (0,)


def test_summary_is_each_part_above_the_bare_trace() -> None:
    figures = {"none": 0.010, "audit row and ledger": 0.030, "limits": 0.025,
               "metrics": 0.015, "log line": 0.030, "all": 0.090}
    assert bookkeeping.summary(figures) == (
        "audit row and ledger 0.020, limits 0.015, metrics 0.005, log line 0.020; "
        "all together **0.080 ms**")
