"""Reasoning as a hop capability (issues #27, #44) under MockClock: a request asking for
reasoning is served by a hop whose model takes none, which names ``reasoning`` in
``X-OLP-Ignored-Params`` (a preference, not a requirement), unless the entry says
``"unsupported": "skip"``, which skips it (``CAPABILITY``); tools stay a requirement; ``none``
asks nothing of a model. Reasoning events are not content: they never commit a hop."""

from __future__ import annotations

import logging

import msgspec
import pytest
import trio
import trio.testing
from test_engine_mockclock import OK, REQ, build, fail, start

from olp.actors.testing import Exit, Line, event_line
from olp.engine import Capabilities, ChainFailed, Hop
from olp.engine._capabilities import asks_reasoning, for_hop
from olp.ir import ChatRequest, Reasoning, ReasoningDelta, Stop, TextDelta, ToolSpec

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


@pytest.mark.parametrize("unsupported", [None, "degrade", "ignore"])
async def test_a_hop_without_reasoning_serves_it_and_says_so(
        unsupported: str | None, autojump_clock: trio.testing.MockClock,
        nursery: trio.Nursery, caplog: pytest.LogCaptureFixture) -> None:
    # The owner's order holds: "a" takes no reasoning but comes first, so "a" answers (issue
    # #44: Claude Code asks for thinking on every request); "b", which reasons, is not spawned.
    entry = {} if unsupported is None else {"unsupported": unsupported}
    hops = [Hop("a", "a-model", capabilities=PLAIN, **entry),  # type: ignore[arg-type]
            Hop("b", "b-model", capabilities=THINKS)]
    engine, spawners = build({"a": [OK], "b": [OK]}, hops)
    await start(engine, nursery)
    caplog.set_level(logging.INFO, logger="olp.engine")
    answer = await engine.open(asking(effort="high", show=True))
    assert answer.hop.provider == "a" and spawners["b"].runs == []
    assert answer.ignored_params == ("reasoning",) and answer.records == []
    answer.close()
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "hop"]
    assert (line.trigger_type, line.code, line.lacks) == (  # type: ignore[attr-defined]
        "degraded", "CAPABILITY", ["reasoning"])
    done = await engine.complete(asking(effort="low"))  # not streamed: the same
    assert done.hop.provider == "a" and done.ignored_params == ("reasoning",)
    answer = await engine.open(asking(effort="none"))  # asks nothing: nothing ignored
    assert answer.hop.provider == "a" and answer.ignored_params == ()
    answer.close()


async def test_skip_keeps_reasoning_a_requirement(autojump_clock: trio.testing.MockClock,
                                                  nursery: trio.Nursery) -> None:
    hops = [Hop("a", "a-model", capabilities=PLAIN, unsupported="skip"),
            Hop("b", "b-model", capabilities=THINKS)]
    engine, spawners = build({"a": [OK], "b": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(asking(effort="high"))
    assert answer.hop.provider == "b" and spawners["a"].runs == []
    assert answer.ignored_params == ()
    [record] = answer.records
    assert (record.code, record.trigger_type, record.lacks, record.error_message) == (
        "CAPABILITY", "soft", ("reasoning",), "a:a-model cannot take reasoning")
    answer.close()
    engine, _ = build({"a": [OK]}, [Hop("a", "a-model", capabilities=PLAIN,
                                         unsupported="skip")])
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(asking(effort="medium"))
    assert [r.code for r in info.value.records] == ["CAPABILITY"]


async def test_tools_stay_a_requirement_and_the_skip_names_only_them(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    # "a" lacks tools and reasoning: it is skipped for tools alone (reasoning would degrade);
    # "b" lacks reasoning only and serves without it.
    with_tools = msgspec.structs.replace(asking(effort="high"), tools=(ToolSpec(name="f"),))
    hops = [Hop("a", "a-model", capabilities=Capabilities(tools=False)),
            Hop("b", "b-model", capabilities=PLAIN)]
    engine, spawners = build({"a": [OK], "b": [OK]}, hops)
    await start(engine, nursery)
    answer = await engine.open(with_tools)
    assert answer.hop.provider == "b" and spawners["a"].runs == []
    assert [(r.code, r.lacks, r.error_message) for r in answer.records] == [
        ("CAPABILITY", ("tools",), "a:a-model cannot take tools")]
    assert answer.ignored_params == ("reasoning",)
    answer.close()


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
    ("high", (), None),  # a model without reasoning gets none (and names it: ignored)
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
