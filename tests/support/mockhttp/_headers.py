"""The extra response headers a scenario option may ask for, checked."""

from __future__ import annotations

import re

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: what every mock sets itself when it frames a response
_FRAMING = frozenset({"content-type", "content-length", "transfer-encoding", "connection"})


def checked_headers(headers: object, *, option: str, own: frozenset[str]) -> dict[str, str]:
    """``headers`` (the scenario's ``option``) as a fresh dict with lower-case names, or
    ValueError: names must be tokens, values one-line strings, and no name one the mock sends
    itself (the framing headers, and ``own``)."""
    if not isinstance(headers, dict):
        raise ValueError(f"{option} must be an object of header name -> string value")
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{option}: {name!r} is not a header name")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"{option}[{name!r}] must be a one-line string")
        if name.lower() in _FRAMING or name.lower() in own:
            raise ValueError(f"{option}: {name!r} is set by the mock itself")
        checked[name.lower()] = value
    return checked
