"""Failure classification for codex's free-text errors (``error`` / ``turn.failed`` lines).

codex reports every failure as one message string, with no status or type field. The rules
are the table :data:`RULES`, first match wins:

1. Missing credentials ("missing environment variable", "not logged in", ...) → ``auth`` /
   ``AUTH_MISSING``.
2. A usage window ("hit your usage limit", ``usage_limit_reached``, ...) → ``usage_window`` /
   ``USAGE_WINDOW`` with the reset (before billing: that message also says "purchase more
   credits").
3. Billing phrasing ("quota exceeded", "upgrade to plus", ...) or status 402 → ``billing`` /
   ``BILLING``.
4. Status 401 or auth phrasing ("unauthorized", "incorrect api key", "refresh token", ...) →
   ``auth`` / ``UPSTREAM_AUTH``.
5. Status 429 or "too many requests" / "rate limit" → ``rate_limited`` / ``RATE_LIMITED`` with
   the reset when one is given.
6. Context-window phrasing → ``context_length`` / ``CONTEXT_LENGTH``.
7. Connection phrasing ("connection failed", "error sending request", ...) → ``unavailable`` /
   ``CONNECTION_FAILED``.
8. Timeout phrasing ("stream disconnected", "idle timeout", ...) or status 408/504 →
   ``unavailable`` / ``UPSTREAM_TIMEOUT``.
9. Status 503/529, "overloaded" or "service unavailable" → ``unavailable`` / ``OVERLOADED``.
10. Other 5xx or server phrasing ("high demand", "internal server error", ...) →
    ``unavailable`` / ``UPSTREAM_5XX``.
11. Other 4xx or client phrasing ("bad request", "does not exist or you do not have access",
    "forbidden", ...) → ``client_error`` / ``UPSTREAM_CLIENT_ERROR``.
12. Anything else → ``unknown`` / ``UPSTREAM_ERROR``.

A reset is parsed from codex's "try again at <local time>" / "try again in <duration>"
(:func:`parse_reset`). The captured message behind each rule:
``tests/fixtures/cli-reference/codex/README.md``, "How OLP classifies failures".
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, Final

from olp.failures import (
    MONTH_PATTERN,
    Code,
    Rule,
    always,
    classify_by,
    clock_reset,
    first_match,
    has_any,
    sum_durations,
)
from olp.ir import Category, Error

_AUTH_MISSING: Final = (
    "missing environment variable", "not logged in", "codex login", "no credentials",
    "please log in", "please sign in",
)
_USAGE_WINDOW: Final = (
    "hit your usage limit", "usage limit has been reached", "usage limit reached",
    "usage_limit_reached",
)
_BILLING: Final = (
    "quota exceeded", "insufficient_quota", "exceeded your current quota", "payment required",
    "billing", "upgrade to plus", "upgrade to pro", "usage_not_included", "purchase credits",
    "out of credits",
)
_AUTH: Final = (
    "unauthorized", "incorrect api key", "invalid api key", "invalid_api_key",
    "refresh token", "token has expired", "token expired", "sign in again", "log in again",
    "authentication",
)
_RATE: Final = ("too many requests", "rate limit", "rate_limit")
_CONTEXT: Final = (
    "context window", "context length", "context_length_exceeded", "maximum context",
    "too many tokens", "input exceeds", "prompt is too long",
)
_CONNECTION: Final = (
    "connection failed", "error sending request", "connection refused", "connection reset",
    "waiting for network", "failed to lookup address", "dns error",
)
_TIMEOUT: Final = ("stream disconnected", "idle timeout", "timed out", "timeout")
_OVERLOADED: Final = ("overloaded", "service unavailable")
_SERVER: Final = ("high demand", "internal server error", "server_error", "server error",
                  "bad gateway", "gateway timeout")
_CLIENT: Final = (
    "invalid_request_error", "bad request", "does not exist or you do not have access",
    "not found", "unprocessable", "content policy", "usage policy", "invalid_prompt",
    "flagged", "not supported", "forbidden",
)
_STATUS: Final = re.compile(r"\bstatus:?\s+(\d{3})\b", re.IGNORECASE)
_URL: Final = re.compile(r",?\s*url:\s*\S+?(?=,\s|\)?$|\s)")


@dataclass(frozen=True, slots=True)
class Failure:
    """The facts read from one codex error message."""

    text: str  # for matching: lower-cased, with an embedded error body's fields appended
    message: str  # for people: the message, URL removed, an error body's message preferred
    status: int | None


def read_failure(message: str) -> Failure:
    """Pull the status and, when codex printed an OpenAI error body, its fields out of
    ``message``; the upstream URL (``, url: http://...``) is dropped from what is shown."""
    shown = " ".join(_URL.sub("", message).split())
    extra: list[str] = []
    body = _error_body(message)
    if body is not None:
        for key in ("type", "code", "param"):
            if isinstance(body.get(key), str):
                extra.append(body[key])
        if isinstance(body.get("message"), str) and body["message"].strip():
            shown = " ".join(body["message"].split())
    m = _STATUS.search(message)
    status = int(m.group(1)) if m else None
    return Failure(text=" ".join([message, *extra]).lower(), message=shown, status=status)


def _error_body(message: str) -> dict[str, Any] | None:
    """The ``error`` object (or ``{"message": detail}``) of a JSON error body in ``message``."""
    start = message.find("{")
    if start < 0:
        return None
    try:
        decoded, _ = json.JSONDecoder().raw_decode(message[start:])
    except ValueError:
        return None
    if not isinstance(decoded, dict):
        return None
    error = decoded.get("error")
    if isinstance(error, dict):
        return error
    if isinstance(decoded.get("detail"), str):
        return {"message": decoded["detail"]}
    return None


@dataclass(frozen=True, slots=True)
class _Facts:
    """A :class:`Failure` as the rules read it, with what anchors a parsed reset."""

    text: str
    message: str
    status: int | None
    now: float | None = None
    tz: tzinfo | None = None


def _reset(f: _Facts) -> float | None:
    return parse_reset(f.message, now=f.now, tz=f.tz)


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.AUTH_MISSING, "auth", lambda f: has_any(f.text, _AUTH_MISSING)),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: has_any(f.text, _USAGE_WINDOW),
         retry_after=_reset),
    Rule(Code.BILLING, "billing", lambda f: has_any(f.text, _BILLING) or f.status == 402),
    Rule(Code.UPSTREAM_AUTH, "auth", lambda f: f.status == 401 or has_any(f.text, _AUTH)),
    Rule(Code.RATE_LIMITED, "rate_limited", lambda f: f.status == 429 or has_any(f.text, _RATE),
         retry_after=_reset),
    Rule(Code.CONTEXT_LENGTH, "context_length", lambda f: has_any(f.text, _CONTEXT)),
    Rule(Code.CONNECTION_FAILED, "unavailable", lambda f: has_any(f.text, _CONNECTION)),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable",
         lambda f: has_any(f.text, _TIMEOUT) or f.status in (408, 504)),
    Rule(Code.OVERLOADED, "unavailable",
         lambda f: f.status in (503, 529) or has_any(f.text, _OVERLOADED)),
    Rule(Code.UPSTREAM_5XX, "unavailable",
         lambda f: (f.status is not None and f.status >= 500) or has_any(f.text, _SERVER)),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error",
         lambda f: (f.status is not None and 400 <= f.status < 500) or has_any(f.text, _CLIENT)),
)
"""codex's rules 1-11 of the module docstring, in order; rule 12 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def category_of(failure: Failure) -> tuple[str, Category]:
    """The (code, category) of a failure (rules in the module docstring)."""
    rule = first_match(RULES, _Facts(failure.text, failure.message, failure.status),
                       default=_OTHERWISE)
    return rule.code, rule.category


def classify(message: str, *, now: float | None = None, tz: tzinfo | None = None) -> Error:
    """The terminal :class:`Error` for a failure message codex printed.

    ``now`` (epoch seconds, default the current time) and ``tz`` (default the machine's local
    zone, which is codex's too: the proxy passes ``TZ`` through) anchor a parsed reset.
    """
    failure = read_failure(message)
    facts = _Facts(failure.text, failure.message, failure.status, now=now, tz=tz)
    return classify_by(RULES, facts, default=_OTHERWISE, message=failure.message,
                       fallback=lambda code: f"codex reported an error ({code})",
                       status=failure.status)


# --- "Reconnecting... n/N (cause)" ------------------------------------------------------------

_RECONNECT: Final = re.compile(
    r"^\s*Reconnecting(?:\.\.\.|…)\s*(?:(?P<n>\d+)\s*/\s*(?P<of>\d+))?\s*(?P<rest>.*)$",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Reconnect:
    """One ``Reconnecting... n/N (cause)`` line. ``attempt``/``max_retries`` are ``None`` for
    ``Reconnecting... waiting for network (cause)``."""

    attempt: int | None
    max_retries: int | None
    cause: str
    category: Category
    status: int | None


def parse_reconnect(message: str) -> Reconnect | None:
    """The retry an ``error`` line announces, or ``None`` when it is not a retry line."""
    m = _RECONNECT.match(message)
    if m is None:
        return None
    rest = m["rest"].strip()
    cause = rest[rest.index("(") + 1:].removesuffix(")") if "(" in rest else rest
    failure = read_failure(rest)  # "waiting for network (...)" counts as well as the cause
    _, category = category_of(failure)
    return Reconnect(attempt=int(m["n"]) if m["n"] else None,
                     max_retries=int(m["of"]) if m["of"] else None,
                     cause=cause, category=category, status=failure.status)


# --- "try again at 8:01 AM" / "try again in 2 hours" ------------------------------------------

_AGAIN_AT: Final = re.compile(
    r"\btry again at\s+"
    rf"(?:(?P<mon>{MONTH_PATTERN})[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?"
    r"(?P<hour>\d{1,2}):(?P<min>\d{2})\s*(?P<ampm>am|pm)?",
    re.IGNORECASE,
)
_IN: Final = re.compile(r"\b(?:try again|resets?)\s+in\s+(?P<spec>[0-9][0-9a-z .,]*)",
                        re.IGNORECASE)


def parse_reset(text: str, *, now: float | None = None, tz: tzinfo | None = None,
                ) -> float | None:
    """Seconds until the limit resets, from codex's text; ``None`` when it gives none
    ("try again later").

    Understood: ``try again at 8:01 AM`` (the next such local time after ``now``), ``try again
    at Dec 2nd, 2026 2:34 PM`` (that local date and time), and durations ``try again in 20s``
    / ``in 2 hours 5 minutes`` / ``resets in 1d 3h``. Local means ``tz`` (default: the
    machine's zone). A reset in the past gives 0.
    """
    current = time.time() if now is None else now
    if m := _AGAIN_AT.search(text):
        return clock_reset(m, current, tz)
    if m := _IN.search(text):
        return sum_durations(m["spec"])
    return None
