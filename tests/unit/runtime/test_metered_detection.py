"""Metered is a provider property computed from where its credential comes from: an API key
that reaches the CLI (from the provider's ``env``, or passed through from the proxy's
environment) is metered spend; ``providers.<name>.metered`` overrides the detection; and a
metered provider's chain entry still needs the entry's consent, and a model without a chain
needs the provider's (``providers.<name>.metered: true``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olp.config import load_registry, load_settings
from olp.engine import UnknownModel
from olp.providers.anthropic import SPEC as ANTHROPIC
from olp.providers.codex import SPEC as CODEX
from olp.providers.openai_compat import SPEC as OPENAI_COMPAT
from olp.providers.vibe import SPEC as VIBE
from olp.runtime import provider_actors
from olp.runtime.routing import build_router


@pytest.mark.parametrize(("spec", "configured", "proxy", "expected"), [
    # claude: a key in the provider's env is metered; the OAuth token is the subscription;
    # ANTHROPIC_API_KEY in the proxy's environment never reaches claude (not passed through).
    (ANTHROPIC, {"ANTHROPIC_API_KEY": "sk"}, {}, "ANTHROPIC_API_KEY in providers.anthropic.env"),
    (ANTHROPIC, {"ANTHROPIC_AUTH_TOKEN": "t"}, {},
     "ANTHROPIC_AUTH_TOKEN in providers.anthropic.env"),
    (ANTHROPIC, {"CLAUDE_CODE_OAUTH_TOKEN": "t"}, {}, None),
    (ANTHROPIC, {}, {"CLAUDE_CODE_OAUTH_TOKEN": "t"}, None),
    (ANTHROPIC, {}, {"ANTHROPIC_API_KEY": "sk"}, None),
    (ANTHROPIC, {"ANTHROPIC_API_KEY": " "}, {}, None),  # empty does not count
    # codex: either key in the provider's env; never taken from the proxy's environment.
    (CODEX, {"OPENAI_API_KEY": "sk"}, {}, "OPENAI_API_KEY in providers.openai.env"),
    (CODEX, {"CODEX_API_KEY": "sk"}, {}, "CODEX_API_KEY in providers.openai.env"),
    (CODEX, {}, {"OPENAI_API_KEY": "sk", "CODEX_API_KEY": "sk"}, None),
    # vibe: MISTRAL_API_KEY is passed through from the proxy's environment.
    (VIBE, {"MISTRAL_API_KEY": "k"}, {}, "MISTRAL_API_KEY in providers.mistral.env"),
    (VIBE, {}, {"MISTRAL_API_KEY": "k"}, "MISTRAL_API_KEY in the proxy's environment"),
    (VIBE, {"MISTRAL_API_KEY": ""}, {"MISTRAL_API_KEY": "k"}, None),  # the config blanks it
    (VIBE, {}, {}, None),
    (OPENAI_COMPAT, {}, {}, "the openai-compatible kind is metered by default"),
])
def test_detection_follows_what_reaches_the_cli(spec: Any, configured: dict[str, str],
                                               proxy: dict[str, str], expected: str | None,
                                               tmp_path: Path) -> None:
    assert spec.metered_by(configured, proxy, real_home=tmp_path) == expected


def _settings(tmp_path: Path, config: dict[str, Any]) -> Any:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))
    return load_settings({"OLP_HOME": str(home)})


@pytest.mark.parametrize(("block", "expected"), [
    ({"env": {"ANTHROPIC_API_KEY": "sk"}}, "ANTHROPIC_API_KEY in providers.anthropic.env"),
    ({"env": {"ANTHROPIC_API_KEY": "sk"}, "metered": False}, None),  # the override wins
    ({"metered": True}, "providers.anthropic.metered is true"),
    ({}, None),
])
def test_the_config_overrides_the_detection(tmp_path: Path, block: dict[str, Any],
                                            expected: str | None) -> None:
    settings = _settings(tmp_path, {"providers": {"anthropic": block}})
    got = provider_actors.metered_source(settings, settings.provider("anthropic"), {})
    assert got == expected


def test_the_report_and_routing_agree_and_a_metered_entry_needs_consent(
        tmp_path: Path) -> None:
    config = {"providers": {"enabled": {"openai": False, "mistral": False},
                            "anthropic": {"binary": "/bin/true", "sandbox": False,
                                          "env": {"ANTHROPIC_API_KEY": "sk"}}},
              "routing": {"chains": {
                  "plain": [{"provider": "anthropic", "model": "claude-sonnet-4-6"}],
                  "consented": [{"provider": "anthropic", "model": "claude-sonnet-4-6",
                                 "metered": True}]}}}
    settings = _settings(tmp_path, config)
    runtime = provider_actors.build(settings, {"PATH": "/usr/bin:/bin"})
    report = runtime.reports["anthropic"]
    assert report.metered and report.as_dict()["metered"] is True
    assert report.as_dict()["metered_by"] == "ANTHROPIC_API_KEY in providers.anthropic.env"
    assert runtime.providers["anthropic"].metered
    router = build_router(settings, load_registry(), runtime.providers)
    assert router.resolve("consented").hops[0].metered
    assert "consent" in router.unusable_chains["plain"]
    # A registry route has no entry to consent: the provider's own setting must.
    with pytest.raises(UnknownModel) as refused:
        router.resolve("sonnet")
    assert "providers.anthropic.metered to true" in refused.value.message
    config["providers"]["anthropic"]["metered"] = True  # type: ignore[index]
    settings = _settings(tmp_path, config)
    runtime = provider_actors.build(settings, {"PATH": "/usr/bin:/bin"})
    router = build_router(settings, load_registry(), runtime.providers)
    assert router.resolve("sonnet").hops[0].metered  # served, and said metered
