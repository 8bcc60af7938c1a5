"""Classification of codex's free-text failures, retries and usage-window resets.

Every message marked "real" was printed by codex-cli 0.171.0 (the transcripts, or the real CLI
against ``tests/support/mock_openai_responses`` with the scenario named); the others are
best-effort phrasings (see ``tests/fixtures/cli-reference/codex/README.md``).
"""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from olp.providers.codex._classify import (
    classify,
    parse_reconnect,
    parse_reset,
    read_failure,
)

NOW = 1796020800.0  # 2026-11-30T06:40:00Z, a Monday
URL = "url: http://127.0.0.1:PORT/v1/responses"

TABLE = [
    # real
    ("Missing environment variable: `MOCK_OPENAI_API_KEY`.", "AUTH_MISSING", "auth", None),
    ("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
     "https://chatgpt.com/settings/usage to purchase more credits or try again at 8:01 AM.",
     "USAGE_WINDOW", "usage_window", None),
    ("Quota exceeded. Check your plan and billing details.", "BILLING", "billing", None),
    ("To use Codex with your ChatGPT plan, upgrade to Plus: https://chatgpt.com/explore/plus.",
     "BILLING", "billing", None),
    (f"unexpected status 402 Payment Required: x, {URL}, request id: req_mock000002",
     "BILLING", "billing", 402),
    (f"unexpected status 401 Unauthorized: Incorrect API key provided: sk-mock*****1234. You "
     f"can find your API key at https://platform.openai.com/account/api-keys., {URL}, request "
     f"id: req_mock000006", "UPSTREAM_AUTH", "auth", 401),
    ("exceeded retry limit, last status: 429 Too Many Requests, request id: req_mock000001",
     "RATE_LIMITED", "rate_limited", 429),
    ("Codex ran out of room in the model's context window. Start a new thread or clear earlier "
     "history before retrying.", "CONTEXT_LENGTH", "context_length", None),
    ("stream disconnected before completion: idle timeout waiting for SSE", "UPSTREAM_TIMEOUT",
     "unavailable", None),
    ("Connection failed: error sending request", "CONNECTION_FAILED", "unavailable", None),
    (f"unexpected status 503 Service Unavailable: The engine is currently overloaded, please "
     f"try again later., {URL}, request id: req_mock000030", "OVERLOADED", "unavailable", 503),
    ("We’re currently experiencing high demand, which may cause temporary errors.",
     "UPSTREAM_5XX", "unavailable", None),
    (f"unexpected status 403 Forbidden: Country, region, or territory not supported, {URL}, "
     f"request id: req_mock000002", "UPSTREAM_CLIENT_ERROR", "client_error", 403),
    ('{"error": {"message": "Invalid value: foo.", "type": "invalid_request_error", "param": '
     'null, "code": null}}', "UPSTREAM_CLIENT_ERROR", "client_error", None),
    ("The model `gpt-mock` does not exist or you do not have access to it.",
     "UPSTREAM_CLIENT_ERROR", "client_error", None),
    # best effort
    ('unexpected status 400 Bad Request: {"detail":"Instructions are not valid"}',
     "UPSTREAM_CLIENT_ERROR", "client_error", 400),
    ("Your access token could not be refreshed because your refresh token has expired. Please "
     "log out and sign in again.", "UPSTREAM_AUTH", "auth", None),
    ("Not logged in. Run `codex login`.", "AUTH_MISSING", "auth", None),
    ("unexpected status 502 Bad Gateway: upstream connect error", "UPSTREAM_5XX", "unavailable",
     502),
    ("request timed out", "UPSTREAM_TIMEOUT", "unavailable", None),
    ("something nobody has seen before", "UPSTREAM_ERROR", "unknown", None),
    ("", "UPSTREAM_ERROR", "unknown", None),
]


@pytest.mark.parametrize(("message", "code", "category", "status"), TABLE)
def test_classification_table(message: str, code: str, category: str,
                              status: int | None) -> None:
    error = classify(message, now=NOW, tz=UTC)
    assert (error.code, error.category, error.status) == (code, category, status)
    assert error.message and len(error.message) <= 300
    assert "127.0.0.1" not in error.message  # the upstream URL is not shown


