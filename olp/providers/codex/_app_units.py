"""codex's long-lived model server: one ``codex app-server`` per login, a thread per request.

:class:`AppServers` is the codex runner's :class:`~olp.actors._threads.ThreadServers`
(``providers.openai.codex_mode: "app-server"``). One server per runner (a runner is one
login), spawned on the first request it serves, confined like an ``exec`` spawn, with the same
lockdown flags (:data:`~._invocation.TOOLS_OFF`, which already holds the two switches that
bring app-server's upstream tools to ``[]``) and the same model catalog. Each request gets a
fresh ephemeral thread (``approvalPolicy: never``, ``sandbox: read-only``) in an empty
private working directory, its prompt the very text ``codex exec`` would read on stdin, its
images as ``localImage`` files, its strict JSON schema as the turn's ``outputSchema``, its
reasoning as the turn's ``effort`` and ``summary``.

A server is replaced (the old one ends once its threads have) when it died, at each new
login token (:meth:`AppServers.renew`: a server holds the access token it started with), and
after :data:`THREADS_PER_SERVER` threads (its memory grows ~0.7 MB per thread, measured);
it ends after ``idle_s`` without a thread. A server that fails to start makes the next
requests fall back to ``codex exec`` for a back-off (1 s doubling to 60 s).

A request's tools are the thread's ``dynamicTools`` (no MCP bridge): the model's calls come
back as ``tool_calls``, several per turn and in parallel. Turns that resume a kept session stay
on ``codex exec resume``. Why: ``docs/adr/0032-codex-app-server.md``.

Blocking: :meth:`AppServers.open` waits for a server to start (~0.7 s measured, bounded by
:data:`START_TIMEOUT_S`). Cancellation interrupts the thread's turn; cancelling
:meth:`AppServers.serve` ends every server (TERM, then KILL after the spawner's grace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from olp import __version__
from olp.actors._login import LoginPass
from olp.actors._process import SpawnSpec
from olp.actors._run_dir import job_dir
from olp.actors._threads import ThreadServerStatistics
from olp.actors._toolbridge import offered_tools
from olp.actors._warm_units import WarmProcess, WarmStartError
from olp.ir import ChatRequest, Error, Event, Reasoning, Stop, ToolSpec
from olp.ir._conversation import continuation, resume_points

from ._app_parser import CodexAppParser
from ._app_server import AppServer, AppServerError, AppServerGone
from ._app_thread import AppThread
from ._invocation import CATALOG_FILE, EFFORT_LEVELS, SCHEMA_FILE, SUMMARIES, TOOLS_OFF

if TYPE_CHECKING:
    from olp.actors._adapter import Invocation
    from olp.actors._cli_runner import CliRunner
    from olp.actors._sessions import Turn

__all__ = ["START_TIMEOUT_S", "THREADS_PER_SERVER", "AppServers", "server_argv",
           "thread_params", "turn_params"]

log = logging.getLogger("olp.providers.codex")

_EMPTY_SCHEMA: Final = {"type": "object", "properties": {}}
#: Threads one server makes before a fresh server takes over (memory grows per thread).
THREADS_PER_SERVER: Final = 100
#: How long a server may take to answer ``initialize`` (~0.7 s measured); the requests
#: waiting for it meanwhile then go to ``codex exec``.
START_TIMEOUT_S: Final = 15.0
#: A server with no thread this long ends (the next request starts one); a thread kept for a
#: conversation keeps it up until that thread's time is over.
IDLE_S: Final = 600.0
#: A server that has answered and holds no thread is replaced by a fresh one after this long
#: idle: it grew ~50 MB with its first thread (measured), a fresh one idles at ~123 MB.
REFRESH_S: Final = 30.0
#: Threads kept for their conversation's next turn, at most (the oldest is closed).
KEPT_MAX: Final = 32
#: At the model's tool calls, how long codex may take to ask for the last of them.
ASKED_WAIT_S: Final = 2.0
BACKOFF_S: Final = 1.0
MAX_BACKOFF_S: Final = 60.0


def server_argv(binary: str, workdir: Path, extra_args: tuple[str, ...] | list[str] = ()
                ) -> list[str]:
    """``codex app-server`` with OLP's lockdown flags and model catalog (``workdir``: where
    the server sees its :data:`~._invocation.CATALOG_FILE`)."""
    catalog = f"model_catalog_json={json.dumps(str(workdir / CATALOG_FILE))}"
    return [binary, "app-server", *TOOLS_OFF, "-c", catalog, *extra_args]


def thread_params(model: str, cwd: Path, tools: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    """``thread/start`` for one request: ephemeral, never asking, read-only; the request's
    tools as ``dynamicTools``, with raw events on (``rawResponse/completed`` says when the
    model's calls are all known: measured, ``tests/fixtures/cli-reference/codex/app_server/
    dynamic_tools.py``)."""
    params: dict[str, Any] = {"model": model, "cwd": str(cwd), "ephemeral": True,
                              "approvalPolicy": "never", "sandbox": "read-only"}
    if tools:
        params["dynamicTools"] = [
            {"type": "function", "name": t.name, "description": t.description or "",
             "inputSchema": t.parameters if t.parameters is not None else _EMPTY_SCHEMA}
            for t in tools]
        params["experimentalRawEvents"] = True
    return params


def turn_params(reasoning: Reasoning | None, invocation: Invocation, cwd: Path
                ) -> dict[str, Any]:
    """What ``turn/start`` adds to the prompt: the images (``localImage``, files the
    invocation wrote into ``cwd``), the strict JSON schema (``outputSchema``), the effort and
    the summary (as ``-c model_reasoning_*`` would set them on ``exec``)."""
    params: dict[str, Any] = {}
    images = [{"type": "localImage", "path": str(cwd / name)}
              for name in invocation.binary_files]
    if images:
        params["input"] = images
    schema = invocation.files.get(SCHEMA_FILE)
    if schema is not None:
        params["outputSchema"] = json.loads(schema)
    if reasoning is not None:
        if reasoning.effort is not None:
            params["effort"] = EFFORT_LEVELS[reasoning.effort]
        summary = reasoning.summary if reasoning.summary in SUMMARIES else (
            "auto" if reasoning.show else None)
        if summary is not None:
            params["summary"] = summary
    return params


@dataclass(eq=False)
class _Kept:
    """A thread kept after a clean answer for its conversation's next turn."""

    server: _Server
    thread: AppThread
    workdir: Path
    until: float
    calls: tuple[str, ...]  # the tool calls its turn is paused on (by call id)
    sent: ChatRequest | None = None  # the new turns the continuing job sends

    def fresh(self, now: float) -> bool:
        return now < self.until and self.server.app.alive() \
            and not self.server.retired.is_set()


