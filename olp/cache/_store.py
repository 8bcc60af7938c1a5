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
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import msgspec

from olp.ir import Error, Event, Retrying, Stop
from olp.store import Database

log = logging.getLogger("olp.cache")

_DECODER: Final = msgspec.json.Decoder(list[Event])
_ENCODER: Final = msgspec.json.Encoder()


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
    evicted: int
    expired: int


class CacheStore:
    """The SQLite response cache. Only complete answers go in (see :meth:`put`).

    ``clock`` is wall-clock seconds (entries outlive the process); inject one in tests.
    """

    def __init__(self, db: Database, *, ttl_s: float, max_entry_bytes: int,
                 max_total_bytes: int, max_entries_per_namespace: int,
                 clock: Callable[[], float] = time.time) -> None:
        if ttl_s <= 0 or max_entry_bytes <= 0 or max_total_bytes <= 0 \
                or max_entries_per_namespace <= 0:
            raise ValueError("cache limits must be positive")
        self.db = db
        self.ttl_s = ttl_s
        self.max_entry_bytes = max_entry_bytes
        self.max_total_bytes = max_total_bytes
        self.max_entries_per_namespace = max_entries_per_namespace
        self._clock = clock
        # Counters are only touched on the Trio thread, after a worker thread returned.
        self._hits = 0
        self._misses = 0
        self._writes = 0
        self._refused = 0
        self._evicted = 0
        self._expired = 0
        self._hits_by_provider: Counter[str] = Counter()

    async def get(self, namespace: str, key: str) -> list[Event] | None:
        """The stored answer, or None. A hit becomes the most recently used entry; an
        expired (or undecodable) entry is deleted and is a miss."""
        now = self._clock()
        ttl = self.ttl_s

        def lookup(conn: sqlite3.Connection) -> tuple[list[Event], str] | str | None:
            row = conn.execute(
                "SELECT id, provider, created_at, events FROM cache_entries"
                " WHERE namespace = ? AND key = ?", (namespace, key)).fetchone()
            if row is None:
                return None
            entry_id, provider, created_at, blob = row
            if now - created_at >= ttl:
                conn.execute("DELETE FROM cache_entries WHERE id = ?", (entry_id,))
                return "expired"
            try:
                events = _DECODER.decode(blob)
            except msgspec.DecodeError:  # written by an incompatible OLP, or damaged
                log.warning("dropping an undecodable cache entry", extra={"provider": provider})
                conn.execute("DELETE FROM cache_entries WHERE id = ?", (entry_id,))
                return "undecodable"
            conn.execute("UPDATE cache_entries SET last_used_at = ? WHERE id = ?",
                         (now, entry_id))
            return events, provider

        found = await self.db.write_async(lookup)
        if not isinstance(found, tuple):
            self._misses += 1
            if found == "expired":
                self._expired += 1
            return None
        events, provider = found
        self._hits += 1
        self._hits_by_provider[provider] += 1
        return events

    async def put(self, namespace: str, key: str, provider: str,
                  events: Sequence[Event]) -> bool:
        """Store one complete answer; True if it was stored.

        Refused (False): an empty list, one that does not end in :class:`Stop` or contains an
        :class:`Error`, or one larger than ``max_entry_bytes`` (or the total bound).
        :class:`Retrying` events are dropped: they describe the attempt, not the answer.
        Writing may evict the namespace's or everyone's least recently used entries; expired
        entries are purged on the way.
        """
        if not _is_complete(events):
            self._refused += 1
            return False
        now = self._clock()
        kept = [e for e in events if not isinstance(e, Retrying)]
        limit = min(self.max_entry_bytes, self.max_total_bytes)
        per_ns = self.max_entries_per_namespace
        total = self.max_total_bytes
        ttl = self.ttl_s

        def write(conn: sqlite3.Connection) -> _PutOutcome:
            blob = _ENCODER.encode(kept)
            if len(blob) > limit:
                return _PutOutcome(stored=False, evicted=0, expired=0)
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

        outcome = await self.db.write_async(write)
        self._expired += outcome.expired
        self._evicted += outcome.evicted
        if outcome.stored:
            self._writes += 1
        else:
            self._refused += 1
            log.debug("cache entry too large", extra={"provider": provider})
        return outcome.stored

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

        return await self.db.write_async(delete)


def _is_complete(events: Sequence[Event]) -> bool:
    return (bool(events) and isinstance(events[-1], Stop)
            and not any(isinstance(e, (Error, Stop)) for e in events[:-1]))


def _evict_namespace(conn: sqlite3.Connection, namespace: str, keep: str, limit: int) -> int:
    (count,) = conn.execute("SELECT COUNT(*) FROM cache_entries WHERE namespace = ?",
                            (namespace,)).fetchone()
    if count <= limit:
        return 0
    return conn.execute(
        "DELETE FROM cache_entries WHERE id IN (SELECT id FROM cache_entries"
        " WHERE namespace = ? AND key != ? ORDER BY last_used_at, id LIMIT ?)",
        (namespace, keep, count - limit)).rowcount


def _evict_total(conn: sqlite3.Connection, namespace: str, keep: str, limit: int) -> int:
    (total,) = conn.execute("SELECT COALESCE(SUM(size), 0) FROM cache_entries").fetchone()
    if total <= limit:
        return 0
    victims: list[int] = []
    for entry_id, ns, key, size in conn.execute(
            "SELECT id, namespace, key, size FROM cache_entries ORDER BY last_used_at, id"):
        if total <= limit:
            break
        if (ns, key) == (namespace, keep):
            continue
        victims.append(entry_id)
        total -= size
    conn.executemany("DELETE FROM cache_entries WHERE id = ?", [(v,) for v in victims])
    return len(victims)
