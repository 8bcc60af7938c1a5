"""``olp keys create|update|list|rotate|revoke``: API keys, their provider allow-lists,
limits (ADR 0016) and bindings to accounts (issue #30). A secret is shown once, when it is
made; never listed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Literal, TextIO

from olp.config import ConfigError, Settings
from olp.store import (
    Binding,
    Database,
    KeyNameError,
    KeyPolicy,
    KeyRecord,
    KeyStore,
    Limits,
    StoreError,
    format_binding,
    parse_binding,
)

from ._args import Commands, positive
from ._tables import minute, print_rows, printable

#: ``olp keys create|update`` limit flags: (flag, Limits field, help).
LIMIT_FLAGS = (("--per-minute", "per_minute", "requests per sliding minute"),
               ("--per-day", "per_day", "requests per UTC day"),
               ("--per-week", "per_week", "requests per ISO week (UTC, from Monday)"),
               ("--per-month", "per_month", "requests per calendar month (UTC)"),
               ("--tokens-per-day", "tokens_per_day",
                "prompt + completion tokens per UTC day"))


def add_keys(commands: Commands) -> None:
    keys = commands.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(title="key commands", metavar="ACTION", required=True)
    create = keys_sub.add_parser("create", help="create a key (shown once)")
    create.add_argument("name", help="a label for the key, e.g. the person or tool using it")
    create.add_argument("--owner", action="store_true", help="owner tier (full access)")
    create.set_defaults(handler=_create)
    update = keys_sub.add_parser("update", help="change a key's provider allow-list, limits "
                                                "or accounts (a running proxy applies it "
                                                "within 2 s)")
    update.add_argument("key", metavar="ID_OR_NAME")
    update.add_argument("--all-providers", action="store_true",
                        help="drop the allow-list: every provider")
    update.add_argument("--clear-limits", action="store_true",
                        help="drop every limit (then set the ones given)")
    update.set_defaults(handler=_update)
    for command in (create, update):
        command.add_argument("--providers", metavar="P1,P2",
                             help="only these providers may answer this key's requests")
        command.add_argument("--accounts", metavar="PROVIDER:ACCOUNT[,...]",
                             help="bind the key to these accounts, in order: for each "
                                  "provider named, only its accounts listed here serve it"
                                  + (" ('' removes the binding)" if command is update
                                     else ""))
        for flag, dest, what in LIMIT_FLAGS:
            command.add_argument(flag, dest=dest, type=positive, metavar="N",
                                 help=f"at most N {what}")
    listing = keys_sub.add_parser("list", help="list keys with their tier, providers, "
                                               "accounts, limits and today's usage (never "
                                               "secrets)")
    listing.set_defaults(handler=_list)
    rotate = keys_sub.add_parser("rotate", help="give a key a new secret (shown once); the "
                                                "old one stops working")
    rotate.add_argument("key", metavar="ID_OR_NAME")
    rotate.set_defaults(handler=_rotate)
    for command in (create, update, listing, rotate):
        command.add_argument("--json", action="store_true",
                             help="print JSON (one object; for list, an array)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id or name")
    revoke.add_argument("key", metavar="ID_OR_NAME")
    revoke.set_defaults(handler=_revoke)


def _store(settings: Settings) -> tuple[Database, KeyStore]:
    db = Database(settings.db_path)
    return db, KeyStore(db)


def _limit_args(args: argparse.Namespace) -> dict[str, int]:
    return {dest: value for _, dest, _ in LIMIT_FLAGS
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


def _binding(settings: Settings, text: str | None,
             allowed: frozenset[str] | None | Literal["keep"]) -> Binding | Literal["keep"]:
    """``--accounts``: ``PROVIDER:ACCOUNT`` pairs the config declares (a usage error
    otherwise), none excluded by the ``--providers`` given with it; ``''``: no binding."""
    if text is None:
        return "keep"
    try:
        binding = parse_binding(text)
    except ValueError as exc:
        raise ConfigError(f"--accounts: {exc}") from None
    known = settings.provider_names()
    for provider, account in binding:
        if provider not in known:
            raise ConfigError(f"--accounts: {provider} is not a provider "
                              f"(known: {', '.join(known)})")
        accounts = [a.name for a in settings.provider(provider).accounts]
        if account not in accounts:
            raise ConfigError(f"--accounts: {provider} has no account {account!r} "
                              f"({provider} has accounts: {', '.join(accounts)})")
        if allowed != "keep" and allowed is not None and provider not in allowed:
            raise ConfigError(f"--accounts: {provider}:{account} is an account of "
                              f"{provider}, which --providers excludes")
    return binding


def _create(settings: Settings, args: argparse.Namespace) -> int:
    allowed = _allow_list(settings, args.providers)
    binding = _binding(settings, args.accounts, allowed)
    policy = KeyPolicy(allowed, Limits.from_dict(dict(_limit_args(args))),
                       () if binding == "keep" else binding)
    db, keys = _store(settings)
    with db:
        try:
            record, token = keys.create(args.name, "owner" if args.owner else "guest",
                                        policy)
        except KeyNameError as exc:
            print(f"olp: {exc}", file=sys.stderr)
            return 1
    _show_secret(record, token, "Created", json_out=args.json)
    return 0


def _update(settings: Settings, args: argparse.Namespace) -> int:
    if args.all_providers and args.providers is not None:
        raise ConfigError("--providers and --all-providers exclude each other")
    providers: frozenset[str] | None | Literal["keep"] = "keep"
    if args.all_providers:
        providers = None
    elif args.providers is not None:
        providers = _allow_list(settings, args.providers)
    accounts = _binding(settings, args.accounts, providers)
    db, keys = _store(settings)
    with db:
        try:
            record = keys.update(args.key, providers=providers, limits=_limit_args(args),
                                 clear_limits=args.clear_limits, accounts=accounts)
        except ValueError as exc:  # the key's allow-list excludes a provider it is bound to
            raise ConfigError(str(exc)) from None
    if record is None:
        return _no_such_key(args.key)
    if args.json:
        print(json.dumps(_key_json(record)))
    else:
        print(printable(f"Updated key {record.id} ({record.name}): providers "
                        f"{_providers_text(record.policy)}, limits "
                        f"{_limits_text(record.policy)}, accounts "
                        f"{_accounts_text(record.policy, 'none')}."))
    return 0


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _store(settings)
    with db:
        try:
            rotated = keys.rotate(args.key)
        except StoreError as exc:
            print(f"olp: {exc}", file=sys.stderr)
            return 1
    if rotated is None:
        return _no_such_key(args.key)
    _show_secret(*rotated, "Rotated", json_out=args.json)
    return 0


def _list(settings: Settings, args: argparse.Namespace) -> int:
    """Every key with today's usage (from the ledger: a running proxy commits it every
    250 ms)."""
    from olp.accounting import today_by_key  # lazily, like the other subsystems

    db, keys = _store(settings)
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


def _revoke(settings: Settings, args: argparse.Namespace) -> int:
    db, keys = _store(settings)
    with db:
        revoked = keys.revoke(args.key)
    if not revoked:
        return _no_such_key(args.key)
    print(f"Revoked key {args.key}.")
    return 0


def _no_such_key(key: str) -> int:
    print(f"olp: no active key with id or name {key!r}", file=sys.stderr)
    return 1


def _show_secret(record: KeyRecord, token: str, done: str, *, json_out: bool) -> None:
    """The only time a secret is shown: as one JSON object, or for a person."""
    if json_out:
        print(json.dumps({**_key_json(record), "key": token}))
        return
    bound = format_binding(record.policy.accounts)
    print(printable(f"{done} {record.tier} key {record.id} ({record.name})"
                    + (f", bound to accounts {bound}:" if bound else ":")))
    print(f"  {token}")
    print("Copy it now: it is stored only as a hash and will not be shown again.")


def _key_json(record: KeyRecord) -> dict[str, object]:
    policy = record.policy
    return {"id": record.id, "name": record.name, "tier": record.tier,
            "prefix": record.display_prefix, "source": record.source,
            "created_at": record.created_at, "revoked_at": record.revoked_at,
            "providers": None if policy.providers is None else sorted(policy.providers),
            "accounts": [f"{p}:{a}" for p, a in policy.accounts],
            "limits": policy.limits.as_dict()}


def _providers_text(policy: KeyPolicy) -> str:
    return "all" if policy.providers is None else ",".join(sorted(policy.providers))


def _accounts_text(policy: KeyPolicy, none: str = "-") -> str:
    return format_binding(policy.accounts) or none


def _limits_text(policy: KeyPolicy) -> str:
    short = {"per_minute": "/min", "per_day": "/day", "per_week": "/week",
             "per_month": "/month", "tokens_per_day": "tok/day"}
    limits = policy.limits.as_dict()
    return ",".join(f"{v}{short[k]}" for k, v in limits.items()) if limits else "none"


def _table(records: Sequence[KeyRecord], today: dict[str, tuple[int, int]],
           out: TextIO) -> None:
    rows = [("ID", "NAME", "TIER", "PREFIX", "PROVIDERS", "ACCOUNTS", "LIMITS", "TODAY",
             "CREATED", "REVOKED")]
    rows += [(str(r.id), r.name, r.tier, r.display_prefix, _providers_text(r.policy),
              _accounts_text(r.policy), _limits_text(r.policy),
              "{}req/{}tok".format(*today.get(str(r.id), (0, 0))),
              minute(r.created_at), minute(r.revoked_at))
             for r in records]
    print_rows(rows, out)
