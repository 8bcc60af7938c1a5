"""Live reload (SIGHUP, ``olp reload``): re-read ``config.json`` and swap what it configures,
without dropping a request.

A config that does not load is refused whole: the running one stays, the error (naming the
path) is logged and kept for ``/health`` and ``olp reload``. Otherwise the providers are
rebuilt and compared: an actor whose provider settings did not change keeps running (its
slots, its jobs in flight); a changed or new one is started; a removed or replaced one is
retired (it takes no new job and ends once its jobs are done, its HTTP pool closed after).
The router, the actors, the retry budgets, soft triggers, the resilience policy, the header
policy, anonymous access, heartbeats and the audit retention then switch at once, with no
checkpoint in between: a request sees the old configuration or the new one, never half.
A request keeps the route and actors it started with. ``server.*`` and ``cache.*`` (sockets,
body limit, drain, the cache store) need a restart; a reload that changes them says so.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import trio

from olp.accounting import Retention
from olp.actors import ProviderActor, Sandbox
from olp.config import ConfigError, Registry, Settings, load_settings
from olp.engine import Engine, HealthPolicy, SoftLimits
from olp.http import HeaderPolicy, Services
from olp.providers.openai_compat import OpenAICompatRunner
from olp.runtime import provider_actors
from olp.runtime.routing import build_router, model_listing
from olp.store import AsyncSessionStore, SessionStore, split_slot

log = logging.getLogger("olp.reload")

#: Config sections a reload cannot apply (the server's sockets and limits, the cache store).
RESTART_SECTIONS = ("server", "cache")


def health_policy(settings: Settings) -> HealthPolicy:
    r = settings.config.routing.resilience
    return HealthPolicy(usage_window_default_s=r.usage_window_default_s,
                        usage_window_max_s=r.usage_window_max_s, billing_s=r.billing_s,
                        failures=r.circuit_failures, window_s=r.circuit_window_s,
                        probe_after_s=r.probe_after_s, probe_max_s=r.probe_max_s)


def soft_limits(settings: Settings) -> dict[str, SoftLimits]:
    return {name: SoftLimits(**msgspec.structs.asdict(block))
            for name, block in settings.config.routing.soft_triggers.items()}


def header_policy(settings: Settings, runtime: provider_actors.Runtime) -> HeaderPolicy:
    """Who sees the fallback detail and the account, and which actors are metered (a
    provider's, or one account's: ``X-OLP-Credential``)."""
    metered = {n for n, r in runtime.reports.items() if r.metered and not r.accounts}
    metered |= {a.actor for r in runtime.reports.values() for a in r.accounts.values()
                if a.metered}
    return HeaderPolicy(settings.config.auth.fallback_detail_header_policy,
                        frozenset(metered))


def retention(settings: Settings) -> Retention:
    a = settings.config.audit
    return Retention(max_age_days=a.max_age_days, max_rows=a.max_rows,
                     usage_days=a.usage_days)


async def probe_version(report: provider_actors.Report, sandbox: Sandbox | None) -> None:
    """The CLI's version, read the way it is spawned (inside its sandbox), for /health; a CLI
    that cannot start in its sandbox is said loudly."""
    assert report.binary is not None
    report.version, problem = await trio.to_thread.run_sync(
        provider_actors.checked_version, report.binary, sandbox)
    if problem is not None:
        log.warning("the CLI does not start inside its sandbox: %s", problem,
                    extra={"provider": report.name,
                           "fix": f"add the directories it needs to providers."
                                  f"{report.name}.sandbox_read_only (see olp doctor)"})


async def probe_versions(runtime: provider_actors.Runtime, names: list[str] | None = None) -> None:
    """:func:`probe_version` of each running CLI (or of ``names``), concurrently."""
    async with trio.open_nursery() as probes:
        for report in runtime.reports.values():
            if report.binary is not None and report.name in runtime.actors \
                    and (names is None or report.name in names):
                probes.start_soon(probe_version, report, runtime.sandboxes.get(report.name))


def apply(services: Services, engine: Engine, settings: Settings,
          runtime: provider_actors.Runtime, registry: Registry) -> None:
    """Point the engine and the app at ``runtime`` and ``settings`` (sync: all at once): the
    fields of ``services`` a config sets are replaced in place, the rest (built at start from
    ``server.*`` and ``cache.*``) stay."""
    router = build_router(settings, registry, runtime.providers)
    engine.reconfigure(router, runtime.actors, cli_retry_budget_s={
        n: p.settings.cli_retry_budget_s for n, p in runtime.providers.items()})
    engine.ledger.limits = soft_limits(settings)
    engine.health.policy = health_policy(settings)
    services.actors = runtime.actors
    services.models = partial(model_listing, registry, router,
                              frozenset(split_slot(n)[0] for n in runtime.actors))
    services.provider_info = {n: r.as_dict() for n, r in runtime.reports.items()}
    services.headers = header_policy(settings, runtime)
    services.allow_anonymous = settings.config.auth.allow_anonymous
    services.heartbeat_s = settings.config.streaming.heartbeat_interval_ms / 1000
    if services.recorder is not None:
        services.recorder.retention = retention(settings)


@dataclass(slots=True)
class RunningConfig:
    """The configuration in force and the record of its reloads: what :meth:`Reloader.reload`
    replaces, and what ``/health`` (owner) and ``olp reload`` show (:meth:`state`)."""

    settings: Settings
    runtime: provider_actors.Runtime
    generation: int = 1
    loaded_at: float = field(default_factory=time.time)
    last_error: str | None = None
    last_attempt_at: float | None = None
    last: dict[str, Any] = field(default_factory=dict)

    def state(self) -> dict[str, Any]:
        """For ``/health`` (owner) and ``olp reload``."""
        return {"generation": self.generation, "loaded_at": self.loaded_at,
                "path": str(self.settings.config_path), "last_error": self.last_error,
                "last_attempt_at": self.last_attempt_at, **self.last}


@dataclass(slots=True)
class Reloader:
    """Replaces ``running`` (one reload at a time) and points the engine and the app's
    ``services`` at the new one."""

    running: RunningConfig
    engine: Engine
    services: Services
    registry: Registry
    environ: Mapping[str, str]
    nursery: trio.Nursery | None = None  # where actors run (set once the server serves)
    _lock: trio.Lock = field(default_factory=trio.Lock)

    async def reload(self) -> bool:
        """Re-read the config and apply it (see the module docstring); False if it was
        refused (the running config stays). Blocks on disk and the CLIs' ``--version``."""
        running = self.running
        async with self._lock:
            running.last_attempt_at, running.last_error = time.time(), None
            try:
                settings = await trio.to_thread.run_sync(load_settings, self.environ)
            except ConfigError as exc:
                running.last_error = str(exc)
                log.error("config reload refused; the running config stays",
                          extra={"event": "reload_failed", "error": str(exc)})
                return False
            assert self.nursery is not None, "reload before the server started"
            old = running.runtime
            sessions = AsyncSessionStore(SessionStore(self.services.db)) \
                if self.services.db is not None else None
            runtime = await trio.to_thread.run_sync(partial(
                provider_actors.build, settings, self.environ, session_store=sessions))
            kept, started = await self._keep_unchanged(old, runtime, settings)
            for name in started:
                await self.nursery.start(runtime.actors[name].run)
            await probe_versions(runtime, started)
            retired = [(n, a) for n, a in old.actors.items()
                       if runtime.actors.get(n) is not a]
            restart = [s for s in RESTART_SECTIONS if getattr(running.settings.config, s)
                       != getattr(settings.config, s)]
            apply(self.services, self.engine, settings, runtime, self.registry)
            for _, actor in retired:
                actor.retire()
                self.nursery.start_soon(_close_when_idle, actor)
            running.settings, running.runtime = settings, runtime
            running.generation += 1
            running.loaded_at, running.last_error = time.time(), None
            running.last = {"kept": kept, "started": started,
                            "retired": [n for n, _ in retired], "needs_restart": restart}
            log.info("config reloaded", extra={"event": "reloaded", **running.last,
                                               "generation": running.generation})
            if restart:
                log.warning("these config sections change only on a restart: %s",
                            ", ".join(restart), extra={"event": "reload_needs_restart"})
            return True

    async def _keep_unchanged(self, old: provider_actors.Runtime, new: provider_actors.Runtime,
                              settings: Settings) -> tuple[list[str], list[str]]:
        """Put each old actor whose provider settings are the same into ``new`` (closing the
        runner made for it in vain); returns (kept, started)."""
        kept, started = [], []
        for name, actor in list(new.actors.items()):
            previous = old.actors.get(name)
            if previous is not None and _same(self.running.settings, settings, name):
                new.actors[name] = previous
                provider = split_slot(name)[0]
                report = old.reports.get(provider)
                if report is not None:
                    new.reports[provider].version = report.version
                    new.reports[provider].gate = report.gate  # the one kept actors serve
                if isinstance(actor.runner, OpenAICompatRunner):
                    new.http_runners.remove(actor.runner)
                    await actor.runner.aclose()
                kept.append(name)
            else:
                started.append(name)
        for name, actor in old.actors.items():
            if new.actors.get(name) is actor and isinstance(actor.runner, OpenAICompatRunner):
                new.http_runners.append(actor.runner)
        return kept, started


def _same(before: Settings, after: Settings, slot: str) -> bool:
    """Whether the actor ``slot`` would be built the same: its provider's settings (other
    accounts aside) and its own account's are unchanged."""
    name, account = split_slot(slot)
    try:
        old, new = before.provider(name), after.provider(name)
    except KeyError:
        return False
    return dataclasses.replace(old, accounts=()) == dataclasses.replace(new, accounts=()) \
        and old.account(account) is not None and old.account(account) == new.account(account)


async def _close_when_idle(actor: ProviderActor) -> None:
    """A retired actor's HTTP pool, closed once its last job has ended."""
    await actor.finished.wait()
    if isinstance(actor.runner, OpenAICompatRunner):
        await actor.runner.aclose()
