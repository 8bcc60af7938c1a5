"""vibe failure classification: the table of what vibe prints → category and code."""

from __future__ import annotations

import pytest

from olp.providers.vibe._classify import Failure, classify, cut, status_of

NOW = 1767225600.0  # 2026-01-01T00:00:00Z
STATUS_429 = ('API error occurred: Status 429. Body: {"object": "error", "message": "Requests '
              'rate limit exceeded", "type": "rate_limited", "param": null, "code": "1300"}')


def body(status: int, message: str, error_type: str = "invalid_request_error") -> str:
    return (f'API error occurred: Status {status}. Body: {{"object": "error", "message": '
            f'"{message}", "type": "{error_type}", "param": null, "code": "3001"}}')


# (text, export error.code, outcome, exit code) -> (code, category, status)
TABLE: list[tuple[Failure, tuple[str, str, int | None]]] = [
    # captured cases (cli-reference/vibe)
    (Failure("Missing MISTRAL_API_KEY environment variable for mistral provider", None,
             "config_error", 1), ("AUTH_MISSING", "auth", None)),
    (Failure("Invalid API key (from env var MISTRAL_API_KEY). Please check your API key and "
             "try again.", "invalid_api_key", "config_error", 1),
     ("UPSTREAM_AUTH", "auth", None)),
    (Failure(STATUS_429, "rate_limit", "infrastructure_failure", 2),
     ("RATE_LIMITED", "rate_limited", 429)),
    (Failure(body(500, "Internal server error", "internal_server_error"), "backend_error",
             "infrastructure_failure", 2), ("UPSTREAM_5XX", "unavailable", 500)),
    (Failure(body(503, "Service unavailable", "service_unavailable"), "backend_error",
             "infrastructure_failure", 2), ("UPSTREAM_5XX", "unavailable", 503)),
    (Failure("Timed out waiting for the model to send its response (ReadTimeout).",
             "backend_error", "infrastructure_failure", 2),
     ("UPSTREAM_TIMEOUT", "unavailable", None)),
    (Failure("The model stopped sending output: no response data for 5s after the response "
             "started.", "backend_error", "infrastructure_failure", 2),
     ("UPSTREAM_TIMEOUT", "unavailable", None)),
    (Failure("", None, "terminated", 3), ("CLI_TERMINATED", "unavailable", None)),
    (Failure("", None, "deadline", 3), ("UPSTREAM_TIMEOUT", "unavailable", None)),
    (Failure("No prompt provided for programmatic mode", None, "usage_error", 1),
     ("UPSTREAM_CLIENT_ERROR", "client_error", 400)),
    # billing and usage windows (vendor prose; best effort)
    (Failure(body(402, "Payment required"), "backend_error", "infrastructure_failure", 2),
     ("BILLING", "billing", 402)),
    (Failure(body(429, "Insufficient credits: add credits to continue", "rate_limited"),
             "rate_limit", "infrastructure_failure", 2), ("BILLING", "billing", 429)),
    (Failure(body(429, "Monthly quota exceeded", "rate_limited"), "rate_limit",
             "infrastructure_failure", 2), ("BILLING", "billing", 429)),
    (Failure(body(429, "Usage limit reached, resets in 2 hours", "rate_limited"),
             "rate_limit", "infrastructure_failure", 2),
     ("USAGE_WINDOW", "usage_window", 429)),
    # auth
    (Failure(body(403, "Forbidden", "forbidden"), "backend_error", "infrastructure_failure",
             2), ("UPSTREAM_AUTH", "auth", 403)),
    (Failure(body(401, "Unauthorized", "invalid_api_key"), None, None, 1),
     ("UPSTREAM_AUTH", "auth", 401)),
    # context length and client errors
    (Failure(body(400, "Prompt contains 300000 tokens, too large for model with 262144 "
                  "maximum context length"), "backend_error", "infrastructure_failure", 2),
     ("CONTEXT_LENGTH", "context_length", 400)),
    (Failure("The conversation is too long", "context_too_long", "infrastructure_failure", 2),
     ("CONTEXT_LENGTH", "context_length", None)),
    (Failure(body(400, "Invalid request: temperature must be <= 1.5"), "backend_error",
             "infrastructure_failure", 2), ("UPSTREAM_CLIENT_ERROR", "client_error", 400)),
    (Failure(body(422, "Unprocessable entity"), "backend_error", "infrastructure_failure", 2),
     ("UPSTREAM_CLIENT_ERROR", "client_error", 422)),
    (Failure("Invalid model: nope", "invalid_model", "config_error", 1),
     ("UPSTREAM_CLIENT_ERROR", "client_error", 404)),
    (Failure("The model refused to answer", "refusal", "refusal", 3),
     ("UPSTREAM_CLIENT_ERROR", "client_error", 400)),
    # unavailable
    (Failure(body(529, "Overloaded", "overloaded"), "backend_error", None, 2),
     ("OVERLOADED", "unavailable", 529)),
    (Failure("Engine is overloaded, please retry", "backend_error", None, 2),
     ("OVERLOADED", "unavailable", None)),
    (Failure("API error occurred: ConnectError: [Errno 111] Connection refused", None,
             "infrastructure_failure", 2), ("CONNECTION_FAILED", "unavailable", None)),
    (Failure("stream ended early", "incomplete_stream", "infrastructure_failure", 2),
     ("UPSTREAM_UNAVAILABLE", "unavailable", None)),
    (Failure("something odd upstream", None, "infrastructure_failure", 2),
     ("UPSTREAM_UNAVAILABLE", "unavailable", None)),
    (Failure("", None, "aborted", 4), ("UPSTREAM_UNAVAILABLE", "unavailable", None)),
    # configuration problems surface as auth; the rest is unknown (and advances)
    (Failure("Invalid TOML in /h/.vibe/config.toml: oops", None, "config_error", 1),
     ("CONFIG_ERROR", "auth", None)),
    (Failure("something else", None, None, 7), ("UPSTREAM_ERROR", "unknown", None)),
]


@pytest.mark.parametrize(("failure", "want"), TABLE)
def test_classification_table(failure: Failure, want: tuple[str, str, int | None]) -> None:
    error = classify(failure, now=NOW)
    assert (error.code, error.category, error.status) == want
    assert error.message


def test_usage_window_reset_is_parsed() -> None:
    error = classify(Failure(body(429, "Usage limit reached, resets in 2 hours"), "rate_limit",
                             None, 2), now=NOW)
    assert error.retry_after_s == 7200
    billing = classify(Failure(body(402, "Insufficient credit; quota resets in 30 minutes"),
                               None, None, 2), now=NOW)
    assert (billing.category, billing.retry_after_s) == ("usage_window", 1800)
    plain = classify(Failure(STATUS_429, "rate_limit", None, 2), now=NOW)
    assert plain.retry_after_s is None


def test_message_is_one_line_and_bounded() -> None:
    error = classify(Failure("x" * 1000 + "\nsecond line", None, None, 2), now=NOW)
    assert len(error.message) == 300 and error.message.endswith("…")
    assert cut("a\n b\tc") == "a b c"
    assert classify(Failure("", None, None, 9), now=NOW).message == "vibe failed (exit code 9)"


def test_status_of() -> None:
    assert status_of(STATUS_429) == 429
    assert status_of("Status: 503") == 503
    assert status_of("no status here") is None
