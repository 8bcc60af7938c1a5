"""gemini-cli's failure table (:mod:`olp.providers.gemini._classify`): each rule against the real
CLI's words (``tests/fixtures/cli-reference/gemini/transcripts``) and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.providers.gemini._classify import Failure, classify, retry_in, status_of

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini"
            / "transcripts")
NOW = 1767225600.0


def result_of(case: str) -> Failure:
    """The ``result`` line's error message and the exit code of a captured case."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    for line in (FIXTURES / f"{case}.stdout.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj.get("type") == "result":
            return Failure(text=obj["error"]["message"], exit_code=meta["exit_code"])
    raise AssertionError(f"{case} has no result line")


@pytest.mark.parametrize(("exit_code", "status"), [
    (144, 400), (145, 401), (147, 403), (173, 429), (244, 500), (247, 503), (1, None),
    (41, None), (42, None), (55, None), (0, None), (-9, None)])
def test_the_exit_code_is_the_http_status_mod_256(exit_code: int, status: int | None) -> None:
    assert status_of("no code here", exit_code) == status


def test_googles_body_code_wins_over_the_exit_code() -> None:
    assert status_of('[API Error: {"error":{"code":404,"status":"NOT_FOUND"}}]', 1) == 404


@pytest.mark.parametrize(("text", "seconds"), [
    ("Please retry in 2s.", 2.0), ("Please retry in 27.5s.\nSuggested retry after 28s.", 27.5),
    ("retry in 500ms", 0.5), ("no hint", None)])
def test_retry_hints(text: str, seconds: float | None) -> None:
    assert retry_in(text) == seconds


@pytest.mark.parametrize(("case", "code"), [
    ("rate_limit.max_attempts_1", "RATE_LIMITED"),
    ("rate_limit_bare", "RATE_LIMITED"),
    ("rate_limit_daily", "USAGE_WINDOW"),
    ("invalid_key_400", "UPSTREAM_AUTH"),
    ("unauthenticated_401", "UPSTREAM_AUTH"),
    ("permission_403", "UPSTREAM_AUTH"),
    ("not_found_404", "UPSTREAM_CLIENT_ERROR"),
    ("server_500.max_attempts_1", "UPSTREAM_5XX"),
    ("unavailable_503", "OVERLOADED"),
    ("conn_drop", "CONNECTION_FAILED"),
    ("slash.chat_share.no_tools", "UPSTREAM_CLIENT_ERROR"),
])
def test_the_captured_results(case: str, code: str) -> None:
    assert classify(result_of(case), now=NOW).code == code


def test_the_per_minute_429_is_short_and_the_daily_one_is_a_window() -> None:
    minute = classify(result_of("rate_limit.max_attempts_1"), now=NOW)
    daily = classify(result_of("rate_limit_daily"), now=NOW)
    assert (minute.category, minute.retry_after_s) == ("rate_limited", 2.0)
    assert daily.category == "usage_window"
    assert daily.retry_after_s is not None and 0 < daily.retry_after_s <= 24 * 3600


def test_the_quota_advice_is_not_billing() -> None:
    # "please check your plan and billing details" is in every quota 429
    assert classify(result_of("rate_limit.max_attempts_1"), now=NOW).code != "BILLING"


@pytest.mark.parametrize(("failure", "code", "category"), [
    (Failure("When using Gemini API, you must specify the GEMINI_API_KEY environment "
             "variable.", 41), "AUTH_MISSING", "auth"),
    (Failure("", 41), "AUTH_MISSING", "auth"),
    (Failure("No input provided via stdin.", 42), "UPSTREAM_CLIENT_ERROR", "client_error"),
    (Failure("Gemini CLI is not running in a trusted directory.", 55), "CONFIG_ERROR", "auth"),
    (Failure("Unknown arguments: x", 1), "CONFIG_ERROR", "auth"),
    (Failure("[API Error: The input token count (2000000) exceeds the maximum number of "
             "tokens allowed (1048576).]", 144), "CONTEXT_LENGTH", "context_length"),
    (Failure("[API Error: fetch failed sending request]", 1), "CONNECTION_FAILED",
     "unavailable"),
    (Failure("[API Error: Headers Timeout Error]", 1), "UPSTREAM_TIMEOUT", "unavailable"),
    (Failure("The model returned an empty response with no text or thoughts.", 0),
     "UPSTREAM_UNAVAILABLE", "unavailable"),
    (Failure("[API Error: {\"error\":{\"code\":502}}]", 246), "UPSTREAM_5XX", "unavailable"),
    (Failure("something new", 1), "UPSTREAM_ERROR", "unknown"),
])
def test_rules(failure: Failure, code: str, category: str) -> None:
    error = classify(failure, now=NOW)
    assert (error.code, error.category) == (code, category)
    assert error.message


def test_the_message_is_googles_not_the_wrapper() -> None:
    error = classify(result_of("permission_403"), now=NOW)
    assert error.message == ("Your API key was reported as leaked. Please use another API key. "
                             "(PERMISSION_DENIED)")
    assert classify(Failure("", 3)).message == "gemini failed (exit code 3)"
