"""The SQLite cache store (TTL, LRU, size bounds, namespaces, persistence) and replay."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
import trio
import trio.testing

from olp.cache import CacheStore, ReplaySource
from olp.ir import Error, Event, Retrying, Start, Stop, TextDelta, ToolCallDelta, Usage
from olp.store import MIGRATIONS, Database

_T = TypeVar("_T")


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_store(db: Database, clock: Clock, **limits: Any) -> CacheStore:
    settings: dict[str, Any] = {"ttl_s": 3600, "max_entry_bytes": 100_000,
                                "max_total_bytes": 1_000_000, "max_entries_per_namespace": 100}
    return CacheStore(db, clock=clock, **(settings | limits))


def answer(text: str, *extra: Event) -> list[Event]:
    return [Start(model="sonnet-4-20260101"), TextDelta(text=text[:2]), TextDelta(text=text[2:]),
            *extra, Usage(prompt_tokens=3, completion_tokens=5), Stop()]


def size_of(events: Sequence[Event]) -> int:
    return len(msgspec.json.encode(list(events)))


async def keys_present(store: CacheStore, namespace: str, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if await store.get(namespace, k) is not None]


# --- round trip and what may be written -------------------------------------------------------

async def test_put_then_get_returns_the_same_events_in_the_same_chunks(
        db: Database, clock: Clock) -> None:
    store = make_store(db, clock)
    events = answer("hello", ToolCallDelta(index=0, id="c1", name="f", arguments='{"a"'),
                    ToolCallDelta(index=0, arguments=": 1}"))
    assert await store.put("ann", "k1", "anthropic", events)
    assert await store.get("ann", "k1") == events
    assert await store.get("ann", "k2") is None


async def test_retrying_events_are_not_stored(db: Database, clock: Clock) -> None:
    store = make_store(db, clock)
    retry = Retrying(attempt=1, category="rate_limited")
    assert await store.put("ann", "k", "anthropic", [retry, *answer("hello")])
    assert await store.get("ann", "k") == answer("hello")


@pytest.mark.parametrize("events", [
    [],
    [TextDelta(text="cut off")],
    [TextDelta(text="a"), Error(code="CLI_FAILED", category="unavailable", message="x")],
    [TextDelta(text="a"), Error(code="X", category="unknown", message="x"), Stop()],
    [TextDelta(text="a"), Stop(), TextDelta(text="b"), Stop()],
    [Stop(), TextDelta(text="after the end")],
], ids=["empty", "truncated", "errored", "error-then-stop", "two-stops", "stop-not-last"])
async def test_only_complete_answers_are_written(db: Database, clock: Clock,
                                                 events: list[Event]) -> None:
    store = make_store(db, clock)
    assert not await store.put("ann", "k", "anthropic", events)
    assert await store.get("ann", "k") is None
    stats = await store.stats()
    assert (stats.refused, stats.writes, stats.entries) == (1, 0, 0)


async def test_entry_size_limit_is_exact(db: Database, clock: Clock) -> None:
    fits = answer("x" * 100)
    store = make_store(db, clock, max_entry_bytes=size_of(fits))
    assert await store.put("ann", "fits", "p", fits)
    assert not await store.put("ann", "too-big", "p", answer("x" * 101))
    assert await keys_present(store, "ann", ["fits", "too-big"]) == ["fits"]


async def test_an_entry_larger_than_the_total_bound_is_refused(db: Database,
                                                               clock: Clock) -> None:
    store = make_store(db, clock, max_total_bytes=size_of(answer("x")) - 1)
    assert not await store.put("ann", "k", "p", answer("x"))
    assert (await store.stats()).entries == 0


async def test_put_replaces_an_existing_entry(db: Database, clock: Clock) -> None:
    store = make_store(db, clock)
    await store.put("ann", "k", "p", answer("first"))
    await store.put("ann", "k", "q", answer("second!"))
    assert await store.get("ann", "k") == answer("second!")
    stats = await store.stats()
    assert (stats.entries, stats.bytes) == (1, size_of(answer("second!")))
    assert set(stats.providers) == {"q"}


# --- TTL --------------------------------------------------------------------------------------

async def test_entries_expire_after_the_ttl_and_are_deleted(db: Database, clock: Clock) -> None:
    store = make_store(db, clock, ttl_s=60)
    await store.put("ann", "k", "p", answer("hello"))
    clock.now += 59.9
    assert await store.get("ann", "k") is not None  # a hit does not extend the TTL
    clock.now += 0.1
    assert await store.get("ann", "k") is None
    assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM cache_entries").fetchone()) == (0,)
    stats = await store.stats()
    assert (stats.hits, stats.misses, stats.expired) == (1, 1, 1)


async def test_a_write_purges_expired_entries_and_stats_skip_them(db: Database,
                                                                  clock: Clock) -> None:
    store = make_store(db, clock, ttl_s=60)
    await store.put("ann", "old", "p", answer("hello"))
    clock.now += 30
    await store.put("bob", "mid", "p", answer("hello"))
    clock.now += 30
    assert (await store.stats()).entries == 1  # "old" is expired but not yet purged
    await store.put("ann", "new", "p", answer("hello"))
    rows = db.read(lambda c: c.execute("SELECT key FROM cache_entries ORDER BY key").fetchall())
    assert rows == [("mid",), ("new",)]
    assert (await store.stats()).expired == 1


# --- LRU eviction ------------------------------------------------------------------------------

async def test_per_namespace_limit_evicts_the_least_recently_used(db: Database,
                                                                  clock: Clock) -> None:
    store = make_store(db, clock, max_entries_per_namespace=3)
    for k in ("a", "b", "c"):
        await store.put("ann", k, "p", answer(k * 3))
        clock.now += 1
    await store.put("bob", "z", "p", answer("zzz"))  # other namespaces don't count
    assert await store.get("ann", "a") is not None  # "a" is now the most recently used
    clock.now += 1
    await store.put("ann", "d", "p", answer("ddd"))
    assert await keys_present(store, "ann", ["a", "b", "c", "d"]) == ["a", "c", "d"]
    assert await keys_present(store, "bob", ["z"]) == ["z"]
    assert (await store.stats()).evicted == 1


async def test_total_size_bound_evicts_lru_across_namespaces(db: Database,
                                                             clock: Clock) -> None:
    one = size_of(answer("xxx"))
    store = make_store(db, clock, max_total_bytes=3 * one)
    for ns, k in (("ann", "a"), ("bob", "b"), ("cat", "c")):
        await store.put(ns, k, "p", answer("xxx"))
        clock.now += 1
    await store.get("ann", "a")
    clock.now += 1
    await store.put("dan", "d", "p", answer("xxx"))  # one over: "b" (LRU) goes
    present = [(ns, k) for ns, k in (("ann", "a"), ("bob", "b"), ("cat", "c"), ("dan", "d"))
               if await store.get(ns, k) is not None]
    assert present == [("ann", "a"), ("cat", "c"), ("dan", "d")]
    for ns, k in (("dan", "d"), ("ann", "a"), ("cat", "c")):  # use order now: d, a, c
        clock.now += 1
        await store.get(ns, k)
    clock.now += 1
    big = answer("x" * (one + 3))  # twice the size of one entry: two victims, d and a
    assert size_of(big) == 2 * one
    assert await store.put("eve", "big", "p", big)
    assert [await store.get(ns, k) is not None
            for ns, k in (("dan", "d"), ("ann", "a"), ("cat", "c"), ("eve", "big"))] == [
        False, False, True, True]
    stats = await store.stats()
    assert (stats.bytes, stats.evicted) == (3 * one, 3)


async def test_lru_ties_break_by_insertion_order(db: Database, clock: Clock) -> None:
    store = make_store(db, clock, max_entries_per_namespace=2)
    for k in ("a", "b", "c"):  # same clock reading for all three
        await store.put("ann", k, "p", answer(k * 3))
    assert await keys_present(store, "ann", ["a", "b", "c"]) == ["b", "c"]


# --- namespaces -------------------------------------------------------------------------------

async def test_namespaces_never_see_each_others_entries(db: Database, clock: Clock) -> None:
    store = make_store(db, clock)
    await store.put("ann", "same-key", "p", answer("ann's answer"))
    assert await store.get("bob", "same-key") is None
    await store.put("bob", "same-key", "p", answer("bob's answer"))
    assert await store.get("ann", "same-key") == answer("ann's answer")
    assert await store.get("bob", "same-key") == answer("bob's answer")
    assert await store.clear("ann") == 1
    assert await store.get("ann", "same-key") is None
    assert await store.get("bob", "same-key") == answer("bob's answer")


async def test_clear_everything(db: Database, clock: Clock) -> None:
    store = make_store(db, clock)
    for ns in ("ann", "bob"):
        for k in ("a", "b"):
            await store.put(ns, k, "p", answer("hello"))
    assert await store.clear() == 4
    assert await store.clear() == 0
    assert (await store.stats()).entries == 0


# --- stats ------------------------------------------------------------------------------------

async def test_stats_count_hits_misses_and_per_provider_entries(db: Database,
                                                                clock: Clock) -> None:
    store = make_store(db, clock)
    await store.put("ann", "a", "anthropic", answer("hello"))
    await store.put("ann", "b", "anthropic", answer("hi there"))
    await store.put("bob", "c", "openai", answer("hey"))
    await store.get("ann", "a")
    await store.get("ann", "a")
    await store.get("bob", "c")
    await store.get("bob", "a")
    stats = await store.stats()
    assert (stats.hits, stats.misses, stats.writes, stats.entries) == (3, 1, 3, 3)
    assert stats.bytes == sum(size_of(answer(t)) for t in ("hello", "hi there", "hey"))
    anthropic, openai = stats.providers["anthropic"], stats.providers["openai"]
    assert (anthropic.entries, anthropic.hits) == (2, 2)
    assert (openai.entries, openai.hits, openai.bytes) == (1, 1, size_of(answer("hey")))


async def test_hit_counters_start_at_zero_in_a_new_process(tmp_path: Path, clock: Clock) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = make_store(db, clock)
        await store.put("ann", "a", "p", answer("hello"))
        await store.get("ann", "a")
    with Database(tmp_path / "olp.db") as db:
        stats = await make_store(db, clock).stats()
        assert (stats.hits, stats.misses, stats.entries) == (0, 0, 1)


# --- persistence, robustness, threading -------------------------------------------------------

async def test_entries_survive_reopening_the_database(tmp_path: Path, clock: Clock) -> None:
    with Database(tmp_path / "olp.db") as db:
        await make_store(db, clock).put("ann", "k", "p", answer("hello"))
    with Database(tmp_path / "olp.db") as db:
        assert db.schema_version == len(MIGRATIONS)
        assert await make_store(db, clock).get("ann", "k") == answer("hello")


async def test_an_undecodable_entry_is_a_miss_and_is_deleted(db: Database,
                                                             clock: Clock) -> None:
    store = make_store(db, clock)
    await store.put("ann", "k", "p", answer("hello"))
    db.write(lambda c: c.execute("UPDATE cache_entries SET events = ?",
                                 (b'[{"type":"from_the_future"}]',)))
    assert await store.get("ann", "k") is None
    assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM cache_entries").fetchone()) == (0,)


async def test_cached_token_figures_survive_the_store(db: Database, clock: Clock) -> None:
    """A replayed answer tells the cached input it was first answered with."""
    store = make_store(db, clock)
    usage = Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024,
                  cache_write_tokens=100)
    events = [TextDelta(text="hi"), usage, Stop()]
    await store.put("ann", "k", "p", events)
    assert await make_store(db, clock).get("ann", "k") == events  # from the disk


async def test_an_entry_written_before_cached_tokens_still_replays(db: Database,
                                                                   clock: Clock) -> None:
    store = make_store(db, clock)
    await store.put("ann", "k", "p", [TextDelta(text="hi"), Stop()])
    old = (b'[{"type":"text_delta","text":"hi"},{"type":"usage","prompt_tokens":3,'
           b'"completion_tokens":5},{"type":"stop","finish_reason":"stop"}]')
    db.write(lambda c: c.execute("UPDATE cache_entries SET events = ?", (old,)))
    assert await make_store(db, clock).get("ann", "k") == [
        TextDelta(text="hi"), Usage(prompt_tokens=3, completion_tokens=5, cached_tokens=0,
                                    cache_write_tokens=0), Stop()]


class _ThreadCheckingDatabase(Database):
    loop_thread: threading.Thread | None = None
    calls_on_loop = 0

    def _check(self) -> None:
        if threading.current_thread() is self.loop_thread:
            self.calls_on_loop += 1

    def read(self, fn: Callable[[Any], _T]) -> _T:
        self._check()
        return super().read(fn)

    def write(self, fn: Callable[[Any], _T]) -> _T:
        self._check()
        return super().write(fn)


async def test_disk_work_never_runs_on_the_trio_thread(tmp_path: Path, clock: Clock) -> None:
    db = _ThreadCheckingDatabase(tmp_path / "olp.db")
    with db:
        db.loop_thread = threading.current_thread()
        store = make_store(db, clock, max_entries_per_namespace=1)
        await store.put("ann", "a", "p", answer("hello"))
        await store.put("ann", "b", "p", answer("hello"))
        await store.get("ann", "b")
        await store.get("ann", "a")
        await store.stats()
        await store.clear()
        assert db.calls_on_loop == 0


async def test_limits_must_be_positive(db: Database, clock: Clock) -> None:
    with pytest.raises(ValueError):
        make_store(db, clock, max_entries_per_namespace=0)


# --- replay -----------------------------------------------------------------------------------

async def test_replay_yields_each_stored_event_then_end_of_channel(db: Database,
                                                                   clock: Clock) -> None:
    store = make_store(db, clock)
    events = answer("hello world")
    await store.put("ann", "k", "p", events)
    stored = await store.get("ann", "k")
    assert stored is not None
    source = ReplaySource(stored)
    got = [await source.receive() for _ in events]
    assert got == events
    with pytest.raises(trio.EndOfChannel):
        await source.receive()
    source.abandon()
    source.abandon()  # idempotent


async def test_replay_after_abandon_is_closed_and_receive_is_a_checkpoint() -> None:
    source = ReplaySource(answer("hello"))
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await source.receive()
    assert await source.receive() == Start(model="sonnet-4-20260101")  # nothing was consumed
    source.abandon()
    with pytest.raises(trio.ClosedResourceError):
        await source.receive()


async def test_replay_checkpoints_once_then_hands_out_the_rest_at_once() -> None:
    events = answer("hello")
    source = ReplaySource(events)
    assert await source.receive() == events[0]
    with trio.testing.assert_no_checkpoints():
        rest = [await source.receive() for _ in events[1:]]
    assert rest == events[1:]


@pytest.mark.parametrize("events", [[], [TextDelta(text="a")], [Stop(), Stop()]])
def test_replay_needs_exactly_one_terminal_event_at_the_end(events: list[Event]) -> None:
    with pytest.raises(ValueError):
        ReplaySource(events)
