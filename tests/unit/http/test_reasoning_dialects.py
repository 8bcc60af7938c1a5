"""The model's thinking through the app (issue #27, ADR 0026): asked for, every dialect returns
it in its own shape, read back by the official SDKs, streamed and not; not asked for, none goes
out (its token count still does); thinking is never the first content (a hop that thought and
failed is passed over unseen); a cached answer replays its thinking (MockClock, scripted
actors, the real SQLite cache)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import pytest
import trio
import trio.testing
from anthropic.lib.streaming._messages import accumulate_event
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.cache import CacheStore, Singleflight
from olp.engine import Capabilities, Engine, HealthBook, Hop, Router, Sources
from olp.http import Services, create_app
from olp.ir import Error, ReasoningDelta, Start, TextDelta, Usage
from olp.store import Database

OWNER = "olp_owner"
AUTH = {"Authorization": f"Bearer {OWNER}"}
THINKS = Capabilities(reasoning=("low", "medium", "high"))
USAGE = Usage(prompt_tokens=20, completion_tokens=9, reasoning_tokens=4)
THOUGHT = "Let me think. Done."
ANSWER: list[Step] = [
    Line(0.1, event_line(Start(model="m-2026"))),
    Line(0.1, event_line(ReasoningDelta(text="Let me think."))),
    Line(0.1, event_line(ReasoningDelta(text=" Done."))),
    Line(0.1, event_line(TextDelta(text="Hel"))), Line(0.1, event_line(TextDelta(text="lo"))),
    Line(0, event_line(USAGE)), Exit(0.1, 0)]
_T = TypeVar("_T")


@dataclass(frozen=True)
class _P:
    name: str
    tier: str
    key_id: int = 1


class _Keys:
    async def authenticate(self, token: str) -> _P | None:
        await trio.lowlevel.checkpoint()
        return _P("owner", "owner") if token == OWNER else None


class InlineDatabase(Database):
    """The real SQLite database, its async calls run in the Trio thread (exact MockClock)."""

    async def read_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.read(fn)

    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


@dataclass
class World:
    app: QuartTrio
    engine: Engine
    spawners: dict[str, FakeSpawner]


def plays(steps: Sequence[Step]) -> FakeSpawner:
    return FakeSpawner(lambda spec: steps)


def make(scripts: dict[str, Sequence[Step]], sources: Sources | None = None) -> World:
    """A chain ``chain`` of one hop per script, every hop's model taking reasoning levels."""
    spawners = {n: plays(s) for n, s in scripts.items()}
    actors = {n: ProviderActor(n, CliRunner(JsonLinesAdapter(), spawners[n], CliConfig(
        binary=n, timeouts=Timeouts(10, 5, 60), proxy_env={})), max_concurrent=2)
        for n in scripts}
    router = Router(lambda m: None, providers=list(scripts),
                    chains={"chain": [Hop(n, f"{n}-m", capabilities=THINKS) for n in scripts]})
    engine = Engine(router, actors, health=HealthBook(clock=trio.current_time),
                    sources=sources)
    services = Services(engine=engine, keys=_Keys(), models=lambda: [], actors=actors)
    return World(create_app(services), engine, spawners)


async def started(world: World, nursery: trio.Nursery) -> World:
    for actor in world.engine.actors.values():
        await nursery.start(actor.run)
    return world


async def body_of(resp: Any) -> bytes:
    data = await resp.get_data()
    assert isinstance(data, bytes)
    return data


async def post(world: World, path: str, body: dict[str, Any]) -> bytes:
    resp = await world.app.test_client().post(path, json=body, headers=AUTH)
    data = await body_of(resp)
    assert resp.status_code == 200, data
    return data


def sse(raw: bytes) -> list[str]:
    return [line.removeprefix("data: ") for frame in raw.decode().split("\n\n")
            for line in frame.split("\n") if line.startswith("data: ")]


# --- the three dialects' bodies, as each SDK reads them ---------------------------------------

CHAT = {"model": "chain", "messages": [{"role": "user", "content": "hi"}]}


def chat_stream(raw: bytes) -> tuple[list[ChatCompletionChunk], Any]:
    """The chunks and the SDK's own accumulation of them (a ``ParsedChatCompletion``)."""
    data = sse(raw)
    assert data[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate_json(d) for d in data[:-1]]
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return chunks, state.get_final_completion()


def responses_stream(raw: bytes) -> tuple[list[Any], Any]:
    """The events and the SDK's own accumulation of them (its ``ResponseStreamState``, which
    checks every output index and item identity), as the SDK constructs streamed events."""
    events: list[Any] = [construct_type(type_=ResponseStreamEvent, value=json.loads(d))
                         for d in sse(raw)]
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(event)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return events, events[-1].response


