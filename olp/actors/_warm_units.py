"""What a warm pool of a CLI holds: a process started ahead of time (:class:`WarmProcess`),
or a unit a provider makes its own way (:class:`WarmUnits`: vibe's sessions on a long-lived
server)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from olp.ir import ChatRequest, Event

from ._adapter import LineParser
from ._process import CliProcess

if TYPE_CHECKING:
    from ._cli_runner import CliRunner


@dataclass(frozen=True, slots=True)
class WarmProcess:
    """A CLI started ahead of time, waiting on stdin for its turn (a warm pool's unit).
    ``identity`` is its spawn (:func:`_identity`) for its working directory as the CLI sees
    it (``seen_workdir``, when that is not ``workdir``: inside the sandbox); ``parser`` makes
    the parser that reads it when that is not the adapter's (a session of a long-lived
    server); ``login_generation`` the generation of the login pass it was started with
    (``None``: none), so that a process holding an older token never serves; ``finished``,
    when given, is told the job's terminal event before the unit is given back (a thread of a
    long-lived server may then be kept for the conversation's next turn)."""

    process: CliProcess
    workdir: Path
    identity: Hashable
    parser: Callable[[], LineParser] | None = None
    seen_workdir: Path | None = None
    login_generation: int | None = None
    finished: Callable[[Event], None] | None = None

    def running(self) -> bool:
        return self.process.running()

    def rss_bytes(self) -> int:
        return self.process.rss_bytes()


#: What a warm unit is started from: the template request and the model.
Template = tuple[ChatRequest, str]


class WarmUnits(Protocol):
    """How a provider's warm units are made when they are not plain processes waiting on
    stdin (vibe: sessions on a long-lived server, ``olp/providers/vibe/_acp_units.py``)."""

    def boot(self, runner: CliRunner, template: Template
             ) -> contextlib.AbstractAsyncContextManager[WarmProcess]:
        """Start one unit (the pool's ``boot``); raises when it cannot."""
        ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """What the units share (the servers), run by the pool while any unit lives."""
        ...


class WarmStartError(Exception):
    """A warm process could not be started (the pool backs off and retries)."""
