"""Every ``X-OLP-*`` value a client can reach is a safe, bounded header (issue #29, item 5):
a Responses tool name or a requested model holding CR/LF, NUL, non-ASCII or 70 KB still gets
the normal answer, and its echo is ASCII, free of controls and cut short with a visible ``…``
(MockClock, scripted actors). No module sets an ``X-OLP-*`` header but through the encoder."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

import olp
from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, Hang, JsonLinesAdapter, Line, Step, event_line
from olp.engine import Engine, HealthBook, Hop, Router
from olp.http import Services, create_app
from olp.http._chat import LIST_CAP, VALUE_CAP, header_list, header_value, olp_headers
from olp.ir import Error, TextDelta

OWNER = {"Authorization": "Bearer olp_owner"}
OK = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]
DOWN = [Line(1, event_line(Error(code="UPSTREAM_5XX", category="unavailable",
                                 message="down"))), Hang()]
HUGE = "x" * 70_000
#: A model name the decoder takes (≤ 256 characters) whose header form is 1,800 bytes.
WIDE = "工" * 200
HOSTILE = ["evil\r\nSet-Cookie: x=1", "nul\x00byte", "outil-modèle-工具", HUGE]
ELLIPSIS = "%E2%80%A6"  # "…", percent-encoded: the mark of a value or list cut short
#: What every X-OLP value may hold at most: one value's cap, a list's cap, and the JSON detail.
MAX_VALUE = 4096


@dataclass(frozen=True)
class _P:
    name: str = "owner"
    tier: str = "owner"
    key_id: int = 0


class _Keys:
    async def authenticate(self, token: str) -> _P | None:
        await trio.lowlevel.checkpoint()
        return _P() if token == "olp_owner" else None


def make(script: Sequence[Step]) -> tuple[QuartTrio, Engine]:
    """Any requested model routes to the one scripted hop (so its name is echoed)."""
    actor = ProviderActor("p", CliRunner(JsonLinesAdapter(), FakeSpawner(lambda _: script),
                                         CliConfig(binary="x", timeouts=Timeouts(10, 5, 60),
                                                   proxy_env={})), max_concurrent=2)
    router = Router(lambda m: Hop("p", "m"), providers=["p"])
    engine = Engine(router, {"p": actor}, health=HealthBook(clock=trio.current_time))
    services = Services(engine=engine, keys=_Keys(), models=lambda: [], actors={"p": actor})
    return create_app(services), engine


def assert_safe(headers: Any) -> None:
    """Every X-OLP value is visible ASCII (JSON detail may hold spaces) and bounded."""
    olp_values = {k: v for k, v in headers.items() if k.lower().startswith("x-olp-")}
    assert olp_values
    for name, value in olp_values.items():
        assert value.isascii(), name
        assert not any(c in value for c in "\r\n\x00"), name
        assert all(0x20 <= ord(c) < 0x7F for c in value), name
        assert len(value) <= MAX_VALUE, (name, len(value))


def responses_body(**extra: Any) -> dict[str, Any]:
    return {"model": "any", "input": "hi",
            "tools": [{"type": "custom", "name": name} for name in HOSTILE], **extra}


@pytest.mark.parametrize("stream", [False, True])
async def test_hostile_responses_tool_names_are_encoded_and_bounded(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, stream: bool) -> None:
    app, engine = make(OK)
    await nursery.start(engine.actors["p"].run)
    resp = await app.test_client().post("/v1/responses", headers=OWNER,
                                        json=responses_body(stream=stream))
    data = await resp.get_data()
    assert resp.status_code == 200, data
    assert b"hi" in data
    assert_safe(resp.headers)
    ignored = resp.headers["X-OLP-Ignored-Params"]
    assert len(ignored) <= LIST_CAP
    items = ignored.split(",")
    assert unquote(items[0]) == "tools.evil\r\nSet-Cookie: x=1"
    assert unquote(items[1]) == "tools.nul\x00byte"
    assert unquote(items[2]) == "tools.outil-modèle-工具"
    assert all(len(item) <= VALUE_CAP for item in items)
    assert items[3].startswith("tools.xxx") and items[3].endswith(ELLIPSIS)


@pytest.mark.parametrize("model", ["m\r\nSet-Cookie: x=1", "m\x00", "modèle", WIDE])
async def test_a_hostile_requested_model_is_encoded_and_bounded(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, model: str) -> None:
    app, engine = make(OK)
    await nursery.start(engine.actors["p"].run)
    client = app.test_client()
    resp = await client.post("/v1/chat/completions", headers=OWNER, json={
        "model": model, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200
    assert_safe(resp.headers)
    sent = resp.headers["X-OLP-Requested-Model"]
    assert len(sent) <= VALUE_CAP
    assert unquote(sent) == model if len(model) < 100 else sent.endswith(ELLIPSIS)


async def test_an_exhausted_chain_s_headers_are_bounded_too(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, engine = make(DOWN)
    await nursery.start(engine.actors["p"].run)
    resp = await app.test_client().post("/v1/responses", headers=OWNER,
                                        json=responses_body(model=f"m\r\n{WIDE}"))
    assert resp.status_code == 503
    assert_safe(resp.headers)


def test_header_value_bounds_its_length() -> None:
    assert header_value("a" * VALUE_CAP) == "a" * VALUE_CAP
    cut = header_value("a" * (VALUE_CAP + 1))
    assert len(cut) <= VALUE_CAP and cut.endswith(ELLIPSIS) and cut.startswith("aaa")
    wide = header_value("工" * 1000)  # never cut inside a character's escapes
    assert len(wide) <= VALUE_CAP and unquote(wide, errors="strict").endswith("工…")
    assert header_value("\ud800").isascii()  # a lone surrogate (JSON allows the escape)


def test_header_list_encodes_items_and_bounds_the_list() -> None:
    assert header_list(["temperature", "top_p"]) == "temperature,top_p"
    assert header_list(["a,b", "c d"]) == "a%2Cb,c%20d"
    names = [f"tools.{i:04d}" + "y" * 100 for i in range(100)]
    value = header_list(names)
    assert len(value) <= LIST_CAP and value.endswith("," + ELLIPSIS)
    assert value.split(",")[0] == names[0]


def test_olp_headers_names_and_encodes_every_value() -> None:
    headers = olp_headers(requested_model="a\r\nb", fallback_hops=2, ignored_params=("x", "y"),
                          fallback_detail=None, heartbeat="true")
    assert headers == {"X-OLP-Requested-Model": "a%0D%0Ab", "X-OLP-Fallback-Hops": "2",
                       "X-OLP-Ignored-Params": "x,y", "X-OLP-Heartbeat": "true"}


def _olp_header_writes(tree: ast.AST) -> list[int]:
    """Lines where a literal ``X-OLP-*`` name is written as a header: a dict key, an
    assignment target's subscript, or the name given to ``setdefault``/``add``/``set``."""
    def olp(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) \
            and node.value.lower().startswith("x-olp-")
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(olp(k) for k in node.keys):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and olp(node.slice):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"setdefault", "add", "set", "add_header"} \
                and node.args and olp(node.args[0]):
            lines.append(node.lineno)
    return lines


def test_no_module_sets_an_olp_header_but_through_olp_headers() -> None:
    root = Path(olp.__file__).parent
    found = {f"{path.relative_to(root)}:{line}"
             for path in root.rglob("*.py")
             for line in _olp_header_writes(ast.parse(path.read_text(), str(path)))}
    assert not found, f"set these through olp.http._chat.olp_headers: {sorted(found)}"


def test_the_scan_sees_each_way_of_setting_a_header() -> None:
    source = ('h = {"X-OLP-A": v}\nr.headers["X-OLP-B"] = v\nr.headers.setdefault("x-olp-c", v)\n'
              'ok = r.headers.get("X-OLP-D")\n')
    assert _olp_header_writes(ast.parse(source)) == [1, 2, 3]
