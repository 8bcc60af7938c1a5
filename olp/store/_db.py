"""The embedded SQLite database under ``OLP_HOME``: one connection, one lock, forward migrations.

Every call blocks on disk I/O. Synchronous callers (the CLI) use :meth:`Database.read` and
:meth:`Database.write`; Trio code uses :meth:`Database.read_async` / :meth:`Database.write_async`,
which run the same function in a worker thread (``trio.to_thread.run_sync``) so the event loop
never waits on the disk. A :class:`threading.Lock` serialises access to the one connection.
SQLite's page cache is capped at :data:`PAGE_CACHE_KIB` (docs/adr/0013-memory-over-months.md).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import trio

_T = TypeVar("_T")

#: SQLite's page cache for the one connection, in KiB (its default is 2,000). Lookups are by
#: index and the OS caches the file anyway; a smaller cap lets the proxy's memory reach its
#: steady size sooner (docs/adr/0013-memory-over-months.md).
PAGE_CACHE_KIB: Final = 512

# Schema history: entry i upgrades user_version i to i + 1. Append only; never edit a shipped
# entry.
MIGRATIONS: Final[tuple[str, ...]] = (
    """
    CREATE TABLE api_keys (
        id          INTEGER PRIMARY KEY,
        name        TEXT NOT NULL,
        tier        TEXT NOT NULL CHECK (tier IN ('owner', 'guest')),
        hash        TEXT NOT NULL UNIQUE,   -- SHA-256 hex of the whole token; never the token
        prefix      TEXT NOT NULL,          -- a few characters after 'olp_', for display
        source      TEXT NOT NULL DEFAULT 'cli' CHECK (source IN ('cli', 'bootstrap', 'env')),
        created_at  REAL NOT NULL,
        revoked_at  REAL,
        revoked_reason TEXT CHECK (revoked_reason IN ('revoked', 'replaced'))
    );
    CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL;
    """,
    # 2: the response cache (olp.cache.CacheStore). One row per complete answer; `events` (the
    # msgspec JSON of its IR event list) is the last column so scans of the small columns
    # never touch its overflow pages.
    """
    CREATE TABLE cache_entries (
        id           INTEGER PRIMARY KEY,
        namespace    TEXT NOT NULL,          -- the API key the answer belongs to
        key          TEXT NOT NULL,          -- olp.cache.cache_key(): hex SHA-256
        provider     TEXT NOT NULL,
        size         INTEGER NOT NULL,       -- len(events) in bytes
        created_at   REAL NOT NULL,          -- wall clock; TTL counts from here
        last_used_at REAL NOT NULL,          -- wall clock; LRU eviction order
        events       BLOB NOT NULL,
        UNIQUE (namespace, key)
    );
    CREATE INDEX cache_entries_lru ON cache_entries (last_used_at);
    CREATE INDEX cache_entries_namespace_lru ON cache_entries (namespace, last_used_at);
    CREATE INDEX cache_entries_created ON cache_entries (created_at);
    """,
    # 3: named JSON state that survives restarts (olp.store.StateStore): the engine's
    # cooldowns and circuits.
    """
    CREATE TABLE state (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 4: a key's policy (olp.store.KeyPolicy): its provider allow-list (comma-separated;
    # NULL = every provider) and its limits (JSON {"per_minute": 5, ...}; NULL = none).
    """
    ALTER TABLE api_keys ADD COLUMN providers TEXT;
    ALTER TABLE api_keys ADD COLUMN limits TEXT;
    """,
    # 5: the usage ledger (olp.accounting): one row per key x provider x model x UTC day,
    # added to in batches. `key` is the key's id as text (its cache namespace) or
    # 'anonymous'; provider and model are '-' for a request no hop took.
    """
    CREATE TABLE usage (
        day               TEXT NOT NULL,    -- UTC, YYYY-MM-DD
        key               TEXT NOT NULL,
        key_name          TEXT NOT NULL,
        provider          TEXT NOT NULL,
        model             TEXT NOT NULL,
        requests          INTEGER NOT NULL DEFAULT 0,
        served            INTEGER NOT NULL DEFAULT 0,
        refused           INTEGER NOT NULL DEFAULT 0,
        failed_hops       INTEGER NOT NULL DEFAULT 0,
        fallbacks         INTEGER NOT NULL DEFAULT 0,
        cache_hits        INTEGER NOT NULL DEFAULT 0,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        spawn_seconds     REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (day, key, provider, model)
    ) WITHOUT ROWID;
    CREATE INDEX usage_key_day ON usage (key, day);
    """,
    # 6: the audit trail (olp.accounting): one row per request, refused ones included.
    # Never prompt or answer text, never a secret.
    """
    CREATE TABLE audit (
        id                INTEGER PRIMARY KEY,
        at                REAL NOT NULL,    -- wall clock, when the request arrived
        request_id        TEXT NOT NULL,
        key               TEXT,             -- NULL: no valid key was sent
        key_name          TEXT,
        endpoint          TEXT NOT NULL,    -- e.g. 'POST /v1/chat/completions'
        requested_model   TEXT,
        provider          TEXT,
        model             TEXT,
        entry             TEXT,             -- the chain entry's name
        hops              INTEGER NOT NULL DEFAULT 0,
        status            INTEGER NOT NULL,
        cache             TEXT,
        stream            INTEGER NOT NULL DEFAULT 0,
        latency_ms        INTEGER NOT NULL,
        prompt_tokens     INTEGER,
        completion_tokens INTEGER,
        outcome           TEXT NOT NULL
    );
    CREATE INDEX audit_at ON audit (at);
    CREATE INDEX audit_key_name_at ON audit (key_name, at);
    """,
    # 7: keys brought over from another store (olp migrate-from-ocp): where each came from;
    # and the characters of imported usage history (OCP counted characters, not tokens).
    """
    ALTER TABLE api_keys ADD COLUMN imported_from TEXT;
    ALTER TABLE usage ADD COLUMN prompt_chars INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE usage ADD COLUMN response_chars INTEGER NOT NULL DEFAULT 0;
    """,
    # 8: the audit trail bounded (docs/adr/0021-bounded-audit.md): what a management request
    # did and to what ('revoke_key bob'; never a secret), and on a summary row (outcome
    # 'suppressed') how many similar 401/404 rows of one source it stands for. NULL otherwise
    # and on every row written before.
    """
    ALTER TABLE audit ADD COLUMN action TEXT;
    ALTER TABLE audit ADD COLUMN suppressed INTEGER;
    """,
    # 9: the ledger's cached input tokens: of `prompt_tokens` (which counts them), those read
    # from the vendor's prompt cache. 0 on every row written before.
    """
    ALTER TABLE usage ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: CLI sessions kept between turns (olp/store/_sessions.py, ADR 0023): the files a
    # CLI wrote for a conversation, by the digest a request continuing it will hold.
    """
    CREATE TABLE cli_sessions (
        digest     TEXT PRIMARY KEY,  -- olp/ir/_conversation.py: the answer's continuation
        key        TEXT NOT NULL,     -- the API key's id: nobody else's request resumes it
        provider   TEXT NOT NULL,
        session_id TEXT NOT NULL,     -- the CLI's own id (claude's session, codex's thread)
        files      BLOB NOT NULL,     -- msgspec: {path under the CLI's home: bytes}
        bytes      INTEGER NOT NULL,
        created_at REAL NOT NULL,     -- wall clock
        used_at    REAL NOT NULL
    );
    CREATE INDEX cli_sessions_used ON cli_sessions (used_at);
    CREATE INDEX cli_sessions_key ON cli_sessions (key);
    """,
    # 11: Responses answers kept for `previous_response_id` (olp/store/_responses.py): the
    # conversation up to and including the answer, per key.
    """
    CREATE TABLE responses (
        id         TEXT PRIMARY KEY,  -- the answer's `resp_…` id
        key        TEXT NOT NULL,     -- the API key's id: nobody else's request continues it
        history    BLOB NOT NULL,     -- msgspec: the conversation's messages, answer last
        bytes      INTEGER NOT NULL,
        created_at REAL NOT NULL,     -- wall clock
        used_at    REAL NOT NULL
    );
    CREATE INDEX responses_used ON responses (used_at);
    CREATE INDEX responses_key ON responses (key);
    """,
    # 12: accounts (issue #30, olp/store/_bindings.py): a key's binding ('claude:alice,…';
    # NULL: none); the account that answered, in the audit trail (NULL before) and in the
    # usage ledger, one row per key x provider x account x model x day ('default' before;
    # '-' for a request no hop took). SQLite cannot widen a primary key: the ledger is
    # copied into its new shape.
    """
    ALTER TABLE api_keys ADD COLUMN accounts TEXT;
    ALTER TABLE audit ADD COLUMN account TEXT;
    CREATE TABLE usage_by_account (
        day               TEXT NOT NULL,
        key               TEXT NOT NULL,
        key_name          TEXT NOT NULL,
        provider          TEXT NOT NULL,
        account           TEXT NOT NULL DEFAULT 'default',
        model             TEXT NOT NULL,
        requests          INTEGER NOT NULL DEFAULT 0,
        served            INTEGER NOT NULL DEFAULT 0,
        refused           INTEGER NOT NULL DEFAULT 0,
        failed_hops       INTEGER NOT NULL DEFAULT 0,
        fallbacks         INTEGER NOT NULL DEFAULT 0,
        cache_hits        INTEGER NOT NULL DEFAULT 0,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        spawn_seconds     REAL NOT NULL DEFAULT 0,
        prompt_chars      INTEGER NOT NULL DEFAULT 0,
        response_chars    INTEGER NOT NULL DEFAULT 0,
        cached_tokens     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (day, key, provider, account, model)
    ) WITHOUT ROWID;
    INSERT INTO usage_by_account
        SELECT day, key, key_name, provider,
               CASE WHEN provider = '-' THEN '-' ELSE 'default' END, model, requests, served,
               refused, failed_hops, fallbacks, cache_hits, prompt_tokens, completion_tokens,
               spawn_seconds, prompt_chars, response_chars, cached_tokens
        FROM usage;
    DROP TABLE usage;
    ALTER TABLE usage_by_account RENAME TO usage;
    CREATE INDEX usage_key_day ON usage (key, day);
    """,
)


class StoreError(Exception):
    """The database cannot be used as it is (e.g. written by a newer OLP)."""


class Database:
    """One SQLite file (WAL, ``synchronous=NORMAL``) shared by every task and thread.

    Opening creates the file (mode 0600; an existing one of this user's is made 0600) and
    applies pending migrations; that blocks, so do it at start-up or via :meth:`open_async`.
    """

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = 5000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # SQLite gives -wal/-shm the same mode as the main file
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        for suffix in ("", "-wal", "-shm"):  # one made looser (a copy, an old OLP): 0600
            _owner_only(Path(f"{self.path}{suffix}"))
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    async def open_async(cls, path: Path | str) -> Database:
        """Open in a worker thread."""
        return await trio.to_thread.run_sync(cls, path)

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                (version,) = self._conn.execute("PRAGMA user_version").fetchone()
                if version > len(MIGRATIONS):
                    raise StoreError(f"{self.path}: schema version {version} is newer than this "
                                     f"OLP knows ({len(MIGRATIONS)}); upgrade OLP")
                for target, script in enumerate(MIGRATIONS[version:], start=version + 1):
                    for statement in _statements(script):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {target}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @property
    def schema_version(self) -> int:
        return int(self.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]))

    def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn(connection)`` under the lock (blocks; autocommit, for single reads)."""
        with self._lock:
            return fn(self._conn)

    def write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn(connection)`` in one ``BEGIN IMMEDIATE`` transaction (blocks); rolls back
        if ``fn`` raises."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    async def read_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """:meth:`read` in a worker thread; waits for the thread even if cancelled."""
        return await trio.to_thread.run_sync(self.read, fn)

    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """:meth:`write` in a worker thread; waits for the thread even if cancelled."""
        return await trio.to_thread.run_sync(self.write, fn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _owner_only(path: Path) -> None:
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(0o600)
    except FileNotFoundError:
        pass


def _statements(script: str) -> list[str]:
    """Split a migration into statements (``executescript`` would commit our transaction)."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement in migration: {pending.strip()[:60]!r}")
    return out
