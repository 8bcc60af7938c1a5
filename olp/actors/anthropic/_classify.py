"""Failure classification for claude's error output (``result`` + synthetic ``assistant``).

The inputs are what claude prints on stdout when it gives up: the ``result`` line's text,
``api_error_status``, ``api_error_type`` and ``api_error``, and the synthetic ``assistant``
message's ``error`` (``rate_limit``, ``authentication_failed``, ``server_error``, ...).
Rules, first match wins (see ``cli-reference/claude/README.md`` and BRIEF §4):

1. "Not logged in" → ``auth`` / ``AUTH_MISSING``.
2. Strong billing phrases ("credit balance is too low", "insufficient credit", ...), HTTP 402
   or ``billing_error`` → ``billing`` / ``BILLING``.
3. Subscription usage-window phrases ("usage limit", "5-hour limit", "limit will reset",
   "resets at 3pm", ...) → ``usage_window`` / ``USAGE_WINDOW`` with a best-effort
   ``retry_after_s`` (:func:`parse_reset`).
4. Weak billing phrases ("billing", "payment required") → ``billing``.
5. 401/403, ``authentication_error``/``permission_error``, ``authentication_failed``, "invalid
   api key" → ``auth`` / ``UPSTREAM_AUTH``.
6. 429, ``rate_limit_error``, ``rate_limit`` → ``rate_limited`` / ``RATE_LIMITED``.
7. Context-window phrasing ("prompt is too long", "context length", "too many tokens", ...)
   → ``context_length`` / ``CONTEXT_LENGTH``.
8. ``connection_failed`` → ``CONNECTION_FAILED``; "timed out" → ``UPSTREAM_TIMEOUT``; 529 or
   overloaded → ``OVERLOADED``; 5xx or ``api_error`` → ``UPSTREAM_5XX``; a bare
   ``server_error`` → ``UPSTREAM_UNAVAILABLE`` (all ``unavailable``).
9. 400/404/413/422, ``invalid_request_error`` and friends, ``invalid_request``, content-policy
   phrasing → ``client_error`` / ``UPSTREAM_CLIENT_ERROR``.
10. Anything else → ``unknown`` / ``UPSTREAM_ERROR``.

The usage-window and billing phrasings are vendor prose and do not occur in the API-key
captures; they are best-effort (an unclassified error still advances the chain).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

from olp.failures import Code
from olp.ir import Category, Error

MESSAGE_LIMIT: Final = 300

_STRONG_BILLING: Final = (
    "credit balance is too low", "insufficient credit", "insufficient_quota",
    "out of credits", "exceeded your current quota", "purchase credits",
)
_WEAK_BILLING: Final = ("billing", "payment required")
_USAGE_WINDOW: Final = (
    "usage limit", "5-hour limit", "five-hour limit", "5 hour limit", "weekly limit",
    "hit your limit", "limit will reset", "resets at", "claude ai usage limit",
)
_RESETS_WITH_LIMIT: Final = re.compile(r"\bresets?\b")
_CONTEXT: Final = (
    "prompt is too long", "context length", "context window", "too many tokens",
    "maximum context", "input is too long", "exceeds the context",
)
_POLICY: Final = ("content policy", "usage policy", "content filtering")
_AUTH_TEXT: Final = ("invalid api key", "oauth token has expired", "token has been revoked")
_CLIENT_TYPES: Final = frozenset({
    "invalid_request_error", "not_found_error", "request_too_large",
    "unprocessable_entity_error",
})


@dataclass(frozen=True, slots=True)
class Failure:
    """What claude said about a failure. Every field may be missing (``None``/``""``)."""

    text: str = ""
    status: int | None = None
    error_type: str | None = None  # result.api_error_type, e.g. "rate_limit_error"
    api_error: str | None = None  # result.api_error, e.g. "connection_failed"
    assistant_error: str | None = None  # assistant.error, e.g. "authentication_failed"


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` stripped, at most ``limit`` characters (an ellipsis marks a cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure claude reported (rules in the docstring).

    ``now`` (epoch seconds, default the current time) anchors a parsed usage-window reset.
    """
    t = failure.text.lower()
    status, etype = failure.status, failure.error_type or ""
    aerr, apierr = failure.assistant_error or "", failure.api_error or ""

    def err(code: str, category: Category, retry_after_s: float | None = None) -> Error:
        message = cut(failure.text) or f"claude reported an API error ({code})"
        return Error(code=code, category=category, message=message, status=status,
                     retry_after_s=retry_after_s)

    if "not logged in" in t:
        return err(Code.AUTH_MISSING, "auth")
    if _has(t, _STRONG_BILLING) or status == 402 or aerr == "billing_error":
        return err(Code.BILLING, "billing")
    if _has(t, _USAGE_WINDOW) or ("limit" in t and _RESETS_WITH_LIMIT.search(t)):
        return err(Code.USAGE_WINDOW, "usage_window", parse_reset(failure.text, now=now))
    if _has(t, _WEAK_BILLING):
        return err(Code.BILLING, "billing")
    if (status in (401, 403) or etype in ("authentication_error", "permission_error")
            or aerr == "authentication_failed" or _has(t, _AUTH_TEXT)):
        return err(Code.UPSTREAM_AUTH, "auth")
    if status == 429 or etype == "rate_limit_error" or aerr == "rate_limit":
        return err(Code.RATE_LIMITED, "rate_limited")
    if _has(t, _CONTEXT):
        return err(Code.CONTEXT_LENGTH, "context_length")
    if apierr == "connection_failed":
        return err(Code.CONNECTION_FAILED, "unavailable")
    if "timed out" in t or "timeout" in apierr:
        return err(Code.UPSTREAM_TIMEOUT, "unavailable")
    if status == 529 or etype == "overloaded_error":
        return err(Code.OVERLOADED, "unavailable")
    if (status is not None and status >= 500) or etype == "api_error":
        return err(Code.UPSTREAM_5XX, "unavailable")
    if aerr == "server_error":
        return err(Code.UPSTREAM_UNAVAILABLE, "unavailable")
    if (status in (400, 404, 413, 422) or etype in _CLIENT_TYPES
            or aerr == "invalid_request" or _has(t, _POLICY)):
        return err(Code.UPSTREAM_CLIENT_ERROR, "client_error")
    return err(Code.UPSTREAM_ERROR, "unknown")


