"""The content-addressed cache key: what a hop was asked, reduced to what changes its answer."""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from olp.ir import ChatRequest

#: Bumped whenever the key material changes shape, so old entries simply stop matching.
KEY_VERSION: Final = 1

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def cache_key(request: ChatRequest, *, provider: str, model: str) -> str:
    """The hex SHA-256 of one hop's answer-changing input.

    Covers the resolved ``provider`` and ``model`` (not the alias the client asked for) and
    the request fields that change the answer: messages, tools, temperature, top_p,
    max_tokens, stop, presence/frequency penalties, tool_choice, ``parallel_tool_calls:
    false`` (``true`` and absent are OpenAI's default and answer alike, so they add nothing
    and keys made before the field existed still match), response_format and the
    cache-control hook, and the reasoning asked for (effort, budget, summary, whether its
    text is wanted back). Dict key order is normalised at every depth; an empty list, an absent
    field and ``None`` are the same. Transport and bookkeeping fields (``stream``,
    ``include_usage``, ``user``, ``seed``) are left out. Namespacing per API key is the
    store's job (its ``namespace`` argument), not the key's.
    """
    material: dict[str, Any] = {
        "v": KEY_VERSION,
        "provider": provider,
        "model": model,
        "messages": request.messages,
        "tools": request.tools or None,
        "temperature": _number(request.temperature),
        "top_p": _number(request.top_p),
        "max_tokens": request.max_tokens,
        "stop": request.stop or None,
        "presence_penalty": _number(request.presence_penalty),
        "frequency_penalty": _number(request.frequency_penalty),
        "tool_choice": request.tool_choice,
        "response_format": request.response_format,
        "cache_control": request.has_cache_control_markers(),
    }
    if request.parallel_tool_calls is False:
        material["parallel_tool_calls"] = False
    if request.reasoning is not None:  # absent: keys made before the field still match
        material["reasoning"] = request.reasoning
    return hashlib.sha256(_ENCODER.encode(material)).hexdigest()


def _number(value: float | None) -> float | None:
    """``1`` and ``1.0`` (and ``-0.0`` and ``0.0``) are the same sampling parameter."""
    return None if value is None else float(value) + 0.0
