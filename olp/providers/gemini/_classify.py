"""Failure classification for gemini-cli: the ``result`` line's error, its exit code, stderr.

The status is read from the message (``"code":NNN`` in Google's JSON body), else from an exit
code of 144-255 (the HTTP status modulo 256). The rules are the table :data:`RULES`, first
match wins:

1. Exit 41, or the CLI's auth phrasing ("must specify the GEMINI_API_KEY", "Manual
   authorization is required", "Please set an Auth method", "Invalid auth method") →
   ``auth`` / ``AUTH_MISSING``.
2. HTTP 429 with a daily quota ("daily quota", a ``...PerDay...`` quota id) →
   ``usage_window`` / ``USAGE_WINDOW``; it resets at midnight Pacific time (Google's daily
   quotas; best-effort ``retry_after_s``).
3. Other 429s ("exceeded your current quota", ``RESOURCE_EXHAUSTED``) → ``rate_limited`` /
   ``RATE_LIMITED``, ``retry_after_s`` from ``Please retry in Ns`` (Google's ``RetryInfo``,
   which the CLI copies into the message).
4. ``API_KEY_INVALID``, "API key not valid", HTTP 401/403, ``UNAUTHENTICATED``,
   ``PERMISSION_DENIED`` → ``auth`` / ``UPSTREAM_AUTH``.
5. Context-window phrasing ("exceeds the maximum number of tokens", "input token count") →
   ``context_length`` / ``CONTEXT_LENGTH``.
6. HTTP 404 or "is not found for API version" → ``client_error`` /
   ``UPSTREAM_CLIENT_ERROR`` (404).
7. "Error importing session from file" (exit 42: gemini could not read the session file OLP
   wrote from the history, ``_history.py``) → ``unknown`` / ``CONFIG_ERROR``: OLP's fault,
   not the client's, and the same history fails the same way again, so the chain moves on
   (no retry on this hop, no circuit).
8. HTTP 400/413/422, exit 42 ("No input provided", ``FatalInputError``) → ``client_error`` /
   ``UPSTREAM_CLIENT_ERROR`` (the status, else 400).
9. HTTP 503/529 or "overloaded" → ``unavailable`` / ``OVERLOADED``.
10. Other 5xx → ``unavailable`` / ``UPSTREAM_5XX``.
11. Timeouts ("timed out", ``ETIMEDOUT``, undici's ``Headers Timeout``/``Body Timeout``) →
    ``unavailable`` / ``UPSTREAM_TIMEOUT``.
12. A connection that failed or broke ("[API Error: terminated]", "fetch failed", "other side
    closed", ``ECONNREFUSED``, ``ECONNRESET``, "socket hang up") → ``unavailable`` /
    ``CONNECTION_FAILED``.
13. "empty response" → ``unavailable`` / ``UPSTREAM_UNAVAILABLE`` (transient, per the CLI).
14. Exit 52/55 or configuration phrasing ("not running in a trusted directory", "Unknown
    arguments", "Invalid values", "Invalid policy rule") → ``auth`` / ``CONFIG_ERROR``.
15. Anything else → ``unknown`` / ``UPSTREAM_ERROR`` (advances the chain).


The error shapes and exit codes behind each rule:
``tests/fixtures/cli-reference/gemini/README.md``, "How OLP classifies failures"; rule 7:
``tests/fixtures/cli-reference/gemini/sessions/README.md``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from olp.failures import Code, Rule, always, classify_by, has_any, unit_seconds
from olp.ir import Error

__all__ = ["RULES", "Failure", "classify", "daily_reset", "retry_in", "status_of"]

_JSON_CODE: Final = re.compile(r'"code"\s*:\s*(\d{3})\b')
_RETRY_IN: Final = re.compile(r"retry (?:in|after) (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)
_AUTH_MISSING: Final = ("must specify the gemini_api_key", "manual authorization is required",
                        "please set an auth method", "invalid auth method",
                        "error authenticating")
_DAILY: Final = ("daily quota", "perday", "per day")
_RATE: Final = ("exceeded your current quota", "resource_exhausted",
                "resource has been exhausted")
_AUTH: Final = ("api_key_invalid", "api key not valid", "unauthenticated", "permission_denied")
_CONTEXT: Final = ("exceeds the maximum number of tokens", "input token count",
                   "context window", "too many tokens")
_NO_INPUT: Final = ("no input provided", "fatalinputerror",
                    "not supported in non-interactive mode")
_TIMEOUT: Final = ("timed out", "etimedout", "headers timeout", "body timeout",
                   "und_err_headers_timeout", "und_err_body_timeout")
_CONNECTION: Final = ("[api error: terminated]", "fetch failed", "other side closed",
                      "econnrefused", "econnreset", "socket hang up", "und_err_socket",
                      "enotfound", "eai_again")
#: gemini's words when it cannot load ``--session-file`` (missing, empty, not its format).
SESSION_FILE_REFUSED: Final = "error importing session from file"
_CONFIG: Final = ("not running in a trusted directory", "unknown arguments", "invalid values",
                  "invalid policy rule", "invalid configuration")
#: Google's daily quotas reset at midnight in this zone.
QUOTA_ZONE: Final = "America/Los_Angeles"


@dataclass(frozen=True, slots=True)
class Failure:
    """What gemini-cli said about a failure. Every field may be missing."""

    text: str = ""  # result.error.message, else an `error` line, else a stderr excerpt
    exit_code: int | None = None


def status_of(text: str, exit_code: int | None) -> int | None:
    """The upstream HTTP status: ``"code": NNN`` in Google's body, else the exit code when it
    is a status modulo 256 (144-255)."""
    m = _JSON_CODE.search(text)
    if m:
        return int(m.group(1))
    if exit_code is not None and 144 <= exit_code <= 255:
        return exit_code + 256
    return None


def retry_in(text: str) -> float | None:
    """Seconds from ``Please retry in 2s.`` / ``Suggested retry after 1.5s`` (or ``ms``)."""
    m = _RETRY_IN.search(text)
    return float(m.group(1)) * unit_seconds(m.group(2)) if m else None


def daily_reset(now: float) -> float:
    """Seconds from ``now`` (epoch) until the next midnight Pacific time."""
    zone = ZoneInfo(QUOTA_ZONE)
    local = datetime.fromtimestamp(now, zone)
    midnight = datetime(local.year, local.month, local.day, tzinfo=zone) + timedelta(days=1)
    return max(0.0, midnight.timestamp() - now)


@dataclass(frozen=True, slots=True)
class _Facts:
    text: str  # lower-cased
    raw: str
    exit_code: int | None
    status: int | None
    now: float


def _rate(f: _Facts) -> bool:
    return f.status == 429 or has_any(f.text, _RATE)


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.AUTH_MISSING, "auth", lambda f: f.exit_code == 41 or has_any(f.text, _AUTH_MISSING)),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: _rate(f) and has_any(f.text, _DAILY),
         retry_after=lambda f: daily_reset(f.now)),
    Rule(Code.RATE_LIMITED, "rate_limited", _rate, retry_after=lambda f: retry_in(f.raw)),
    Rule(Code.UPSTREAM_AUTH, "auth",
         lambda f: f.status in (401, 403) or has_any(f.text, _AUTH)),
    Rule(Code.CONTEXT_LENGTH, "context_length", lambda f: has_any(f.text, _CONTEXT)),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error",
         lambda f: f.status == 404 or "is not found for api version" in f.text,
         status=lambda f: 404),
    Rule(Code.CONFIG_ERROR, "unknown", lambda f: SESSION_FILE_REFUSED in f.text),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error",
         lambda f: f.status in (400, 413, 422) or f.exit_code == 42
         or has_any(f.text, _NO_INPUT),
         status=lambda f: f.status if f.status in (400, 413, 422) else 400),
    Rule(Code.OVERLOADED, "unavailable",
         lambda f: f.status in (503, 529) or "overloaded" in f.text),
    Rule(Code.UPSTREAM_5XX, "unavailable", lambda f: f.status is not None and f.status >= 500),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable", lambda f: has_any(f.text, _TIMEOUT)),
    Rule(Code.CONNECTION_FAILED, "unavailable", lambda f: has_any(f.text, _CONNECTION)),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable", lambda f: "empty response" in f.text),
    Rule(Code.CONFIG_ERROR, "auth",
         lambda f: f.exit_code in (52, 55) or has_any(f.text, _CONFIG)),
)
"""gemini-cli's rules 1-14 of the module docstring, in order; rule 15 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure gemini-cli reported (rules in the module
    docstring). ``now`` (epoch seconds, default the current time) anchors a daily reset."""
    status = status_of(failure.text, failure.exit_code)
    facts = _Facts(text=failure.text.lower(), raw=failure.text, exit_code=failure.exit_code,
                   status=status, now=time.time() if now is None else now)
    return classify_by(RULES, facts, default=_OTHERWISE, message=_message(failure.text),
                       fallback=lambda _: _fallback_message(failure), status=status)


def _message(text: str) -> str:
    """The message without the CLI's ``[API Error: ...]`` wrapper and its advice line."""
    text = text.split("\nPlease wait and try again later.", 1)[0].strip()
    if text.startswith("[API Error: ") and text.endswith("]"):
        text = text[len("[API Error: "):-1]
    return _google_message(text) or text


def _google_message(text: str) -> str | None:
    """``error.message`` (and ``error.status``) of Google's JSON error body, when ``text``
    is one."""
    if not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    status = error.get("status")
    return f"{error['message']} ({status})" if isinstance(status, str) else error["message"]


def _fallback_message(failure: Failure) -> str:
    if failure.exit_code is not None:
        return f"gemini failed (exit code {failure.exit_code})"
    return "gemini failed"
