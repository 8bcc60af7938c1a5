"""A refusal names its real cause (issue #44): when no hop of a chain can take a request, the
400 says, per hop, what that hop lacks, and its lead-in names a capability only when every
hop lacks it; ``X-OLP-Fallback-Detail`` carries the same per hop (``lacks``). Driven through
the engine's own skips (MockClock), for every mix of missing capabilities over two hops."""

from __future__ import annotations

import itertools
import json

import pytest
import trio
import trio.testing

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, event_line
from olp.engine import (
    CAPABILITIES,
    Capabilities,
    ChainFailed,
    Engine,
    HealthBook,
    Hop,
    Ledger,
    RequestContext,
    Router,
    detail_header,
)
from olp.http._errors import chain_error
from olp.ir import ChatRequest, ImagePart, Message, Reasoning, TextDelta, TextPart, ToolSpec

#: Asks for everything a hop's model may lack: tools, an image, a JSON schema, reasoning.
NEEDS_ALL = ChatRequest(
    model="chain", tools=(ToolSpec(name="f"),), reasoning=Reasoning(effort="high"),
    response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
    messages=(Message(role="user", content=(
        TextPart(text="what is this?"), ImagePart(url="data:image/png;base64,AAAA"))),))
#: Every non-empty set of capabilities a hop may lack, in the order they are named.
MIXES = [tuple(c for c in CAPABILITIES if c in chosen) for n in range(1, 5)
         for chosen in itertools.combinations(CAPABILITIES, n)]


OK = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]


def build(hops: list[Hop]) -> tuple[Engine, dict[str, FakeSpawner]]:
    spawners = {h.provider: FakeSpawner(lambda spec: OK) for h in hops}
    actors = {name: ProviderActor(name, CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary=name, timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={})), max_concurrent=1) for name, spawner in spawners.items()}
    router = Router(lambda m: None, providers=list(spawners), chains={"chain": hops})
    return Engine(router, actors, health=HealthBook(clock=trio.current_time),
                  ledger=Ledger(clock=trio.current_time)), spawners


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


def lacking(missing: tuple[str, ...]) -> Capabilities:
    return Capabilities(tools="tools" not in missing, images="images" not in missing,
                        json_mode="response_format" not in missing,
                        reasoning=() if "reasoning" in missing else ("low", "high"))


async def refusal(engine: Engine, request: ChatRequest = NEEDS_ALL) -> ChainFailed:
    with pytest.raises(ChainFailed) as info:
        await engine.open(request)
    return info.value


async def test_every_mix_over_two_hops_names_each_hops_own_lack(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    assert len(MIXES) == 15
    for first, second in itertools.product(MIXES, repeat=2):
        hops = [Hop("a", "a-model", capabilities=lacking(first), unsupported="skip"),
                Hop("b", "b-model", capabilities=lacking(second), unsupported="skip")]
        engine, spawners = build(hops)
        await start(engine, nursery)
        exc = await refusal(engine)
        assert spawners["a"].runs == spawners["b"].runs == []
        shared = [c for c in first if c in second]
        for public in (False, True):
            failure = chain_error(NEEDS_ALL, exc, public=public)
            error = failure.error
            assert (error.status, error.type) == (400, "invalid_request_error")
            assert error.code == ("tools_unsupported" if "tools" in shared
                                  else "capability_unsupported")
            assert error.message == (
                f"No hop of `chain` can take {' or '.join(shared) or 'this request'}: "
                f"a:a-model cannot take {', '.join(first)}; "
                f"b:b-model cannot take {', '.join(second)}"), (first, second)
        detail = json.loads(detail_header(exc.records))
        assert [(d["provider"], d["code"], d["lacks"]) for d in detail] == [
            ("a", "CAPABILITY", list(first)), ("b", "CAPABILITY", list(second))]


@pytest.mark.parametrize("missing", MIXES)
async def test_by_default_only_reasoning_degrades(
        missing: tuple[str, ...], autojump_clock: trio.testing.MockClock,
        nursery: trio.Nursery) -> None:
    engine, spawners = build([Hop("a", "a-model", capabilities=lacking(missing))])
    await start(engine, nursery)
    refused = tuple(c for c in missing if c != "reasoning")
    if not refused:  # it lacks reasoning alone: it serves, and says so
        answer = await engine.open(NEEDS_ALL)
        assert answer.ignored_params == ("reasoning",) and len(spawners["a"].runs) == 1
        answer.close()
        return
    exc = await refusal(engine)
    [record] = exc.records
    assert record.lacks == refused  # reasoning is never the cause named under "degrade"
    error = chain_error(NEEDS_ALL, exc).error
    assert error.message == (f"No hop of `chain` can take {' or '.join(refused)}: "
                             f"a:a-model cannot take {', '.join(refused)}")


async def test_a_hop_refused_for_another_cause_keeps_the_lead_in_plain(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    # "a" lacks tools; "b" is outside the key's allow-list, which is not a capability: the
    # lead-in still says tools (every hop that could be asked lacks them). A chain whose
    # second hop lacks images instead shares no cause: the lead-in claims none.
    hops = [Hop("a", "a-model", capabilities=lacking(("tools",))),
            Hop("b", "b-model", capabilities=lacking(()))]
    engine, _ = build(hops)
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as info:
        await engine.open(NEEDS_ALL, RequestContext(providers=frozenset({"a"})))
    error = chain_error(NEEDS_ALL, info.value).error
    assert error.message == ("No hop of `chain` can take tools: a:a-model cannot take tools; "
                             "this API key may not use b")
    assert error.code == "tools_unsupported"
    hops = [Hop("a", "a-model", capabilities=lacking(("tools",))),
            Hop("b", "b-model", capabilities=lacking(("images", "reasoning")))]
    engine, _ = build(hops)
    await start(engine, nursery)
    error = chain_error(NEEDS_ALL, await refusal(engine)).error
    assert error.message == ("No hop of `chain` can take this request: a:a-model cannot take "
                             "tools; b:b-model cannot take images")
    assert error.code == "capability_unsupported"
