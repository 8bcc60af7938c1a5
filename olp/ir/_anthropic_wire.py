"""The Anthropic Messages request schema as msgspec structs: lenient on unknown fields, strict
on types (msgspec reports the path of a wrong type). Decoded by ``_anthropic_request.py``."""

from __future__ import annotations

from typing import Any

import msgspec


class _Source(msgspec.Struct, kw_only=True):
    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class _Block(msgspec.Struct, kw_only=True):
    """Any content block; which fields matter depends on ``type``."""

    type: str
    text: str | None = None
    cache_control: dict[str, Any] | None = None
    source: _Source | None = None  # image
    id: str | None = None  # tool_use
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None  # tool_result
    content: str | list[_Block] | None = None
    is_error: bool | None = None


class _Message(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[_Block]


class _Tool(msgspec.Struct, kw_only=True):
    name: str
    type: str | None = None  # None or "custom" for a client tool; other types are server tools
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class _ToolChoice(msgspec.Struct, kw_only=True):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class _Metadata(msgspec.Struct, kw_only=True):
    user_id: str | None = None


class _Thinking(msgspec.Struct, kw_only=True):
    """``thinking``: ``enabled`` (with ``budget_tokens``), ``disabled``, ``adaptive`` or
    ``between_tools``; ``display`` ``summarized`` or ``omitted``."""

    type: str
    budget_tokens: int | None = None
    display: str | None = None


class _OutputConfig(msgspec.Struct, kw_only=True):
    effort: str | None = None  # ``format`` (structured output) is not read


class _Request(msgspec.Struct, kw_only=True):
    model: str
    max_tokens: int
    messages: list[_Message]
    system: str | list[_Block] | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool | None = None
    tools: list[_Tool] | None = None
    tool_choice: _ToolChoice | None = None
    metadata: _Metadata | None = None
    thinking: _Thinking | None = None
    output_config: _OutputConfig | None = None
