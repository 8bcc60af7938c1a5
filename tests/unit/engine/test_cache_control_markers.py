"""Anthropic-style ``cache_control`` markers: decoded, keyed apart, and a reason for
anthropic hops to bypass the cache (docs/adr/0006-cache.md)."""

from __future__ import annotations

import json

import trio
import trio.testing

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, event_line
from olp.cache import Singleflight, cache_key
from olp.engine import Hop, RequestContext, Sources
from olp.ir import ChatRequest, Event, TextDelta
from olp.ir.openai import decode_chat_request


def request(marked: bool) -> ChatRequest:
    part: dict[str, object] = {"type": "text", "text": "a long shared preamble"}
    if marked:
        part["cache_control"] = {"type": "ephemeral"}
    return decode_chat_request(json.dumps({"model": "m", "messages": [
        {"role": "user", "content": [part]}]}).encode())


def test_markers_are_decoded_and_keyed_apart() -> None:
    assert request(True).has_cache_control_markers()
    assert not request(False).has_cache_control_markers()
    assert cache_key(request(True), provider="p", model="m") != \
        cache_key(request(False), provider="p", model="m")


class _Cache:
    async def get(self, namespace: str, key: str) -> list[Event] | None:
        await trio.lowlevel.checkpoint()
        return None

    async def put(self, namespace: str, key: str, provider: str, events: object) -> bool:
        await trio.lowlevel.checkpoint()
        return True


async def test_anthropic_hops_with_markers_bypass_the_cache(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    flights = Singleflight()
    await nursery.start(flights.run)
    sources = Sources(_Cache(), flights)
    for provider, marked, expected in (("anthropic", True, "bypass"),
                                       ("anthropic", False, "miss"), ("openai", True, "miss")):
        actor = ProviderActor(provider, CliRunner(JsonLinesAdapter(), FakeSpawner(
            lambda _: [Line(0, event_line(TextDelta(text="x"))), Exit(0, 0)]),
            CliConfig(binary="x", timeouts=Timeouts(), proxy_env={})), max_concurrent=1)
        await nursery.start(actor.run)
        source, status = await sources.open(actor, Hop(provider, "m"), request(marked),
                                            RequestContext("1"))
        source.abandon()
        assert status == expected, (provider, marked)
