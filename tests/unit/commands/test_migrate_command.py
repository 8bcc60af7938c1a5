"""``olp migrate-from-ocp`` against OCP stores built to the documented schema
(``docs/adr/0017-migrating-from-ocp.md``): keys keep their values and quotas, revoked ones stay
behind, usage history comes over as characters, a second run adds nothing, a dry run stores
nothing, OCP's file is never changed, and a missing, locked or unknown store is a clear error
with nothing half-imported."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from olp.commands.main import main
from olp.store import Database, KeyStore

OCP_SCHEMA = """
CREATE TABLE api_keys (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT UNIQUE NOT NULL,
  name TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT (datetime('now')),
  revoked INTEGER NOT NULL DEFAULT 0, quota_daily INTEGER DEFAULT NULL,
  quota_weekly INTEGER DEFAULT NULL, quota_monthly INTEGER DEFAULT NULL);
CREATE TABLE usage_log (id INTEGER PRIMARY KEY AUTOINCREMENT, key_id INTEGER REFERENCES
  api_keys(id), key_name TEXT DEFAULT 'anonymous', model TEXT, prompt_chars INTEGER,
  response_chars INTEGER, elapsed_ms INTEGER, success INTEGER, created_at TEXT);
CREATE TABLE response_cache (id INTEGER PRIMARY KEY, hash TEXT UNIQUE, model TEXT,
  response TEXT, created_at TEXT, last_hit_at TEXT, hits INTEGER);
