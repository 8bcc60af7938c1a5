"""``providers.<name>.cli_retry_budget_s``: how long a CLI may retry on its own when no other
hop could take over (docs/adr/0005-fallback-engine.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.config import ConfigError, Settings, load_settings


def settings_with(home: Path, providers: dict[str, object]) -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"providers": providers}), encoding="utf-8")
    return load_settings({"OLP_HOME": str(home)})


def test_the_budget_defaults_to_20_s_and_is_per_provider(tmp_path: Path) -> None:
    settings = settings_with(tmp_path / "h", {"anthropic": {"cli_retry_budget_s": 5.5}})
    assert settings.provider("anthropic").cli_retry_budget_s == 5.5
    assert settings.provider("openai").cli_retry_budget_s == 20.0


@pytest.mark.parametrize("value", [0, -1, "20"])
def test_a_budget_that_is_not_a_positive_number_names_its_path(tmp_path: Path,
                                                               value: object) -> None:
    with pytest.raises(ConfigError) as info:
        settings_with(tmp_path / "h", {"anthropic": {"cli_retry_budget_s": value}})
    assert "providers.anthropic.cli_retry_budget_s" in str(info.value)
