"""OpenAI-shaped error responses: the status each failure category maps to, and how a chain
in which no hop answered is reported (see ``docs/adr/0004-errors-and-served-model.md``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from olp.engine import ChainFailed, Hop
from olp.failures import Code
from olp.ir import ChatRequest, Error
from olp.ir.openai import ChunkEncoder, error_body


@dataclass(slots=True)
class ApiError(Exception):
    """Raised anywhere in a view to answer with an OpenAI error body and this status."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> bytes:
        return error_body(message=self.message, type=self.type, code=self.code,
                          param=self.param)

    def frame(self) -> bytes:
        """The same error as an in-stream SSE event, for after a 200 was committed."""
        return ChunkEncoder.error(message=self.message, type=self.type, code=self.code,
                                  param=self.param)


def upstream_error(error: Error, *, provider: str, model: str) -> ApiError:
    """The HTTP error for a hop's failure, before anything was sent to the client.

    ``auth`` is never a 401/403 (that would tell the client its OLP key is bad).
    """
    message = f"{provider} ({model}): {error.message}"
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
    for the ``X-OLP-Provider-Used`` / ``-Model-Used`` headers, ``log_code`` for the log."""

    error: ApiError
    hop: Hop
    log_code: str


def chain_error(chat: ChatRequest, exc: ChainFailed) -> ChainError:
    """The one mapping of a failed chain: the first attempted hop's error decides; if every
    hop was skipped, 400 when no hop can take the request, else 429 (every hop is cooling)
    with the soonest reset as ``Retry-After``."""
    if exc.first is not None:
        hop, first = exc.first
        return ChainError(upstream_error(first, provider=hop.provider, model=hop.model), hop,
                          first.code)
    hop = exc.route.hops[0]
    reasons = "; ".join(r.error_message for r in exc.records)
    if exc.skip_codes <= {Code.CAPABILITY, Code.CONTEXT_WINDOW}:
        what = "tools" if chat.tools else "this request"
        code = "tools_unsupported" if chat.tools else "capability_unsupported"
        return ChainError(ApiError(400, f"No hop of `{chat.model}` can take {what}: {reasons}",
                                   "invalid_request_error", code), hop, code)
    headers = {} if exc.retry_after_s is None else {
        "Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return ChainError(ApiError(429, f"Every hop of `{chat.model}` is resting: {reasons}",
                               "rate_limit_error", "all_hops_cooling", headers=headers),
                      hop, Code.ALL_HOPS_COOLING)
