"""Cached input tokens through the app: a CLI that reported them (here a scripted one) has
them reach every client dialect in its own convention, read back by the official SDKs' models,
and the owner's views: the ledger, ``/metrics`` and the dashboard's figures."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import pytest
import trio
import trio.testing
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseCompletedEvent
from quart_trio import QuartTrio

from olp.accounting import Recorder, usage_report
from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, event_line
from olp.engine import Engine, Hop, Router
from olp.http import Services, create_app
from olp.http._admin_routes import _dashboard_figures
from olp.ir import Start, TextDelta, Usage
from olp.store import Database

OWNER = "olp_owner_token"
AUTH = {"Authorization": f"Bearer {OWNER}"}
LOOPBACK = {"client": ("127.0.0.1", 50001)}
CACHED = Usage(prompt_tokens=1200, completion_tokens=5, cached_tokens=1024, cache_write_tokens=100)
SCRIPT = [Line(0.1, event_line(Start(model="claude-sonnet-4-6"))),
          Line(0.1, event_line(TextDelta(text="hi"))), Line(0, event_line(CACHED)),
          Exit(0.1, 0)]
_T = TypeVar("_T")


class InlineDatabase(Database):
    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


@dataclass(frozen=True)
class _Principal:
    name: str
    tier: str
    key_id: int = 0
    active: bool = True


class _Keys:
    async def authenticate(self, token: str) -> _Principal | None:
        await trio.lowlevel.checkpoint()
        return _Principal("owner", "owner", 1) if token == OWNER else None


@dataclass
class World:
    app: QuartTrio
    db: Database
    recorder: Recorder
    actor: ProviderActor


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    db = InlineDatabase(tmp_path / "olp.db")
    actor = ProviderActor("anthropic", CliRunner(JsonLinesAdapter(), FakeSpawner(
        lambda spec: SCRIPT), CliConfig(binary="claude", timeouts=Timeouts(
            first_output_s=10, idle_s=5, total_s=60), proxy_env={})), max_concurrent=4)
    router = Router(lambda m: Hop("anthropic", "claude-sonnet-4-6") if m == "sonnet" else None,
                    providers=["anthropic"])
    recorder = Recorder(db)
    services = Services(engine=Engine(router, {"anthropic": actor}), keys=_Keys(),
                        models=lambda: [{"id": "sonnet", "object": "model"}],
                        actors={"anthropic": actor}, max_body_bytes=1 << 20,
                        recorder=recorder, db=db)
    yield World(create_app(services), db, recorder, actor)
    db.close()


async def post(world: World, path: str, body: dict[str, Any]) -> bytes:
    resp = await world.app.test_client().post(path, json=body, headers=AUTH,
                                              scope_base=LOOPBACK)
    assert resp.status_code == 200
    return await resp.get_data()


def sse_data(raw: bytes) -> list[str]:
    return [line.removeprefix("data: ") for frame in raw.decode().split("\n\n")
            for line in frame.split("\n") if line.startswith("data: ")]


CHAT = {"model": "sonnet", "messages": [{"role": "user", "content": "hi"}]}


async def test_chat_completions_tell_cached_tokens_in_prompt_tokens_details(
        world: World, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    await nursery.start(world.actor.run)
    body = ChatCompletion.model_validate_json(await post(world, "/v1/chat/completions", CHAT))
    streamed = await post(world, "/v1/chat/completions", {
        **CHAT, "stream": True, "stream_options": {"include_usage": True}})
    last = ChatCompletionChunk.model_validate_json(sse_data(streamed)[-2])  # before [DONE]
    for usage in (body.usage, last.usage):
        assert usage is not None and usage.prompt_tokens_details is not None
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
            1200, 5, 1205)
        assert (usage.prompt_tokens_details.cached_tokens,
                usage.prompt_tokens_details.cache_write_tokens) == (1024, 100)


MESSAGES = {"model": "sonnet", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


async def test_messages_tell_cache_reads_and_writes_apart_from_input_tokens(
        world: World, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    await nursery.start(world.actor.run)
    body = anthropic.types.Message.model_validate_json(await post(world, "/v1/messages",
                                                                  MESSAGES))
    streamed = sse_data(await post(world, "/v1/messages", {**MESSAGES, "stream": True}))
    deltas = [json.loads(d) for d in streamed if json.loads(d)["type"] == "message_delta"]
    [delta] = [anthropic.types.RawMessageDeltaEvent.model_validate(d) for d in deltas]
    for usage in (body.usage, delta.usage):
        assert (usage.input_tokens, usage.cache_read_input_tokens,
                usage.cache_creation_input_tokens, usage.output_tokens) == (76, 1024, 100, 5)


RESPONSES = {"model": "sonnet", "input": "hi"}


async def test_responses_tell_cached_tokens_in_input_tokens_details(
        world: World, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    await nursery.start(world.actor.run)
    body = Response.model_validate_json(await post(world, "/v1/responses", RESPONSES))
    streamed = sse_data(await post(world, "/v1/responses", {**RESPONSES, "stream": True}))
    completed = ResponseCompletedEvent.model_validate_json(streamed[-1]).response
    for response in (body, completed):
        usage = response.usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (1200, 5, 1205)
        assert (usage.input_tokens_details.cached_tokens,
                usage.input_tokens_details.cache_write_tokens) == (1024, 100)


async def test_the_ledger_metrics_and_dashboard_count_cached_input(
        world: World, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    await nursery.start(world.actor.run)
    await post(world, "/v1/chat/completions", CHAT)
    await post(world, "/v1/messages", MESSAGES)
    await world.recorder.flush()
    [row] = usage_report(world.db, time.time(), days=1)
    assert (row["requests"], row["prompt_tokens"], row["cached_tokens"],
            row["completion_tokens"]) == (2, 2400, 2048, 10)
    assert (row["provider"], row["account"]) == ("anthropic", "default")
    resp = await world.app.test_client().get("/metrics", headers=AUTH, scope_base=LOOPBACK)
    text = (await resp.get_data()).decode()
    lines = text.splitlines()
    assert 'olp_cached_input_tokens_total{account="default",provider="anthropic"} 2048.0' \
        in lines
    assert 'olp_tokens_total{account="default",kind="prompt",provider="anthropic"} 2400.0' \
        in lines
    today = _dashboard_figures(world.db, time.time())["usage_today"]["1"]
    assert today == {"requests": 2, "tokens": 2410, "prompt_tokens": 2400, "cached_tokens": 2048}
