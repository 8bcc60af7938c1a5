"""The proxy's run directory: its spawns' job directories and the record of their process
groups, so that the next ``olp start`` cleans up after a proxy that was killed.

Each running proxy owns ``<temp dir>/olp-run-<pid>-<random>`` and keeps it ``flock``'ed for
its whole life (the lock goes with the process, however it ends). A run directory whose lock
can be taken belongs to a proxy that is gone: :func:`reap_leftovers` kills the process groups
it recorded — only a group whose leader still has the recorded boot and start time, so a
recycled pid is never signalled — and removes the directory. A live proxy's directory, or
another user's, is never touched. See ``docs/adr/0011-spawns-die-with-the-proxy.md``.

Everything here blocks on a few small local file operations.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Final

_NAME: Final = re.compile(r"olp-run-\d+-[a-z0-9_]+")
_BOOT_ID: Final = Path("/proc/sys/kernel/random/boot_id")

#: The run directory of the proxy this task belongs to (set by ``olp start``); ``None``
#: elsewhere (tests, ``olp doctor``), where job directories go straight into the temp dir.
CURRENT_RUN_DIR: ContextVar[RunDir | None] = ContextVar("olp_run_dir", default=None)


def process_identity(pid: int) -> str | None:
    """``"<boot id> <start time>"`` of a live process, ``None`` when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = _BOOT_ID.read_text().strip()
    except OSError:
        return None
    fields = stat.rsplit(") ", 1)[-1].split()
    return f"{boot} {fields[19]}" if len(fields) > 19 else None  # field 22: starttime


class RunDir:
    """One proxy's run directory, locked until :meth:`close`."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def create(cls, root: Path | None = None) -> RunDir:
        """Make and lock a new run directory under ``root`` (the system temp dir). It is
        locked before it gets its final name, so no reaper ever sees it unlocked."""
        root = Path(tempfile.gettempdir()) if root is None else root
        staging = Path(tempfile.mkdtemp(prefix=f".olp-run-{os.getpid()}-", dir=root))
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)  # not inherited by spawns
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            (staging / "groups").mkdir(mode=0o700)
            final = root / staging.name.removeprefix(".")
            staging.rename(final)
        except BaseException:
            os.close(fd)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls(final, fd)

    def job_dir(self) -> Path:
        """A fresh private directory for one spawn (removed by the caller)."""
        return Path(tempfile.mkdtemp(prefix="olp-job-", dir=self.path))

    def record_group(self, pgid: int) -> None:
        """Remember a spawned process group (its leader's pid is ``pgid``)."""
        identity = process_identity(pgid)
        if identity is not None:
            with contextlib.suppress(OSError):
                (self.path / "groups" / str(pgid)).write_text(identity)

    def forget_group(self, pgid: int) -> None:
        """The group is gone (swept by the spawner)."""
        (self.path / "groups" / str(pgid)).unlink(missing_ok=True)

    def close(self) -> None:
        """Remove the directory (every spawn has ended), then release the lock."""
        try:
            shutil.rmtree(self.path, ignore_errors=True)
        finally:
            os.close(self._fd)


def job_dir() -> Path:
    """A spawn's private directory: in this proxy's run directory, else in the temp dir."""
    run_dir = CURRENT_RUN_DIR.get()
    if run_dir is None:
        return Path(tempfile.mkdtemp(prefix="olp-job-"))
    return run_dir.job_dir()


def reap_leftovers(root: Path | None = None, *,
                   kill: Callable[[int, int], None] = os.killpg,
                   identity: Callable[[int], str | None] = process_identity) -> list[Path]:
    """Clean up every run directory under ``root`` whose proxy is gone; the ones removed.

    ``kill`` and ``identity`` are the seams for tests (``os.killpg`` and
    :func:`process_identity`)."""
    root = Path(tempfile.gettempdir()) if root is None else root
    reaped: list[Path] = []
    try:
        entries = [e for e in os.scandir(root) if _NAME.fullmatch(e.name)]
    except OSError:
        return reaped
    for entry in entries:
        path = Path(entry.path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone meanwhile, not a directory, or not ours to open
        try:
            if _is_abandoned(fd, path):
                _kill_recorded(path / "groups", kill, identity)
                shutil.rmtree(path, ignore_errors=True)
                reaped.append(path)
        finally:
            os.close(fd)
    return reaped


def _is_abandoned(fd: int, path: Path) -> bool:
    """Ours, unlocked (now locked by us) and still the directory at ``path``."""
    st = os.fstat(fd)
    if st.st_uid != os.getuid():
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its proxy is alive
    try:
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        return False  # another reaper removed it first
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def _kill_recorded(groups: Path, kill: Callable[[int, int], None],
                   identity: Callable[[int], str | None]) -> None:
    try:
        records = list(groups.iterdir())
    except OSError:
        return
    for record in records:
        try:
            pgid, recorded = int(record.name), record.read_text()
        except (OSError, ValueError):
            continue
        if pgid > 1 and identity(pgid) == recorded:  # never a recycled pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pgid, signal.SIGKILL)
