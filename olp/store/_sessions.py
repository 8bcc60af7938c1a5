"""CLI sessions kept between the turns of a conversation (issue #25, ADR 0023).

A CLI that can resume its own session (claude, codex) writes it as files in its private home,
which is deleted after every job. After a turn, OLP keeps those files here, under the digest
a request continuing the conversation will hold (:func:`olp.ir._conversation.continuation`);
the next turn takes them back into its own home and resumes.

:meth:`SessionStore.take` removes what it returns, in one transaction: a session is in use
by one turn at a time (a second concurrent turn of the conversation finds nothing and starts
afresh), and a turn that fails, is cancelled or dies with the proxy leaves nothing behind to
resume from. Only a turn that ended cleanly puts its new session back (:meth:`put`, which
also drops the provider's sessions idle past their TTL). So after ``kill -9`` nothing
half-written is ever resumed: SQLite's transactions see to the rest. Bounded by count,
bytes and idle age, the least recently used going first. The sync methods block on disk
I/O; :class:`AsyncSessionStore` runs them in worker threads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec
import trio

from ._db import Database

MAX_SESSIONS: Final = 2000
MAX_TOTAL_BYTES: Final = 512 * 1024 * 1024
MAX_SESSION_BYTES: Final = 32 * 1024 * 1024
_FILES: Final = msgspec.msgpack.Encoder()
_FILES_DECODER: Final = msgspec.msgpack.Decoder(dict[str, bytes])


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A conversation's CLI session: ``files`` by their path under the CLI's home."""

    digest: str
    key: str
    provider: str
    session_id: str
    files: Mapping[str, bytes] = field(repr=False)
    created_at: float = 0.0
    used_at: float = 0.0

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())


@dataclass(frozen=True, slots=True)
class Bounds:
    sessions: int = MAX_SESSIONS
    total_bytes: int = MAX_TOTAL_BYTES
    session_bytes: int = MAX_SESSION_BYTES


class SessionStore:
    """The ``cli_sessions`` table (see the module docstring)."""

    def __init__(self, db: Database, bounds: Bounds = Bounds()) -> None:
        self._db = db
        self.bounds = bounds

    def put(self, session: StoredSession, *, expire_before: float | None = None) -> bool:
        """Keep ``session`` (replacing one under the same digest), drop its provider's
        sessions last used at or before ``expire_before``, then the least recently used
        until the bounds hold. ``False`` (nothing kept) when it alone is larger than a
        session may be."""
        size = session.size
        if size > self.bounds.session_bytes:
            return False
        blob = _FILES.encode(dict(session.files))

        def write(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO cli_sessions (digest, key, provider, session_id, "
                      "files, bytes, created_at, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (session.digest, session.key, session.provider, session.session_id,
                       blob, size, session.created_at, session.used_at))
            if expire_before is not None:
                c.execute("DELETE FROM cli_sessions WHERE provider = ? AND used_at <= ?",
                          (session.provider, expire_before))
            _enforce(c, self.bounds)

        self._db.write(write)
        return True

    def holds(self, digest: str, *, key: str, provider: str, newer_than: float) -> bool:
        """Whether a live session of this key and provider is kept under ``digest`` (read
        only: which account a conversation belongs to)."""
        row = self._db.read(lambda c: c.execute(
            "SELECT key, provider, used_at FROM cli_sessions WHERE digest = ?",
            (digest,)).fetchone())
        return row is not None and (row[0], row[1]) == (key, provider) and row[2] > newer_than

    def take(self, digest: str, *, key: str, provider: str,
             newer_than: float) -> StoredSession | None:
        """The session under ``digest`` of this key and provider, removed from the store; or
        ``None`` (none, another key's or provider's, or last used at or before
        ``newer_than``: then it is removed too)."""

        def take(c: sqlite3.Connection) -> StoredSession | None:
            row = c.execute("SELECT key, provider, session_id, files, created_at, used_at "
                            "FROM cli_sessions WHERE digest = ?", (digest,)).fetchone()
            if row is None or row[0] != key or row[1] != provider:
                return None
            c.execute("DELETE FROM cli_sessions WHERE digest = ?", (digest,))
            if row[5] <= newer_than:
                return None
            try:
                files = _FILES_DECODER.decode(row[3])
            except msgspec.DecodeError:
                return None
            return StoredSession(digest, row[0], row[1], row[2], files, row[4], row[5])

        return self._db.write(take)

    def clear(self, key: str | None = None) -> int:
        """Forget every session, or one key's; how many."""
        if key is None:
            return self._db.write(lambda c: c.execute("DELETE FROM cli_sessions").rowcount)
        return self._db.write(lambda c: c.execute(
            "DELETE FROM cli_sessions WHERE key = ?", (key,)).rowcount)

    def prune(self, *, older_than: float) -> int:
        """Forget sessions last used at or before ``older_than``; how many."""
        return self._db.write(lambda c: c.execute(
            "DELETE FROM cli_sessions WHERE used_at <= ?", (older_than,)).rowcount)

    def count(self) -> tuple[int, int]:
        """(sessions, bytes) kept."""
        row = self._db.read(lambda c: c.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM cli_sessions").fetchone())
        return int(row[0]), int(row[1])


class AsyncSessionStore:
    """:class:`SessionStore` for Trio code: each call in a worker thread, finished even if
    the caller is cancelled (SQLite's transaction is all or nothing either way)."""

    def __init__(self, store: SessionStore) -> None:
        self.sync = store

    async def put(self, session: StoredSession, *, expire_before: float | None = None) -> bool:
        return await trio.to_thread.run_sync(
            lambda: self.sync.put(session, expire_before=expire_before))

    async def holds(self, digest: str, *, key: str, provider: str,
                    newer_than: float) -> bool:
        return await trio.to_thread.run_sync(
            lambda: self.sync.holds(digest, key=key, provider=provider, newer_than=newer_than))

    async def take(self, digest: str, *, key: str, provider: str,
                   newer_than: float) -> StoredSession | None:
        return await trio.to_thread.run_sync(
            lambda: self.sync.take(digest, key=key, provider=provider, newer_than=newer_than))

    async def clear(self, key: str | None = None) -> int:
        return await trio.to_thread.run_sync(self.sync.clear, key)

    async def prune(self, *, older_than: float) -> int:
        return await trio.to_thread.run_sync(lambda: self.sync.prune(older_than=older_than))


def _enforce(c: sqlite3.Connection, bounds: Bounds) -> None:
    """Drop the least recently used sessions until both bounds hold."""
    while True:
        count, total = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM cli_sessions").fetchone()
        if count <= bounds.sessions and total <= bounds.total_bytes:
            return
        c.execute("DELETE FROM cli_sessions WHERE digest = (SELECT digest FROM cli_sessions "
                  "ORDER BY used_at LIMIT 1)")
