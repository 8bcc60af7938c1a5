"""A router keeps what it resolved (ADR 0028): the same answer, found once per model name,
a refusal raised anew each time, and no more than ``RESOLVED`` names kept."""

from __future__ import annotations

import pytest

from olp.engine import Hop, Router, UnknownModel
from olp.engine._routes import RESOLVED


def counting_router() -> tuple[Router, list[str]]:
    asked: list[str] = []

    def lookup(model: str) -> Hop | None:
        asked.append(model)
        return Hop("claude", model) if model.startswith("c-") else None

    return Router(lookup, providers=["claude"], chains={"team": [Hop("claude", "c-1")]}), asked


def test_a_model_is_looked_up_once_and_answered_the_same() -> None:
    router, asked = counting_router()
    first, second = router.resolve("c-sonnet"), router.resolve("c-sonnet")
    assert first == second and first.hops == (Hop("claude", "c-sonnet"),)
    assert router.resolve("team").hops == (Hop("claude", "c-1"),)
    assert asked == ["c-sonnet"]  # chains need no lookup


def test_a_refusal_is_raised_anew_each_time() -> None:
    router, asked = counting_router()
    raised = []
    for _ in range(3):
        with pytest.raises(UnknownModel) as info:
            router.resolve("nope")
        raised.append(info.value)
    assert asked == ["nope"]
    assert len({id(e) for e in raised}) == 3 and all(e.model == "nope" for e in raised)
    assert all(e.cause is None and e.message == raised[0].message for e in raised)


def test_at_most_resolved_names_are_kept() -> None:
    router, asked = counting_router()
    for i in range(RESOLVED * 2 + 1):
        router.resolve(f"c-{i}")
    assert len(router._resolved) <= RESOLVED
    router.resolve(f"c-{RESOLVED * 2}")  # the last one is still kept
    assert asked.count(f"c-{RESOLVED * 2}") == 1
