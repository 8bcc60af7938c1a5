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

import datetime
import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._sessions import SessionKit
from olp.ir import Message, Usage

SESSIONS_DIR: Final = Path(".codex") / "sessions"
EPHEMERAL: Final = "--ephemeral"
_UUID_CHARS: Final = 36


class CodexSessions:
    """:class:`~olp.actors._sessions.SessionKit` for codex."""

    #: The system text is part of codex's prompt (its first user turn), so a resumed turn
    #: sends only the new turns: the thread already holds it.
    system_in_prompt = True
    #: Measured: the rollout holds the call after OLP's kill, and a ``function_call_output``
    #: record appended to it (the next ``ordinal``) is sent as the real result, no filler.
    takes_tool_results = True
    #: The rollout holds the call when the answer ends: no wait before the kill.
    settle_s = 0.0
    #: ``exec resume`` refuses an empty prompt; a turn of tool results alone sends this.
    continue_prompt = "Continue."

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

    def complete(self, files: Mapping[str, bytes], answer: Message) -> bool:
        if len(files) != 1:
            return False
        data = next(iter(files.values()))
        if answer.tool_calls:
            calls = last_calls(data)
            return calls is not None and \
                [c.get("name") for c in calls] == [t.name for t in answer.tool_calls]
        return complete(data, answer.text())

    def with_tool_results(self, files: Mapping[str, bytes],
                          outputs: Sequence[str]) -> dict[str, bytes] | None:
        """The rollout with one ``function_call_output`` per call of its last turn, shaped
        as codex writes one (the next ``ordinal``; ``history_sequence`` past the call's)."""
        if len(files) != 1:
            return None
        [(path, data)] = files.items()
        calls = last_calls(data)
        if calls is None or len(calls) != len(outputs) or not calls:
            return None
        ordinal = max((e.get("ordinal", -1) for e in _entries(data)
                       if isinstance(e.get("ordinal"), int)), default=-1)
        sequence = max((_sequence(e) for e in _entries(data)), default=0)
        lines = []
        for call, output in zip(calls, outputs, strict=True):
            ordinal, sequence = ordinal + 1, sequence + 1
            payload: dict[str, Any] = {
                "type": "function_call_output", "id": f"fco_{uuid.uuid4()}",
                "call_id": call.get("call_id"), "output": output}
            if "internal_chat_message_metadata_passthrough" in call:
                payload["internal_chat_message_metadata_passthrough"] = \
                    call["internal_chat_message_metadata_passthrough"]
            lines.append(json.dumps({
                "timestamp": _now(), "ordinal": ordinal, "type": "response_item",
                "payload": payload, "metadata": {
                    "history_sequence": sequence,
                    "sampled_through_sequence": call.get("_sampled", 0),
                    "client_authored": False, "model_search_state": "unused"}},
                separators=(",", ":")))
        return {path: data + "\n".join(lines).encode() + b"\n"}

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


def last_calls(data: bytes) -> list[dict[str, Any]] | None:
    """The ``function_call`` payloads after the rollout's last user message (each with its
    record's ``sampled_through_sequence`` as ``_sampled``), or ``None`` when the rollout is
    not whole or a call already has its output."""
    if not data.endswith(b"\n"):
        return None
    calls: list[dict[str, Any]] = []
    answered: set[str] = set()
    for entry in _entries(data):
        payload = entry.get("payload") or {}
        if entry.get("type") != "response_item":
            continue
        kind = payload.get("type")
        if kind == "message" and payload.get("role") == "user":
            calls, answered = [], set()
        elif kind == "function_call":
            meta = entry.get("metadata") or {}
            calls.append({**payload, "_sampled": meta.get("sampled_through_sequence", 0)})
        elif kind == "function_call_output":
            answered.add(str(payload.get("call_id")))
    if any(str(c.get("call_id")) in answered for c in calls):
        return None
    return [{k: v for k, v in c.items()} for c in calls]


def _sequence(entry: Mapping[str, Any]) -> int:
    meta = entry.get("metadata")
    value = meta.get("history_sequence") if isinstance(meta, Mapping) else None
    return value if isinstance(value, int) else 0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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