def test_message_prefers_an_error_body_and_drops_the_url() -> None:
    error = classify('{"error": {"message": "Invalid value: foo.", "type": '
                     '"invalid_request_error", "param": null, "code": null}}')
    assert error.message == "Invalid value: foo."
    failure = read_failure(f"unexpected status 401 Unauthorized: bad key, {URL}, request id: r1")
    assert failure.message == "unexpected status 401 Unauthorized: bad key, request id: r1"
    assert classify("x" * 500).message == "x" * 299 + "…"


@pytest.mark.parametrize(("text", "seconds"), [
    ("… or try again at 8:01 AM.", (8 * 60 + 1 - 6 * 60 - 40) * 60),  # later today (real)
    ("… or try again at 6:30 AM.", (24 * 60 - 10) * 60),  # already past today: tomorrow
    ("… or try again at 2:05 PM.", (14 * 60 + 5 - 6 * 60 - 40) * 60),
    ("… or try again at Dec 2nd, 2026 2:34 PM.",  # real (another day)
     2 * 86400 + (14 * 60 + 34 - 6 * 60 - 40) * 60),
    ("… try again at Nov 1st, 2026 1:00 AM.", 0),  # in the past
    ("… or try again later.", None),  # real (no reset given)
    ("Please try again in 20s.", 20),
    ("try again in 2 hours 5 minutes", 2 * 3600 + 300),
    ("limit resets in 1d 3h", 86400 + 3 * 3600),
    ("try again in 250ms", 0.25),
    ("try again at 13:99", None),
    ("try again at Feb 30th, 2027 1:00 AM", None),
    ("nothing here", None),
])
def test_parse_reset(text: str, seconds: float | None) -> None:
    assert parse_reset(text, now=NOW, tz=UTC) == seconds


def test_parse_reset_uses_the_given_zone() -> None:
    paris = timezone(timedelta(hours=1))  # 06:40Z is 07:40 there
    assert parse_reset("try again at 8:01 AM", now=NOW, tz=paris) == 21 * 60


def test_usage_window_carries_the_reset() -> None:
    error = classify("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/"
                     "pro) or try again at 8:01 AM.", now=NOW, tz=UTC)
    assert (error.category, error.retry_after_s) == ("usage_window", 81 * 60)
    later = classify("You’ve hit your usage limit. ... or try again later.", now=NOW, tz=UTC)
    assert (later.category, later.retry_after_s) == ("usage_window", None)


@pytest.mark.parametrize(("message", "attempt", "of", "category", "status"), [
    ("Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided: "
     f"sk-mock*****1234., {URL}, request id: req_mock000001)", 1, 5, "auth", 401),
    ("Reconnecting... 2/5 (exceeded retry limit, last status: 429 Too Many Requests, request "
     "id: req_mock000002)", 2, 5, "rate_limited", 429),
    ("Reconnecting... 3/5 (We’re currently experiencing high demand, which may cause temporary "
     "errors.)", 3, 5, "unavailable", None),
    ("Reconnecting... 1/1 (stream disconnected before completion: idle timeout waiting for "
     "SSE)", 1, 1, "unavailable", None),
    ("Reconnecting... waiting for network (Connection failed: error sending request)", None,
     None, "unavailable", None),
    ("Reconnecting... 4/5 (Quota exceeded. Check your plan and billing details.)", 4, 5,
     "billing", None),
    ("Reconnecting... 1/5 (You’ve hit your usage limit. try again later.)", 1, 5,
     "usage_window", None),
    ("Reconnecting… 2/3 (something new)", 2, 3, "unknown", None),
])
def test_reconnect_lines(message: str, attempt: int | None, of: int | None, category: str,
                         status: int | None) -> None:
    retry = parse_reconnect(message)
    assert retry is not None
    assert (retry.attempt, retry.max_retries, retry.category, retry.status) == (
        attempt, of, category, status)


@pytest.mark.parametrize("message", [
    "exceeded retry limit, last status: 429 Too Many Requests, request id: req_mock000006",
    "stream disconnected before completion: idle timeout waiting for SSE",
    "Reconnecting to the future",
])
def test_final_errors_are_not_retries(message: str) -> None:
    assert parse_reconnect(message) is None
