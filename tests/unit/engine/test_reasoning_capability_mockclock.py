"""Reasoning as a hop capability (issue #27) under MockClock: a request asking for reasoning
skips a hop whose model takes none (``CAPABILITY``), unless the entry says
``"unsupported": "ignore"``, which serves it and names ``reasoning`` in
``X-OLP-Ignored-Params``; ``none`` asks nothing of a model. Reasoning events are not content:
they never commit a hop."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from test_engine_mockclock import OK, REQ, build, fail, start

from olp.actors.testing import Exit, Line, event_line
from olp.engine import Capabilities, ChainFailed, Hop
from olp.engine._capabilities import asks_reasoning, for_hop
from olp.ir import ChatRequest, Reasoning, ReasoningDelta, Stop, TextDelta

THINKS = Capabilities(reasoning=("low", "medium", "high"))
PLAIN = Capabilities()


def asking(**fields: object) -> ChatRequest:
    return ChatRequest(model="chain", messages=REQ.messages,
                       reasoning=Reasoning(**fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(("fields", "asks"), [
    ({"effort": "high", "show": True}, True), ({"effort": "low"}, True),
    ({"show": True}, True),  # adaptive thinking, shown: a model that shows none cannot
    ({"effort": "none"}, False), ({}, False)])
def test_what_asks_a_model_for_reasoning(fields: dict[str, object], asks: bool) -> None:
    assert asks_reasoning(asking(**fields)) is asks
    assert not asks_reasoning(REQ)


async def test_a_hop_without_reasoning_is_skipped_or_ignored(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    hops = [Hop("a", "a-model", capabilities=PLAIN), Hop("b", "b-model", capabilities=THINKS)]
    engine, spawners = build({"a": [OK], "b": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(asking(effort="high"))
    assert answer.hop.provider == "b" and spawners["a"].runs == []
    assert [(r.code, r.trigger_type) for r in answer.records] == [("CAPABILITY", "soft")]
    answer.close()
    assert (await engine.open(asking(effort="none"))).hop.provider == "a"  # asks nothing
    engine, _ = build({"a": [OK]}, [Hop("a", "a-model", capabilities=PLAIN,
                                         unsupported="ignore")])
    await start(engine, nursery)
    answer = await engine.open(asking(effort="high", show=True))
    assert answer.hop.provider == "a" and answer.ignored_params == ("reasoning",)
    answer.close()
    engine, _ = build({"a": [OK]}, [Hop("a", "a-model", capabilities=PLAIN)])
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(asking(effort="medium"))
    assert [r.code for r in info.value.records] == ["CAPABILITY"]


async def test_reasoning_never_commits_a_hop(autojump_clock: trio.testing.MockClock,
                                             nursery: trio.Nursery) -> None:
    # "a" thinks for 2 s, then fails before any text: the request still moves on to "b",
    # and the client never sees a's thinking.
    thinking_then_fail = [Line(1, event_line(ReasoningDelta(text="hmm"))),
                          *fail(1, "unavailable", "CRASH")]
    thinking_then_text = [Line(1, event_line(ReasoningDelta(text="so"))),
                          Line(1, event_line(TextDelta(text="hi"))), Exit(0, 0)]
    hops = [Hop("a", "a-model", capabilities=THINKS), Hop("b", "b-model", capabilities=THINKS)]
    engine, _ = build({"a": [thinking_then_fail], "b": [thinking_then_text]}, hops)
    await start(engine, nursery)
    answer = await engine.open(asking(effort="high", show=True))
    assert answer.hop.provider == "b" and trio.current_time() == 4
    events = [e async for e in answer]
    assert events == [ReasoningDelta(text="so"), TextDelta(text="hi"), Stop()]


@pytest.mark.parametrize(("asked", "levels", "runs"), [
    ("high", ("low", "medium", "high"), "high"),
    ("minimal", ("low", "medium", "high"), "low"),
    ("none", ("low", "medium", "high"), "low"),
    ("medium", ("minimal", "low", "high"), "high"),  # equally near: the higher
    ("high", (), None),  # a model without reasoning gets none (served only when ignored)
])
def test_a_hop_runs_the_nearest_level_its_model_takes(asked: str, levels: tuple[str, ...],
                                                      runs: str | None) -> None:
    hop = Hop("a", "a-model", capabilities=Capabilities(reasoning=levels))
    ran = for_hop(asking(effort=asked, show=True), hop)
    assert (ran.reasoning.effort if ran.reasoning else None) == runs
    assert for_hop(REQ, hop) is REQ


def test_thinking_asked_of_a_hop_that_returns_none_is_named() -> None:
    from olp.engine._capabilities import ignored_params

    silent = Hop("a", "a-model", capabilities=Capabilities(reasoning=("low", "high")))
    shows = Hop("a", "a-model", capabilities=Capabilities(reasoning=("low",),
                                                          reasoning_out=True))
    assert ignored_params(silent, asking(effort="low", show=True)) == ("thinking",)
    assert ignored_params(silent, asking(effort="low")) == ()  # the level alone is honoured
    assert ignored_params(shows, asking(effort="low", show=True)) == ()
