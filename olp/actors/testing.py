"""A scripted fake :class:`~olp.actors.Spawner` for deterministic ``MockClock`` tests.

Each spawn plays a script of steps in virtual time, so tests can assert exact times at
which deadlines fire and that every "process" ended (``alive == 0``), the way trio's own
happy-eyeballs tests script fake connections.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from olp.failures import Code, failure
from olp.ir import ChatRequest, Error, Event, Stop
from olp.ir._events import EVENT_DECODER, EVENT_ENCODER

from ._adapter import Invocation, LineParser
from ._process import CliProcess, SpawnError, SpawnSpec

#: The resident memory every running fake process reports.
FAKE_RSS_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Line:
    """After ``delay`` seconds, print ``data`` (one stdout line)."""

    delay: float
    data: bytes


@dataclass(frozen=True, slots=True)
class Exit:
    """After ``delay`` seconds, close stdout and exit with ``code``."""

    delay: float = 0.0
    code: int = 0
    stderr: bytes = b""


@dataclass(frozen=True, slots=True)
class Hang:
    """Never print again and never exit (until killed)."""


Step = Line | Exit | Hang


@dataclass(slots=True)
class FakeRun:
    """What happened to one fake spawn, for assertions."""

    spec: SpawnSpec
    started_at: float
    ended_at: float | None = None
    killed: bool = False
    killed_at_once: bool = False  # ended by CliProcess.kill() (SIGKILL, no grace)
    lines_sent: int = 0
    #: What :meth:`CliProcess.send_input` wrote (a process spawned with ``stdin=None``).
    input: bytes = b""
    input_closed: bool = False
    input_at: float | None = None


@dataclass(slots=True)
class _FakeProcess:
    steps: list[Step]
    run: FakeRun
    returncode: int | None = None
    stderr: bytes = b""
    _pending_delay: float | None = field(default=None)
    #: A process spawned with ``stdin=None`` plays its script only once it has input.
    started_reading: trio.Event = field(default_factory=trio.Event)

    async def receive_line(self) -> bytes | None:
        if self.run.spec.stdin is None:
            await self.started_reading.wait()
        while self.steps:
            step = self.steps[0]
            if isinstance(step, Hang):
                await trio.sleep(math.inf)
                continue
            # A cancelled sleep leaves the step in place, so a retry resumes the wait
            # from the same scripted instant rather than restarting it.
            due = self._due(step.delay)
            await trio.sleep_until(due)
            self.steps.pop(0)
            self._pending_delay = None
            if isinstance(step, Line):
                self.run.lines_sent += 1
                return step.data
            self.returncode, self.stderr = step.code, step.stderr
            return None
        return None

    def _due(self, delay: float) -> float:
        if self._pending_delay is None:
            self._pending_delay = trio.current_time() + delay
        return self._pending_delay

    async def wait(self) -> int:
        while self.returncode is None:
            await self.receive_line()  # runs the rest of the script
            if self.returncode is None and not self.steps:
                self.returncode = 0
        return self.returncode

    def stderr_tail(self) -> bytes:
        return self.stderr

    def kill(self) -> None:
        if self.returncode is None:
            self.steps.clear()
            self.returncode = -9
            self.run.killed = self.run.killed_at_once = True

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        await trio.lowlevel.checkpoint()
        if self.run.spec.stdin is not None:
            raise RuntimeError("this process was given its stdin when it started")
        if self.returncode is not None or self.run.input_closed:
            raise trio.BrokenResourceError("the fake process no longer reads stdin")
        self.run.input += data
        self.run.input_closed = close
        if self.run.input_at is None:
            self.run.input_at = trio.current_time()
        self.started_reading.set()

    def running(self) -> bool:
        return self.returncode is None and self.run.ended_at is None

    def rss_bytes(self) -> int:
        return FAKE_RSS_BYTES if self.running() else 0


class FakeSpawner:
    """Plays ``script(spec)`` for every spawn. ``fail_with`` makes spawns fail instead."""

    def __init__(self, script: Callable[[SpawnSpec], Sequence[Step]], *,
                 fail_with: SpawnError | None = None) -> None:
        self._script = script
        self._fail_with = fail_with
        self.runs: list[FakeRun] = []
        self._procs: list[_FakeProcess] = []

    @property
    def alive(self) -> int:
        """Fake processes started and not yet ended: must be 0 once a job is over."""
        return sum(1 for r in self.runs if r.ended_at is None)

    def crash(self, index: int, code: int = 1) -> None:
        """Make spawn ``index`` exit now with ``code`` (a warm process dying while it waits)."""
        proc = self._procs[index]
        if proc.returncode is None:
            proc.steps.clear()
            proc.returncode = code
            proc.started_reading.set()

    @contextlib.asynccontextmanager
    async def open(self, spec: SpawnSpec) -> AsyncIterator[CliProcess]:
        await trio.lowlevel.checkpoint()
        if self._fail_with is not None:
            raise self._fail_with
        run = FakeRun(spec=spec, started_at=trio.current_time())
        self.runs.append(run)
        proc = _FakeProcess(list(self._script(spec)), run)
        self._procs.append(proc)
        try:
            yield proc
        finally:
            run.killed = run.killed_at_once or proc.returncode is None
            run.ended_at = trio.current_time()


class JsonLinesAdapter:
    """A test adapter whose "CLI" prints IR events as JSON lines (see :func:`event_line`).

    Exit code 0 after the lines means :class:`~olp.ir.Stop`; any other exit is ``CLI_FAILED``.
    ``preflight_error`` makes every job fail before spawning.
    """

    name = "fake"

    def __init__(self, *, preflight_error: Error | None = None) -> None:
        self.preflight_error = preflight_error

    def invocation(self, request: ChatRequest, *, binary: str, model: str, workdir: Path,
                   extra_args: Sequence[str] = ()) -> Invocation:
        prompt = "\n".join(m.text() for m in request.messages)
        return Invocation(argv=[binary, "--model", model, *extra_args],
                          stdin=prompt.encode(), files={"system.txt": "system"})

    def parser(self, workdir: Path) -> LineParser:
        return _JsonLinesParser()

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return {"FAKE_CLI": "1"}

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return {}

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return self.preflight_error


class _JsonLinesParser:
    def feed(self, line: bytes) -> Sequence[Event]:
        return [EVENT_DECODER.decode(line)]

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        return ()

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        if returncode == 0:
            return Stop()
        return failure(Code.CLI_FAILED, f"exit {returncode}")


def event_line(event: Event) -> bytes:
    """The line :class:`JsonLinesAdapter` turns back into ``event``."""
    return EVENT_ENCODER.encode(event)
