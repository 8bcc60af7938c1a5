"""A CLI provider's actor with a warm pool, under trio's MockClock and the scripted spawner.

Exact virtual times, and nothing left: no fake process alive, no limiter slot borrowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
import trio.testing
from sample_requests import user_says

from olp.actors import (
    CliConfig,
    CliRunner,
    Invocation,
    ProviderActor,
    SpawnSpec,
    Ticket,
    Timeouts,
    WarmSettings,
)
from olp.actors.testing import Exit as ExitStep
from olp.actors.testing import FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.failures import Code
from olp.ir import ChatRequest, Error, Event, Message, Start, Stop, TextDelta, TextPart

TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=30)


class SystemFileAdapter(JsonLinesAdapter):
    """Like a claude spawn: the system text is a file fixed at start, the rest on stdin."""

    def invocation(self, request: ChatRequest, *, binary: str, model: str, workdir: Path,
                   extra_args: Sequence[str] = ()) -> Invocation:
        system = "\n".join(m.text() for m in request.messages if m.role == "system")
        turns = "\n".join(m.text() for m in request.messages if m.role != "system")
        return Invocation(argv=[binary, "--model", model, "--system", str(workdir / "s.txt")],
                          stdin=turns.encode(), files={"s.txt": system})


def asked(text: str, system: str = "Be terse.") -> ChatRequest:
    return ChatRequest(model="m", messages=(
        Message(role="system", content=(TextPart(text=system),)),
        Message(role="user", content=(TextPart(text=text),))))


ANSWER: list[Step] = [Line(0.25, event_line(Start(model="m"))),
                      Line(0.25, event_line(TextDelta(text="ok"))), ExitStep(0.25, 0)]


def make_actor(script: Sequence[Step] = ANSWER, *, size: int = 1, ttl_s: float = 600
               ) -> tuple[ProviderActor, FakeSpawner]:
    spawner = FakeSpawner(lambda spec: script)
    runner = CliRunner(SystemFileAdapter(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}),
                       warm=WarmSettings(size=size, ttl_s=ttl_s))
    return ProviderActor("fake", runner, max_concurrent=2, pool=runner.pool), spawner


async def drain(ticket: Ticket) -> list[tuple[float, Event]]:
    return [(trio.current_time(), e) async for e in ticket.events]


def warm(spec: SpawnSpec) -> bool:
    return spec.stdin is None


async def test_the_second_request_is_served_by_the_process_warmed_after_the_first(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor()
    await nursery.start(actor.run)
    first = await drain(await actor.submit(asked("one"), "m"))
    assert [e for _, e in first][-1] == Stop() and not warm(spawner.runs[0].spec)
    # a warm process for the same spawn was started at once, and waits with stdin open
    assert warm(spawner.runs[1].spec) and spawner.runs[1].started_at == 0.0
    await trio.sleep(5)
    t0 = trio.current_time()
    second = await drain(await actor.submit(asked("two"), "m"))
    assert [(t - t0, e) for t, e in second] == [
        (0.25, Start(model="m")), (0.5, TextDelta(text="ok")), (0.75, Stop())]
    served = spawner.runs[1]
    assert (served.input, served.input_closed, served.input_at) == (b"two", True, t0)
    assert served.ended_at == t0 + 0.75 and not served.killed
    assert len(spawner.runs) == 3 and warm(spawner.runs[2].spec)  # refilled
    stats = actor.statistics().warm
    assert stats is not None and (stats.hits, stats.misses, stats.warm) == (1, 1, 1)
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_a_warm_process_never_serves_another_system_text(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor()
    await nursery.start(actor.run)
    await drain(await actor.submit(asked("one", system="A"), "m"))
    await trio.sleep(1)
    bound_to_a = spawner.runs[1]
    assert warm(bound_to_a.spec)
    await drain(await actor.submit(asked("two", system="B"), "m"))
    cold = spawner.runs[2]
    assert not warm(cold.spec) and cold.spec.stdin == b"two"
    assert bound_to_a.input == b"" and bound_to_a.ended_at == 1.75  # ended, never written
    await trio.sleep(1)
    assert warm(spawner.runs[3].spec) and spawner.alive == 1  # now warm for B


async def test_a_warm_process_that_died_is_a_miss_and_the_request_spawns_cold(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor()
    await nursery.start(actor.run)
    await drain(await actor.submit(asked("one"), "m"))
    await trio.sleep(1)
    spawner.crash(1)
    events = await drain(await actor.submit(asked("two"), "m"))
    assert [e for _, e in events][-1] == Stop()
    assert spawner.runs[1].input == b"" and spawner.runs[2].spec.stdin == b"two"
    stats = actor.statistics().warm
    assert stats is not None and stats.failures == 1 and stats.hits == 0


async def test_deadlines_count_from_the_hand_out_not_from_the_start(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([Hang()])
    await nursery.start(actor.run)
    with trio.move_on_after(1):  # the cold spawn hangs; give up on it
        await drain(await actor.submit(asked("one"), "m"))
    await trio.sleep(100)  # the warm process has waited 100 s: no deadline runs meanwhile
    t0 = trio.current_time()
    events = await drain(await actor.submit(asked("two"), "m"))
    assert len(events) == 1
    at, error = events[0]
    assert isinstance(error, Error) and error.code == Code.FIRST_OUTPUT_TIMEOUT
    assert at - t0 == TIMEOUTS.first_output_s
    assert spawner.runs[1].input == b"two" and spawner.runs[1].killed


async def test_abandoning_a_warm_job_kills_its_process(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor([Line(1, event_line(TextDelta(text="a"))), Hang()])
    await nursery.start(actor.run)
    cold = await actor.submit(asked("one"), "m")
    assert (await cold.receive()) == TextDelta(text="a")
    cold.abandon()
    await trio.sleep(1)
    ticket = await actor.submit(asked("two"), "m")
    assert (await ticket.receive()) == TextDelta(text="a")
    ticket.abandon()
    await trio.sleep(0.1)
    assert spawner.runs[1].input == b"two"
    assert spawner.runs[1].killed and spawner.runs[1].ended_at == 3.0
    assert actor.limiter.statistics().borrowed_tokens == 0


async def test_stopping_the_actor_reaps_every_warm_process(
        autojump_clock: trio.testing.MockClock) -> None:
    actor, spawner = make_actor(size=2)
    with trio.move_on_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            await drain(await actor.submit(asked("one"), "m"))
            await drain(await actor.submit(asked("one"), "m"))
            await trio.sleep(100)
    assert spawner.alive == 0 and len(spawner.runs) >= 3
    assert all(r.ended_at is not None and r.ended_at <= 10 for r in spawner.runs)


async def test_retiring_the_actor_ends_its_idle_warm_processes_at_once(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    actor, spawner = make_actor()
    await nursery.start(actor.run)
    await drain(await actor.submit(asked("one"), "m"))
    await trio.sleep(1)
    actor.retire()
    await actor.finished.wait()
    assert trio.current_time() == 1.75 and spawner.alive == 0


async def test_a_request_whose_spawn_depends_on_its_conversation_is_never_warmed(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """The default test adapter puts every message on stdin, but the plain JsonLinesAdapter
    spawn is the same for every request: warmed. One whose *argv* carries a per-request
    value (``model`` here stands for e.g. codex's image files) is not."""
    class PerRequestArgv(SystemFileAdapter):
        def invocation(self, request: ChatRequest, *, binary: str, model: str,
                       workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
            inv = super().invocation(request, binary=binary, model=model, workdir=workdir)
            return Invocation(argv=[*inv.argv, f"--n={len(request.messages)}"],
                              stdin=inv.stdin, files=inv.files)

    spawner = FakeSpawner(lambda spec: ANSWER)
    runner = CliRunner(PerRequestArgv(), spawner,
                       CliConfig(binary="fake-cli", timeouts=TIMEOUTS, proxy_env={}),
                       warm=WarmSettings(size=1))
    actor = ProviderActor("fake", runner, max_concurrent=2, pool=runner.pool)
    await nursery.start(actor.run)
    await drain(await actor.submit(asked("one"), "m"))
    await drain(await actor.submit(user_says("two", model="m"), "m"))
    await trio.sleep(5)
    assert [warm(r.spec) for r in spawner.runs] == [False, False]
