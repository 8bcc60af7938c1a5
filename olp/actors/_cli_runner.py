"""One CLI job: spawn, read, enforce deadlines, turn output into IR events, clean up."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import trio

from olp.failures import Code, failure
from olp.ir import ChatRequest, Error, Event, Stop, is_content, is_terminal
from olp.store import DEFAULT_ACCOUNT, slot_name

from ._adapter import CapabilityMissing, CliAdapter, Invocation, LineParser
from ._deadline import DeadlineClock, Timeouts, TimeoutWording
from ._job_files import inside, prepare_dirs, write_private
from ._lines import LineTooLong
from ._login import Login, LoginPass
from ._process import CliProcess, Spawner, SpawnError, SpawnSpec
from ._run_dir import job_dir
from ._sandbox import JOB_DIR_INSIDE, Sandbox
from ._sessions import (
    SessionKit,
    SessionPolicy,
    Turn,
    holds_session,
    keep_turn,
    open_turn,
    settler,
)
from ._threads import ThreadServers
from ._tool_gate import ToolGate
from ._warm import Lease, WarmPool, WarmSettings
from ._warm_units import Template, WarmProcess, WarmStartError, WarmUnits

log = logging.getLogger("olp.actors")

Emit = Callable[[Event], Awaitable[None]]

#: Variables copied from the proxy's own environment into every CLI's (nothing else is).
_BASE_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")

#: How this runner words its timeout errors (the clients see these messages).
_WORDING = TimeoutWording(
    first_output="the CLI produced no output within {first_output_s:g} s",
    idle="the CLI went silent for {idle_s:g} s mid-answer",
    total="the CLI gave no complete answer within {total_s:g} s",
)


@dataclass(frozen=True, slots=True)
class CliConfig:
    """How one provider's CLI is run: binary, extra argv, extra env, deadlines, and the
    sandbox every spawn runs in (``None``: unconfined, only when the owner opted out)."""

    binary: str
    env: Mapping[str, str] = field(default_factory=dict)
    extra_args: Sequence[str] = ()
    home_files: Mapping[str, str] = field(default_factory=dict)
    timeouts: Timeouts = Timeouts()
    real_home: Path = field(default_factory=Path.home)
    proxy_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    sandbox: Sandbox | None = None
    sessions: SessionPolicy | None = None  # kept CLI sessions (providers.<name>.sessions)
    account: str = DEFAULT_ACCOUNT  # which login of the provider this runner spawns (#30)


class CliRunner:
    """Runs jobs for one CLI provider. Stateless between jobs (the actor owns concurrency),
    except for its warm pool when ``warm.size`` > 0 (the actor runs it: :attr:`pool`).

    ``login``: the keeper of its login when OLP keeps it fresh (``olp/logins``; the actor runs
    it). Then every spawn gets a pass from it (the access token only) instead of the login
    file, and the warm pool renews its units at every new token.

    ``threads``: the CLI's long-lived model server (``codex app-server``; the actor runs it):
    a job it serves is answered in a thread there rather than by a spawn."""

    def __init__(self, adapter: CliAdapter, spawner: Spawner, config: CliConfig, *,
                 warm: WarmSettings | None = None, units: WarmUnits | None = None,
                 login: Login | None = None, threads: ThreadServers | None = None) -> None:
        self.adapter = adapter
        self.spawner = spawner
        self.config = config
        self.login = login
        self.threads = threads
        # provider@account for another login than the default: its own sessions and pool
        self.slot = slot_name(adapter.name, config.account)
        self.pool: WarmPool[WarmProcess, Template] | None = None
        if warm is not None and warm.size > 0:
            if units is None:
                self.pool = WarmPool(self.slot, self._boot_warm, warm)
            else:
                self.pool = WarmPool(self.slot, functools.partial(units.boot, self), warm,
                                     service=units.serve)
        if login is not None and self.pool is not None:
            login.subscribe(self.pool.renew)
        if login is not None and threads is not None:
            login.subscribe(threads.renew)

    def environment(self, home: Path) -> dict[str, str]:
        """The CLI's whole environment: minimal base, adapter defaults, configured ``env``."""
        proxy_env = self.config.proxy_env
        env = {k: proxy_env[k] for k in _BASE_PASSTHROUGH if k in proxy_env}
        env.setdefault("LANG", "C.UTF-8")
        env.update(HOME=str(home), TMPDIR=str(home / "tmp"), TERM="dumb", NO_COLOR="1")
        env.update(self.adapter.spawn_env(proxy_env))
        env.update(self.config.env)
        return env

    def preflight(self) -> Error | None:
        """``AUTH_MISSING`` before spawning when no credential can be found."""
        env = {**self.adapter.spawn_env(self.config.proxy_env), **self.config.env}
        return self.adapter.preflight(env, self.config.real_home)

    @property
    def sessions(self) -> tuple[SessionPolicy, SessionKit] | None:
        """The kept-session policy and this CLI's way of keeping them, when both exist."""
        kit: SessionKit | None = getattr(self.adapter, "sessions", None)
        policy = self.config.sessions
        return None if kit is None or policy is None else (policy, kit)

    async def holds_session(self, request: ChatRequest, model: str, owner: str) -> bool:
        """Whether this runner keeps a session ``request`` continues (reads the store)."""
        kept = self.sessions
        if kept is not None and self.threads is not None \
                and self.threads.holds(request, f"{owner}|{self.slot}|{model}"):
            return True
        return kept is not None and await holds_session(
            kept[0], request, provider=self.slot, model=model, owner=owner)

    async def run(self, request: ChatRequest, model: str, emit: Emit, *,
                  owner: str | None = None) -> None:
        """Run one job, emitting IR events and always, last, exactly one terminal event.

        With kept sessions (:attr:`sessions`) and an ``owner``, a turn that continues an
        answer of this CLI resumes its session with only the new turns (a failed resume is
        replayed once as a new session, before any content); a clean answer's session is
        kept for the next turn (:mod:`._sessions`). Otherwise, a warm process from
        :attr:`pool` serves the job when one matches it (the same spawn, started ahead of
        time); else the CLI is spawned now. Blocks for the life of the CLI. On cancellation
        the process group is killed (TERM, then KILL after the spawner's grace) and the
        temporary directories are removed before the cancellation propagates; no terminal
        event is sent then, and no session is kept.

        With a kept :attr:`login`, the spawn gets the login's current pass (waiting for a
        refresh it needs; an ended login answers its error, nothing spawned), and when the
        API refuses that token before any content the job is answered once more with a
        newer one (:meth:`_renewed_after`).
        """
        terminal: Event | None = self.preflight()
        login_pass: LoginPass | None = None
        seen: _ContentSeen | None = None  # with a kept login: whether content went out
        if terminal is None and self.login is not None:
            got = await self.login.current()
            terminal, login_pass = (got, None) if isinstance(got, Error) else (None, got)
            emit = seen = _ContentSeen(emit)
        turn: Turn | None = None
        if terminal is None and owner is not None and (kept := self.sessions) is not None:
            turn = await open_turn(kept[0], kept[1], request, provider=self.slot,
                                   model=model, owner=owner)
            if turn.stored is not None:  # reads the kept files: off the Trio thread
                turn.usage_before = await kept[0].offload(
                    functools.partial(kept[1].usage_before, turn.stored.files))
            emit = turn.tap(emit, model)
        if terminal is None and (turn is None or turn.stored is None) \
                and self.threads is not None and self.threads.serves(request):
            terminal = await self._answer_in_thread(request, model, emit, turn, login_pass)
            if login_pass is not None and (renewed := await self._renewed_after(
                    terminal, login_pass, seen)) is not None:
                terminal, login_pass, seen = None, renewed, None  # answered again, once
        if terminal is None and (turn is None or turn.stored is None) \
                and (lease := self._take_warm(request, model)) is not None:
            async with lease as warm:
                terminal = await self._answer_warm(request, model, warm, emit, turn,
                                                   login_pass)
                if turn is not None and isinstance(terminal, Stop):
                    await self._keep(turn, warm.workdir.parent / "home")
            if login_pass is not None and (renewed := await self._renewed_after(
                    terminal, login_pass, seen)) is not None:
                terminal, login_pass, seen = None, renewed, None  # answered again, once
        if terminal is None:
            # The job's directories are made and removed synchronously: a few small local
            # file operations, and a cleanup with no checkpoint cannot be interrupted. They
            # live in the proxy's run directory, which the next start reaps after a crash.
            base = job_dir()
            try:
                terminal = await self._spawn_and_read(request, model, base, emit, turn,
                                                      login_pass)
                if turn is not None and turn.stored is not None and _replayable(terminal) \
                        and not turn.content:
                    turn.stored, turn.evicted = None, "resume_failed"
                    shutil.rmtree(base, ignore_errors=True)
                    base = job_dir()
                    terminal = await self._spawn_and_read(request, model, base, emit, turn,
                                                          login_pass)
                if login_pass is not None and (renewed := await self._renewed_after(
                        terminal, login_pass, seen)) is not None:
                    shutil.rmtree(base, ignore_errors=True)
                    base = job_dir()
                    terminal = await self._spawn_and_read(request, model, base, emit, turn,
                                                          renewed)
                if turn is not None and isinstance(terminal, Stop):
                    await self._keep(turn, base / "home")
            finally:
                shutil.rmtree(base, ignore_errors=True)
        await emit(terminal)

    async def _renewed_after(self, terminal: Event | None, login_pass: LoginPass,
                             seen: _ContentSeen | None) -> LoginPass | None:
        """A newer pass to answer again with, when the API refused ``login_pass``'s token
        before any content reached the client (the login was refreshed meanwhile, or is
        refreshed now: :meth:`~olp.actors.Login.renewed`); ``None`` otherwise."""
        if self.login is None or seen is None or seen.content \
                or not isinstance(terminal, Error) \
                or terminal.category != "auth":
            return None
        renewed = await self.login.renewed(login_pass)
        if isinstance(renewed, Error) or renewed.generation == login_pass.generation:
            return None
        log.info("the API refused an older login token; answering again with the new one",
                 extra={"provider": self.slot})
        return renewed

    def _settle(self, turn: Turn | None, home: Path) -> Callable[[], Awaitable[None]] | None:
        kept = self.sessions
        return None if turn is None or kept is None else settler(*kept, turn, home)

    async def _keep(self, turn: Turn, home: Path) -> None:
        kept = self.sessions
        assert kept is not None
        if not await keep_turn(kept[0], kept[1], turn, home):
            log.debug("no session kept after this turn", extra={"provider": self.adapter.name})

    def _prepare(self, request: ChatRequest, model: str, base: Path, *,
                 argv: Sequence[str] | None = None, extra_env: Mapping[str, str] | None = None,
                 link_credentials: bool = True, turn: Turn | None = None,
                 login_pass: LoginPass | None = None,
                 ) -> tuple[SpawnSpec, Invocation, Path]:
        """Build the spawn for ``request`` in job directory ``base`` and make its directories
        (a few small local writes). Raises :class:`CapabilityMissing`. A long-lived server
        (``olp/providers/vibe/_acp_units.py``) replaces the argv, adds variables and may leave
        the credential files unlinked. With kept sessions the CLI keeps its session; a
        ``turn`` that resumes one gets its files in the home and only its new turns. A
        runner whose login OLP keeps links no credential file: the spawn gets ``login_pass``
        (its variables and files) instead."""
        workdir, home = base / "work", base / "home"
        seen = self.seen_job_dir(base)  # the CLI's argv, environment and files name these
        stored = turn.stored if turn is not None else None
        kit = self.sessions[1] if self.sessions is not None else None
        invocation = self.adapter.invocation(
            turn.resumed_request(with_system=not kit.system_in_prompt,
                                 continue_prompt=kit.continue_prompt)
            if stored is not None and turn is not None and kit is not None else request,
            binary=self.config.binary, model=model, workdir=seen / "work",
            extra_args=self.config.extra_args)
        base_env = self.environment(seen / "home")
        links = (self.adapter.home_links(base_env, self.config.real_home)
                 if link_credentials and self.login is None else {})
        env = {**base_env, **invocation.env, **(login_pass.env if login_pass else {}),
               **(extra_env or {})}
        prepare_dirs(workdir, home, invocation, self.config.home_files, links)
        for rel, data in (login_pass.home_files if login_pass else {}).items():
            write_private(inside(home, rel), data)
        if argv is None:  # the CLI's own argv (a long-lived server's is the server's)
            argv = invocation.argv
            if kit is not None:
                argv = kit.fresh_argv(argv) if stored is None else \
                    kit.resume_argv(argv, stored.session_id)
        if kit is not None and stored is not None:
            for rel, data in stored.files.items():
                write_private(inside(home, rel), data)
        if self.config.sandbox is not None:
            argv = self.config.sandbox.wrap(argv, job_dir=base, workdir=seen / "work",
                                            writable=links.values(), inside=seen)
        return SpawnSpec(argv=argv, stdin=invocation.stdin, env=env, cwd=workdir), \
            invocation, workdir

    def seen_job_dir(self, base: Path) -> Path:
        """The job directory ``base`` as the CLI sees it: :data:`JOB_DIR_INSIDE`, the same
        on every spawn, when it is sandboxed (so its prompt's prefix does not change from
        spawn to spawn); ``base`` itself when it is not."""
        return JOB_DIR_INSIDE if self.config.sandbox is not None else base

    async def _spawn_and_read(self, request: ChatRequest, model: str, base: Path,
                              emit: Emit, turn: Turn | None = None,
                              login_pass: LoginPass | None = None) -> Error | Event:
        try:
            spec, _, workdir = self._prepare(request, model, base, turn=turn,
                                             login_pass=login_pass)
        except CapabilityMissing as exc:
            return failure(Code.CAPABILITY, str(exc), status=400)
        clock = DeadlineClock(self.config.timeouts, wording=_WORDING)
        try:
            async with self.spawner.open(spec) as proc:
                return await self._read(proc, request, workdir, clock, emit,
                                        settle=self._settle(turn, base / "home"))
        except SpawnError as exc:
            code = Code.CLI_NOT_FOUND if exc.not_found else Code.SPAWN_FAILED
            return failure(code, str(exc))

    # --- a long-lived server's threads (olp/actors/_threads.py) -----------------------------

    async def _answer_in_thread(self, request: ChatRequest, model: str, emit: Emit,
                                turn: Turn | None, login_pass: LoginPass | None,
                                ) -> Error | Event | None:
        """Answer ``request`` in a thread of :attr:`threads`. ``None`` when no thread could be
        had or it could not take the request (nothing was sent: the caller spawns the CLI).
        A conversation continued in its kept thread that fails before any content is
        answered once more in a fresh thread with the whole history, as a failed resume is."""
        terminal = await self._in_thread(request, model, emit, turn, login_pass)
        if turn is not None and turn.continued and terminal is not None \
                and _replayable(terminal) and not turn.content:
            turn.continued, turn.new_turns, turn.evicted = False, (), "resume_failed"
            terminal = await self._in_thread(request, model, emit, turn, login_pass)
        return terminal

    async def _in_thread(self, request: ChatRequest, model: str, emit: Emit,
                         turn: Turn | None, login_pass: LoginPass | None,
                         ) -> Error | Event | None:
        assert self.threads is not None
        try:
            async with self.threads.open(self, request, model, login_pass, turn) as unit:
                terminal = await self._answer_warm(request, model, unit, emit, turn,
                                                   login_pass)
                if terminal is not None and unit.finished is not None:
                    unit.finished(terminal)
                return terminal
        except CapabilityMissing as exc:
            return failure(Code.CAPABILITY, str(exc), status=400)
        except WarmStartError as exc:
            log.info("no server thread (%s); spawning the CLI", exc,
                     extra={"provider": self.slot})
            return None

    # --- warm processes (olp/actors/_warm.py) ---------------------------------------------

    def _take_warm(self, request: ChatRequest, model: str) -> Lease[WarmProcess] | None:
        """A warm process for this request's spawn, or ``None``. Only a request whose spawn
        does not depend on its conversation is warmed: the spawn of its *template* (the
        request with only its system messages) must be the same, or no warm process started
        from a template could ever serve it (codex's image files, say)."""
        if self.pool is None:
            return None
        template = _template_of(request)
        try:
            key = self.spawn_identity(request, model)
            if key != self.spawn_identity(template, model):
                return None
        except CapabilityMissing:
            return None
        return self.pool.take(key, (template, model))

    def spawn_identity(self, request: ChatRequest, model: str,
                       workdir: Path | None = None) -> Hashable:
        """Everything fixed when the CLI starts for ``request`` in ``workdir`` (default: a
        placeholder, for a pool key). Raises :class:`CapabilityMissing`."""
        workdir = _KEY_WORKDIR if workdir is None else workdir
        invocation = self.adapter.invocation(
            request, binary=self.config.binary, model=model, workdir=workdir,
            extra_args=self.config.extra_args)
        return _identity(invocation)

    @contextlib.asynccontextmanager
    async def _boot_warm(self, template: Template) -> AsyncIterator[WarmProcess]:
        """Start one warm process for ``template`` (the pool's boot): the same spawn a cold
        job gets, with stdin left open. Raises when it cannot start (no credentials, the
        binary missing); leaving the context kills its group and removes its files."""
        request, model = template
        problem = self.preflight()
        if problem is not None:
            raise WarmStartError(problem.message)
        login_pass = None
        if self.login is not None:
            got = await self.login.current()
            if isinstance(got, Error):
                raise WarmStartError(got.message)
            login_pass = got
        base = job_dir()
        try:
            spec, invocation, workdir = self._prepare(request, model, base,
                                                      login_pass=login_pass)
            async with self.spawner.open(dataclasses.replace(spec, stdin=None)) as proc:
                yield WarmProcess(proc, workdir, _identity(invocation),
                                  seen_workdir=self.seen_job_dir(base) / "work",
                                  login_generation=login_pass.generation
                                  if login_pass is not None else None)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    async def _answer_warm(self, request: ChatRequest, model: str, warm: WarmProcess,
                           emit: Emit, turn: Turn | None = None,
                           login_pass: LoginPass | None = None) -> Error | Event | None:
        """Hand ``request`` to a warm process: its turn on stdin, then read it like a cold
        spawn. ``None`` when it cannot take it after all (it died before reading its turn,
        its spawn differs, or it holds an older login token than ``login_pass``): nothing was
        sent, the caller spawns cold."""
        if login_pass is not None and warm.login_generation != login_pass.generation:
            log.info("a warm process held an older login token; spawning cold",
                     extra={"provider": self.adapter.name})
            return None
        invocation = self.adapter.invocation(
            request, binary=self.config.binary, model=model,
            workdir=warm.seen_workdir or warm.workdir, extra_args=self.config.extra_args)
        if _identity(invocation) != warm.identity:
            log.warning("a warm process did not match its request's spawn; spawning cold",
                        extra={"provider": self.adapter.name})
            return None
        clock = DeadlineClock(self.config.timeouts, wording=_WORDING)
        try:
            await warm.process.send_input(invocation.stdin)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            log.warning("a warm process died at hand-out; spawning cold",
                        extra={"provider": self.adapter.name})
            return None
        parser = warm.parser() if warm.parser is not None else None
        return await self._read(warm.process, request, warm.workdir, clock, emit, parser,
                                settle=self._settle(turn, warm.workdir.parent / "home"))

    # --- reading a CLI ---------------------------------------------------------------------

    async def _read(self, proc: CliProcess, request: ChatRequest, workdir: Path,
                    clock: DeadlineClock, emit: Emit, parser: LineParser | None = None, *,
                    settle: Callable[[], Awaitable[None]] | None = None) -> Error | Event:
        """Read ``proc`` to its end under ``clock``'s deadlines with ``parser`` (default: the
        adapter's for ``workdir``); the terminal event. At a tool call, ``settle`` (bounded
        by its maker) is awaited before the kill."""
        # Every parser's tool calls are checked against the request (_tool_gate.py); a
        # terminal event from it ends the spawn (a CLI left waiting on tools/call is killed).
        gate = ToolGate(parser or self.adapter.parser(workdir), request)
        while True:
            deadline = clock.deadline
            with trio.move_on_at(deadline):
                try:
                    line = await proc.receive_line()
                except LineTooLong as exc:
                    return failure(Code.OUTPUT_TOO_LONG, str(exc))
                if line is None:
                    returncode = await proc.wait()
                    stderr_tail = proc.stderr_tail()
                    for event in gate.trailer(returncode, stderr_tail):
                        await emit(event)
                    return gate.finish(returncode, stderr_tail)
                for event in gate.feed(line):
                    if is_terminal(event):
                        if isinstance(event, Stop) and event.finish_reason == "tool_calls":
                            # Waiting on a tools/call the bridge never answers:
                            # SIGKILL now (a TERM lets claude ask the model again,
                            # a second billed request; ADR 0012, decision 3). A CLI
                            # that writes its session late may finish writing the
                            # call first: it is blocked on tools/call meanwhile.
                            if settle is not None:
                                await settle()
                            # (A server's thread kept for the client's results is
                            # not: the thread's owner ends or keeps it.)
                            if not getattr(proc, "holds_tool_calls", False):
                                proc.kill()
                        return event
                    if is_content(event):
                        clock.content()
                    await emit(event)
                clock.activity()  # once content has flowed, every line restarts idle
                continue
            return clock.timeout_error(deadline)


