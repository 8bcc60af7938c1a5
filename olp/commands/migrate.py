"""``olp migrate-from-ocp``: bring an OCP household over with every client still working.

OCP, OLP's Node predecessor, keeps its keys in plaintext in ``~/.ocp/ocp.db``. Each
non-revoked one is imported under its name with the **same key value**, stored hashed like
OLP's own, its quotas becoming ``per_day``/``per_week``/``per_month`` limits; with
``--with-usage`` its ``usage_log`` becomes ledger rows (requests, served, characters — OCP
counted characters, not tokens — under the provider ``ocp``). OCP's store, and why each
choice, are in ``docs/adr/0017-migrating-from-ocp.md``.

The OCP store is opened read-only (``mode=ro``) and never written. Everything OLP stores
happens in one transaction, so a failure imports nothing, and a second run adds nothing
(keys already here are recognised by their hash; usage rows already imported by their id).
A store that is missing, locked, unreadable or of a schema this does not know is a
:class:`MigrationError` naming the problem. Every function blocks on disk I/O.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olp.config import Settings
from olp.store import (
    Database,
    ImportedKey,
    ImportResult,
    KeyNameError,
    KeyPolicy,
    Limits,
    import_keys,
)

from ._args import Commands, user_home
from ._tables import printable

#: Usage rows between two progress lines.
PROGRESS_EVERY = 10_000
#: ``state`` entry: the highest OCP ``usage_log.id`` already imported.
USAGE_MARK = "migrate.ocp.usage_log_id"
_QUOTAS = {"quota_daily": "per_day", "quota_weekly": "per_week", "quota_monthly": "per_month"}


def add_migrate(commands: Commands) -> None:
    ocp = commands.add_parser("migrate-from-ocp", help="import OCP's keys (unchanged, so every "
                                                      "client keeps working) and their quotas")
    ocp.add_argument("--ocp-db", metavar="PATH", help="OCP's store (default ~/.ocp/ocp.db)")
    ocp.add_argument("--dry-run", action="store_true", help="say what would be imported; "
                                                            "store nothing")
    ocp.add_argument("--with-usage", action="store_true",
                     help="also import OCP's usage history into the ledger")
    ocp.add_argument("--json", action="store_true", help="print the report as JSON")
    ocp.set_defaults(handler=_command)


def _command(settings: Settings, args: argparse.Namespace) -> int:
    """Import, then report; 1 with nothing imported on any error."""
    source = Path(args.ocp_db).expanduser() if args.ocp_db else default_ocp_db(user_home())
    try:
        with Database(settings.db_path) as db:
            report = migrate(source, db, dry_run=args.dry_run, with_usage=args.with_usage,
                             progress=lambda line: print(printable(f"olp: {line}"),
                                                         file=sys.stderr, flush=True))
    except (MigrationError, KeyNameError) as exc:
        print(printable(f"olp: {exc}"), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"source": str(source), **report.as_dict()}))
        return 0
    verb = "Would import" if args.dry_run else "Imported"
    new = [k for k in report.keys if k.imported]
    print(f"{verb} {len(new)} key(s) from {source}"
          + (f"; {len(report.keys) - len(new)} already here" if len(new) < len(report.keys)
             else "") + (f"; {report.revoked_skipped} revoked left out"
                         if report.revoked_skipped else "") + ".")
    for k in new:
        print(printable(f"  {k.origin} -> key {k.key_id} ({k.name})"))
    if args.with_usage:
        print(f"{verb} {report.usage_rows} usage row(s) into the ledger"
              + (f"; {report.usage_skipped} of keys not imported left out"
                 if report.usage_skipped else "") + ".")
    if not args.dry_run and new:
        print("Their clients keep working with the same keys; OCP's store was not changed.")
    return 0


class MigrationError(Exception):
    """The OCP store cannot be imported as it is (nothing was imported)."""


@dataclass(slots=True)
class Report:
    keys: list[ImportResult] = field(default_factory=list)
    revoked_skipped: int = 0
    usage_rows: int = 0  # usage_log rows brought into the ledger
    usage_skipped: int = 0  # rows of keys not imported (revoked, or no key)
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "revoked_skipped": self.revoked_skipped,
                "usage_rows": self.usage_rows, "usage_skipped": self.usage_skipped,
                "keys": [{"origin": k.origin, "name": k.name, "id": k.key_id,
                          "imported": k.imported} for k in self.keys]}


def default_ocp_db(home: Path) -> Path:
    return home / ".ocp" / "ocp.db"


def read_ocp_keys(conn: sqlite3.Connection) -> tuple[list[ImportedKey], int]:
    """OCP's non-revoked keys (and how many revoked ones were left out)."""
    columns = _columns(conn, "api_keys")
    missing = {"id", "key", "name", "revoked"} - columns
    if missing:
        raise MigrationError(f"api_keys has no {', '.join(sorted(missing))} column: not an "
                             "OCP key store this knows")
    quotas = [c for c in _QUOTAS if c in columns]  # older stores lack them: no limit
    created = "created_at" if "created_at" in columns else "NULL"
    rows = conn.execute(f"SELECT id, key, name, revoked, {created}"
                        f"{''.join(', ' + q for q in quotas)} FROM api_keys ORDER BY id"
                        ).fetchall()
    keys: list[ImportedKey] = []
    revoked = 0
    for row in rows:
        key_id, token, name, is_revoked, created_at, *quota_values = row
        if is_revoked:
            revoked += 1
            continue
        if not isinstance(token, str) or not token or not isinstance(name, str):
            raise MigrationError(f"api_keys row {key_id}: no key or name")
        limits = {_QUOTAS[q]: int(v) for q, v in zip(quotas, quota_values, strict=True)
                  if v is not None and int(v) > 0}
        keys.append(ImportedKey(name=name.strip() or f"ocp-{key_id}", token=token,
                                created_at=_ocp_time(created_at), origin=f"ocp:{key_id}",
                                policy=KeyPolicy(limits=Limits.from_dict(dict(limits)))))
    return keys, revoked


