"""Error bodies and in-stream error events: the owner's key gets what the hop said; any other
key gets the category and a plain message, never the upstream's internals (connection
targets, exception text, CLI stderr); the log keeps the detail (MockClock, scripted actors)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, HealthBook, Hop, Router
from olp.http import Services, create_app
from olp.ir import Error, TextDelta

OWNER_H = {"Authorization": "Bearer olp_owner"}
GUEST_H = {"Authorization": "Bearer olp_guest"}
MEMBER_H = {"Authorization": "Bearer olp_member"}
SECRET = "connect to http://10.9.8.7:4321/v1 failed: ConnectionRefusedError(111); stderr: boom"


def error(category: str, code: str, **kw: Any) -> Error:
    return Error(code=code, category=category, message=SECRET, **kw)  # type: ignore[arg-type]


def fails(category: str = "unavailable", code: str = "CONNECTION_FAILED",
          **kw: Any) -> list[Step]:
    return [Line(1, event_line(error(category, code, **kw))), Hang()]


def fails_mid_stream() -> list[Step]:
    return [Line(0.5, event_line(TextDelta(text="hi"))),
            Line(0.5, event_line(error("unknown", "CLI_FAILED"))), Hang()]


@dataclass(frozen=True)
class _P:
    name: str
    tier: str
    key_id: int = 0


class _Keys:
    async def authenticate(self, token: str) -> _P | None:
        await trio.lowlevel.checkpoint()
        return {"olp_owner": _P("owner", "owner"), "olp_guest": _P("kid", "guest"),
                "olp_member": _P("partner", "member")}.get(token)


def make(scripts: dict[str, Sequence[Step]], *, heartbeat_s: float = 0.0,
         nursery: trio.Nursery | None = None) -> tuple[QuartTrio, Engine]:
    actors = {n: ProviderActor(n, CliRunner(JsonLinesAdapter(), FakeSpawner(lambda _, s=s: s),
                                            CliConfig(binary=n, timeouts=Timeouts(10, 5, 60),
                                                      proxy_env={})), max_concurrent=2)
              for n, s in scripts.items()}
    router = Router(lambda m: None, providers=list(scripts),
                    chains={"chain": [Hop(n, f"{n}-m") for n in scripts]})
    engine = Engine(router, actors, health=HealthBook(clock=trio.current_time))
    services = Services(engine=engine, keys=_Keys(), models=lambda: [], actors=actors,
                        heartbeat_s=heartbeat_s, background=nursery)
    return create_app(services), engine


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def post(app: QuartTrio, headers: dict[str, str], **body: Any) -> tuple[int, str]:
    resp = await app.test_client().post("/v1/chat/completions", headers=headers, json={
        "model": "chain", "messages": [{"role": "user", "content": "hi"}], **body})
    return resp.status_code, (await resp.get_data()).decode()


def error_of(text: str) -> dict[str, Any]:
    """The ``error`` object of a JSON body or of an SSE stream's error event."""
    if text.startswith("{"):
        return json.loads(text)["error"]  # type: ignore[no-any-return]
    events = [json.loads(line.removeprefix("data: ")) for line in text.split("\n")
              if line.startswith("data: {")]
    return next(e["error"] for e in events if "error" in e)  # type: ignore[no-any-return]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_hop_s_text_is_for_the_owner_only(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, stream: bool,
        caplog: pytest.LogCaptureFixture) -> None:
    app, engine = make({"a": fails()})
    await start(engine, nursery)
    caplog.set_level(logging.INFO, logger="olp.http")
    for headers in (GUEST_H, MEMBER_H):
        status, text = await post(app, headers, stream=stream)
        assert status == 503
        err = error_of(text)
        assert "10.9.8.7" not in text and "ConnectionRefusedError" not in text
        assert "boom" not in text
        assert err["code"] == "connection_failed" and err["type"] == "api_error"
        assert "category: unavailable" in err["message"]
        assert err["message"].startswith("a (a-m): the upstream is unavailable right now")
    status, text = await post(app, OWNER_H, stream=stream)
    assert status == 503 and error_of(text)["message"] == f"a (a-m): {SECRET}"
    chat_lines = [r for r in caplog.records if getattr(r, "event", None) == "chat"]
    assert len(chat_lines) == 3
    assert all(getattr(r, "error", "") == f"a (a-m): {SECRET}" for r in chat_lines)


async def test_an_error_event_after_content_is_plain_for_guests(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery,
        caplog: pytest.LogCaptureFixture) -> None:
    app, engine = make({"a": fails_mid_stream()})
    await start(engine, nursery)
    caplog.set_level(logging.INFO, logger="olp.http")
    status, text = await post(app, GUEST_H, stream=True)
    assert status == 200 and '"hi"' in text and "[DONE]" not in text
    assert SECRET not in text and "10.9.8.7" not in text
    err = error_of(text)
    assert err["code"] == "cli_failed" and "category: unknown" in err["message"]
    status, text = await post(app, OWNER_H, stream=True)
    assert status == 200 and error_of(text)["message"] == SECRET
    logged = [r for r in caplog.records if getattr(r, "event", None) == "stream_error"]
    assert [getattr(r, "error", None) for r in logged] == [SECRET, SECRET]


async def test_a_chain_failing_behind_heartbeats_is_plain_for_guests(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    slow = [Line(5, event_line(error("rate_limited", "RATE_LIMITED"))), Hang()]
    app, engine = make({"a": slow}, heartbeat_s=1, nursery=nursery)
    await start(engine, nursery)
    status, text = await post(app, GUEST_H, stream=True)
    assert status == 200 and text.startswith(": keepalive")
    assert SECRET not in text and "category: rate_limited" in error_of(text)["message"]
    status, text = await post(app, OWNER_H, stream=True)
    assert status == 200 and SECRET in error_of(text)["message"]


async def test_cooldown_reasons_are_for_the_owner_only(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, engine = make({"a": fails("usage_window", "USAGE_WINDOW", retry_after_s=600)})
    await start(engine, nursery)
    status, text = await post(app, GUEST_H)
    assert status == 429 and SECRET not in text
    status, text = await post(app, GUEST_H)  # now every hop is resting
    assert status == 429 and error_of(text)["code"] == "all_hops_cooling"
    assert SECRET not in text and "category: rate_limited" in error_of(text)["message"]
    status, text = await post(app, OWNER_H)
    assert status == 429 and SECRET in error_of(text)["message"]


async def test_a_good_answer_is_the_same_for_every_key(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    ok = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]
    app, engine = make({"a": ok})
    await start(engine, nursery)
    for headers in (GUEST_H, OWNER_H):
        status, text = await post(app, headers)
        assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == "hi"
