"""claude's own sessions, kept between turns (issue #25; measured in
``tests/fixtures/cli-reference/claude/sessions/README.md``).

claude 2.1.332 writes a session as one JSON-lines file, ``$HOME/.claude/projects/<escaped
cwd>/<session id>.jsonl``, unless ``--no-session-persistence`` is given; ``--resume <id>``
finds that file under any project directory, even copied from another home, and sends the
earlier turns as real messages, replayed byte for byte, with its own cache breakpoints.
``--fork-session`` writes the continued session to a new file and leaves the one it read
untouched, so a resumed turn that fails damages nothing. claude reads a damaged file without
complaint (a cut line is skipped), so :func:`complete` checks the file OLP keeps.

Tool calls (the README's §3): claude writes a call into its session some 50 ms after the
answer's ``message_stop``, while it waits on the bridge's ``tools/call``, so the runner waits
for the file to hold it (:attr:`ClaudeSessions.settle_s`) before its kill. The client's
results are then appended as ``user`` entries shaped as claude writes them, and the resumed
turn sends them upstream as real ``tool_result`` blocks (claude adds its own "No response
requested." turn before the next prompt; a turn of results alone sends ``Continue.``). A
``tool_result`` on stdin never reaches the model: it must be in the file.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._sessions import SessionKit
from olp.ir import Message, Usage

from ._invocation import TOOL_PREFIX

#: Where claude keeps its sessions under its home (``CLAUDE_CONFIG_DIR`` is not set).
PROJECTS: Final = Path(".claude") / "projects"
NO_PERSISTENCE: Final = "--no-session-persistence"


class ClaudeSessions:
    """:class:`~olp.actors._sessions.SessionKit` for claude."""

    #: The system text is a file claude reads at every start (and its session keeps the
    #: first one: a changed text is another conversation's scope).
    system_in_prompt = False
    #: Measured (the fixtures' README, §3): a ``user`` entry appended to the file is sent as
    #: the real result; one on the resumed turn's stdin never reaches the model.
    takes_tool_results = True
    #: claude writes a call some 50 ms after the answer ends (it was in the file 0.1 s after
    #: ``message_delta`` in every measured run), while it waits on ``tools/call``.
    settle_s = 1.0
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
        if len(files) != 1:
            return False
        data = next(iter(files.values()))
        if answer.tool_calls:
            calls = last_calls(data)
            return calls is not None and [c[1]["name"].removeprefix(TOOL_PREFIX)
                                          for c in calls] == [t.name for t in answer.tool_calls]
        return complete(data, answer.text()) and last_calls(data) == []

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        """The file with one ``user`` entry per result of its last calls, in order, shaped
        as claude writes one (``tool_result`` block, ``sourceToolAssistantUUID``, chained by
        ``parentUuid``)."""
        if len(files) != 1:
            return None
        [(path, data)] = files.items()
        calls = last_calls(data)
        if not calls or len(calls) != len(outputs):
            return None
        parent = calls[-1][0]["uuid"]
        lines = []
        for (entry, block), output in zip(calls, outputs, strict=True):
            own = str(uuid.uuid4())
            lines.append(json.dumps({
                "parentUuid": parent, "isSidechain": False, "type": "user",
                "message": {"role": "user", "content": [
                    {"tool_use_id": block["id"], "type": "tool_result", "content": output}]},
                "uuid": own, "timestamp": _now(), "toolUseResult": output,
                "sourceToolAssistantUUID": entry["uuid"],
                **{k: entry[k] for k in _CARRIED if k in entry}}, separators=(",", ":")))
            parent = own
        return {path: data + "\n".join(lines).encode() + b"\n"}

    def usage_before(self, files: Mapping[str, bytes]) -> Usage | None:
        return None  # claude's result line reports the run's own usage


#: What a ``user`` entry of OLP's copies from the entry of the call it answers.
_CARRIED: Final = ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch")


def last_calls(data: bytes) -> list[tuple[dict[str, Any], dict[str, Any]]] | None:
    """The ``tool_use`` blocks after the file's last ``user`` entry, each with the entry that
    holds it; ``None`` when the file is not whole. A call already answered has a ``user``
    entry after it, so it is never among them."""
    if not data.endswith(b"\n"):
        return None
    calls: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not isinstance(entry, dict):
            return None
        if entry.get("type") == "user":
            calls = []
        elif entry.get("type") == "assistant" and isinstance(entry.get("uuid"), str):
            content = (entry.get("message") or {}).get("content") or []
            calls += [(entry, b) for b in content if isinstance(b, dict)
                      and b.get("type") == "tool_use" and isinstance(b.get("id"), str)
                      and isinstance(b.get("name"), str)]
    return calls


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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
