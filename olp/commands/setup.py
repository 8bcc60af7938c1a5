"""``olp setup``: find the CLIs this machine has, and write a config that uses them.

Each built-in provider is checked the way ``olp start`` would (binary on ``PATH`` or its
override, its version read the way it is spawned, credentials, metered or subscription, risk
tier). ``$OLP_HOME/config.json`` then enables the usable ones, switches off the others (so
``olp start`` does not warn about them on every start) and gets four chains from the models
registry — ``default``, ``coding``, ``smart``, ``fast`` — each across the usable providers in
the kit's order. A provider whose credential is metered (an API key: spend per token) joins the
chains only with the owner's consent (asked; ``--yes`` leaves it out unless
``--allow-metered``); a tier-B provider is enabled only with its consent (asked; never with
``--yes`` alone); tier A never. An existing config is kept unless ``--force`` (then the old one
is copied to ``config.json.bak``). Blocks on disk and on each CLI's ``--version``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from olp.config import (
    AccountConfig,
    Config,
    ProviderConfig,
    ProvidersConfig,
    Registry,
    Settings,
    load_config,
    load_registry,
)
from olp.providers import kit
from olp.runtime import provider_actors
from olp.runtime.routing import build_router
from olp.store import DEFAULT_ACCOUNT, valid_account_name

from ._tables import printable

#: The default chains; each provider's spec says which registry alias answers each
#: (:attr:`olp.providers.kit.ProviderSpec.default_chains`), in kit order.
CHAINS: tuple[str, ...] = ("default", "coding", "smart", "fast")

Ask = Callable[[str], bool]


@dataclass(slots=True)
class Found:
    """One provider as setup saw it."""

    name: str
    binary: str | None
    version: str | None
    credentials: bool
    metered: bool
    tier: str
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    use: bool = False
    why_not: str = ""
    logins: list[str] = field(default_factory=list)  # its accounts with a login found (#30)


def detect(settings: Settings, environ: Mapping[str, str], out: TextIO,
           *, versions: bool = True) -> list[Found]:
    """Every built-in CLI provider, checked (prints a line per provider while it works)."""
    homes = account_homes(settings.home)
    bare = Settings(home=settings.home, config_path=settings.config_path, port=settings.port,
                    bind=settings.bind, log_level=settings.log_level,
                    config=Config(providers=ProvidersConfig(blocks={
                        name: ProviderConfig(accounts={a: AccountConfig() for a in accounts})
                        for name, accounts in homes.items()})))
    logging.disable(logging.WARNING)
    try:
        runtime = provider_actors.build(bare, environ)
    finally:
        logging.disable(logging.NOTSET)
    found = []
    for spec in kit.builtin_specs():
        report = runtime.reports.get(spec.name)
        if spec.kind != "cli" or report is None:
            continue
        print(f"checking {spec.name} ({spec.command})...", file=out, flush=True)
        version = None
        if versions and report.binary is not None:
            version, problem = provider_actors.checked_version(report.binary,
                                                         runtime.sandboxes.get(spec.name))
            if problem is not None:
                report.problems.append(problem)
                report.fixes.append("see `olp doctor`")
        found.append(Found(spec.name, report.binary, version, report.credentials,
                           report.metered, spec.risk_tier, list(report.problems),
                           list(report.fixes),
                           logins=[n for n, a in report.accounts.items() if a.credentials]))
    return found


def account_homes(home: Path) -> dict[str, list[str]]:
    """The account homes ``olp login`` made under ``$OLP_HOME/accounts``, by provider:
    ``{"anthropic": ["alice", "bob"]}`` (a directory that cannot name an account is not
    one). Lists a few directories."""
    out: dict[str, list[str]] = {}
    for spec in kit.builtin_specs():
        base = home / "accounts" / spec.name
        if spec.kind == "cli" and base.is_dir():
            names = sorted(p.name for p in base.iterdir()
                           if p.is_dir() and valid_account_name(p.name) and p.name != "default")
            if names:
                out[spec.name] = names
    return out


def decide(found: list[Found], *, ask: Ask | None, allow_metered: bool) -> None:
    """Which providers the config uses (``ask``: None when there is no one to ask)."""
    for f in found:
        if f.binary is None or f.problems or not f.credentials:
            f.why_not = "; ".join(f.problems) or "no credentials found"
            continue
        if f.tier == "A":
            f.why_not = f"risk tier A ({kit.TIER_MEANING['A']})"
            continue
        if f.tier == "B" and not (ask and ask(
                f"{f.name} is risk tier B ({kit.TIER_MEANING['B']}). Enable it?")):
            f.why_not = "risk tier B: no consent given"
            continue
        if f.metered and not (allow_metered or (ask and ask(
                f"{f.name}'s credential is an API key: its requests are paid per token. Use "
                "it in the chains?"))):
            f.why_not = "metered (an API key): not used without consent (--allow-metered)"
            continue
        f.use = True


def build_config(found: list[Found], registry: Registry) -> dict[str, Any]:
    """The config.json document for the providers setup decided to use."""
    using = [f for f in found if f.use]
    config: dict[str, Any] = {"providers": {"enabled": {f.name: f.use for f in found}}}
    for f in using:
        block: dict[str, Any] = {}
        if f.tier == "B":
            block["consent"] = True
        accounts = [n for n in f.logins if n != DEFAULT_ACCOUNT]
        if accounts:  # each serves only the keys bound to it (olp keys … --accounts)
            block["accounts"] = {n: {} for n in accounts}
        if block:
            config["providers"][f.name] = block
    chains: dict[str, list[dict[str, Any]]] = {}
    for chain in CHAINS:
        entries = []
        for f in using:
            spec = kit.find(f.name)
            alias = spec.default_chains.get(chain) if spec is not None else None
            entry = registry.resolve(alias, f.name) if alias is not None else None
            if entry is not None:
                entries.append({"name": f"{f.name}-{chain}", "provider": f.name,
                                "model": entry.model, **({"metered": True} if f.metered
                                                         else {})})
        if entries:
            chains[chain] = entries
    if chains:
        config["routing"] = {"chains": chains}
    return config


def run(settings: Settings, *, yes: bool, force: bool, allow_metered: bool, out: TextIO,
        environ: Mapping[str, str] = os.environ, ask: Ask | None = None,
        versions: bool = True) -> int:
    """Detect, decide, write. 0 when a config was written with at least one provider, 1 when
    none is usable (the config is still written) or the config exists without ``--force``,
    2 when a question would be needed but there is no terminal to ask (use ``--yes``)."""
    path = settings.config_path
    if path.exists() and not force:
        print(f"{path} exists; nothing changed. Run `olp setup --force` to replace it (the "
              "old one is kept as config.json.bak), or edit it.", file=out)
        return 1
    if ask is None and not yes:
        print("olp setup asks before using metered or tier-B providers: run it in a terminal, "
              "or pass --yes (add --allow-metered to use API-key credentials).", file=out)
        return 2
    found = detect(settings, environ, out, versions=versions)
    decide(found, ask=None if yes else ask, allow_metered=allow_metered)
    registry = load_registry()
    config = build_config(found, registry)
    dropped = drop_unusable_chains(config, settings, environ, registry)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    text = json.dumps(config, indent=2) + "\n"
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    print(f"wrote {path}" + (" (the old one is config.json.bak)" if force else ""), file=out)
    for f in found:
        what = f"{f.binary or 'not found'}" + (f" {f.version}" if f.version else "")
        credit = "metered" if f.metered else "subscription"
        if f.use:
            print(printable(f"  {f.name:<10} used: {what}, {credit}, risk {f.tier}"), file=out)
            if f.logins != [DEFAULT_ACCOUNT]:
                print(printable(f"  {'':<10} logins: " + ", ".join(
                    "default (yours, for every key)" if n == DEFAULT_ACCOUNT else
                    f"{n} (for the keys bound to it)" for n in f.logins)), file=out)
        else:  # a CLI's version line and problems are its words: shown escaped
            print(printable(f"  {f.name:<10} not used: {f.why_not}"), file=out)
            for fix in f.fixes:
                print(printable(f"  {'':<10} fix: {fix}"), file=out)
    chains = config.get("routing", {}).get("chains", {})
    for name, entries in chains.items():
        print(f"  chain {name}: " + " -> ".join(f"{e['provider']}/{e['model']}"
                                               for e in entries), file=out)
    for name, reason in dropped.items():
        print(printable(f"  chain {name}: not written, `olp start` could not use it: {reason}"),
              file=out)
    if not chains and dropped:
        print("No chain can be used yet (see why above): fix that, then run `olp setup "
              "--force`.", file=out)
        return 1
    if not chains:
        print("No provider can be used yet: install and log into one (see the fixes above), "
              "then run `olp setup --force`.", file=out)
        return 1
    print("Next: `olp start` (or `olp service install`), then `olp keys create NAME` for "
          "each person or tool.", file=out)
    print("Another person's subscription: `olp login PROVIDER --account NAME` (their own "
          "login), then `olp setup --force` and `olp keys create NAME --accounts "
          "PROVIDER:NAME` for their key.", file=out)
    return 0


def drop_unusable_chains(config: dict[str, Any], settings: Settings,
                         environ: Mapping[str, str], registry: Registry) -> dict[str, str]:
    """Remove from ``config`` every chain ``olp start`` would find unusable with it (the same
    router, the same environment), and return why each went. What setup detected and what
    the proxy will see can differ (a metered credential setup read as a subscription wrote
    chains whose entries lacked ``"metered": true``)."""
    chains = config.get("routing", {}).get("chains", {})
    if not chains:
        return {}
    with tempfile.TemporaryDirectory(prefix="olp-setup-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        trial = dataclasses.replace(settings, config=load_config(path), config_path=path)
    logging.disable(logging.WARNING)
    try:
        runtime = provider_actors.build(trial, environ)
        unusable = dict(build_router(trial, registry, runtime.providers).unusable_chains)
    finally:
        logging.disable(logging.NOTSET)
    for name in unusable:
        chains.pop(name, None)
    if not chains:
        config.pop("routing", None)
    return unusable


def terminal_ask(inp: Callable[[str], str] = input) -> Ask:
    """A yes/no question on the terminal (default no)."""
    def ask(question: str) -> bool:
        return inp(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    return ask
