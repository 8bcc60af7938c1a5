"""The run: C workers sending the planned requests while the proxy's RSS is sampled, then
waiting for the proxy to settle (no slot held, no flight) and for processes to go."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from bench._common import async_client, rss_kib

from .client import Outcome, send
from .scenarios import Planned

SETTLE_S = 20.0  # after the last request: time for slots, flights and processes to go


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    rss_at: int = 0  # completed requests when the baseline was taken
    rss_base_kib: int = 0
    rss_curve: list[int] = field(default_factory=list)  # KiB, every `step` requests
    step: int = 500
    wall_s: float = 0.0


async def drive(url: str, requests: Sequence[Planned], concurrency: int, pid: int,
                rss_at: int) -> Run:
    """Send every request, ``concurrency`` at a time; sample the proxy's RSS when ``rss_at``
    requests have ended."""
    run, queue = Run(rss_at=rss_at, step=max(1, len(requests) // 20)), iter(requests)
    t0 = time.monotonic()

    async def worker(todo: Iterator[Planned]) -> None:
        async with async_client(url) as client:
            for req in todo:
                outcome = await send(client, req)
                run.outcomes.append(outcome)
                if outcome.outcome == "BAD":
                    print(f"  BAD: request {req.n}: {req.kind.name}, "
                          f"{'streamed' if req.stream else 'JSON'}, {req.behaviour}: "
                          f"{outcome.detail}", file=sys.stderr)
                done = len(run.outcomes)
                if done == rss_at:
                    run.rss_base_kib = rss_kib(pid)
                if done % run.step == 0:
                    run.rss_curve.append(rss_kib(pid))
                    bad = sum(o.outcome == "BAD" for o in run.outcomes)
                    print(f"  {done}/{len(requests)} done, {bad} BAD, "
                          f"proxy RSS {run.rss_curve[-1] / 1024:.1f} MiB", file=sys.stderr)

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker, queue)
    run.wall_s = time.monotonic() - t0
    return run


async def settle(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``/health`` and ``/cache/stats`` once no slot and no flight is busy, or after
    ``SETTLE_S``."""
    async with async_client(url) as client:
        with trio.move_on_after(SETTLE_S):
            while True:
                health = (await client.get("/health")).json()
                stats = (await client.get("/cache/stats")).json()
                if slots_held(health) == 0 and stats.get("in_flight", 0) == 0:
                    break
                await trio.sleep(0.2)
        return health, stats


def slots_held(health: dict[str, Any]) -> int:
    return sum(int(p.get("in_flight", 0)) for p in health.get("providers", {}).values())


def wait_gone(find: Callable[[], set[int]], within_s: float) -> set[int]:
    """Poll ``find()`` (a set of pids) until it is empty or ``within_s`` passed."""
    deadline = time.monotonic() + within_s
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return set(left)
