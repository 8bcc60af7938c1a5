"""vibe's warm units (sessions on long-lived vibe-acp servers) under trio's MockClock: the
vibe runner's warm pool with a spawner whose every process is the transcript-replaying fake
vibe-acp of ``test_vibe_acp``. Exact virtual times; every server ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
from test_vibe_acp import FakeVibeAcp, Turn

from olp.actors import CliConfig, CliRunner, SpawnSpec, WarmSettings
from olp.ir import ChatRequest, Event, Message, Stop, TextDelta, TextPart
from olp.providers.vibe import ADAPTER, _acp_units
from olp.providers.vibe._acp_units import AcpUnits

MODEL = "devstral-2-25-12"


class AcpSpawner:
    """Every spawn is a fresh :class:`FakeVibeAcp` answering each prompt with a success."""

    def __init__(self) -> None:
        self.fakes: list[FakeVibeAcp] = []
        self.specs: list[SpawnSpec] = []
        self.ended: list[float] = []

    @contextlib.asynccontextmanager
    async def open(self, spec: SpawnSpec) -> AsyncIterator[FakeVibeAcp]:
        self.specs.append(spec)
        fake = FakeVibeAcp(turns=[Turn("prompt_success") for _ in range(10)])
        self.fakes.append(fake)
        async with trio.open_nursery() as nursery:
            await nursery.start(fake.run)
            try:
                yield fake
            finally:
                fake.exit(-15)
                self.ended.append(trio.current_time())

    @property
    def alive(self) -> int:
        return sum(1 for f in self.fakes if f.returncode is None)


def asked(text: str) -> ChatRequest:
    return ChatRequest(model="devstral", messages=(
        Message(role="system", content=(TextPart(text="Be terse."),)),
        Message(role="user", content=(TextPart(text=text),))))


def make_runner(tmp_path: Path) -> tuple[CliRunner, AcpSpawner]:
    spawner = AcpSpawner()
    home = tmp_path / "realhome"
    home.mkdir()
    runner = CliRunner(ADAPTER, spawner,  # type: ignore[arg-type]
                       CliConfig(binary="/opt/vibe/bin/vibe", env={"MISTRAL_API_KEY": "k"},
                                 real_home=home, proxy_env={"PATH": "/usr/bin"}),
                       warm=WarmSettings(size=1), units=AcpUnits())
    return runner, spawner


async def answer(runner: CliRunner, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await runner.run(request, MODEL, emit)
    return events


async def warm_up(runner: CliRunner, request: ChatRequest) -> None:
    """Record the demand (as a first, cold request would) and wait for the session."""
    assert runner.pool is not None
    assert runner._take_warm(request, MODEL) is None
    while runner.pool.statistics().warm == 0:  # noqa: ASYNC110 - virtual time
        await trio.sleep(0.1)


async def test_a_session_made_ahead_answers_the_next_request(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    runner, spawner = make_runner(tmp_path)
    assert runner.pool is not None
    await nursery.start(runner.pool.run)
    await warm_up(runner, asked("one"))
    [spec] = spawner.specs
    assert spec.argv == ["/opt/vibe/bin/vibe-acp"] and spec.stdin is None
    assert spec.env["MISTRAL_API_KEY"] == "k" and spec.env["VIBE_DISABLED_TOOLS"] == '["*"]'
    assert spec.env["VIBE_SESSION_LOGGING__GENERATE_TITLES"] == "false"
    events = await answer(runner, asked("two"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        "Hello from the mock upstream."
    assert isinstance(events[-1], Stop)
    fake = spawner.fakes[0]
    [prompt] = [m for m in fake.received if m.get("method") == "session/prompt"]
    text = prompt["params"]["prompt"][0]["text"]
    assert text.startswith("System instructions:\nBe terse.") and "two" in text
    assert "_session/delete" in fake.methods()  # the used session is gone from vibe's home
    assert len(spawner.specs) == 1  # answered by the session made ahead, no spawn
    stats = runner.pool.statistics()
    assert (stats.hits, stats.misses) == (1, 1)


async def test_a_server_is_replaced_after_its_sessions_and_ends_when_they_have(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_acp_units, "SESSIONS_PER_SERVER", 2)
    runner, spawner = make_runner(tmp_path)
    assert runner.pool is not None
    await nursery.start(runner.pool.run)
    await warm_up(runner, asked("one"))
    for text in ("two", "three"):
        await answer(runner, asked(text))
        while runner.pool.statistics().warm == 0:  # noqa: ASYNC110 - virtual time
            await trio.sleep(0.1)
    # sessions 1 and 2 on the first server; the third needed a new one, and the first
    # ended once its last session had
    assert len(spawner.fakes) == 2
    assert spawner.fakes[0].returncode is not None and spawner.fakes[1].returncode is None


async def test_a_dead_server_is_a_miss_and_replaced(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path) -> None:
    runner, spawner = make_runner(tmp_path)
    assert runner.pool is not None
    await nursery.start(runner.pool.run)
    await warm_up(runner, asked("one"))
    spawner.fakes[0].exit(-9)
    await trio.sleep(0.1)
    assert runner._take_warm(asked("two"), MODEL) is None
    while runner.pool.statistics().warm == 0:  # noqa: ASYNC110 - virtual time
        await trio.sleep(0.1)
    assert len(spawner.fakes) == 2 and runner.pool.statistics().failures == 1


async def test_closing_the_pool_ends_every_server(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    runner, spawner = make_runner(tmp_path)
    assert runner.pool is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.pool.run)
        await warm_up(runner, asked("one"))
        runner.pool.close()
    assert spawner.alive == 0 and len(spawner.ended) == 1


async def test_cancelling_the_pool_ends_every_server(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    runner, spawner = make_runner(tmp_path)
    assert runner.pool is not None
    with trio.move_on_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.pool.run)
            await warm_up(runner, asked("one"))
            await trio.sleep_forever()
    assert spawner.alive == 0 and spawner.ended == [30.0]
