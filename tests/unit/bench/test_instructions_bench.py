"""bench.instructions: its patch still applies to this olp/ and gives valid Python, a callgrind
dump's count is read from its totals, and the report sets each cell against its floor."""

from __future__ import annotations

import py_compile
from pathlib import Path

import pytest

from bench import instructions
from bench._common import BenchError

DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4639
cmd:  /work/main/.venv/bin/python -m olp start
part: 1

positions: line
events: Ir
summary: 1505012345

fn=(1) 0x0000000000108aa0
0 3
totals: 1505012345
"""


def test_the_patch_applies_and_every_patched_module_compiles(tmp_path: Path) -> None:
    tree = instructions.without_bookkeeping(tmp_path)
    patched = [p for p in (tree / "olp").rglob("*.py")
               if "bench.instructions" in p.read_text(encoding="utf-8")]
    # the log line, the trace's end, the limits, the lingering close, the key check, the GC
    assert {p.name for p in patched} == {"_chat.py", "_trace.py", "_chat_routes.py",
                                         "_app.py", "_auth.py", "server.py"}
    for path in patched:
        py_compile.compile(str(path), doraise=True, cfile=str(tmp_path / "c.pyc"))
    assert (tree / "models-registry.json").is_file()


def test_the_original_olp_is_left_alone(tmp_path: Path) -> None:
    instructions.without_bookkeeping(tmp_path)
    assert "bench.instructions" not in (instructions.REPO / "olp" / "http" / "_trace.py"
                                        ).read_text(encoding="utf-8")


def test_dump_total_reads_the_totals_line() -> None:
    assert instructions.dump_total(DUMP) == 1_505_012_345
    assert instructions.dump_total("events: Ir\nsummary: 42\n") == 42
    with pytest.raises(BenchError):
        instructions.dump_total("events: Ir\n")


def test_the_summary_sets_olp_against_the_budget() -> None:
    results = {"cache hits, JSON, 16 at once": {
        instructions.OLP: 5_000_000.0, instructions.WITHOUT: 4_300_000.0,
        instructions.BARE: 3_300_000.0}}
    (line,) = instructions._summary(results)
    # 0.8x leaves 3.3M / 0.8 - 3.3M = 825 k; OLP runs 1,700 k above, 700 k of it bookkeeping
    assert "0.8× the bare app's rate leaves OLP 825 k instructions a request above it" in line
    assert "OLP runs 1,700 k above the bare app, of which its bookkeeping 700 k and the rest " \
        "1,000 k" in line
    rows = instructions._rows(results)
    assert rows[0][:4] == ["cache hits, JSON, 16 at once", "OLP", "5,000", "1.52×"]
    assert rows[2][3:] == ["1.00×", ""]


def test_the_summary_says_what_olp_before_ran() -> None:
    results = {"pass-through, JSON, 16 at once": {
        instructions.OLP: 8_400_000.0, instructions.BEFORE: 8_500_000.0,
        instructions.WITHOUT: 7_600_000.0, instructions.FLOOR: 6_800_000.0,
        instructions.STREAMED: 7_700_000.0}}
    (line,) = instructions._summary(results)
    assert "leaves OLP 1,700 k" in line
    assert "the rest 800 k; the stream alone (the streamed floor) 900 k; OLP before: " \
        "1,700 k (-100 k)" in line


def test_one_at_a_time_is_set_against_no_rate() -> None:
    results = {"pass-through, JSON, one at a time": {
        instructions.OLP: 8_500_000.0, instructions.WITHOUT: 7_900_000.0,
        instructions.FLOOR: 5_800_000.0, instructions.STREAMED: 6_800_000.0}}
    (line,) = instructions._summary(results)
    assert "0.8×" not in line
    assert line.startswith("- pass-through, JSON, one at a time: OLP runs 2,700 k above the "
                           "floor, of which its bookkeeping 600 k and the rest 2,100 k; the "
                           "stream alone (the streamed floor) 1,000 k")
