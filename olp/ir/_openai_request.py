"""Decoding an OpenAI ``POST /v1/chat/completions`` body into a :class:`ChatRequest`.

The wire schema (``_openai_wire.py``) is lenient on unknown fields and strict on types: msgspec
checks the types and reports a path, semantic checks follow. Every failure is
:class:`InvalidRequest`.
"""

from __future__ import annotations

from typing import Any, Final, get_args

import msgspec
from msgspec import UnsetType

from ._openai_wire import _Message, _Part, _Request, _Tool, _ToolCall
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

_DECODER: Final = msgspec.json.Decoder(_Request)
_ROLES: Final[dict[str, Role]] = {r: r for r in get_args(Role)}
_TOOL_CHOICES: Final = ("none", "auto", "required")
_RESPONSE_FORMATS: Final = ("text", "json_object", "json_schema")


def decode_chat_request(body: bytes) -> ChatRequest:
    """Decode and validate a chat completion request body; raise :class:`InvalidRequest`."""
    return _convert(decode_body(_DECODER, body))


def _convert(w: _Request) -> ChatRequest:
    check_model(w.model)
    if not w.messages:
        raise InvalidRequest("Invalid 'messages': expected a non-empty array.", "messages",
                             "empty_array")
    if w.n is not None and w.n != 1:
        raise InvalidRequest("Invalid value for 'n': only n=1 is supported.", "n",
                             "unsupported_value")
    check_range("temperature", w.temperature, 0, 2)
    check_range("top_p", w.top_p, 0, 1)
    check_range("presence_penalty", w.presence_penalty, -2, 2)
    check_range("frequency_penalty", w.frequency_penalty, -2, 2)
    check_int("max_tokens", w.max_tokens, 1, INT32_MAX)
    check_int("max_completion_tokens", w.max_completion_tokens, 1, INT32_MAX)
    check_int("seed", w.seed, -(2**63), 2**63 - 1)
    _refuse_legacy_functions(w)
    messages = tuple(_message(f"messages[{i}]", m) for i, m in enumerate(w.messages))
    require_prompt(messages)
    tools = tuple(_tool(f"tools[{i}]", t) for i, t in enumerate(w.tools or ()))
    tool_choice = _tool_choice(w.tool_choice)
    _check_named_choice(tool_choice, tools)
    return ChatRequest(
        model=w.model,
        messages=messages,
        stream=bool(w.stream),
        include_usage=bool(w.stream_options and w.stream_options.include_usage),
        temperature=w.temperature,
        top_p=w.top_p,
        max_tokens=w.max_completion_tokens if w.max_completion_tokens is not None
        else w.max_tokens,
        stop=_stop(w.stop),
        seed=w.seed,
        presence_penalty=w.presence_penalty,
        frequency_penalty=w.frequency_penalty,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=w.parallel_tool_calls,
        response_format=_response_format(w.response_format),
        user=w.user,
        conversation=check_id("prompt_cache_key", w.prompt_cache_key),
        reasoning=_reasoning(w.reasoning_effort),
    )


def _reasoning(value: str | None) -> Reasoning | None:
    """``reasoning_effort`` (what the openai SDK takes; ``xhigh`` and ``max`` are ``high``):
    the model's thinking is wanted back unless the level is ``none`` (it comes back as
    ``reasoning_content``)."""
    if value is None:
        return None
    level = effort("reasoning_effort", value, OPENAI_EFFORTS)
    return Reasoning(effort=level, show=level != "none")


def _refuse_legacy_functions(w: _Request) -> None:
    """OpenAI's deprecated ``functions``/``function_call`` (request fields, an assistant
    message's ``function_call``, ``role: "function"``) are refused, not mapped: a client that
    sends them reads the answer's ``message.function_call``, which OLP never writes, so a
    mapped request would lose its call silently (docs/adr/0012-tool-calling-on-cli-hops.md)."""
    legacy = [name for name in ("functions", "function_call")
              if not isinstance(getattr(w, name), UnsetType) and getattr(w, name) is not None]
    legacy += [f"messages[{i}].function_call" for i, m in enumerate(w.messages)
               if not isinstance(m.function_call, UnsetType) and m.function_call is not None]
    legacy += [f"messages[{i}].role" for i, m in enumerate(w.messages) if m.role == "function"]
    if legacy:
        raise InvalidRequest(
            f"The deprecated 'functions'/'function_call' shape is not supported ('{legacy[0]}'): "
            "send 'tools' and 'tool_choice', assistant 'tool_calls' and 'tool' messages "
            "instead.", legacy[0], "unsupported_parameter")


