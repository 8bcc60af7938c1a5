"""What the lockdown check's spawn gets beyond a request's (issue #26): the redirection, the
throwaway key, the proxy variables and canaries, and no real credential: neither the
provider's configured token nor one passed through from the proxy's environment."""

from __future__ import annotations

from pathlib import Path

from olp.actors import CliConfig, CliRunner
from olp.actors.testing import FakeSpawner, JsonLinesAdapter
from olp.lockdown import TARGETS
from olp.lockdown._check import CANARY_FILES, _check_config
from olp.lockdown._targets import CHECK_KEY
from olp.lockdown._vendor_mock import VendorMock


def runner(tmp_path: Path) -> CliRunner:
    config = CliConfig(
        binary="/usr/bin/claude", extra_args=("--verbose",),
        env={"CLAUDE_CODE_OAUTH_TOKEN": "real-token", "ANTHROPIC_API_KEY": "sk-real",
             "DISABLE_TELEMETRY": "1"},
        home_files={"notes.txt": "mine"}, real_home=tmp_path / "owner",
        proxy_env={"PATH": "/usr/bin", "LANG": "C.UTF-8", "GITHUB_TOKEN": "ghp-real",
                   "OPENAI_API_KEY": "sk-real-2", "HOME": "/home/owner"})
    return CliRunner(JsonLinesAdapter(), FakeSpawner(lambda spec: []), config)


def mock() -> VendorMock:
    m = VendorMock("anthropic")
    m.port = 4242
    return m


def test_no_real_credential_and_the_redirection_on_top(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    config = _check_config(runner(tmp_path), TARGETS["claude"], mock(), "CANARY",
                           empty, login=False)  # the provider's spawns use a key
    assert config.env["ANTHROPIC_API_KEY"] == CHECK_KEY
    assert config.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4242"
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in config.env
    assert config.env["DISABLE_TELEMETRY"] == "1"  # the rest of the lockdown is kept
    assert config.env["HTTPS_PROXY"] == "http://127.0.0.1:4242"
    assert config.env["NO_PROXY"] == "127.0.0.1,localhost"
    assert config.proxy_env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/home/owner"}
    assert config.real_home == empty and config.sessions is None
    assert config.extra_args == ("--verbose",) and config.binary == "/usr/bin/claude"
    assert config.home_files["notes.txt"] == "mine"
    assert all("CANARY" in config.home_files[p] for p in CANARY_FILES)


def test_a_claude_login_is_a_throwaway_oauth_token(tmp_path: Path) -> None:
    config = _check_config(runner(tmp_path), TARGETS["claude"], mock(), "CANARY",
                           tmp_path / "empty", login=True)
    assert config.env["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-olp-check"  # not the real one
    assert "ANTHROPIC_API_KEY" not in config.env
    assert config.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4242"


def test_an_emulated_login_instead_of_the_key(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    config = _check_config(runner(tmp_path), TARGETS["codex"], mock(), "CANARY", empty,
                           login=True)
    assert "OPENAI_API_KEY" not in config.env  # a ChatGPT login, linked from the owner home
    assert '"auth_mode": "chatgpt"' in (empty / ".codex" / "auth.json").read_text()
    toml = config.home_files[".codex/config.toml"]
    assert "requires_openai_auth = true" in toml and "chatgpt_base_url" in toml
    assert ".codex/AGENTS.md" not in config.home_files  # codex reads it by design: no canary


def test_a_google_login_for_gemini(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    config = _check_config(runner(tmp_path), TARGETS["gemini"], mock(), "CANARY", empty,
                           login=True)
    assert config.env["CODE_ASSIST_ENDPOINT"] == "http://127.0.0.1:4242"
    assert config.env["OLP_GEMINI_AUTH_TYPE"] == "oauth-personal"
    assert "GEMINI_API_KEY" not in config.env
    assert (empty / ".gemini" / "oauth_creds.json").is_file()  # what the preflight looks for
