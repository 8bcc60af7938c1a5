"""A provider's long-lived model server: one process per login, a fresh thread per job.

Where a CLI offers a server that answers successive requests in threads sharing no history
(``codex app-server``), its runner takes each job it :meth:`~ThreadServers.serves` to a
thread there instead of spawning the CLI: the server streams token deltas and costs ~0.06 s
per request instead of a spawn's start-up. The provider subpackage owns the server
(``olp/providers/codex/_app_units.py``); the runner and the actor see only this protocol.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

from olp.ir import ChatRequest

from ._login import LoginPass
from ._warm_units import WarmProcess

if TYPE_CHECKING:
    from ._cli_runner import CliRunner
    from ._sessions import Turn


@dataclass(frozen=True, slots=True)
class ThreadServerStatistics:
    """The login's server as ``/health`` shows it."""

    running: bool  # a server is up now
    threads: int  # threads open on it now
    kept: int  # threads kept for their conversation's next turn
    started: int  # servers started since OLP started (a restart counts)
    served: int  # jobs handed a thread
    memory_bytes: int  # the running server's resident memory


class ThreadServers(Protocol):
    """One login's long-lived model server (started on demand, restarted when it died,
    replaced at each new login token and after a number of threads)."""

    def serves(self, request: ChatRequest) -> bool:
        """Whether a thread can answer ``request`` (sync); a request it cannot serve is
        spawned as the CLI as before."""
        ...

    def open(self, runner: CliRunner, request: ChatRequest, model: str,
             login_pass: LoginPass | None, turn: Turn | None = None,
             ) -> contextlib.AbstractAsyncContextManager[WarmProcess]:
        """A thread for ``request``, read like a warm process. Entering blocks while a server
        starts (bounded); raises :class:`~._warm_units.WarmStartError` when none can start,
        :class:`~._adapter.CapabilityMissing` for a request it cannot take. With a ``turn``
        (kept sessions on), a thread kept after this conversation's last answer is continued
        with only the new turns (``turn.continued``), and a clean answer's thread is kept for
        the next turn; otherwise leaving ends the thread (a turn still running is
        interrupted)."""
        ...

    def holds(self, request: ChatRequest, scope: str) -> bool:
        """Whether a thread kept for ``request``'s conversation (``scope``: as a kept
        session's) can continue it. Sync."""
        ...

    def renew(self) -> None:
        """The login has a new token: the running server takes no new thread and ends once
        its threads have; the next job starts a fresh one. Sync."""
        ...

    def statistics(self) -> ThreadServerStatistics:
        ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Own the servers until cancelled (then every one of them ends)."""
        ...
