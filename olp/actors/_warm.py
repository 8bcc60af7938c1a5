"""A provider's warm pool: CLI processes started ahead of time, each handed one request.

Most of a CLI hop's time to first token is the CLI starting up. A warm unit is a process
started with everything fixed at start (argv, files, environment, private home) and stdin
still open; a request whose spawn would be identical takes it and writes its turn.

The rules that make this safe (``docs/adr/0019-warm-clis.md``):

- **Single use.** A unit serves at most one request and is never returned: no request's
  text can reach another's answer.
- **Keyed by everything fixed at start.** The runner computes the key from the spawn the
  request would get (:meth:`WarmPool.take` never guesses); a miss is a cold spawn that
  behaves the same.
- **Refills in the background**, one at a time (serialized), outside the actor's
  concurrency limit, with exponential back-off after a unit fails to start or is found
  dead (reset by the next unit that serves a request). What to warm is decided by the
  keys of the last ``size`` requests (a coding tool sends the same system text every
  time), forgotten after :data:`DEMAND_WINDOW_S`.
- **Checked at hand-out**: a unit past its TTL or whose process has exited is a miss and is
  dropped, never a hung request.
- **Never more than ``size``** units idle or starting; units handed out count as the jobs
  they serve, not here.
- **Reaped on close and cancellation**: :meth:`WarmPool.close` (reload, provider disabled)
  ends every idle unit; cancelling :meth:`WarmPool.run` (shutdown) ends every unit, handed
  out or not.

Everything runs on the Trio thread; :meth:`WarmPool.take` is synchronous (no checkpoint
between choosing a unit and marking it taken).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, TypeVar

import trio

log = logging.getLogger("olp.actors.warm")

#: A request's key stops deciding what to warm this long after it was seen.
DEMAND_WINDOW_S = 3600.0


class WarmResource(Protocol):
    """What the pool asks of a started unit."""

    def running(self) -> bool:
        """Whether it can still take a request (its process has not exited)."""
        ...

    def rss_bytes(self) -> int:
        """Its resident memory now (0 when unknown). Briefly reads ``/proc``."""
        ...


R = TypeVar("R", bound=WarmResource)
T = TypeVar("T")  # what a unit is started from (the runner's template)


@dataclass(frozen=True, slots=True)
class WarmSettings:
    """``providers.<name>.warm`` (idle units kept; 0: no pool) and ``warm_ttl_s`` (an idle
    unit older than this is replaced). ``backoff_s`` doubles after each failed start, up to
    ``max_backoff_s``, and resets after a good one."""

    size: int = 0
    ttl_s: float = 600.0
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0


@dataclass(frozen=True, slots=True)
class PoolStatistics:
    """The pool as ``/health``, the dashboard and ``/metrics`` show it."""

    size: int
    warm: int  # started and waiting for a request
    booting: int  # being started
    in_use: int  # handed out, serving their request
    hits: int
    misses: int
    failures: int  # units that failed to start or were found dead
    memory_bytes: int  # resident memory of the warm units


State = Literal["booting", "idle", "leased", "gone"]


@dataclass(eq=False, slots=True)
class _Unit(Generic[R, T]):
    key: Hashable
    template: T
    state: State = "booting"
    resource: R | None = None
    ready_at: float = math.inf
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    handed: trio.Event = field(default_factory=trio.Event)
    released: trio.Event = field(default_factory=trio.Event)
    finished: trio.Event = field(default_factory=trio.Event)
    dropped: bool = False  # ended by the pool (trim, TTL, close) rather than by failing


class Lease(Generic[R]):
    """A unit handed to one request. ``async with lease as resource:``; leaving the block
    gives the unit back to be ended (never reused) and waits, shielded, until its process
    is gone and its files removed — bounded by the spawner's kill grace."""

    def __init__(self, unit: _Unit[R, Any]) -> None:
        assert unit.resource is not None
        self._unit = unit
        self.resource: R = unit.resource

    async def __aenter__(self) -> R:
        return self.resource

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._unit.released.set()
        with trio.CancelScope(shield=True):
            await self._unit.finished.wait()


