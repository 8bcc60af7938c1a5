"""Risk tiers (the OLP seed's guide): D runs by default, C only when enabled, B only when
enabled with ``providers.<name>.consent`` (else ``olp start`` stops naming the fix), A never;
and ``OLP_HOME`` (0700) and the database (0600) are kept to their owner.

Every built-in provider is tier D today, so the tests give ``anthropic``'s spec another tier.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from olp.commands.main import main
from olp.config import ConfigError, load_settings
from olp.providers import kit
from olp.runtime import provider_actors
from olp.store import Database

REAL_SPECS = kit.builtin_specs()


def with_tier(monkeypatch: pytest.MonkeyPatch, tier: kit.RiskTier) -> None:
    specs = tuple(dataclasses.replace(s, risk_tier=tier) if s.name == "anthropic" else s
                  for s in REAL_SPECS)
    monkeypatch.setattr(kit, "builtin_specs", lambda: specs)


def settings_with(tmp_path: Path, config: dict[str, object]):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))
    return load_settings({"OLP_HOME": str(home), "PATH": "/nonexistent"})


def test_tier_d_runs_by_default(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {})
    assert settings.is_enabled("anthropic")


def test_tier_c_is_opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_tier(monkeypatch, "C")
    off = settings_with(tmp_path, {})
    assert not off.is_enabled("anthropic") and "anthropic" not in off.enabled_providers()
    runtime = provider_actors.build(off, {"PATH": "/nonexistent"})
    assert runtime.reports["anthropic"].risk_tier == "C"
    assert "risk tier C: opt-in" in runtime.providers["anthropic"].fix
    on = settings_with(tmp_path, {"providers": {"enabled": {"anthropic": True}}})
    assert on.is_enabled("anthropic")


def test_tier_b_needs_consent_to_be_enabled(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with_tier(monkeypatch, "B")
    assert not settings_with(tmp_path, {}).is_enabled("anthropic")  # off, and no error
    with pytest.raises(ConfigError, match=r"providers\.anthropic\.consent: anthropic is risk "
                                          r"tier B .*set providers\.anthropic\.consent to true"):
        settings_with(tmp_path, {"providers": {"enabled": {"anthropic": True}}})
    consented = settings_with(tmp_path, {"providers": {"enabled": {"anthropic": True},
                                                       "anthropic": {"consent": True}}})
    assert consented.is_enabled("anthropic")


def test_olp_start_refuses_a_tier_b_provider_without_consent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with_tier(monkeypatch, "B")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"providers": {"enabled": {"anthropic": True}}}))
    monkeypatch.setenv("OLP_HOME", str(home))
    assert main(["start"]) == 2
    assert "providers.anthropic.consent" in capsys.readouterr().err


def test_tier_a_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_tier(monkeypatch, "A")
    assert not settings_with(tmp_path, {}).is_enabled("anthropic")
    with pytest.raises(ConfigError, match=r"providers\.enabled\.anthropic: .*tier A"):
        settings_with(tmp_path, {"providers": {"enabled": {"anthropic": True}}})
    runtime = provider_actors.build(settings_with(tmp_path, {}), {"PATH": "/nonexistent"})
    assert runtime.providers["anthropic"].fix.startswith("none: anthropic is risk tier A")


def test_olp_home_and_the_database_are_kept_to_their_owner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    db_path = home / "olp.db"
    Database(db_path).close()
    db_path.chmod(0o644)
    settings = load_settings({"OLP_HOME": str(home)})
    assert stat.S_IMODE(os.stat(settings.home).st_mode) == 0o700
    with Database(settings.db_path):
        assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
        wal = Path(f"{db_path}-wal")
        if wal.exists():
            assert stat.S_IMODE(os.stat(wal).st_mode) == 0o600
    fresh = load_settings({"OLP_HOME": str(tmp_path / "new")})
    assert stat.S_IMODE(os.stat(fresh.home).st_mode) == 0o700
