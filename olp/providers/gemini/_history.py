"""A gemini conversation's earlier turns as a session file gemini loads (issue #25).

gemini-cli 0.61.0 ``--session-file <file>`` loads a history written by someone else and sends
its messages upstream as real ``contents`` before the new prompt (measured:
``tests/fixtures/cli-reference/gemini/sessions/README.md``). So when a request's history can
be expressed that way (:func:`split_history`), OLP writes its earlier turns into the spawn's
private home (:data:`SESSION_FILE`, rendered by :func:`session_text`) and puts only the last
user turn on stdin: the upstream request is then gemini's session context, the earlier turns,
the new turn — and turn k's request is a prefix of turn k+1's, so the vendor's prefix cache
can serve everything but the new turns. Before, the whole conversation was one flattened user
prompt (``olp/providers/_prompt.py``), and nothing after the system instruction could be
cached. gemini's session context (first content) names the home's path: stable only because
every confined spawn sees its job at ``/olp/job``; it also holds the date.

The rendering is deterministic, so turn k+1's file is turn k's plus the answer and the new
user turn: fixed ids (the message's index), session id, project hash and timestamps (gemini
replaces the header's fields; ids and timestamps never go upstream). One JSON line, ASCII
only (gemini reads the file line by line). User content is ``[{"text": ...}]``, a ``gemini``
message's a string, as gemini records them. What gemini does with such a file, measured with
the real binary (the README's "What OLP does (built)"):

* a user message whose text, trimmed, is empty or starts with ``/``, ``?``,
  ``<session_context>`` or ``<hook_context>`` is **dropped**; an empty ``gemini`` message
  too. :func:`guard_turn` puts :data:`COMMAND_GUARD` in front of such a start — on the stdin
  turn as well, so the turn reads the same next time, in the file; a blank turn falls back;
* consecutive turns of one role are merged into one content (its parts in order);
* a history over half the model's window is **compressed** (two extra upstream calls, a
  summary in place of the early turns): history spawns set ``model.compressionThreshold``
  (:data:`NO_COMPRESSION`) beyond any context so gemini never does;
* a duplicate message id silently replaces the earlier message (ids are indexes here);
* a file it cannot read: exit 42, ``Error importing session from file: ...`` on stderr
  (``_classify.py`` makes that ``CONFIG_ERROR``, which advances the chain).

Anything else keeps today's flattened prompt: tool calls or results (their record format was
not captured), images (refused before this), a request with tools or a ``response_format``
instruction (those instructions lead the prompt), a named message, a blank turn, a last turn
that is not the user's, or no earlier turn at all (a single user turn goes on stdin as today).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from olp.ir import ChatRequest, ImagePart, Message
from olp.providers._prompt import json_instruction

#: The session file, relative to the spawn's private home (``--session-file`` names it as the
#: CLI sees it).
SESSION_FILE: Final = ".gemini/olp-history.json"
SESSION_FLAG: Final = "--session-file"
#: ``model.compressionThreshold`` for a spawn with a session file: a fraction of the context
#: window no history reaches (gemini's default, 0.5, summarises a long history).
NO_COMPRESSION: Final = 10.0
#: What :func:`guard_turn` puts in front of a turn gemini would drop or run (a zero-width space,
#: which JavaScript's ``trim`` keeps; the same as ``_invocation.COMMAND_GUARD``).
COMMAND_GUARD: Final = "\u200b"
#: The header's fields: constant, so every turn's file starts the same (gemini replaces them).
SESSION_ID: Final = "00000000-0000-4000-8000-000000000025"
PROJECT_HASH: Final = "olp"
TIMESTAMP: Final = "1970-01-01T00:00:00.000Z"
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_TYPES: Final = {"user": "user", "assistant": "gemini"}
#: A text gemini drops from a loaded history, or runs as a command: after the blanks
#: JavaScript's ``trim`` removes (Python's ``\s`` covers them but the BOM, and more).
_IGNORED: Final = re.compile(r"[\s\ufeff]*(?:/|\?|<session_context>|<hook_context>)")
_BLANK: Final = re.compile(r"[\s\ufeff]*")


def guard_turn(text: str) -> str:
    """``text`` with :data:`COMMAND_GUARD` in front when gemini would drop it from a loaded
    history (or run it as a command on stdin); otherwise unchanged."""
    return COMMAND_GUARD + text if _IGNORED.match(text) else text


def split_history(request: ChatRequest) -> tuple[tuple[Message, ...], Message] | None:
    """The earlier turns and the last (user) turn when ``request`` can go to gemini as a
    session file plus one prompt; ``None`` when it keeps the flattened prompt (the cases in
    the module docstring). System and developer messages are not turns (the system file)."""
    if request.tools or json_instruction(request.response_format) is not None:
        return None
    turns = tuple(m for m in request.messages if m.role not in _SYSTEM_ROLES)
    if len(turns) < 2 or turns[-1].role != "user":
        return None
    for message in turns:
        if (message.role not in _TYPES or message.tool_calls or message.tool_call_id
                or message.name or any(isinstance(p, ImagePart) for p in message.content)
                or _BLANK.fullmatch(message.text())):
            return None
    return turns[:-1], turns[-1]


def session_records(turns: Sequence[Message]) -> list[dict[str, Any]]:
    """gemini's message records for ``turns`` (user or assistant text turns), in order."""
    records: list[dict[str, Any]] = []
    for index, message in enumerate(turns):
        kind = _TYPES[message.role]
        text = message.text()
        content: Any = [{"text": guard_turn(text)}] if kind == "user" else text
        records.append({"id": f"olp-{index}", "timestamp": TIMESTAMP, "type": kind,
                        "content": content})
    return records


def session_text(turns: Sequence[Message]) -> str:
    """The session file for ``turns``: one ASCII JSON line (deterministic)."""
    session = {"sessionId": SESSION_ID, "projectHash": PROJECT_HASH, "startTime": TIMESTAMP,
               "lastUpdated": TIMESTAMP, "kind": "main", "messages": session_records(turns)}
    return json.dumps(session, ensure_ascii=True, separators=(",", ":")) + "\n"


def history_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` (not changed) with compression off (:data:`NO_COMPRESSION`)."""
    model = dict(settings.get("model", {}))
    model["compressionThreshold"] = NO_COMPRESSION
    return {**settings, "model": model}
