"""The per-hop retry planner: what is retried, how many times, after how long."""

from __future__ import annotations

import pytest

from olp.failures import Code
from olp.ir import Category, Error
from olp.providers.openai_compat import RetryPolicy, plan_retry
from olp.providers.openai_compat._retry import retry_kind

POLICY = RetryPolicy(random=lambda: 0.5)


def err(category: Category, code: str = "C", status: int | None = None,
        retry_after_s: float | None = None) -> Error:
    return Error(code=code, category=category, message="m", status=status,
                 retry_after_s=retry_after_s)


@pytest.mark.parametrize(("error", "kind"), [
    (err("unavailable", "UPSTREAM_5XX", 500), "server"),
    (err("unavailable", "UPSTREAM_5XX", 502), "server"),
    (err("unavailable", "UPSTREAM_5XX", 503), "server"),
    (err("unavailable", "UPSTREAM_5XX", 504), None),
    (err("unavailable", "UPSTREAM_5XX", 503, 4.0), "server"),
    (err("unavailable", "UPSTREAM_5XX", 503, 9.0), None),
    (err("unavailable", "UPSTREAM_5XX", 529), None),
    (err("unavailable", Code.CONNECTION_FAILED), "connection"),
    (err("unavailable", Code.CONNECT_TIMEOUT), None),
    (err("unavailable", Code.FIRST_BYTE_TIMEOUT), None),
    (err("unavailable", Code.STREAM_ENDED_EARLY), None),
    (err("rate_limited", "RATE_LIMITED", 429, 2.0), "rate_limit"),
    (err("rate_limited", "RATE_LIMITED", 429, 5.0), "rate_limit"),
    (err("rate_limited", "RATE_LIMITED", 429, 5.1), None),
    (err("rate_limited", "RATE_LIMITED", 429, None), None),
    (err("usage_window", "USAGE_WINDOW", 429, 1.0), None),
    (err("billing", "BILLING", 429, 1.0), None),
    (err("auth", "UPSTREAM_AUTH", 401), None),
    (err("context_length", "CONTEXT_LENGTH", 400), None),
    (err("client_error", "CONTENT_POLICY", 400), None),
    (err("unknown", "UPSTREAM_ERROR", 409), None),
])
def test_retry_kinds(error: Error, kind: str | None) -> None:
    assert retry_kind(error, POLICY) == kind


def test_budgets_are_per_kind() -> None:
    five_hundred = err("unavailable", "UPSTREAM_5XX", 500)
    assert plan_retry(five_hundred, POLICY, {}) is not None
    assert plan_retry(five_hundred, POLICY, {"server": 1}) is None
    assert plan_retry(five_hundred, POLICY, {"connection": 1}) is not None
    assert plan_retry(five_hundred, RetryPolicy(max_retries_500=0), {}) is None
    assert plan_retry(five_hundred, RetryPolicy(max_retries_500=2), {"server": 1}) is not None


def test_backoff_is_jittered_exponential_and_capped() -> None:
    e = err("unavailable", "UPSTREAM_5XX", 500)
    low = RetryPolicy(random=lambda: 0.0, max_retries_500=10)
    high = RetryPolicy(random=lambda: 0.999999, max_retries_500=10)
    assert plan_retry(e, low, {}) == ("server", 0.125)
    assert plan_retry(e, high, {})[1] == pytest.approx(0.25)  # type: ignore[index]
    assert plan_retry(e, low, {"server": 1}) == ("server", 0.25)
    assert plan_retry(e, low, {"server": 9}) == ("server", 1.0)  # b capped at 2 s


def test_rate_limit_delay_honours_retry_after_plus_jitter() -> None:
    e = err("rate_limited", "RATE_LIMITED", 429, 2.0)
    assert plan_retry(e, RetryPolicy(random=lambda: 0.0), {}) == ("rate_limit", 2.0)
    assert plan_retry(e, RetryPolicy(random=lambda: 0.5), {}) == ("rate_limit", 2.125)
    assert plan_retry(e, RetryPolicy(max_retry_after_s=1.0), {}) is None


def test_server_retry_waits_at_least_its_retry_after() -> None:
    policy = RetryPolicy(random=lambda: 0.0)
    assert plan_retry(err("unavailable", "UPSTREAM_5XX", 503, 1.5), policy, {}) == \
        ("server", 1.5)
    assert plan_retry(err("unavailable", "UPSTREAM_5XX", 503, 0.01), policy, {}) == \
        ("server", 0.125)


@pytest.mark.parametrize(("error", "silent_s", "kind"), [
    # a connection closed or reset after the upstream sat on the request: a silent route
    (err("unavailable", Code.CONNECTION_FAILED), 1.0, None),
    (err("unavailable", Code.CONNECTION_FAILED), 30.0, None),
    # at once (refused, a stale pooled connection): a clear transient error
    (err("unavailable", Code.CONNECTION_FAILED), 0.2, "connection"),
    # the deadlines that expire on a silent upstream are never retried
    (err("unavailable", Code.FIRST_BYTE_TIMEOUT), 0.0, None),
    (err("unavailable", Code.FIRST_OUTPUT_TIMEOUT), 0.0, None),
    # the other cases keep their policy
    (err("unavailable", "UPSTREAM_5XX", 503, 2.0), 0.0, "server"),
    (err("rate_limited", "RATE_LIMITED", 429, 2.0), 0.0, "rate_limit"),
])
def test_a_silent_route_is_never_retried(error: Error, silent_s: float,
                                         kind: str | None) -> None:
    assert retry_kind(error, POLICY, silent_s=silent_s) == kind
    assert (plan_retry(error, POLICY, {}, silent_s=silent_s) is None) == (kind is None)
    assert retry_kind(error, RetryPolicy(silent_after_s=60.0), silent_s=silent_s) == (
        "connection" if error.code == Code.CONNECTION_FAILED else kind)
