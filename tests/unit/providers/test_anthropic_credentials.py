"""claude credential discovery, spawn environment and the AUTH_MISSING pre-flight check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from olp.ir import Error
from olp.providers.anthropic import ADAPTER
from olp.providers.anthropic import _credentials as creds

ALWAYS = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}


def make_credentials(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".credentials.json"
    path.write_text('{"claudeAiOauth": {}}', encoding="utf-8")
    return path


def test_spawn_env_passes_only_the_oauth_token() -> None:
    proxy_env = {"CLAUDE_CODE_OAUTH_TOKEN": "tok", "ANTHROPIC_API_KEY": "k",
                 "ANTHROPIC_BASE_URL": "http://evil", "PATH": "/bin", "HOME": "/root"}
    assert ADAPTER.spawn_env(proxy_env) == {**ALWAYS, "CLAUDE_CODE_OAUTH_TOKEN": "tok"}
    assert ADAPTER.spawn_env({"PATH": "/bin"}) == ALWAYS
    assert ADAPTER.spawn_env({"CLAUDE_CODE_OAUTH_TOKEN": ""}) == ALWAYS


def test_home_links_default_location(tmp_path: Path) -> None:
    adapter = ADAPTER
    assert adapter.home_links({}, tmp_path) == {}
    path = make_credentials(tmp_path / ".claude")
    assert adapter.home_links({}, tmp_path) == {".claude/.credentials.json": path}


def test_home_links_honours_claude_config_dir(tmp_path: Path) -> None:
    make_credentials(tmp_path / ".claude")  # ignored when CLAUDE_CONFIG_DIR is set
    config_dir = tmp_path / "elsewhere"
    env = {"CLAUDE_CONFIG_DIR": str(config_dir)}
    assert ADAPTER.home_links(env, tmp_path) == {}
    path = make_credentials(config_dir)
    assert ADAPTER.home_links(env, tmp_path) == {".claude/.credentials.json": path}


def test_a_directory_is_not_a_credentials_file(tmp_path: Path) -> None:
    (tmp_path / ".claude" / ".credentials.json").mkdir(parents=True)
    assert ADAPTER.home_links({}, tmp_path) == {}


@pytest.mark.parametrize("var", ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                                 "CLAUDE_CODE_OAUTH_TOKEN"])
def test_preflight_accepts_a_token_variable(tmp_path: Path, var: str) -> None:
    assert creds.preflight({var: "x"}, tmp_path, platform="linux") is None
    assert isinstance(creds.preflight({var: ""}, tmp_path, platform="linux"), Error)


def test_preflight_accepts_the_credentials_file(tmp_path: Path) -> None:
    make_credentials(tmp_path / ".claude")
    assert creds.preflight({}, tmp_path, platform="linux") is None
    config_dir = tmp_path / "cfg"
    assert creds.preflight({"CLAUDE_CONFIG_DIR": str(config_dir)}, tmp_path,
                           platform="linux") is not None
    make_credentials(config_dir)
    assert creds.preflight({"CLAUDE_CONFIG_DIR": str(config_dir)}, tmp_path,
                           platform="linux") is None


def test_preflight_trusts_the_macos_keychain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             ) -> None:
    assert creds.preflight({}, tmp_path, platform="darwin") is None
    monkeypatch.setattr(sys, "platform", "darwin")
    assert ADAPTER.preflight({}, tmp_path) is None


def test_preflight_reports_auth_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        ) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    error = ADAPTER.preflight({"ANTHROPIC_BASE_URL": "http://x"}, tmp_path)
    assert error == Error(
        code="AUTH_MISSING", category="auth",
        message="no Claude credentials: run `claude` and log in, or set ANTHROPIC_API_KEY / "
                "CLAUDE_CODE_OAUTH_TOKEN in the provider's env")