"""
MUM, KID, OLD = "ocp_" + "m" * 32, "ocp_" + "k" * 32, "ocp_" + "o" * 32


def ocp_store(path: Path, *, old_schema: bool = False, wal: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as c, c:  # closed here: OCP is not running
        if wal:
            c.execute("PRAGMA journal_mode = WAL")
        schema = OCP_SCHEMA
        if old_schema:  # before the quota migrations
            schema = schema.replace(", quota_daily INTEGER DEFAULT NULL,\n  quota_weekly "
                                    "INTEGER DEFAULT NULL, quota_monthly INTEGER DEFAULT NULL",
                                    "")
        c.executescript(schema)
        if old_schema:
            c.execute("INSERT INTO api_keys (key, name) VALUES (?, 'mum')", (MUM,))
        else:
            c.execute("INSERT INTO api_keys (key, name, created_at, quota_daily, quota_monthly) "
                      "VALUES (?, 'mum', '2026-03-04 05:06:07', NULL, NULL)", (MUM,))
            c.execute("INSERT INTO api_keys (key, name, quota_daily, quota_weekly) "
                      "VALUES (?, 'kid', 50, 200)", (KID,))
            c.execute("INSERT INTO api_keys (key, name, revoked) VALUES (?, 'old', 1)", (OLD,))
            for key_id, model, day in ((1, "sonnet", "2026-11-30"), (1, "sonnet", "2026-11-30"),
                                       (2, "opus", "2026-12-01"), (3, "sonnet", "2026-12-01")):
                c.execute("INSERT INTO usage_log (key_id, model, prompt_chars, response_chars, "
                          "elapsed_ms, success, created_at) VALUES (?, ?, 100, 40, 900, 1, ?)",
                          (key_id, model, f"{day} 10:00:00"))
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OLP_HOME", str(tmp_path / "olp"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("OLP_OWNER_TOKEN", raising=False)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["migrate-from-ocp", *args, "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_keys_come_over_unchanged_with_their_quotas(home: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    source = ocp_store(home / ".ocp" / "ocp.db")  # the default path
    before = digest(source)
    report = run(capsys, "--with-usage")
    assert [(k["origin"], k["name"], k["imported"]) for k in report["keys"]] == [  # type: ignore[index, union-attr]
        ("ocp:1", "mum", True), ("ocp:2", "kid", True)]
    assert report["revoked_skipped"] == 1
    assert (report["usage_rows"], report["usage_skipped"]) == (3, 1)
    with Database(home / "olp" / "olp.db") as db:
        keys = KeyStore(db)
        mum, kid = keys.authenticate(MUM), keys.authenticate(KID)
        assert keys.authenticate(OLD) is None  # revoked in OCP: not imported
        records = {r.name: r for r in keys.list()}
        usage = db.read(lambda c: c.execute(
            "SELECT key_name, provider, model, day, requests, served, prompt_chars, "
            "response_chars FROM usage ORDER BY day, key_name").fetchall())
    assert mum is not None and kid is not None and mum.tier == kid.tier == "guest"
    assert kid.policy.limits.as_dict() == {"per_day": 50, "per_week": 200}
    assert mum.policy.limits.as_dict() == {}
    assert records["mum"].display_prefix == "ocp_mmmmmmmm..."
    assert records["mum"].created_at == 1772600767.0  # 2026-03-04 05:06:07 UTC
    assert usage == [("mum", "ocp", "sonnet", "2026-11-30", 2, 2, 200, 80),
                     ("kid", "ocp", "opus", "2026-12-01", 1, 1, 100, 40)]
    assert digest(source) == before  # OCP's store is never written
    assert not (source.parent / "ocp.db-journal").exists()


def test_a_second_run_adds_nothing_and_a_dry_run_stores_nothing(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = ocp_store(home / "elsewhere.db")
    dry = run(capsys, "--ocp-db", str(source), "--dry-run", "--with-usage")
    assert dry["dry_run"] is True and len(dry["keys"]) == 2  # type: ignore[arg-type]
    with Database(home / "olp" / "olp.db") as db:
        assert KeyStore(db).list() == []
    run(capsys, "--ocp-db", str(source), "--with-usage")
    again = run(capsys, "--ocp-db", str(source), "--with-usage")
    assert [k["imported"] for k in again["keys"]] == [False, False]  # type: ignore[index, union-attr]
    assert again["usage_rows"] == 0
    with Database(home / "olp" / "olp.db") as db:
        assert len(KeyStore(db).list()) == 2
        (requests,) = db.read(lambda c: c.execute("SELECT SUM(requests) FROM usage").fetchone())
    assert requests == 3
    assert main(["migrate-from-ocp", "--ocp-db", str(source)]) == 0
    assert "Imported 0 key(s)" in capsys.readouterr().out


def test_an_old_store_without_quota_columns_and_a_taken_name(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "mum"]) == 0  # an OLP key already named mum
    capsys.readouterr()
    report = run(capsys, "--ocp-db", str(ocp_store(home / "old.db", old_schema=True)))
    assert [(k["name"], k["imported"]) for k in report["keys"]] == [("mum-2", True)]  # type: ignore[index, union-attr]


@pytest.mark.parametrize("case", ["missing", "not_ocp", "locked", "garbage"])
def test_an_unusable_store_is_a_clear_error_and_imports_nothing(
        home: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    path = home / f"{case}.db"
    holder = None
    if case == "not_ocp":
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE api_keys (id INTEGER PRIMARY KEY, secret TEXT)")
    elif case == "locked":
        ocp_store(path, wal=False)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # OCP in the middle of a write
    elif case == "garbage":
        path.write_bytes(b"this is not a database" * 100)
    try:
        assert main(["migrate-from-ocp", "--ocp-db", str(path), "--with-usage"]) == 1
    finally:
        if holder is not None:
            holder.close()
    err = capsys.readouterr().err
    expected = {"missing": "no OCP key store there", "not_ocp": "not an OCP key store",
                "locked": "locked", "garbage": "cannot read the OCP store"}[case]
    assert expected in err and (case == "missing" or "nothing was imported" in err
                                or "not an OCP key store" in err)
    with Database(home / "olp" / "olp.db") as db:
        assert KeyStore(db).list() == []


def test_it_says_what_it_is_doing(home: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("olp.commands.migrate.PROGRESS_EVERY", 2)  # a "large" store: 4 rows
    source = ocp_store(home / "big.db")
    assert main(["migrate-from-ocp", "--ocp-db", str(source), "--with-usage"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["olp: read 2 key(s) (1 revoked left out)", "olp: read 4 usage row(s)",
                   "olp: usage: 2 of 4 row(s)", "olp: usage: 4 of 4 row(s)"]
