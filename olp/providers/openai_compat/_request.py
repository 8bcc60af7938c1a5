"""The IR request as an OpenAI ``POST /chat/completions`` body, always streamed.

The reverse of :func:`olp.ir.openai.decode_chat_request`: every parameter the client set is
passed through (unlike the CLIs, HTTP hops honour them all; docs/providers.md), the
model is the hop's, and the body always asks for ``stream: true`` with
``stream_options.include_usage`` (usage is needed for the ledger even when the client did not
ask for it). ``developer`` messages go upstream as ``system`` (OpenAI treats them alike;
many compatible servers know only ``system``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from olp.ir import ChatRequest, ImagePart, Message, TextPart

# --- the wire shapes (field order is the JSON key order; UNSET fields are omitted) ---


class _ImageURL(msgspec.Struct, kw_only=True):
    url: str
    detail: str | UnsetType = UNSET


class _TextPart(msgspec.Struct, kw_only=True, tag="text", tag_field="type"):
    text: str


class _ImagePart(msgspec.Struct, kw_only=True, tag="image_url", tag_field="type"):
    image_url: _ImageURL


class _Function(msgspec.Struct, kw_only=True):
    name: str
    arguments: str


class _ToolCall(msgspec.Struct, kw_only=True):
    id: str
    type: str = "function"
    function: _Function


class _Message(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[_TextPart | _ImagePart] | None
    name: str | UnsetType = UNSET
    tool_calls: list[_ToolCall] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET


class _FunctionDef(msgspec.Struct, kw_only=True):
    name: str
    description: str | UnsetType = UNSET
    parameters: dict[str, Any] | UnsetType = UNSET


class _Tool(msgspec.Struct, kw_only=True):
    type: str = "function"
    function: _FunctionDef


class _StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = True


class _Body(msgspec.Struct, kw_only=True):
    model: str
    messages: list[_Message]
    stream: bool = True
    stream_options: _StreamOptions = msgspec.field(default_factory=_StreamOptions)
    temperature: float | UnsetType = UNSET
    top_p: float | UnsetType = UNSET
    max_tokens: int | UnsetType = UNSET
    max_completion_tokens: int | UnsetType = UNSET
    stop: list[str] | UnsetType = UNSET
    seed: int | UnsetType = UNSET
    presence_penalty: float | UnsetType = UNSET
    frequency_penalty: float | UnsetType = UNSET
    tools: list[_Tool] | UnsetType = UNSET
    tool_choice: str | dict[str, Any] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    response_format: dict[str, Any] | UnsetType = UNSET
    user: str | UnsetType = UNSET
    reasoning_effort: str | UnsetType = UNSET


_ENCODER: Final = msgspec.json.Encoder()


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


def encode_chat_request(request: ChatRequest, model: str, *,
                        max_tokens_field: Literal["max_tokens", "max_completion_tokens"]
                        = "max_tokens") -> bytes:
    """The JSON body for ``request`` sent to ``model``."""
    max_tokens = _opt(request.max_tokens)
    body = _Body(
        model=model,
        messages=[_message(m) for m in request.messages],
        temperature=_opt(request.temperature),
        top_p=_opt(request.top_p),
        max_tokens=max_tokens if max_tokens_field == "max_tokens" else UNSET,
        max_completion_tokens=max_tokens if max_tokens_field != "max_tokens" else UNSET,
        stop=list(request.stop) if request.stop else UNSET,
        seed=_opt(request.seed),
        presence_penalty=_opt(request.presence_penalty),
        frequency_penalty=_opt(request.frequency_penalty),
        tools=[_Tool(function=_FunctionDef(name=t.name, description=_opt(t.description),
                                           parameters=_opt(t.parameters)))
               for t in request.tools] or UNSET,
        tool_choice=_opt(request.tool_choice),
        # Only with tools: OpenAI refuses parallel_tool_calls on a request without them.
        parallel_tool_calls=_opt(request.parallel_tool_calls) if request.tools else UNSET,
        response_format=_opt(request.response_format),
        user=_opt(request.user),
        # the level as the client asked it: the upstream's own reasoning_effort (#27)
        reasoning_effort=_opt(request.reasoning.effort if request.reasoning else None),
    )
    return _ENCODER.encode(body)


def _message(m: Message) -> _Message:
    return _Message(
        role="system" if m.role == "developer" else m.role,
        content=_content(m),
        name=_opt(m.name),
        tool_calls=[_ToolCall(id=c.id, function=_Function(name=c.name, arguments=c.arguments))
                    for c in m.tool_calls] or UNSET,
        tool_call_id=_opt(m.tool_call_id),
    )


def _content(m: Message) -> str | list[_TextPart | _ImagePart] | None:
    parts = m.content
    if not parts:
        return None if m.tool_calls else ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    out: list[_TextPart | _ImagePart] = []
    for p in parts:
        if isinstance(p, ImagePart):
            out.append(_ImagePart(image_url=_ImageURL(url=p.url, detail=_opt(p.detail))))
        else:
            out.append(_TextPart(text=p.text))
    return out
