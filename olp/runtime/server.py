"""``olp start``: the store, the provider actors, the engine and Hypercorn, under one nursery.

Shutdown: the first SIGTERM/SIGINT stops accepting connections, closes idle keep-alive
connections and lets in-flight streams finish for up to ``server.drain_grace_s``; then what is
still running is told (a stream ends with an ``error`` event, a request not yet answered gets
a 503; see ``olp/http/_stopping.py``) and cancelled (its CLI's process group killed). A second
signal cancels everything at once.
SIGHUP reloads the config (:mod:`olp.runtime.reload`). The proxy's run directory holds its spawns'
job directories; the leftovers of a killed proxy are reaped at start (ADR 0011). With glibc,
malloc keeps at most :data:`MALLOC_ARENAS` arenas and free heap pages go back to the system
every :data:`MALLOC_TRIM_EVERY_S` seconds (ADR 0013).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import hypercorn.config
import hypercorn.trio
import trio

from olp import __version__
from olp.accounting import Recorder, RequestLimiter, load_counts
from olp.actors import CURRENT_RUN_DIR, RunDir, reap_leftovers
from olp.cache import CacheStore, Singleflight
from olp.config import Settings, load_registry, protect_config
from olp.engine import Engine, HealthBook, Ledger, Sources
from olp.http import STOPPING, Services, Stopping, create_app, drain_aware
from olp.runtime import logs, provider_actors
from olp.runtime.reload import (
    Reloader,
    RunningConfig,
    header_policy,
    health_policy,
    probe_versions,
    retention,
    soft_limits,
)
from olp.runtime.routing import build_router, model_listing
from olp.store import (
    HEALTH_STATE,
    LEDGER_STATE,
    AsyncKeyStore,
    AsyncSessionStore,
    Database,
    KeyStore,
    SessionStore,
    StateStore,
    split_slot,
)

log = logging.getLogger("olp.runtime.server")

#: Where a generated owner key goes when stdout is not an interactive terminal.
OWNER_KEY_FILE = "owner-key.txt"
#: How long Hypercorn's drain outlasts ``server.drain_grace_s``: what is still in flight when
#: the grace ends is told so (:class:`Stopping`) and has this long to write its last bytes.
END_OF_DRAIN_MARGIN_S = 1.0
#: glibc malloc arenas for the whole proxy: the main thread's and one shared by every worker
#: thread (glibc's default is 8 per CPU, each keeping its own free memory).
MALLOC_ARENAS = 2
#: The one line a start with nothing to serve prints (issue #30: a new user's first start).
NO_PROVIDER = ("no provider can answer yet: run `olp setup` to find the CLIs you are logged "
               "into, or `olp login PROVIDER` to log one in (`olp doctor` says what each one "
               "is missing)")
#: How often free heap memory is handed back to the system (``malloc_trim``), off the event
#: loop in a worker thread.
MALLOC_TRIM_EVERY_S = 60.0
_M_ARENA_MAX = -8  # mallopt parameter, <malloc.h>
#: Allocations (net of frees) of objects the garbage collector tracks between two collections
#: of its youngest generation; CPython's default is 700. At 10,000 they are about 14 times
#: rarer, for at most about a megabyte more alive between two of them: 1-2 % fewer
#: instructions per request (ADR 0030).
GC_YOUNG_THRESHOLD = 10_000


def run(settings: Settings) -> int:
    """Run the proxy until stopped by a signal; the process exit status."""
    logs.configure(settings.log_level, fmt=settings.log_format)
    libc = glibc()
    if libc is not None:  # before any thread exists: arenas are made on a thread's first malloc
        libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
    tune_gc()
    trio.run(serve, settings)
    return 0


def tune_gc() -> None:
    """Collect the youngest generation every :data:`GC_YOUNG_THRESHOLD` allocations (the
    older generations keep CPython's thresholds)."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (``mallopt``, ``malloc_trim``), else None."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):  # not a GNU libc, or no confstr at all
        return None
    return ctypes.CDLL("libc.so.6") if version and version.startswith("glibc") else None


async def trim_malloc(trim: Callable[[], Awaitable[object]], every_s: float) -> None:
    """Every ``every_s`` seconds, ``await trim()``: in the proxy, glibc's ``malloc_trim(0)`` in
    a worker thread, so free pages inside the heaps go back to the system off the event loop.
    Runs until cancelled (a trim in progress is waited for: a thread cannot be abandoned)."""
    while True:
        await trio.sleep(every_s)
        await trim()


def cache_store(settings: Settings, db: Database) -> CacheStore | None:
    c = settings.config.cache
    if not c.enabled:
        return None
    return CacheStore(db, ttl_s=c.ttl_s, max_entry_bytes=c.max_entry_bytes,
                      max_total_bytes=c.max_total_bytes,
                      max_entries_per_namespace=c.max_entries_per_key)


class _Changes:
    """A sync ``notify`` (callable from anywhere) and an async ``wait`` for the next one."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


async def _persist_state(engine: Engine, state: StateStore, changes: _Changes) -> None:
    """Save the cooldowns, circuits and soft-trigger counts whenever they change (one write
    at a time; bursts coalesce), so a restart keeps resting the providers that need it and
    keeps today's counts."""
    versions = {HEALTH_STATE: engine.health.version, LEDGER_STATE: engine.ledger.version}
    written: dict[str, Any] = {}
    while True:
        await changes.wait()
        for name, book in ((HEALTH_STATE, engine.health), (LEDGER_STATE, engine.ledger)):
            if book.version != versions[name]:
                versions[name] = book.version
                snapshot = book.snapshot()
                if snapshot != written.get(name):  # e.g. a failure that opened nothing
                    written[name] = snapshot
                    await state.save_async(name, snapshot)


def hand_over_owner_key(token: str, home: Path) -> None:
    """Show a generated owner key once: on stdout when it is an interactive terminal; else
    (a service manager's journal, a log file) in a file only the owner can read, whose path
    is logged — never the key. Only the key's hash is stored."""
    if sys.stdout is not None and sys.stdout.isatty():
        print(f"OLP owner key (shown once, stored hashed): {token}", flush=True)
        return
    path = home / OWNER_KEY_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)  # also when an old file was there
        f.write(f"{token}\n")
    log.warning("generated the owner key: read it from this file, then delete the file",
                extra={"path": str(path)})


