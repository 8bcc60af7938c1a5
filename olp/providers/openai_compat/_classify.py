"""Failure classification for OpenAI-compatible upstreams: status + ``error`` body → IR Error.

Inputs are the HTTP status (``None`` for an error event inside a 200 stream), the headers and
the error object in whichever dialect the upstream wrote it. The rules are the table
:data:`RULES`, first match wins ("in-stream" is an error event inside a 200 stream, which has
no status):

1. ``insufficient_quota``-style codes, HTTP 402, or billing phrasing on a 402/403/429 or an
   in-stream error → ``billing`` / ``BILLING`` (waiting cannot cure it; never retried).
2. A 429 (or in-stream error) speaking of a usage window (``usage_limit_reached``, "per
   day", "(RPD)", "daily limit", "limit will reset", ...) → ``usage_window`` /
   ``USAGE_WINDOW`` with the reset when one is given.
3. 403 with content-policy phrasing → ``client_error`` / ``CONTENT_POLICY`` (OpenRouter's
   moderation).
4. Other 401/403, or an in-stream auth error type → ``auth`` / ``UPSTREAM_AUTH``.
5. 429 or an in-stream rate-limit type → ``rate_limited`` / ``RATE_LIMITED`` with
   ``retry_after_s``.
6. 400/413/422 (or in-stream) with ``context_length_exceeded`` or context-window phrasing →
   ``context_length`` / ``CONTEXT_LENGTH``.
7. 400/422 (or in-stream) with ``content_filter`` / ``content_policy_violation`` or policy
   phrasing → ``client_error`` / ``CONTENT_POLICY``.
8. 408/504 → ``unavailable`` / ``UPSTREAM_TIMEOUT``.
9. Other 5xx → ``unavailable`` / ``UPSTREAM_5XX`` (with ``Retry-After`` when sent).
10. An in-stream server-side type → ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
11. 400/404/413/415/422 → ``client_error`` / ``UPSTREAM_CLIENT_ERROR`` (status kept).
12. Anything else → ``unknown`` / ``UPSTREAM_ERROR`` (an unclassifiable error advances).

``retry_after_s`` is read from the headers, then the body, then the message; messages are
the upstream's own, at most 300 characters, the API key masked. The dialects and the order of
the reset sources: ``docs/adr/0008-openai-compatible-provider.md``, "Classifying an upstream's
failure".
"""

from __future__ import annotations

import http
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from olp.failures import (
    Code,
    Rule,
    always,
    classify_by,
    epoch_delta,
    has_any,
    number,
    parse_retry_after,
)
from olp.failures import cut as cut
from olp.failures import parse_duration as parse_duration
from olp.ir import Error

__all__ = [
    "RULES", "UpstreamError", "classify", "classify_stream_error", "cut", "parse_duration",
    "parse_duration_in", "parse_error_body", "retry_after",
]

