"""claude's own sessions, kept between turns (issue #25; measured in
``tests/fixtures/cli-reference/claude/sessions/README.md``).

claude 2.1.332 writes a session as one JSON-lines file, ``$HOME/.claude/projects/<escaped
cwd>/<session id>.jsonl``, unless ``--no-session-persistence`` is given; ``--resume <id>``
finds that file under any project directory, even copied from another home, and sends the
earlier turns as real messages, replayed byte for byte, with its own cache breakpoints.
``--fork-session`` writes the continued session to a new file and leaves the one it read
untouched, so a resumed turn that fails damages nothing. claude reads a damaged file without
complaint (a cut line is skipped), so :func:`complete` checks the file OLP keeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from olp.actors._sessions import SessionKit
from olp.ir import Message, Usage

#: Where claude keeps its sessions under its home (``CLAUDE_CONFIG_DIR`` is not set).
PROJECTS: Final = Path(".claude") / "projects"
NO_PERSISTENCE: Final = "--no-session-persistence"


class ClaudeSessions:
    """:class:`~olp.actors._sessions.SessionKit` for claude."""

    #: The system text is a file claude reads at every start (and its session keeps the
    #: first one: a changed text is another conversation's scope).
    system_in_prompt = False
    #: Measured: OLP's SIGKILL at the call comes before claude writes it, and a tool result
    #: on the resumed turn's stdin never reaches the model (the fixtures' README, §3).
    takes_tool_results = False
    continue_prompt = "Continue."

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        return [a for a in argv if a != NO_PERSISTENCE]

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        return [*self.fresh_argv(argv), "--resume", session_id, "--fork-session"]

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        """The one session file under ``home`` other than the resumed one."""
        found = [p for p in (home / PROJECTS).glob("*/*.jsonl")
                 if p.is_file() and not p.is_symlink() and p.stem != resumed]
        if len(found) != 1:
            return None
        path = found[0]
        return path.stem, {str(path.relative_to(home)): path.read_bytes()}

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        return len(files) == 1 and not answer.tool_calls \
            and complete(next(iter(files.values())), answer.text())

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        return None

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        return None  # claude's result line reports the run's own usage


def complete(data: bytes, answer: str) -> bool:
    """Whether a session file is whole (every line JSON, the last one ended) and its last
    messages are ``answer``: the text of the assistant entries after the last user one."""
    if not data.endswith(b"\n"):
        return False
    texts: list[str] = []
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            return False
        if not isinstance(entry, dict):
            return False
        kind = entry.get("type")
        if kind == "user":
            texts = []
        elif kind == "assistant":
            content = (entry.get("message") or {}).get("content") or []
            texts += [b.get("text", "") for b in content
                      if isinstance(b, dict) and b.get("type") == "text"]
    return bool(texts) and "".join(texts).strip() == answer.strip()


SESSIONS: Final[SessionKit] = ClaudeSessions()
