"""X-OLP-* header values are ASCII: names from the client or the config that are not
(a chain called ``modèle``, a model id in CJK, a provider ``routeur-é``) are percent-encoded as
UTF-8 and decode back; visible-ASCII names pass unchanged (MockClock, scripted actors)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, HealthBook, Hop, Router
from olp.http import Services, create_app
from olp.http._chat import header_value
from olp.ir import Error, TextDelta

OWNER = {"Authorization": "Bearer olp_owner"}
OK = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]
DOWN = [Line(1, event_line(Error(code="UPSTREAM_5XX", category="unavailable",
                                 message="down"))), Hang()]
CHAIN, MODEL, PROVIDER, ENTRY = "modèle", "模型-1", "routeur-é", "sübscription 1"
OLP_NAMED = ("X-OLP-Requested-Model", "X-OLP-Provider-Used", "X-OLP-Model-Used")


@dataclass(frozen=True)
class _P:
    name: str = "owner"
    tier: str = "owner"
    key_id: int = 0


class _Keys:
    async def authenticate(self, token: str) -> _P | None:
        await trio.lowlevel.checkpoint()
        return _P() if token == "olp_owner" else None


def make(script: Sequence[Step], *, heartbeat_s: float = 0.0,
         nursery: trio.Nursery | None = None) -> tuple[QuartTrio, Engine]:
    actor = ProviderActor(PROVIDER, CliRunner(
        JsonLinesAdapter(), FakeSpawner(lambda _: script),
        CliConfig(binary="x", timeouts=Timeouts(10, 5, 60), proxy_env={})), max_concurrent=2)
    router = Router(lambda m: None, providers=[PROVIDER],
                    chains={CHAIN: [Hop(PROVIDER, MODEL, name=ENTRY)]})
    engine = Engine(router, {PROVIDER: actor}, health=HealthBook(clock=trio.current_time))
    services = Services(engine=engine, keys=_Keys(), models=lambda: [], actors={PROVIDER: actor},
                        heartbeat_s=heartbeat_s, background=nursery)
    return create_app(services), engine


async def post(app: QuartTrio, **body: Any) -> Any:
    return await app.test_client().post("/v1/chat/completions", headers=OWNER, json={
        "model": CHAIN, "messages": [{"role": "user", "content": "hi"}], **body})


def assert_ascii_and_decodes(headers: Any, names: Sequence[str]) -> None:
    expected = {"X-OLP-Requested-Model": CHAIN, "X-OLP-Provider-Used": PROVIDER,
                "X-OLP-Model-Used": MODEL, "X-OLP-Served-By": ENTRY,
                "X-OLP-Fallback-Exhausted": PROVIDER}
    for name in names:
        value = headers[name]
        assert value.isascii() and value.isprintable() and " " not in value, (name, value)
        assert unquote(value) == expected[name]
    for name, value in headers.items():
        if name.lower().startswith("x-olp-"):
            assert value.isascii(), (name, value)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_s_headers_are_ascii(autojump_clock: trio.testing.MockClock,
                                             nursery: trio.Nursery, stream: bool) -> None:
    app, engine = make(OK)
    await nursery.start(engine.actors[PROVIDER].run)
    resp = await post(app, stream=stream)
    assert resp.status_code == 200
    await resp.get_data()
    assert_ascii_and_decodes(resp.headers, (*OLP_NAMED, "X-OLP-Served-By"))
    assert resp.headers["X-OLP-Requested-Model"] == "mod%C3%A8le"


async def test_an_exhausted_chain_s_headers_are_ascii(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    app, engine = make(DOWN)
    await nursery.start(engine.actors[PROVIDER].run)
    resp = await post(app)
    assert resp.status_code == 503
    assert_ascii_and_decodes(resp.headers, (*OLP_NAMED, "X-OLP-Fallback-Exhausted"))


async def test_a_heartbeat_stream_s_headers_are_ascii(autojump_clock: trio.testing.MockClock,
                                                      nursery: trio.Nursery) -> None:
    slow = [Line(5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]
    app, engine = make(slow, heartbeat_s=1, nursery=nursery)
    await nursery.start(engine.actors[PROVIDER].run)
    resp = await post(app, stream=True)
    assert resp.status_code == 200 and resp.headers["X-OLP-Heartbeat"] == "true"
    await resp.get_data()
    assert_ascii_and_decodes(resp.headers, ("X-OLP-Requested-Model",))


@pytest.mark.parametrize(("raw", "sent"), [
    ("sonnet", "sonnet"), ("anthropic:claude-sonnet-4-6", "anthropic:claude-sonnet-4-6"),
    ("org/model@v1.2_x~y", "org/model@v1.2_x~y"), ("50%", "50%25"), ("a b", "a%20b"),
    ("tab\there", "tab%09here"), ("line\r\nX-Evil: 1", "line%0D%0AX-Evil:%201"),
    ("modèle", "mod%C3%A8le"), ("模型", "%E6%A8%A1%E5%9E%8B"), ("\x7f", "%7F"),
])
def test_header_value_encoding(raw: str, sent: str) -> None:
    assert header_value(raw) == sent
    assert unquote(sent) == raw