def _message(at: str, m: _Message) -> Message:
    role = _ROLES.get(m.role)
    if role is None:
        raise invalid(f"{at}.role", f"expected one of {', '.join(_ROLES)}, got {m.role!r}.")
    tool_calls = tuple(_tool_call(f"{at}.tool_calls[{i}]", c)
                       for i, c in enumerate(m.tool_calls or ()))
    if tool_calls and role != "assistant":
        raise invalid(f"{at}.tool_calls", "only assistant messages may have tool_calls.")
    content = _content(at, role, m.content)
    if not content and not (role == "assistant" and tool_calls):
        raise InvalidRequest(f"Missing required parameter: '{at}.content'.", f"{at}.content",
                             "missing_required_parameter")
    if role == "tool" and m.tool_call_id is None:
        raise InvalidRequest(f"Missing required parameter: '{at}.tool_call_id'.",
                             f"{at}.tool_call_id", "missing_required_parameter")
    return Message(role=role, content=content, name=m.name, tool_calls=tool_calls,
                   tool_call_id=m.tool_call_id if role == "tool" else None)


def _content(at: str, role: Role, content: str | list[_Part] | None | UnsetType) -> tuple[
        Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),)
    return tuple(_part(f"{at}.content[{i}]", role, p) for i, p in enumerate(content or ()))


def _part(at: str, role: Role, p: _Part) -> Part:
    if p.type == "text":
        if p.text is None:
            raise InvalidRequest(f"Missing required parameter: '{at}.text'.", f"{at}.text",
                                 "missing_required_parameter")
        return TextPart(text=p.text, cache_control=p.cache_control)
    if p.type == "image_url":
        if role != "user":
            raise invalid(f"{at}.type", "image parts are only allowed in user messages.")
        image = p.image_url
        if image is None:
            raise InvalidRequest(f"Missing required parameter: '{at}.image_url'.",
                                 f"{at}.image_url", "missing_required_parameter")
        if isinstance(image, str):
            return ImagePart(url=image)
        return ImagePart(url=image.url, detail=image.detail)
    raise invalid(f"{at}.type", f"unsupported content part type {p.type!r} "
                   "(supported: text, image_url).")


def _tool_call(at: str, c: _ToolCall) -> ToolCall:
    if c.type != "function":
        raise invalid(f"{at}.type", f"expected 'function', got {c.type!r}.")
    return ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if len(stop) > 4:
        raise invalid("stop", f"expected at most 4 stop sequences, got {len(stop)}.")
    return tuple(stop)


def _tool(at: str, t: _Tool) -> ToolSpec:
    if t.type != "function":
        raise invalid(f"{at}.type", f"expected 'function', got {t.type!r}.")
    if not t.function.name:
        raise invalid(f"{at}.function.name", "must be a non-empty string.")
    if not TOOL_NAME.fullmatch(t.function.name):
        raise invalid(f"{at}.function.name", "must be 1 to 64 letters, digits, underscores "
                       "or dashes.")
    f = t.function
    return ToolSpec(name=f.name, description=f.description, parameters=f.parameters)


def _tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            raise invalid("tool_choice", f"expected one of {', '.join(_TOOL_CHOICES)} "
                           f"or an object, got {choice!r}.")
    elif choice is not None:
        kind = choice.get("type")
        if not isinstance(kind, str):
            raise InvalidRequest("Invalid type for 'tool_choice.type': expected a string.",
                                 "tool_choice.type", "invalid_type")
        function = choice.get("function")
        if kind == "function" and not (isinstance(function, dict)
                                       and isinstance(function.get("name"), str)
                                       and function["name"]):
            raise invalid("tool_choice.function.name", "expected a non-empty string.")
    return choice


def _check_named_choice(choice: str | dict[str, Any] | None,
                        tools: tuple[ToolSpec, ...]) -> None:
    """A named ``tool_choice`` must name one of ``tools`` (as OpenAI requires): otherwise the
    forced call could never be made."""
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return
    name = choice["function"]["name"]
    if name not in {t.name for t in tools}:
        raise invalid("tool_choice.function.name",
                       f"function {name!r} is not one of the request's 'tools'.")


def _response_format(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind not in _RESPONSE_FORMATS:
        raise invalid("response_format.type",
                       f"expected one of {', '.join(_RESPONSE_FORMATS)}, got {kind!r}.")
    if kind == "json_schema" and not isinstance(fmt.get("json_schema"), dict):
        raise InvalidRequest("Missing required parameter: 'response_format.json_schema'.",
                             "response_format.json_schema", "missing_required_parameter")
    return fmt
