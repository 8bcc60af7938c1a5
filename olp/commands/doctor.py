"""``olp doctor``: each provider's binary, version, credentials (subscription or metered, and
why, and whether its models are served without a chain), risk tier and state, with the fix
for every problem found (the install hints are the provider kit's), then each chain left with
no usable entry and why; ``--probe`` also sends each usable provider one tiny request (the
model its spec names)."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import trio

from olp.config import Settings, load_registry
from olp.ir import ChatRequest, Error, Message, TextDelta, TextPart, Usage
from olp.lockdown import Verdict, runs_tested_version
from olp.providers import kit
from olp.runtime import provider_actors
from olp.runtime.routing import build_router, registry_refusal

from ._tables import duration, printable

PROBE = ChatRequest(model="probe", messages=(
    Message(role="user", content=(TextPart(text="Reply with the single word: OK"),)),))


def run(settings: Settings, *, probe: bool, out: TextIO | None = None) -> int:
    """Print the report (on ``out``, else stdout); 0 when at least one provider is usable
    (and, with ``probe``, answered) and no chain is left without a usable entry, else 1.
    Every line is :func:`printable`: it quotes paths, versions, chain and model names from
    the config and what the CLIs and providers said."""
    def say(line: str) -> None:
        print(printable(line), file=sys.stdout if out is None else out)

    logging.disable(logging.WARNING)  # the report says it all; no log lines in between
    try:
        runtime = provider_actors.build(settings, os.environ)
        router = build_router(settings, load_registry(), runtime.providers)
    finally:
        logging.disable(logging.NOTSET)
    for report in runtime.reports.values():
        if report.binary is not None and report.kind == "cli":
            sandbox = runtime.sandboxes.get(report.name)
            report.version, problem = provider_actors.checked_version(report.binary, sandbox)
            if problem is not None:
                report.problems.append(problem)
                report.fixes.append(f"add the directories it needs to providers."
                                    f"{report.name}.sandbox_read_only")
    verdicts = trio.run(_lockdown_all, [r for r in runtime.reports.values()
                                        if r.gate is not None and r.gate.enabled])
    for name, verdict in verdicts.items():
        if not verdict.ok:
            runtime.reports[name].problems.append(f"lockdown {verdict.line()}")
            runtime.reports[name].fixes.append(
                "install a CLI version whose lockdown holds (olp doctor names the tools), or "
                f"take the risk: providers.{name}.lockdown_check: false")
    usable = [r for r in runtime.reports.values() if r.usable]
    for report in runtime.reports.values():
        state = "ok" if report.usable else ("disabled" if not report.enabled else "PROBLEM")
        risk = f" risk={report.risk_tier}" if report.risk_tier else ""
        say(f"{report.name:<10} {state:<9} kind={report.kind}{risk}"
            f"{' metered' if report.metered else ''} max_concurrent={report.max_concurrent}")
        if report.binary:
            say(f"  binary:      {report.binary} ({report.version or 'version unknown'})")
        meaning = next((m for t, m in kit.TIER_MEANING.items() if t == report.risk_tier), "")
        if not report.enabled and report.risk_tier in ("B", "C"):
            tier = report.risk_tier
            consent = f" and providers.{report.name}.consent: true" if tier == "B" else ""
            say(f"  enable:      risk tier {tier} ({meaning}): set providers.enabled."
                f"{report.name}: true{consent}")
        if report.enabled and report.kind == "cli" and report.binary:
            say(f"  credentials: {'found' if report.credentials else 'missing'}")
            if len(report.accounts) > 1 or any(a.home for a in report.accounts.values()):
                for account in report.accounts.values():
                    say(f"  account:     {account_line(report.name, account)}")
            for account in report.accounts.values():
                if account.login is not None:
                    say(f"  login:       {kept_login_line(account)}")
        if report.enabled:
            say(f"  credential:  metered ({report.metered_by})" if report.metered_by else
                "  credential:  subscription")
            refused = registry_refusal(runtime.providers[report.name], settings)
            if refused is not None:
                say(f"  no chain:    its models answer 404: {refused}")
        if report.gate is not None:
            target = report.gate.target
            untested = "" if runs_tested_version(target, report.version) else (
                " (not the installed version: it serves only once its lockdown check passes)"
                if report.gate.enabled else
                " (not the installed version, and lockdown_check is false: it serves UNCHECKED)")
            say(f"  tested on:   {target.cli} {target.tested}{untested}")
            found = verdicts.get(report.name)
            say("  lockdown: " + (found.line() if found is not None
                                 else "not checked (lockdown_check: false)"))
        if report.sandbox == "bubblewrap":
            say("  sandbox:     bubblewrap (sees only the system, its installation and its "
                "own temporary home)")
        elif report.sandbox == "off":
            say(f"  sandbox:     OFF: the CLI can read every file this user can "
                f"(providers.{report.name}.sandbox: false)")
        for problem, fix in zip(report.problems, report.fixes, strict=True):
            say(f"  problem:     {problem}")
            say(f"  fix:         {fix}")
    for chain, reason in router.unusable_chains.items():
        say(f"chain {chain}: PROBLEM no usable entry (requests to it answer 503): {reason}")
    if probe and usable:
        results = trio.run(_probe_all, runtime, [r.name for r in usable])
        for name, outcome in results.items():
            say(f"probe {name:<10} {outcome}")
        answered = any(o.startswith("ok") for o in results.values())
        return 0 if answered and not router.unusable_chains else 1
    return 0 if usable and not router.unusable_chains else 1


def account_line(provider: str, account: provider_actors.AccountReport) -> str:
    """One login of a provider, for ``olp doctor``: its name, whom it serves, whether its
    login was found (metered or subscription), where it lives, and the fix when missing."""
    serves = "every key" if account.serves_all else "bound keys only"
    where = account.home or "the owner's own login"
    if account.expired:
        return (f"{account.name}: login EXPIRED ({where}; serves {serves}): "
                f"{account.problem}; run `olp login {provider} --account {account.name}`")
    if not account.credentials:
        return (f"{account.name}: MISSING login ({where}; serves {serves}): run `olp login "
                f"{provider} --account {account.name}`")
    credit = f"metered ({account.metered_by})" if account.metered_by else "subscription"
    return f"{account.name}: login found, {credit} ({where}; serves {serves})"


def kept_login_line(account: provider_actors.AccountReport) -> str:
    """A login OLP keeps fresh (issue #41), for ``olp doctor``: expired with the fix, or
    when its token ends and when OLP refreshes it (only its access token enters a spawn)."""
    login = account.login or {}
    who = "" if account.name == "default" else f"{account.name}: "
    if login.get("state") == "expired":
        return f"{who}EXPIRED: {login.get('problem')} -> run: {login.get('fix')}"
    left = login.get("expires_in_s")
    refresh = login.get("refresh_in_s")
    when = (f"its token ends in {duration(left)}" if isinstance(left, int) and left > 0
            else "its token has ended")
    then = (f"; OLP refreshes it in {duration(refresh)}" if isinstance(refresh, int) and refresh
            else "; OLP refreshes it at start" if refresh is not None else
            "; it holds no refresh token")
    return (f"{who}kept by OLP ({login.get('cli')} login in {login.get('file')}): {when}{then}"
            "; spawns get only its access token")


async def _lockdown_all(reports: list[provider_actors.Report]) -> dict[str, Verdict]:
    """Each gated CLI's verdict (kept, or checked now, all at once)."""
    verdicts: dict[str, Verdict] = {}

    async def one(report: provider_actors.Report) -> None:
        assert report.gate is not None
        verdicts[report.name] = await report.gate.verify()

    async with trio.open_nursery() as nursery:
        for report in reports:
            nursery.start_soon(one, report)
    return verdicts


async def _probe_all(runtime: provider_actors.Runtime, names: list[str]) -> dict[str, str]:
    results: dict[str, str] = {}
    async with trio.open_nursery() as nursery:
        for name in names:
            await nursery.start(runtime.actors[name].run)
        async with trio.open_nursery() as probes:
            for name in names:
                probes.start_soon(_probe, runtime, name, results)
        nursery.cancel_scope.cancel()
    return results


async def _probe(runtime: provider_actors.Runtime, name: str, results: dict[str, str]) -> None:
    provider = runtime.providers[name].settings
    spec = provider.spec
    model = spec.probe_model if spec is not None and spec.probe_model else provider.name
    ticket = await runtime.actors[name].submit(PROBE, model)
    text, usage = "", None
    try:
        with trio.move_on_after(180):
            async for event in ticket.events:
                if isinstance(event, TextDelta):
                    text += event.text
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Error):
                    results[name] = f"FAILED {event.code} ({event.category}): {event.message}"
                    return
        if name not in results:
            tokens = f", {usage.total_tokens} tokens" if usage else ""
            results[name] = f"ok: {text.strip()[:40]!r}{tokens}" if text else "FAILED: timeout"
    finally:
        ticket.abandon()
