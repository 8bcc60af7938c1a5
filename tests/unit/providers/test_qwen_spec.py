"""The qwen provider as data: its registry models (text only, token streaming, JSON mode,
tools through OLP's bridge), ``olp setup``'s chains naming registry aliases, tier B needing consent,
no warm pool, and an idle limit below qwen's own 240 s re-ask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.config import ConfigError, load_registry, load_settings
from olp.providers import kit
from olp.providers.qwen import SPEC


def settings_with(tmp_path: Path, config: dict[str, object]):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))
    return load_settings({"OLP_HOME": str(home), "PATH": "/nonexistent"})


def test_registry_models_and_aliases() -> None:
    registry = load_registry()
    assert "qwen" in registry.providers()
    for alias, model in {"qwen": "qwen3-coder-plus", "qwen-coder": "qwen3-coder-plus",
                         "qwen-coder-next": "qwen3-coder-next", "qwen-plus": "qwen3.7-plus",
                         "qwen-max": "qwen3-max-2026-01-23"}.items():
        entry = registry.resolve(alias, "qwen")
        assert entry is not None and (entry.provider, entry.model) == ("qwen", model)
        caps = entry.capabilities
        assert (caps.tools, caps.images, caps.json_mode, caps.streaming) == (
            True, False, True, "token")
    coder = registry.resolve("qwen3-coder-plus")
    assert coder is not None and coder.context_window == 1_000_000


def test_setup_chains_and_probe_model_are_in_the_registry() -> None:
    registry = load_registry()
    assert set(SPEC.default_chains) == {"default", "coding", "smart", "fast"}
    for alias in (*SPEC.default_chains.values(), SPEC.probe_model):
        assert alias is not None
        entry = registry.resolve(alias, "qwen")
        assert entry is not None, alias


def test_tier_b_is_off_by_default_and_needs_consent(tmp_path: Path) -> None:
    assert kit.find("qwen") is SPEC and SPEC.risk_tier == "B"
    assert not settings_with(tmp_path, {}).is_enabled("qwen")
    with pytest.raises(ConfigError, match=r"providers\.qwen\.consent"):
        settings_with(tmp_path, {"providers": {"enabled": {"qwen": True}}})
    on = settings_with(tmp_path, {"providers": {"enabled": {"qwen": True},
                                                "qwen": {"consent": True}}})
    assert on.is_enabled("qwen")


def test_no_warm_pool_and_the_idle_limit(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="qwen cannot be kept warm"):
        settings_with(tmp_path, {"providers": {"qwen": {"warm": 1}}})
    with pytest.raises(ConfigError, match=r"timeouts\.idle_s: must be below 240"):
        settings_with(tmp_path, {"providers": {"qwen": {"timeouts": {"idle_s": 240}}}})
