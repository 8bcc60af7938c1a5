"""Schema 12 puts the account in the ledger's primary key and in the audit trail (issue #30):
a database of the previous schema (11) migrates in place, every ledger row kept with its
figures on account ``default`` (``-`` for a request no hop took), every audit row with no
account; afterwards a second account of the same provider, model and day is a row of its
own, and the default account's additions land on the migrated row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from olp.accounting import AuditRow, Recorder, UsageDelta
from olp.store import Database
from olp.store._db import MIGRATIONS, _statements

DAY = "2026-01-01"
AT = 1_767_268_800.0  # noon UTC on DAY
COLUMNS = ("day, key, key_name, provider, model, requests, served, refused, failed_hops, "
           "fallbacks, cache_hits, prompt_tokens, completion_tokens, spawn_seconds, "
           "cached_tokens")
OLD_ROWS = [
    (DAY, "3", "kid", "anthropic", "claude-sonnet-4-6", 2, 2, 0, 0, 0, 0, 50, 14, 1.5, 20),
    (DAY, "3", "kid", "codex", "gpt-5", 1, 0, 0, 1, 0, 0, 0, 0, 0.5, 0),
    (DAY, "3", "kid", "-", "-", 4, 0, 4, 0, 0, 0, 0, 0, 0.0, 0),
    ("2025-12-31", "4", "bob", "anthropic", "claude-sonnet-4-6", 7, 7, 0, 0, 1, 2, 70, 7,
     3.0, 35),
]
IN_ORDER = sorted(OLD_ROWS, key=lambda r: (r[0], r[1], r[3]))  # day, key, provider


def schema_11(path: Path) -> None:
    """A database exactly as the OLP before schema 12 left it: ledger rows and an audit
    row."""
    with sqlite3.connect(path) as c:
        for script in MIGRATIONS[:11]:
            for statement in _statements(script):
                c.execute(statement)
        c.execute("PRAGMA user_version = 11")
        c.executemany(f"INSERT INTO usage ({COLUMNS}) VALUES ({', '.join('?' * 15)})",
                      OLD_ROWS)
        c.execute("INSERT INTO audit (at, request_id, key, key_name, endpoint, provider, "
                  "model, hops, status, stream, latency_ms, outcome) VALUES "
                  "(?, 'req_old', '3', 'kid', 'POST /v1/chat/completions', 'anthropic', 'm', "
                  "1, 200, 0, 5, 'ok')", (AT,))
    c.close()


def test_a_schema_11_database_keeps_every_ledger_row_on_the_default_account(
        tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    schema_11(path)
    with Database(path) as db:
        assert db.schema_version == len(MIGRATIONS) >= 12
        kept = db.read(lambda c: c.execute(
            f"SELECT {COLUMNS}, account FROM usage ORDER BY day, key, provider").fetchall())
        expected = [(*r, "-" if r[3] == "-" else "default") for r in IN_ORDER]
        assert kept == expected
        audit = db.read(lambda c: c.execute(
            "SELECT request_id, provider, account FROM audit").fetchall())
        assert audit == [("req_old", "anthropic", None)]
    with Database(path) as db:  # opening again changes nothing
        assert db.schema_version == len(MIGRATIONS)
        assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM usage").fetchone()) == (4,)


def test_after_the_migration_a_second_account_is_a_row_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    schema_11(path)
    with Database(path) as db:
        recorder = Recorder(db)
        row = AuditRow(at=AT, request_id="req_new", key="3", key_name="kid",
                       endpoint="POST /v1/chat/completions", requested_model="smart",
                       provider="anthropic", model="claude-sonnet-4-6", entry="sub", hops=1,
                       status=200, cache="miss", stream=False, latency_ms=5, prompt_tokens=1,
                       completion_tokens=1, outcome="ok", account="bob")
        recorder.record(row, [
            UsageDelta("anthropic", "claude-sonnet-4-6", requests=1, prompt_tokens=10),
            UsageDelta("anthropic", "claude-sonnet-4-6", account="bob", requests=1,
                       prompt_tokens=5)])
        trio.run(recorder.flush)
        rows = db.read(lambda c: c.execute(
            "SELECT account, requests, prompt_tokens FROM usage WHERE day = ? AND "
            "provider = 'anthropic' ORDER BY account", (DAY,)).fetchall())
        assert rows == [("bob", 1, 5), ("default", 3, 60)]
        audit = db.read(lambda c: c.execute(
            "SELECT request_id, account FROM audit ORDER BY id").fetchall())
        assert audit == [("req_old", None), ("req_new", "bob")]