def _open_run_dir() -> RunDir:
    """Reap what killed proxies left behind, then make this proxy's run directory."""
    reaped = reap_leftovers()
    if reaped:
        log.warning("removed what a killed proxy left behind",
                    extra={"paths": [str(p) for p in reaped]})
    return RunDir.create()


async def serve(settings: Settings, *, environ: Mapping[str, str] | None = None,
                task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until a signal (or cancellation). ``task_status.started`` gets the bound URLs."""
    run_dir = await trio.to_thread.run_sync(_open_run_dir)
    CURRENT_RUN_DIR.set(run_dir)  # this task's context: every job started below inherits it
    try:
        await _serve(settings, os.environ if environ is None else environ, task_status)
    finally:
        run_dir.close()  # every CLI is reaped by now


async def _serve(settings: Settings, environ: Mapping[str, str],
                 task_status: trio.TaskStatus[list[str]]) -> None:
    db = await trio.to_thread.run_sync(Database, settings.db_path)
    await trio.to_thread.run_sync(protect_config, settings.config_path)
    try:
        keys = AsyncKeyStore(KeyStore(db))
        new_owner_token = await keys.ensure_owner(settings.owner_token)
        if new_owner_token is not None:
            hand_over_owner_key(new_owner_token, settings.home)
        registry = await trio.to_thread.run_sync(load_registry)
        sessions = AsyncSessionStore(SessionStore(db))
        runtime = provider_actors.build(settings, environ, session_store=sessions)
        actors = runtime.actors
        if not any(r.usable for r in runtime.reports.values()):
            log.warning(NO_PROVIDER)
        await probe_versions(runtime)  # `--version` of each CLI, concurrently
        router = build_router(settings, registry, runtime.providers)
        state = StateStore(db)
        health = HealthBook(health_policy(settings), clock=time.time)
        saved = await state.load_async(HEALTH_STATE)
        if saved is not None:
            health.restore(saved)
        ledger = Ledger(soft_limits(settings))
        saved = await state.load_async(LEDGER_STATE)
        if saved is not None:
            ledger.restore(saved)
        changes = _Changes()
        cache = cache_store(settings, db)
        flights = Singleflight(max_buffer=settings.config.cache.max_client_buffer_events)
        engine = Engine(router, actors, health=health, ledger=ledger,
                        sources=Sources(cache, flights if cache is not None else None),
                        on_change=changes.notify,
                        cli_retry_budget_s={n: p.settings.cli_retry_budget_s
                                            for n, p in runtime.providers.items()})
        limiter = RequestLimiter(await trio.to_thread.run_sync(load_counts, db, time.time()),
                                 monotonic=trio.current_time)
        recorder = Recorder(db, retention=retention(settings))
        running = RunningConfig(settings, runtime)
        try:
            async with trio.open_nursery() as background:
                background.start_soon(_persist_state, engine, state, changes)
                libc = glibc()
                if libc is not None:
                    trim = partial(trio.to_thread.run_sync, libc.malloc_trim, 0)
                    background.start_soon(trim_malloc, trim, MALLOC_TRIM_EVERY_S)
                await background.start(flights.run)
                services = Services(
                    engine=engine, keys=keys,
                    models=partial(model_listing, registry, router,
                                   frozenset(split_slot(n)[0] for n in actors)),
                    actors=actors, cache=cache, flights=flights,
                    provider_info={n: r.as_dict() for n, r in runtime.reports.items()},
                    headers=header_policy(settings, runtime),
                    max_body_bytes=settings.config.server.max_body_bytes,
                    allow_anonymous=settings.config.auth.allow_anonymous,
                    heartbeat_s=settings.config.streaming.heartbeat_interval_ms / 1000,
                    background=background, limiter=limiter, recorder=recorder, db=db,
                    metrics_access=settings.config.server.metrics,
                    config_state=running.state, dashboard=settings.config.server.dashboard,
                    allowed_hosts=settings.config.server.allowed_hosts,
                    body_timeout_s=settings.config.server.body_timeout_s)
                reloader = Reloader(running, engine, services, registry, environ)
                await _serve_app(create_app(services), settings, reloader, task_status)
                background.cancel_scope.cancel(reason="stopped")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await running.runtime.aclose()
    finally:
        db.close()


async def _serve_app(app: Any, settings: Settings, reloader: Reloader,
                     task_status: trio.TaskStatus[list[str]]) -> None:
    grace = settings.config.server.drain_grace_s
    config = hypercorn.config.Config()
    config.bind = [f"{settings.bind}:{settings.port}"]
    config.graceful_timeout = grace + END_OF_DRAIN_MARGIN_S  # default 3 s is too short
    config.keep_alive_timeout = settings.config.server.keep_alive_s
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    shutdown = trio.Event()
    stopping = Stopping()
    STOPPING.set(stopping)  # this task's context: every request task below inherits it
    async with trio.open_nursery() as root:
        root.start_soon(_watch_signals, shutdown, root.cancel_scope,
                        partial(root.start_soon, reloader.reload))
        root.start_soon(_end_drain, shutdown, stopping, grace)
        async with trio.open_nursery() as inner:
            for actor in reloader.running.runtime.actors.values():
                await inner.start(actor.run)
            reloader.nursery = inner  # where a reload starts (and retires) actors

            async def http(*, task_status: trio.TaskStatus[list[str]]) -> None:
                await hypercorn.trio.serve(drain_aware(app, stopping), config,
                                           shutdown_trigger=shutdown.wait,
                                           task_status=task_status)
                inner.cancel_scope.cancel(reason="HTTP server stopped")  # reaps the CLIs

            urls = await inner.start(http)
            log.info("listening", extra={"urls": urls, "version": __version__,
                                         "providers": list(reloader.running.runtime.actors)})
            task_status.started(urls)
        root.cancel_scope.cancel(reason="stopped")
    log.info("stopped")


async def _end_drain(shutdown: trio.Event, stopping: Stopping, grace: float) -> None:
    """``grace`` seconds after the drain began, tell what is still in flight to end."""
    await shutdown.wait()
    await trio.sleep(grace)
    log.info("drain grace over: ending what is still in flight")
    stopping.set()


async def _watch_signals(shutdown: trio.Event, hard_stop: trio.CancelScope,
                         reload: Callable[[], None]) -> None:
    """First SIGTERM/SIGINT: drain. Second: stop now. SIGHUP (``olp reload``, or a closing
    terminal): reload the config (a refused one leaves the running one; see
    :mod:`olp.runtime.reload`), never stop. Kept open for the whole run, so a signal never falls
    back to Python's default handling (which, for SIGHUP, is to die)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGHUP:
                if shutdown.is_set():
                    log.warning("SIGHUP while draining: no reload", extra={"signal": signum})
                else:
                    log.info("SIGHUP: reloading the config", extra={"signal": signum})
                    reload()
            elif shutdown.is_set():
                log.warning("second signal: stopping now", extra={"signal": signum})
                hard_stop.cancel(reason="second signal")
            else:
                log.info("draining in-flight requests", extra={"signal": signum})
                shutdown.set()


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `olp start`")
