"""The wire schema of an OpenAI ``POST /v1/chat/completions`` body, as msgspec structs.

No ``forbid_unknown_fields``: clients add fields over time. Types are checked strictly;
:mod:`._openai_request` turns a decoded body into the IR.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class _ImageURL(msgspec.Struct, kw_only=True):
    url: str
    detail: str | None = None


class _Part(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None
    image_url: str | _ImageURL | None = None
    cache_control: dict[str, Any] | None = None  # Anthropic-style prompt-caching marker


class _FunctionCall(msgspec.Struct, kw_only=True):
    name: str
    arguments: str


class _ToolCall(msgspec.Struct, kw_only=True):
    id: str
    type: str = "function"
    function: _FunctionCall


class _Message(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[_Part] | None | UnsetType = UNSET
    name: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: Any | UnsetType = UNSET  # the legacy shape: refused with a clear 400


class _StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool | None = None


class _FunctionDef(msgspec.Struct, kw_only=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _Tool(msgspec.Struct, kw_only=True):
    type: str = "function"
    function: _FunctionDef


class _Request(msgspec.Struct, kw_only=True):
    model: str
    messages: list[_Message]
    stream: bool | None = None
    stream_options: _StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    n: int | None = None
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    prompt_cache_key: str | None = None
    functions: Any | UnsetType = UNSET  # the legacy shape: refused with a clear 400
    function_call: Any | UnsetType = UNSET
    response_format: dict[str, Any] | None = None
    user: str | None = None
    reasoning_effort: str | None = None
