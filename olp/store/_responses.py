"""Responses answers kept for ``previous_response_id`` (issue #25, ADR 0023).

A Responses request may name the answer it continues instead of sending the conversation
again. So after each clean answer (unless the client said ``store: false``) the HTTP edge
keeps the conversation up to and including that answer here, under the answer's ``resp_…``
id and the API key that asked; a later request of that key naming the id gets it back and
the conversation continues as if the client had sent it whole (and so, where the CLI's
session is kept, resumes it). Another key's id is as good as unknown.

Unlike a CLI session, a kept response is not taken when used: a client may continue one
answer more than once (a fork). Bounded by count, bytes and idle age, the least recently used
going first; ``history`` is opaque bytes here (the edge encodes it). The sync methods block on
disk I/O; :class:`AsyncResponseStore` runs them in worker threads.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

import trio

from ._db import Database

MAX_RESPONSES: Final = 5000
MAX_TOTAL_BYTES: Final = 256 * 1024 * 1024
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
#: A kept response not continued for this long is forgotten (a week).
TTL_S: Final = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ResponseBounds:
    responses: int = MAX_RESPONSES
    total_bytes: int = MAX_TOTAL_BYTES
    response_bytes: int = MAX_RESPONSE_BYTES
    ttl_s: float = TTL_S


class ResponseStore:
    """The ``responses`` table (see the module docstring)."""

    def __init__(self, db: Database, bounds: ResponseBounds = ResponseBounds()) -> None:
        self._db = db
        self.bounds = bounds

    def put(self, response_id: str, *, key: str, history: bytes, now: float) -> bool:
        """Keep ``history`` under ``response_id``, drop responses idle past the TTL, then the
        least recently used until the bounds hold. ``False`` (nothing kept) when it alone is
        larger than a response may be."""
        if len(history) > self.bounds.response_bytes:
            return False

        def write(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO responses (id, key, history, bytes, created_at, "
                      "used_at) VALUES (?, ?, ?, ?, ?, ?)",
                      (response_id, key, history, len(history), now, now))
            c.execute("DELETE FROM responses WHERE used_at <= ?", (now - self.bounds.ttl_s,))
            _enforce(c, self.bounds)

        self._db.write(write)
        return True

    def get(self, response_id: str, *, key: str, now: float) -> bytes | None:
        """The history kept under ``response_id`` for this key (marked used), or ``None``:
        none, another key's, or idle past the TTL."""

        def get(c: sqlite3.Connection) -> bytes | None:
            row = c.execute("SELECT key, history, used_at FROM responses WHERE id = ?",
                            (response_id,)).fetchone()
            if row is None or row[0] != key:
                return None
            if row[2] <= now - self.bounds.ttl_s:
                c.execute("DELETE FROM responses WHERE id = ?", (response_id,))
                return None
            c.execute("UPDATE responses SET used_at = ? WHERE id = ?", (now, response_id))
            return bytes(row[1])

        return self._db.write(get)

    def clear(self, key: str | None = None) -> int:
        """Forget every kept response, or one key's; how many."""
        if key is None:
            return self._db.write(lambda c: c.execute("DELETE FROM responses").rowcount)
        return self._db.write(lambda c: c.execute(
            "DELETE FROM responses WHERE key = ?", (key,)).rowcount)

    def count(self) -> tuple[int, int]:
        """(responses, bytes) kept."""
        row = self._db.read(lambda c: c.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses").fetchone())
        return int(row[0]), int(row[1])


class AsyncResponseStore:
    """:class:`ResponseStore` for Trio code: each call in a worker thread, finished even if
    the caller is cancelled (SQLite's transaction is all or nothing either way)."""

    def __init__(self, store: ResponseStore) -> None:
        self.sync = store

    async def put(self, response_id: str, *, key: str, history: bytes, now: float) -> bool:
        return await trio.to_thread.run_sync(
            lambda: self.sync.put(response_id, key=key, history=history, now=now))

    async def get(self, response_id: str, *, key: str, now: float) -> bytes | None:
        return await trio.to_thread.run_sync(
            lambda: self.sync.get(response_id, key=key, now=now))

    async def clear(self, key: str | None = None) -> int:
        return await trio.to_thread.run_sync(self.sync.clear, key)


def _enforce(c: sqlite3.Connection, bounds: ResponseBounds) -> None:
    """Drop the least recently used responses until both bounds hold."""
    while True:
        count, total = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses").fetchone()
        if count <= bounds.responses and total <= bounds.total_bytes:
            return
        c.execute("DELETE FROM responses WHERE id = (SELECT id FROM responses "
                  "ORDER BY used_at LIMIT 1)")
