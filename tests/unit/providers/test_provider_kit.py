"""The provider kit: specs are discovered from ``olp.providers``' subpackages, complete, and the
only place config, ``olp doctor``, ``/health``, the engine and the wiring read provider facts
from; a new CLI provider is a new subpackage and nothing else."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import olp.providers
from olp.actors import CliAdapter, Timeouts
from olp.commands import doctor
from olp.config import ConfigError, Settings, load_settings, resolve_binary
from olp.engine import Sources
from olp.ir import ChatRequest, Message, TextPart
from olp.providers import kit
from olp.providers.anthropic import SPEC as ANTHROPIC
from olp.providers.codex import SPEC as CODEX
from olp.providers.gemini import SPEC as GEMINI
from olp.providers.kit import ProviderSpec
from olp.providers.openai_compat import HTTP_TIMEOUTS
from olp.providers.openai_compat import SPEC as OPENAI_COMPAT
from olp.providers.qwen import SPEC as QWEN
from olp.providers.vibe import SPEC as VIBE
from olp.runtime import provider_actors

NEW_PROVIDER = '''
from olp.actors import Timeouts
from olp.providers.kit import ProviderSpec
from olp.actors.testing import JsonLinesAdapter

SPEC = ProviderSpec(
    name="frob", kind="cli", order=40, command="frob", binary_env="OLP_FROB_BIN",
    install_hint="pipx install frob, then run `frob login`",
    adapter=JsonLinesAdapter, credentials=JsonLinesAdapter(), metered_env=("FROB_API_KEY",),
    timeouts=Timeouts(first_output_s=30.0, idle_s=20.0, total_s=90.0),
    max_idle_s=50.0, max_idle_reason="frob hangs up after 50 s of silence",
    risk_tier="C", probe_model="frob-mini")
'''


@pytest.fixture
def frob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderSpec]:
    """A provider that exists only as a package ``olp.providers.frob`` in ``tmp_path``, found by
    extending the package's search path (as installing a new subpackage would)."""
    package = tmp_path / "extra" / "frob"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(NEW_PROVIDER), encoding="utf-8")
    monkeypatch.setattr(olp.providers, "__path__", [*olp.providers.__path__, str(package.parent)])
    spec = kit.find("frob")
    assert spec is not None
    yield spec
    sys.modules.pop("olp.providers.frob", None)
    if hasattr(olp.providers, "frob"):
        delattr(olp.providers, "frob")


