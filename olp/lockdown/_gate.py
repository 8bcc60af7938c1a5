"""The lockdown gate of one CLI provider (issue #26; ADR 0024): its jobs are admitted only
while the binary that would run has passed its self-check.

:meth:`LockdownGate.serve` runs the check at start (a kept verdict makes it instant), and
again whenever :meth:`LockdownGate.admit` finds the binary changed (another inode, size or
modification time at its resolved path: a CLI that updated itself), or, after a check that
could not judge anything, every ``retry_s``. :meth:`admit` waits for a check in progress, at
most ``wait_s``; a provider not verified by then is refused with ``LOCKDOWN_FAILED`` (the
chain moves on), as is one whose check failed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from olp.failures import Code, failure
from olp.ir import Error

from ._store import Verdict

log = logging.getLogger("olp.lockdown")

Fingerprint = tuple[int, int, int, int]


def fingerprint(binary: str) -> Fingerprint | None:
    """Identity of the file ``binary`` resolves to; ``None`` when it is gone. One ``stat``
    (microseconds on a local disk: done in the Trio thread)."""
    try:
        st = os.stat(os.path.realpath(binary))
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class LockdownGate:
    """:class:`~olp.actors.Admission` for one CLI provider. ``verify`` runs (or finds kept)
    the check of the binary as it is now; ``enabled`` is ``providers.<name>.lockdown_check``."""

    def __init__(self, provider: str, binary: str, verify: Callable[[], Awaitable[Verdict]],
                 *, enabled: bool = True, wait_s: float = 60.0, retry_s: float = 60.0) -> None:
        self.provider = provider
        self.binary = binary
        self.enabled = enabled
        self.verdict: Verdict | None = None
        self._verify = verify
        self._wait_s = wait_s
        self._retry_s = retry_s
        self._seen: Fingerprint | None = None
        self._wanted = trio.Event()
        self._done = trio.Event()

    async def verify(self) -> Verdict:
        """The binary's verdict now (kept, or checked), without changing what the gate
        admits (``olp doctor``)."""
        return await self._verify()

    def status(self) -> dict[str, Any]:
        """The gate as ``/health`` shows it."""
        if not self.enabled:
            return {"state": "off", "line": "not checked (lockdown_check: false)"}
        if self.verdict is None:
            return {"state": "pending", "line": "being checked"}
        return {"state": "verified" if self.verdict.ok else "failed",
                "line": self.verdict.line(), "version": self.verdict.version,
                "offered": list(self.verdict.offered)}

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Check, then check again when asked (:meth:`admit`); until cancelled."""
        task_status.started()
        if not self.enabled:
            return
        while True:
            self._wanted = trio.Event()
            seen = fingerprint(self.binary)
            verdict = await self._verify()
            self.verdict, self._seen = verdict, seen
            if verdict.ok:
                log.info("lockdown verified: %s", verdict.line(),
                         extra={"provider": self.provider})
            else:
                log.warning("lockdown %s: its requests are refused (lockdown_failed)",
                            verdict.line(), extra={"provider": self.provider})
            done, self._done = self._done, trio.Event()
            done.set()
            with trio.move_on_after(self._retry_s if not verdict.checked else float("inf")):
                await self._wanted.wait()

    async def admit(self) -> Error | None:
        """``None`` when the binary as it is now passed its check; else ``LOCKDOWN_FAILED``.
        Blocks while a check runs (at most ``wait_s``); cancellation just stops waiting."""
        if not self.enabled:
            return None
        with trio.move_on_after(self._wait_s):
            while self.verdict is None or fingerprint(self.binary) != self._seen:
                waiting = self._done
                self._wanted.set()
                await waiting.wait()
        verdict = self.verdict
        if verdict is not None and verdict.ok and fingerprint(self.binary) == self._seen:
            return None
        line = verdict.line() if verdict is not None else "not verified yet (being checked)"
        return failure(Code.LOCKDOWN_FAILED, f"{self.provider}: lockdown {line}")
