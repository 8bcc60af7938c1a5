"""The mock's thinking model: scenario ``thinking`` answers as the Messages API does when the
request turns thinking on.

- The request's ``thinking`` decides what comes back: ``{"type": "disabled"}`` or none at all →
  no thinking block (the plain answer); ``adaptive`` or ``enabled`` → a ``thinking`` block
  before the text. Its ``display`` as the API documents it: ``"omitted"`` → the block's
  ``thinking`` is empty and only its ``signature`` comes (``signature_delta``); ``"updates"``
  (what claude 2.1.332 sends in stream-json mode) likewise, as a reasoning block carries no
  text under it (only the progress notes between tool calls do, and the mock makes none);
  anything else (``"summarized"``, none) → the scenario's ``thinking`` texts as
  ``thinking_delta`` events, then the ``signature_delta``.
- Streamed: ``content_block_start`` ``{"type": "thinking", "thinking": "", "signature": ""}``,
  the deltas, ``content_block_stop``; then the text block (index 1) with the scenario's
  ``deltas``. Whole: ``content`` ``[thinking block, text block]``.

The usage (``message_delta``, or the whole message's) counts :data:`THINKING_TOKENS` of the
output tokens as thinking, ``output_tokens_details.thinking_tokens`` (the field claude 2.1.332's
API schema reads), when a thinking block came, text or not.

The record notes what was sent: ``record["thinking"]`` is ``"shown"``, ``"omitted"`` or
``"none"``.
"""

from __future__ import annotations

from typing import Any, Literal

#: The scenario's default thinking text, in two deltas.
DEFAULT_THINKING: tuple[str, ...] = ("The user wants a greeting.", " Four words will do.")
#: The signature every thinking block carries (the API's is an opaque base64 blob).
SIGNATURE = "EqQBCkgIBhABGAIiQG1vY2stc2lnbmF0dXJl"
#: Of the answer's output tokens, those the usage says were spent thinking.
THINKING_TOKENS = 5

Shown = Literal["shown", "omitted", "none"]
#: The ``display`` values under which a reasoning block comes back without its text.
_EMPTY_DISPLAYS = frozenset({"omitted", "updates"})


def thinking_shown(payload: dict[str, Any]) -> Shown:
    """What the API would send for the request's ``thinking``: the text, only the signature
    (``display: "omitted"``), or no thinking block."""
    config = payload.get("thinking")
    if not isinstance(config, dict) or config.get("type") not in ("adaptive", "enabled"):
        return "none"
    return "omitted" if config.get("display") in _EMPTY_DISPLAYS else "shown"


def thinking_events(shown: Shown, texts: tuple[str, ...]) -> tuple[list[dict[str, Any]], ...]:
    """The SSE events of the thinking block at index 0 (none when ``shown`` is ``"none"``)."""
    if shown == "none":
        return ()
    deltas: list[dict[str, Any]] = []
    if shown == "shown":
        deltas += [{"type": "thinking_delta", "thinking": text} for text in texts]
    deltas.append({"type": "signature_delta", "signature": SIGNATURE})
    return ([{"type": "content_block_start", "index": 0,
              "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
             *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
             {"type": "content_block_stop", "index": 0}],)


def thinking_blocks(shown: Shown, texts: tuple[str, ...]) -> list[dict[str, Any]]:
    """The whole thinking block as a non-streamed message carries it (none: ``[]``)."""
    if shown == "none":
        return []
    return [{"type": "thinking", "thinking": "".join(texts) if shown == "shown" else "",
             "signature": SIGNATURE}]


def thinking_usage(shown: Shown) -> dict[str, Any]:
    """The usage fields that count the thinking tokens (none without a thinking block)."""
    if shown == "none":
        return {}
    return {"output_tokens_details": {"thinking_tokens": THINKING_TOKENS}}
