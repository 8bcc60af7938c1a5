"""The proxy's memory bounds over months (docs/adr/0013-memory-over-months.md): SQLite's page
cache is capped, and free heap pages are handed back on a fixed period (MockClock, exact
virtual times)."""

from __future__ import annotations

import gc
from pathlib import Path

import trio
import trio.testing

from olp.runtime.server import (
    GC_YOUNG_THRESHOLD,
    MALLOC_TRIM_EVERY_S,
    glibc,
    trim_malloc,
    tune_gc,
)
from olp.store import Database
from olp.store._db import PAGE_CACHE_KIB


def test_sqlite_page_cache_is_capped(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        cache_size = db.read(lambda conn: conn.execute("PRAGMA cache_size").fetchone()[0])
    assert cache_size == -PAGE_CACHE_KIB  # negative: KiB, not pages
    assert PAGE_CACHE_KIB == 512


async def test_trim_runs_every_period_until_cancelled(
        autojump_clock: trio.testing.MockClock) -> None:
    times: list[float] = []

    async def trim() -> None:
        times.append(trio.current_time())
        await trio.sleep(0.5)  # a trim takes time; the next one is a whole period later

    start = trio.current_time()
    with trio.move_on_after(3 * MALLOC_TRIM_EVERY_S + 30):
        await trim_malloc(trim, MALLOC_TRIM_EVERY_S)
    assert [t - start for t in times] == [60.0, 120.5, 181.0]


def test_glibc_is_found_here_with_mallopt_and_malloc_trim() -> None:
    # This machine (and CI's) runs glibc: the bounds apply. Elsewhere glibc() is None.
    libc = glibc()
    assert libc is not None
    assert libc.malloc_trim(0) in (0, 1)


def test_the_youngest_generation_is_collected_less_often_the_others_as_before() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # CPython's defaults
        tune_gc()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 10, 10)
        assert GC_YOUNG_THRESHOLD == 10_000
    finally:
        gc.set_threshold(*before)
