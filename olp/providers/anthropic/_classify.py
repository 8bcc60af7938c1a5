"""Failure classification for claude's error output (``result`` + synthetic ``assistant``).

The inputs are what claude prints on stdout when it gives up: the ``result`` line's text,
``api_error_status``, ``api_error_type`` and ``api_error``, and the synthetic ``assistant``
message's ``error``. The rules are the table :data:`RULES`, first match wins:

1. "Not logged in" → ``auth`` / ``AUTH_MISSING``.
2. Strong billing phrases ("credit balance is too low", "insufficient credit", ...), HTTP 402
   or ``billing_error`` → ``billing`` / ``BILLING``.
3. Subscription usage-window phrases ("usage limit", "5-hour limit", "limit will reset",
   "resets at 3pm", ...) → ``usage_window`` / ``USAGE_WINDOW`` with a best-effort
   ``retry_after_s`` (:func:`parse_reset`).
4. Weak billing phrases ("billing", "payment required") → ``billing`` / ``BILLING``.
5. 401/403, ``authentication_error``/``permission_error``, ``authentication_failed``, "invalid
   api key" → ``auth`` / ``UPSTREAM_AUTH``.
6. 429, ``rate_limit_error``, ``rate_limit`` → ``rate_limited`` / ``RATE_LIMITED``.
7. Context-window phrasing ("prompt is too long", "context length", "too many tokens", ...)
   → ``context_length`` / ``CONTEXT_LENGTH``.
8. ``connection_failed`` → ``unavailable`` / ``CONNECTION_FAILED``.
9. "timed out" (or an ``api_error`` naming a timeout) → ``unavailable`` / ``UPSTREAM_TIMEOUT``.
10. 529 or ``overloaded_error`` → ``unavailable`` / ``OVERLOADED``.
11. 5xx or ``api_error`` → ``unavailable`` / ``UPSTREAM_5XX``.
12. A bare ``server_error`` → ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
13. 400/404/413/422, ``invalid_request_error`` and friends, ``invalid_request``, content-policy
    phrasing → ``client_error`` / ``UPSTREAM_CLIENT_ERROR``.
14. Anything else → ``unknown`` / ``UPSTREAM_ERROR``.

The phrasing and the captures behind each rule: ``tests/fixtures/cli-reference/claude/
README.md``, "How OLP classifies failures" (and ``docs/adr/0004-errors-and-served-model.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from olp.failures import Code, Rule, always, classify_by, has_any, parse_reset
from olp.ir import Category, Error

__all__ = ["RULES", "Failure", "classify", "parse_reset", "retry_category"]

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
_AUTH_TYPES: Final = ("authentication_error", "permission_error")
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


@dataclass(frozen=True, slots=True)
class _Facts:
    """A :class:`Failure` as the rules read it: lower-cased text, ``""`` for a missing id."""

    text: str  # lower-cased
    raw: str  # as claude wrote it (for the reset time)
    status: int | None
    etype: str
    aerr: str
    apierr: str
    now: float | None


def _usage_window(f: _Facts) -> bool:
    return has_any(f.text, _USAGE_WINDOW) or (
        "limit" in f.text and _RESETS_WITH_LIMIT.search(f.text) is not None)


def _reset(f: _Facts) -> float | None:
    return parse_reset(f.raw, now=f.now)


def _server(f: _Facts) -> bool:
    return (f.status is not None and f.status >= 500) or f.etype == "api_error"


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.AUTH_MISSING, "auth", lambda f: "not logged in" in f.text),
    Rule(Code.BILLING, "billing", lambda f: has_any(f.text, _STRONG_BILLING)
         or f.status == 402 or f.aerr == "billing_error"),
    Rule(Code.USAGE_WINDOW, "usage_window", _usage_window, retry_after=_reset),
    Rule(Code.BILLING, "billing", lambda f: has_any(f.text, _WEAK_BILLING)),
    Rule(Code.UPSTREAM_AUTH, "auth", lambda f: f.status in (401, 403) or f.etype in _AUTH_TYPES
         or f.aerr == "authentication_failed" or has_any(f.text, _AUTH_TEXT)),
    Rule(Code.RATE_LIMITED, "rate_limited", lambda f: f.status == 429
         or f.etype == "rate_limit_error" or f.aerr == "rate_limit"),
    Rule(Code.CONTEXT_LENGTH, "context_length", lambda f: has_any(f.text, _CONTEXT)),
    Rule(Code.CONNECTION_FAILED, "unavailable", lambda f: f.apierr == "connection_failed"),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable",
         lambda f: "timed out" in f.text or "timeout" in f.apierr),
    Rule(Code.OVERLOADED, "unavailable",
         lambda f: f.status == 529 or f.etype == "overloaded_error"),
    Rule(Code.UPSTREAM_5XX, "unavailable", _server),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable", lambda f: f.aerr == "server_error"),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", lambda f: f.status in (400, 404, 413, 422)
         or f.etype in _CLIENT_TYPES or f.aerr == "invalid_request" or has_any(f.text, _POLICY)),
)
"""claude's rules 1-13 of the module docstring, in order; rule 14 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure claude reported (rules in the docstring).

    ``now`` (epoch seconds, default the current time) anchors a parsed usage-window reset.
    """
    facts = _Facts(text=failure.text.lower(), raw=failure.text, status=failure.status,
                   etype=failure.error_type or "", aerr=failure.assistant_error or "",
                   apierr=failure.api_error or "", now=now)
    return classify_by(RULES, facts, default=_OTHERWISE, message=failure.text,
                       fallback=lambda code: f"claude reported an API error ({code})",
                       status=failure.status)


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
