"""The persistent response cache: complete answers as IR event lists, in the SQLite store.

Entries live in the ``cache_entries`` table (migration 2 in :mod:`olp.store`), keyed by
``(namespace, key)``: the namespace is the API key the answer belongs to, so one family
member never sees another's entries. An entry is the msgspec JSON of the answer's event list,
so a replay has the original chunk boundaries.

Bounds: a TTL counted from the write; an entry size limit; an entry count limit per
namespace; a total size bound over every namespace. The last two evict least recently *used*
entries first (a hit touches ``last_used_at``). Sizes are the stored JSON bytes, not SQLite's
page overhead.

Every disk access runs in a worker thread through :meth:`Database.read_async` /
:meth:`Database.write_async`, so the Trio loop never waits on the disk; a write is one
transaction, so a ``kill -9`` leaves either the whole entry or none of it (WAL).

Hits are served from memory where possible: entries read from the disk are kept decoded in
a :class:`ByteBoundedLRU` (``memory_bytes`` of stored JSON), and a hit from memory costs no
thread hop and no transaction. Last-used times are noted in memory and written in batches:
by :meth:`CacheStore.run` every ``flush_s`` and when it is cancelled (a clean shutdown), and
by every :meth:`CacheStore.put` before it evicts, so eviction always sees them. A ``kill -9``
loses at most ``flush_s`` of last-used times (LRU order), never an entry. This process is
the only writer of the table while it runs (``olp cache clear`` goes through its API);
every change it makes drops the affected entries from memory.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, Protocol

import msgspec
import trio

from olp.ir import Error, Event, QuotaReport, Retrying, Stop
from olp.store import Database

from ._lru import ByteBoundedLRU

log = logging.getLogger("olp.cache")

_DECODER: Final = msgspec.json.Decoder(list[Event])
_ENCODER: Final = msgspec.json.Encoder()
#: Default budget of decoded entries kept in memory, in stored (JSON) bytes; the Python
#: objects take a few times that.
MEMORY_BYTES: Final = 16 * 1024 * 1024
#: Default seconds between two writes of the hits' last-used times.
FLUSH_S: Final = 5.0

_Slot = tuple[str, str]  # (namespace, key)


class CacheService(Protocol):
    """What the engine needs from a cache backend (SQLite here; a shared one could follow)."""

    async def get(self, namespace: str, key: str) -> list[Event] | None: ...

    async def put(self, namespace: str, key: str, provider: str,
                  events: Sequence[Event]) -> bool: ...


@dataclass(frozen=True, slots=True)
class ProviderCacheStats:
    entries: int
    bytes: int
    hits: int  # since start


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters since this process started (hits … expired) and the table as it is now
    (entries, bytes, providers; expired rows not yet purged are not counted)."""

    hits: int
    misses: int
    writes: int
    refused: int
    evicted: int
    expired: int
    entries: int
    bytes: int
    providers: Mapping[str, ProviderCacheStats]


@dataclass(frozen=True, slots=True)
class _PutOutcome:
    stored: bool
    evicted: list[_Slot]
    expired: int


@dataclass(frozen=True, slots=True)
class _Entry:
    """A decoded entry kept in memory."""

    events: tuple[Event, ...]
    provider: str
    created_at: float


@dataclass(frozen=True, slots=True)
class _Row:
    """What a disk read found: the entry (``events`` is ``None`` if undecodable), or
    that it has expired (``events`` is not decoded then)."""

    id: int
    provider: str
    created_at: float
    size: int
    expired: bool
    events: list[Event] | None


