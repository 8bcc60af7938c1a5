"""Spawning a CLI in its own process group, and making sure the whole group dies.

The :class:`Spawner` protocol is the seam between the actor's logic (deadlines, parsing,
cancellation) and real processes: :class:`ProcessSpawner` runs real subprocesses, and
:mod:`olp.actors.testing` has a scripted fake for ``MockClock`` tests.

The group dies with the proxy too, even on ``kill -9``: each spawn starts with a watcher in
its group that waits on a pipe only the proxy can write to and kills the group when the pipe
breaks; the group is also recorded in the proxy's run directory for the next start to reap
(``_run_dir.py``, ``docs/adr/0011-spawns-die-with-the-proxy.md``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from . import _run_dir
from ._lines import LineReader

STDERR_TAIL_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """Everything needed to start one CLI process. ``stdin`` is written, then closed; ``None``
    leaves stdin an open pipe the caller writes through :meth:`CliProcess.send_input` (a warm
    process started before its request, or a long-lived server)."""

    argv: Sequence[str]
    stdin: bytes | None
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

    def kill(self) -> None:
        """SIGKILL the whole process group now (no grace; never blocks). Leaving the
        spawner's context afterwards still waits for the exit and sweeps the group."""
        ...

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        """Write ``data`` to stdin (then close it when ``close``). Only for a process spawned
        with ``stdin=None``. Blocks until the pipe took the bytes; raises
        :class:`trio.BrokenResourceError` when the process no longer reads (it died)."""
        ...

    def running(self) -> bool:
        """Whether the process has not exited yet (a cheap, non-blocking check)."""
        ...

    def rss_bytes(self) -> int:
        """Resident memory of its whole process group now (0 when unknown). Reads ``/proc``
        (briefly blocking)."""
        ...


class Spawner(Protocol):
    def open(self, spec: SpawnSpec) -> contextlib.AbstractAsyncContextManager[CliProcess]:
        """Start the process; raises :class:`SpawnError` if it cannot start.

        Leaving the context — normally, by ``break``/``return``, or by cancellation — ends
        the whole process group (TERM, then KILL after a grace) before it returns.
        """
        ...


_lifeline: tuple[int, int] | None = None


def _with_lifeline(argv: Sequence[str]) -> tuple[list[str], tuple[int, ...]]:
    """``argv`` behind a watcher that kills its process group when this process dies.

    ``/bin/sh`` starts the watcher in the background, then ``exec``s the CLI (same pid, same
    group, same exit status). The watcher reads a pipe whose write end only this process holds
    (never inherited); the kernel closes it when the proxy dies, however it dies, and the read
    returns. A ``PR_SET_PDEATHSIG`` would not do: it fires when the *thread* that forked the
    child exits, and Trio forks in worker threads that exit after 10 s idle (ADR 0011).
    Returns the argv and the file descriptors to pass. Linux only (``/proc/self/fd``);
    elsewhere ``argv`` is returned unchanged."""
    global _lifeline
    if not os.path.isdir("/proc/self/fd"):  # pragma: no cover - not Linux
        return list(argv), ()
    if _lifeline is None:
        _lifeline = os.pipe()  # both ends close-on-exec; the read end is passed explicitly
    watcher = (f"(read -r _ </proc/self/fd/{_lifeline[0]}; kill -s KILL 0) "
               '</dev/null >/dev/null 2>&1 & exec "$@"')
    return ["/bin/sh", "-c", watcher, "olp-spawn", *argv], (_lifeline[0],)


def _unstartable(argv0: str, env: Mapping[str, str]) -> OSError | None:
    """Why ``argv0`` cannot be executed (checked here: behind the watcher's ``sh`` a missing
    binary would only be an exit status)."""
    if shutil.which(argv0, path=env.get("PATH", os.defpath)) is not None:
        return None
    if os.sep in argv0 and os.path.exists(argv0):
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))


def group_rss_bytes(pgid: int) -> int:
    """The summed resident memory of process group ``pgid`` (Linux ``/proc``; 0 elsewhere or
    when it is gone). Reads one small file per process on the machine (briefly blocking)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            if int(fields[2]) != pgid:  # state, ppid, pgrp, ...
                continue
            with open(f"/proc/{entry}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


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

    def kill(self) -> None:
        _signal_group(self._proc.pid, signal.SIGKILL)  # pgid == pid: start_new_session=True

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        stdin = self._proc.stdin
        if stdin is None:
            raise RuntimeError("this process was given its stdin when it started")
        try:
            if data:
                await stdin.send_all(data)
        finally:
            if close:
                await stdin.aclose()

    def running(self) -> bool:
        return self._proc.poll() is None

    def rss_bytes(self) -> int:
        return group_rss_bytes(self._proc.pid)  # pgid == pid: start_new_session=True


class ProcessSpawner:
    """Real subprocesses: own session and process group, every pipe drained.

    ``kill_grace`` is the time between SIGTERM and SIGKILL when a job is cancelled. Each
    spawn runs behind a lifeline watcher (:func:`_with_lifeline`) and its group is recorded in
    the current run directory, if any, until it has been swept.
    """

    def __init__(self, *, kill_grace: float = 3.0) -> None:
        self.kill_grace = kill_grace

    @contextlib.asynccontextmanager
    async def open(self, spec: SpawnSpec) -> AsyncIterator[CliProcess]:
        tail = bytearray()
        failure: OSError | None = _unstartable(spec.argv[0], spec.env)
        pgid: int | None = None
        run_dir = _run_dir.CURRENT_RUN_DIR.get()
        try:
            async with trio.open_nursery() as nursery:
                try:
                    if failure is not None:
                        raise failure
                    argv, pass_fds = _with_lifeline(spec.argv)
                    proc: trio.Process = await nursery.start(partial(
                        trio.run_process, argv, pass_fds=pass_fds,
                        stdin=subprocess.PIPE if spec.stdin is None else spec.stdin,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        check=False, start_new_session=True, cwd=spec.cwd, env=dict(spec.env),
                        deliver_cancel=partial(_terminate_group, self.kill_grace)))
                except OSError as exc:
                    failure = exc
                else:
                    pgid = proc.pid
                    if run_dir is not None:
                        run_dir.record_group(pgid)
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
                # ignored TERM, or one the CLI forgot, and the lifeline watcher). Never wait
                # on it.
                _signal_group(pgid, signal.SIGKILL)
                if run_dir is not None:
                    run_dir.forget_group(pgid)
        if failure is not None:
            raise SpawnError(f"{spec.argv[0]}: {failure.strerror or failure}",
                             not_found=isinstance(failure, (FileNotFoundError, PermissionError)))
