"""Spawning a CLI in its own process group, and making sure the whole group dies.

The :class:`Spawner` protocol is the seam between the actor's logic (deadlines, parsing,
cancellation) and real processes: :class:`ProcessSpawner` runs real subprocesses, and
:mod:`olp.actors.testing` has a scripted fake for ``MockClock`` tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from ._lines import LineReader

STDERR_TAIL_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """Everything needed to start one CLI process. ``stdin`` is written, then closed."""

    argv: Sequence[str]
    stdin: bytes
    env: Mapping[str, str]
    cwd: Path


class SpawnError(Exception):
    """The process could not be started. ``not_found`` when the binary does not exist."""

    def __init__(self, message: str, *, not_found: bool) -> None:
        super().__init__(message)
        self.not_found = not_found


class CliProcess(Protocol):
    """A running CLI as the actor reads it."""

    async def receive_line(self) -> bytes | None:
        """The next stdout line, ``None`` at EOF. Cancel-safe."""
        ...

    async def wait(self) -> int:
        """Block until the process exits; its return code (``-N`` when killed by signal N)."""
        ...

    def stderr_tail(self) -> bytes:
        """The last bytes the process wrote to stderr (bounded)."""
        ...


class Spawner(Protocol):
    def open(self, spec: SpawnSpec) -> contextlib.AbstractAsyncContextManager[CliProcess]:
        """Start the process; raises :class:`SpawnError` if it cannot start.

        Leaving the context — normally, by ``break``/``return``, or by cancellation — ends
        the whole process group (TERM, then KILL after a grace) before it returns.
        """
        ...


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate_group(grace: float, proc: trio.Process) -> None:
    """``deliver_cancel`` for :func:`trio.run_process`: TERM the group, KILL it after grace."""
    _signal_group(proc.pid, signal.SIGTERM)  # pgid == pid: start_new_session=True
    await trio.sleep(grace)
    _signal_group(proc.pid, signal.SIGKILL)


async def _drain_tail(stream: trio.abc.ReceiveStream, tail: bytearray, done: trio.Event) -> None:
    """Read a pipe to EOF keeping only the last bytes: an undrained pipe deadlocks at ~64 KiB."""
    try:
        async with stream:
            while chunk := await stream.receive_some(65536):
                tail += chunk
                del tail[:-STDERR_TAIL_BYTES]
    finally:
        done.set()


class _RealProcess:
    def __init__(self, proc: trio.Process, tail: bytearray, drained: trio.Event) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self._lines = LineReader(proc.stdout)
        self._tail = tail
        self._drained = drained

    async def receive_line(self) -> bytes | None:
        return await self._lines.receive_line()

    async def wait(self) -> int:
        returncode = await self._proc.wait()
        with trio.move_on_after(1.0):  # a grandchild may hold stderr open: don't wait on it
            await self._drained.wait()  # so stderr_tail() is complete
        return returncode

    def stderr_tail(self) -> bytes:
        return bytes(self._tail)


class ProcessSpawner:
    """Real subprocesses: own session and process group, every pipe drained.

    ``kill_grace`` is the time between SIGTERM and SIGKILL when a job is cancelled.
    """

    def __init__(self, *, kill_grace: float = 3.0) -> None:
        self.kill_grace = kill_grace

    @contextlib.asynccontextmanager
    async def open(self, spec: SpawnSpec) -> AsyncIterator[CliProcess]:
        tail = bytearray()
        failure: OSError | None = None
        pgid: int | None = None
        try:
            async with trio.open_nursery() as nursery:
                try:
                    proc: trio.Process = await nursery.start(partial(
                        trio.run_process, list(spec.argv),
                        stdin=spec.stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        check=False, start_new_session=True, cwd=spec.cwd, env=dict(spec.env),
                        deliver_cancel=partial(_terminate_group, self.kill_grace)))
                except OSError as exc:
                    failure = exc
                else:
                    pgid = proc.pid
                    assert proc.stderr is not None
                    drained = trio.Event()
                    nursery.start_soon(_drain_tail, proc.stderr, tail, drained)
                    try:
                        yield _RealProcess(proc, tail, drained)
                    finally:
                        # Still running (we stopped reading early, or were cancelled):
                        # cancelling run_process delivers TERM, then KILL, to the group.
                        nursery.cancel_scope.cancel(reason="CLI job ended")
        finally:
            if pgid is not None:
                # The leader is reaped; sweep anything left in its group (a grandchild that
                # ignored TERM, or one the CLI forgot). Never wait on it.
                _signal_group(pgid, signal.SIGKILL)
        if failure is not None:
            raise SpawnError(f"{spec.argv[0]}: {failure.strerror or failure}",
                             not_found=isinstance(failure, (FileNotFoundError, PermissionError)))
