"""codex's own threads, kept between turns (issue #25; measured in
``tests/fixtures/cli-reference/codex/sessions/README.md``).

codex 0.171.0 writes a thread as one JSON-lines *rollout*,
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<start time>-<thread id>.jsonl``, unless
``--ephemeral`` is given. ``codex exec <options> resume <thread id> -`` finds a rollout copied
from another home, sends the earlier turns as real input items under the same
``prompt_cache_key`` (the thread id), and appends to that file. The runner resumes from a
copy, so the kept rollout is only replaced after a clean turn. On a resumed thread
``turn.completed``'s usage is the thread's running total: :meth:`CodexSessions.usage_before`
reads the total so far from the rollout, for the runner to subtract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._sessions import SessionKit
from olp.ir import Usage

SESSIONS_DIR: Final = Path(".codex") / "sessions"
EPHEMERAL: Final = "--ephemeral"
_UUID_CHARS: Final = 36


class CodexSessions:
    """:class:`~olp.actors._sessions.SessionKit` for codex."""

    #: The system text is part of codex's prompt (its first user turn), so a resumed turn
    #: sends only the new turns: the thread already holds it.
    system_in_prompt = True

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        return [a for a in argv if a != EPHEMERAL]

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        fresh = self.fresh_argv(argv)
        if not fresh or fresh[-1] != "-":
            raise ValueError("codex's argv ends with '-' (the prompt on stdin)")
        return [*fresh[:-1], "resume", session_id, "-"]

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        """The one rollout under ``home`` (a resumed run appends to the one it continued)."""
        found = [p for p in (home / SESSIONS_DIR).glob("*/*/*/rollout-*.jsonl")
                 if p.is_file() and not p.is_symlink()]
        if len(found) != 1:
            return None
        path = found[0]
        thread = path.stem[-_UUID_CHARS:]
        if resumed is not None and thread != resumed:
            return None
        return thread, {str(path.relative_to(home)): path.read_bytes()}

    def complete(self, files: Mapping[str, bytes], answer: str) -> bool:
        return len(files) == 1 and complete(next(iter(files.values())), answer)

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        """The thread's usage so far: its rollout's last ``token_count`` total."""
        total: Mapping[str, Any] | None = None
        for data in files.values():
            for entry in _entries(data):
                payload = entry.get("payload") or {}
                if entry.get("type") == "event_msg" and payload.get("type") == "token_count":
                    info = payload.get("info") or {}
                    total = info.get("total_token_usage") or total
        if not isinstance(total, Mapping):
            return None
        return Usage(prompt_tokens=_int(total, "input_tokens"),
                     completion_tokens=_int(total, "output_tokens"),
                     cached_tokens=_int(total, "cached_input_tokens"),
                     cache_write_tokens=_int(total, "cache_write_input_tokens"))


def complete(data: bytes, answer: str) -> bool:
    """Whether a rollout is whole (every line JSON, the last one ended) and its last
    assistant message is ``answer``."""
    if not data.endswith(b"\n"):
        return False
    last: str | None = None
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            return False
        if not isinstance(entry, dict):
            return False
        payload = entry.get("payload") or {}
        if entry.get("type") == "response_item" and payload.get("type") == "message" \
                and payload.get("role") == "assistant":
            last = "".join(c.get("text", "") for c in payload.get("content") or []
                           if isinstance(c, dict) and c.get("type") == "output_text")
    return last is not None and last.strip() == answer.strip()


def _entries(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _int(values: Mapping[str, Any], name: str) -> int:
    value = values.get(name)
    return value if isinstance(value, int) and value >= 0 else 0


SESSIONS: Final[SessionKit] = CodexSessions()
