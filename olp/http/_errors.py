"""Error responses: the status each failure category maps to, and how a chain
in which no hop answered is reported (see ``docs/adr/0004-errors-and-served-model.md``); the
body is written in the dialect of the path asked for (``_dialect.py``).

What a hop reported (CLI stderr, connection targets, exception text) is for the owner: a
``public`` error (any other key) says the category and a plain message instead, and the
detail goes to the log (README, "Fallback, loudly").
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from olp.engine import CAPABILITIES, ChainFailed, Hop, HopRecord
from olp.failures import Code
from olp.ir import Category, ChatRequest, Error

from ._dialect import StreamWriter

log = logging.getLogger("olp.http")

#: What a key that is not the owner's is told of a hop's failure, by category.
PLAIN: Final[Mapping[Category, str]] = {
    "usage_window": "the provider's usage window is used up; retry after it resets",
    "billing": "the provider's account has no credit left",
    "rate_limited": "the upstream is rate limiting requests; retry later",
    "unavailable": "the upstream is unavailable right now",
    "context_length": "the conversation is longer than the model's context window",
    "auth": "the upstream did not accept the proxy's credential for this provider",
    "client_error": "the upstream refused this request",
    "unknown": "the upstream failed unexpectedly",
}


@dataclass(slots=True)
class ApiError(Exception):
    """Raised anywhere in a view to answer with an error body of the path's dialect and this
    status (``olp/http/_dialect.py`` writes it; in a stream, the dialect's error event)."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


def public_message(error: Error) -> str:
    """A hop's failure told without what the upstream or the CLI said: the category's plain
    message, the category and the code."""
    plain = PLAIN.get(error.category, PLAIN["unknown"])
    return (f"{plain} (category: {error.category}, code: {error.code.lower()}; "
            "the details are in the proxy's log).")


def upstream_error(error: Error, *, provider: str, model: str,
                   public: bool = False) -> ApiError:
    """The HTTP error for a hop's failure, before anything was sent to the client; with
    ``public`` (not the owner's key), :func:`public_message` instead of the hop's text.

    ``auth`` is never a 401/403 (that would tell the client its OLP key is bad).
    """
    message = f"{provider} ({model}): {public_message(error) if public else error.message}"
    code = error.code.lower()
    headers: dict[str, str] = {}
    match error.category:
        case "usage_window" | "rate_limited" | "billing":
            if error.retry_after_s is not None:
                headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
            return ApiError(429, message, "rate_limit_error", code, headers=headers)
        case "unavailable":
            return ApiError(503, message, "api_error", code)
        case "context_length":
            return ApiError(400, message, "invalid_request_error", "context_length_exceeded",
                            "messages")
        case "client_error":
            status = error.status if error.status and 400 <= error.status < 500 else 400
            return ApiError(status, message, "invalid_request_error", code)
        case "auth":
            return ApiError(502, message, "api_error", "upstream_auth_failed")
        case _:
            return ApiError(502, message, "api_error", code)


@dataclass(frozen=True, slots=True)
class ChainError:
    """How a chain in which no hop answered is reported: ``error`` for the client, ``hop``
    for the ``X-OLP-Provider-Used`` / ``-Model-Used`` headers, ``log_code`` and ``detail``
    (the full message, whoever the client is) for the log."""

    error: ApiError
    hop: Hop
    log_code: str
    detail: str = ""


def chain_error(chat: ChatRequest, exc: ChainFailed, *, public: bool = False) -> ChainError:
    """The one mapping of a failed chain: the first attempted hop's error decides; if every
    hop was skipped, 403 when the key's allow-list excludes every hop, 400 when no (allowed)
    hop can take the request, 502 ``upstream_auth_failed`` when the logins that could have
    answered have expired (issue #41), else 429 (every hop is cooling) with the soonest reset
    as ``Retry-After``. ``public``: not the owner's key, so no
    upstream text (see :func:`upstream_error`) and no cooldown reasons."""
    if exc.first is not None:
        hop, first = exc.first
        error = upstream_error(first, provider=hop.provider, model=hop.model, public=public)
        return ChainError(error, hop, first.code, f"{hop.provider} ({hop.model}): "
                                                  f"{first.message}")
    hop = exc.route.hops[0]
    reasons = "; ".join(r.error_message for r in exc.records)
    if exc.not_allowed:
        message = (f"This API key may not use any provider of `{chat.model}` (its allow-list "
                   "excludes them all); ask the proxy's owner, or use another model.")
        return ChainError(ApiError(403, message, "permission_error", "provider_not_allowed",
                                   "model"), hop, Code.KEY_POLICY, message)
    if exc.skip_codes - {Code.KEY_POLICY} <= {Code.CAPABILITY, Code.CONTEXT_WINDOW}:
        shared = lacked_by_all(exc.records)
        what = " or ".join(shared) or "this request"
        code = "tools_unsupported" if "tools" in shared else "capability_unsupported"
        message = f"No hop of `{chat.model}` can take {what}: {reasons}"
        return ChainError(ApiError(400, message, "invalid_request_error", code), hop, code,
                          message)
    if Code.LOGIN_EXPIRED in exc.skip_codes and exc.skip_codes - {Code.KEY_POLICY} <= {
            Code.LOGIN_EXPIRED, Code.CAPABILITY, Code.CONTEXT_WINDOW}:
        message = f"Every login that could answer `{chat.model}` has expired: {reasons}"
        shown = (f"Every login that could answer `{chat.model}` has expired (category: auth); "
                 "the proxy's owner must log in again.") if public else message
        return ChainError(ApiError(502, shown, "api_error", "upstream_auth_failed"), hop,
                          Code.LOGIN_EXPIRED, message)
    headers = {} if exc.retry_after_s is None else {
        "Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    message = f"Every hop of `{chat.model}` is resting: {reasons}"
    shown = f"Every hop of `{chat.model}` is resting (category: rate_limited)." if public \
        else message
    return ChainError(ApiError(429, shown, "rate_limit_error", "all_hops_cooling",
                               headers=headers), hop, Code.ALL_HOPS_COOLING, message)


def lacked_by_all(records: list[HopRecord]) -> list[str]:
    """The capabilities every hop skipped for the request's needs lacks (a hop the key may
    not use aside), in :data:`~olp.engine.CAPABILITIES` order: the only causes a refusal's
    lead-in may name; none when some hop was refused for anything else (its own reason
    then says what)."""
    shut = [r for r in records if r.trigger_type == "soft" and r.code != Code.KEY_POLICY]
    if not shut:
        return []
    common = set(shut[0].lacks).intersection(*(r.lacks for r in shut[1:]))
    return [c for c in CAPABILITIES if c in common]


def stream_error_frame(enc: StreamWriter, error: Error, *, public: bool) -> bytes:
    """The in-stream ``error`` event for a hop that failed after its first content; logs the
    hop's own message (which a ``public`` client does not get)."""
    log.info("stream failed", extra={"event": "stream_error", "code": error.code,
                                     "category": error.category, "error": error.message})
    message = public_message(error) if public else error.message
    return enc.error(ApiError(502, message, "api_error", error.code.lower()))


def chain_error_frame(chat: ChatRequest, exc: ChainFailed, *, public: bool) -> ChainError:
    """:func:`chain_error` for a stream already committed (heartbeats); logs its detail."""
    failure = chain_error(chat, exc, public=public)
    log.info("chain failed", extra={"event": "stream_error", "code": failure.log_code,
                                    "error": failure.detail})
    return failure
