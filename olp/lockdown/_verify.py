"""The verdict on a CLI provider's binary as it is now (issue #26): kept, or checked.

:func:`verifier` makes the ``verify`` of a :class:`~olp.lockdown.LockdownGate`: it digests the
binary, its ``--version`` and the provider's lockdown
(:func:`~olp.lockdown._store.check_key`), returns the kept
verdict for that digest, or runs the self-check (:func:`~olp.lockdown._check.run_check`),
keeps what it judged and returns it. Blocking work (hashing, the version, the file) runs
in worker threads.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from olp.actors import CliRunner, ThreadServers, WarmUnits
from olp.ir import ChatRequest, Message, TextPart

from ._check import run_check
from ._store import Verdict, VerdictStore, check_key
from ._targets import Target

log = logging.getLogger("olp.lockdown")


def verifier(runner: CliRunner, target: Target, model: str, store: VerdictStore, *,
             version_of: Callable[[], str | None], login: bool = False,
             units: WarmUnits | None = None,
             threads: Callable[[], ThreadServers] | None = None,
             timeout_s: float = 120.0) -> Callable[[], Awaitable[Verdict]]:
    """``verify()`` for the gate of ``runner``'s provider (``version_of``: blocking, the
    CLI's ``--version``; ``login``: its spawns use a login, not a key; ``units``: its warm
    units when they are not early cold spawns, checked too; ``threads``: makes its
    long-lived model server, whose threads are checked too)."""
    config = runner.config

    async def verify() -> Verdict:
        try:
            return await _verify()
        except Exception as exc:  # a bug or the machine (no port, no disk): not a verdict
            log.exception("lockdown check could not run", extra={"cli": target.cli})
            return Verdict(target.cli, None, checked=False, problems=(
                f"the check could not run: {type(exc).__name__}: {str(exc)[:200]}",))

    async def _verify() -> Verdict:
        version = await trio.to_thread.run_sync(version_of)
        try:
            key = await trio.to_thread.run_sync(functools.partial(
                check_key, target.cli, config.binary, version=version,
                confined=config.sandbox is not None, extra_args=config.extra_args,
                env=config.env, home_files=config.home_files,
                spawn={**spawn_digest(runner, model), "login": login,
                       "warm_units": units is not None, "app_server": threads is not None}))
        except OSError as exc:
            return Verdict(target.cli, version, problems=(f"cannot read the binary: {exc}",),
                           checked=False)
        kept = await trio.to_thread.run_sync(store.get, key)
        if kept is not None:
            return kept
        finding, error = await run_check(runner, target, model, login=login, units=units,
                                         threads=threads, timeout_s=timeout_s)
        problems = finding.problems
        if not finding.checked and error is not None:
            problems = (*problems, f"its run ended in {error.code}: {error.message[:200]}")
        verdict = Verdict(target.cli, version, finding.offered, problems,
                          checked=finding.checked)
        await trio.to_thread.run_sync(store.put, key, verdict)
        return verdict

    return verify


def spawn_digest(runner: CliRunner, model: str) -> dict[str, Any]:
    """What OLP's own lockdown gives a spawn (argv, environment, files) for a fixed
    request at the fixed job path: a change to it (a new OLP) is a new check."""
    config = runner.config
    probe = ChatRequest(model=model, messages=(
        Message(role="system", content=(TextPart(text="system"),)),
        Message(role="user", content=(TextPart(text="user"),))))
    invocation = runner.adapter.invocation(probe, binary=config.binary, model=model,
                                           workdir=Path("/olp/job/work"),
                                           extra_args=config.extra_args)
    return {"argv": list(invocation.argv), "env": sorted(invocation.env.items()),
            "files": sorted(invocation.files.items()),
            "home_files": sorted(invocation.home_files.items()),
            "spawn_env": sorted(runner.adapter.spawn_env({}).items())}
