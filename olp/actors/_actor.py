"""The provider actor: a mailbox, a spawn limiter and a nursery that owns every job.

Callers talk to an actor only through :meth:`ProviderActor.submit`, which hands back a
:class:`Ticket`: a channel of IR events and the job's cancel scope. Nothing else spawns a
provider process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from olp.failures import Code, failure
from olp.ir import ChatRequest, Error, Event, is_terminal

from ._login import Login
from ._threads import ThreadServers, ThreadServerStatistics
from ._warm import PoolStatistics, WarmPool

log = logging.getLogger("olp.actors")

#: Events buffered between a job and its caller: a slow client slows the CLI reader.
REPLY_BUFFER = 16


class JobRunner(Protocol):
    """How a provider answers one job (a CLI spawn, or later an HTTP call)."""

    async def run(self, request: ChatRequest, model: str,
                  emit: Callable[[Event], Awaitable[None]], *, owner: str | None = None) -> None:
        """Emit events, the last of them terminal; on cancellation clean up and re-raise.
        ``owner``: whose conversation this is (the API key's id; ``None``: nobody's), the
        scope of a CLI's kept session."""
        ...


class Admission(Protocol):
    """Whether a provider may take jobs now (the lockdown gate, :mod:`olp.lockdown`)."""

    async def admit(self) -> Error | None:
        """``None`` to run the job; else the error that answers it. May block (a check
        in progress); cancellation just stops the wait."""
        ...

    def status(self) -> dict[str, Any]:
        """The decision as ``/health`` shows it (``state``, ``line``, …)."""
        ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """What keeps the decision current (the checks), run by the actor beside its jobs
        until the actor stops or is retired."""
        ...


@dataclass(frozen=True, slots=True)
class _Job:
    request: ChatRequest
    model: str
    reply: trio.MemorySendChannel[Event]
    scope: trio.CancelScope  # created by the caller, who may cancel it at any time
    owner: str | None = None  # the API key's id: the scope of a kept CLI session


@dataclass(frozen=True, slots=True)
class Ticket:
    """The caller's handle on one job: its events, ending with exactly one terminal event
    (unless abandoned), and :meth:`abandon` to stop it."""

    events: trio.MemoryReceiveChannel[Event]
    scope: trio.CancelScope

    async def receive(self) -> Event:
        """The next event; raises :class:`trio.EndOfChannel` after the job's last one.

        An event already buffered is returned without a schedule point (a yield per event
        cost a scheduler pass each, several per answer: ADR 0028); otherwise it blocks until
        the job sends one, and a cancellation while waiting loses nothing."""
        try:
            return self.events.receive_nowait()
        except trio.WouldBlock:
            return await self.events.receive()

    def abandon(self) -> None:
        """Cancel the job and stop listening. Sync, idempotent, safe in ``finally``."""
        self.scope.cancel(reason="caller abandoned the job")
        self.events.close()


@dataclass(frozen=True, slots=True)
class ActorStatistics:
    name: str
    in_flight: int
    max_concurrent: int
    jobs_started: int
    jobs_refused: int
    warm: PoolStatistics | None = None  # its warm pool, when it has one
    threads: ThreadServerStatistics | None = None  # its long-lived server, when it has one


