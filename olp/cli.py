"""The ``olp`` command line: ``start``, ``keys``, ``doctor``, ``cooldowns``, ``cache``.

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
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, TextIO

import trio

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
    except (StoreError, _Refused) as exc:
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
    rotate = keys_sub.add_parser("rotate", help="give a key a new secret (shown once); the "
                                                "old one stops working")
    rotate.add_argument("key", metavar="ID_OR_NAME")
    rotate.set_defaults(handler=_keys_rotate)
    for command in (create, listing, rotate):
        command.add_argument("--json", action="store_true",
                             help="print JSON (one object; for list, an array)")
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
    reset.set_defaults(handler=_cooldowns_reset)

    cache = sub.add_parser("cache", help="the response cache")
    cache_sub = cache.add_subparsers(title="cache commands", metavar="ACTION", required=True)
    stats = cache_sub.add_parser("stats", help="hits, misses, entries, size")
    stats.set_defaults(handler=_cache_stats)
    clear = cache_sub.add_parser("clear", help="delete cached answers")
    clear.add_argument("--key", help="only this API key's answers (its id)")
    clear.set_defaults(handler=_cache_clear)
    for command in (reset, stats, clear):
        command.add_argument("--url", help="the running proxy (default: OLP_BIND/OLP_PORT)")
        command.add_argument("--token", help="the owner key (default: OLP_OWNER_TOKEN)")
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
    _show_secret(record, token, "Created", json_out=args.json)
    return 0


def _keys_rotate(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _keys(settings)
    with db:
        try:
            rotated = keys.rotate(args.key)
        except StoreError as exc:
            print(f"olp: {exc}", file=sys.stderr)
            return 1
    if rotated is None:
        print(f"olp: no active key with id or name {args.key!r}", file=sys.stderr)
        return 1
    _show_secret(*rotated, "Rotated", json_out=args.json)
    return 0


def _show_secret(record: KeyRecord, token: str, done: str, *, json_out: bool) -> None:
    """The only time a secret is shown: as one JSON object, or for a person."""
    if json_out:
        print(json.dumps({**_key_json(record), "key": token}))
        return
    print(f"{done} {record.tier} key {record.id} ({record.name}):")
    print(f"  {token}")
    print("Copy it now: it is stored only as a hash and will not be shown again.")


def _key_json(record: KeyRecord) -> dict[str, object]:
    return {"id": record.id, "name": record.name, "tier": record.tier,
            "prefix": record.display_prefix, "source": record.source,
            "created_at": record.created_at, "revoked_at": record.revoked_at}


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _keys(settings)
    with db:
        records = keys.list()
    if args.json:
        print(json.dumps([_key_json(r) for r in records]))
        return 0
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


class _Refused(Exception):
    pass


def _owner_call(settings: Settings, args: argparse.Namespace, method: str,
                path: str) -> dict[str, Any] | None:
    """Call the running proxy's owner endpoint; ``None`` when no proxy answers (or no owner
    token is known). Raises :class:`_Refused` when it answers with an error status."""
    url = (args.url or f"http://{settings.bind}:{settings.port}").rstrip("/")
    token = args.token or settings.owner_token
    if not token:
        return None
    req = urllib.request.Request(f"{url}{path}", method=method,
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            body: dict[str, Any] = json.load(resp)
            return body
    except urllib.error.HTTPError as exc:
        raise _Refused(f"the proxy at {url} refused: HTTP {exc.code}") from None
    except OSError:
        return None


def _cooldowns_reset(settings: Settings, args: argparse.Namespace) -> int:
    """Ask the running proxy to reset (it holds the live state); if none is running, clear
    the state it saved, so the next start begins with every provider available."""
    body = _owner_call(settings, args, "POST", "/v0/management/cooldowns/reset")
    if body is not None:
        print(f"Reset {body['reset']} cooldown(s) and circuit(s) on the running proxy.")
        return 0
    with Database(settings.db_path) as db:
        StateStore(db).delete(HEALTH_STATE)
    print("No proxy answered; cleared the saved cooldowns and circuits.")
    return 0


def _cache_stats(settings: Settings, args: argparse.Namespace) -> int:
    body = _owner_call(settings, args, "GET", "/cache/stats")
    if body is None:  # not running: what is on disk (hit counts live in the proxy)
        with Database(settings.db_path) as db:
            stats = trio.run(_store(settings, db).stats)
        body = {"entries": stats.entries, "bytes": stats.bytes,
                "providers": {n: {"entries": p.entries, "bytes": p.bytes}
                              for n, p in stats.providers.items()}}
    for key in ("hits", "misses", "writes", "in_flight", "entries", "bytes"):
        if key in body:
            print(f"{key:<10} {body[key]}")
    for name, p in body.get("providers", {}).items():
        print(f"provider {name}: {p['entries']} entries, {p['bytes']} bytes")
    return 0


def _cache_clear(settings: Settings, args: argparse.Namespace) -> int:
    query = f"?key={urllib.parse.quote(str(args.key))}" if args.key else ""
    body = _owner_call(settings, args, "DELETE", f"/cache{query}")
    if body is None:
        with Database(settings.db_path) as db:
            deleted = trio.run(_store(settings, db).clear, args.key)
    else:
        deleted = body["deleted"]
    print(f"Deleted {deleted} cached answer(s).")
    return 0


def _store(settings: Settings, db: Database) -> Any:
    from olp.cache import CacheStore  # lazily: the cache pulls in the IR

    c = settings.config.cache
    return CacheStore(db, ttl_s=c.ttl_s, max_entry_bytes=c.max_entry_bytes,
                      max_total_bytes=c.max_total_bytes,
                      max_entries_per_namespace=c.max_entries_per_key)


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
