"""The end of the drain grace (olp.http._stopping): a stream still running, committed by a
heartbeat or already answering, ends with the ``server_shutting_down`` error event at that
very moment, and the engine's work (the CLI) is stopped with it."""

from __future__ import annotations

import json
from collections.abc import Sequence

import trio
import trio.testing
from test_heartbeat import exchange, kinds, text

from olp.actors.testing import Hang, Step
from olp.http._stopping import STOPPING, Stopping


async def cut_at(at: float, scripts: dict[str, Sequence[Step]],
                 nursery: trio.Nursery) -> tuple[list[tuple[float, str]], dict[str, int], str]:
    stopping = Stopping()
    STOPPING.set(stopping)

    async def stop() -> None:
        await trio.sleep(at)
        stopping.set()

    nursery.start_soon(stop)
    status, _, frames, leaks = await exchange(scripts, nursery)
    assert status == 200
    return kinds(frames), leaks, frames[-1][1]


SHUTDOWN = {"error": {"message": "server shutting down", "type": "api_error", "param": None,
                      "code": "server_shutting_down"}}


async def test_a_stream_still_choosing_its_hop_ends_with_the_shutdown_error(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    got, leaks, last = await cut_at(2.5, {"a": [Hang()]}, nursery)
    assert got == [(1.0, "keepalive"), (2.0, "keepalive"), (2.5, "error")]
    assert json.loads(last.removeprefix("data: ")) == SHUTDOWN
    assert leaks == {"alive": 0, "slots": 0}


async def test_a_stream_mid_answer_ends_with_the_shutdown_error(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    got, leaks, last = await cut_at(2.2, {"a": [text(0.5, "x"), Hang()]}, nursery)
    assert got == [(0.5, "content"), (1.5, "keepalive"), (2.2, "error")]
    assert json.loads(last.removeprefix("data: ")) == SHUTDOWN
    assert leaks == {"alive": 0, "slots": 0}