def messages_stream(raw: bytes) -> tuple[list[dict[str, Any]], Any]:
    payloads = [json.loads(d) for d in sse(raw)]
    snapshot: Any = None
    for payload in payloads:
        if payload["type"] != "ping":
            snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs={})
    return payloads, snapshot


@pytest.mark.parametrize("effort", ["low", "xhigh"])
async def test_chat_returns_reasoning_content(autojump_clock: trio.testing.MockClock,
                                              nursery: trio.Nursery, effort: str) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    asked = {**CHAT, "reasoning_effort": effort}
    message = ChatCompletion.model_validate_json(await post(
        world, "/v1/chat/completions", asked))
    choice = message.choices[0].message
    assert (choice.content, getattr(choice, "reasoning_content", None)) == ("Hello", THOUGHT)
    assert message.usage is not None and message.usage.completion_tokens_details is not None
    assert message.usage.completion_tokens_details.reasoning_tokens == 4

    chunks, final = chat_stream(await post(world, "/v1/chat/completions", {
        **asked, "stream": True, "stream_options": {"include_usage": True}}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    # The thinking comes first, in chunks of its own (no content in them), then the text.
    assert [(d.content, (d.model_extra or {}).get("reasoning_content")) for d in deltas[1:4]] \
        == [(None, "Let me think."), (None, " Done."), ("Hel", None)]
    assert final.choices[0].message.content == "Hello"
    assert getattr(final.choices[0].message, "reasoning_content", None) == THOUGHT
    assert final.usage.completion_tokens_details.reasoning_tokens == 4


@pytest.mark.parametrize("body", [{}, {"reasoning_effort": "none"}])
async def test_chat_without_reasoning_asked_gets_none(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery,
                                                      body: dict[str, Any]) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    for stream in (False, True):
        raw = await post(world, "/v1/chat/completions", {
            **CHAT, **body, "stream": stream, "stream_options": {"include_usage": True}}
            if stream else {**CHAT, **body})
        assert b"reasoning_content" not in raw and b"think" not in raw
        assert b'"completion_tokens_details":{"reasoning_tokens":4}' in raw  # counted anyway


async def test_responses_return_a_reasoning_item(autojump_clock: trio.testing.MockClock,
                                                 nursery: trio.Nursery) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    asked = {"model": "chain", "input": "hi", "reasoning": {"effort": "high", "summary": "auto"}}
    body = Response.model_validate_json(await post(world, "/v1/responses", asked))
    events, streamed = responses_stream(await post(world, "/v1/responses",
                                                   {**asked, "stream": True}))
    for response in (body, streamed):
        reasoning, message = response.output  # type: Any, Any
        assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_")
        assert [(s.type, s.text) for s in reasoning.summary] == [("summary_text", THOUGHT)]
        assert message.type == "message" and response.output_text == "Hello"
        assert response.usage is not None
        assert response.usage.output_tokens_details.reasoning_tokens == 4
    kinds = [e.type for e in events]
    assert kinds[2:9] == [
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
        "response.output_item.done"]
    assert {e.output_index for e in events[2:9]} == {0}
    assert events[9].type == "response.output_item.added" and events[9].output_index == 1


async def test_responses_without_a_summary_get_no_reasoning(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    for stream in (False, True):
        raw = await post(world, "/v1/responses", {"model": "chain", "input": "hi",
                                                  "reasoning": {"effort": "low"},
                                                  "stream": stream})
        assert b'"type":"reasoning"' not in raw and b"think" not in raw
        assert b'"output_tokens_details":{"reasoning_tokens":4}' in raw


MESSAGES = {"model": "chain", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}


async def test_messages_return_a_thinking_block(autojump_clock: trio.testing.MockClock,
                                                nursery: trio.Nursery) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    asked = {**MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    body = anthropic.types.Message.model_validate_json(await post(world, "/v1/messages", asked))
    payloads, streamed = messages_stream(await post(world, "/v1/messages",
                                                    {**asked, "stream": True}))
    for message in (body, streamed):
        thinking, text = message.content  # type: Any, Any
        assert thinking.type == "thinking" and text.type == "text"
        # OLP cannot sign thinking: an empty signature, which the SDK takes.
        assert (thinking.thinking, thinking.signature, text.text) == (THOUGHT, "", "Hello")
    starts = [(p["index"], p["content_block"]["type"]) for p in payloads
              if p["type"] == "content_block_start"]
    assert starts == [(0, "thinking"), (1, "text")]
    deltas = [(p["index"], p["delta"]["type"]) for p in payloads
              if p["type"] == "content_block_delta"]
    assert deltas == [(0, "thinking_delta"), (0, "thinking_delta"), (1, "text_delta"),
                      (1, "text_delta")]


@pytest.mark.parametrize("body", [
    {}, {"thinking": {"type": "disabled"}},
    {"thinking": {"type": "adaptive", "display": "omitted"}, "output_config": {"effort": "low"}},
])
async def test_messages_without_thinking_asked_get_none(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery,
        body: dict[str, Any]) -> None:
    world = await started(make({"a": ANSWER}), nursery)
    for stream in (False, True):
        raw = await post(world, "/v1/messages", {**MESSAGES, **body, "stream": stream})
        assert b"thinking" not in raw and b"think" not in raw


async def test_a_thinking_block_sent_back_is_dropped_not_refused(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """What OLP returned (an empty signature) comes back in the next turn, as Claude Code
    sends it: accepted, and the thinking is not part of the prompt."""
    world = await started(make({"a": ANSWER}), nursery)
    await post(world, "/v1/messages", {**MESSAGES, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "secret musing", "signature": ""},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Hello"}]},
        {"role": "user", "content": "again"}]})
    [run] = world.spawners["a"].runs
    assert run.spec.stdin == b"hi\nHello\nagain"  # the thinking is not in the prompt


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_is_not_content_a_hop_that_thought_and_failed_is_unseen(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, stream: bool) -> None:
    thought_then_failed: list[Step] = [
        Line(0.1, event_line(ReasoningDelta(text="first hop musing"))),
        Line(0.1, event_line(Error(code="RATE_LIMITED", category="rate_limited",
                                   message="slow down"))), Hang()]
    world = await started(make({"a": thought_then_failed, "b": ANSWER}), nursery)
    resp = await world.app.test_client().post("/v1/chat/completions", headers=AUTH, json={
        **CHAT, "reasoning_effort": "medium", "stream": stream})
    raw = await body_of(resp)
    assert resp.status_code == 200 and resp.headers["X-OLP-Provider-Used"] == "b"
    assert b"first hop musing" not in raw and b"Let me think." in raw


@pytest.fixture
def db(tmp_path: Path) -> Iterator[InlineDatabase]:
    database = InlineDatabase(tmp_path / "olp.db")
    yield database
    database.close()


async def test_a_cached_answer_replays_its_thinking(autojump_clock: trio.testing.MockClock,
                                                    nursery: trio.Nursery,
                                                    db: InlineDatabase) -> None:
    # memory_bytes=0: every hit is decoded from the disk, through the cache's event codec.
    store = CacheStore(db, ttl_s=3600, max_entry_bytes=100_000, max_total_bytes=1_000_000,
                       max_entries_per_namespace=100, memory_bytes=0)
    flights = Singleflight(max_buffer=64)
    await nursery.start(flights.run)
    world = await started(make({"a": ANSWER}, Sources(store, flights)), nursery)
    asked = {**CHAT, "max_tokens": 4096, "reasoning_effort": "high"}
    first = await world.app.test_client().post("/v1/chat/completions", headers=AUTH,
                                               json={**asked, "stream": True})
    _, streamed = chat_stream(await body_of(first))
    assert first.headers["X-OLP-Cache"] == "miss"
    assert streamed.choices[0].message.reasoning_content == THOUGHT
    for stream in (True, False):
        again = await world.app.test_client().post("/v1/chat/completions", headers=AUTH,
                                                   json={**asked, "stream": stream})
        assert again.headers["X-OLP-Cache"] == "hit"
        raw = await body_of(again)
        message = chat_stream(raw)[1].choices[0].message if stream else \
            ChatCompletion.model_validate_json(raw).choices[0].message
        assert getattr(message, "reasoning_content", None) == THOUGHT
    # The key is the request's, not its dialect's: a Messages request asking the same (the
    # same level, the thinking back) is a hit too, and gets the thinking in its own shape.
    replayed = await world.app.test_client().post("/v1/messages", headers=AUTH, json={
        **MESSAGES, "output_config": {"effort": "high"}, "thinking": {"type": "adaptive"}})
    assert replayed.headers["X-OLP-Cache"] == "hit"
    reply = anthropic.types.Message.model_validate_json(await body_of(replayed))
    thinking: Any = reply.content[0]
    assert thinking.type == "thinking" and thinking.thinking == THOUGHT
    assert len(world.spawners["a"].runs) == 1
