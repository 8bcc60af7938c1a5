"""Metered detection from credential *files*: codex's ``auth.json`` in API-key mode and vibe's
``.env`` holding ``MISTRAL_API_KEY`` are metered spend, like the same keys in the
environment; a ChatGPT login is the subscription; the config override still wins. Every case
uses real files in a temporary home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olp.config import load_settings
from olp.providers.anthropic import SPEC as ANTHROPIC
from olp.providers.codex import SPEC as CODEX
from olp.providers.vibe import SPEC as VIBE
from olp.runtime import provider_actors

TOKENS = {"id_token": "i", "access_token": "a", "refresh_token": "r", "account_id": "x"}
CODEX_FILE = "OPENAI_API_KEY in ~/.codex/auth.json (auth_mode apikey)"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "expected"), [
    # What `codex login --with-api-key` writes (codex 0.171.0).
    ({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-file"}, CODEX_FILE),
    # No auth_mode: codex uses the key when there is one, even next to ChatGPT tokens.
    ({"OPENAI_API_KEY": "sk-file"}, CODEX_FILE),
    ({"OPENAI_API_KEY": "sk-file", "tokens": TOKENS}, CODEX_FILE),
    # A ChatGPT login is the subscription, whatever else the file holds.
    ({"auth_mode": "chatgpt", "OPENAI_API_KEY": "sk-file", "tokens": TOKENS}, None),
    ({"OPENAI_API_KEY": None, "tokens": TOKENS}, None),
    ({"auth_mode": "apikey", "OPENAI_API_KEY": " "}, None),  # no key: not a login at all
    (["not", "an", "object"], None),
])
def test_codex_auth_file(tmp_path: Path, content: object, expected: str | None) -> None:
    write(tmp_path / ".codex" / "auth.json", json.dumps(content))
    assert CODEX.metered_by({}, {}, real_home=tmp_path) == expected


def test_codex_auth_file_where_codex_finds_it(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "codex-home"
    home.mkdir()
    api_key = json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-file"})
    write(elsewhere / "auth.json", api_key)
    assert CODEX.metered_by({}, {}, real_home=home) is None  # nothing in ~/.codex
    # CODEX_HOME in the proxy's environment (handed on as OPENAI_CODEX_AUTH_PATH).
    assert CODEX.metered_by({}, {"CODEX_HOME": str(elsewhere)}, real_home=home) == (
        f"OPENAI_API_KEY in {elsewhere / 'auth.json'} (auth_mode apikey)")
    # The provider's env names the file; HOME of the proxy's environment is the real home.
    explicit = write(home / "keys" / "codex.json", api_key)
    assert CODEX.metered_by({"OPENAI_CODEX_AUTH_PATH": str(explicit)}, {"HOME": str(home)}) == (
        "OPENAI_API_KEY in ~/keys/codex.json (auth_mode apikey)")


def test_a_key_in_the_env_is_named_before_the_file(tmp_path: Path) -> None:
    write(tmp_path / ".codex" / "auth.json", json.dumps({"OPENAI_API_KEY": "sk-file"}))
    assert CODEX.metered_by({"CODEX_API_KEY": "k"}, {}, real_home=tmp_path) == (
        "CODEX_API_KEY in providers.openai.env")


@pytest.mark.parametrize(("text", "expected"), [
    ("MISTRAL_API_KEY=from-the-file\n", "MISTRAL_API_KEY in ~/.vibe/.env"),
    ("export MISTRAL_API_KEY='quoted'\n", "MISTRAL_API_KEY in ~/.vibe/.env"),
    ("MISTRAL_API_KEY=\n", None),
    ("OTHER=1\n", None),
])
def test_vibe_env_file(tmp_path: Path, text: str, expected: str | None) -> None:
    write(tmp_path / ".vibe" / ".env", text)
    assert VIBE.metered_by({}, {}, real_home=tmp_path) == expected


def test_vibe_env_file_where_vibe_finds_it(tmp_path: Path) -> None:
    home, vibe_home = tmp_path / "home", tmp_path / "vibe-home"
    home.mkdir()
    write(vibe_home / ".env", "MISTRAL_API_KEY=k\n")
    assert VIBE.metered_by({}, {}, real_home=home) is None
    assert VIBE.metered_by({}, {"VIBE_HOME": str(vibe_home)}, real_home=home) == (
        f"MISTRAL_API_KEY in {vibe_home / '.env'}")
    assert VIBE.metered_by({"MISTRAL_VIBE_AUTH_PATH": str(vibe_home / ".env")}, {},
                           real_home=home) == f"MISTRAL_API_KEY in {vibe_home / '.env'}"
    # A key in the environment reaches vibe first and is what is named.
    assert VIBE.metered_by({}, {"MISTRAL_API_KEY": "k", "VIBE_HOME": str(vibe_home)},
                           real_home=home) == "MISTRAL_API_KEY in the proxy's environment"


def test_claudes_login_file_is_the_subscription(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / ".credentials.json",
          json.dumps({"claudeAiOauth": {"accessToken": "t"}}))
    assert ANTHROPIC.metered_by({}, {}, real_home=tmp_path) is None


def _settings(tmp_path: Path, config: dict[str, Any]) -> Any:
    home = tmp_path / "olp"
    home.mkdir(exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))
    return load_settings({"OLP_HOME": str(home)})


@pytest.mark.parametrize(("block", "expected"), [
    ({}, CODEX_FILE),
    ({"metered": False}, None),  # the override wins over the file
    ({"metered": True}, "providers.openai.metered is true"),
])
def test_the_config_overrides_the_file(tmp_path: Path, block: dict[str, Any],
                                       expected: str | None) -> None:
    write(tmp_path / ".codex" / "auth.json", json.dumps({"auth_mode": "apikey",
                                                         "OPENAI_API_KEY": "sk-file"}))
    settings = _settings(tmp_path, {"providers": {"openai": block}})
    environ = {"HOME": str(tmp_path)}
    got = provider_actors.metered_source(settings, settings.provider("openai"), environ)
    assert got == expected


def test_the_report_says_the_file(tmp_path: Path) -> None:
    write(tmp_path / ".vibe" / ".env", "MISTRAL_API_KEY=k\n")
    settings = _settings(tmp_path, {"providers": {
        "enabled": {"anthropic": False, "openai": False},
        "mistral": {"binary": "/bin/true", "sandbox": False}}})
    runtime = provider_actors.build(settings, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    report = runtime.reports["mistral"]
    assert report.credentials and report.metered
    assert report.as_dict()["metered_by"] == "MISTRAL_API_KEY in ~/.vibe/.env"
    assert runtime.providers["mistral"].metered
