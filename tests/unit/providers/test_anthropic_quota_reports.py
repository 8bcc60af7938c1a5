"""claude's ``rate_limit_event`` → :class:`QuotaReport` per window, replayed from the verbatim
captures of the real claude 2.1.332 against the mock sending ``anthropic-ratelimit-unified-*``
headers (``tests/fixtures/cli-reference/claude/rate_limit_event``). claude prints the event
only when signed in with an OAuth token; with an API key there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from olp.ir import Error, QuotaReport, TextDelta, is_terminal
from olp.providers.anthropic import AnthropicParser

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "claude"
            / "rate_limit_event")
FIVE_H_RESET, SEVEN_D_RESET = 1796177031.0, 1796511831.0


def reports(case: str) -> tuple[list[QuotaReport], list[object]]:
    parser = AnthropicParser(now=lambda: 1796170000.0)
    quota: list[QuotaReport] = []
    others: list[object] = []
    for line in (FIXTURES / f"{case}.stream-json.stdout").read_bytes().splitlines():
        for event in parser.feed(line):
            (quota if isinstance(event, QuotaReport) else others).append(event)
            if is_terminal(event):
                return quota, others
    return quota, others


def q(window: str, status: str, utilization: float, resets_at: float) -> QuotaReport:
    return QuotaReport(window=window, status=status, utilization=utilization,
                       resets_at=resets_at)


CASES: dict[str, list[QuotaReport]] = {
    "allowed.oauth": [q("five_hour", "allowed", 0.42, FIVE_H_RESET),
                      q("seven_day", "allowed", 0.13, SEVEN_D_RESET)],
    "allowed.oauth.no_partial": [q("five_hour", "allowed", 0.42, FIVE_H_RESET),
                                 q("seven_day", "allowed", 0.13, SEVEN_D_RESET)],
    "allowed_warning.5h.oauth": [q("five_hour", "allowed_warning", 0.91, FIVE_H_RESET),
                                 q("seven_day", "allowed", 0.13, SEVEN_D_RESET)],
    "allowed_warning.7d.oauth": [q("five_hour", "allowed", 0.42, FIVE_H_RESET),
                                 q("seven_day", "allowed_warning", 0.8, SEVEN_D_RESET)],
    "rejected_429.oauth": [q("five_hour", "rejected", 1.0, FIVE_H_RESET),
                           q("seven_day", "allowed", 0.13, SEVEN_D_RESET)],
    "overage_in_use.oauth": [q("five_hour", "rejected", 1.0, FIVE_H_RESET),
                             q("seven_day", "allowed", 0.13, SEVEN_D_RESET)],
    # a bare {"status": "allowed"} (no headers) and API-key runs: nothing to report
    "no_headers.oauth": [],
    "allowed.api_key": [],
    "allowed.auth_token": [],
    "rejected_429.api_key": [],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_window_claude_reported_becomes_a_report(case: str) -> None:
    quota, others = reports(case)
    assert quota == CASES[case]


def test_the_reports_come_with_the_answer_and_change_nothing_else() -> None:
    quota, others = reports("allowed_warning.5h.oauth")
    assert quota and "".join(e.text for e in others if isinstance(e, TextDelta))
    _, failed = reports("rejected_429.oauth")
    [error] = [e for e in failed if isinstance(e, Error)]
    assert error.category == "usage_window"  # the 429 is classified as before


def test_a_window_only_named_by_the_event_is_reported_too() -> None:
    line = (b'{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning",'
            b'"resetsAt":1796511831,"rateLimitType":"seven_day_opus","utilization":0.77,'
            b'"isUsingOverage":false},"uuid":"u","session_id":"s"}')
    assert list(AnthropicParser().feed(line)) == [
        q("seven_day_opus", "allowed_warning", 0.77, SEVEN_D_RESET)]
    assert list(AnthropicParser().feed(b'{"type":"rate_limit_event","rate_limit_info":7}')) \
        == []