_BILLING_CODES: Final = frozenset({
    "insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
    "insufficient_credits", "insufficient_balance", "payment_required", "quota_exceeded",
})
_BILLING_TEXT: Final = (
    "insufficient_quota", "exceeded your current quota", "insufficient credit",
    "insufficient balance", "credit balance", "out of credits", "payment required",
    "check your plan and billing", "billing", "add more credits", "purchase credits",
)
_WINDOW_CODES: Final = frozenset({
    "usage_limit_reached", "usage_limit_exceeded", "daily_limit_exceeded",
})
_WINDOW_TEXT: Final = (
    "usage limit", "per day", "per-day", "(rpd)", "(tpd)", "daily limit", "daily quota",
    "weekly limit", "monthly limit", "5-hour", "five-hour", "limit will reset",
    "resets at", "quota will reset", "free-models-per-day",
)
_AUTH_TYPES: Final = frozenset({
    "authentication_error", "invalid_api_key", "permission_error", "unauthorized",
    "permission_denied", "invalid_authentication",
})
_RATE_TYPES: Final = frozenset({
    "rate_limit_exceeded", "rate_limit_error", "rate_limit", "requests", "tokens",
    "too_many_requests",
})
_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_TEXT: Final = (
    "context length", "context_length", "maximum context", "context window",
    "too many tokens", "prompt is too long", "input is too long", "exceeds the context",
    "maximum input length", "reduce the length of the messages",
)
_POLICY_CODES: Final = frozenset({
    "content_filter", "content_policy_violation", "content_policy", "moderation",
    "content_filtered", "safety",
})
_POLICY_TEXT: Final = (
    "content policy", "content management policy", "usage policies", "flagged",
    "moderation", "safety system",
)
_SERVER_TYPES: Final = frozenset({
    "server_error", "api_error", "overloaded_error", "service_unavailable", "internal_error",
    "internal_server_error", "overloaded", "timeout", "upstream_error", "bad_gateway",
})
_CLIENT_STATUSES: Final = frozenset({400, 404, 413, 415, 422})
_TRY_AGAIN: Final = re.compile(
    r"try again in\s+((?:\d+(?:\.\d+)?\s*(?:ms|hours?|h|minutes?|m|seconds?|s)\s*)+)",
    re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """What an upstream said about a failure; every field may be missing."""

    status: int | None = None
    message: str = ""
    type: str = ""
    code: str = ""
    body: Mapping[str, Any] | None = None  # the error object, for reset fields


def parse_error_body(status: int | None, body: bytes | str | Mapping[str, Any] | None,
                     ) -> UpstreamError:
    """The error object of a response body or stream event, however it was shaped."""
    data: Any = body
    if isinstance(body, (bytes, str)):
        try:
            data = msgspec.json.decode(body)
        except (msgspec.DecodeError, RecursionError):
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            text = "" if text.lstrip().startswith("<") else text  # an HTML error page
            return UpstreamError(status=status, message=text)
    if not isinstance(data, Mapping):
        return UpstreamError(status=status, message="" if data is None else str(data))
    error: Any = data.get("error", data)
    if isinstance(error, str):
        return UpstreamError(status=status, message=error,
                             type=_text(data.get("type")), code=_text(data.get("code")))
    if not isinstance(error, Mapping):
        error = data
    message = error.get("message", error.get("detail", ""))
    return UpstreamError(status=status, message=_text(message),
                         type=_text(error.get("type")), code=_text(error.get("code")),
                         body=error)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


@dataclass(frozen=True, slots=True)
class _Facts:
    """An :class:`UpstreamError` as the rules read it, with what anchors its reset."""

    error: UpstreamError
    status: int | None
    text: str  # message, type and code, lower-cased
    ids: frozenset[str]  # the type and code, lower-cased, without ""
    headers: Mapping[str, str]
    now: float

    @property
    def in_stream(self) -> bool:
        return self.status is None


def _reset(f: _Facts) -> float | None:
    return retry_after(f.headers, f.error, now=f.now)


def _header_reset(f: _Facts) -> float | None:  # a Retry-After on a 503 is honoured too
    return _header_retry_after(f.headers, f.error, f.now)


def _billing(f: _Facts) -> bool:
    return bool(f.ids & _BILLING_CODES) or f.status == 402 or (
        (f.in_stream or f.status in (403, 429)) and has_any(f.text, _BILLING_TEXT))


def _window(f: _Facts) -> bool:
    return (f.in_stream or f.status == 429) and bool(
        f.ids & _WINDOW_CODES or has_any(f.text, _WINDOW_TEXT))


def _policy(f: _Facts) -> bool:
    return bool(f.ids & _POLICY_CODES) or has_any(f.text, _POLICY_TEXT)


def _context(f: _Facts) -> bool:
    return (f.in_stream or f.status in (400, 413, 422)) and bool(
        f.ids & _CONTEXT_CODES or has_any(f.text, _CONTEXT_TEXT))


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.BILLING, "billing", _billing),
    Rule(Code.USAGE_WINDOW, "usage_window", _window, retry_after=_reset),
    Rule(Code.CONTENT_POLICY, "client_error", lambda f: f.status == 403 and _policy(f)),
    Rule(Code.UPSTREAM_AUTH, "auth",
         lambda f: f.status in (401, 403) or (f.in_stream and bool(f.ids & _AUTH_TYPES))),
    Rule(Code.RATE_LIMITED, "rate_limited",
         lambda f: f.status == 429 or (f.in_stream and bool(f.ids & _RATE_TYPES)),
         retry_after=_reset),
    Rule(Code.CONTEXT_LENGTH, "context_length", _context),
    Rule(Code.CONTENT_POLICY, "client_error",
         lambda f: (f.in_stream or f.status in (400, 422)) and _policy(f)),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable", lambda f: f.status in (408, 504)),
    Rule(Code.UPSTREAM_5XX, "unavailable", lambda f: f.status is not None and f.status >= 500,
         retry_after=_header_reset),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable",
         lambda f: f.in_stream and bool(f.ids & _SERVER_TYPES)),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", lambda f: f.status in _CLIENT_STATUSES),
)
"""The rules 1-11 of the module docstring, in order; rule 12 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def classify(error: UpstreamError, *, headers: Mapping[str, str] | None = None,
             now: float, secret: str | None = None) -> Error:
    """The terminal :class:`Error` for an upstream failure (rules in the module docstring).

    ``headers`` must be case-insensitive (``httpx.Headers``) or lower-cased; ``now`` is the
    epoch time that anchors HTTP-date and epoch resets.
    """
    status = error.status
    facts = _Facts(error=error, status=status,
                   text=f"{error.message} {error.type} {error.code}".lower(),
                   ids=frozenset({error.type.lower(), error.code.lower()} - {""}),
                   headers=headers or {}, now=now)
    message = error.message.replace(secret, "***") if secret else error.message
    return classify_by(RULES, facts, default=_OTHERWISE, message=message,
                       fallback=lambda code: _default_message(status, code), status=status)


def classify_stream_error(payload: Mapping[str, Any] | str, *, now: float,
                          secret: str | None = None) -> Error:
    """An error event inside a 200 stream. A numeric ``code`` that is an HTTP status (as
    OpenRouter sends) is classified as that status."""
    parsed = parse_error_body(None, payload if isinstance(payload, str)
                              else dict(payload))
    status: int | None = None
    if parsed.code.isdigit() and 400 <= int(parsed.code) <= 599:
        status = int(parsed.code)
    if status is not None:
        parsed = UpstreamError(status=status, message=parsed.message, type=parsed.type,
                               code="", body=parsed.body)
    return classify(parsed, now=now, secret=secret)


def _default_message(status: int | None, code: str) -> str:
    if status is None:
        return f"the upstream reported an error in the stream ({code})"
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    return f"the upstream answered HTTP {status} {phrase}"


# --- when may we try again ---


def retry_after(headers: Mapping[str, str], error: UpstreamError, *, now: float
                ) -> float | None:
    """Seconds until the upstream expects to accept requests again, or ``None``."""
    for parse in (_header_retry_after, _body_reset, _ratelimit_reset):
        value = parse(headers, error, now)
        if value is not None:
            return value
    return parse_duration_in(error.message)


def _header_retry_after(headers: Mapping[str, str], error: UpstreamError, now: float
                        ) -> float | None:
    ms = number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    return parse_retry_after(headers.get("retry-after"), now)


def _body_reset(headers: Mapping[str, str], error: UpstreamError, now: float) -> float | None:
    body = error.body or {}
    for key in ("resets_in_seconds", "retry_after", "retry_after_seconds"):
        value = number(body.get(key))
        if value is not None:
            return value
    at = number(body.get("resets_at"))
    if at is not None:
        return epoch_delta(at, now)
    return None


def _ratelimit_reset(headers: Mapping[str, str], error: UpstreamError, now: float
                     ) -> float | None:
    durations = [d for key in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
                 if (raw := headers.get(key)) is not None
                 and (d := parse_duration(raw)) is not None]
    if durations:
        return max(durations)
    value = number(headers.get("x-ratelimit-reset"))
    return None if value is None else epoch_delta(value, now)


def parse_duration_in(message: str) -> float | None:
    """The delay in a message's "try again in 7m12s" / "try again in 20 seconds"."""
    m = _TRY_AGAIN.search(message)
    return None if m is None else parse_duration(m.group(1).replace(" ", ""))
