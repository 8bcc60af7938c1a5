"""The soft-trigger ledger counts only providers that have soft triggers."""

from __future__ import annotations

from olp.engine import Ledger, SoftLimits


def test_a_provider_without_soft_triggers_is_not_counted() -> None:
    ledger = Ledger({"a": SoftLimits(daily_request_count_threshold=2)}, clock=lambda: 1000.0)
    for _ in range(5):
        ledger.record("b", tokens=10)
        ledger.add_tokens("b", 3)
    assert ledger.version == 0  # nothing to persist
    assert ledger.snapshot() == {"requests": {}, "tokens": {}, "reported": {}}
    ledger.record("a", tokens=7)
    assert ledger.version == 1
    assert ledger.snapshot() == {"requests": {"a": [1000.0]}, "tokens": {"a": 7}, "reported": {}}


def test_the_counted_provider_is_still_skipped_at_its_threshold() -> None:
    ledger = Ledger({"a": SoftLimits(daily_request_count_threshold=2)}, clock=lambda: 1000.0)
    ledger.record("a")
    assert ledger.check("a") is None
    ledger.record("a")
    skip = ledger.check("a")
    assert skip is not None and skip.code == "SOFT_TRIGGER"
