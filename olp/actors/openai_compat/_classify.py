"""Failure classification for OpenAI-compatible upstreams: status + ``error`` body → IR Error.

Inputs are the HTTP status (``None`` for an error event inside a 200 stream), the headers and
the error object as the upstream wrote it: OpenAI's ``{"error": {"message", "type", "code",
"param"}}``, OpenRouter's numeric ``code`` and ``metadata``, vLLM's top-level ``{"object":
"error", "message", "type", "code"}``, a bare ``{"error": "text"}`` or a non-JSON body.
Rules, first match wins:

1. ``insufficient_quota``-style codes, HTTP 402, or billing phrasing on a 402/403/429 or an
   in-stream error → ``billing`` / ``BILLING`` (waiting cannot cure it; never retried).
2. A 429 (or in-stream error) speaking of a usage window (``usage_limit_reached``, "per
   day", "(RPD)", "daily limit", "limit will reset", ...) → ``usage_window`` /
   ``USAGE_WINDOW`` with the reset when one is given.
3. 403 with content-policy phrasing → ``client_error`` / ``CONTENT_POLICY`` (OpenRouter's
   moderation); other 401/403, or an auth error type → ``auth`` / ``UPSTREAM_AUTH``.
4. 429 or a rate-limit type → ``rate_limited`` / ``RATE_LIMITED`` with ``retry_after_s``.
5. 400/413/422 (or in-stream) with ``context_length_exceeded`` or context-window phrasing →
   ``context_length`` / ``CONTEXT_LENGTH``.
6. 400/422 (or in-stream) with ``content_filter`` / ``content_policy_violation`` or policy
   phrasing → ``client_error`` / ``CONTENT_POLICY``.
7. 408/504 → ``unavailable`` / ``UPSTREAM_TIMEOUT``; other 5xx → ``unavailable`` /
   ``UPSTREAM_5XX`` (with ``Retry-After`` when sent); an in-stream server-side type →
   ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
8. 400/404/413/415/422 → ``client_error`` / ``UPSTREAM_CLIENT_ERROR`` (status kept).
9. Anything else → ``unknown`` / ``UPSTREAM_ERROR`` (an unclassifiable error advances).

``retry_after_s`` comes from, in order: ``retry-after-ms``, ``Retry-After`` (seconds or an
HTTP date), the body's ``resets_in_seconds`` / ``resets_at`` / ``retry_after``,
``x-ratelimit-reset-requests`` / ``-tokens`` (OpenAI durations like ``6m0s``; the larger),
``x-ratelimit-reset`` (OpenRouter: epoch milliseconds; epoch seconds or a delta accepted),
and last the message's "try again in 7m12s". Messages are the upstream's own, at most 300
characters, with the API key (should an upstream echo it) masked.
"""

from __future__ import annotations

import email.utils
import http
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from olp.failures import Code
from olp.ir import Category, Error

