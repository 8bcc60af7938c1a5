"""History flattening shared by the CLI providers (the CLIs cannot replay turns in order).

:func:`flatten_prompt` turns a conversation into the one prompt a CLI reads on stdin: one user
message is sent as its text, unchanged; anything else becomes a deterministic transcript of
labelled turns (``User:``, ``Assistant:``, ``Tool result:``), headed by the system text when
asked, closed by an instruction to reply as the assistant; tool results are marked final, so
the model answers from them instead of calling the same tools again. No messages → ``""``.
The layout, and why: ``docs/adr/0009-cli-spawns-are-models-not-agents.md``, "The prompt a CLI
reads".

:func:`system_text` joins the system/developer texts; :func:`json_instruction` is the
"instruction at the head of the prompt" form of ``response_format`` for CLI hops.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from olp.ir import ImagePart, Message, TextPart

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_INTRO: Final = (
    "The conversation so far is below. Each turn starts with a label line: \"User:\", "
    "\"Assistant:\" or \"Tool result:\"."
)
_REPLY: Final = (
    "Reply to the last User message above as the Assistant. "
    "Write only the reply itself, with no label."
)
_REPLY_AFTER_TOOL: Final = (
    "Continue as the Assistant, answering the last User message above using the tool "
    "results. Write only the reply itself, with no label."
)
_RESULTS_FINAL: Final = (
    "The tool results above are final: the tools already ran, so do not call a tool again "
    "to get a result shown above."
)
_LABELS: Final = {"user": "User", "assistant": "Assistant", "tool": "Tool result"}


def system_text(messages: Sequence[Message]) -> str:
    """The texts of all system and developer messages, in order, a blank line between.

    Empty texts are skipped; no such messages → ``""``.
    """
    texts = [m.text() for m in messages if m.role in _SYSTEM_ROLES]
    return "\n\n".join(t for t in texts if t)


def flatten_prompt(messages: Sequence[Message], *, include_system: bool) -> str:
    """The conversation as one prompt (layout in ADR 0009)."""
    turns = [m for m in messages if m.role not in _SYSTEM_ROLES]
    system = system_text(messages) if include_system else ""
    if not system and len(turns) == 1 and turns[0].role == "user":
        return turns[0].text()
    if not turns and not system:
        return ""
    blocks: list[str] = []
    if system:
        blocks.append(f"System instructions:\n{system}")
    blocks.append(_INTRO)
    names = {c.id: c.name for m in turns for c in m.tool_calls}
    blocks.extend(_render_turn(m, names) for m in turns)
    last_is_tool = bool(turns) and turns[-1].role == "tool"
    closing = _REPLY_AFTER_TOOL if last_is_tool else _REPLY
    if any(m.role == "tool" for m in turns):
        closing = f"{_RESULTS_FINAL} {closing}"
    blocks.append("---\n" + closing)
    return "\n\n".join(blocks)


def _render_turn(message: Message, names: Mapping[str, str]) -> str:
    label = _LABELS.get(message.role, message.role.capitalize())
    if message.name and message.role != "tool":
        label = f"{label} ({message.name})"
    lines = [f"{label}:"]
    body = "".join(
        p.text if isinstance(p, TextPart) else "[image]"
        for p in message.content
        if isinstance(p, (TextPart, ImagePart))
    )
    if message.role == "tool":
        call_id = message.tool_call_id or "unknown"
        tool = names.get(call_id) or message.name or f"tool call {call_id}"
        lines.append(f"[{tool} returned] {body}" if body else f"[{tool} returned]")
    elif body:
        lines.append(body)
    lines.extend(f"[you called {c.name} with {c.arguments}]" for c in message.tool_calls)
    return "\n".join(lines)


_JSON_ONLY: Final = (
    "Respond with a single JSON object only: no prose before or after it and no Markdown "
    "code fences."
)


def json_instruction(response_format: Mapping[str, Any] | None) -> str | None:
    """The instruction that asks for JSON output, or ``None`` when none is needed.

    ``{"type": "json_object"}`` → the bare JSON-only instruction; ``{"type": "json_schema",
    "json_schema": {"schema": {...}}}`` → the same plus the schema (keys sorted, so the text is
    deterministic). A ``json_schema`` without a ``schema`` object gets the bare instruction;
    ``text``, an unknown type or a non-mapping → ``None``.
    """
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return _JSON_ONLY
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if not isinstance(schema, Mapping):
        return _JSON_ONLY
    rendered = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    return f"{_JSON_ONLY} It must conform to this JSON Schema:\n{rendered}"
