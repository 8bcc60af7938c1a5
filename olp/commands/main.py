"""The ``olp`` command line: ``start``, ``status``, ``keys``, ``usage``, ``audit``, ``quota``,
``chain show``, ``doctor``, ``cooldowns``, ``cache``, ``migrate-from-ocp``.

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
from typing import Any, Literal, TextIO

import trio

from olp.config import ConfigError, Settings, load_settings
from olp.store import (
    HEALTH_STATE,
    Database,
    KeyNameError,
    KeyPolicy,
    KeyRecord,
    KeyStore,
    Limits,
    StateStore,
    StoreError,
)

#: ``olp keys create|update`` limit flags: (flag, Limits field, help).
_LIMIT_FLAGS = (("--per-minute", "per_minute", "requests per sliding minute"),
                ("--per-day", "per_day", "requests per UTC day"),
                ("--per-week", "per_week", "requests per ISO week (UTC, from Monday)"),
                ("--per-month", "per_month", "requests per calendar month (UTC)"),
                ("--tokens-per-day", "tokens_per_day",
                 "prompt + completion tokens per UTC day"))


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
        if args.handler is _reload:  # the proxy reads the config; a broken one is its to say
            settings = load_settings(os.environ, read_config=False)
        else:
            settings = _setup_settings() if args.handler is _setup else \
                load_settings(os.environ)
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

    setup = sub.add_parser("setup", help="find the CLIs you have and write a config that "
                                         "uses them")
    setup.add_argument("--yes", action="store_true", help="ask nothing (metered and tier-B "
                                                          "providers are left out)")
    setup.add_argument("--force", action="store_true",
                       help="replace an existing config (kept as config.json.bak)")
    setup.add_argument("--allow-metered", action="store_true",
                       help="use providers whose credential is an API key (paid per token)")
    setup.set_defaults(handler=_setup)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(title="key commands", metavar="ACTION", required=True)
    create = keys_sub.add_parser("create", help="create a key (shown once)")
    create.add_argument("name", help="a label for the key, e.g. the person or tool using it")
    create.add_argument("--owner", action="store_true", help="owner tier (full access)")
    create.set_defaults(handler=_keys_create)
    update = keys_sub.add_parser("update", help="change a key's provider allow-list or "
                                                "limits (a running proxy applies it within 2 s)")
    update.add_argument("key", metavar="ID_OR_NAME")
    update.add_argument("--all-providers", action="store_true",
                        help="drop the allow-list: every provider")
    update.add_argument("--clear-limits", action="store_true",
                        help="drop every limit (then set the ones given)")
    update.set_defaults(handler=_keys_update)
    for command in (create, update):
        command.add_argument("--providers", metavar="P1,P2",
                             help="only these providers may answer this key's requests")
        for flag, dest, what in _LIMIT_FLAGS:
            command.add_argument(flag, dest=dest, type=_positive, metavar="N",
                                 help=f"at most N {what}")
    listing = keys_sub.add_parser("list", help="list keys with their tier, providers, limits "
                                               "and today's usage (never secrets)")
    listing.set_defaults(handler=_keys_list)
    rotate = keys_sub.add_parser("rotate", help="give a key a new secret (shown once); the "
                                                "old one stops working")
    rotate.add_argument("key", metavar="ID_OR_NAME")
    rotate.set_defaults(handler=_keys_rotate)
    for command in (create, update, listing, rotate):
        command.add_argument("--json", action="store_true",
                             help="print JSON (one object; for list, an array)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id or name")
    revoke.add_argument("key", metavar="ID_OR_NAME")
    revoke.set_defaults(handler=_keys_revoke)

    usage = sub.add_parser("usage", help="who used what: requests, tokens, fallbacks and "
                                         "cache hits per key, provider, model and day")
    usage.add_argument("--key", metavar="NAME", help="only this key's usage")
    usage.add_argument("--days", type=_positive, default=30, metavar="N",
                       help="the last N UTC days, today included (default 30)")
    usage.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    usage.set_defaults(handler=_usage)
    audit = sub.add_parser("audit", help="the audit trail: one row per request (never its "
                                         "text), refused ones included")
    audit.add_argument("--key", metavar="NAME", help="only this key's requests")
    audit.add_argument("--since", metavar="ISO", help="from this time (ISO 8601, UTC unless "
                                                      "it says otherwise; or Unix seconds)")
    audit.add_argument("--limit", type=_positive, default=50, metavar="N",
                       help="at most N rows (default 50; the latest, without --since)")
    audit.add_argument("--json", action="store_true", help="print JSON lines, one per row")
    audit.set_defaults(handler=_audit)

    quota = sub.add_parser("quota", help="each provider's state, the usage windows its CLI "
                                         "reported, OLP's own counts and the next reset")
    quota.add_argument("--json", action="store_true", help="print the view as JSON")
    quota.set_defaults(handler=_quota)

    ocp = sub.add_parser("migrate-from-ocp", help="import OCP's keys (unchanged, so every "
                                                 "client keeps working) and their quotas")
    ocp.add_argument("--ocp-db", metavar="PATH", help="OCP's store (default ~/.ocp/ocp.db)")
    ocp.add_argument("--dry-run", action="store_true", help="say what would be imported; "
                                                            "store nothing")
    ocp.add_argument("--with-usage", action="store_true",
                     help="also import OCP's usage history into the ledger")
    ocp.add_argument("--json", action="store_true", help="print the report as JSON")
    ocp.set_defaults(handler=_migrate_from_ocp)

    connect = sub.add_parser("connect", help="print (or --write) a config pointing a coding "
                                             "tool at OLP")
    connect.add_argument("tool", metavar="TOOL",
                         help="aider, claude-code, cline, codex, continue or zed")
    connect.add_argument("--key", help="the OLP key the tool should use (else a placeholder)")
    connect.add_argument("--model", help="the model (or chain) to ask for (default: the "
                                         "`default` chain when configured, else sonnet)")
    connect.add_argument("--write", action="store_true",
                         help="write it into the tool's config (merged; a .bak is kept)")
    connect.set_defaults(handler=_connect)

    service = sub.add_parser("service", help="run olp start as a user service (systemd on "
                                             "Linux, launchd on macOS)")
    service.add_argument("action", choices=("install", "uninstall", "status"))
    service.add_argument("--print", action="store_true",
                         help="show the unit (or plist) and change nothing")
    service.set_defaults(handler=_service)

    reload = sub.add_parser("reload", help="make the running proxy re-read its config "
                                           "(SIGHUP); a refused one leaves the running one")
    reload.set_defaults(handler=_reload)

    status = sub.add_parser("status", help="the running proxy: providers, in-flight, "
                                           "cooldowns, chains")
    status.add_argument("--json", action="store_true", help="print its /health as JSON")
    status.set_defaults(handler=_status)
    chain = sub.add_parser("chain", help="routing chains")
    chain_sub = chain.add_subparsers(title="chain commands", metavar="ACTION", required=True)
    show = chain_sub.add_parser("show", help="a model's route (or every chain): entries, the "
                                             "ones pruned and why, cooldowns")
    show.add_argument("model", nargs="?", metavar="MODEL")
    show.add_argument("--json", action="store_true", help="print the routes as JSON")
    show.set_defaults(handler=_chain_show)

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
    for command in (reset, stats, clear, quota, status, show, reload):
        command.add_argument("--url", help="the running proxy (default: OLP_BIND/OLP_PORT)")
        command.add_argument("--token", help="the owner key (default: OLP_OWNER_TOKEN)")
    return parser


def _start(settings: Settings, args: argparse.Namespace) -> int:
    # Imported lazily: the server stack (trio, quart, hypercorn) is not needed for `keys`.
    server = importlib.import_module("olp.runtime.server")
    result: int = server.run(settings)
    return result


def _keys(settings: Settings) -> tuple[Database, KeyStore]:
    db = Database(settings.db_path)
    return db, KeyStore(db)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _limit_args(args: argparse.Namespace) -> dict[str, int]:
    return {dest: value for _, dest, _ in _LIMIT_FLAGS
            if (value := getattr(args, dest)) is not None}


def _allow_list(settings: Settings, text: str | None) -> frozenset[str] | None:
    """``--providers``: known provider names, comma-separated (a usage error otherwise)."""
    if text is None:
        return None
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    known = settings.provider_names()
    unknown = sorted(names - set(known))
    if not names or unknown:
        raise ConfigError(f"--providers: {', '.join(unknown) or 'no provider'} is not a "
                          f"provider (known: {', '.join(known)})")
    return names


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    policy = KeyPolicy(_allow_list(settings, args.providers),
                       Limits.from_dict(dict(_limit_args(args))))
    db, keys = _keys(settings)
    with db:
        try:
            record, token = keys.create(args.name, "owner" if args.owner else "guest",
                                        policy)
        except KeyNameError as exc:
            print(f"olp: {exc}", file=sys.stderr)
            return 1
    _show_secret(record, token, "Created", json_out=args.json)
    return 0


def _keys_update(settings: Settings, args: argparse.Namespace) -> int:
    if args.all_providers and args.providers is not None:
        raise ConfigError("--providers and --all-providers exclude each other")
    providers: frozenset[str] | None | Literal["keep"] = "keep"
    if args.all_providers:
        providers = None
    elif args.providers is not None:
        providers = _allow_list(settings, args.providers)
    db, keys = _keys(settings)
    with db:
        record = keys.update(args.key, providers=providers, limits=_limit_args(args),
                             clear_limits=args.clear_limits)
    if record is None:
        print(f"olp: no active key with id or name {args.key!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(_key_json(record)))
    else:
        print(f"Updated key {record.id} ({record.name}): providers "
              f"{_providers_text(record.policy)}, limits {_limits_text(record.policy)}.")
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
    policy = record.policy
    return {"id": record.id, "name": record.name, "tier": record.tier,
            "prefix": record.display_prefix, "source": record.source,
            "created_at": record.created_at, "revoked_at": record.revoked_at,
            "providers": None if policy.providers is None else sorted(policy.providers),
            "limits": policy.limits.as_dict()}


def _providers_text(policy: KeyPolicy) -> str:
    return "all" if policy.providers is None else ",".join(sorted(policy.providers))


def _limits_text(policy: KeyPolicy) -> str:
    short = {"per_minute": "/min", "per_day": "/day", "per_week": "/week",
             "per_month": "/month", "tokens_per_day": "tok/day"}
    limits = policy.limits.as_dict()
    return ",".join(f"{v}{short[k]}" for k, v in limits.items()) if limits else "none"


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    """Every key with today's usage (from the ledger: a running proxy commits it every
    250 ms)."""
    from olp.accounting import today_by_key  # lazily, like the other subsystems

    db, keys = _keys(settings)
    with db:
        records = keys.list()
        today = today_by_key(db, time.time())
    if args.json:
        print(json.dumps([{**_key_json(r), "today": dict(zip(
            ("requests", "tokens"), today.get(str(r.id), (0, 0)), strict=True))}
            for r in records]))
        return 0
    if not records:
        print("No keys yet. Create one with: olp keys create NAME")
        return 0
    _table(records, today, sys.stdout)
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


def _usage(settings: Settings, args: argparse.Namespace) -> int:
    from olp.accounting import usage_report, usage_totals

    with Database(settings.db_path) as db:
        rows = usage_report(db, time.time(), days=args.days, key_name=args.key)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"No usage in the last {args.days} day(s)"
              + (f" for key {args.key!r}." if args.key else "."))
        return 0
    header = ("DAY", "KEY", "PROVIDER", "MODEL", "REQ", "SERVED", "REFUSED", "FAILED_HOPS",
              "FALLBACKS", "HITS", "PROMPT_TOK", "COMPL_TOK", "SPAWN_S")
    cells = [header] + [
        (r["day"], r["key_name"], r["provider"], r["model"], str(r["requests"]),
         str(r["served"]), str(r["refused"]), str(r["failed_hops"]), str(r["fallbacks"]),
         str(r["cache_hits"]), str(r["prompt_tokens"]), str(r["completion_tokens"]),
         f"{r['spawn_seconds']:.1f}") for r in rows]
    totals = usage_totals(rows)
    cells.append(("total", "", "", "", *(str(totals[n]) for n in (
        "requests", "served", "refused", "failed_hops", "fallbacks", "cache_hits",
        "prompt_tokens", "completion_tokens")), f"{totals['spawn_seconds']:.1f}"))
    _print_rows(cells, sys.stdout)
    return 0


def _audit(settings: Settings, args: argparse.Namespace) -> int:
    from olp.accounting import audit_page, parse_since

    try:
        since = None if args.since is None else parse_since(args.since)
    except ValueError:
        raise ConfigError(f"--since {args.since!r} is not a time: give ISO 8601 "
                          "(2026-12-01T08:00:00Z) or Unix seconds") from None
    with Database(settings.db_path) as db:
        rows, _ = audit_page(db, key_name=args.key, since=since, limit=args.limit)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    if not rows:
        print("No audit rows" + (f" for key {args.key!r}." if args.key else "."))
        return 0
    cells = [("TIME", "REQUEST", "KEY", "ENDPOINT", "MODEL", "SERVED_BY", "HOPS", "STATUS",
              "CACHE", "MS", "TOKENS", "OUTCOME")]
    for r in rows:
        tokens = "-" if r["prompt_tokens"] is None else \
            f"{r['prompt_tokens']}+{r['completion_tokens']}"
        served = "-" if r["provider"] is None else f"{r['provider']}/{r['model']}"
        cells.append((time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(r["at"])),
                      r["request_id"], r["key_name"] or "-", r["endpoint"].replace(" ", ":"),
                      r["requested_model"] or "-", served, str(r["hops"]), str(r["status"]),
                      r["cache"] or "-", str(r["latency_ms"]), tokens, r["outcome"]))
    _print_rows(cells, sys.stdout)
    return 0


def _setup_settings() -> Settings:
    """Settings for ``olp setup``: a config that does not load is what ``--force`` replaces,
    so it is read as empty then (setup never uses what is in it)."""
    try:
        return load_settings(os.environ)
    except ConfigError:
        return load_settings(os.environ, read_config=False)


def _setup(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import setup

    ask = None if args.yes or not sys.stdin.isatty() else setup.terminal_ask()
    result: int = setup.run(settings, yes=args.yes, force=args.force,
                            allow_metered=args.allow_metered, out=sys.stdout, ask=ask)
    return result


def _reload(settings: Settings, args: argparse.Namespace) -> int:
    """SIGHUP to the running proxy (its pid from its /health), then wait for its verdict."""
    import signal

    health = _owner_call(settings, args, "GET", "/health")
    if health is None or "pid" not in health:
        print("olp: no proxy answered (start it with `olp start`; the owner key comes from "
              "--token or OLP_OWNER_TOKEN)", file=sys.stderr)
        return 1
    before = health.get("config", {})
    os.kill(int(health["pid"]), signal.SIGHUP)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = (_owner_call(settings, args, "GET", "/health") or {}).get("config", {})
        if now.get("generation") != before.get("generation"):
            print(f"Reloaded {now.get('path')} (generation {now['generation']}): kept "
                  f"{', '.join(now.get('kept', [])) or 'none'}; started "
                  f"{', '.join(now.get('started', [])) or 'none'}; retired "
                  f"{', '.join(now.get('retired', [])) or 'none'}.")
            if now.get("needs_restart"):
                print("Changed, and applied only on a restart: "
                      + ", ".join(now["needs_restart"]) + ".")
            return 0
        if now.get("last_attempt_at") != before.get("last_attempt_at") and now.get("last_error"):
            print(f"olp: reload refused, the running config stays: {now['last_error']}",
                  file=sys.stderr)
            return 1
    print("olp: the proxy did not report a reload within 30 s (see its log)", file=sys.stderr)
    return 1


def _connect(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from olp.commands import connect

    host = "127.0.0.1" if settings.bind in ("0.0.0.0", "::", "") else settings.bind
    host = f"[{host}]" if ":" in host else host
    model = args.model or ("default" if "default" in settings.config.routing.chains
                           else "sonnet")
    result: int = connect.run(args.tool, base_url=f"http://{host}:{settings.port}",
                              key=args.key, model=model, write_files=args.write,
                              home=Path(os.environ.get("HOME") or Path.home()),
                              out=sys.stdout)
    return result


def _service(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import service

    result: int = service.run(args.action, settings, print_only=args.print, out=sys.stdout,
                              err=sys.stderr, grace_s=settings.config.server.drain_grace_s)
    return result


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import status

    health = _owner_call(settings, args, "GET", "/health")
    if health is None:
        where = args.url or f"http://{settings.bind}:{settings.port}"
        print(f"olp: no proxy answered at {where} (start it with `olp start`; the owner key "
              "comes from --token or OLP_OWNER_TOKEN)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(health))
    else:
        status.status(health, sys.stdout)
    return 0


def _chain_show(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import status

    health = _owner_call(settings, args, "GET", "/health")
    live = health.get("resilience") if health else None
    saved = None
    if live is None:
        with Database(settings.db_path) as db:
            saved = StateStore(db).load(HEALTH_STATE)
    view = status.chain_show(settings, args.model, live, saved)
    if args.json:
        print(json.dumps(view))
    else:
        status.print_chains(view, sys.stdout)
    return 0


def _migrate_from_ocp(settings: Settings, args: argparse.Namespace) -> int:
    """Import an OCP household (``olp.commands.migrate``); 1 with nothing imported on any error."""
    from pathlib import Path

    from olp.commands import migrate

    source = Path(args.ocp_db).expanduser() if args.ocp_db else \
        migrate.default_ocp_db(Path(os.environ.get("HOME") or Path.home()))
    try:
        with Database(settings.db_path) as db:
            report = migrate.migrate(source, db, dry_run=args.dry_run,
                                     with_usage=args.with_usage,
                                     progress=lambda line: print(f"olp: {line}",
                                                                 file=sys.stderr, flush=True))
    except (migrate.MigrationError, KeyNameError) as exc:
        print(f"olp: {exc}", file=sys.stderr)
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
        print(f"  {k.origin} -> key {k.key_id} ({k.name})")
    if args.with_usage:
        print(f"{verb} {report.usage_rows} usage row(s) into the ledger"
              + (f"; {report.usage_skipped} of keys not imported left out"
                 if report.usage_skipped else "") + ".")
    if not args.dry_run and new:
        print("Their clients keep working with the same keys; OCP's store was not changed.")
    return 0


def _quota(settings: Settings, args: argparse.Namespace) -> int:
    """The running proxy's quota view; with none running, what the last one saved (its
    cooldowns, circuits and the CLIs' reports) and the database's counts."""
    from olp.accounting import quota_figures, quota_view
    from olp.store import LEDGER_STATE

    view = _owner_call(settings, args, "GET", "/v0/management/quota")
    if view is None:
        now = time.time()
        with Database(settings.db_path) as db:
            state = StateStore(db)
            health = state.load(HEALTH_STATE) or {}
            ledger = state.load(LEDGER_STATE) or {}
            figures = quota_figures(db, now)
        view = quota_view(settings.enabled_providers(), health=health,
                          reported=ledger.get("reported", {}), soft={}, unavailable={},
                          figures=figures, now=now)
        view["running"] = False
    if args.json:
        print(json.dumps(view))
        return 0
    if view.get("running") is False:
        print("No proxy answered: the state it last saved, and the database's counts.")
    rows = [("PROVIDER", "STATE", "UNTIL", "REPORTED", "5H_REQ", "DAY_REQ", "DAY_TOKENS",
             "NEXT_RESET")]
    for name, p in view["providers"].items():
        reported = ",".join(
            f"{w}:{r['status']}" + (f"@{100 * r['utilization']:.0f}%"
                                    if r.get("utilization") is not None else "")
            for w, r in p["reported"].items()) or "-"
        rows.append((name, p["state"], _at(p["until"]), reported,
                     str(p["ledger"]["five_hour"]["requests"]),
                     str(p["ledger"]["day"]["requests"]), str(p["ledger"]["day"]["tokens"]),
                     _at(p["next_reset"])))
    _print_rows(rows, sys.stdout)
    for name, p in view["providers"].items():
        if p["reason"]:
            print(f"{name}: {p['reason']}")
    if view.get("soonest_reset"):
        print(f"Soonest reset: {_at(view['soonest_reset'])}")
    return 0


def _at(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _print_rows(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
              file=out)


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    doctor = importlib.import_module("olp.commands.doctor")  # lazily: it needs the actor stack
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


def _table(records: Sequence[KeyRecord], today: dict[str, tuple[int, int]],
           out: TextIO) -> None:
    rows = [("ID", "NAME", "TIER", "PREFIX", "PROVIDERS", "LIMITS", "TODAY", "CREATED",
             "REVOKED")]
    rows += [(str(r.id), r.name, r.tier, r.display_prefix, _providers_text(r.policy),
              _limits_text(r.policy), "{}req/{}tok".format(*today.get(str(r.id), (0, 0))),
              _when(r.created_at), "-" if r.revoked_at is None else _when(r.revoked_at))
             for r in records]
    _print_rows(rows, out)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
