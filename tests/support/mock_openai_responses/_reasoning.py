"""The mock's reasoning model: scenario ``reasoning`` answers as the Responses API does for a
reasoning model.

- The request's ``reasoning`` decides what comes back: none, or ``effort: "none"`` → no
  reasoning item (the plain answer); otherwise a ``reasoning`` output item (index 0) before
  the message (index 1). Its summary as the API gives it: only when the request asks for one
  (``reasoning.summary`` ``auto``, ``concise`` or ``detailed``), one ``summary_text`` part per
  text of the scenario's ``reasoning_summary``, each streamed as
  ``response.reasoning_summary_part.added``, ``response.reasoning_summary_text.delta`` ×2
  (the halves of its text), ``...text.done``, ``...part.done``; without one the item comes
  with ``summary: []`` and no summary events. The item carries ``encrypted_content`` when the
  request's ``include`` asks for ``reasoning.encrypted_content`` (codex always does).
- The usage counts :data:`REASONING_TOKENS` of the output tokens as reasoning
  (``output_tokens_details.reasoning_tokens``) when a reasoning item came.

The record notes what was sent: ``record["reasoning"]`` is ``"summary"``, ``"hidden"`` (an
item without a summary) or ``"none"``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import trio

#: The scenario's default summary: one part.
DEFAULT_SUMMARY: tuple[str, ...] = (
    "**Planning a short greeting**\n\nThe user wants four words, so a brief hello will do.",)
#: Of the answer's output tokens, those the usage says were spent reasoning.
REASONING_TOKENS = 5
#: What ``encrypted_content`` holds (the API's is an opaque Fernet-like blob).
ENCRYPTED = "gAAAAABmock-encrypted-reasoning"

Shown = Literal["summary", "hidden", "none"]
Send = Callable[..., Awaitable[None]]


def reasoning_shown(body: dict[str, Any]) -> Shown:
    """What the API would send for the request's ``reasoning``."""
    config = body.get("reasoning")
    if not isinstance(config, dict) or config.get("effort") == "none":
        return "none"
    return "summary" if config.get("summary") in ("auto", "concise", "detailed") else "hidden"


async def stream_reasoning(send: Send, body: dict[str, Any], item_id: str,
                           parts: tuple[str, ...], delay: float) -> dict[str, Any] | None:
    """Stream the reasoning item at output index 0 with ``send(event_type, **fields)`` as the
    request asks; returns the complete item (None: no reasoning item)."""
    shown = reasoning_shown(body)
    if shown == "none":
        return None
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    include = body.get("include")
    if isinstance(include, list) and "reasoning.encrypted_content" in include:
        item["encrypted_content"] = ENCRYPTED
    await send("response.output_item.added", output_index=0, item=item)
    summary: list[dict[str, Any]] = []
    for index, text in enumerate(parts if shown == "summary" else ()):
        where = {"item_id": item_id, "output_index": 0, "summary_index": index}
        await send("response.reasoning_summary_part.added", **where,
                   part={"type": "summary_text", "text": ""})
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            await trio.sleep(delay)
            await send("response.reasoning_summary_text.delta", **where, delta=piece)
        await send("response.reasoning_summary_text.done", **where, text=text)
        part = {"type": "summary_text", "text": text}
        await send("response.reasoning_summary_part.done", **where, part=part)
        summary.append(part)
    item = {**item, "summary": summary}
    await send("response.output_item.done", output_index=0, item=item)
    return item
