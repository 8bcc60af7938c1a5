"""OpenAI-shaped error responses, and the status each failure category maps to (BRIEF §2)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from olp.ir import Error
from olp.ir.openai import error_body


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
