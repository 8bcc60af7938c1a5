"""Schema 9 adds the ledger's ``cached_tokens`` column: a database of the previous schema (8)
migrates in place, its rows keep their figures and count no cached tokens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from olp.store import Database
from olp.store._db import MIGRATIONS, _statements

OLD_ROW = ("2026-01-01", "3", "kid", "anthropic", "claude-sonnet-4-6", 2, 2, 0, 0, 0, 0, 50,
           14, 1.5)


def schema_8(path: Path) -> None:
    """A database exactly as the OLP before schema 9 left it, with one ledger row."""
    with sqlite3.connect(path) as c:
        for script in MIGRATIONS[:8]:
            for statement in _statements(script):
                c.execute(statement)
        c.execute("PRAGMA user_version = 8")
        c.execute(
            "INSERT INTO usage (day, key, key_name, provider, model, requests, served, refused, "
            "failed_hops, fallbacks, cache_hits, prompt_tokens, completion_tokens, "
            "spawn_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", OLD_ROW)
    c.close()


def test_a_schema_8_database_gains_cached_tokens_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    schema_8(path)
    with Database(path) as db:
        assert db.schema_version == len(MIGRATIONS) >= 9
        columns = [r[1] for r in db.read(lambda c: c.execute("PRAGMA table_info(usage)")
                                         .fetchall())]
        assert "cached_tokens" in columns
        old = db.read(lambda c: c.execute(
            "SELECT day, key, key_name, provider, model, requests, served, refused, "
            "failed_hops, fallbacks, cache_hits, prompt_tokens, completion_tokens, "
            "spawn_seconds, cached_tokens FROM usage").fetchall())
        assert old == [(*OLD_ROW, 0)]
    with Database(path) as db:  # opening again changes nothing
        assert db.schema_version == len(MIGRATIONS)
        assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM usage").fetchone()) == (1,)
