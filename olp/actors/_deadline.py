"""The proxy's own deadlines for one hop, shared by the CLI and HTTP runners.

:class:`Timeouts` holds the configured lengths; :class:`DeadlineClock` turns them into the
absolute trio deadlines of one job (first output, idle, total) and into the timeout
:class:`~olp.ir.Error` for a deadline that passed. The clock only computes deadlines: each
runner waits on :attr:`DeadlineClock.deadline` with its own ``trio.move_on_at``.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from olp.failures import Code, failure
from olp.ir import Error


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The proxy's own deadlines for one hop (the CLIs' own are minutes long or absent).

    ``first_output_s`` counts to the first *content* event, ``idle_s`` is the longest silence
    after content, ``total_s`` bounds the whole job.
    """

    first_output_s: float = 60.0
    idle_s: float = 120.0
    total_s: float = 600.0


@dataclass(frozen=True, slots=True)
class TimeoutWording:
    """How a runner words its timeout messages.

    Each template is a ``str.format`` string over the :class:`Timeouts` fields
    (``{first_output_s}``, ``{idle_s}``, ``{total_s}``); ``prefix`` is put in front as is.
    """

    first_output: str = "no output within {first_output_s:g} s"
    idle: str = "went silent for {idle_s:g} s mid-answer"
    total: str = "no complete answer within {total_s:g} s"
    prefix: str = ""


class DeadlineClock:
    """The first-output / idle / total deadlines of one job, in ``trio.current_time()`` units.

    Until content is seen, :attr:`deadline` is the first-output deadline; after it, the idle
    deadline that :meth:`content` and :meth:`activity` move forward. Both are capped by the
    total deadline. Create the clock when the job starts.
    """

    __slots__ = ("_deadline", "content_seen", "first_output_deadline", "start", "timeouts",
                 "total_deadline", "wording")

    def __init__(self, timeouts: Timeouts, *, wording: TimeoutWording = TimeoutWording(),
                 start: float | None = None) -> None:
        self.timeouts = timeouts
        self.wording = wording
        self.start = trio.current_time() if start is None else start
        self.total_deadline = self.start + timeouts.total_s
        self.first_output_deadline = min(self.total_deadline,
                                         self.start + timeouts.first_output_s)
        self.content_seen = False
        self._deadline = self.first_output_deadline

    @property
    def deadline(self) -> float:
        """The deadline to wait on now: first output before content, idle after it."""
        return self._deadline

    def content(self) -> None:
        """Content was seen: from now on the idle deadline applies; restart it."""
        self.content_seen = True
        self.activity()

    def activity(self) -> None:
        """The job showed a sign of life: restart the idle deadline, once content was seen
        (before content, only the first-output deadline counts)."""
        if self.content_seen:
            self._deadline = min(self.total_deadline,
                                 trio.current_time() + self.timeouts.idle_s)

    def expired(self, deadline: float) -> Code:
        """Which deadline ``deadline`` (one that passed) was: total, idle or first output."""
        if deadline >= self.total_deadline:
            return Code.TOTAL_TIMEOUT
        if self.content_seen:
            return Code.IDLE_TIMEOUT
        return Code.FIRST_OUTPUT_TIMEOUT

    def timeout_error(self, deadline: float) -> Error:
        """The ``unavailable`` error for ``deadline``, a deadline of this clock that passed."""
        code = self.expired(deadline)
        w, t = self.wording, self.timeouts
        template = (w.total if code is Code.TOTAL_TIMEOUT
                    else w.idle if code is Code.IDLE_TIMEOUT
                    else w.first_output)
        message = template.format(first_output_s=t.first_output_s, idle_s=t.idle_s,
                                  total_s=t.total_s)
        return failure(code, w.prefix + message)
