"""The providers this proxy can run, what each needs, and what is wrong.

Used by ``olp start`` (to build the actors), ``/health`` and ``olp doctor`` (to say, for
each provider, whether its binary and credentials were found and how to fix what is not).
Every provider fact (adapter, install hint, binary, risk tier) comes from the provider kit,
:mod:`olp.providers.kit`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olp.actors import (
    BWRAP_HINT,
    CliConfig,
    CliRunner,
    JobRunner,
    ProcessSpawner,
    ProviderActor,
    Sandbox,
    SessionPolicy,
    WarmSettings,
    find_bwrap,
    install_roots,
)
from olp.actors._toolbridge import bridge_read_roots
from olp.config import ProviderSettings, Settings, resolve_binary
from olp.lockdown import TARGETS, LockdownGate, VerdictStore, verifier
from olp.logins import EndedLogins, LoginKeeper, read_json
from olp.providers import kit
from olp.providers.openai_compat import HttpConfig, OpenAICompatRunner, RetryPolicy
from olp.runtime.routing import Login, Provider
from olp.store import DEFAULT_ACCOUNT, AsyncSessionStore, slot_name

log = logging.getLogger("olp.runtime.provider_actors")

#: Under ``OLP_HOME``: the logins whose refresh was refused for good (issue #41).
LOGINS_FILE = "logins.json"


@dataclass(slots=True)
class AccountReport:
    """One login of a CLI provider as ``/health`` and ``olp doctor`` show it (issue #30):
    where it lives (``None``: the owner's own, found as before accounts existed), whether it
    was found, and metered or subscription."""

    name: str
    home: str | None
    serves_all: bool
    credentials: bool = False
    metered: bool = False
    metered_by: str | None = None
    problem: str = ""  # what is missing, and its fix
    actor: str = ""  # the actor serving it (:func:`olp.store.slot_name`)
    expired: bool = False  # its login file is there, but its token ended (``problem``: why)
    login: dict[str, Any] | None = None  # kept by OLP (issue #41): its keeper's status

    def as_dict(self) -> dict[str, Any]:
        return {"home": self.home, "serves": "*" if self.serves_all else "bound keys",
                "credentials": self.credentials, "expired": self.expired,
                "metered": self.metered, "metered_by": self.metered_by,
                "problem": self.problem or None, "login": self.login}


@dataclass(slots=True)
class Report:
    """One provider as ``/health`` and ``olp doctor`` show it."""

    name: str
    kind: str
    enabled: bool
    metered: bool
    max_concurrent: int
    metered_by: str | None = None  # why it is metered: the credential's source, or the config
    risk_tier: str | None = None  # the kit's tier (D, C, B or A); None for an unknown kind
    binary: str | None = None
    version: str | None = None
    credentials: bool = False
    sandbox: str | None = None  # "bubblewrap" when spawns are confined, "off" when opted out
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    gate: LockdownGate | None = None  # the CLI's lockdown self-check (issue #26)
    accounts: dict[str, AccountReport] = field(default_factory=dict)  # issue #30

    @property
    def usable(self) -> bool:
        return self.enabled and not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "enabled": self.enabled, "metered": self.metered,
                "metered_by": self.metered_by,
                "risk_tier": self.risk_tier, "binary": self.binary, "version": self.version,
                "credentials": self.credentials, "sandbox": self.sandbox,
                "problems": self.problems,
                "accounts": {n: a.as_dict() for n, a in self.accounts.items()}}


@dataclass(slots=True)
class Runtime:
    actors: dict[str, ProviderActor]
    providers: dict[str, Provider]
    reports: dict[str, Report]
    http_runners: list[OpenAICompatRunner] = field(default_factory=list)
    sandboxes: dict[str, Sandbox] = field(default_factory=dict)

    async def aclose(self) -> None:
        """Close the HTTP providers' connection pools (after the actors have stopped)."""
        for runner in self.http_runners:
            await runner.aclose()


def build(settings: Settings, environ: Mapping[str, str], *,
          session_store: AsyncSessionStore | None = None) -> Runtime:
    """An actor per enabled provider that can run here, and per account of a CLI provider
    (issue #30: named by :func:`olp.store.slot_name`); the others are reported, loudly.
    ``session_store``: where CLI sessions are kept between turns (``None``: nowhere, so
    ``providers.<name>.sessions`` has no effect, as in the commands that only inspect)."""
    runtime = Runtime({}, {}, {})
    spawner = ProcessSpawner(kill_grace=settings.config.server.kill_grace_s)
    for name in settings.provider_names():
        provider = settings.provider(name)
        spec = provider.spec
        metered_by = metered_source(settings, provider, environ)
        report = Report(name, provider.kind, provider.enabled, metered_by is not None,
                        provider.max_concurrent, metered_by,
                        spec.risk_tier if spec else None)
        runtime.reports[name] = report
        if not provider.enabled:
            runtime.providers[name] = Provider(
                provider, running=False, credentials=False, metered=report.metered,
                problem="disabled", fix=enable_fix(name, spec.risk_tier if spec else "D"))
            continue
        runners: dict[str, JobRunner] = {}
        if spec is not None and spec.kind == "http":
            http = _http_runner(name, provider, environ, report)
            runtime.http_runners.append(http)
            runners[name] = http
        else:
            runners = _cli_runners(name, provider, spec, settings, environ, spawner, report,
                                   session_store)
        if not runners:
            for problem in report.problems:
                log.warning("provider skipped: %s", problem, extra={"provider": name})
            runtime.providers[name] = Provider(
                provider, running=False, credentials=False, metered=report.metered,
                problem="; ".join(report.problems), fix="; ".join(report.fixes))
            continue
        if not report.credentials:
            log.warning("provider has no credentials; requests to it fail with AUTH_MISSING",
                        extra={"provider": name, "fix": report.fixes[-1]})
        first = next(iter(runners.values()))
        if isinstance(first, CliRunner) and spec is not None:
            # one check per binary; as a login when any of its accounts spawns with one
            login = any(spec.metered_by(r.config.env, r.config.proxy_env,
                                        real_home=r.config.real_home) is None
                        for r in runners.values() if isinstance(r, CliRunner))
            report.gate = lockdown_gate(name, first, spec, provider, settings, environ,
                                        login=login)
            runtime.sandboxes.update({name: first.config.sandbox} if first.config.sandbox
                                     else {})
        for slot, job_runner in runners.items():
            cli = job_runner if isinstance(job_runner, CliRunner) else None
            runtime.actors[slot] = ProviderActor(
                slot, job_runner, max_concurrent=provider.max_concurrent,
                pool=cli.pool if cli is not None else None, admission=report.gate,
                login=cli.login if cli is not None else None,
                threads=cli.threads if cli is not None else None)
        runtime.providers[name] = Provider(
            provider, running=True, credentials=report.credentials, metered=report.metered,
            problem="" if report.credentials else "no credentials",
            fix="" if report.credentials else report.fixes[-1],
            accounts=tuple(Login(a.name, a.credentials, a.metered, a.serves_all)
                           for a in report.accounts.values()))
    return runtime


def lockdown_gate(name: str, runner: CliRunner, spec: kit.ProviderSpec,
                  provider: ProviderSettings, settings: Settings,
                  environ: Mapping[str, str], *, login: bool | None = None,
                  ) -> LockdownGate | None:
    """The gate that admits ``name``'s jobs once its binary passed the lockdown self-check
    (``None`` for a CLI the check does not know); ``login``: whether its spawns use a login
    rather than a key (default: as the provider's own credential says). Warns when the
    owner turned it off."""
    target = TARGETS.get(spec.command or "")
    if target is None:
        return None
    if not provider.lockdown_check:
        log.warning("lockdown check is OFF: a %s version that offers the model a built-in tool "
                    "would be used (providers.%s.lockdown_check is false)", target.cli, name,
                    extra={"provider": name})
    config = runner.config
    if login is None:  # no key: its spawns use a login
        login = spec.metered_by(provider.env, environ) is None
    units = spec.warm_units() if spec.warm_units is not None and provider.warm > 0 else None
    verify = verifier(runner, target, spec.probe_model or name,
                      VerdictStore(settings.home / "lockdown.json"), login=login, units=units,
                      threads=spec.thread_servers if provider.app_server else None,
                      version_of=lambda: cli_version(config.binary, config.sandbox)[0])
    return LockdownGate(name, config.binary, verify, target=target,
                        enabled=provider.lockdown_check)


def enable_fix(name: str, tier: str) -> str:
    """How to enable a disabled provider, by its risk tier (:data:`olp.providers.kit.RiskTier`)."""
    if tier == "A":
        return f"none: {name} is risk tier A ({kit.TIER_MEANING['A']})"
    if tier == "B":
        return (f"set providers.enabled.{name} and providers.{name}.consent to true (risk "
                f"tier B: {kit.TIER_MEANING['B']})")
    if tier == "C":
        return f"set providers.enabled.{name} to true (risk tier C: opt-in)"
    return f"set providers.enabled.{name} to true (or remove it)"


def metered_source(settings: Settings, provider: ProviderSettings,
                   environ: Mapping[str, str]) -> str | None:
    """Why ``provider`` is metered, or ``None``: ``providers.<name>.metered`` when the config
    says (an override either way), else what the kit detects from where its credential comes
    from (:meth:`olp.providers.kit.ProviderSpec.metered_by`)."""
    block = settings.config.providers.blocks.get(provider.name)
    if block is not None and block.metered is not None:
        return f"providers.{provider.name}.metered is true" if block.metered else None
    spec = provider.spec
    return spec.metered_by(provider.env, environ) if spec is not None else None


def _cli_runners(name: str, provider: ProviderSettings, spec: kit.ProviderSpec | None,
                 settings: Settings, environ: Mapping[str, str], spawner: ProcessSpawner,
                 report: Report, session_store: AsyncSessionStore | None = None,
                 ) -> dict[str, JobRunner]:
    """A runner per account of a CLI provider, by actor name; ``{}`` when the CLI cannot run
    here (the report says why). Each account's runner finds its login only in its own home
    (:meth:`~olp.providers.kit.ProviderSpec.account_env`): never the owner's, never another
    account's."""
    base = _cli_base(name, provider, spec, settings, environ, report)
    if base is None or spec is None or spec.adapter is None:
        return {}
    binary, sandbox, owner_home = base
    runners: dict[str, JobRunner] = {}
    for account in provider.accounts:
        proxy_env = spec.account_env(environ, account.home)
        # Another person's login never inherits the owner's credential from the provider's
        # env: only its settings (a base URL, retry knobs), then the account's own env.
        inherited = provider.env if account.home is None else \
            {k: v for k, v in provider.env.items() if k not in spec.login_vars}
        env = {**inherited, **account.env}
        adapter = spec.adapter()
        slot = slot_name(name, account.name)
        keeper = login_keeper(spec, slot, account.name, {**adapter.spawn_env(proxy_env), **env},
                              account.home or owner_home, hold_s=provider.timeouts.total_s,
                              ended=EndedLogins(settings.home / LOGINS_FILE))
        runner = CliRunner(adapter, spawner, CliConfig(
            binary=binary, env=env, extra_args=provider.extra_args,
            home_files=provider.home_files, timeouts=provider.timeouts,
            real_home=account.home or owner_home, proxy_env=proxy_env, sandbox=sandbox,
            sessions=SessionPolicy(session_store, provider.session_ttl_s)
            if provider.sessions and session_store is not None else None,
            account=account.name),
            warm=WarmSettings(size=provider.warm, ttl_s=provider.warm_ttl_s),
            units=spec.warm_units() if spec.warm_units is not None else None, login=keeper,
            threads=spec.thread_servers() if spec.thread_servers is not None
            and provider.app_server else None)
        missing = runner.preflight()
        expired = _expired(spec, runner) if missing is None else None
        # a login whose refresh was refused for good stays routed: its keeper skips its hops
        # until the file changes (a new login is used at once, without a reload)
        kept = keeper.status() if keeper is not None else None
        ended = kept["problem"] if kept is not None and kept["state"] == "expired" else None
        by = _account_metered(settings, provider, spec, env, proxy_env, account.home)
        report.accounts[account.name] = AccountReport(
            account.name, None if account.home is None else str(account.home),
            account.serves_all, credentials=missing is None and expired is None,
            metered=by is not None, metered_by=by, actor=slot,
            expired=expired is not None or ended is not None,
            problem=missing.message if missing is not None else expired or ended or "",
            login=kept)
        runners[slot] = runner
    found = [a for a in report.accounts.values() if a.credentials]
    report.credentials = bool(found)
    if not found:
        report.problems.append("no credentials found")
        report.fixes.append(next(iter(report.accounts.values())).problem)
    return runners


def login_keeper(spec: kit.ProviderSpec, slot: str, account: str, env: Mapping[str, str],
                 real_home: Path, *, hold_s: float, ended: EndedLogins | None = None,
                 ) -> LoginKeeper | None:
    """The keeper of one account's login (issue #41) when its CLI keeps a refreshable OAuth
    login in a file and that file holds one now (``env``: the CLI's environment); ``None``
    for a key, a token in ``env``, or no login yet. ``ended``: where logins that ended are
    kept between starts. Reads the file (briefly blocking)."""
    fmt = spec.login
    path = fmt.path(env, real_home) if fmt is not None else None
    if fmt is None or path is None or fmt.parse(read_json(path)) is None:
        return None
    fix = f"olp login {spec.name}" + ("" if account == DEFAULT_ACCOUNT else f" --account {account}")
    return LoginKeeper(slot, fmt, path, fix=fix, hold_s=hold_s, ended=ended)


def _expired(spec: kit.ProviderSpec, runner: CliRunner) -> str | None:
    """Why the login a runner found can no longer log in (its token ended, with nothing to
    refresh it), or ``None``. Reads its login file."""
    credentials = spec.credentials
    if not isinstance(credentials, kit.ExpiringLogins):
        return None
    config = runner.config
    seen = {**runner.adapter.spawn_env(config.proxy_env), **config.env}
    return credentials.login_expired(seen, config.real_home, time.time())


def _account_metered(settings: Settings, provider: ProviderSettings, spec: kit.ProviderSpec,
                     env: Mapping[str, str], proxy_env: Mapping[str, str],
                     home: Path | None) -> str | None:
    """Why one account is metered (:func:`metered_source`, with the account's own ``env``
    and home), or ``None``."""
    block = settings.config.providers.blocks.get(provider.name)
    if block is not None and block.metered is not None:
        return f"providers.{provider.name}.metered is true" if block.metered else None
    return spec.metered_by(env, proxy_env, real_home=home)


def _cli_base(name: str, provider: ProviderSettings, spec: kit.ProviderSpec | None,
              settings: Settings, environ: Mapping[str, str], report: Report,
              ) -> tuple[str, Sandbox | None, Path] | None:
    """The CLI's binary, its sandbox and the owner's home, shared by its accounts; ``None``
    (the report says why) when it cannot run here."""
    if spec is None or spec.kind != "cli" or spec.adapter is None:
        report.problems.append(f"{provider.kind} provider `{name}` is not supported yet")
        report.fixes.append(f"disable it: \"providers\": {{\"enabled\": {{\"{name}\": false}}}}")
        return None
    binary = resolve_binary(name, settings, environ)
    report.binary = binary
    if binary is None:
        command = provider.binary or spec.command
        report.problems.append(f"`{command}` not found on PATH")
        report.fixes.append(f"{spec.install_hint}; or set providers.{name}.binary")
        return None
    real_home = Path(environ.get("HOME") or Path.home())
    sandbox: Sandbox | None = None
    if provider.sandbox:
        bwrap = find_bwrap(environ)
        if bwrap is None:
            report.problems.append("bubblewrap (bwrap) not found: spawns cannot be confined")
            report.fixes.append(BWRAP_HINT.format(name=name))
            return None
        # Never a root that holds the owner's home, OLP's home, an account's home or the
        # spawns' job directories.
        homes = [a.home for a in provider.accounts if a.home is not None]
        roots = install_roots(binary, path_env=environ.get("PATH"),
                              forbidden=(real_home, settings.home, Path(tempfile.gettempdir()),
                                         *homes))
        # The tool bridge (an MCP server the CLI launches) runs on the proxy's interpreter.
        bridge = [r for r in bridge_read_roots() if r not in roots]
        sandbox = Sandbox(bwrap, read_only=(*roots, *bridge,
                                            *map(Path, provider.sandbox_read_only)))
        report.sandbox = "bubblewrap"
    else:
        report.sandbox = "off"
        log.warning("provider runs UNCONFINED: its CLI can read every file this user can "
                    "(providers.%s.sandbox is false)", name, extra={"provider": name})
    return binary, sandbox, real_home


def _http_runner(name: str, provider: ProviderSettings, environ: Mapping[str, str],
                 report: Report) -> OpenAICompatRunner:
    assert provider.base_url is not None  # the config requires it for this kind
    key = environ.get(provider.api_key_env) if provider.api_key_env else None
    r = provider.retry
    runner = OpenAICompatRunner(HttpConfig(
        base_url=provider.base_url, api_key=key, api_key_env=provider.api_key_env,
        timeouts=provider.timeouts, name=name,
        retry=RetryPolicy(max_retries_500=r.server_errors,
                          max_retries_connection=r.connection_errors,
                          max_retries_429=r.rate_limited, max_retry_after_s=r.max_retry_after_s)))
    report.binary = provider.base_url
    missing = runner.preflight()
    report.credentials = missing is None
    if missing is not None:
        report.problems.append("no API key")
        report.fixes.append(missing.message)
    return runner


def cli_version(binary: str, sandbox: Sandbox | None = None) -> tuple[str | None, str]:
    """``(first line of <binary> --version, "")`` or ``(None, why)``; inside ``sandbox`` when
    given, which proves the CLI can start confined. Blocks up to 20 s (call it from a worker
    thread or a synchronous command)."""
    argv = [binary, "--version"]
    with tempfile.TemporaryDirectory(prefix="olp-job-") as job:
        if sandbox is not None:
            (Path(job) / "work").mkdir()
            argv = sandbox.wrap(argv, job_dir=Path(job), workdir=Path(job) / "work")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                                  stdin=subprocess.DEVNULL, check=False, cwd=job,
                                  env={"PATH": os.environ.get("PATH", ""), "HOME": job})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, str(exc)
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode == 0 and lines:
        return lines[0][:80], ""
    return None, (lines[-1][:200] if lines else f"exit status {done.returncode}")


def checked_version(binary: str, sandbox: Sandbox | None) -> tuple[str | None, str | None]:
    """``(version, problem)``: the CLI's version read the way it is spawned, and a problem
    when it fails inside ``sandbox`` but works unconfined (the sandbox hides something it
    needs). Blocks like :func:`cli_version`, twice when the first try fails."""
    version, why = cli_version(binary, sandbox)
    if version is None and sandbox is not None and cli_version(binary)[0] is not None:
        return None, f"`{binary} --version` fails inside the sandbox: {why}"
    return version, None
