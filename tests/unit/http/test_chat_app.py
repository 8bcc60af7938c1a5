"""The Quart-Trio app through its test client, with scripted actors under MockClock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, Hop, Router
from olp.http import Services, create_app
from olp.ir import Error, Start, TextDelta, Usage

OWNER, GUEST = "olp_owner_token", "olp_guest_token"
DEFAULT_TIMEOUTS = Timeouts(first_output_s=10, idle_s=5, total_s=60)


@dataclass(frozen=True)
class _Principal:
    name: str
    tier: str
    key_id: int = 0


class _Keys:
    async def authenticate(self, token: str) -> _Principal | None:
        await trio.lowlevel.checkpoint()
        principals = {OWNER: _Principal("owner", "owner", 1), GUEST: _Principal("kid", "guest", 2)}
        return principals.get(token)


def make_app(script: Sequence[Step], *, max_body: int = 4096,
             timeouts: Timeouts = DEFAULT_TIMEOUTS,
             ) -> tuple[QuartTrio, ProviderActor, FakeSpawner]:
    spawner = FakeSpawner(lambda spec: script)
    actor = ProviderActor("anthropic", CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="claude", timeouts=timeouts, proxy_env={})), max_concurrent=1)
    router = Router(lambda m: Hop("anthropic", "claude-sonnet-4-6") if m == "sonnet" else None,
                    providers=["anthropic"])
    services = Services(engine=Engine(router, {"anthropic": actor}), keys=_Keys(),
                        models=lambda: [{"id": "sonnet", "object": "model"}],
                        actors={"anthropic": actor}, max_body_bytes=max_body)
    return create_app(services), actor, spawner


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "sonnet", "messages": [{"role": "user", "content": "hi"}], **extra}


AUTH = {"Authorization": f"Bearer {OWNER}"}
JSON_TYPE = "application/json"
SUCCESS = [Line(0.5, event_line(Start(model="claude-sonnet-4-6-20260101"))),
           Line(0.5, event_line(TextDelta(text="Hel"))),
           Line(0.5, event_line(TextDelta(text="lo"))),
           Line(0, event_line(Usage(prompt_tokens=25, completion_tokens=7))), Exit(0.1, 0)]


async def test_non_streaming_completion(autojump_clock: trio.testing.MockClock,
                                        nursery: trio.Nursery) -> None:
    app, actor, spawner = make_app(SUCCESS)
    await nursery.start(actor.run)
    resp = await app.test_client().post("/v1/chat/completions", json=body(), headers=AUTH)
    assert resp.status_code == 200
    data = await resp.get_json()
    assert data["choices"][0]["message"]["content"] == "Hello"
    assert data["model"] == "claude-sonnet-4-6-20260101"
    assert data["usage"] == {"prompt_tokens": 25, "completion_tokens": 7, "total_tokens": 32,
                             "prompt_tokens_details": {"cached_tokens": 0,
                                                       "cache_write_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}
    assert resp.headers["X-OLP-Provider-Used"] == "anthropic"
    assert resp.headers["X-OLP-Model-Used"] == "claude-sonnet-4-6"
    assert resp.headers["X-OLP-Requested-Model"] == "sonnet"
    assert resp.headers["X-OLP-Fallback-Hops"] == "0"
    assert resp.headers["X-OLP-Latency-Ms"] == "1600"  # virtual: to the header write
    assert spawner.alive == 0 and actor.limiter.statistics().borrowed_tokens == 0


async def test_streaming_completion_frames(autojump_clock: trio.testing.MockClock,
                                           nursery: trio.Nursery) -> None:
    app, actor, spawner = make_app(SUCCESS)
    await nursery.start(actor.run)
    resp = await app.test_client().post(
        "/v1/chat/completions", headers=AUTH,
        json=body(stream=True, stream_options={"include_usage": True}))
    assert resp.status_code == 200 and resp.mimetype == "text/event-stream"
    raw = (await resp.get_data()).decode()
    frames = [f.removeprefix("data: ") for f in raw.split("\n\n") if f]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 32
    assert {c["model"] for c in chunks} == {"claude-sonnet-4-6-20260101"}


async def test_failure_after_content_ends_with_error_event_and_no_done(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    crash = Error(code="CLI_FAILED", category="unknown", message="exit 1")
    app, actor, spawner = make_app([Line(1, event_line(TextDelta(text="par"))),
                                    Line(1, event_line(crash)), Hang()])
    await nursery.start(actor.run)
    resp = await app.test_client().post("/v1/chat/completions", headers=AUTH,
                                        json=body(stream=True))
    assert resp.status_code == 200
    frames = [f for f in (await resp.get_data()).decode().split("\n\n") if f]
    assert "[DONE]" not in frames[-1]
    assert json.loads(frames[-1].removeprefix("data: "))["error"]["code"] == "cli_failed"
    assert spawner.alive == 0


@pytest.mark.parametrize(("category", "status", "code"), [
    ("rate_limited", 429, "rate_limited"), ("usage_window", 429, "usage_window"),
    ("billing", 429, "billing"), ("unavailable", 503, "unavailable"),
    ("auth", 502, "upstream_auth_failed"), ("context_length", 400, "context_length_exceeded"),
    ("unknown", 502, "unknown"), ("client_error", 422, "client_error"),
])
async def test_failure_before_content_is_a_real_status(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery,
        category: str, status: int, code: str) -> None:
    err = Error(code=category.upper(), category=category, message="why",  # type: ignore[arg-type]
                status=422, retry_after_s=12.5)
    for stream in (False, True):
        app, actor, _ = make_app([Line(1, event_line(err)), Hang()])
        await nursery.start(actor.run)
        resp = await app.test_client().post("/v1/chat/completions", headers=AUTH,
                                            json=body(stream=stream))
        assert resp.status_code == status
        data = await resp.get_json()
        assert data["error"]["code"] == code and "why" in data["error"]["message"]
        assert resp.headers["X-OLP-Fallback-Exhausted"] == "anthropic"
        if status == 429:
            assert resp.headers["Retry-After"] == "13"


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401), ({"Authorization": "Bearer nope"}, 401), ({"x-api-key": GUEST}, 200),
    ({"Authorization": f"Bearer {GUEST}"}, 200)])
async def test_every_endpoint_needs_a_key(autojump_clock: trio.testing.MockClock,
                                          headers: dict[str, str], status: int) -> None:
    app, _, _ = make_app([])
    client = app.test_client()
    for path in ("/health", "/v1/models"):
        resp = await client.get(path, headers=headers)
        assert resp.status_code == status
        if status == 401:
            assert (await resp.get_json())["error"]["code"] == "invalid_api_key"


async def test_health_is_trimmed_for_guests(autojump_clock: trio.testing.MockClock) -> None:
    app, _, _ = make_app([])
    client = app.test_client()
    owner = await (await client.get("/health", headers=AUTH)).get_json()
    guest = await (await client.get("/health", headers={"x-api-key": GUEST})).get_json()
    assert owner["providers"]["anthropic"]["max_concurrent"] == 1
    assert "providers" not in guest and guest["status"] == "ok"


async def test_bad_requests(autojump_clock: trio.testing.MockClock) -> None:
    app, _, spawner = make_app([], max_body=4096)
    client = app.test_client()
    url = "/v1/chat/completions"
    resp = await client.post(url, headers=AUTH, data="{}", )
    assert resp.status_code == 415
    resp = await client.post(url, headers=AUTH, json=body(messages=[{"role": "user",
                                                                     "content": "x" * 5000}]))
    assert resp.status_code == 413
    assert (await resp.get_json())["error"]["code"] == "request_too_large"
    resp = await client.post(url, headers=AUTH, json=body(temperature="hot"))
    assert resp.status_code == 400
    assert (await resp.get_json())["error"]["param"] == "temperature"
    resp = await client.post(url, headers=AUTH, json=body(model="gpt-nope"))
    assert resp.status_code == 404
    assert (await resp.get_json())["error"]["code"] == "model_not_found"
    resp = await client.get("/nowhere", headers=AUTH)
    assert resp.status_code == 404 and "error" in await resp.get_json()
    assert spawner.runs == []


async def test_disconnect_mid_stream_kills_the_job(autojump_clock: trio.testing.MockClock,
                                                   nursery: trio.Nursery) -> None:
    app, actor, spawner = make_app([Line(1, event_line(TextDelta(text="a"))),
                                    *[Line(1, event_line(TextDelta(text="b")))] * 50])
    await nursery.start(actor.run)
    # quart-trio's test client can hang after disconnect on an unfinished stream (it waits
    # for the body's end): bound the block; under autojump the bound is instant.
    with trio.move_on_after(30):
        async with app.test_client().request("/v1/chat/completions", method="POST",
                                             headers={**AUTH, "Content-Type": JSON_TYPE}
                                             ) as conn:
            await conn.send(json.dumps(body(stream=True)).encode())
            await conn.send_complete()
            first = await conn.receive()
            assert b"role" in first and trio.current_time() == 1
            await trio.sleep(2.5)
            await conn.disconnect()
            await trio.sleep(0.1)
            assert spawner.alive == 0
            assert actor.limiter.statistics().borrowed_tokens == 0
    assert spawner.runs[0].killed and spawner.runs[0].ended_at == 3.5


async def test_long_stream_is_not_cut_by_quarts_response_timeout(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    # Quart's RESPONSE_TIMEOUT defaults to 60 s and silently truncates a streamed body.
    script = [Line(4, event_line(TextDelta(text="."))) for _ in range(40)] + [Exit(0, 0)]
    app, actor, _ = make_app(script, timeouts=Timeouts(10, 5, 600))
    await nursery.start(actor.run)
    raw = b""
    # Read as a client does: the test client's buffer holds only ~10 unread body chunks.
    with trio.move_on_after(300):
        async with app.test_client().request("/v1/chat/completions", method="POST",
                                             headers={**AUTH, "Content-Type": JSON_TYPE}
                                             ) as conn:
            await conn.send(json.dumps(body(stream=True)).encode())
            await conn.send_complete()
            while not raw.endswith(b"data: [DONE]\n\n"):
                raw += await conn.receive()
    assert trio.current_time() == 160
    assert raw.count(b'"content":"."') == 40


async def test_anonymous_access_is_opt_in(autojump_clock: trio.testing.MockClock,
                                          nursery: trio.Nursery) -> None:
    app, actor, _ = make_app(SUCCESS)
    await nursery.start(actor.run)
    assert (await app.test_client().get("/v1/models")).status_code == 401
    # An app that allows it (auth.allow_anonymous):
    spawner = FakeSpawner(lambda spec: SUCCESS)
    anon_actor = ProviderActor("anthropic", CliRunner(JsonLinesAdapter(), spawner, CliConfig(
        binary="claude", timeouts=DEFAULT_TIMEOUTS, proxy_env={})), max_concurrent=1)
    await nursery.start(anon_actor.run)
    router = Router(lambda m: Hop("anthropic", "claude-sonnet-4-6"), providers=["anthropic"])
    open_app = create_app(Services(engine=Engine(router, {"anthropic": anon_actor}),
                                   keys=_Keys(), models=lambda: [], allow_anonymous=True))
    client = open_app.test_client()
    resp = await client.post("/v1/chat/completions", json=body())
    assert resp.status_code == 200
    health = await (await client.get("/health")).get_json()
    assert "providers" not in health  # a guest's view
    assert (await client.get("/health", headers={"x-api-key": "wrong"})).status_code == 401
