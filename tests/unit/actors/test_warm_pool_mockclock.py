"""The warm pool under trio's MockClock, with a scripted boot.

Each test asserts exact virtual times (when units start and end) and that nothing leaks:
every unit that started has ended once the pool is closed or cancelled.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from olp.actors import WarmPool, WarmSettings
from olp.actors._warm import DEMAND_WINDOW_S

BOOT_S = 0.5  # how long a scripted unit takes to start


@dataclass(eq=False)
class Unit:
    template: str
    started_at: float
    ended_at: float | None = None
    alive: bool = True

    def running(self) -> bool:
        return self.alive

    def rss_bytes(self) -> int:
        return 1000 if self.alive else 0


@dataclass
class Boots:
    """A scripted boot: records every unit; ``fail`` makes the next starts raise."""

    units: list[Unit] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)
    fail: int = 0

    @contextlib.asynccontextmanager
    async def __call__(self, template: str) -> AsyncIterator[Unit]:
        self.attempts.append(trio.current_time())
        await trio.sleep(BOOT_S)
        if self.fail:
            self.fail -= 1
            raise OSError("cannot start")
        unit = Unit(template, trio.current_time())
        self.units.append(unit)
        try:
            yield unit
        finally:
            unit.alive = False
            unit.ended_at = trio.current_time()

    @property
    def live(self) -> int:
        return sum(1 for u in self.units if u.ended_at is None)


def make_pool(size: int = 1, ttl_s: float = 100.0) -> tuple[WarmPool[Unit, str], Boots]:
    boots = Boots()
    return WarmPool("fake", boots, WarmSettings(size=size, ttl_s=ttl_s)), boots


async def use(pool: WarmPool[Unit, str], key: str, seconds: float = 1.0) -> Unit | None:
    """One request: take a unit for ``key`` (``None`` on a miss) and hold it ``seconds``."""
    lease = pool.take(key, f"template-{key}")
    if lease is None:
        return None
    async with lease as unit:
        await trio.sleep(seconds)
    return unit


async def test_first_request_misses_and_warms_the_next(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool()
    await nursery.start(pool.run)
    assert await use(pool, "a") is None  # nothing asked for yet: a miss, and a demand
    await trio.sleep(1)
    assert [u.started_at for u in boots.units] == [BOOT_S]
    assert pool.statistics().warm == 1 and pool.statistics().memory_bytes == 1000
    unit = await use(pool, "a", seconds=2)
    assert unit is boots.units[0] and unit.ended_at == 3.0  # ended when its request did
    # the hand-out at t=1 started the next unit at once, in the background
    assert [u.started_at for u in boots.units] == [BOOT_S, 1 + BOOT_S]
    stats = pool.statistics()
    assert (stats.hits, stats.misses, stats.warm, stats.in_use) == (1, 1, 1, 0)


async def test_a_unit_serves_one_request_only(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(size=1)
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(1)
    first = pool.take("a", "t")
    second = pool.take("a", "t")  # the only warm unit is taken: a miss, never the same one
    assert first is not None and second is None
    async with first:
        pass
    assert boots.units[0].ended_at == 1.0


async def test_a_unit_for_another_key_is_a_miss(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """A unit started for one system text never serves another: the idle one for the old
    key is ended when the pool's one slot is wanted for the new key."""
    pool, boots = make_pool(size=1)
    await nursery.start(pool.run)
    pool.take("a", "ta")
    await trio.sleep(1)
    assert pool.take("b", "tb") is None
    await trio.sleep(1)
    assert [(u.template, u.started_at, u.ended_at) for u in boots.units] == [
        ("ta", 0.5, 1.0), ("tb", 1.5, None)]
    assert await use(pool, "b") is boots.units[1]


