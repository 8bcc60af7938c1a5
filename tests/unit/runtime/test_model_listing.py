"""``GET /v1/models`` lists every id once (a chain wins over a registry alias of the same name),
``GET /v1/models/{id}`` answers as OpenAI's does, and a model that cannot be served says why:
a chain with no usable entry is a 503 naming what is missing, a known model whose provider is
not running is a 404 naming the cause and the fix."""

from __future__ import annotations

from functools import partial

import pytest
import trio
import trio.testing

from olp.config import load_registry
from olp.engine import Engine, Hop, Router, UnknownModel, UnusableChain
from olp.http import Services, create_app
from olp.runtime.routing import model_listing

OWNER = "olp_owner"
AUTH = {"Authorization": f"Bearer {OWNER}"}
MISSING = "`codex` not found on PATH (fix: npm install -g @openai/codex; see `olp doctor`)"


class _Owner:
    key_id, name, tier = 1, "owner", "owner"


class _Keys:
    async def authenticate(self, token: str) -> _Owner | None:
        await trio.lowlevel.checkpoint()
        return _Owner() if token == OWNER else None


def _lookup(model: str) -> Hop | None:
    entry = load_registry().resolve(model)
    return Hop(entry.provider, entry.model) if entry else None


def router() -> Router:
    return Router(_lookup, providers=["anthropic"],
                  chains={"sonnet": [Hop("anthropic", "claude-opus-4-8")],
                          "smart": [Hop("anthropic", "claude-sonnet-4-6")]},
                  unusable={"codex": "openai:gpt-5.3-codex: `codex` not found on PATH"},
                  unserved={"openai": MISSING})


def test_every_id_once_and_a_chain_wins_over_an_alias() -> None:
    rows = model_listing(load_registry(), router(), {"anthropic"})
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert [r for r in rows if r["id"] == "sonnet"] == [
        {"id": "sonnet", "object": "model", "created": 0, "owned_by": "olp"}]
    assert next(r for r in rows if r["id"] == "opus")["owned_by"] == "anthropic"
    # An unusable chain is not offered, and it still shadows the alias it is named like.
    assert "codex" not in ids
    assert not any(r["owned_by"] == "openai" for r in rows)  # not running


def test_the_router_names_why_a_known_model_is_not_served() -> None:
    r = router()
    with pytest.raises(UnusableChain) as chain:
        r.resolve("codex")
    assert "`codex` not found on PATH" in chain.value.message
    assert "olp doctor" in chain.value.message
    with pytest.raises(UnknownModel) as known:
        r.resolve("gpt-5.5")
    assert not isinstance(known.value, UnusableChain)
    assert known.value.message == f"The model `gpt-5.5` is not served here: {MISSING}"
    with pytest.raises(UnknownModel) as typo:
        r.resolve("gpt-nope")
    assert typo.value.cause is None and "does not exist" in typo.value.message


async def test_the_endpoints(autojump_clock: trio.testing.MockClock) -> None:
    r = router()
    app = create_app(Services(engine=Engine(r, {}), keys=_Keys(),
                              models=partial(model_listing, load_registry(), r, {"anthropic"})))
    client = app.test_client()
    listing = await (await client.get("/v1/models", headers=AUTH)).get_json()
    one = await client.get("/v1/models/sonnet", headers=AUTH)
    assert one.status_code == 200
    assert await one.get_json() == next(m for m in listing["data"] if m["id"] == "sonnet")
    missing = await client.get("/v1/models/gpt-nope", headers=AUTH)
    assert missing.status_code == 404
    error = (await missing.get_json())["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error", "model_not_found", "model")
    unserved = await client.get("/v1/models/gpt-5.5", headers=AUTH)
    assert unserved.status_code == 404 and MISSING in (await unserved.get_json())["error"][
        "message"]

    async def chat(model: str) -> tuple[int, dict[str, str]]:
        resp = await client.post("/v1/chat/completions", headers=AUTH, json={
            "model": model, "messages": [{"role": "user", "content": "hi"}]})
        return resp.status_code, (await resp.get_json())["error"]

    status, error = await chat("codex")
    assert status == 503 and error["code"] == "chain_unusable"
    assert "`codex` not found on PATH" in error["message"] and "olp doctor" in error["message"]
    status, error = await chat("gpt-5.5")
    assert status == 404 and error["code"] == "model_not_found"
    assert "npm install -g @openai/codex" in error["message"]
    health = await (await client.get("/health", headers=AUTH)).get_json()
    assert health["chains"]["codex"] == {
        "usable": False, "reason": "openai:gpt-5.3-codex: `codex` not found on PATH",
        "hops": [], "pruned": []}  # (this Router is built by hand, without them)
    assert health["chains"]["smart"]["usable"] is True
    assert health["chains"]["smart"]["hops"][0].endswith("anthropic/claude-sonnet-4-6")