@dataclass(eq=False)
class _Server:
    app: AppServer
    base: Path
    generation: int | None
    made: int = 0
    open_threads: int = 0
    last_used: float = field(default_factory=trio.current_time)
    retired: trio.Event = field(default_factory=trio.Event)
    ended: trio.Event = field(default_factory=trio.Event)  # its process is gone
    changed: trio.Event = field(default_factory=trio.Event)
    kept_until: float = -math.inf  # the last kept thread's end: the server idles till then

    def usable(self, generation: int | None) -> bool:
        return (self.app.alive() and not self.retired.is_set()
                and self.generation == generation)

    def poke(self) -> None:
        self.changed.set()


class AppServers:
    """The codex provider's :class:`~olp.actors._threads.ThreadServers` (one per runner)."""

    def __init__(self, *, idle_s: float = IDLE_S, refresh_s: float = REFRESH_S,
                 threads_per_server: int = THREADS_PER_SERVER) -> None:
        self.idle_s = idle_s
        self.refresh_s = refresh_s
        self.threads_per_server = threads_per_server
        self._nursery: trio.Nursery | None = None
        self._current: _Server | None = None
        self._servers: list[_Server] = []
        self._lock = trio.Lock()
        self._dirs = itertools.count(1)
        self._started = self._served = 0
        self._failures_in_a_row = 0
        self._retry_at = -math.inf
        self._kept: dict[str, _Kept] = {}  # by the digest the conversation's next turn holds

    # -- ThreadServers -----------------------------------------------------------------

    def serves(self, request: ChatRequest) -> bool:
        """Every request (a turn that resumes a kept session is the runner's to send to
        ``codex exec``)."""
        return True

    def renew(self) -> None:
        """Retire the running server (it holds an older login token)."""
        if self._current is not None:
            self._retire(self._current, "the login has a new token")

    def statistics(self) -> ThreadServerStatistics:
        current = self._current
        running = current is not None and current.app.alive()
        return ThreadServerStatistics(
            running=running, threads=sum(s.open_threads for s in self._servers),
            kept=len(self._kept),
            started=self._started, served=self._served,
            memory_bytes=current.app.rss_bytes() if running and current is not None else 0)

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
                self._current = None

    def holds(self, request: ChatRequest, scope: str) -> bool:
        """Whether a thread kept for ``request``'s conversation can continue it."""
        now = trio.current_time()
        return any((kept := self._kept.get(p.digest)) is not None and kept.fresh(now)
                   for p in resume_points(request, scope))

    @contextlib.asynccontextmanager
    async def open(self, runner: CliRunner, request: ChatRequest, model: str,
                   login_pass: LoginPass | None, turn: Turn | None = None,
                   ) -> AsyncIterator[WarmProcess]:
        """A thread for ``request`` on the login's server (started if none is usable): the
        one kept after this conversation's last answer when ``turn`` continues it (only the
        new turns are sent: user text as a new turn, tool results as the answers to codex's
        paused calls), else a fresh one. With a ``turn``, a clean answer's thread is kept
        for the next turn (:data:`KEPT_MAX` at most, for the session TTL); otherwise it is
        closed. Raises :class:`WarmStartError` when no server can be had (the runner then
        spawns ``codex exec``), :class:`~olp.actors.CapabilityMissing` for an image it cannot
        take."""
        runner.spawn_identity(request, model)  # CapabilityMissing before any server work
        server = await self._server_for(runner, model, login_pass)
        self._sweep()
        kept = self._continue(server, request, turn) if turn is not None else None
        server.open_threads += 1
        server.poke()
        ended: list[Event] = []
        keep = False
        thread: AppThread | None = None
        workdir = kept.workdir if kept is not None else \
            server.base / "threads" / str(next(self._dirs)) / "work"
        seen = runner.seen_job_dir(server.base) / workdir.relative_to(server.base)
        try:
            if kept is not None:
                thread = kept.thread
                sent = kept.sent if kept.sent is not None else request
            else:
                server.made += 1
                workdir.mkdir(mode=0o700, parents=True)
                tools = offered_tools(request)
                try:
                    thread = await server.app.start_thread(thread_params(model, seen, tools))
                except (AppServerError, AppServerGone) as exc:
                    raise WarmStartError(f"codex app-server gave no thread: {exc}") from exc
                thread.takes_tool_calls = bool(tools)
                sent = request
            invocation = runner.adapter.invocation(
                sent, binary=runner.config.binary, model=model, workdir=seen,
                extra_args=runner.config.extra_args)
            for name, data in invocation.binary_files.items():
                (workdir / name).write_bytes(data)
            thread.turn_params = turn_params(request.reasoning, invocation, seen)
            thread.turn_text = invocation.stdin.decode("utf-8", "replace") \
                if kept is not None else None
            self._served += 1
            yield WarmProcess(thread, workdir, runner.spawn_identity(request, model, seen),
                              parser=CodexAppParser, seen_workdir=seen,
                              login_generation=server.generation, finished=ended.append)
            keep = turn is not None and bool(ended) and isinstance(ended[-1], Stop) \
                and server.usable(server.generation) \
                and await self._ready_to_keep(thread, turn, ended[-1])
        finally:
            server.open_threads -= 1
            server.last_used = trio.current_time()
            server.poke()
            if keep and thread is not None and turn is not None:
                self._keep(server, thread, workdir, runner, turn)
            else:
                if thread is not None:
                    thread.close()
                shutil.rmtree(workdir.parent, ignore_errors=True)

    # -- conversations kept in their threads ------------------------------------------

    def _continue(self, server: _Server, request: ChatRequest, turn: Turn) -> _Kept | None:
        """The kept thread ``request`` continues, taken (and readied), or None. Its new
        turns must be user messages after a plain answer, or exactly the results of the
        calls codex paused on (any other kept thread of this conversation is closed)."""
        for point in resume_points(request, turn.scope):
            kept = self._kept.pop(point.digest, None)
            if kept is None:
                continue
            results = [m for m in point.new_turns if m.role == "tool"]
            users = [m for m in point.new_turns if m.role != "tool"]
            usable = kept.server is server and kept.thread.running() is bool(kept.calls)
            if kept.calls:
                answers = [(kept.thread.asked.get(m.tool_call_id or ""), m.text())
                           for m in results]
                usable = usable and not users and len(results) == len(kept.calls) \
                    and [m.tool_call_id for m in results] == list(kept.calls) \
                    and all(rid is not None for rid, _ in answers)
            else:
                answers = []
                usable = usable and not results and all(m.role == "user" for m in users)
            if not usable:
                log.info("a kept codex thread cannot continue this turn; starting afresh")
                self._drop(kept)
                return None
            kept.thread.reuse()
            kept.thread.tool_answers = tuple(answers)
            turn.continued, turn.new_turns = True, point.new_turns
            kept.sent = turn.resumed_request(with_system=False)
            return kept
        return None

    async def _ready_to_keep(self, thread: AppThread, turn: Turn, end: Event) -> bool:
        """Whether the thread can be kept after ``end``: a plain answer's turn completed;
        for tool calls, codex has asked for every one (bounded wait)."""
        if isinstance(end, Stop) and end.finish_reason == "tool_calls":
            calls = [c.id for c in turn.answer().tool_calls]
            with trio.move_on_after(ASKED_WAIT_S):
                return await thread.wait_asked(calls)
            return False
        return not thread.running() and thread.returncode == 0

    def _keep(self, server: _Server, thread: AppThread, workdir: Path, runner: CliRunner,
              turn: Turn) -> None:
        answer = turn.answer()
        digest = continuation(turn.request, turn.scope, answer)
        kept_s = runner.config.sessions.ttl_s if runner.config.sessions is not None else \
            self.idle_s
        record = _Kept(server, thread, workdir, trio.current_time() + kept_s,
                       tuple(c.id for c in answer.tool_calls))
        if (old := self._kept.pop(digest, None)) is not None:
            self._drop(old)
        self._kept[digest] = record
        server.kept_until = max(server.kept_until, record.until)
        while len(self._kept) > KEPT_MAX:  # the oldest first (insertion order)
            self._drop(self._kept.pop(next(iter(self._kept))))

    def _sweep(self) -> None:
        """Close kept threads past their time or whose server is gone."""
        now = trio.current_time()
        for digest, kept in list(self._kept.items()):
            if not kept.fresh(now):
                self._drop(self._kept.pop(digest))

    @staticmethod
    def _drop(kept: _Kept) -> None:
        kept.thread.close()
        shutil.rmtree(kept.workdir.parent, ignore_errors=True)
        kept.server.poke()

    # -- servers -------------------------------------------------------------------------

    async def _server_for(self, runner: CliRunner, model: str,
                          login_pass: LoginPass | None) -> _Server:
        generation = login_pass.generation if login_pass is not None else None
        async with self._lock:
            server = self._current
            if server is not None and server.made >= self.threads_per_server:
                self._retire(server, f"it made {server.made} threads")
            elif server is not None and server.generation != generation:
                self._retire(server, "the login has a new token")
            if server is not None and server.usable(generation):
                return server
            if trio.current_time() < self._retry_at:
                raise WarmStartError("codex app-server failed to start lately; backing off")
            if self._nursery is None:
                raise WarmStartError("codex app-server is not running (provider stopping)")
            try:
                started: _Server = await self._nursery.start(self._run_server, runner, model,
                                                             login_pass)
            except Exception as exc:
                self._failures_in_a_row += 1
                delay = min(BACKOFF_S * 2 ** (self._failures_in_a_row - 1), MAX_BACKOFF_S)
                self._retry_at = trio.current_time() + delay
                log.warning("codex app-server could not start (%s); codex exec serves for "
                            "%.0f s", _describe(exc), delay, extra={"provider": runner.slot})
                raise WarmStartError(f"codex app-server could not start: {exc}") from exc
            self._failures_in_a_row = 0
            self._current = started
            return started

    async def _run_server(self, runner: CliRunner, model: str, login_pass: LoginPass | None,
                          *, task_status: trio.TaskStatus[_Server]) -> None:
        """One server's life: spawn it confined like an ``exec`` spawn, initialize it, hand
        it out, and end it once retired and idle, idle too long, or when its process ended.
        Raises only before it has started; after that a failure is logged."""
        base = job_dir()
        try:
            spec = self._server_spec(runner, model, base, login_pass)
            async with runner.spawner.open(dataclasses.replace(spec, stdin=None)) as proc:
                server = _Server(AppServer(proc, client_version=__version__), base,
                                 login_pass.generation if login_pass is not None else None)
                async with trio.open_nursery() as nursery:
                    with trio.fail_after(START_TIMEOUT_S):
                        await nursery.start(_serve, server)
                    self._servers.append(server)
                    self._started += 1
                    log.info("codex app-server started", extra={"provider": runner.slot})
                    task_status.started(server)
                    try:
                        await self._until_done(server, runner, model)
                    finally:
                        self._servers.remove(server)
                        if self._current is server:
                            self._current = None
                        server.retired.set()
                        nursery.cancel_scope.cancel(reason="codex app-server retired")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    async def _until_done(self, server: _Server, runner: CliRunner, model: str) -> None:
        """Return once the server has ended, or is retired with no open thread: at once when
        retired, after :attr:`idle_s` without a request (or later, while it holds a thread
        kept for a conversation), or after :attr:`refresh_s` when it has answered and holds
        no thread (a fresh server then takes its place)."""
        while not server.ended.is_set():
            kept = any(k.server is server for k in self._kept.values())
            end_at = max(server.last_used + self.idle_s, server.kept_until if kept else -math.inf)
            refresh_at = server.last_used + self.refresh_s \
                if server.made and not kept and self.refresh_s < self.idle_s else math.inf
            if server.open_threads == 0:
                now = trio.current_time()
                if server.retired.is_set():
                    return
                if now >= end_at:
                    self._retire(server, f"no request for {self.idle_s:g} s")
                    return
                if now >= refresh_at:
                    self._retire(server, "idle after use: a fresh server takes its place")
                    if self._nursery is not None:
                        self._nursery.start_soon(self._refresh, runner, model)
                    return
            server.changed = trio.Event()
            deadline = min(end_at, refresh_at) if server.open_threads == 0 else math.inf
            with trio.move_on_at(deadline):
                await server.changed.wait()

    async def _refresh(self, runner: CliRunner, model: str) -> None:
        """Start a fresh server ahead of the next request (its login's current pass)."""
        login_pass = None
        if runner.login is not None:
            got = await runner.login.current()
            if isinstance(got, Error):
                return
            login_pass = got
        with contextlib.suppress(WarmStartError):  # _server_for logged why
            await self._server_for(runner, model, login_pass)

    def _retire(self, server: _Server, why: str) -> None:
        if not server.retired.is_set():
            log.info("codex app-server retired: %s", why)
            server.retired.set()
            server.poke()
        if self._current is server:
            self._current = None

    @staticmethod
    def _server_spec(runner: CliRunner, model: str, base: Path,
                     login_pass: LoginPass | None) -> SpawnSpec:
        """The server's spawn: the runner's recipe for a plain request's ``exec`` spawn (its
        environment, files, credentials and sandbox) with the argv replaced."""
        problem = runner.preflight()
        if problem is not None:
            raise WarmStartError(problem.message)
        seen = runner.seen_job_dir(base) / "work"
        template = ChatRequest(model=model, messages=())
        argv = server_argv(runner.config.binary, seen, list(runner.config.extra_args))
        spec, _, _ = runner._prepare(template, model, base, argv=argv, login_pass=login_pass)
        return spec


async def _serve(server: _Server, *, task_status: trio.TaskStatus[None]) -> None:
    """Run the server's reader; mark it ended when its process is gone."""
    try:
        await server.app.serve(task_status=task_status)
    finally:
        server.ended.set()
        server.retired.set()
        server.poke()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

