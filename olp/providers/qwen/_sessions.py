"""qwen's own sessions, kept between turns (issue #25; measured in
``tests/fixtures/cli-reference/qwen/sessions/README.md``).

qwen-code 0.24.4 records a session as one JSON-lines file, ``$HOME/.qwen/projects/<escaped
cwd>/chats/<session id>.jsonl``, when ``--chat-recording true`` (the flag wins over the
settings' ``general.chatRecording: false`` both ways: measured). ``--resume <id>`` continues
that file, copied from another home, **only from the same cwd** (the file's records name it):
every confined spawn runs in ``/olp/job/work``, so it does. The earlier turns go upstream as
real messages and the run appends to the file it read; the runner resumes from a copy, so the
kept file is only replaced after a clean turn (no ``--fork-session``). The system text is a
file qwen reads at every start (``QWEN_SYSTEM_MD``), not part of the session.

Usage: qwen's ``result`` reports the session's running total, rebuilt on resume from the
file's ``ui_telemetry`` records. :meth:`QwenSessions.written` keeps the file with those
records' token counts at zero, so a resumed run reports its own usage, as its tool-call
``assistant`` line does (the usage the parser reads when the model calls a tool); the
counts qwen sizes its context by (the ``assistant`` records' ``usageMetadata``) are kept.
qwen reads a damaged file without complaint and a killed run leaves its user turn behind
with no answer, so :func:`complete` checks the file OLP keeps.

Off by default (``providers.qwen.sessions``): qwen adds its date reminder to the newest user
turn of every request and does not record it, so a resumed request differs from the previous
one from the previous user turn on; flattening leaves less uncached (ADR 0023).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._sessions import SessionKit
from olp.ir import Message, Usage

#: Where qwen keeps its sessions under its home.
PROJECTS: Final = Path(".qwen") / "projects"
RECORDING: Final = "--chat-recording"
#: The token counts of a ``qwen-code.api_response`` event (``uiTelemetryService`` sums them).
TOKEN_COUNTS: Final = ("input_token_count", "output_token_count", "cached_content_token_count",
                       "thoughts_token_count", "total_token_count")


class QwenSessions:
    """:class:`~olp.actors._sessions.SessionKit` for qwen."""

    #: The system text is a file qwen reads at every start (QWEN_SYSTEM_MD); a changed text
    #: is another conversation's scope anyway.
    system_in_prompt = False
    #: An answer that called tools keeps nothing; the next turn sends the flattened history
    #: to a new session. (qwen's file held the call after its own exit on the tool budget;
    #: at OLP's kill, and a result written in on resume: not measured.)
    takes_tool_results = False
    settle_s = 0.0
    continue_prompt = "Continue."

    def fresh_argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with ``--chat-recording true`` (in place of OLP's ``false``)."""
        out = list(argv)
        for i, arg in enumerate(out[:-1]):
            if arg == RECORDING:
                out[i + 1] = "true"
                return out
        return [*out, RECORDING, "true"]

    def resume_argv(self, argv: Sequence[str], session_id: str) -> list[str]:
        return [*self.fresh_argv(argv), "--resume", session_id]

    def written(self, home: Path, *, resumed: str | None) -> tuple[str, dict[str, bytes]] | None:
        """The one session file under ``home`` (a resumed run appends to the one it
        continued), its ``ui_telemetry`` token counts at zero."""
        found = [p for p in (home / PROJECTS).glob("*/chats/*.jsonl")
                 if p.is_file() and not p.is_symlink()]
        if len(found) != 1:
            return None
        path = found[0]
        if resumed is not None and path.stem != resumed:
            return None
        data = without_running_total(path.read_bytes())
        return None if data is None else (path.stem, {str(path.relative_to(home)): data})

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        return len(files) == 1 and not answer.tool_calls \
            and complete(next(iter(files.values())), answer.text())

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        return None

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        """What qwen will add to a resumed run's usage: the kept file's ``ui_telemetry``
        totals (zero in a file :meth:`written` kept; ``None`` then)."""
        total = [0, 0, 0]
        for data in files.values():
            for entry in _entries(data):
                event = _api_response(entry)
                if event is not None:
                    for i, name in enumerate(("input_token_count", "output_token_count",
                                              "cached_content_token_count")):
                        total[i] += _int(event, name)
        if not any(total):
            return None
        return Usage(prompt_tokens=total[0], completion_tokens=total[1], cached_tokens=total[2])


def without_running_total(data: bytes) -> bytes | None:
    """``data`` with every ``ui_telemetry`` API response's token counts at zero, the other
    lines byte for byte; ``None`` when a line is not a JSON object."""
    lines = data.splitlines(keepends=True)
    for n, line in enumerate(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not isinstance(entry, dict):
            return None
        event = _api_response(entry)
        if event is not None and any(_int(event, name) for name in TOKEN_COUNTS):
            for name in TOKEN_COUNTS:
                if name in event:
                    event[name] = 0
            end = b"\n" if line.endswith(b"\n") else b""
            lines[n] = json.dumps(entry, separators=(",", ":")).encode() + end
    return b"".join(lines)


def complete(data: bytes, answer: str) -> bool:
    """Whether a session file is whole (every line a JSON object, the last one ended) and
    its last messages are ``answer``: the text of the ``assistant`` records after the last
    ``user`` one (a killed run's orphan user turn has none)."""
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
            parts = (entry.get("message") or {}).get("parts") or []
            texts += [p["text"] for p in parts if isinstance(p, dict)
                      and isinstance(p.get("text"), str) and not p.get("thought")]
    return bool(texts) and "".join(texts).strip() == answer.strip()


def _api_response(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    if entry.get("type") != "system" or entry.get("subtype") != "ui_telemetry":
        return None
    event = ((entry.get("systemPayload") or {}).get("uiEvent"))
    if not isinstance(event, dict) or event.get("event.name") != "qwen-code.api_response":
        return None
    return event


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


SESSIONS: Final[SessionKit] = QwenSessions()
