"""The failure classifier: status + error body (+ headers) → category, code, retry_after."""

from __future__ import annotations

import email.utils
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.ir import CATEGORIES
from olp.providers.openai_compat import (
    classify,
    classify_stream_error,
    parse_error_body,
    retry_after,
)
from olp.providers.openai_compat._classify import UpstreamError, parse_duration

NOW = 1_800_000_000.0


def body(message: str = "", type: str | None = None, code: Any = None, **extra: Any) -> bytes:
    return json.dumps({"error": {"message": message, "type": type, "param": None,
                                 "code": code, **extra}}).encode()


def run(status: int, raw: bytes | str, headers: dict[str, str] | None = None,
        secret: str | None = None) -> tuple[str, str, float | None]:
    error = classify(parse_error_body(status, raw), headers=httpx.Headers(headers or {}),
                     now=NOW, secret=secret)
    return error.category, error.code, error.retry_after_s


# (status, body, headers) -> (category, code, retry_after_s)
TABLE: list[tuple[int, bytes | str, dict[str, str], tuple[str, str, float | None]]] = [
    # billing: never a usage window, never retried
    (429, body("You exceeded your current quota, please check your plan and billing details.",
               "insufficient_quota", "insufficient_quota"), {"retry-after": "1"},
     ("billing", "BILLING", None)),
    (402, body("Insufficient credits. Add more using https://openrouter.ai/credits", None, 402),
     {}, ("billing", "BILLING", None)),
    (402, "", {}, ("billing", "BILLING", None)),
    (403, body("Key limit exceeded: insufficient credits"), {}, ("billing", "BILLING", None)),
    # usage windows
    (429, body("The usage limit has been reached", "usage_limit_reached", None,
               resets_in_seconds=3600), {}, ("usage_window", "USAGE_WINDOW", 3600.0)),
    (429, body("Rate limit reached for gpt-4o in organization org-x on requests per day (RPD): "
               "Limit 200, Used 200, Requested 1. Please try again in 7m12s.", "requests",
               "rate_limit_exceeded"), {}, ("usage_window", "USAGE_WINDOW", 432.0)),
    (429, body("Rate limit exceeded: free-models-per-day."), {"x-ratelimit-reset":
                                                             str(int((NOW + 60) * 1000))},
     ("usage_window", "USAGE_WINDOW", 60.0)),
    (429, body("daily limit reached", None, None, resets_at=NOW + 120), {},
     ("usage_window", "USAGE_WINDOW", 120.0)),
    (429, body("Your weekly limit was hit"), {}, ("usage_window", "USAGE_WINDOW", None)),
    # rate limits
    (429, body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
     {"retry-after": "2"}, ("rate_limited", "RATE_LIMITED", 2.0)),
    (429, body("slow down"), {"retry-after-ms": "1500", "retry-after": "9"},
     ("rate_limited", "RATE_LIMITED", 1.5)),
    (429, body("slow down"), {"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)},
     ("rate_limited", "RATE_LIMITED", 30.0)),
    (429, body("slow down"), {"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)},
     ("rate_limited", "RATE_LIMITED", 0.0)),
    (429, body("slow down"), {"x-ratelimit-reset-requests": "1s",
                              "x-ratelimit-reset-tokens": "6m0s"},
     ("rate_limited", "RATE_LIMITED", 360.0)),
    (429, body("Rate limit reached on tokens per min (TPM). Please try again in 20ms."), {},
     ("rate_limited", "RATE_LIMITED", 0.02)),
    (429, body("slow down"), {}, ("rate_limited", "RATE_LIMITED", None)),
    (429, body("slow down"), {"retry-after": "soon"}, ("rate_limited", "RATE_LIMITED", None)),
    (429, "Too Many Requests", {}, ("rate_limited", "RATE_LIMITED", None)),
    # auth
    (401, body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), {},
     ("auth", "UPSTREAM_AUTH", None)),
    (403, body("You are not allowed to use this model", "permission_error"), {},
     ("auth", "UPSTREAM_AUTH", None)),
    (403, body("Your chosen model requires moderation and your input was flagged", None, 403),
     {}, ("client_error", "CONTENT_POLICY", None)),
    # context length
    (400, body("This model's maximum context length is 128000 tokens.",
               "invalid_request_error", "context_length_exceeded"), {},
     ("context_length", "CONTEXT_LENGTH", None)),
    (400, json.dumps({"object": "error", "message": "This model's maximum context length is "
                      "4096 tokens. However, you requested 5000 tokens", "type":
                      "BadRequestError", "code": 400}).encode(), {},
     ("context_length", "CONTEXT_LENGTH", None)),
    (413, body("prompt is too long: 250000 tokens > 200000 maximum"), {},
     ("context_length", "CONTEXT_LENGTH", None)),
    # content policy
    (400, body("Your request was rejected as a result of our safety system.",
               "invalid_request_error", "content_policy_violation"), {},
     ("client_error", "CONTENT_POLICY", None)),
    (400, body("The response was filtered", None, "content_filter"), {},
     ("client_error", "CONTENT_POLICY", None)),
    # other client errors
    (400, body("Invalid value for 'temperature'", "invalid_request_error", "invalid_value"), {},
     ("client_error", "UPSTREAM_CLIENT_ERROR", None)),
    (404, body("The model `gpt-9` does not exist", "invalid_request_error", "model_not_found"),
     {}, ("client_error", "UPSTREAM_CLIENT_ERROR", None)),
    (422, json.dumps({"detail": [{"loc": ["body"], "msg": "field required"}]}).encode(), {},
     ("client_error", "UPSTREAM_CLIENT_ERROR", None)),
    # server side
    (500, body("The server had an error", "server_error"), {},
     ("unavailable", "UPSTREAM_5XX", None)),
    (502, "<html><body>Bad gateway</body></html>", {}, ("unavailable", "UPSTREAM_5XX", None)),
    (503, body("overloaded", "server_error"), {"retry-after": "3"},
     ("unavailable", "UPSTREAM_5XX", 3.0)),
    (503, body("overloaded, try again in 5s", "server_error"), {},
     ("unavailable", "UPSTREAM_5XX", None)),
    (529, body("Overloaded", "overloaded_error"), {}, ("unavailable", "UPSTREAM_5XX", None)),
    (504, "", {}, ("unavailable", "UPSTREAM_TIMEOUT", None)),
    (408, "", {}, ("unavailable", "UPSTREAM_TIMEOUT", None)),
    # anything else
    (409, body("conflict"), {}, ("unknown", "UPSTREAM_ERROR", None)),
    (302, "", {}, ("unknown", "UPSTREAM_ERROR", None)),
]


@pytest.mark.parametrize(("status", "raw", "headers", "expected"), TABLE)
def test_classifier_table(status: int, raw: bytes | str, headers: dict[str, str],
                          expected: tuple[str, str, float | None]) -> None:
    category, code, after = run(status, raw, headers)
    assert (category, code) == expected[:2]
    if expected[2] is None:
        assert after is None
    else:
        assert after == pytest.approx(expected[2], abs=1.0)


def test_message_is_the_upstreams_cut_and_the_status_kept() -> None:
    long = "x" * 1000
    error = classify(parse_error_body(400, body(long)), now=NOW)
    assert error.status == 400
    assert len(error.message) == 300 and error.message.endswith("…")
    assert classify(parse_error_body(400, body("bad temperature")), now=NOW).message == \
        "bad temperature"


def test_empty_and_html_bodies_get_a_status_message() -> None:
    assert classify(parse_error_body(502, b"<html>oops</html>"), now=NOW).message == \
        "the upstream answered HTTP 502 Bad Gateway"
    assert classify(parse_error_body(503, b""), now=NOW).message == \
        "the upstream answered HTTP 503 Service Unavailable"


def test_plain_text_body_is_the_message() -> None:
    error = classify(parse_error_body(500, b"upstream connect error"), now=NOW)
    assert error.message == "upstream connect error"


def test_an_echoed_key_is_masked() -> None:
    error = classify(parse_error_body(401, body("Incorrect API key provided: sk-secret-123")),
                     now=NOW, secret="sk-secret-123")
    assert "sk-secret-123" not in error.message and "***" in error.message


def test_bare_string_error() -> None:
    parsed = parse_error_body(500, b'{"error": "model crashed"}')
    assert parsed.message == "model crashed"


# --- in-stream errors (a 200 whose stream carries {"error": ...}) ---

STREAM: list[tuple[dict[str, Any] | str, tuple[str, str]]] = [
    ({"error": {"message": "Internal error", "type": "server_error"}},
     ("unavailable", "UPSTREAM_UNAVAILABLE")),
    ({"error": {"message": "Provider returned error", "code": 502}},
     ("unavailable", "UPSTREAM_5XX")),
    ({"error": {"message": "Rate limit exceeded", "code": 429}}, ("rate_limited", "RATE_LIMITED")),
    ({"error": {"message": "quota", "code": "insufficient_quota"}}, ("billing", "BILLING")),
    ({"error": {"message": "maximum context length exceeded"}},
     ("context_length", "CONTEXT_LENGTH")),
    ({"error": {"message": "flagged by moderation", "type": "content_filter"}},
     ("client_error", "CONTENT_POLICY")),
    ({"error": {"message": "The usage limit has been reached", "type": "usage_limit_reached",
                "resets_in_seconds": 60}}, ("usage_window", "USAGE_WINDOW")),
    ({"error": {"message": "who knows"}}, ("unknown", "UPSTREAM_ERROR")),
    ("something broke", ("unknown", "UPSTREAM_ERROR")),
    ({"message": "Overloaded", "type": "overloaded_error"},
     ("unavailable", "UPSTREAM_UNAVAILABLE")),
]


@pytest.mark.parametrize(("payload", "expected"), STREAM)
def test_stream_errors(payload: dict[str, Any] | str, expected: tuple[str, str]) -> None:
    error = classify_stream_error(payload, now=NOW)
    assert (error.category, error.code) == expected
    assert error.message


def test_stream_error_numeric_code_is_the_status() -> None:
    error = classify_stream_error({"error": {"message": "Bad gateway", "code": 502}}, now=NOW)
    assert error.status == 502


# --- retry-after sources ---


def test_retry_after_prefers_headers_then_body_then_ratelimit_then_message() -> None:
    err = UpstreamError(status=429, message="try again in 9s", body={"resets_in_seconds": 7})
    assert retry_after(httpx.Headers({"retry-after": "3"}), err, now=NOW) == 3.0
    assert retry_after(httpx.Headers({"x-ratelimit-reset": "5"}), err, now=NOW) == 7.0
    assert retry_after(httpx.Headers({"x-ratelimit-reset": "5"}),
                       UpstreamError(message="try again in 9s"), now=NOW) == 5.0
    assert retry_after(httpx.Headers(), UpstreamError(message="try again in 9s"),
                       now=NOW) == 9.0
    assert retry_after(httpx.Headers(), UpstreamError(), now=NOW) is None


@pytest.mark.parametrize(("raw", "seconds"), [
    ("20ms", 0.02), ("1.5s", 1.5), ("6m0s", 360.0), ("1h2m3s", 3723.0), ("7", 7.0),
    ("nonsense", None), ("5 s", None), ("-3", 0.0), ("inf", None), ("nan", None),
])
def test_parse_duration(raw: str, seconds: float | None) -> None:
    assert parse_duration(raw) == seconds


@given(st.integers(min_value=100, max_value=599), st.binary(max_size=200),
       st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x-ratelimit-reset",
                                        "x-ratelimit-reset-requests"]),
                       st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
                       max_size=3))
def test_any_response_classifies(status: int, raw: bytes, headers: dict[str, str]) -> None:
    error = classify(parse_error_body(status, raw), headers=httpx.Headers(headers), now=NOW)
    assert error.category in CATEGORIES
    assert error.status == status
    assert error.message and len(error.message) <= 300
    assert error.retry_after_s is None or error.retry_after_s >= 0


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.sampled_from(["error", "message", "type", "code",
                                                       "resets_at", "detail"]), children,
                                      max_size=4), max_leaves=10))
def test_any_json_error_classifies(payload: Any) -> None:
    raw = json.dumps(payload).encode()
    error = classify(parse_error_body(429, raw), headers=httpx.Headers(), now=NOW)
    assert error.category in CATEGORIES and error.message
    if isinstance(payload, dict):
        error = classify_stream_error(payload, now=NOW)
        assert error.category in CATEGORIES and error.message