def retry_category(error: str | None, status: int | None) -> Category:
    """The category of a ``system/api_retry`` line: rate limit, server trouble, auth, unknown.

    Behind a gateway that omits ``x-should-retry: false``, claude retries a 401 too, with
    ``error: "authentication_failed"``: that storm is an ``auth`` problem, not an outage.
    """
    if error == "rate_limit" or status == 429:
        return "rate_limited"
    if error == "authentication_failed" or status in (401, 403):
        return "auth"
    if error in ("server_error", "overloaded") or (status is not None and status >= 500):
        return "unavailable"
    return "unknown"


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    return any(p in text for p in phrases)


_EPOCH: Final = re.compile(r"\|\s*(\d{10})(?!\d)")
_IN_DURATION: Final = re.compile(
    r"\b(?:in|after)\s+(\d+)\s*(hours?|hrs?|h|minutes?|mins?|m)\b"
    r"(?:\s*(?:and\s+)?(\d+)\s*(minutes?|mins?|m)\b)?",
    re.IGNORECASE,
)
_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                  "dec")
_RESET_AT: Final = re.compile(
    r"\bresets?\s+(?:at\s+|on\s+)?"
    r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?"
    r"\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>am|pm)?"
    r"(?:\s*\((?P<tz>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?",
    re.IGNORECASE,
)


def parse_reset(text: str, *, now: float | None = None) -> float | None:
    """Seconds until a usage window resets, parsed from claude's text; ``None`` if not found.

    Understood, in this order: an epoch after a bar (``"...limit reached|1767225600"``);
    ``"in N hours"`` / ``"in N minutes"`` / ``"in 2 hours 30 minutes"``; a clock time after
    "reset(s)" (``"resets at 3pm"``, ``"resets 3:30 pm (Europe/Paris)"``, ``"resets Oct 9,
    10am"``), taken in the named IANA zone (UTC when unknown or unavailable) or, with no zone,
    the machine's local zone, as the next such time after ``now``. A bare hour without am/pm
    or minutes is ignored. A reset in the past gives 0.
    """
    current = time.time() if now is None else now
    if m := _EPOCH.search(text):
        return max(0.0, float(m.group(1)) - current)
    if m := _IN_DURATION.search(text):
        seconds = _unit_seconds(int(m.group(1)), m.group(2))
        if m.group(3):
            seconds += _unit_seconds(int(m.group(3)), m.group(4))
        return float(seconds)
    if m := _RESET_AT.search(text):
        return _clock_reset(m, current)
    return None


def _unit_seconds(n: int, unit: str) -> int:
    return n * (3600 if unit.lower().startswith("h") else 60)


def _clock_reset(m: re.Match[str], now: float) -> float | None:
    hour, minute, ampm = int(m["hour"]), int(m["min"] or 0), (m["ampm"] or "").lower()
    if not ampm and m["min"] is None:
        return None
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = _zone(m["tz"])
    here = datetime.fromtimestamp(now, zone) if zone else datetime.fromtimestamp(now).astimezone()
    try:
        if m["mon"]:
            target = here.replace(month=_MONTHS.index(m["mon"].lower()[:3]) + 1,
                                  day=int(m["day"]), hour=hour, minute=minute, second=0,
                                  microsecond=0)
            if target < here:
                target = target.replace(year=target.year + 1)
        else:
            target = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if target <= here:
                target += timedelta(days=1)
    except ValueError:  # e.g. "Feb 30"
        return None
    return max(0.0, target.timestamp() - now)


def _zone(name: str | None) -> tzinfo | None:
    if name is None:
        return None
    if name.upper() in ("UTC", "GMT", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return UTC
