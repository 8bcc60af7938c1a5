"""The CLI's own refresh lock, taken by OLP around its refresh of the same login.

claude 2.1.332 holds a directory, ``.oauth_refresh.lock`` in its config dir (proper-lockfile:
held while it exists, stale once its mtime is 60 s old, the holder touching it every 5 s);
codex 0.171.0 holds an exclusive ``flock`` on ``auth.lock`` beside ``auth.json``. Holding the
same lock makes the owner's own CLI wait for OLP's refresh, then read the new tokens, instead
of spending the refresh token a second time.

Waiting polls every :data:`POLL_S` (a lock is held for about a second), bounded by the
caller's ``wait_s``; :class:`LockBusy` when it is still held then. Cancellation releases.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from olp.providers._login_format import LockSpec

POLL_S = 0.1
#: claude's lock is stale (taken over) once untouched for this long; OLP touches its own
#: every :data:`TOUCH_S` while it holds it.
MKDIR_STALE_S = 60.0
TOUCH_S = 5.0


class LockBusy(Exception):
    """The CLI's lock stayed held for the whole wait."""


@contextlib.asynccontextmanager
async def cli_lock(directory: Path, spec: LockSpec, *, wait_s: float) -> AsyncIterator[None]:
    """Hold ``spec`` (the CLI's lock in ``directory``) for the block. Blocks until it is
    free, at most ``wait_s``, then raises :class:`LockBusy`."""
    manager = _flock if spec.kind == "flock" else _mkdir_lock
    async with manager(directory / spec.name, wait_s):
        yield


@contextlib.asynccontextmanager
async def _flock(path: Path, wait_s: float) -> AsyncIterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        with trio.move_on_after(wait_s) as waited:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await trio.sleep(POLL_S)
        if waited.cancelled_caught:
            raise LockBusy(f"{path} is held by another process")
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def _mkdir_lock(path: Path, wait_s: float) -> AsyncIterator[None]:
    with trio.move_on_after(wait_s) as waited:
        while True:
            if _try_mkdir(path):
                break
            await trio.sleep(POLL_S)  # held by another process: nothing to wait on but time
    if waited.cancelled_caught:
        raise LockBusy(f"{path} is held by another process")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_touch_while_held, path)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _try_mkdir(path: Path) -> bool:
    """Take the lock when it is free or stale (its holder stopped touching it)."""
    try:
        os.mkdir(path, 0o700)
        return True
    except FileExistsError:
        pass
    try:
        stale = time.time() - os.stat(path).st_mtime > MKDIR_STALE_S
    except OSError:
        return False  # released meanwhile: the next poll takes it
    if stale:
        with contextlib.suppress(OSError):
            os.rmdir(path)
    return False


async def _touch_while_held(path: Path) -> None:
    while True:
        with contextlib.suppress(OSError):
            os.utime(path)
        await trio.sleep(TOUCH_S)