def migrate(ocp_db: Path, db: Database, *, dry_run: bool = False, with_usage: bool = False,
            progress: Callable[[str], None] | None = None) -> Report:
    """Import ``ocp_db`` into OLP's ``db`` (see the module docstring); ``progress`` is told
    what is being done (every :data:`PROGRESS_EVERY` usage rows on a large store)."""
    say = progress or (lambda _: None)
    conn = _open_read_only(ocp_db)
    try:
        try:
            keys, revoked = read_ocp_keys(conn)
            say(f"read {len(keys)} key(s) ({revoked} revoked left out)")
            usage = _read_usage(conn) if with_usage else []
            if with_usage:
                say(f"read {len(usage)} usage row(s)")
        except sqlite3.Error as exc:
            raise _error(ocp_db, exc) from None
    finally:
        conn.close()
    report = Report(revoked_skipped=revoked, dry_run=dry_run)

    def run(c: sqlite3.Connection) -> Report:
        report.keys = import_keys(c, keys)
        if usage:
            by_origin = {k.origin: k for k in report.keys}
            report.usage_rows, report.usage_skipped = _import_usage(c, usage, by_origin, say)
        if dry_run:
            raise _Rollback
        return report

    try:
        return db.write(run)  # one transaction: all of it, or nothing
    except _Rollback:
        return report


def _open_read_only(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise MigrationError(f"{path}: no OCP key store there (give --ocp-db PATH)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2.0)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise _error(path, exc) from None
    return conn


def _error(path: Path, exc: sqlite3.Error) -> MigrationError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return MigrationError(f"{path}: the OCP store is locked (is OCP writing to it? stop "
                              "it and run this again); nothing was imported")
    if "no such table" in text:
        return MigrationError(f"{path}: {text}: not an OCP key store this knows; nothing "
                              "was imported")
    return MigrationError(f"{path}: cannot read the OCP store: {text}; nothing was imported")


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    if not rows:
        raise MigrationError(f"no {table} table: not an OCP key store this knows")
    return {str(r[1]) for r in rows}


def _ocp_time(value: object) -> float:
    """OCP's ``datetime('now')`` text (UTC) as Unix seconds; now if absent or odd."""
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            pass
    return dt.datetime.now(dt.UTC).timestamp()


@dataclass(frozen=True, slots=True)
class _UsageRow:
    id: int
    key_id: int | None
    model: str
    prompt_chars: int
    response_chars: int
    success: bool
    day: str


def _read_usage(conn: sqlite3.Connection) -> list[_UsageRow]:
    try:
        columns = _columns(conn, "usage_log")
    except MigrationError:
        return []  # a store without history
    need = {"id", "key_id", "created_at"}
    if need - columns:
        raise MigrationError("usage_log lacks " + ", ".join(sorted(need - columns)))

    def col(name: str, default: str) -> str:
        return name if name in columns else default

    empty = "''"
    rows = conn.execute(
        f"SELECT id, key_id, {col('model', empty)}, {col('prompt_chars', '0')}, "
        f"{col('response_chars', '0')}, {col('success', '1')}, created_at FROM usage_log "
        "ORDER BY id").fetchall()
    return [_UsageRow(int(r[0]), None if r[1] is None else int(r[1]), str(r[2] or "-"),
                      int(r[3] or 0), int(r[4] or 0), bool(r[5]),
                      dt.datetime.fromtimestamp(_ocp_time(r[6]), dt.UTC).date().isoformat())
            for r in rows]


def _import_usage(c: sqlite3.Connection, rows: list[_UsageRow],
                  keys: dict[str, ImportResult], say: Callable[[str], None]
                  ) -> tuple[int, int]:
    """Add the rows after the last one imported to the ledger (in the caller's transaction);
    returns (imported, skipped)."""
    mark_row = c.execute("SELECT value FROM state WHERE name = ?", (USAGE_MARK,)).fetchone()
    mark = int(mark_row[0]) if mark_row is not None else 0
    imported = skipped = 0
    last = mark
    for n, row in enumerate(rows, start=1):
        if n % PROGRESS_EVERY == 0:
            say(f"usage: {n} of {len(rows)} row(s)")
        if row.id <= mark:
            continue
        last = max(last, row.id)
        key = keys.get(f"ocp:{row.key_id}")
        if key is None:
            skipped += 1
            continue
        c.execute(
            "INSERT INTO usage (day, key, key_name, provider, account, model, requests, "
            "served, prompt_chars, response_chars) "
            "VALUES (?, ?, ?, 'ocp', 'default', ?, 1, ?, ?, ?) "
            "ON CONFLICT (day, key, provider, account, model) DO UPDATE SET "
            "requests = requests + 1, served = served + excluded.served, "
            "prompt_chars = prompt_chars + excluded.prompt_chars, "
            "response_chars = response_chars + excluded.response_chars",
            (row.day, str(key.key_id), key.name, row.model, int(row.success),
             row.prompt_chars, row.response_chars))
        imported += 1
    c.execute("INSERT INTO state (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE "
              "SET value = excluded.value", (USAGE_MARK, str(last)))
    return imported, skipped


class _Rollback(Exception):
    """Raised inside the transaction of a dry run: everything is rolled back."""
