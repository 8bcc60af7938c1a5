"""Decoding an Anthropic ``POST /v1/messages`` body into a :class:`ChatRequest`.

The same IR as Chat Completions, so the engine never knows the dialect:

- ``system`` (a string or text blocks, ``cache_control`` kept) → a ``system`` message first;
- a user turn's ``text`` and ``image`` blocks (``base64`` → a ``data:`` URL, or ``url``) → a
  ``user`` message; its ``tool_result`` blocks → one ``tool`` message each, in order, before
  the rest of the turn (``is_error`` results start with ``Error: ``);
- an assistant turn's ``text`` → its content, its ``tool_use`` blocks → ``tool_calls``
  (``input`` as a JSON string); ``thinking`` and ``redacted_thinking`` blocks are dropped,
  signature and all (a hop cannot replay them; OLP's own come back with an empty one);
- client ``tools`` (``input_schema`` → parameters; server tools are refused), ``tool_choice``
  (``auto``, ``any`` → ``required``, ``tool`` → a named function, ``none``;
  ``disable_parallel_tool_use`` → ``parallel_tool_calls: false``), ``max_tokens``,
  ``stop_sequences``, ``temperature``, ``top_p``, ``metadata.user_id`` → ``user`` and
  ``conversation`` (Claude Code puts its session id there: ADR 0023), ``stream``.
  ``top_k`` has no IR field and is not passed on.
- ``thinking`` → the IR's ``reasoning`` (ADR 0026): ``enabled`` → the level nearest its
  ``budget_tokens`` (at least 1,024, as Anthropic's API requires; kept as sent),
  ``disabled`` → ``none``, ``adaptive`` and ``between_tools`` → no level (the model's
  choice); the thinking is wanted back unless ``disabled`` or ``display: "omitted"``.
  ``output_config.effort`` (``low``, ``medium``, ``high``; ``xhigh`` and ``max`` are
  ``high``) sets the level, over what ``thinking`` implies.

Every failure is :class:`~olp.ir._validation.InvalidRequest` naming the field.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from ._anthropic_wire import (
    _Block,
    _Message,
    _OutputConfig,
    _Request,
    _Thinking,
    _Tool,
    _ToolChoice,
)
from ._reasoning_wire import ANTHROPIC_EFFORTS, effort
from ._request import (
    ChatRequest,
    Effort,
    ImagePart,
    Message,
    Part,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
    ToolSpec,
    effort_for_budget,
)
from ._validation import (
    INT32_MAX,
    TOOL_NAME,
    InvalidRequest,
    check_int,
    check_model,
    check_range,
    decode_body,
    invalid,
    require_prompt,
)


class _CountRequest(_Request, kw_only=True):
    """A ``/v1/messages/count_tokens`` body: a Messages body that needs no ``max_tokens``."""

    max_tokens: int = 1


_DECODER: Final = msgspec.json.Decoder(_Request)
_COUNT_DECODER: Final = msgspec.json.Decoder(_CountRequest)
_ROLES: Final = ("user", "assistant")
_SKIPPED: Final = frozenset({"thinking", "redacted_thinking"})
_THINKING: Final = ("enabled", "disabled", "adaptive", "between_tools")
_DISPLAYS: Final = ("summarized", "omitted")
#: Anthropic's least ``thinking.budget_tokens``.
MIN_BUDGET: Final = 1024


def decode_messages_request(body: bytes) -> ChatRequest:
    """Decode and validate a Messages request body; raise :class:`InvalidRequest`."""
    return _convert(decode_body(_DECODER, body))


def decode_count_tokens_request(body: bytes) -> ChatRequest:
    """Decode and validate a ``count_tokens`` body: what :func:`decode_messages_request`
    takes, without ``max_tokens``; the same path, so the same :class:`InvalidRequest`."""
    return _convert(decode_body(_COUNT_DECODER, body))


def _convert(w: _Request) -> ChatRequest:
    check_model(w.model)
    check_int("max_tokens", w.max_tokens, 1, INT32_MAX)
    check_range("temperature", w.temperature, 0, 1)
    check_range("top_p", w.top_p, 0, 1)
    if not w.messages:
        raise InvalidRequest("Invalid 'messages': expected a non-empty array.", "messages",
                             "empty_array")
    turns = tuple(m for i, wm in enumerate(w.messages) for m in _turn(f"messages[{i}]", wm))
    require_prompt(turns)
    system = _system(w.system)
    tools = tuple(_tool(f"tools[{i}]", t) for i, t in enumerate(w.tools or ()))
    tool_choice, parallel = _tool_choice(w.tool_choice, tools)
    return ChatRequest(
        model=w.model,
        messages=(*system, *turns),
        stream=bool(w.stream),
        include_usage=True,  # Anthropic reports usage in every answer
        temperature=w.temperature,
        top_p=w.top_p,
        max_tokens=w.max_tokens,
        stop=tuple(w.stop_sequences or ()),
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        user=w.metadata.user_id if w.metadata is not None else None,
        conversation=w.metadata.user_id if w.metadata is not None else None,
        reasoning=_reasoning(w.thinking, w.output_config),
    )


def _reasoning(thinking: _Thinking | None, config: _OutputConfig | None) -> Reasoning | None:
    """``thinking`` and ``output_config.effort``; ``None`` when neither is sent."""
    level: Effort | None = None
    budget: int | None = None
    show = False
    if thinking is not None:
        if thinking.type not in _THINKING:
            raise invalid("thinking.type", f"expected one of {', '.join(_THINKING)}, got "
                          f"{thinking.type!r}.")
        if thinking.display is not None and thinking.display not in _DISPLAYS:
            raise invalid("thinking.display", f"expected one of {', '.join(_DISPLAYS)}, got "
                          f"{thinking.display!r}.")
        if thinking.type == "enabled":
            budget = thinking.budget_tokens
            if budget is None:
                raise InvalidRequest("Missing required parameter: 'thinking.budget_tokens'.",
                                     "thinking.budget_tokens", "missing_required_parameter")
            check_int("thinking.budget_tokens", budget, MIN_BUDGET, INT32_MAX)
            level = effort_for_budget(budget)
        elif thinking.type == "disabled":
            level = "none"
        show = thinking.type != "disabled" and thinking.display != "omitted"
    if config is not None and config.effort is not None:
        level = effort("output_config.effort", config.effort, ANTHROPIC_EFFORTS)
    if thinking is None and level is None:
        return None
    return Reasoning(effort=level, budget_tokens=budget, show=show)


def _system(system: str | list[_Block] | None) -> tuple[Message, ...]:
    if system is None or system == "":
        return ()
    if isinstance(system, str):
        return (Message(role="system", content=(TextPart(text=system),)),)
    parts = []
    for i, block in enumerate(system):
        if block.type != "text" or block.text is None:
            raise invalid(f"system[{i}].type", "system blocks must be text blocks.")
        parts.append(TextPart(text=block.text, cache_control=block.cache_control))
    return (Message(role="system", content=tuple(parts)),) if parts else ()


def _turn(at: str, m: _Message) -> list[Message]:
    if m.role not in _ROLES:
        raise invalid(f"{at}.role", f"expected 'user' or 'assistant', got {m.role!r}.")
    role: Role = "user" if m.role == "user" else "assistant"
    if isinstance(m.content, str):
        return [Message(role=role, content=(TextPart(text=m.content),))]
    if not m.content:
        raise InvalidRequest(f"Missing required parameter: '{at}.content'.", f"{at}.content",
                             "missing_required_parameter")
    if role == "assistant":
        return [_assistant(at, m.content)]
    results: list[Message] = []
    parts: list[Part] = []
    for i, block in enumerate(m.content):
        where = f"{at}.content[{i}]"
        if block.type == "tool_result":
            results.append(_tool_result(where, block))
        else:
            parts.append(_part(where, block, images=True))
    return [*results, *([Message(role="user", content=tuple(parts))] if parts else [])]


def _assistant(at: str, blocks: list[_Block]) -> Message:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(blocks):
        where = f"{at}.content[{i}]"
        if block.type in _SKIPPED:
            continue
        if block.type == "tool_use":
            if not block.id or not block.name:
                raise InvalidRequest(f"Missing required parameter: '{where}.id' and "
                                     f"'{where}.name'.", f"{where}.id",
                                     "missing_required_parameter")
            calls.append(ToolCall(id=block.id, name=block.name,
                                  arguments=json.dumps(block.input if block.input is not None
                                                       else {}, ensure_ascii=False)))
        else:
            parts.append(_part(where, block, images=False))
    return Message(role="assistant", content=tuple(parts), tool_calls=tuple(calls))


def _part(at: str, block: _Block, *, images: bool) -> Part:
    if block.type == "text":
        if block.text is None:
            raise InvalidRequest(f"Missing required parameter: '{at}.text'.", f"{at}.text",
                                 "missing_required_parameter")
        return TextPart(text=block.text, cache_control=block.cache_control)
    if block.type == "image" and images:
        return ImagePart(url=_image_url(at, block))
    supported = "text, image, tool_result" if images else "text, tool_use, thinking"
    raise invalid(f"{at}.type", f"unsupported content block type {block.type!r} "
                  f"(supported here: {supported}).")


def _image_url(at: str, block: _Block) -> str:
    source = block.source
    if source is None:
        raise InvalidRequest(f"Missing required parameter: '{at}.source'.", f"{at}.source",
                             "missing_required_parameter")
    if source.type == "base64" and source.media_type and source.data:
        return f"data:{source.media_type};base64,{source.data}"
    if source.type == "url" and source.url:
        return source.url
    raise invalid(f"{at}.source", "expected a base64 source with media_type and data, or a "
                  "url source with url.")


def _tool_result(at: str, block: _Block) -> Message:
    if not block.tool_use_id:
        raise InvalidRequest(f"Missing required parameter: '{at}.tool_use_id'.",
                             f"{at}.tool_use_id", "missing_required_parameter")
    content = block.content
    if content is None:
        parts: tuple[Part, ...] = ()
    elif isinstance(content, str):
        parts = (TextPart(text=content),)
    else:
        parts = tuple(_part(f"{at}.content[{i}]", b, images=True) for i, b in enumerate(content))
    if block.is_error:
        parts = (TextPart(text="Error: "), *parts)
    return Message(role="tool", content=parts, tool_call_id=block.tool_use_id)


def _tool(at: str, t: _Tool) -> ToolSpec:
    if t.type not in (None, "custom"):
        raise invalid(f"{at}.type", f"server tools ({t.type!r}) are not served here; send "
                      "client tools (name, description, input_schema).")
    if not TOOL_NAME.fullmatch(t.name):
        raise invalid(f"{at}.name", "must be 1 to 64 letters, digits, underscores or dashes.")
    if t.input_schema is None:
        raise InvalidRequest(f"Missing required parameter: '{at}.input_schema'.",
                             f"{at}.input_schema", "missing_required_parameter")
    return ToolSpec(name=t.name, description=t.description, parameters=t.input_schema)


def _tool_choice(choice: _ToolChoice | None, tools: tuple[ToolSpec, ...],
                 ) -> tuple[str | dict[str, Any] | None, bool | None]:
    if choice is None:
        return None, None
    parallel = False if choice.disable_parallel_tool_use else None
    if choice.type == "auto":
        return "auto", parallel
    if choice.type == "any":
        return "required", parallel
    if choice.type == "none":
        return "none", None
    if choice.type == "tool":
        if not choice.name:
            raise InvalidRequest("Missing required parameter: 'tool_choice.name'.",
                                 "tool_choice.name", "missing_required_parameter")
        if choice.name not in {t.name for t in tools}:
            raise invalid("tool_choice.name", f"tool {choice.name!r} is not one of the "
                          "request's 'tools'.")
        return {"type": "function", "function": {"name": choice.name}}, parallel
    raise invalid("tool_choice.type", f"expected one of auto, any, tool, none, got "
                  f"{choice.type!r}.")
