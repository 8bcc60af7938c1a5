"""``olp usage``, ``olp audit`` and ``olp quota``: who used what, the audit trail, and each
provider account's quota state (ADR 0016); each names the account (issue #30). They read the
database; ``quota`` asks the running proxy first."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from olp.config import ConfigError, Settings
from olp.store import HEALTH_STATE, Database, StateStore, slot_name, split_slot

from . import _proxy_client
from ._args import Commands, positive
from ._proxy_client import Proxy
from ._tables import minute, print_rows, show


def add_usage(commands: Commands) -> None:
    usage = commands.add_parser("usage", help="who used what: requests, tokens, fallbacks and "
                                              "cache hits per key, provider, account, model and "
                                              "day")
    usage.add_argument("--key", metavar="NAME", help="only this key's usage")
    usage.add_argument("--days", type=positive, default=30, metavar="N",
                       help="the last N UTC days, today included (default 30)")
    usage.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    usage.set_defaults(handler=_usage)


def add_audit(commands: Commands) -> None:
    audit = commands.add_parser("audit", help="the audit trail: one row per request (never "
                                              "its text), refused ones included")
    audit.add_argument("--key", metavar="NAME", help="only this key's requests")
    audit.add_argument("--since", metavar="ISO", help="from this time (ISO 8601, UTC unless "
                                                      "it says otherwise; or Unix seconds)")
    audit.add_argument("--limit", type=positive, default=50, metavar="N",
                       help="at most N rows (default 50; the latest, without --since)")
    audit.add_argument("--json", action="store_true", help="print JSON lines, one per row")
    audit.set_defaults(handler=_audit)


def add_quota(commands: Commands) -> None:
    quota = commands.add_parser("quota", help="each provider's state, the usage windows its "
                                              "CLI reported, OLP's own counts and the next "
                                              "reset")
    quota.add_argument("--json", action="store_true", help="print the view as JSON")
    quota.set_defaults(handler=_quota)
    _proxy_client.add_flags(quota)


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
    counts = ("requests", "served", "refused", "failed_hops", "fallbacks", "cache_hits",
              "prompt_tokens", "cached_tokens", "completion_tokens")
    header = ("DAY", "KEY", "PROVIDER", "ACCOUNT", "MODEL", "REQ", "SERVED", "REFUSED",
              "FAILED_HOPS", "FALLBACKS", "HITS", "PROMPT_TOK", "CACHED_TOK", "COMPL_TOK",
              "SPAWN_S")
    cells = [header] + [
        (r["day"], r["key_name"], r["provider"], r["account"], r["model"],
         *(str(r[n]) for n in counts), f"{r['spawn_seconds']:.1f}") for r in rows]
    totals = usage_totals(rows)
    cells.append(("total", "", "", "", "", *(str(totals[n]) for n in counts),
                  f"{totals['spawn_seconds']:.1f}"))
    print_rows(cells, sys.stdout)
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
    cells = [("TIME", "REQUEST", "KEY", "ENDPOINT", "MODEL", "SERVED_BY", "ACCOUNT", "HOPS",
              "STATUS", "CACHE", "MS", "TOKENS", "OUTCOME", "ACTION")]
    for r in rows:
        tokens = "-" if r["prompt_tokens"] is None else \
            f"{r['prompt_tokens']}+{r['completion_tokens']}"
        served = "-" if r["provider"] is None else f"{r['provider']}/{r['model']}"
        cells.append((time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(r["at"])),
                      r["request_id"], r["key_name"] or "-", r["endpoint"].replace(" ", ":"),
                      r["requested_model"] or "-", served, r.get("account") or "-",
                      str(r["hops"]), str(r["status"]),
                      r["cache"] or "-", str(r["latency_ms"]), tokens, _outcome(r),
                      r.get("action") or "-"))
    print_rows(cells, sys.stdout)
    return 0


def _outcome(row: dict[str, Any]) -> str:
    """The row's outcome; a summary of dropped rows says how many (ADR 0021)."""
    dropped = row.get("suppressed")
    return row["outcome"] if dropped is None else f"{row['outcome']} ({dropped} rows)"


def _quota(settings: Settings, args: argparse.Namespace) -> int:
    """The running proxy's quota view; with none running, what the last one saved (its
    cooldowns, circuits and the CLIs' reports) and the database's counts."""
    from olp.accounting import quota_figures, quota_view
    from olp.store import LEDGER_STATE

    view = Proxy.of(settings, args).call("GET", "/v0/management/quota")
    if view is None:
        now = time.time()
        with Database(settings.db_path) as db:
            state = StateStore(db)
            health = state.load(HEALTH_STATE) or {}
            ledger = state.load(LEDGER_STATE) or {}
            figures = quota_figures(db, now)
        reported = ledger.get("reported", {})
        view = quota_view(_slots(settings, health, reported), health=health,
                          reported=reported, soft={}, unavailable={}, figures=figures, now=now)
        view["running"] = False
    return show(view, as_json=args.json, for_person=_print_quota)


def _slots(settings: Settings, health: Mapping[str, Any],
           reported: Mapping[str, Any]) -> list[str]:
    """The slots (a provider's accounts: ``claude``, ``claude@bob``) of the enabled
    providers: those configured, then those of them the saved state names."""
    providers = settings.enabled_providers()
    names = [slot_name(p, a.name) for p in providers for a in settings.provider(p).accounts]
    saved = [c["provider"] for c in (*health.get("cooldowns", []),
                                     *health.get("circuits", []))]
    names += [s for s in (*saved, *reported) if split_slot(s)[0] in providers]
    return list(dict.fromkeys(names))


def _print_quota(view: Mapping[str, Any], out: TextIO) -> None:
    if view.get("running") is False:
        print("No proxy answered: the state it last saved, and the database's counts.",
              file=out)
    rows = [("PROVIDER", "ACCOUNT", "STATE", "UNTIL", "REPORTED", "5H_REQ", "DAY_REQ",
             "DAY_TOKENS", "NEXT_RESET")]
    for name, p in view["providers"].items():
        reported = ",".join(
            f"{w}:{r['status']}" + (f"@{100 * r['utilization']:.0f}%"
                                    if r.get("utilization") is not None else "")
            for w, r in p["reported"].items()) or "-"
        rows.append((p.get("provider", name), p.get("account", "-"), p["state"],
                     minute(p["until"]), reported,
                     str(p["ledger"]["five_hour"]["requests"]),
                     str(p["ledger"]["day"]["requests"]), str(p["ledger"]["day"]["tokens"]),
                     minute(p["next_reset"])))
    print_rows(rows, out)
    for name, p in view["providers"].items():
        if p["reason"]:
            print(f"{name}: {p['reason']}", file=out)
    if view.get("soonest_reset"):
        print(f"Soonest reset: {minute(view['soonest_reset'])}", file=out)
