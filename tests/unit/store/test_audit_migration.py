"""Schema 8 adds the audit trail's ``action`` and ``suppressed`` columns: a database of the
previous schema (7) migrates in place and keeps every row it held."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from olp.store import Database
from olp.store._db import MIGRATIONS, _statements

OLD_ROW = (1_700_000_000.5, "req_old", "3", "kid", "POST /v1/chat/completions", "smart",
           "anthropic", "claude-sonnet-4-6", "sub", 1, 200, "miss", 1, 42, 5, 7, "ok")


def schema_7(path: Path) -> None:
    """A database exactly as the OLP before schema 8 left it, with one audit row."""
    with sqlite3.connect(path) as c:
        for script in MIGRATIONS[:7]:
            for statement in _statements(script):
                c.execute(statement)
        c.execute("PRAGMA user_version = 7")
        c.execute(
            "INSERT INTO audit (at, request_id, key, key_name, endpoint, requested_model, "
            "provider, model, entry, hops, status, cache, stream, latency_ms, prompt_tokens, "
            "completion_tokens, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)", OLD_ROW)
        c.execute("INSERT INTO api_keys (name, tier, hash, prefix, created_at) "
                  "VALUES ('kid', 'guest', 'h', 'p', 1)")
    c.close()


def test_a_schema_7_database_gains_the_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    schema_7(path)
    with Database(path) as db:
        assert db.schema_version == len(MIGRATIONS) >= 8
        columns = [r[1] for r in db.read(lambda c: c.execute("PRAGMA table_info(audit)")
                                         .fetchall())]
        assert columns[-3:] == ["action", "suppressed", "account"]  # 8 and 12
        old = db.read(lambda c: c.execute(
            "SELECT at, request_id, key, key_name, endpoint, requested_model, provider, "
            "model, entry, hops, status, cache, stream, latency_ms, prompt_tokens, "
            "completion_tokens, outcome, action, suppressed FROM audit").fetchall())
        assert old == [(*OLD_ROW, None, None)]
        assert db.read(lambda c: c.execute("SELECT name FROM api_keys").fetchall()) == [
            ("kid",)]
    with Database(path) as db:  # opening again changes nothing
        assert db.schema_version == len(MIGRATIONS)
        assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM audit").fetchone()) == (1,)
