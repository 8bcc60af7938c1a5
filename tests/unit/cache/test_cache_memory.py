"""The cache's in-memory layer (decoded entries in a byte-bounded LRU) and its batched
last-used writes: a hit from memory reads no disk, last-used times reach the disk every
``flush_s`` (MockClock, exact virtual times), at shutdown, and before any eviction; a change
to the table drops the affected entries from memory."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
import trio.testing

from olp.cache import CacheStore
from olp.cache._lru import ByteBoundedLRU
from olp.ir import Event, Start, Stop, TextDelta
from olp.store import Database

_T = TypeVar("_T")


class InlineDatabase(Database):
    """A real SQLite database whose async calls run in the Trio thread (the thread hop is the
    Database's own business, tested with it), so MockClock times are exact; it counts the
    calls, and can hold a read after it was made (as a worker thread returning late)."""

    reads = 0
    writes = 0
    hold: trio.Event | None = None  # set: the next read waits for it after reading

    async def read_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self.reads += 1
        await trio.lowlevel.checkpoint()
        value = self.read(fn)
        if self.hold is not None:
            hold, self.hold = self.hold, None
            self.parked.set()
            await hold.wait()
        return value

    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self.writes += 1
        await trio.lowlevel.checkpoint()
        return self.write(fn)

    parked: trio.Event


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Iterator[InlineDatabase]:
    with InlineDatabase(tmp_path / "olp.db") as database:
        yield database


def store(db: Database, clock: Clock, **limits: Any) -> CacheStore:
    settings: dict[str, Any] = {"ttl_s": 3600, "max_entry_bytes": 100_000,
                                "max_total_bytes": 1_000_000, "max_entries_per_namespace": 100,
                                "flush_s": 5.0}
    return CacheStore(db, clock=clock, **(settings | limits))


def answer(text: str) -> list[Event]:
    return [Start(model="m"), TextDelta(text=text), Stop()]


def last_used(db: Database, key: str) -> float:
    value = db.read(lambda c: c.execute(
        "SELECT last_used_at FROM cache_entries WHERE key = ?", (key,)).fetchone()[0])
    assert isinstance(value, float)
    return value


async def test_a_hit_from_memory_reads_no_disk(db: InlineDatabase) -> None:
    clock = Clock()
    cache = store(db, clock)
    await cache.put("ann", "k", "p", answer("hello"))
    assert await cache.get("ann", "k") == answer("hello")  # read from disk, kept in memory
    reads, writes = db.reads, db.writes
    for _ in range(5):
        assert await cache.get("ann", "k") == answer("hello")
    assert (db.reads, db.writes) == (reads, writes)
    assert (await cache.stats()).hits == 6


async def test_last_used_times_are_written_every_flush_period(
        db: InlineDatabase, autojump_clock: trio.testing.MockClock) -> None:
    clock = Clock()
    cache = store(db, clock)
    await cache.put("ann", "k", "p", answer("hello"))
    written = clock.now
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(cache.run)
        clock.now += 100
        await cache.get("ann", "k")
        await cache.get("ann", "k")  # from memory: only noted
        assert last_used(db, "k") == written
        await trio.sleep(4.9)
        assert last_used(db, "k") == written  # not yet: the period is 5 s
        await trio.sleep(0.2)
        assert trio.current_time() - start == pytest.approx(5.1)
        assert last_used(db, "k") == written + 100
        clock.now += 50
        await cache.get("ann", "k")
        nursery.cancel_scope.cancel()  # a clean shutdown writes what is left
    assert last_used(db, "k") == written + 150


async def test_eviction_sees_the_hits_noted_in_memory(db: InlineDatabase) -> None:
    clock = Clock()
    cache = store(db, clock, max_entries_per_namespace=2)
    for key in ("a", "b"):
        await cache.put("ann", key, "p", answer(key))
        clock.now += 1
    await cache.get("ann", "a")  # from disk: noted as used now, not yet written
    await cache.get("ann", "a")
    clock.now += 1
    await cache.put("ann", "c", "p", answer("c"))  # "b" is the least recently used
    assert await cache.get("ann", "b") is None
    assert await cache.get("ann", "a") == answer("a")


async def test_clear_and_expiry_drop_entries_from_memory(db: InlineDatabase) -> None:
    clock = Clock()
    cache = store(db, clock, ttl_s=60)
    await cache.put("ann", "k", "p", answer("x"))
    await cache.put("bob", "k", "p", answer("y"))
    assert await cache.get("ann", "k") is not None
    assert await cache.get("bob", "k") is not None
    assert await cache.clear("ann") == 1
    assert await cache.get("ann", "k") is None  # not served from memory after the clear
    clock.now += 61
    assert await cache.get("bob", "k") is None  # expired in memory too
    assert (await cache.stats()).entries == 0


async def test_an_entry_replaced_while_it_was_read_is_not_kept_stale(
        db: InlineDatabase) -> None:
    clock = Clock()
    cache = store(db, clock)
    await cache.put("ann", "k", "p", answer("old"))
    db.hold, db.parked = trio.Event(), trio.Event()
    hold = db.hold
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.get, "ann", "k")  # reads "old", then is held
        await db.parked.wait()
        clock.now += 1
        await cache.put("ann", "k", "p", answer("new"))  # replaced meanwhile
        hold.set()
    assert await cache.get("ann", "k") == answer("new")


def test_the_lru_keeps_to_its_byte_budget() -> None:
    lru: ByteBoundedLRU[str, int] = ByteBoundedLRU(10)
    lru.put("a", 1, 4)
    lru.put("b", 2, 4)
    assert lru.get("a") == 1  # "b" is now the least recently used
    lru.put("c", 3, 4)
    assert (lru.get("b"), lru.get("a"), lru.get("c"), lru.bytes) == (None, 1, 3, 8)
    lru.put("huge", 4, 11)  # larger than the whole budget: not kept, nothing evicted
    assert (lru.get("huge"), len(lru), lru.bytes) == (None, 2, 8)
    assert lru.pop_where(lambda k: k == "a") == 1 and lru.bytes == 4