MESSAGE_LIMIT: Final = 300

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
_DURATION_PART: Final = re.compile(
    r"(\d+(?:\.\d+)?)(ms|hours?|h|minutes?|m|seconds?|s)", re.IGNORECASE)
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """What an upstream said about a failure; every field may be missing."""

    status: int | None = None
    message: str = ""
    type: str = ""
    code: str = ""
    body: Mapping[str, Any] | None = None  # the error object, for reset fields


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` stripped, at most ``limit`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def classify(error: UpstreamError, *, headers: Mapping[str, str] | None = None,
             now: float, secret: str | None = None) -> Error:
    """The terminal :class:`Error` for an upstream failure (rules in the module docstring).

    ``headers`` must be case-insensitive (``httpx.Headers``) or lower-cased; ``now`` is the
    epoch time that anchors HTTP-date and epoch resets.
    """
    status = error.status
    text = f"{error.message} {error.type} {error.code}".lower()
    ids = {error.type.lower(), error.code.lower()} - {""}
    in_stream = status is None

    def err(code: str, category: Category, retry_after_s: float | None = None) -> Error:
        message = error.message
        if secret:
            message = message.replace(secret, "***")
        message = cut(message) or _default_message(status, code)
        return Error(code=code, category=category, message=message, status=status,
                     retry_after_s=retry_after_s)

    def reset() -> float | None:
        return retry_after(headers or {}, error, now=now)

    if ids & _BILLING_CODES or status == 402 or (
            (in_stream or status in (403, 429)) and _has(text, _BILLING_TEXT)):
        return err(Code.BILLING, "billing")
    if (in_stream or status == 429) and (ids & _WINDOW_CODES or _has(text, _WINDOW_TEXT)):
        return err(Code.USAGE_WINDOW, "usage_window", reset())
    if status == 403 and (ids & _POLICY_CODES or _has(text, _POLICY_TEXT)):
        return err(Code.CONTENT_POLICY, "client_error")
    if status in (401, 403) or (in_stream and ids & _AUTH_TYPES):
        return err(Code.UPSTREAM_AUTH, "auth")
    if status == 429 or (in_stream and ids & _RATE_TYPES):
        return err(Code.RATE_LIMITED, "rate_limited", reset())
    client_side = in_stream or status in (400, 413, 422)
    if client_side and (ids & _CONTEXT_CODES or _has(text, _CONTEXT_TEXT)):
        return err(Code.CONTEXT_LENGTH, "context_length")
    if (in_stream or status in (400, 422)) and (ids & _POLICY_CODES or _has(text, _POLICY_TEXT)):
        return err(Code.CONTENT_POLICY, "client_error")
    if status in (408, 504):
        return err(Code.UPSTREAM_TIMEOUT, "unavailable")
    if status is not None and status >= 500:  # a Retry-After on a 503 is honoured too
        return err(Code.UPSTREAM_5XX, "unavailable", _header_retry_after(headers or {}, error,
                                                                          now))
    if in_stream and ids & _SERVER_TYPES:
        return err(Code.UPSTREAM_UNAVAILABLE, "unavailable")
    if status in _CLIENT_STATUSES:
        return err(Code.UPSTREAM_CLIENT_ERROR, "client_error")
    return err(Code.UPSTREAM_ERROR, "unknown")


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


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    return any(p in text for p in phrases)


# --- when may we try again ---


def retry_after(headers: Mapping[str, str], error: UpstreamError, *, now: float
                ) -> float | None:
    """Seconds until the upstream expects to accept requests again, or ``None``."""
    for parse in (_header_retry_after, _body_reset, _ratelimit_reset):
        value = parse(headers, error, now)
        if value is not None:
            return value
    return parse_duration_in(error.message)


def _finite(value: float) -> float | None:
    return max(0.0, value) if math.isfinite(value) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return _finite(float(value))
    if isinstance(value, str):
        try:
            return _finite(float(value.strip()))
        except ValueError:
            return None
    return None


def _header_retry_after(headers: Mapping[str, str], error: UpstreamError, now: float
                        ) -> float | None:
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return _finite(when.timestamp() - now)


def _body_reset(headers: Mapping[str, str], error: UpstreamError, now: float) -> float | None:
    body = error.body or {}
    for key in ("resets_in_seconds", "retry_after", "retry_after_seconds"):
        value = _number(body.get(key))
        if value is not None:
            return value
    at = _number(body.get("resets_at"))
    if at is not None:
        return _epoch_delta(at, now)
    return None


def _ratelimit_reset(headers: Mapping[str, str], error: UpstreamError, now: float
                     ) -> float | None:
    durations = [d for key in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
                 if (raw := headers.get(key)) is not None
                 and (d := parse_duration(raw)) is not None]
    if durations:
        return max(durations)
    value = _number(headers.get("x-ratelimit-reset"))
    return None if value is None else _epoch_delta(value, now)


def _epoch_delta(value: float, now: float) -> float | None:
    """An epoch in milliseconds or seconds becomes a delay; a small number is one already."""
    if value > 1e11:
        return _finite(value / 1000 - now)
    if value > 1e9:
        return _finite(value - now)
    return _finite(value)


def parse_duration(text: str) -> float | None:
    """An OpenAI duration (``"20ms"``, ``"1.5s"``, ``"6m0s"``, ``"1h2m3s"``) or plain seconds."""
    text = text.strip()
    plain = _number(text)
    if plain is not None:
        return plain
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(text):
        if text[pos:m.start()].strip():
            return None
        total += float(m.group(1)) * _UNIT_S[_unit(m.group(2))]
        pos = m.end()
    return _finite(total) if pos and not text[pos:].strip() else None


def parse_duration_in(message: str) -> float | None:
    """The delay in a message's "try again in 7m12s" / "try again in 20 seconds"."""
    m = _TRY_AGAIN.search(message)
    return None if m is None else parse_duration(m.group(1).replace(" ", ""))


def _unit(unit: str) -> str:
    unit = unit.lower()
    return "ms" if unit == "ms" else unit[0]