class _ContentSeen:
    """An emit that notes whether content went through it (the job's answer began)."""

    __slots__ = ("content", "emit")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.content = False

    async def __call__(self, event: Event) -> None:
        if not self.content and is_content(event):
            self.content = True
        await self.emit(event)


def _replayable(terminal: Event) -> bool:
    """Whether a resumed spawn's failure may be its session's (replayed once afresh): not a
    limit, an outage or a login problem, which a replay would only meet again."""
    return isinstance(terminal, Error) and terminal.category in ("unknown", "client_error")


#: The working directory a spawn's key is computed for (never created).
_KEY_WORKDIR = Path("/nonexistent/olp-warm-key/work")


def _identity(invocation: Invocation) -> Hashable:
    """Everything fixed when a CLI starts: its argv, files, binary files, home files and
    environment."""
    return (tuple(invocation.argv), tuple(sorted(invocation.files.items())),
            tuple(sorted(invocation.binary_files.items())), tuple(sorted(invocation.env.items())),
            tuple(sorted(invocation.home_files.items())))


def _template_of(request: ChatRequest) -> ChatRequest:
    """``request`` with only its system and developer messages: what a warm process is
    started from (no conversation text is kept for warming)."""
    return msgspec.structs.replace(request, messages=tuple(
        m for m in request.messages if m.role in ("system", "developer")))
