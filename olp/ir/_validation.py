"""What every wire codec shares: the 400 it raises for a bad body, and the checks it runs.

:class:`InvalidRequest` carries an OpenAI-style ``param`` and ``code``; a dialect's HTTP edge
turns it into its own error shape.
"""

from __future__ import annotations

import re
from typing import Final, TypeVar

import msgspec

from ._request import ImagePart, Message

_T = TypeVar("_T")

MISSING: Final = "Object missing required field `"
INT32_MAX: Final = 2**31 - 1
SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: OpenAI's rule for a function name (Anthropic's is the same, up to 128 characters). It also
#: keeps a name safe where a CLI needs it on argv (claude's ``--allowedTools
#: mcp__olp__<name>,...``: no comma, space or wildcard).
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class InvalidRequest(Exception):
    """A request body OpenAI would answer with 400 ``invalid_request_error``.

    ``param`` names the offending field OpenAI-style (``messages[1].content``), or is ``None``;
    ``code`` is OpenAI's machine-readable ``code`` (``"invalid_type"``, ...) or ``None``.
    """

    type: Final = "invalid_request_error"

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


def from_validation_error(text: str) -> InvalidRequest:
    """Turn msgspec's ``Expected `int`, got `str` - at `$.a[1].b``` into an OpenAI-style error."""
    detail, sep, path = text.partition(" - at `")
    param = (path.rstrip("`").removeprefix("$").removeprefix(".") or None) if sep else None
    if detail.startswith(MISSING):
        field = detail.removeprefix(MISSING).rstrip("`")
        param = f"{param}.{field}" if param else field
        return InvalidRequest(f"Missing required parameter: '{param}'.", param,
                              "missing_required_parameter")
    detail = detail[:1].lower() + detail[1:]
    if param is None:
        return InvalidRequest(f"Invalid request body: {detail}.", None, "invalid_type")
    if detail.startswith("expected"):
        return InvalidRequest(f"Invalid type for '{param}': {detail}.", param, "invalid_type")
    return InvalidRequest(f"Invalid value for '{param}': {detail}.", param, "invalid_value")


def decode_body(decoder: msgspec.json.Decoder[_T], body: bytes) -> _T:
    """``body`` decoded into a dialect's wire schema; a bad body is :class:`InvalidRequest`
    (a wrong type names its path; bad JSON and too deep nesting say so)."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as e:
        raise from_validation_error(str(e)) from None
    except msgspec.DecodeError as e:
        raise InvalidRequest(f"Invalid JSON body: {e}.") from None
    except RecursionError:
        raise InvalidRequest("Invalid JSON body: nested too deeply.") from None


def invalid(param: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for '{param}': {why}", param, "invalid_value")


#: The longest model name taken (real ids are under 100 characters): a longer one is a 400,
#: so no error message, header, log line or audit row ever carries megabytes of it.
MAX_MODEL_CHARS = 256


def check_model(model: str) -> None:
    if not model:
        raise invalid("model", "must be a non-empty string.")
    if len(model) > MAX_MODEL_CHARS:
        raise invalid("model", f"longer than {MAX_MODEL_CHARS} characters.")


#: The most characters of a client's conversation name or response id.
MAX_ID_CHARS = 512


def check_id(param: str, value: str | None) -> str | None:
    """A client's conversation name or response id: non-empty, at most
    :data:`MAX_ID_CHARS` characters."""
    if value is not None and not 0 < len(value) <= MAX_ID_CHARS:
        raise invalid(param, f"expected a string of 1 to {MAX_ID_CHARS} characters.")
    return value


def check_range(param: str, value: float | None, lo: float, hi: float) -> None:
    if value is not None and not lo <= value <= hi:
        raise invalid(param, f"expected a number between {lo:g} and {hi:g}, got {value!r}.")


def check_int(param: str, value: int | None, lo: int, hi: int) -> None:
    if value is not None and not lo <= value <= hi:
        shown = value if abs(value) < 10**30 else "a huge number"
        raise invalid(param, f"expected an integer between {lo} and {hi}, got {shown}.")


def require_prompt(messages: tuple[Message, ...]) -> None:
    """Refuse a conversation with nothing to answer: every user, assistant and tool message
    is empty or whitespace (system and developer messages alone are not a prompt). An image
    part, an assistant's tool calls or a tool result count as something to answer; so does
    any turn with text, since the CLIs then get a transcript (see ``olp/providers/_prompt.py``).
    """
    turns = [(i, m) for i, m in enumerate(messages) if m.role not in SYSTEM_ROLES]
    if any(m.role == "tool" or m.tool_calls or m.text().strip()
           or any(isinstance(p, ImagePart) for p in m.content) for _, m in turns):
        return
    param = f"messages[{turns[0][0]}].content" if len(turns) == 1 else "messages"
    what = ("only system or developer messages" if not turns
            else "no text" if len(turns) == 1 else "no message with text")
    raise InvalidRequest(f"Invalid value for '{param}': the conversation has {what}; send a "
                         "user message with non-blank content.", param, "invalid_value")
