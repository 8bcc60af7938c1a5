"""The ``olp`` command line: ``start``, ``keys``, ``doctor``, ``cooldowns reset``.

Commands run synchronously (blocking disk I/O is fine here, no event loop is running yet).
Exit codes: 0 ok, 1 the operation failed, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TextIO

from olp.config import ConfigError, Settings, load_settings
from olp.store import (
    HEALTH_STATE,
    Database,
    KeyNameError,
    KeyRecord,
    KeyStore,
    StateStore,
    StoreError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``olp`` command and return its exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        settings = load_settings(os.environ)
        code: int = args.handler(settings, args)
        return code
    except ConfigError as exc:
        print(f"olp: configuration error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"olp: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="olp", description="OLP, the Open LLM Proxy: one OpenAI-compatible endpoint in "
        "front of the vendor CLIs you are logged into.")
    parser.set_defaults(handler=None)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    start = sub.add_parser("start", help="run the proxy in the foreground")
    start.set_defaults(handler=_start)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(title="key commands", metavar="ACTION", required=True)
    create = keys_sub.add_parser("create", help="create a key (shown once)")
    create.add_argument("name", help="a label for the key, e.g. the person or tool using it")
    create.add_argument("--owner", action="store_true", help="owner tier (full access)")
    create.set_defaults(handler=_keys_create)
    listing = keys_sub.add_parser("list", help="list keys (never shows secrets)")
    listing.set_defaults(handler=_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id or name")
    revoke.add_argument("key", metavar="ID_OR_NAME")
    revoke.set_defaults(handler=_keys_revoke)

    doctor = sub.add_parser("doctor", help="check each provider's binary, version and "
                                           "credentials, with the fix for each problem")
    doctor.add_argument("--probe", action="store_true",
                        help="also send each usable provider one tiny request (uses quota)")
    doctor.set_defaults(handler=_doctor)

    cooldowns = sub.add_parser("cooldowns", help="provider cooldowns and circuits")
    cool_sub = cooldowns.add_subparsers(title="cooldown commands", metavar="ACTION",
                                        required=True)
    reset = cool_sub.add_parser("reset", help="forget every cooldown and open circuit")
    reset.add_argument("--url", help="the running proxy (default: from OLP_BIND/OLP_PORT)")
    reset.add_argument("--token", help="the owner key (default: OLP_OWNER_TOKEN)")
    reset.set_defaults(handler=_cooldowns_reset)
    return parser


def _start(settings: Settings, args: argparse.Namespace) -> int:
    # Imported lazily: the server stack (trio, quart, hypercorn) is not needed for `keys`.
    server = importlib.import_module("olp.server")
    result: int = server.run(settings)
    return result


def _keys(settings: Settings) -> tuple[Database, KeyStore]:
    db = Database(settings.db_path)
    return db, KeyStore(db)


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _keys(settings)
    with db:
        try:
            record, token = keys.create(args.name, "owner" if args.owner else "guest")
        except KeyNameError as exc:
            print(f"olp: {exc}", file=sys.stderr)
            return 1
    print(f"Created {record.tier} key {record.id} ({record.name}):")
    print(f"  {token}")
    print("Copy it now: it is stored only as a hash and will not be shown again.")
    return 0


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _keys(settings)
    with db:
        records = keys.list()
    if not records:
        print("No keys yet. Create one with: olp keys create NAME")
        return 0
    _table(records, sys.stdout)
    return 0


def _keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _keys(settings)
    with db:
        revoked = keys.revoke(args.key)
    if not revoked:
        print(f"olp: no active key with id or name {args.key!r}", file=sys.stderr)
        return 1
    print(f"Revoked key {args.key}.")
    return 0


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    doctor = importlib.import_module("olp.doctor")  # lazily: it needs the actor stack
    result: int = doctor.run(settings, probe=args.probe)
    return result


def _cooldowns_reset(settings: Settings, args: argparse.Namespace) -> int:
    """Ask the running proxy to reset (it holds the live state); if none is running, clear
    the state it saved, so the next start begins with every provider available."""
    url = args.url or f"http://{settings.bind}:{settings.port}"
    token = args.token or settings.owner_token
    if token:
        req = urllib.request.Request(f"{url.rstrip('/')}/v0/management/cooldowns/reset",
                                     method="POST", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                cleared = json.load(resp)["reset"]
            print(f"Reset {cleared} cooldown(s) and circuit(s) on the running proxy at {url}.")
            return 0
        except urllib.error.HTTPError as exc:
            print(f"olp: the proxy at {url} refused the reset: HTTP {exc.code}", file=sys.stderr)
            return 1
        except OSError:
            pass  # not running: clear the saved state below
    with Database(settings.db_path) as db:
        StateStore(db).delete(HEALTH_STATE)
    print(f"No proxy answered at {url}" + ("" if token else " (no owner token given)")
          + "; cleared the saved cooldowns and circuits.")
    return 0


def _table(records: Sequence[KeyRecord], out: TextIO) -> None:
    rows = [("ID", "NAME", "TIER", "PREFIX", "CREATED", "REVOKED")]
    rows += [(str(r.id), r.name, r.tier, r.display_prefix, _when(r.created_at),
              "-" if r.revoked_at is None else _when(r.revoked_at)) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
              file=out)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
