"""The cache inside the engine, per hop: hits replay without a spawn, identical concurrent
requests share one spawn, namespaces never mix, Cache-Control is honoured (MockClock).

The store here is an in-memory stand-in for the SQLite ``CacheStore`` (tested on its own):
a worker thread would let the autojump clock jump while it runs, and these tests assert
exact virtual times."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, event_line
from olp.cache import Singleflight
from olp.engine import Engine, HealthBook, Hop, Ledger, RequestContext, Router, Sources
from olp.ir import Event, Stop, TextDelta, Usage


class MemoryCache:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], list[Event]] = {}

    async def get(self, namespace: str, key: str) -> list[Event] | None:
        await trio.lowlevel.checkpoint()
        return self.entries.get((namespace, key))

    async def put(self, namespace: str, key: str, provider: str,
                  events: Sequence[Event]) -> bool:
        await trio.lowlevel.checkpoint()
        self.entries[(namespace, key)] = list(events)
        return True

REQ = user_says("q", model="m")
ANSWER = [Line(1, event_line(TextDelta(text="Hel"))), Line(1, event_line(TextDelta(text="lo"))),
          Line(0, event_line(Usage(prompt_tokens=3, completion_tokens=2))), Exit(0, 0)]
ALICE, BOB = RequestContext("1"), RequestContext("2")


@pytest.fixture
async def setup(nursery: trio.Nursery) -> AsyncIterator[tuple[Engine, FakeSpawner, MemoryCache]]:
    spawner = FakeSpawner(lambda spec: ANSWER)
    actor = ProviderActor("p", CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="p", timeouts=Timeouts(10, 5, 60), proxy_env={})), max_concurrent=1)
    store = MemoryCache()
    flights = Singleflight(max_buffer=64)
    await nursery.start(flights.run)
    await nursery.start(actor.run)
    router = Router(lambda m: Hop("p", "p-model"), providers=["p"])
    engine = Engine(router, {"p": actor}, health=HealthBook(clock=trio.current_time),
                    ledger=Ledger(clock=trio.current_time), sources=Sources(store, flights))
    yield engine, spawner, store


async def events_of(engine: Engine, context: RequestContext) -> tuple[str, list[Event]]:
    answer = await engine.open(REQ, context)
    return answer.cache, [e async for e in answer]


async def test_miss_then_hit_replays_without_a_spawn(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, _ = setup
    status, first = await events_of(engine, ALICE)
    assert status == "miss" and trio.current_time() == 2
    await trio.testing.wait_all_tasks_blocked()  # the flight has written its answer
    status, again = await events_of(engine, ALICE)
    assert status == "hit" and again == first and trio.current_time() == 2
    assert [e for e in again if isinstance(e, TextDelta)] == [TextDelta(text="Hel"),
                                                              TextDelta(text="lo")]
    done = await engine.complete(REQ, ALICE)
    assert done.cache == "hit" and done.events == first
    assert len(spawner.runs) == 1


async def test_identical_concurrent_requests_spawn_once(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, _ = setup
    results: list[tuple[str, list[Event]]] = []

    async def one(delay: float) -> None:
        await trio.sleep(delay)
        results.append(await events_of(engine, ALICE))

    async with trio.open_nursery() as nursery:
        for delay in (0, 0, 0.5, 1.5):  # the last joins after the first delta
            nursery.start_soon(one, delay)
    assert len(spawner.runs) == 1
    assert sorted(s for s, _ in results) == ["attached", "attached", "attached", "miss"]
    assert all(events == results[0][1] for _, events in results)
    assert trio.current_time() == 2


async def test_keys_never_see_each_others_answers(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, _ = setup
    assert (await events_of(engine, ALICE))[0] == "miss"
    assert (await events_of(engine, BOB))[0] == "miss"
    assert len(spawner.runs) == 2


async def test_cache_control_no_cache_and_no_store(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, store = setup
    no_store = RequestContext("1", "no-store")
    assert (await events_of(engine, no_store))[0] == "bypass"
    assert len(store.entries) == 0  # not written
    no_cache = RequestContext("1", "no-cache")
    assert (await events_of(engine, no_cache))[0] == "miss"  # not read ...
    assert len(store.entries) == 1  # ... but written
    assert (await events_of(engine, no_cache))[0] == "miss"
    assert (await events_of(engine, ALICE))[0] == "hit"
    assert len(spawner.runs) == 3


async def test_failed_and_abandoned_answers_are_never_cached(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, store = setup
    answer = await engine.open(REQ, ALICE)
    assert await answer.__anext__() == TextDelta(text="Hel")
    answer.close()  # the client left mid-answer
    await trio.testing.wait_all_tasks_blocked()
    assert spawner.runs[0].killed and len(store.entries) == 0
    status, events = await events_of(engine, ALICE)
    assert status == "miss" and isinstance(events[-1], Stop)


async def test_a_request_during_the_cache_write_joins_the_finished_flight(
        autojump_clock: trio.testing.MockClock,
        setup: tuple[Engine, FakeSpawner, MemoryCache]) -> None:
    engine, spawner, store = setup
    writing, release = trio.Event(), trio.Event()
    put = store.put

    async def slow_put(*args: Any) -> bool:
        writing.set()
        await release.wait()
        return await put(*args)

    store.put = slow_put  # type: ignore[method-assign]
    status, first = await events_of(engine, ALICE)
    await writing.wait()  # the answer is complete; its cache write has not finished
    status, again = await events_of(engine, ALICE)
    assert (status, again) == ("attached", first)  # neither a miss nor a second spawn
    release.set()
    await trio.testing.wait_all_tasks_blocked()
    assert (await events_of(engine, ALICE))[0] == "hit"
    assert len(spawner.runs) == 1
