"""``on_change`` (what persists the health book and the ledger) is told only when one of
them changed (ADR 0028): a request that changes nothing kept wakes nothing."""

from __future__ import annotations

from olp.engine import Engine, Hop, Router
from olp.failures import Code, failure


def engine_with_counter() -> tuple[Engine, list[int]]:
    calls: list[int] = []
    router = Router(lambda model: Hop("claude", model), providers=["claude"])
    return Engine(router, {}, on_change=lambda: calls.append(1)), calls


def test_nothing_changed_tells_nothing_after_the_first_time() -> None:
    engine, calls = engine_with_counter()
    engine.changed()  # the first call: whatever was loaded is told once
    for _ in range(5):
        engine.ledger.record("claude")  # no soft triggers: not counted
        engine.health.record_success("claude")  # no circuit: nothing to clear
        engine.changed()
    assert calls == [1]


def test_each_change_is_told() -> None:
    engine, calls = engine_with_counter()
    engine.changed()
    engine.health.record_failure("claude", "m", failure(Code.BILLING, "no credit"))
    engine.changed()
    engine.changed()  # the same change: told once
    engine.health.reset()
    engine.changed()
    assert calls == [1, 1, 1]
