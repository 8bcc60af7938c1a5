"""Running and tending the proxy: ``olp start``, ``setup``, ``reload``, ``status``, ``chain
show``, ``doctor``, ``cooldowns reset`` and ``cache stats|clear``.

The work of ``setup``, ``doctor``, ``status`` and ``chain show`` lives in the modules of those
names, imported when the command runs: they build the provider stack, which no other command
needs (and ``start`` imports the server lazily for the same reason). The commands that ask the
running proxy do it through :mod:`._proxy_client`; with none running, ``chain show``,
``cooldowns reset`` and ``cache`` work from what is on disk.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import urllib.parse
from typing import TYPE_CHECKING

import trio

from olp.config import ConfigError, Settings, load_settings
from olp.store import HEALTH_STATE, Database, StateStore

from . import _proxy_client
from ._args import Commands
from ._proxy_client import Proxy
from ._tables import printable, show

if TYPE_CHECKING:
    from olp.cache import CacheStore

#: How long ``olp reload`` waits for the proxy's verdict, and how often it asks.
RELOAD_WAIT_S = 30
RELOAD_POLL_S = 0.2


def add_start(commands: Commands) -> None:
    start = commands.add_parser("start", help="run the proxy in the foreground")
    start.set_defaults(handler=_start)


def add_setup(commands: Commands) -> None:
    setup = commands.add_parser("setup", help="find the CLIs you have and write a config that "
                                              "uses them")
    setup.add_argument("--yes", action="store_true", help="ask nothing (metered and tier-B "
                                                          "providers are left out)")
    setup.add_argument("--force", action="store_true",
                       help="replace an existing config (kept as config.json.bak)")
    setup.add_argument("--allow-metered", action="store_true",
                       help="use providers whose credential is an API key (paid per token)")
    setup.set_defaults(handler=_setup, settings=_setup_settings)


def add_reload(commands: Commands) -> None:
    reload = commands.add_parser("reload", help="make the running proxy re-read its config "
                                                "(SIGHUP); a refused one leaves the running one")
    # The proxy reads the config; a broken one is its to say.
    reload.set_defaults(handler=_reload,
                        settings=lambda: load_settings(os.environ, read_config=False))
    _proxy_client.add_flags(reload)


def add_status(commands: Commands) -> None:
    status = commands.add_parser("status", help="the running proxy: providers, in-flight, "
                                                "cooldowns, chains")
    status.add_argument("--json", action="store_true", help="print its /health as JSON")
    status.set_defaults(handler=_status)
    _proxy_client.add_flags(status)


def add_chain(commands: Commands) -> None:
    chain = commands.add_parser("chain", help="routing chains")
    chain_sub = chain.add_subparsers(title="chain commands", metavar="ACTION", required=True)
    show = chain_sub.add_parser("show", help="a model's route (or every chain): entries, the "
                                             "ones pruned and why, cooldowns")
    show.add_argument("model", nargs="?", metavar="MODEL")
    show.add_argument("--json", action="store_true", help="print the routes as JSON")
    show.set_defaults(handler=_chain_show)
    _proxy_client.add_flags(show)


def add_doctor(commands: Commands) -> None:
    doctor = commands.add_parser("doctor", help="check each provider's binary, version and "
                                                "credentials, with the fix for each problem")
    doctor.add_argument("--probe", action="store_true",
                        help="also send each usable provider one tiny request (uses quota)")
    doctor.set_defaults(handler=_doctor)


def add_cooldowns(commands: Commands) -> None:
    cooldowns = commands.add_parser("cooldowns", help="provider cooldowns and circuits")
    cool_sub = cooldowns.add_subparsers(title="cooldown commands", metavar="ACTION",
                                        required=True)
    reset = cool_sub.add_parser("reset", help="forget every cooldown and open circuit")
    reset.set_defaults(handler=_cooldowns_reset)
    _proxy_client.add_flags(reset)


def add_cache(commands: Commands) -> None:
    cache = commands.add_parser("cache", help="the response cache")
    cache_sub = cache.add_subparsers(title="cache commands", metavar="ACTION", required=True)
    stats = cache_sub.add_parser("stats", help="hits, misses, entries, size")
    stats.set_defaults(handler=_cache_stats)
    clear = cache_sub.add_parser("clear", help="delete cached answers")
    clear.add_argument("--key", help="only this API key's answers (its id)")
    clear.set_defaults(handler=_cache_clear)
    for command in (stats, clear):
        _proxy_client.add_flags(command)


def _start(settings: Settings, args: argparse.Namespace) -> int:
    # Imported lazily: the server stack (trio, quart, hypercorn) is not needed for `keys`.
    server = importlib.import_module("olp.runtime.server")
    result: int = server.run(settings)
    return result


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
    proxy = Proxy.of(settings, args)
    health = proxy.call("GET", "/health")
    if health is None or "pid" not in health:
        print("olp: no proxy answered (start it with `olp start`; the owner key comes from "
              "--token or OLP_OWNER_TOKEN)", file=sys.stderr)
        return 1
    before = health.get("config", {})
    os.kill(int(health["pid"]), signal.SIGHUP)
    deadline = time.monotonic() + RELOAD_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(RELOAD_POLL_S)
        now = (proxy.call("GET", "/health") or {}).get("config", {})
        if now.get("generation") != before.get("generation"):
            print(printable(
                f"Reloaded {now.get('path')} (generation {now['generation']}): kept "
                f"{', '.join(now.get('kept', [])) or 'none'}; started "
                f"{', '.join(now.get('started', [])) or 'none'}; retired "
                f"{', '.join(now.get('retired', [])) or 'none'}."))
            if now.get("needs_restart"):
                print(printable("Changed, and applied only on a restart: "
                                + ", ".join(now["needs_restart"]) + "."))
            return 0
        if now.get("last_attempt_at") != before.get("last_attempt_at") and now.get("last_error"):
            print(printable(f"olp: reload refused, the running config stays: "
                            f"{now['last_error']}"), file=sys.stderr)
            return 1
    print(f"olp: the proxy did not report a reload within {RELOAD_WAIT_S} s (see its log)",
          file=sys.stderr)
    return 1


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import status

    proxy = Proxy.of(settings, args)
    health = proxy.call("GET", "/health")
    if health is None:
        print(f"olp: no proxy answered at {proxy.address} (start it with `olp start`; the "
              "owner key comes from --token or OLP_OWNER_TOKEN)", file=sys.stderr)
        return 1
    return show(health, as_json=args.json, for_person=status.status)


def _chain_show(settings: Settings, args: argparse.Namespace) -> int:
    from olp.commands import status

    health = Proxy.of(settings, args).call("GET", "/health")
    live = health.get("resilience") if health else None
    saved = None
    if live is None:
        with Database(settings.db_path) as db:
            saved = StateStore(db).load(HEALTH_STATE)
    view = status.chain_show(settings, args.model, live, saved)
    return show(view, as_json=args.json, for_person=status.print_chains)


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    doctor = importlib.import_module("olp.commands.doctor")  # lazily: it needs the actor stack
    result: int = doctor.run(settings, probe=args.probe)
    return result


def _cooldowns_reset(settings: Settings, args: argparse.Namespace) -> int:
    """Ask the running proxy to reset (it holds the live state); if none is running, clear
    the state it saved, so the next start begins with every provider available."""
    body = Proxy.of(settings, args).call("POST", "/v0/management/cooldowns/reset")
    if body is not None:
        print(printable(f"Reset {body['reset']} cooldown(s) and circuit(s) on the running "
                        "proxy."))
        return 0
    with Database(settings.db_path) as db:
        StateStore(db).delete(HEALTH_STATE)
    print("No proxy answered; cleared the saved cooldowns and circuits.")
    return 0


def _cache_stats(settings: Settings, args: argparse.Namespace) -> int:
    body = Proxy.of(settings, args).call("GET", "/cache/stats")
    if body is None:  # not running: what is on disk (hit counts live in the proxy)
        with Database(settings.db_path) as db:
            stats = trio.run(_cache_store(settings, db).stats)
        body = {"entries": stats.entries, "bytes": stats.bytes,
                "providers": {n: {"entries": p.entries, "bytes": p.bytes}
                              for n, p in stats.providers.items()}}
    for key in ("hits", "misses", "writes", "in_flight", "entries", "bytes"):
        if key in body:
            print(printable(f"{key:<10} {body[key]}"))
    for name, p in body.get("providers", {}).items():
        print(printable(f"provider {name}: {p['entries']} entries, {p['bytes']} bytes"))
    return 0


def _cache_clear(settings: Settings, args: argparse.Namespace) -> int:
    query = f"?key={urllib.parse.quote(str(args.key))}" if args.key else ""
    body = Proxy.of(settings, args).call("DELETE", f"/cache{query}")
    if body is None:
        with Database(settings.db_path) as db:
            deleted = trio.run(_cache_store(settings, db).clear, args.key)
    else:
        deleted = body["deleted"]
    print(printable(f"Deleted {deleted} cached answer(s)."))
    return 0


def _cache_store(settings: Settings, db: Database) -> CacheStore:
    from olp.cache import CacheStore  # lazily: the cache pulls in the IR

    c = settings.config.cache
    return CacheStore(db, ttl_s=c.ttl_s, max_entry_bytes=c.max_entry_bytes,
                      max_total_bytes=c.max_total_bytes,
                      max_entries_per_namespace=c.max_entries_per_key)
