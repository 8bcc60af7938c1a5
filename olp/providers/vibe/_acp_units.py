"""vibe's warm units: single-use sessions on long-lived ``vibe-acp`` servers.

The vibe actor's warm pool (:mod:`olp.actors._warm`) holds *sessions* made ahead of time, each
handed one request and then deleted, on servers this module owns. A server is keyed like a
warm process (model, config, env) and confined like a spawn; its argv is only ``vibe-acp``,
the tools are off through the environment (:func:`~olp.providers.vibe._acp.server_env`) and
the API key is passed in it rather than linking the key file. Each session gets an empty
private working directory. A server is replaced after :data:`SESSIONS_PER_SERVER` sessions or
when it died, and ends when its last session has; pool boots are serialized. Why:
``docs/adr/0019-warm-clis.md``, "vibe's warm units, as built".

Blocking: :meth:`AcpUnits.boot` waits for a server to start (seconds) and a session to be
made. Cancellation ends the session (``session/cancel``, then delete); cancelling
:meth:`AcpUnits.serve` ends every server (TERM, then KILL after the spawner's grace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import shutil
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from olp.actors._process import SpawnSpec
from olp.actors._run_dir import job_dir
from olp.ir import ChatRequest

from . import _credentials
from ._acp import AcpServer, acp_binary, open_session, server_env
from ._acp_parser import VibeAcpParser
from ._invocation import spawn_home

if TYPE_CHECKING:
    from olp.actors._cli_runner import CliRunner
    from olp.actors._warm_units import Template, WarmProcess

log = logging.getLogger("olp.providers.vibe")

#: Sessions one server makes before a fresh server takes over (memory grows per session).
SESSIONS_PER_SERVER: Final = 64
#: How long a server may take to answer ``initialize`` (4-11 s measured).
START_TIMEOUT_S: Final = 60.0


@dataclass(eq=False)
class _Server:
    key: Hashable
    acp: AcpServer
    base: Path
    made: int = 0
    open_sessions: int = 0
    retired: trio.Event = field(default_factory=trio.Event)
    idle: trio.Event = field(default_factory=trio.Event)
    ended: trio.Event = field(default_factory=trio.Event)  # its process is gone

    def usable(self) -> bool:
        return self.acp.alive() and not self.retired.is_set() and self.made < SESSIONS_PER_SERVER


class AcpUnits:
    """The vibe provider's :class:`~olp.actors._warm_units.WarmUnits`."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._servers: list[_Server] = []
        self._dirs = itertools.count(1)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Own the servers until cancelled (then every one of them ends)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    @contextlib.asynccontextmanager
    async def boot(self, runner: CliRunner, template: Template) -> AsyncIterator[WarmProcess]:
        """A session made ahead of time for ``template``'s spawn, on a server started for it
        if none is usable. Raises when the server cannot start or refuses the session."""
        from olp.actors._warm_units import WarmProcess

        request, model = template
        key = runner.spawn_identity(request, model)
        server = next((s for s in self._servers if s.key == key and s.usable()), None)
        if server is None:
            for old in self._servers:
                if old.key == key:
                    old.retired.set()  # used up: it ends once its sessions have
            server = await self._start_server(runner, template, key)
        server.made += 1
        workdir = server.base / "sessions" / str(next(self._dirs)) / "work"
        workdir.mkdir(mode=0o700, parents=True)
        server.open_sessions += 1
        server.idle = trio.Event()
        # the server sees its job directory at a fixed path inside the sandbox
        seen = runner.seen_job_dir(server.base) / workdir.relative_to(server.base)
        try:
            async with open_session(server.acp, seen) as session:
                identity = runner.spawn_identity(request, model, seen)
                yield WarmProcess(session, workdir, identity, parser=VibeAcpParser,
                                  seen_workdir=seen)
        finally:
            server.open_sessions -= 1
            if server.open_sessions == 0:
                server.idle.set()
            shutil.rmtree(workdir.parent, ignore_errors=True)

    def rss_bytes(self) -> int:
        """The servers' resident memory (reads ``/proc``)."""
        return sum(s.acp.rss_bytes() for s in self._servers)

    async def _start_server(self, runner: CliRunner, template: Template,
                            key: Hashable) -> _Server:
        if self._nursery is None:
            raise RuntimeError("the vibe servers are not running")
        server: _Server = await self._nursery.start(self._run_server, runner, template, key)
        return server

    async def _run_server(self, runner: CliRunner, template: Template, key: Hashable, *,
                          task_status: trio.TaskStatus[_Server]) -> None:
        """One server's life: spawn ``vibe-acp`` confined like a spawn, initialize it, hand
        it out, and end it once retired and idle or when its process ends. Raises only
        before it has started (to the pool, which backs off); after that a failure is
        logged, never raised into the nursery the other servers share."""
        request, model = template
        base = job_dir()
        try:
            spec = self._server_spec(runner, request, model, base)
            async with runner.spawner.open(dataclasses.replace(spec, stdin=None)) as proc:
                server = _Server(key, AcpServer(proc), base)
                async with trio.open_nursery() as nursery:
                    with trio.fail_after(START_TIMEOUT_S):
                        await nursery.start(_serve, server)
                    server.idle.set()
                    self._servers.append(server)
                    task_status.started(server)
                    try:
                        await _until_retired_and_idle(server)
                    except Exception:  # pragma: no cover - defensive: keep the others up
                        log.exception("vibe-acp server failed")
                    finally:
                        self._servers.remove(server)
                        server.retired.set()
                        nursery.cancel_scope.cancel(reason="vibe-acp server retired")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    @staticmethod
    def _server_spec(runner: CliRunner, request: ChatRequest, model: str,
                     base: Path) -> SpawnSpec:
        """The ``vibe-acp`` spawn: the runner's recipe for this request's spawn with the
        argv replaced, :func:`server_env` added, the key in the environment and the key
        file not linked (see the module docstring). Raises when there is no credential."""
        problem = runner.preflight()
        if problem is not None:
            raise RuntimeError(problem.message)
        env = server_env(model, spawn_home(runner.seen_job_dir(base) / "work") / ".vibe",
                         request.reasoning)
        seen = {**runner.adapter.spawn_env(runner.config.proxy_env), **runner.config.env}
        if not seen.get(_credentials.KEY_VAR):
            found = _credentials.read_key(_credentials.env_file(seen, runner.config.real_home))
            if found is not None:
                env[_credentials.KEY_VAR] = found
        spec, _, _ = runner._prepare(  # the runner's own spawn recipe, for a server
            request, model, base, argv=[acp_binary(runner.config.binary)], extra_env=env,
            link_credentials=False)
        return spec


async def _serve(server: _Server, *, task_status: trio.TaskStatus[None]) -> None:
    """Run the server's reader; mark it ended when its process is gone."""
    try:
        await server.acp.serve(task_status=task_status)
    finally:
        server.ended.set()
        server.retired.set()


async def _until_retired_and_idle(server: _Server) -> None:
    """Return once the server is retired with no open session (an ended server is retired:
    its sessions have ended with it and are released by their requests)."""
    while True:
        await server.retired.wait()
        if server.open_sessions == 0:
            return
        await server.idle.wait()