class ProviderActor:
    """Serves one provider. Start it with ``await nursery.start(actor.run)``.

    At most ``max_concurrent`` jobs run at once; a job that finds every slot taken is
    answered ``CONCURRENCY_LIMIT`` at once instead of queueing (the fallback chain exists
    for overflow). ``pool`` is the runner's warm pool (:mod:`olp.actors._warm`), which the
    actor runs beside its jobs and ends with them. ``admission``, when given, decides each
    job before it takes a slot (a refusal answers the job; nothing is spawned). ``login``,
    when given, is the keeper of the runner's login (``olp/logins``): the actor runs it beside
    its jobs, as the admission's checks, until retired and idle; so is ``threads``, the
    runner's long-lived model server (``codex app-server``).
    """

    def __init__(self, name: str, runner: JobRunner, *, max_concurrent: int,
                 pool: WarmPool[Any, Any] | None = None,
                 admission: Admission | None = None, login: Login | None = None,
                 threads: ThreadServers | None = None) -> None:
        self.name = name
        self.runner = runner
        self.pool = pool
        self.admission = admission
        self.login = login
        self.threads = threads
        self.limiter = trio.CapacityLimiter(max_concurrent)
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[_Job](0)
        self._jobs_started = 0
        self._jobs_refused = 0
        self._retired = False
        self._active = 0  # jobs being served (admitted or waiting for admission)
        self._idle = trio.Event()
        self.finished = trio.Event()  # set when :meth:`run` has returned (retired or stopped)

    def statistics(self) -> ActorStatistics:
        stats = self.limiter.statistics()
        return ActorStatistics(self.name, stats.borrowed_tokens, int(stats.total_tokens),
                               self._jobs_started, self._jobs_refused,
                               self.pool.statistics() if self.pool is not None else None,
                               self.threads.statistics() if self.threads is not None else None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Serve jobs until cancelled, or until retired and its jobs are done; cancelling
        it cancels (and reaps) every job and warm process."""
        try:
            async with trio.open_nursery() as nursery:
                if self.pool is not None:
                    await nursery.start(self.pool.run)
                checks = trio.CancelScope()
                if self.threads is not None:  # before any job can ask it for a thread
                    await nursery.start(self._services, checks)
                elif self.admission is not None or self.login is not None:
                    nursery.start_soon(self._services, checks)
                task_status.started()
                with self._inbox_recv:
                    async for job in self._inbox_recv:
                        self._active += 1  # counted now: before the task first runs
                        nursery.start_soon(self._serve, job, name=f"{self.name}:job")
                nursery.start_soon(self._end_checks_when_idle, checks)
                if self.pool is not None:  # retired: no job will take a warm process
                    self.pool.close()
        finally:
            self.finished.set()

    async def holds_session(self, request: ChatRequest, model: str, owner: str) -> bool:
        """Whether this actor's runner keeps a CLI session ``request`` continues (a runner
        without kept sessions keeps none). Reads the session store; takes no slot."""
        holds = getattr(self.runner, "holds_session", None)
        return holds is not None and bool(await holds(request, model, owner))

    async def submit(self, request: ChatRequest, model: str, *,
                     owner: str | None = None) -> Ticket:
        """Hand a job to the actor (``owner``: see :meth:`JobRunner.run`). Blocks only until
        the actor has taken it.

        A retired actor (:meth:`retire`) takes no job: its ticket holds one terminal
        ``CANCELLED`` error (category ``unavailable``: the chain moves on). Raises
        :class:`trio.BrokenResourceError` when the actor is no longer running.
        """
        send, recv = trio.open_memory_channel[Event](REPLY_BUFFER)
        scope = trio.CancelScope()
        try:
            if self._retired:
                raise trio.ClosedResourceError
            job = _Job(request, model, send, scope, owner)
            try:  # the actor waiting on its inbox (the usual case) takes it without a yield
                self._inbox_send.send_nowait(job)
            except trio.WouldBlock:
                await self._inbox_send.send(job)
        except trio.ClosedResourceError:  # retired, before or while handing the job over
            with send:
                send.send_nowait(failure(Code.CANCELLED, f"{self.name} was replaced by a config "
                                                       "reload before this hop started"))
            return Ticket(recv, scope)
        except BaseException:
            send.close()
            recv.close()
            raise
        return Ticket(recv, scope)

    def retire(self) -> None:
        """Take no new job; :meth:`run` returns once the jobs it runs have finished (a config
        reload replaced this actor); its idle warm processes end now. Sync, idempotent."""
        self._retired = True
        self._inbox_send.close()
        if self.pool is not None:
            self.pool.close()

    async def _services(self, scope: trio.CancelScope, *,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The admission's checks, the login's keeper and the long-lived server, until
        ``scope`` is cancelled (started once the server can take requests)."""
        with scope:
            async with trio.open_nursery() as nursery:
                if self.threads is not None:
                    await nursery.start(self.threads.serve)
                task_status.started()
                if self.admission is not None:
                    nursery.start_soon(self.admission.serve)
                if self.login is not None:
                    nursery.start_soon(self.login.serve)

    async def _end_checks_when_idle(self, checks: trio.CancelScope) -> None:
        """Retired: the admission's checks, the login's keeper and the long-lived server end
        once no job is left that may use one."""
        while self._active:
            self._idle = trio.Event()
            await self._idle.wait()
        checks.cancel()

    async def _serve(self, job: _Job) -> None:
        try:
            await self._admit_and_run(job)
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def _admit_and_run(self, job: _Job) -> None:
        with job.reply, job.scope:
            if self.admission is not None and (refused := await self.admission.admit()):
                self._jobs_refused += 1
                await _send_quietly(job, refused)
                return
            try:
                self.limiter.acquire_nowait()
            except trio.WouldBlock:
                self._jobs_refused += 1
                await _send_quietly(job, failure(
                    Code.CONCURRENCY_LIMIT, f"{self.name} is running its maximum of "
                                            f"{int(self.limiter.total_tokens)} jobs"))
                return
            self._jobs_started += 1
            try:
                await self._run_job(job)
            finally:
                self.limiter.release()

    async def _run_job(self, job: _Job) -> None:
        ended = False

        async def emit(event: Event) -> None:
            nonlocal ended
            if ended:
                return
            ended = is_terminal(event)
            try:
                # Room in the buffer: no schedule point (the runner's next read has one);
                # full: wait for the caller, so a slow client slows the reader (ADR 0028).
                job.reply.send_nowait(event)
                return
            except trio.WouldBlock:
                try:
                    await job.reply.send(event)
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            job.scope.cancel(reason="nobody is listening")
            await trio.lowlevel.checkpoint()  # the job stops here

        try:
            await self.runner.run(job.request, job.model, emit, owner=job.owner)
        except Exception as exc:  # the per-job boundary: one job's bug never kills the actor
            log.exception("job failed", extra={"provider": self.name})
            await emit(failure(Code.INTERNAL_ERROR,
                               f"{type(exc).__name__} in the {self.name} provider"))
        if not ended:
            await emit(failure(Code.PROTOCOL_ERROR,
                               f"the {self.name} provider ended without an answer"))


async def _send_quietly(job: _Job, event: Event) -> None:
    try:
        await job.reply.send(event)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
