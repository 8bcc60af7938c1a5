"""A model without a chain goes where the models registry maps it; when that provider is
metered, it needs the same consent to spend as a chain entry. There is no entry to say
``"metered": true``, so the provider's own ``providers.<name>.metered: true`` is the consent:
without it (or with ``OLP_FORBID_METERED_FALLBACK=1``) the model answers 404 naming why and
the fix, and ``GET /v1/models`` does not offer it. Through the HTTP app (MockClock, a
scripted actor)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import Exit, FakeSpawner, JsonLinesAdapter, Line, Step, event_line
from olp.config import Settings, load_registry, load_settings
from olp.engine import Engine, UnknownModel
from olp.http import HeaderPolicy, Services, create_app
from olp.ir import TextDelta
from olp.runtime.routing import Provider, build_router, model_listing, registry_refusal

OWNER = "olp_owner"
AUTH = {"Authorization": f"Bearer {OWNER}"}
WHY = "ANTHROPIC_API_KEY in providers.anthropic.env"


class _Owner:
    key_id, name, tier = 1, "owner", "owner"


class _Keys:
    async def authenticate(self, token: str) -> _Owner | None:
        await trio.lowlevel.checkpoint()
        return _Owner() if token == OWNER else None


def settings(tmp_path: Path, anthropic: dict[str, Any], **environ: str) -> Settings:
    home = tmp_path / "olp"
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps({"providers": {"anthropic": anthropic}}))
    return load_settings({"OLP_HOME": str(home), **environ})


def make(s: Settings, *, metered: bool = True) -> tuple[QuartTrio, ProviderActor]:
    """The app with claude running (a scripted actor that answers "hi"), metered or not."""
    provider = Provider(s.provider("anthropic"), running=True, credentials=True,
                        metered=metered, metered_by=WHY if metered else "")
    registry = load_registry()
    router = build_router(s, registry, {"anthropic": provider})
    script: list[Step] = [Line(0.5, event_line(TextDelta(text="hi"))), Exit(0.5, 0)]
    actor = ProviderActor("anthropic", CliRunner(
        JsonLinesAdapter(), FakeSpawner(lambda _: script),
        CliConfig(binary="claude", timeouts=Timeouts(10, 5, 60), proxy_env={})),
        max_concurrent=2)
    services = Services(
        engine=Engine(router, {"anthropic": actor}), keys=_Keys(),
        models=partial(model_listing, registry, router, frozenset({"anthropic"})),
        actors={"anthropic": actor},
        headers=HeaderPolicy("owner_only", frozenset({"anthropic"}) if metered else frozenset()))
    return create_app(services), actor


async def chat(app: QuartTrio, model: str) -> Any:
    return await app.test_client().post("/v1/chat/completions", headers=AUTH, json={
        "model": model, "messages": [{"role": "user", "content": "hi"}]})


async def ids(app: QuartTrio) -> list[str]:
    listing = await (await app.test_client().get("/v1/models", headers=AUTH)).get_json()
    return [m["id"] for m in listing["data"]]


async def test_a_metered_provider_without_consent_is_refused_loudly(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    app, _ = make(settings(tmp_path, {}))
    resp = await chat(app, "sonnet")
    assert resp.status_code == 404
    error = (await resp.get_json())["error"]
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert error["message"] == (
        f"The model `sonnet` is not served here: `anthropic` is metered ({WHY}), and a model "
        "without a chain needs the consent to spend: set providers.anthropic.metered to true, "
        'or configure a chain whose entry says "metered": true (see `olp doctor`)')
    one = await app.test_client().get("/v1/models/sonnet", headers=AUTH)
    assert one.status_code == 404
    assert "providers.anthropic.metered" in (await one.get_json())["error"]["message"]
    listed = await ids(app)
    assert "sonnet" not in listed and "claude-sonnet-4-6" not in listed


async def test_the_providers_metered_true_is_the_consent(
        tmp_path: Path, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, actor = make(settings(tmp_path, {"metered": True}))
    await nursery.start(actor.run)
    resp = await chat(app, "sonnet")
    assert resp.status_code == 200
    assert resp.headers["X-OLP-Credential"] == "metered"
    assert (await resp.get_json())["choices"][0]["message"]["content"] == "hi"
    assert "sonnet" in await ids(app)


async def test_a_subscription_needs_no_consent(
        tmp_path: Path, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    app, actor = make(settings(tmp_path, {}), metered=False)
    await nursery.start(actor.run)
    resp = await chat(app, "sonnet")
    assert resp.status_code == 200
    assert resp.headers["X-OLP-Credential"] == "subscription"


def test_forbidding_metered_fallback_refuses_even_with_consent(tmp_path: Path) -> None:
    s = settings(tmp_path, {"metered": True}, OLP_FORBID_METERED_FALLBACK="1")
    provider = Provider(s.provider("anthropic"), running=True, credentials=True, metered=True)
    assert registry_refusal(provider, s) == (
        "`anthropic` is metered and OLP_FORBID_METERED_FALLBACK=1")
    router = build_router(s, load_registry(), {"anthropic": provider})
    with pytest.raises(UnknownModel, match="OLP_FORBID_METERED_FALLBACK"):
        router.resolve("sonnet")


def test_a_provider_that_is_not_running_keeps_its_own_cause(tmp_path: Path) -> None:
    s = settings(tmp_path, {})
    provider = Provider(s.provider("anthropic"), running=False, credentials=False,
                        metered=True, problem="`claude` not found on PATH", fix="install it")
    assert registry_refusal(provider, s) is None
    router = build_router(s, load_registry(), {"anthropic": provider})
    with pytest.raises(UnknownModel, match="not found on PATH"):
        router.resolve("sonnet")
