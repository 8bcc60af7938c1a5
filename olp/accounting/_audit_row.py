"""One row of the audit trail (:class:`AuditRow`) and how much of a request it keeps: every
text column is cut to a fixed length (:func:`bounded`, applied by :meth:`Recorder.record` to
every row, and again by :func:`audit_page` to rows an older OLP stored whole). The client
chooses the path and the model name, so without a bound one request could put megabytes in
the trail and in every dashboard poll (docs/adr/0021-bounded-audit.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from olp.store import TOKEN_PREFIX


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One request, as the audit trail keeps it: never prompt or answer text, never a
    secret. ``key`` is the key's id as text (``None``: no valid key was sent); ``action`` what
    a management request did and to what (``revoke_key bob``); ``suppressed``, on a summary
    row (outcome ``suppressed``), how many similar rows were dropped
    (:class:`~._throttle.AuditThrottle`); ``account``, which login of ``provider`` served
    the request or was tried first (issue #30; ``None``: no hop took it, or a row from
    before accounts)."""

    at: float
    request_id: str
    key: str | None
    key_name: str | None
    endpoint: str
    requested_model: str | None
    provider: str | None
    model: str | None
    entry: str | None
    hops: int
    status: int
    cache: str | None
    stream: bool
    latency_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    outcome: str
    action: str | None = None
    suppressed: int | None = None
    account: str | None = None


AUDIT_COLUMNS = tuple(f.name for f in fields(AuditRow))

#: The longest ``requested_model`` kept (the longest real model id is under 100 characters).
MAX_MODEL_CHARS: Final = 200
#: The longest ``endpoint`` kept: method and path (a real route is under 60 characters).
MAX_ENDPOINT_CHARS: Final = 300
#: The longest ``action`` kept: a management action and its target.
MAX_ACTION_CHARS: Final = 300
#: Every other text column (names and codes OLP chose; bounded all the same).
MAX_TEXT_CHARS: Final = 200
LIMITS: Final[Mapping[str, int]] = {"requested_model": MAX_MODEL_CHARS,
                                    "endpoint": MAX_ENDPOINT_CHARS, "action": MAX_ACTION_CHARS}
#: What stands in for a character that is not printable (a control character, an escape
#: sequence's ESC, a bidirectional override): the trail is read in terminals.
REPLACEMENT: Final = "\ufffd"


def clip(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters long: if longer, its head and a marker saying how
    many characters were cut (``sonnet-aaaa…[+4194120 chars]``); characters that are not
    printable become U+FFFD either way."""
    if len(text) <= limit:
        return _printable(text)
    keep = max(0, limit - len(f"…[+{len(text)} chars]"))  # the marker can only be shorter
    return f"{_printable(text[:keep])}…[+{len(text) - keep} chars]"


def _printable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else REPLACEMENT for c in text)


def bounded(row: AuditRow) -> AuditRow:
    """``row`` with every text column clipped to its limit (the same row if none was long)."""
    changes: dict[str, Any] = {}
    for name in AUDIT_COLUMNS:
        value = getattr(row, name)
        if isinstance(value, str):
            cut = clip(value, LIMITS.get(name, MAX_TEXT_CHARS))
            if cut is not value:
                changes[name] = cut
    return dataclasses.replace(row, **changes) if changes else row


def clip_columns(values: dict[str, Any]) -> dict[str, Any]:
    """A row read back from the database (column name to value), its text clipped as
    :func:`bounded` clips an :class:`AuditRow`'s."""
    for name, value in values.items():
        if isinstance(value, str):
            values[name] = clip(value, LIMITS.get(name, MAX_TEXT_CHARS))
    return values


def describe_action(name: str, target: str | None = None) -> str:
    """A management action as the trail's ``action`` column keeps it: ``revoke_key bob``,
    ``clear_cache 3``, ``reset_cooldowns``. A word that looks like an OLP key's token (a
    secret pasted where a name belongs) keeps only its first four characters after
    ``olp_`` (fewer than ``olp keys list`` shows of a key)."""
    words = [name] if not target else [name, target]
    return clip(" ".join(_no_token(w) for w in words), MAX_ACTION_CHARS)


def _no_token(word: str) -> str:
    if word.startswith(TOKEN_PREFIX) and len(word) > len(TOKEN_PREFIX) + 4:
        return word[:len(TOKEN_PREFIX) + 4] + "…"
    return word
