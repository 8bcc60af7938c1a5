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
from ._targets import Target, runs_tested_version

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
    the check of the binary as it is now (``target``: what is checked, and the version the
    test suite runs); ``enabled`` is ``providers.<name>.lockdown_check``."""

    def __init__(self, provider: str, binary: str, verify: Callable[[], Awaitable[Verdict]],
                 *, target: Target, enabled: bool = True, wait_s: float = 60.0,
                 retry_s: float = 60.0) -> None:
        self.provider = provider
        self.binary = binary
        self.target = target
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
        tested_on = f"{self.target.cli} {self.target.tested}"
        if not self.enabled:
            return {"state": "off", "line": "not checked (lockdown_check: false)",
                    "tested_on": tested_on}
        if self.verdict is None:
            return {"state": "pending", "line": "being checked", "tested_on": tested_on}
        return {"state": "verified" if self.verdict.ok else "failed",
                "line": self.verdict.line(), "version": self.verdict.version,
                "tested_on": tested_on,
                "tested": runs_tested_version(self.target, self.verdict.version),
                "offered": list(self.verdict.offered)}

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Check, then check again when asked (:meth:`admit`); until cancelled."""
        task_status.started()
        if not self.enabled:
            return
        while True:
            seen = fingerprint(self.binary)
            try:
                verdict = await self._verify()
            except Exception as exc:  # never the actor's end: a check that did not run
                log.exception("lockdown check failed to run", extra={"provider": self.provider})
                verdict = Verdict(self.target.cli, None, checked=False, problems=(
                    f"the check could not run: {type(exc).__name__}",))
            self.verdict, self._seen = verdict, seen
            # asks made while it ran are answered by it (admit looks again once it is done)
            self._wanted = trio.Event()
            if verdict.ok and not runs_tested_version(self.target, verdict.version):
                log.warning("lockdown verified on %s %s, a version the test suite never ran "
                            "(it runs %s %s): served because its self-check passed",
                            self.target.cli, verdict.version, self.target.cli,
                            self.target.tested, extra={"provider": self.provider})
            elif verdict.ok:
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
        current = fingerprint(self.binary) == self._seen
        if verdict is not None and verdict.ok and current:
            return None
        if verdict is None:
            line = "not verified yet (being checked)"
        elif not current:
            line = "not verified yet (the binary changed: being checked again)"
        else:
            line = verdict.line()
        return failure(Code.LOCKDOWN_FAILED, f"{self.provider}: lockdown {line}")
