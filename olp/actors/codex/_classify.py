"""Failure classification for codex's free-text errors (``error`` / ``turn.failed`` lines).

codex 0.171.0 reports every failure as one message string, no status or type field (see
``cli-reference/codex/README.md``). The texts below were all produced by the real CLI against
the loopback mock (the transcripts, plus ``tests/realcli``):

==========================================================  =================================
message (abridged)                                          → category / code
==========================================================  =================================
``Missing environment variable: `KEY`.``                    auth / ``AUTH_MISSING``
``You’ve hit your usage limit. ... try again at 8:01 AM.``   usage_window / ``USAGE_WINDOW``
``Quota exceeded. Check your plan and billing details.``    billing / ``BILLING``
``To use Codex with your ChatGPT plan, upgrade to Plus``    billing / ``BILLING``
``unexpected status 402 Payment Required: ...``             billing / ``BILLING``
``unexpected status 401 Unauthorized: Incorrect API key``   auth / ``UPSTREAM_AUTH``
``exceeded retry limit, last status: 429 Too Many ...``     rate_limited / ``RATE_LIMITED``
``Codex ran out of room in the model's context window``     context_length / ``CONTEXT_LENGTH``
``stream disconnected before completion: idle timeout``     unavailable / ``UPSTREAM_TIMEOUT``
``Connection failed: error sending request``                unavailable / ``CONNECTION_FAILED``
``unexpected status 503 ...: The engine is ... overloaded`` unavailable / ``OVERLOADED``
``We’re currently experiencing high demand`` (a 500)        unavailable / ``UPSTREAM_5XX``
``unexpected status 403 Forbidden: ...``, ``{"error":       client_error /
{... "invalid_request_error" ...}}``, ``The model `x` does  ``UPSTREAM_CLIENT_ERROR``
not exist or you do not have access to it.``
anything else                                               unknown / ``UPSTREAM_ERROR``
==========================================================  =================================

Rules, first match wins: missing credentials; usage window (before billing: that message
also says "purchase more credits"); billing; auth; rate limit; context window; connection,
timeout, overload, 5xx; client errors; unknown. A usage window's reset is parsed from codex's
"try again at <local time>" / "try again in <duration>" (:func:`parse_reset`). Phrasings not
in the captures (e.g. an expired ChatGPT login) are best-effort: an unclassified error still
advances the chain.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any, Final

from olp.failures import Code
from olp.ir import Category, Error

MESSAGE_LIMIT: Final = 300

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


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` stripped, at most ``limit`` characters (an ellipsis marks a cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def category_of(failure: Failure) -> tuple[str, Category]:
    """The (code, category) of a failure (rules in the module docstring)."""
    t, status = failure.text, failure.status
    if _has(t, _AUTH_MISSING):
        return Code.AUTH_MISSING, "auth"
    if _has(t, _USAGE_WINDOW):
        return Code.USAGE_WINDOW, "usage_window"
    if _has(t, _BILLING) or status == 402:
        return Code.BILLING, "billing"
    if status == 401 or _has(t, _AUTH):
        return Code.UPSTREAM_AUTH, "auth"
    if status == 429 or _has(t, _RATE):
        return Code.RATE_LIMITED, "rate_limited"
    if _has(t, _CONTEXT):
        return Code.CONTEXT_LENGTH, "context_length"
    if _has(t, _CONNECTION):
        return Code.CONNECTION_FAILED, "unavailable"
    if _has(t, _TIMEOUT) or status in (408, 504):
        return Code.UPSTREAM_TIMEOUT, "unavailable"
    if status in (503, 529) or _has(t, _OVERLOADED):
        return Code.OVERLOADED, "unavailable"
    if (status is not None and status >= 500) or _has(t, _SERVER):
        return Code.UPSTREAM_5XX, "unavailable"
    if (status is not None and 400 <= status < 500) or _has(t, _CLIENT):
        return Code.UPSTREAM_CLIENT_ERROR, "client_error"
    return Code.UPSTREAM_ERROR, "unknown"


def classify(message: str, *, now: float | None = None, tz: tzinfo | None = None) -> Error:
    """The terminal :class:`Error` for a failure message codex printed.

    ``now`` (epoch seconds, default the current time) and ``tz`` (default the machine's local
    zone, which is codex's too: the proxy passes ``TZ`` through) anchor a parsed reset.
    """
    failure = read_failure(message)
    code, category = category_of(failure)
    retry_after = None
    if category in ("usage_window", "rate_limited"):
        retry_after = parse_reset(failure.message, now=now, tz=tz)
    shown = cut(failure.message) or f"codex reported an error ({code})"
    return Error(code=code, category=category, message=shown, status=failure.status,
                 retry_after_s=retry_after)


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    return any(p in text for p in phrases)


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

_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                  "dec")
_AGAIN_AT: Final = re.compile(
    r"\btry again at\s+"
    r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?"
    r"(?P<hour>\d{1,2}):(?P<min>\d{2})\s*(?P<ampm>am|pm)?",
    re.IGNORECASE,
)
_IN: Final = re.compile(r"\b(?:try again|resets?)\s+in\s+(?P<spec>[0-9][0-9a-z .,]*)",
                        re.IGNORECASE)
_AMOUNT: Final = re.compile(
    r"(\d+(?:\.\d+)?)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s|ms)\b",
    re.IGNORECASE,
)
_UNIT_S: Final = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


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
        return _clock_reset(m, current, tz)
    if m := _IN.search(text):
        total = 0.0
        found = False
        for amount, unit in _AMOUNT.findall(m["spec"]):
            found = True
            unit = unit.lower()
            scale = 0.001 if unit == "ms" else _UNIT_S[unit[0]]
            total += float(amount) * scale
        return total if found else None
    return None


def _clock_reset(m: re.Match[str], now: float, tz: tzinfo | None) -> float | None:
    hour, minute, ampm = int(m["hour"]), int(m["min"]), (m["ampm"] or "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    here = datetime.fromtimestamp(now, tz) if tz else datetime.fromtimestamp(now).astimezone()
    try:
        if m["mon"]:
            year = int(m["year"]) if m["year"] else here.year
            target = here.replace(year=year, month=_MONTHS.index(m["mon"].lower()[:3]) + 1,
                                  day=int(m["day"]), hour=hour, minute=minute, second=0,
                                  microsecond=0)
            if not m["year"] and target < here:
                target = target.replace(year=target.year + 1)
        else:
            target = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if target <= here:
                target += timedelta(days=1)
    except ValueError:  # e.g. "Feb 30"
        return None
    return max(0.0, target.timestamp() - now)
