"""Per-key limits: a sliding minute, UTC calendar day/week/month, tokens per day; exact
refusals with ``Retry-After`` and OpenAI's ``x-ratelimit-*``; release and settle; the seed
from the ledger survives a restart."""

from __future__ import annotations

import datetime as dt

import pytest

from olp.accounting import LimitExceeded, RequestLimiter, Seed, duration_text
from olp.accounting._windows import window_end
from olp.store import Limits

# Wednesday 2026-12-02 23:59:00 UTC
WED = dt.datetime(2026, 12, 2, 23, 59, tzinfo=dt.UTC).timestamp()


class Clocks:
    def __init__(self, wall: float) -> None:
        self.wall = wall
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def limiter(clocks: Clocks, seeds: dict[str, Seed] | None = None) -> RequestLimiter:
    return RequestLimiter(seeds, wall=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_the_sliding_minute_admits_exactly_the_limit_then_frees_the_oldest_slot() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks)
    limits = Limits(per_minute=3)
    held = []
    for remaining in ("2", "1", "0"):
        held.append(lim.reserve("7", limits))
        assert held[-1].headers["x-ratelimit-remaining-requests"] == remaining
        clocks.advance(10)
    with pytest.raises(LimitExceeded) as refused:
        lim.reserve("7", limits)
    # the oldest slot was taken 30 s ago: it frees in 30 s
    assert refused.value.retry_after_s == pytest.approx(30)
    assert refused.value.headers["Retry-After"] == "30"
    assert refused.value.headers["x-ratelimit-limit-requests"] == "3"
    assert refused.value.headers["x-ratelimit-reset-requests"] == "30s"
    assert "3 requests per minute" in refused.value.message
    clocks.advance(30)
    assert lim.reserve("7", limits).headers["x-ratelimit-remaining-requests"] == "0"
    assert lim.reserve("8", limits)  # another key has its own counts


def test_a_refused_request_counts_nothing_and_a_released_one_gives_its_slot_back() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks)
    limits = Limits(per_minute=1, per_day=5)
    first = lim.reserve("k", limits)
    for _ in range(3):
        with pytest.raises(LimitExceeded):
            lim.reserve("k", limits)
    assert lim.usage("k").day == 1
    lim.release(first)
    assert lim.usage("k").day == 0
    lim.reserve("k", limits)


def test_the_day_resets_at_utc_midnight_and_the_reset_says_when() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks)
    limits = Limits(per_day=2)
    lim.reserve("k", limits)
    last = lim.reserve("k", limits)
    assert last.headers["x-ratelimit-reset-requests"] == "1m0s"
    with pytest.raises(LimitExceeded) as refused:
        lim.reserve("k", limits)
    assert refused.value.headers["Retry-After"] == "60"
    clocks.advance(61)  # Thursday
    assert lim.reserve("k", limits).headers["x-ratelimit-remaining-requests"] == "1"


def test_week_and_month_windows_and_the_binding_limit_in_the_headers() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks, {"k": Seed(day=1, week=9, month=20)})
    limits = Limits(per_day=100, per_week=10, per_month=50)
    got = lim.reserve("k", limits)
    # the week has the fewest left: it is the one the headers describe
    assert got.headers["x-ratelimit-limit-requests"] == "10"
    assert got.headers["x-ratelimit-remaining-requests"] == "0"
    assert got.headers["x-ratelimit-reset-requests"] == duration_text(
        window_end("week", WED) - WED)
    with pytest.raises(LimitExceeded, match="10 requests per week"):
        lim.reserve("k", limits)
    clocks.advance(5 * 86400)  # next Monday (Dec 7): a new week, the same month
    assert lim.usage("k").week == 0 and lim.usage("k").month == 21
    lim.reserve("k", limits)


def test_tokens_per_day_are_counted_when_settled_and_a_hit_spends_none() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks, {"k": Seed(tokens_today=900)})
    limits = Limits(tokens_per_day=1000)
    first = lim.reserve("k", limits)
    assert first.headers["x-ratelimit-remaining-tokens"] == "100"
    lim.settle(first, 0)  # a cache hit
    second = lim.reserve("k", limits)
    lim.settle(second, 150)
    with pytest.raises(LimitExceeded, match="1000 tokens per day") as refused:
        lim.reserve("k", limits)
    assert refused.value.headers["x-ratelimit-remaining-tokens"] == "0"
    assert "x-ratelimit-limit-requests" not in refused.value.headers


def test_a_key_without_limits_is_counted_but_gets_no_headers() -> None:
    clocks = Clocks(WED)
    lim = limiter(clocks)
    for _ in range(50):
        assert lim.reserve("free", Limits()).headers == {}
    assert lim.usage("free").day == 50


@pytest.mark.parametrize(("seconds", "text"), [
    (0.02, "20ms"), (1, "1s"), (45.2, "46s"), (360, "6m0s"), (5 * 3600 + 123, "5h2m3s")])
def test_reset_durations_are_written_as_openai_writes_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
