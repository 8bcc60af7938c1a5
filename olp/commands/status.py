"""``olp status`` and ``olp chain show``: what the running proxy is doing, and where a model's
requests go.

``status`` reads the running proxy's ``/health`` (as the owner). ``chain show`` works from the
config like ``olp doctor`` (which entries are pruned, and why, needs no running proxy), adding
the live cooldowns and circuits when a proxy answers, else the ones it last saved. Both print
for a person, or with ``--json`` one object. They block on I/O (a command, not the server).
Their commands (:mod:`.admin`) import this module when they run: it builds the provider stack.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from olp.config import Settings, load_registry
from olp.engine import UnknownModel, UnusableChain
from olp.runtime import provider_actors
from olp.runtime.routing import build_router
from olp.store import DEFAULT_ACCOUNT, slot_name

from ._tables import duration


def status(health: Mapping[str, Any], out: TextIO) -> None:
    """The running proxy's ``/health`` (owner view) for a person."""
    print(f"OLP {health.get('version', '?')}, up {duration(health.get('uptime_s', 0))}",
          file=out)
    for name, p in health.get("providers", {}).items():
        if not p.get("running"):
            problems = "; ".join(p.get("problems") or []) or "disabled"
            print(f"  {name:<10} not running: {problems}", file=out)
            continue
        line = (f"  {name:<10} {p.get('in_flight', 0)}/{p.get('max_concurrent', '?')} in flight"
                f", {p.get('jobs_started', 0)} jobs"
                + (f", {p['jobs_refused']} refused (busy)" if p.get("jobs_refused") else "")
                + (f", account {p['account']}" if p.get("account") else "")
                + ("" if p.get("credentials", True) else ", NO LOGIN")
                + f", {'metered' if p.get('metered') else 'subscription'}"
                + (f", risk {p['risk_tier']}" if p.get("risk_tier") else ""))
        print(line, file=out)
        login = p.get("login")
        if login:
            print(f"  {'':<10} {login_line(login)}", file=out)
        for cooling in p.get("cooling", []):
            print(f"  {'':<10} cooling ({cooling['reason']}) for "
                  f"{duration(cooling['remaining_s'])}", file=out)
        if p.get("circuit_open"):
            print(f"  {'':<10} circuit open", file=out)
    for name, chain in health.get("chains", {}).items():
        state = "ok" if chain.get("usable") else f"UNUSABLE: {chain.get('reason')}"
        print(f"chain {name}: {state}", file=out)


def login_line(login: Mapping[str, Any]) -> str:
    """A kept login (issue #41) in one line: ``login ok (…)``, or ``login EXPIRED: why →
    run: fix``."""
    if login.get("state") == "expired":
        return f"login EXPIRED: {login.get('problem')} -> run: {login.get('fix')}"
    left = login.get("expires_in_s")
    shown = f"token ends in {duration(left)}" if isinstance(left, int | float) else "no end"
    refresh = login.get("refresh_in_s")
    state = "ok" if login.get("state") == "ok" else f"REFRESH FAILING ({login.get('problem')})"
    return (f"login {state}: {shown}"
            + (f", refreshed by OLP in {duration(refresh)}" if refresh is not None else "")
            + f" ({login.get('refreshes', 0)} refreshes since start)")


def chain_show(settings: Settings, model: str | None, live: Mapping[str, Any] | None,
               saved: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each chain (or ``model``'s route) with its entries, the ones pruned at start-up and
    why, and the cooldowns and circuits of its providers (``live``: the running proxy's
    ``/health`` resilience; else ``saved``, what it last saved)."""
    logging.disable(logging.WARNING)  # the output says it all
    try:
        runtime = provider_actors.build(settings, os.environ)
        router = build_router(settings, load_registry(), runtime.providers)
    finally:
        logging.disable(logging.NOTSET)
    resilience = dict(live or saved or {})
    now = time.time()
    chains = router.chain_status()
    names = [model] if model is not None else list(chains)
    out: dict[str, Any] = {"source": "running proxy" if live else
                           "saved state" if saved else "config only", "routes": {}}
    for name in names:
        route: dict[str, Any] = dict(chains.get(name, {"usable": True, "pruned": []}))
        route["kind"] = "chain" if name in chains else "model"
        try:
            hops = router.resolve(name).hops
        except UnusableChain as exc:
            hops, route["error"] = (), exc.message
        except UnknownModel as exc:
            hops, route["error"] = (), exc.message
        route["hops"] = [{"entry": h.name, "provider": h.provider, "model": h.model,
                          "on": sorted(h.on) if h.on is not None else None,
                          "metered": h.metered, "accounts": list(h.accounts),
                          "shared": list(h.shared),
                          "resting": _resting(h.provider, resilience, now, h.accounts)}
                         for h in hops]
        out["routes"][name] = route
    return out


def print_chains(view: Mapping[str, Any], out: TextIO) -> None:
    print(f"(cooldowns from the {view['source']})", file=out)
    for name, route in view["routes"].items():
        print(f"{route['kind']} {name}:", file=out)
        if "error" in route:
            print(f"  {route['error']}", file=out)
        for i, hop in enumerate(route["hops"]):
            rest = "; ".join(hop["resting"]) or "ready"
            gate = f" on={','.join(hop['on'])}" if hop["on"] else ""
            credit = " metered" if hop["metered"] else ""
            logins = hop.get("accounts") or []
            accounts = "" if logins in ([], ["default"]) else \
                " accounts=" + ",".join(a if a in hop.get("shared", []) else f"{a}(bound)"
                                        for a in logins)
            print(f"  {i}. {hop['entry']} -> {hop['provider']}/{hop['model']}{gate}{credit}"
                  f"{accounts}: {rest}", file=out)
        for why in route.get("pruned", []):
            print(f"  pruned: {why}", file=out)


def _resting(provider: str, resilience: Mapping[str, Any], now: float,
             accounts: Sequence[str] = (DEFAULT_ACCOUNT,)) -> list[str]:
    """The cooldowns and open circuits of ``provider``'s ``accounts`` (each named when it
    is not the default one)."""
    slots = {slot_name(provider, a): "" if a == DEFAULT_ACCOUNT else f"{a}: "
             for a in accounts}
    out = [f"{slots[c['provider']]}cooling ({c.get('reason')}) for "
           f"{duration(float(c['until']) - now)}"
           for c in resilience.get("cooldowns", [])
           if c.get("provider") in slots and float(c.get("until", 0)) > now]
    out += [f"{slots[c['provider']]}circuit open for "
            f"{duration(float(c['open_until']) - now)}"
            for c in resilience.get("circuits", [])
            if c.get("provider") in slots and float(c.get("open_until", 0)) > now]
    return out

