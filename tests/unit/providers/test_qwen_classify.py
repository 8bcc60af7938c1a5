"""qwen's failure table: the error texts of cli-reference/qwen (result error.message, stderr)
and the exit codes, each to its code; the CLI's own 429 hint is not read as billing."""

from __future__ import annotations

import pytest

from olp.providers.qwen._classify import CLI_HINT, RULES, Failure, classify, status_of

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "exit_code", "code", "category", "status"), [
    (f"[API Error: 429 Rate limit reached for requests in organization org-mock.]\n{CLI_HINT}",
     1, "RATE_LIMITED", "rate_limited", 429),
    ("[API Error: 401 Incorrect API key provided: sk-mock***.]", 1, "UPSTREAM_AUTH", "auth",
     401),
    ("[API Error: 400 This model's maximum context length is 128000 tokens.]", 1,
     "CONTEXT_LENGTH", "context_length", 400),
    ("[API Error: 400 Your request was rejected as a result of our safety system.]", 1,
     "UPSTREAM_CLIENT_ERROR", "client_error", 400),
    ("[API Error: 404 model not found]", 1, "UPSTREAM_CLIENT_ERROR", "client_error", 404),
    ("[API Error: 500 The server had an error while processing your request.]", 1,
     "UPSTREAM_5XX", "unavailable", 500),
    ("[API Error: 503 The engine is currently overloaded]", 1, "OVERLOADED", "unavailable",
     503),
    ("[API Error: 429 You exceeded your current quota, please check your plan and billing "
     "details.]", 1, "BILLING", "billing", 429),
    ("No input provided via stdin. Input can be provided by piping data into gemini or using "
     "the --prompt option.", 1, "UPSTREAM_CLIENT_ERROR", "client_error", 400),
    ('The command "/init" is disabled by the current configuration.', 1, "CONFIG_ERROR", "auth",
     None),
    ("Qwen OAuth free tier was discontinued on 2026-04-15. Run /auth to switch to Coding Plan, "
     "OpenRouter, Fireworks AI, or another provider.", 1, "CONFIG_ERROR", "auth", None),
    ("Run aborted: tool-call budget of 0 exceeded (--max-tool-calls); observed 1.", 55,
     "TOOL_CALL_INVALID", "unavailable", None),
    ("Operation cancelled.", -15, "CLI_TERMINATED", "unavailable", None),
    ("", -9, "CLI_TERMINATED", "unavailable", None),
    ("", 52, "CONFIG_ERROR", "auth", None),
    ("[API Error: Connection error.]", 1, "CONNECTION_FAILED", "unavailable", None),
    ("[API Error: Request timed out.]", 1, "UPSTREAM_TIMEOUT", "unavailable", None),
    ("something odd", 1, "UPSTREAM_ERROR", "unknown", None),
])
def test_each_failure_gets_its_code(text: str, exit_code: int, code: str, category: str,
                                    status: int | None) -> None:
    error = classify(Failure(text=text, exit_code=exit_code), now=NOW)
    assert (error.code, error.category, error.status) == (code, category, status)


def test_the_cli_hint_is_not_in_the_message() -> None:
    error = classify(Failure(text=f"[API Error: 429 slow down]\n{CLI_HINT}"), now=NOW)
    assert error.message == "[API Error: 429 slow down]"


def test_a_usage_window_with_a_reset() -> None:
    error = classify(Failure(text="[API Error: 429 weekly quota exhausted; the usage limit "
                                  "resets in 2 hours]"), now=NOW)
    assert error.code == "USAGE_WINDOW" and error.retry_after_s == pytest.approx(7200)


def test_an_empty_failure_has_a_message() -> None:
    assert classify(Failure(exit_code=7), now=NOW).message == "qwen failed (exit code 7)"
    assert classify(Failure(), now=NOW).message == "qwen failed"


def test_status_of() -> None:
    assert status_of("[API Error: 429 x]") == 429
    assert status_of("Error 429") is None


def test_the_table_has_no_unreachable_default() -> None:
    assert len(RULES) == 15