async def test_never_more_than_its_size_idle_or_starting(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(size=2)
    await nursery.start(pool.run)
    seen = 0
    for i in range(20):
        pool.take(f"k{i % 5}", "t")
        for _ in range(4):
            await trio.sleep(0.2)
            stats = pool.statistics()
            assert stats.warm + stats.booting <= 2
            seen = max(seen, stats.warm + stats.booting)
    assert seen == 2
    # the two most recent requests' keys are what is warm
    await trio.sleep(5)
    assert sorted(u.template for u in boots.units if u.ended_at is None) == ["t", "t"]
    assert pool.statistics().warm == 2


async def test_the_last_requests_decide_what_is_warm(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(size=2)
    await nursery.start(pool.run)
    for key in ("a", "a"):
        pool.take(key, f"t{key}")
    await trio.sleep(2)
    assert sorted(u.template for u in boots.units if u.alive) == ["ta", "ta"]
    pool.take("b", "tb")  # takes nothing (a miss) and shifts the demand to {a, b}
    await trio.sleep(2)
    assert sorted(u.template for u in boots.units if u.alive) == ["ta", "tb"]


async def test_an_idle_unit_is_replaced_after_its_ttl(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(ttl_s=100)
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(250)
    assert [(u.started_at, u.ended_at) for u in boots.units] == [
        (0.5, 100.5), (101.0, 201.0), (201.5, None)]


async def test_a_unit_past_its_ttl_at_hand_out_is_a_miss(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(ttl_s=100)
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(100.5)  # exactly at its TTL: whether run() or take() sees it first,
    assert pool.take("a", "t") is None  # it is not handed out
    await trio.sleep(0.1)
    assert boots.units[0].ended_at == 100.5


async def test_a_dead_unit_at_hand_out_is_a_miss_and_backs_off(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool()
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(1)
    boots.units[0].alive = False  # its process exited while it waited
    assert pool.take("a", "t") is None
    await trio.sleep(10)
    # ended at once; the next start waited out the back-off (1 s) first
    assert boots.units[0].ended_at == 1.0
    assert boots.attempts == [0.0, 2.0]
    assert pool.statistics().failures == 1 and pool.statistics().warm == 1


async def test_failed_starts_back_off_exponentially_up_to_the_cap(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    boots = Boots(fail=8)
    pool = WarmPool("fake", boots, WarmSettings(size=1, backoff_s=1, max_backoff_s=10))
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(60)
    # each attempt takes BOOT_S to fail; then waits 1, 2, 4, 8, 10, 10, 10, 10 s
    assert boots.attempts == [0.0, 1.5, 4.0, 8.5, 17.0, 27.5, 38.0, 48.5, 59.0]
    assert len(boots.units) == 1 and boots.units[0].started_at == 59.5
    assert pool.statistics().failures == 8


async def test_cancelling_a_request_during_hand_out_ends_its_unit(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool()
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(1)
    with trio.move_on_after(0.25):
        await use(pool, "a", seconds=10)
    assert boots.units[0].ended_at == 1.25
    assert pool.statistics().in_use == 0
    await trio.sleep(1)
    assert boots.live == 1 and pool.statistics().warm == 1  # refilled


async def test_close_ends_idle_units_and_lets_the_request_in_use_finish(
        autojump_clock: trio.testing.MockClock) -> None:
    pool, boots = make_pool(size=2)
    held: list[Unit | None] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        pool.take("a", "t")
        pool.take("a", "t")
        await trio.sleep(2)
        assert boots.live == 2

        async def request() -> None:
            held.append(await use(pool, "a", seconds=5))

        nursery.start_soon(request)
        await trio.sleep(1)
        pool.close()
    # run() returned when the request in use was done; nothing is left
    assert held == [boots.units[0]]
    assert [u.ended_at for u in boots.units] == [7.0, 3.0, 3.0]  # the third: the refill
    assert boots.live == 0 and pool.take("a", "t") is None


async def test_cancelling_the_pool_ends_every_unit_even_in_use(
        autojump_clock: trio.testing.MockClock) -> None:
    pool, boots = make_pool(size=2)
    with trio.move_on_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(pool.run)
            pool.take("a", "t")
            pool.take("b", "t")
            await trio.sleep(1.2)  # one idle, the second starting
            nursery.start_soon(use, pool, "a", 100.0)
            await trio.sleep(100)
    assert boots.live == 0
    assert all(u.ended_at == 10 for u in boots.units)


async def test_closing_while_a_unit_is_starting_ends_it_and_returns(
        autojump_clock: trio.testing.MockClock) -> None:
    pool, boots = make_pool()
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        pool.take("a", "t")
        await trio.sleep(0.25)
        pool.close()
    assert trio.current_time() == 0.25 and boots.units == [] and boots.attempts == [0.0]


async def test_demand_is_forgotten_after_the_window(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    pool, boots = make_pool(ttl_s=DEMAND_WINDOW_S / 2)
    await nursery.start(pool.run)
    pool.take("a", "t")
    await trio.sleep(3 * DEMAND_WINDOW_S)
    # warmed while the request was recent (two TTLs), then nothing
    assert len(boots.units) == 2 and boots.live == 0


@pytest.mark.parametrize("size", [0])
async def test_size_zero_is_no_pool(size: int, autojump_clock: trio.testing.MockClock,
                                    nursery: trio.Nursery) -> None:
    pool, boots = make_pool(size=size)
    await nursery.start(pool.run)
    assert pool.take("a", "t") is None
    await trio.sleep(10)
    assert boots.attempts == []
