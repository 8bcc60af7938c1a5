"""The end of a CLI run, as every provider's parser reads it.

:class:`TerminalOnce` is the exit half of a :class:`~olp.actors.LineParser`: the terminal event
is worked out once (unless a line already ended the job) and :meth:`~TerminalOnce.finish`
returns that same event every time. :func:`exit_event` is the verdict the CLIs share: exit 0
after an answer is a :class:`Stop`, exit 0 without one a ``PROTOCOL_ERROR``, and any other
exit the parser cannot explain a ``CLI_FAILED`` naming the exit and the end of stderr
(:func:`cli_failed`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Final

from olp.failures import Code, failure
from olp.ir import Error, Event, FinishReason, Stop

from ._exit import describe_exit, stderr_excerpt

__all__ = ["STDERR_LIMIT", "TerminalOnce", "cli_failed", "exit_event"]

#: How much of stderr a ``CLI_FAILED`` message quotes, by default.
STDERR_LIMIT: Final = 200


class TerminalOnce:
    """A parser's terminal event, computed once: ``_terminal`` is set by a line that ends the
    job, else by :meth:`_exit_event` at the first :meth:`finish`. ``trailer`` gives nothing
    unless a subclass says otherwise."""

    _terminal: Error | Stop | None = None

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        return ()

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event after exit (see the module docstring); idempotent."""
        if self._terminal is None:
            self._terminal = self._exit_event(returncode, stderr_tail)
        return self._terminal

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        raise NotImplementedError


def _unexplained() -> None:
    return None


def exit_event(cli: str, returncode: int, stderr_tail: bytes, *,
               answered: FinishReason | None, missing: str,
               explain: Callable[[], Error | Stop | None] = _unexplained,
               limit: int = STDERR_LIMIT, drop: Collection[str] = ()) -> Error | Stop:
    """The terminal event of a run of ``cli`` that exited with ``returncode``.

    Exit 0 after an answer (``answered``, its finish reason) → :class:`Stop`; exit 0 without
    one → ``PROTOCOL_ERROR`` "``<cli>`` exited with code 0 without ``<missing>``"; any other
    exit → ``explain()`` (what the parser read from the run), else :func:`cli_failed` naming
    the exit ("after a complete answer" when there was one) and the end of stderr (at most
    ``limit`` characters, lines in ``drop`` left out).
    """
    if returncode == 0:
        if answered is not None:
            return Stop(finish_reason=answered)
        return failure(Code.PROTOCOL_ERROR, f"{cli} exited with code 0 without {missing}")
    explained = explain()
    if explained is not None:
        return explained
    after = " after a complete answer" if answered is not None else ""
    return cli_failed(f"{cli} {describe_exit(returncode)}{after}", stderr_tail,
                      limit=limit, drop=drop)


def cli_failed(message: str, stderr_tail: bytes, *, limit: int = STDERR_LIMIT,
               drop: Collection[str] = ()) -> Error:
    """``CLI_FAILED``: ``message``, then ``; stderr: <excerpt>`` when stderr said anything
    (one line, secrets masked, at most ``limit`` characters, lines in ``drop`` left out)."""
    excerpt = stderr_excerpt(stderr_tail, limit=limit, drop=drop)
    return failure(Code.CLI_FAILED, f"{message}; stderr: {excerpt}" if excerpt else message)
