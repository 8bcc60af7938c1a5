"""Decoding an OpenAI ``POST /v1/responses`` body into a :class:`ChatRequest`.

- ``instructions`` → a system message first; ``input`` as a string → one user message, or as
  items: messages (``role`` user, assistant, system or developer; ``content`` a string or
  ``input_text`` / ``output_text`` / ``input_image`` parts), ``function_call`` items (joined
  onto the assistant turn before them, or a turn of their own) and ``function_call_output``
  items (a ``tool`` message each); ``reasoning`` items are dropped;
- function ``tools``; every other tool type (``custom`` freeform tools such as codex's
  ``apply_patch``, ``tool_search``, ``web_search``, ``file_search``, …) is dropped and named in
  ``ChatRequest.dropped`` (so in ``X-OLP-Ignored-Params``; at most 128 characters of its name
  or type): no hop can run a server tool, and a freeform call has no function shape to come
  back in; ``tool_choice`` (``auto``, ``none``, ``required``, ``{"type": "function",
  "name"}``), ``parallel_tool_calls``;
- ``text.format`` (``text``, ``json_object``, ``json_schema`` with ``name``/``schema``/
  ``strict``) → the IR's ``response_format`` in Chat Completions' shape;
- ``max_output_tokens``, ``temperature``, ``top_p``, ``user``, ``stream``;
- ``reasoning``: ``effort`` (what the openai SDK takes; ``xhigh`` and ``max`` are ``high``)
  and ``summary`` (``auto``, ``concise``, ``detailed``; the deprecated ``generate_summary``
  too): a summary asked for is the model's thinking wanted back (a ``reasoning`` output item);
- ``previous_response_id`` (the HTTP edge puts that answer's conversation first, or refuses
  with a 400), ``store`` (``false``: this answer is not kept for a later
  ``previous_response_id``) and ``prompt_cache_key`` (the conversation's name: ADR 0023).

Every failure is :class:`~olp.ir._validation.InvalidRequest` naming the field.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ._reasoning_wire import OPENAI_EFFORTS, effort
from ._request import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
    ToolSpec,
)
from ._validation import (
    INT32_MAX,
    TOOL_NAME,
    InvalidRequest,
    check_id,
    check_int,
    check_model,
    check_range,
    decode_body,
    invalid,
    require_prompt,
)


class _Part(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None
    image_url: str | None = None
    detail: str | None = None


class _Item(msgspec.Struct, kw_only=True):
    type: str = "message"
    role: str | None = None
    content: str | list[_Part] | None = None
    call_id: str | None = None  # function_call, function_call_output
    name: str | None = None
    arguments: str | None = None
    output: str | list[_Part] | None = None


class _Tool(msgspec.Struct, kw_only=True):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _Format(msgspec.Struct, kw_only=True):
    type: str
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class _Text(msgspec.Struct, kw_only=True):
    format: _Format | None = None


class _Reasoning(msgspec.Struct, kw_only=True):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None  # the deprecated name of ``summary``


class _Request(msgspec.Struct, kw_only=True):
    model: str
    input: str | list[_Item]
    instructions: str | None = None
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: _Text | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None
    stream: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    reasoning: _Reasoning | None = None


_DECODER: Final = msgspec.json.Decoder(_Request)
_ROLES: Final[dict[str, Role]] = {"user": "user", "assistant": "assistant",
                                  "system": "system", "developer": "developer"}
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_CHOICES: Final = ("auto", "none", "required")
_SUMMARIES: Final = ("auto", "concise", "detailed")
#: The most of a dropped tool's name (or type) named in ``ChatRequest.dropped``.
DROPPED_CHARS: Final = 128


def decode_responses_request(body: bytes) -> ChatRequest:
    """Decode and validate a Responses request body; raise :class:`InvalidRequest`."""
    return _convert(decode_body(_DECODER, body))


def _convert(w: _Request) -> ChatRequest:
    check_model(w.model)
    check_id("previous_response_id", w.previous_response_id)
    check_id("prompt_cache_key", w.prompt_cache_key)
    check_int("max_output_tokens", w.max_output_tokens, 1, INT32_MAX)
    check_range("temperature", w.temperature, 0, 2)
    check_range("top_p", w.top_p, 0, 1)
    if isinstance(w.input, str):
        turns: tuple[Message, ...] = (Message(role="user", content=(TextPart(text=w.input),)),)
    else:
        if not w.input:
            raise InvalidRequest("Invalid 'input': expected a non-empty string or array.",
                                 "input", "empty_array")
        turns = _items(w.input)
    require_prompt(turns)
    system = (Message(role="system", content=(TextPart(text=w.instructions),)),) \
        if w.instructions else ()
    tools = tuple(_tool(f"tools[{i}]", t) for i, t in enumerate(w.tools or ())
                  if t.type == "function")
    dropped = tuple(_dropped(t) for t in w.tools or () if t.type != "function")
    return ChatRequest(
        model=w.model,
        messages=(*system, *turns),
        stream=bool(w.stream),
        include_usage=True,  # a response always carries its usage
        temperature=w.temperature,
        top_p=w.top_p,
        max_tokens=w.max_output_tokens,
        tools=tools,
        tool_choice=_tool_choice(w.tool_choice, tools),
        parallel_tool_calls=w.parallel_tool_calls,
        response_format=_format(w.text.format if w.text is not None else None),
        user=w.user,
        dropped=dropped,
        conversation=w.prompt_cache_key,
        previous_response_id=w.previous_response_id,
        store=w.store is not False,
        reasoning=_reasoning(w.reasoning),
    )


def _reasoning(r: _Reasoning | None) -> Reasoning | None:
    """``reasoning``, or ``None`` when it asks nothing (so the cache key is as before)."""
    if r is None:
        return None
    level = None if r.effort is None else effort("reasoning.effort", r.effort, OPENAI_EFFORTS)
    param, summary = ("reasoning.summary", r.summary) if r.summary is not None \
        else ("reasoning.generate_summary", r.generate_summary)
    if summary is not None and summary not in _SUMMARIES:
        raise invalid(param, f"expected one of {', '.join(_SUMMARIES)}, got {summary!r}.")
    if level is None and summary is None:
        return None
    return Reasoning(effort=level, summary=summary,
                     show=summary is not None and level != "none")


def _dropped(t: _Tool) -> str:
    """How a dropped tool is named: ``tools.<name or type>``, at most :data:`DROPPED_CHARS`
    of it (then ``…``); the HTTP edge encodes and bounds the header it goes into anyway."""
    name = t.name or t.type
    if len(name) > DROPPED_CHARS:
        name = name[:DROPPED_CHARS - 1] + "\u2026"
    return f"tools.{name}"


def _items(items: list[_Item]) -> tuple[Message, ...]:
    out: list[Message] = []
    for i, item in enumerate(items):
        at = f"input[{i}]"
        if item.type == "message":
            out.append(_message(at, item))
        elif item.type == "function_call":
            if not item.call_id or not item.name:
                raise InvalidRequest(f"Missing required parameter: '{at}.call_id' and "
                                     f"'{at}.name'.", f"{at}.call_id",
                                     "missing_required_parameter")
            call = ToolCall(id=item.call_id, name=item.name, arguments=item.arguments or "{}")
            if out and out[-1].role == "assistant":  # the turn the call belongs to
                last = out[-1]
                out[-1] = Message(role="assistant", content=last.content,
                                  tool_calls=(*last.tool_calls, call))
            else:
                out.append(Message(role="assistant", tool_calls=(call,)))
        elif item.type == "function_call_output":
            if not item.call_id:
                raise InvalidRequest(f"Missing required parameter: '{at}.call_id'.",
                                     f"{at}.call_id", "missing_required_parameter")
            out.append(Message(role="tool", content=_parts(f"{at}.output", item.output),
                               tool_call_id=item.call_id))
        elif item.type != "reasoning":
            raise invalid(f"{at}.type", f"unsupported input item type {item.type!r} "
                          "(supported: message, function_call, function_call_output).")
    return tuple(out)


def _message(at: str, item: _Item) -> Message:
    role = _ROLES.get(item.role or "")
    if role is None:
        raise invalid(f"{at}.role", "expected one of user, assistant, system, developer, got "
                      f"{item.role!r}.")
    content = _parts(f"{at}.content", item.content)
    if not content:
        raise InvalidRequest(f"Missing required parameter: '{at}.content'.", f"{at}.content",
                             "missing_required_parameter")
    return Message(role=role, content=content)


def _parts(at: str, content: str | list[_Part] | None) -> tuple[Part, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextPart(text=content),)
    parts: list[Part] = []
    for i, p in enumerate(content):
        if p.type in _TEXT_PARTS and p.text is not None:
            parts.append(TextPart(text=p.text))
        elif p.type == "input_image" and p.image_url:
            parts.append(ImagePart(url=p.image_url, detail=p.detail))
        else:
            raise invalid(f"{at}[{i}].type", f"unsupported content part {p.type!r} "
                          "(supported: input_text, output_text, input_image with image_url).")
    return tuple(parts)


def _tool(at: str, t: _Tool) -> ToolSpec:
    if not t.name or not TOOL_NAME.fullmatch(t.name):
        raise invalid(f"{at}.name", "must be 1 to 64 letters, digits, underscores or dashes.")
    return ToolSpec(name=t.name, description=t.description, parameters=t.parameters)


def _tool_choice(choice: str | dict[str, Any] | None,
                 tools: tuple[ToolSpec, ...]) -> str | dict[str, Any] | None:
    if choice is None or isinstance(choice, str):
        if choice is not None and choice not in _CHOICES:
            raise invalid("tool_choice", f"expected one of {', '.join(_CHOICES)} or an "
                          f"object, got {choice!r}.")
        return choice
    name = choice.get("name")
    if choice.get("type") != "function" or not isinstance(name, str) or not name:
        raise invalid("tool_choice", "expected {\"type\": \"function\", \"name\": ...}.")
    if name not in {t.name for t in tools}:
        raise invalid("tool_choice.name", f"function {name!r} is not one of the request's "
                      "'tools'.")
    return {"type": "function", "function": {"name": name}}


def _format(fmt: _Format | None) -> dict[str, Any] | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    if fmt.type == "json_schema":
        if fmt.schema is None:
            raise InvalidRequest("Missing required parameter: 'text.format.schema'.",
                                 "text.format.schema", "missing_required_parameter")
        spec: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.schema}
        if fmt.strict is not None:
            spec["strict"] = fmt.strict
        return {"type": "json_schema", "json_schema": spec}
    raise invalid("text.format.type", "expected one of text, json_object, json_schema, got "
                  f"{fmt.type!r}.")