class WarmPool(Generic[R, T]):
    """Warm units for one provider. Run it with ``await nursery.start(pool.run)`` in the
    actor's nursery; ``boot(template)`` is an async context manager that starts one unit
    (entering it blocks until the unit can take a request; leaving it ends the unit and
    cleans up) and raises when the unit cannot be started. ``service``, when given, is a
    task the units need for as long as any is alive (vibe's long-lived servers): started
    with ``nursery.start`` before the first unit, cancelled after the last one ended."""

    def __init__(self, name: str, boot: Callable[[T], AbstractAsyncContextManager[R]],
                 settings: WarmSettings, *,
                 service: Callable[..., Awaitable[None]] | None = None) -> None:
        self.name = name
        self.settings = settings
        self._boot = boot
        self._service = service
        self._units: list[_Unit[R, T]] = []
        self._demand: collections.deque[tuple[Hashable, T, float]] = collections.deque(
            maxlen=max(settings.size, 1))
        self._changed = trio.Event()
        self._closed = False
        self._failures_in_a_row = 0
        self._retry_at = -math.inf
        self._hits = self._misses = self._failures = 0

    # --- the request side ----------------------------------------------------------------

    def take(self, key: Hashable, template: T) -> Lease[R] | None:
        """A warm unit for ``key``, or ``None`` (a miss: spawn cold). Records the demand,
        so the pool warms for ``key`` next; ``template`` is what to start such a unit from.
        Sync: never blocks."""
        if self._closed or self.settings.size <= 0:
            return None
        now = trio.current_time()
        self._demand.append((key, template, now))
        self._wake()
        for unit in self._units:
            if unit.state != "idle" or unit.key != key:
                continue
            assert unit.resource is not None
            if unit.ready_at + self.settings.ttl_s <= now:
                self._drop(unit)
                continue
            if not unit.resource.running():
                log.warning("a warm process had exited; starting it cold",
                            extra={"provider": self.name})
                self._note_failure(now)
                self._end(unit)
                continue
            unit.state = "leased"
            unit.handed.set()
            self._hits += 1
            self._failures_in_a_row = 0
            return Lease(unit)
        self._misses += 1
        return None

    def statistics(self) -> PoolStatistics:
        """The pool's state now. Reads each warm unit's memory from ``/proc``."""
        idle = [u for u in self._units if u.state == "idle"]
        return PoolStatistics(
            size=self.settings.size, warm=len(idle),
            booting=sum(1 for u in self._units if u.state == "booting"),
            in_use=sum(1 for u in self._units if u.state == "leased"),
            hits=self._hits, misses=self._misses, failures=self._failures,
            memory_bytes=sum(u.resource.rss_bytes() for u in idle if u.resource is not None))

    def renew(self) -> None:
        """End every idle or starting unit (they hold what is no longer current: a login's
        older token); units in use finish their request. The pool starts new ones for the
        same demand. Sync, idempotent."""
        for unit in self._units:
            if unit.state in ("idle", "booting"):
                self._drop(unit)
        self._wake()

    def close(self) -> None:
        """Start no unit again and end every idle one; units in use finish their request.
        :meth:`run` returns once all are gone. Sync, idempotent."""
        self._closed = True
        for unit in self._units:
            if unit.state in ("idle", "booting"):
                self._drop(unit)
        self._wake()

    # --- the pool's own task -------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Keep the pool filled until closed (then wait for its units to end) or cancelled
        (which ends every unit, in use or not, before returning)."""
        async with trio.open_nursery() as outer:
            if self._service is not None:
                await outer.start(self._service)
            async with trio.open_nursery() as nursery:
                task_status.started()
                while not self._closed:
                    self._changed = trio.Event()
                    wanted = self._plan(trio.current_time())
                    if wanted is None:
                        with trio.move_on_at(self._next_check()):
                            await self._changed.wait()
                        continue
                    await self._start_one(nursery, *wanted)
                for unit in list(self._units):
                    if unit.state in ("idle", "booting"):
                        self._drop(unit)
            outer.cancel_scope.cancel(reason="the warm pool was closed")

    def _plan(self, now: float) -> tuple[Hashable, T] | None:
        """End idle units nobody asked for lately (or past their TTL); the next ``(key,
        template)`` to start, or ``None`` (nothing to do, or backing off)."""
        while self._demand and self._demand[0][2] + DEMAND_WINDOW_S <= now:
            self._demand.popleft()
        wanted: collections.Counter[Hashable] = collections.Counter(k for k, _, _ in self._demand)
        templates = {k: t for k, t, _ in self._demand}  # the newest template of each key
        have: collections.Counter[Hashable] = collections.Counter()
        for unit in self._units:  # oldest first: the oldest surplus unit goes first
            if unit.state == "idle" and unit.ready_at + self.settings.ttl_s <= now:
                self._drop(unit)
            elif unit.state in ("idle", "booting"):
                have[unit.key] += 1
        for unit in self._units:
            if unit.state == "idle" and have[unit.key] > wanted[unit.key]:
                have[unit.key] -= 1
                self._drop(unit)
        if now < self._retry_at or sum(have.values()) >= self.settings.size:
            return None
        for key in dict.fromkeys(k for k, _, _ in reversed(self._demand)):  # newest first
            if have[key] < wanted[key]:
                return key, templates[key]
        return None

    def _next_check(self) -> float:
        """When :meth:`run` must look again without being woken: the end of a back-off,
        a unit's TTL, or a demand leaving the window."""
        times = [self._retry_at] if self._retry_at > trio.current_time() else []
        times += [u.ready_at + self.settings.ttl_s for u in self._units if u.state == "idle"]
        if self._demand:
            times.append(self._demand[0][2] + DEMAND_WINDOW_S)
        return min(times, default=math.inf)

    async def _start_one(self, nursery: trio.Nursery, key: Hashable, template: T) -> None:
        unit: _Unit[R, T] = _Unit(key, template)
        self._units.append(unit)
        with contextlib.suppress(Exception):  # _serve_unit has logged why, removed the unit
            await nursery.start(self._serve_unit, unit)

    async def _serve_unit(self, unit: _Unit[R, T], *,
                          task_status: trio.TaskStatus[None]) -> None:
        """One unit's life: start it, wait for a request (or its end), wait for that request
        to finish, end it. Never raises after it has started (a failing unit must not take
        the actor down); a failed start is raised to :meth:`_start_one`."""
        started = False
        try:
            with unit.scope:
                async with self._boot(unit.template) as resource:
                    unit.resource, unit.ready_at = resource, trio.current_time()
                    if unit.state == "booting":
                        unit.state = "idle"
                    started = True
                    task_status.started()
                    await unit.handed.wait()
                    await unit.released.wait()
            if not started:  # dropped (closed) while starting
                raise _Dropped
        except _Dropped:
            raise
        except Exception as exc:
            if started:
                log.warning("a warm process failed while it waited: %s", type(exc).__name__,
                            extra={"provider": self.name})
            else:
                self._note_failure(trio.current_time())
                log.warning("could not start a warm process (%s); retrying in %.0f s",
                            _describe(exc), self._retry_at - trio.current_time(),
                            extra={"provider": self.name})
                raise
        finally:
            unit.state = "gone"
            with contextlib.suppress(ValueError):
                self._units.remove(unit)
            unit.finished.set()
            self._wake()

    # --- helpers ---------------------------------------------------------------------------

    def _drop(self, unit: _Unit[R, T]) -> None:
        unit.dropped = True
        self._end(unit)

    def _end(self, unit: _Unit[R, T]) -> None:
        if unit.state in ("idle", "booting"):
            unit.state = "gone"
            unit.scope.cancel(reason="warm process no longer wanted")

    def _note_failure(self, now: float) -> None:
        self._failures += 1
        self._failures_in_a_row += 1
        delay = self.settings.backoff_s * 2 ** (self._failures_in_a_row - 1)
        self._retry_at = now + min(delay, self.settings.max_backoff_s)

    def _wake(self) -> None:
        self._changed.set()


class _Dropped(Exception):
    """A unit was ended by the pool before it finished starting."""


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