def _settings(home: Path, config: dict[str, Any] | None = None) -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (home / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return load_settings({"OLP_HOME": str(home)})


def _request(marked: bool) -> ChatRequest:
    marker = {"type": "ephemeral"} if marked else None
    return ChatRequest(model="m", messages=(
        Message(role="user", content=(TextPart(text="hi", cache_control=marker),)),))


# -- discovery and completeness ------------------------------------------------------------


def test_discovery_finds_the_five_clis_then_http_in_order() -> None:
    specs = kit.builtin_specs()
    assert [(s.name, s.kind) for s in specs] == [
        ("anthropic", "cli"), ("openai", "cli"), ("gemini", "cli"), ("qwen", "cli"),
        ("mistral", "cli"), ("openai-compatible", "http")]
    # each subpackage's SPEC
    assert specs == (ANTHROPIC, CODEX, GEMINI, QWEN, VIBE, OPENAI_COMPAT)
    assert kit.builtin_names() == ("anthropic", "openai", "gemini", "qwen", "mistral")
    assert kit.http_kinds() == ("openai-compatible",)


@pytest.mark.parametrize("spec", [ANTHROPIC, CODEX, GEMINI, QWEN, VIBE], ids=lambda s: s.name)
def test_every_cli_spec_is_complete(spec: ProviderSpec) -> None:
    assert spec.command and spec.binary_env and spec.binary_env.startswith("OLP_")
    assert spec.install_hint and spec.command in spec.install_hint
    assert spec.adapter is not None
    adapter: CliAdapter = spec.adapter()
    assert adapter.name == spec.name
    assert spec.credentials is not None
    for method in ("spawn_env", "home_links", "preflight"):
        assert callable(getattr(spec.credentials, method))
    # qwen tells its metered key from its subscription one by value (MeteredFiles)
    assert spec.metered_env or isinstance(spec.credentials, kit.MeteredFiles)
    assert all(v.isupper() for v in spec.metered_env)
    assert not spec.metered and spec.capabilities == "registry"
    assert spec.risk_tier == {"gemini": "C", "qwen": "B"}.get(spec.name, "D")
    assert spec.probe_model
    t = spec.timeouts
    assert 0 < t.first_output_s <= t.total_s and 0 < t.idle_s <= t.total_s
    if spec.max_idle_s is not None:
        assert t.idle_s < spec.max_idle_s and spec.max_idle_reason


def test_the_facts_each_cli_declares() -> None:
    assert [(s.command, s.binary_env) for s in (ANTHROPIC, CODEX, VIBE)] == [
        ("claude", "OLP_CLAUDE_BIN"), ("codex", "OLP_CODEX_BIN"), ("vibe", "OLP_VIBE_BIN")]
    assert ANTHROPIC.metered_env == ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    assert CODEX.metered_env == ("OPENAI_API_KEY", "CODEX_API_KEY")
    assert VIBE.metered_env == ("MISTRAL_API_KEY",)
    assert ANTHROPIC.timeouts == Timeouts(60, 120, 600)
    assert CODEX.timeouts == VIBE.timeouts == Timeouts(600, 120, 600)
    assert (ANTHROPIC.max_idle_s, CODEX.max_idle_s, VIBE.max_idle_s) == (300, None, None)


def test_the_http_spec_is_the_openai_compatible_kind() -> None:
    s = OPENAI_COMPAT
    assert (s.kind, s.metered, s.capabilities, s.risk_tier) == ("http", True, "passthrough", "D")
    assert s.timeouts == HTTP_TIMEOUTS == Timeouts(120, 120, 600)
    assert s.adapter is None and s.command is None and s.credentials is None


def test_an_incomplete_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks adapter, credentials"):
        ProviderSpec(name="x", kind="cli", order=1, install_hint="-", timeouts=Timeouts(),
                     command="x", binary_env="OLP_X_BIN")
    with pytest.raises(ValueError, match="idle_s must be below max_idle_s"):
        ProviderSpec(name="x", kind="http", order=1, install_hint="-",
                     timeouts=Timeouts(idle_s=10), max_idle_s=10)


# -- what reads the kit -----------------------------------------------------------------------


def test_cache_policy_comes_from_the_spec() -> None:
    assert ANTHROPIC.cache_bypass(_request(True)) and not ANTHROPIC.cache_bypass(_request(False))
    assert not CODEX.cache_bypass(_request(True))
    assert kit.cache_bypass("anthropic", _request(True))
    assert not kit.cache_bypass("openai", _request(True))
    assert not kit.cache_bypass("router", _request(True))  # a configured HTTP provider
    assert Sources().bypass is kit.cache_bypass


def test_settings_take_their_defaults_from_the_specs(tmp_path: Path) -> None:
    s = _settings(tmp_path / "home", {"providers": {"router": {
        "kind": "openai-compatible", "base_url": "https://x/v1"}}})
    for spec in (ANTHROPIC, CODEX, VIBE):
        assert s.provider(spec.name).timeouts == spec.timeouts
        assert s.provider(spec.name).spec is spec
    router = s.provider("router")
    assert router.spec is OPENAI_COMPAT and router.timeouts == OPENAI_COMPAT.timeouts
    assert router.metered


def test_health_reports_carry_the_risk_tier(tmp_path: Path) -> None:
    s = _settings(tmp_path / "home")
    runtime = provider_actors.build(s, {"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert {n: r.as_dict()["risk_tier"] for n, r in runtime.reports.items()} == {
        "anthropic": "D", "openai": "D", "gemini": "C", "qwen": "B", "mistral": "D"}


def test_doctor_prints_each_specs_install_hint(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = io.StringIO()
    assert doctor.run(_settings(tmp_path / "home"), probe=False, out=out) == 1
    for spec in (ANTHROPIC, CODEX, VIBE):  # enabled by default (tier D)
        assert f"`{spec.command}` not found on PATH" in out.getvalue()
        assert spec.install_hint in out.getvalue()
    assert "risk=D" in out.getvalue()
    # the opt-in tiers are off until enabled, and doctor says how
    assert ("set providers.enabled.gemini: true\n" in out.getvalue())
    assert ("set providers.enabled.qwen: true and providers.qwen.consent: true"
            in out.getvalue())


# -- a new provider is only a subpackage ---------------------------------------------------------


def test_a_new_subpackage_is_discovered_in_its_order(frob: ProviderSpec) -> None:
    assert [s.name for s in kit.builtin_specs()] == [
        "anthropic", "openai", "gemini", "qwen", "mistral", "frob", "openai-compatible"]
    assert kit.builtin_names() == ("anthropic", "openai", "gemini", "qwen", "mistral", "frob")


def test_a_new_providers_metered_env_drives_the_detection(frob: ProviderSpec) -> None:
    assert frob.metered_by({"FROB_API_KEY": "k"}, {}) == "FROB_API_KEY in providers.frob.env"
    assert frob.metered_by({}, {}) is None


def test_the_config_accepts_a_new_subpackage_as_built_in(frob: ProviderSpec,
                                                         tmp_path: Path) -> None:
    s = _settings(tmp_path / "a", {"providers": {"enabled": {"frob": False},
                                                 "frob": {"max_concurrent": 2}}})
    assert s.provider_names() == ("anthropic", "openai", "gemini", "qwen", "mistral", "frob")
    p = s.provider("frob")
    assert (p.kind, p.enabled, p.max_concurrent, p.metered) == ("cli", False, 2, False)
    assert p.timeouts == frob.timeouts
    with pytest.raises(ConfigError, match="providers.frob.kind: frob is a built-in CLI"):
        _settings(tmp_path / "b", {"providers": {"frob": {"kind": "openai-compatible",
                                                          "base_url": "https://x/v1"}}})
    with pytest.raises(ConfigError) as info:
        _settings(tmp_path / "c", {"providers": {"frob": {"timeouts": {"idle_s": 50}}}})
    assert str(info.value).endswith("providers.frob.timeouts.idle_s: must be below 50 "
                                    "(frob hangs up after 50 s of silence)")
    with pytest.raises(ConfigError,
                       match=r"not built in \(anthropic, openai, gemini, qwen, mistral, frob\)"):
        _settings(tmp_path / "d", {"providers": {"other": {}}})


def test_without_the_subpackage_the_name_is_not_built_in(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="providers.frob.kind: required"):
        _settings(tmp_path / "home", {"providers": {"frob": {}}})


def test_doctor_resolves_and_reports_a_new_provider(frob: ProviderSpec, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"providers": {"enabled": {"anthropic": False, "openai": False, "mistral": False,
                                        "frob": True},  # tier C: opt-in
                            "frob": {"sandbox": False}}}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("OLP_FROB_BIN", raising=False)
    settings = _settings(tmp_path / "home", config)
    out = io.StringIO()
    assert doctor.run(settings, probe=False, out=out) == 1
    assert "frob       PROBLEM   kind=cli risk=C" in out.getvalue()
    assert "`frob` not found on PATH" in out.getvalue()
    assert f"{frob.install_hint}; or set providers.frob.binary" in out.getvalue()

    binary = tmp_path / "bin" / "frob-1.2"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\necho frob 1.2\n")
    binary.chmod(0o755)
    monkeypatch.setenv("OLP_FROB_BIN", str(binary))  # the spec's override variable
    assert resolve_binary("frob", settings) == str(binary)
    out = io.StringIO()
    assert doctor.run(settings, probe=False, out=out) == 0, out.getvalue()
    assert "frob       ok        kind=cli risk=C" in out.getvalue()
    assert f"binary:      {binary} (frob 1.2)" in out.getvalue()
    assert "credentials: found" in out.getvalue()


def test_binary_resolution_order_lives_in_the_kit(tmp_path: Path) -> None:
    def exe(path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    on_path = exe(tmp_path / "bin" / "vibe")
    by_env = exe(tmp_path / "env" / "vibe")
    configured = exe(tmp_path / "cfg" / "vibe")
    environ = {"PATH": str(tmp_path / "bin")}
    assert kit.resolve_binary(VIBE, None, environ) == on_path
    assert kit.resolve_binary(VIBE, None, {**environ, "OLP_VIBE_BIN": by_env}) == by_env
    assert kit.resolve_binary(VIBE, configured, {**environ, "OLP_VIBE_BIN": by_env}) == configured
    assert kit.resolve_binary(OPENAI_COMPAT, None, environ) is None