class CacheStore:
    """The SQLite response cache with decoded entries in memory. Only complete answers go in
    (see :meth:`put`). Run :meth:`run` in a nursery so hits' last-used times reach the disk
    between writes (and at shutdown).

    ``clock`` is wall-clock seconds (entries outlive the process); inject one in tests.
    ``memory_bytes`` bounds the entries kept decoded in memory (their stored size; 0 keeps
    none); ``flush_s`` is how often :meth:`run` writes last-used times.
    """

    def __init__(self, db: Database, *, ttl_s: float, max_entry_bytes: int,
                 max_total_bytes: int, max_entries_per_namespace: int,
                 memory_bytes: int = MEMORY_BYTES, flush_s: float = FLUSH_S,
                 clock: Callable[[], float] = time.time) -> None:
        if ttl_s <= 0 or max_entry_bytes <= 0 or max_total_bytes <= 0 \
                or max_entries_per_namespace <= 0 or flush_s <= 0:
            raise ValueError("cache limits must be positive")
        if memory_bytes < 0:
            raise ValueError("memory_bytes must not be negative")
        self.db = db
        self.ttl_s = ttl_s
        self.max_entry_bytes = max_entry_bytes
        self.max_total_bytes = max_total_bytes
        self.max_entries_per_namespace = max_entries_per_namespace
        self.flush_s = flush_s
        self._clock = clock
        # Everything below is only touched on the Trio thread, never in a worker thread.
        self._memory: ByteBoundedLRU[_Slot, _Entry] = ByteBoundedLRU(memory_bytes)
        self._touched: dict[_Slot, float] = {}  # last-used times not yet on disk
        self._generation = 0  # bumped by every change to the table made here
        self._hits = 0
        self._misses = 0
        self._writes = 0
        self._refused = 0
        self._evicted = 0
        self._expired = 0
        self._hits_by_provider: Counter[str] = Counter()

    async def get(self, namespace: str, key: str) -> list[Event] | None:
        """The stored answer, or None. A hit becomes the most recently used entry; an
        expired (or undecodable) entry is deleted and is a miss. An entry in memory costs no
        thread hop; otherwise the disk is read in a worker thread."""
        await trio.lowlevel.checkpoint()
        slot = (namespace, key)
        now = self._clock()
        entry = self._memory.get(slot)
        if entry is not None:
            if now - entry.created_at < self.ttl_s:
                return self._hit(slot, entry.provider, entry.events, now)
            self._memory.pop(slot)
        generation = self._generation
        row = await self.db.read_async(partial(_read, namespace, key, now - self.ttl_s))
        if row is not None and row.events is not None and not row.expired:
            if generation == self._generation:  # nothing changed the table meanwhile
                self._memory.put(slot, _Entry(tuple(row.events), row.provider,
                                              row.created_at), row.size)
            return self._hit(slot, row.provider, row.events, now)
        self._misses += 1
        if row is not None:
            if row.expired:
                self._expired += 1
            else:  # written by an incompatible OLP, or damaged
                log.warning("dropping an undecodable cache entry",
                            extra={"provider": row.provider})
            await self._delete_row(row)
        return None

    def _hit(self, slot: _Slot, provider: str, events: Sequence[Event],
             now: float) -> list[Event]:
        self._touched[slot] = now
        self._hits += 1
        self._hits_by_provider[provider] += 1
        return list(events)

    async def _delete_row(self, row: _Row) -> None:
        """Delete one row read earlier, unless it was replaced since."""
        self._generation += 1
        await self.db.write_async(lambda conn: conn.execute(
            "DELETE FROM cache_entries WHERE id = ? AND created_at = ?",
            (row.id, row.created_at)))

    async def put(self, namespace: str, key: str, provider: str,
                  events: Sequence[Event]) -> bool:
        """Store one complete answer; True if it was stored.

        Refused (False): an empty list, one that does not end in :class:`Stop` or contains an
        :class:`Error`, or one larger than ``max_entry_bytes`` (or the total bound).
        :class:`Retrying` and :class:`QuotaReport` events are dropped: they describe the
        attempt, not the answer.
        Writing may evict the namespace's or everyone's least recently used entries (the
        last-used times noted in memory are written first, in the same transaction);
        expired entries are purged on the way.
        """
        if not _is_complete(events):
            self._refused += 1
            await trio.lowlevel.checkpoint()
            return False
        now = self._clock()
        kept = [e for e in events if not isinstance(e, Retrying | QuotaReport)]
        limit = min(self.max_entry_bytes, self.max_total_bytes)
        per_ns = self.max_entries_per_namespace
        total = self.max_total_bytes
        ttl = self.ttl_s
        touched = self._take_touched()

        def write(conn: sqlite3.Connection) -> _PutOutcome:
            _write_touched(conn, touched)
            blob = _ENCODER.encode(kept)
            if len(blob) > limit:
                return _PutOutcome(stored=False, evicted=[], expired=0)
            expired = conn.execute("DELETE FROM cache_entries WHERE created_at <= ?",
                                   (now - ttl,)).rowcount
            conn.execute(
                "INSERT INTO cache_entries"
                " (namespace, key, provider, size, created_at, last_used_at, events)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (namespace, key) DO UPDATE SET provider = excluded.provider,"
                " size = excluded.size, created_at = excluded.created_at,"
                " last_used_at = excluded.last_used_at, events = excluded.events",
                (namespace, key, provider, len(blob), now, now, blob))
            evicted = _evict_namespace(conn, namespace, key, per_ns)
            evicted += _evict_total(conn, namespace, key, total)
            return _PutOutcome(stored=True, evicted=evicted, expired=expired)

        self._generation += 1
        try:
            outcome = await self.db.write_async(write)
        except BaseException:
            self._restore_touched(touched)
            raise
        self._memory.pop((namespace, key))
        for slot in outcome.evicted:
            self._memory.pop(slot)
            self._touched.pop(slot, None)
        self._expired += outcome.expired
        self._evicted += len(outcome.evicted)
        if outcome.stored:
            self._writes += 1
        else:
            self._refused += 1
            log.debug("cache entry too large", extra={"provider": provider})
        return outcome.stored

    async def flush(self) -> int:
        """Write the last-used times noted since the last write (one transaction, in a
        worker thread that finishes even if the caller is cancelled); returns how many. On
        failure they are kept for the next try and the error propagates."""
        touched = self._take_touched()
        if not touched:
            await trio.lowlevel.checkpoint()
            return 0
        try:
            await self.db.write_async(partial(_write_touched, touched=touched))
        except BaseException:
            self._restore_touched(touched)
            raise
        return len(touched)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """:meth:`flush` every ``flush_s`` until cancelled, then once more (shielded), so a
        clean shutdown loses no last-used time. A failed flush is logged and retried."""
        task_status.started()
        try:
            while True:
                await trio.sleep(self.flush_s)
                try:
                    await self.flush()
                except Exception:
                    log.exception("could not write the cache's last-used times")
        finally:
            with trio.CancelScope(shield=True):
                await self.flush()

    def _take_touched(self) -> dict[_Slot, float]:
        touched, self._touched = self._touched, {}
        return touched

    def _restore_touched(self, touched: dict[_Slot, float]) -> None:
        for slot, when in touched.items():
            self._touched[slot] = max(when, self._touched.get(slot, when))

    async def stats(self) -> CacheStats:
        cutoff = self._clock() - self.ttl_s

        def query(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
            return conn.execute(
                "SELECT provider, COUNT(*), COALESCE(SUM(size), 0) FROM cache_entries"
                " WHERE created_at > ? GROUP BY provider ORDER BY provider",
                (cutoff,)).fetchall()

        rows = await self.db.read_async(query)
        providers = {name: ProviderCacheStats(entries=n, bytes=size,
                                              hits=self._hits_by_provider[name])
                     for name, n, size in rows}
        for name, hits in self._hits_by_provider.items():
            providers.setdefault(name, ProviderCacheStats(entries=0, bytes=0, hits=hits))
        return CacheStats(
            hits=self._hits, misses=self._misses, writes=self._writes, refused=self._refused,
            evicted=self._evicted, expired=self._expired,
            entries=sum(n for _, n, _ in rows), bytes=sum(size for _, _, size in rows),
            providers=providers)

    async def clear(self, namespace: str | None = None) -> int:
        """Delete one namespace's entries, or every entry; returns how many."""

        def delete(conn: sqlite3.Connection) -> int:
            if namespace is None:
                return conn.execute("DELETE FROM cache_entries").rowcount
            return conn.execute("DELETE FROM cache_entries WHERE namespace = ?",
                                (namespace,)).rowcount

        self._generation += 1
        deleted = await self.db.write_async(delete)
        self._memory.pop_where(lambda slot: namespace is None or slot[0] == namespace)
        for slot in [s for s in self._touched if namespace is None or s[0] == namespace]:
            del self._touched[slot]
        return deleted


def _read(namespace: str, key: str, cutoff: float, conn: sqlite3.Connection) -> _Row | None:
    """One entry, decoded unless it was created at or before ``cutoff`` (expired)."""
    row = conn.execute(
        "SELECT id, provider, created_at, size, events FROM cache_entries"
        " WHERE namespace = ? AND key = ?", (namespace, key)).fetchone()
    if row is None:
        return None
    entry_id, provider, created_at, size, blob = row
    if created_at <= cutoff:
        return _Row(entry_id, provider, created_at, size, expired=True, events=None)
    try:
        events: list[Event] | None = _DECODER.decode(blob)
    except msgspec.DecodeError:
        events = None
    return _Row(entry_id, provider, created_at, size, expired=False, events=events)


def _write_touched(conn: sqlite3.Connection, touched: Mapping[_Slot, float]) -> None:
    conn.executemany(
        "UPDATE cache_entries SET last_used_at = MAX(last_used_at, ?)"
        " WHERE namespace = ? AND key = ?",
        [(when, namespace, key) for (namespace, key), when in touched.items()])


def _is_complete(events: Sequence[Event]) -> bool:
    return (bool(events) and isinstance(events[-1], Stop)
            and not any(isinstance(e, (Error, Stop)) for e in events[:-1]))


def _evict_namespace(conn: sqlite3.Connection, namespace: str, keep: str,
                     limit: int) -> list[_Slot]:
    (count,) = conn.execute("SELECT COUNT(*) FROM cache_entries WHERE namespace = ?",
                            (namespace,)).fetchone()
    if count <= limit:
        return []
    victims = conn.execute(
        "SELECT id, key FROM cache_entries WHERE namespace = ? AND key != ?"
        " ORDER BY last_used_at, id LIMIT ?", (namespace, keep, count - limit)).fetchall()
    conn.executemany("DELETE FROM cache_entries WHERE id = ?", [(v,) for v, _ in victims])
    return [(namespace, key) for _, key in victims]


def _evict_total(conn: sqlite3.Connection, namespace: str, keep: str,
                 limit: int) -> list[_Slot]:
    (total,) = conn.execute("SELECT COALESCE(SUM(size), 0) FROM cache_entries").fetchone()
    if total <= limit:
        return []
    victims: list[tuple[int, _Slot]] = []
    for entry_id, ns, key, size in conn.execute(
            "SELECT id, namespace, key, size FROM cache_entries ORDER BY last_used_at, id"):
        if total <= limit:
            break
        if (ns, key) == (namespace, keep):
            continue
        victims.append((entry_id, (ns, key)))
        total -= size
    conn.executemany("DELETE FROM cache_entries WHERE id = ?", [(v,) for v, _ in victims])
    return [slot for _, slot in victims]
