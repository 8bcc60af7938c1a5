"""models-registry.json and its loader: ids, aliases, capabilities, /v1/models rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olp.config import DEFAULT_REGISTRY_PATH, ConfigError, RegistryError, load_registry

ALIASES = {
    "claude": ("anthropic", "claude-sonnet-4-6"), "sonnet": ("anthropic", "claude-sonnet-4-6"),
    "opus": ("anthropic", "claude-opus-4-8"), "haiku": ("anthropic", "claude-haiku-4-5"),
    "codex": ("openai", "gpt-5.3-codex"), "codex-spark": ("openai", "gpt-5.3-codex-spark"),
    "gpt5": ("openai", "gpt-5.5"), "gpt5-mini": ("openai", "gpt-5.4-mini"),
    "devstral": ("mistral", "devstral-2-25-12"), "devstral-2": ("mistral", "devstral-2-25-12"),
    "devstral-small": ("mistral", "devstral-small-2-25-12"),
    "devstral-small-2": ("mistral", "devstral-small-2-25-12"),
    "gemini": ("gemini", "gemini-2.5-pro"), "gemini-pro": ("gemini", "gemini-2.5-pro"),
    "gemini-preview": ("gemini", "gemini-3.1-pro-preview"),
    "gemini-flash": ("gemini", "gemini-3.5-flash"),
    "gemini-flash-lite": ("gemini", "gemini-3.1-flash-lite"),
    "qwen": ("qwen", "qwen3-coder-plus"), "qwen-coder": ("qwen", "qwen3-coder-plus"),
    "qwen3-coder": ("qwen", "qwen3-coder-plus"), "qwen-coder-next": ("qwen", "qwen3-coder-next"),
    "qwen-plus": ("qwen", "qwen3.7-plus"), "qwen-max": ("qwen", "qwen3-max-2026-01-23"),
}
MODELS = {
    "anthropic": ["claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-4-6", "claude-haiku-4-5"],
    "openai": ["gpt-5.5", "gpt-5.4", "gpt-5.4-mini", "gpt-5.3-codex", "gpt-5.3-codex-spark"],
    "mistral": ["devstral-2-25-12", "devstral-small-2-25-12"],
    "gemini": ["gemini-3.1-pro-preview", "gemini-3-pro-preview", "gemini-3-flash-preview",
               "gemini-2.5-pro", "gemini-3.5-flash", "gemini-3.1-flash-lite"],
    "qwen": ["qwen3-coder-plus", "qwen3-coder-next", "qwen3.7-plus", "qwen3.6-plus",
             "qwen3.5-plus", "qwen3-max-2026-01-23"],
}


def test_the_repo_file_is_the_default() -> None:
    assert DEFAULT_REGISTRY_PATH == Path(__file__).resolve().parents[3] / "models-registry.json"
    raw = json.loads(DEFAULT_REGISTRY_PATH.read_text(encoding="utf-8"))
    assert isinstance(raw["version"], int) and raw["comment"]
    for block in raw["providers"].values():
        for model in block["models"]:
            assert set(model) == {"id", "displayName", "contextWindow", "created",
                                  "capabilities"}
            assert set(model["capabilities"]) == {"tools", "images", "json_mode", "streaming",
                                                  "reasoning"}


@pytest.mark.parametrize(("provider", "model"),
                         [(p, m) for p, models in MODELS.items() for m in models])
def test_every_model_resolves_to_itself(provider: str, model: str) -> None:
    entry = load_registry().resolve(model)
    assert entry is not None and (entry.provider, entry.model) == (provider, model)
    assert entry.display_name and entry.created == 1778630400


@pytest.mark.parametrize(("alias", "target"), ALIASES.items())
def test_aliases(alias: str, target: tuple[str, str]) -> None:
    entry = load_registry().resolve(alias)
    assert entry is not None and (entry.provider, entry.model) == target


TOOL_PROVIDERS = {"anthropic", "openai", "gemini", "qwen"}
#: qwen's Coding Plan models below 1M tokens (qwen-code 0.24.4's preset)
QWEN_WINDOWS = {"qwen3-coder-next": 262144, "qwen3-max-2026-01-23": 262144}


def test_capabilities_and_context_windows() -> None:
    reg = load_registry()
    for provider, models in MODELS.items():
        for model in models:
            entry = reg.resolve(model)
            assert entry is not None
            caps = entry.capabilities
            # tools only where that CLI's real-CLI tool round trip passes (ADR 0012)
            assert caps.tools == (provider in TOOL_PROVIDERS) and caps.json_mode
            assert caps.images == (provider in ("anthropic", "openai"))
            assert caps.streaming == ("token" if provider in ("anthropic", "gemini", "qwen")
                                      else "message")
            assert entry.context_window == {"anthropic": 200000, "openai": None,
                                            "mistral": 262144, "gemini": 1048576,
                                            "qwen": QWEN_WINDOWS.get(model, 1000000)}[provider]


ALL_LEVELS = ("none", "minimal", "low", "medium", "high")
#: Which levels each model honours through its CLI (issue #27): claude all of them (measured:
#: cli-reference/claude/reasoning), codex from low up (minimal as low; none where the model
#: takes it), gemini's 2.5 budgets and 3.x levels; qwen's thinking models on/off (the Coding
#: Plan's enable_thinking: cli-reference/qwen/reasoning), its coder models and mistral's devstral
#: none.
REASONING = {
    "claude-opus-4-8": ALL_LEVELS, "claude-opus-4-7": ALL_LEVELS,
    "claude-sonnet-4-6": ALL_LEVELS, "claude-haiku-4-5": ALL_LEVELS,
    "gpt-5.5": ALL_LEVELS[1:], "gpt-5.4": ALL_LEVELS, "gpt-5.4-mini": ALL_LEVELS[1:],
    "gpt-5.3-codex": ALL_LEVELS[1:], "gpt-5.3-codex-spark": ALL_LEVELS[1:],
    "gemini-3.1-pro-preview": ("minimal", "low", "high"),
    "gemini-3-pro-preview": ("minimal", "low", "high"),
    "gemini-3-flash-preview": ALL_LEVELS[1:], "gemini-2.5-pro": ALL_LEVELS[1:],
    "gemini-3.5-flash": ALL_LEVELS[1:], "gemini-3.1-flash-lite": ALL_LEVELS[1:],
    "qwen3.7-plus": ("none", "high"), "qwen3.6-plus": ("none", "high"),
    "qwen3.5-plus": ("none", "high"), "qwen3-max-2026-01-23": ("none", "high"),
}


@pytest.mark.parametrize(("provider", "model"),
                         [(p, m) for p, models in MODELS.items() for m in models])
def test_reasoning_levels(provider: str, model: str) -> None:
    entry = load_registry().resolve(model)
    assert entry is not None
    assert entry.capabilities.reasoning == REASONING.get(model, ())


def test_reasoning_levels_are_checked(tmp_path: Path) -> None:
    doc = {"version": 1, "providers": {"a": {"models": [_model("m")]}}}
    entry = load_registry(_write(tmp_path, doc)).resolve("m")
    assert entry is not None and entry.capabilities.reasoning == ()  # not given: none
    doc["providers"]["a"]["models"][0]["capabilities"]["reasoning"] = ["low", "xhigh"]
    with pytest.raises(RegistryError, match="reasoning"):
        load_registry(_write(tmp_path, doc))


def test_unknown_names_and_provider_narrowing() -> None:
    reg = load_registry()
    assert reg.resolve("gpt-4o") is None
    assert reg.resolve("") is None
    assert reg.resolve("SONNET") is None  # exact names only
    assert reg.resolve("sonnet", provider="openai") is None
    hit = reg.resolve("sonnet", provider="anthropic")
    assert hit is not None and hit.model == "claude-sonnet-4-6"
    assert reg.resolve("sonnet", provider="nobody") is None
    assert reg.providers() == ("anthropic", "openai", "gemini", "qwen", "mistral")


def test_models_listing_includes_aliases() -> None:
    rows = load_registry().models()
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)) == 23 + 23
    assert set(ids) == {m for ms in MODELS.values() for m in ms} | set(ALIASES)
    owners = {r.id: r.owned_by for r in rows}
    assert owners["codex"] == "openai" and owners["claude-haiku-4-5"] == "anthropic"
    assert all(r.created == 1778630400 for r in rows)


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "displayName": model_id, "contextWindow": None, "created": 1,
            "capabilities": {"tools": True, "images": False, "json_mode": True,
                             "streaming": "token"}}


@pytest.mark.parametrize(("doc", "expected"), [
    ({"version": 1, "providers": {"a": {"models": [_model("m")], "aliases": {"x": "nope"}}}},
     "providers.a.aliases.x: 'nope' is not a model of a"),
    ({"version": 1, "providers": {"a": {"models": [_model("m")]},
                                  "b": {"models": [_model("m")]}}},
     "'m' is already defined by providers.a"),
    ({"version": 1, "providers": {"a": {"models": [_model("m")], "aliases": {"m": "m"}}}},
     "'m' is already defined"),
    ({"version": 1, "providers": {"a": {"models": [{**_model("m"), "ctx": 1}]}}},
     "unknown field ctx"),
    ({"providers": {}}, "missing required field version"),
])
def test_invalid_registries(tmp_path: Path, doc: dict[str, Any], expected: str) -> None:
    with pytest.raises(RegistryError) as info:
        load_registry(_write(tmp_path, doc))
    assert expected in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_a_custom_registry(tmp_path: Path) -> None:
    reg = load_registry(_write(tmp_path, {"version": 2, "providers": {
        "local": {"models": [_model("qwen")], "aliases": {"q": "qwen"}}}}))
    assert reg.version == 2
    entry = reg.resolve("q")
    assert entry is not None and entry.capabilities.tools and entry.context_window is None


def test_a_missing_registry(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="cannot read"):
        load_registry(tmp_path / "none.json")
