"""``olp login`` (issue #30), against a fake CLI that records its argv and environment: the
account's home is made 0700 (parents too, an existing one tightened), the CLI's home variable
names it, the owner's login variables are gone, the CLI's exit status is passed on; ``--dry-run``
runs nothing; a bad account name or an unknown provider is a usage error; qwen gets the
``config.json`` snippet instead, and claude's ``--token`` the token's."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from olp.commands import login
from olp.commands.main import main
from olp.config import load_settings
from olp.providers import kit

#: The fake CLI: writes its argv and environment to $FAKE_LOGIN_RECORD, drops a login file
#: where $FAKE_LOGIN_FILE names it, then exits $FAKE_EXIT (or kills itself with $FAKE_SIGNAL).
FAKE_CLI = f"""#!{sys.executable}
import json, os, signal, sys
with open(os.environ["FAKE_LOGIN_RECORD"], "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, f)
if os.environ.get("FAKE_LOGIN_FILE"):
    with open(os.path.expandvars(os.environ["FAKE_LOGIN_FILE"]), "w") as f:
        f.write("{{}}")
if os.environ.get("FAKE_SIGNAL"):
    os.kill(os.getpid(), int(os.environ["FAKE_SIGNAL"]))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""

#: The variables of the user's environment that hold or point at their own logins.
OWNER_LOGIN = {"ANTHROPIC_API_KEY": "sk-owner", "CLAUDE_CODE_OAUTH_TOKEN": "owner-token",
               "OPENAI_API_KEY": "sk-owner", "GEMINI_API_KEY": "owner-key",
               "MISTRAL_API_KEY": "owner-key", "CLAUDE_CONFIG_DIR": "/owner/claude",
               "CODEX_HOME": "/owner/codex"}


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``OLP_HOME``, a fake binary for every CLI (``OLP_*_BIN``), the owner's login variables
    set, and a display (so the browser login is the default)."""
    fake = tmp_path / "bin" / "fake-cli"
    fake.parent.mkdir()
    fake.write_text(FAKE_CLI)
    fake.chmod(0o755)
    for spec in kit.builtin_specs():
        if spec.binary_env:
            monkeypatch.setenv(spec.binary_env, str(fake))
    for name in ("OLP_OWNER_TOKEN", "SSH_CONNECTION", "SSH_TTY", "NO_BROWSER",
                 "GEMINI_CLI_HOME", "VIBE_HOME", "FAKE_EXIT", "FAKE_SIGNAL", "FAKE_LOGIN_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in OWNER_LOGIN.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setenv("OLP_HOME", str(tmp_path / "olp"))
    monkeypatch.setenv("FAKE_LOGIN_RECORD", str(tmp_path / "record.json"))
    monkeypatch.setenv("KEPT_BY_LOGIN", "yes")
    yield tmp_path


def _record(machine: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((machine / "record.json").read_text())
    return data


def _env(machine: Path) -> dict[str, str]:
    env = _record(machine)["env"]
    assert isinstance(env, dict)
    return env


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _run(provider: str, account: str, *, token: bool = False) -> int:
    # claude's account login is a token on macOS: pin the platform these tests describe
    return login.run(load_settings(os.environ), login._provider(provider), account,
                     token=token, platform="linux")


def test_it_logs_in_into_a_new_home_0700_without_the_owners_login(
        machine: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    home = machine / "olp" / "accounts" / "anthropic" / "alice"
    monkeypatch.setenv("FAKE_LOGIN_FILE", "$CLAUDE_CONFIG_DIR/.credentials.json")
    assert _run("claude", "alice") == 0
    assert _record(machine)["argv"] == ["auth", "login"]
    env = _env(machine)
    assert env["CLAUDE_CONFIG_DIR"] == str(home)
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OLP_CLAUDE_CONFIG_DIR"):
        assert name not in env
    assert env["KEPT_BY_LOGIN"] == "yes"  # the rest of the user's environment
    assert _mode(home) == 0o700
    assert _mode(home.parent) == 0o700 and _mode(home.parent.parent) == 0o700
    assert (home / ".credentials.json").is_file()
    out = capsys.readouterr().out
    assert '{"providers": {"anthropic": {"accounts": {"alice": {}}}}}' in out
    assert "olp keys update NAME --accounts anthropic:alice" in out
    assert "no login in" not in out


def test_an_existing_home_is_tightened_and_a_declared_one_needs_no_snippet(
        machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = machine / "elsewhere" / "bob-codex"
    home.mkdir(parents=True, mode=0o755)
    home.chmod(0o755)
    (machine / "olp").mkdir()
    (machine / "olp" / "config.json").write_text(json.dumps(
        {"providers": {"openai": {"accounts": {"bob": {"home": str(home)}}}}}))
    assert _run("openai", "bob") == 0
    assert _record(machine)["argv"] == ["login"]
    env = _env(machine)
    assert env["CODEX_HOME"] == str(home)
    assert "OPENAI_API_KEY" not in env
    assert _mode(home) == 0o700
    out = capsys.readouterr().out
    assert "not in config.json" not in out
    assert f"no login in {home / 'auth.json'}" in out  # the fake stored none


def test_the_default_account_is_your_own_login_where_the_cli_keeps_it(
        machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["login", "claude"]) == 0
    env = _env(machine)
    assert env["CLAUDE_CONFIG_DIR"] == "/owner/claude"  # not set by olp: the user's own
    assert env["ANTHROPIC_API_KEY"] == "sk-owner"
    assert not (machine / "olp" / "accounts").exists()
    assert "not in config.json" not in capsys.readouterr().out


def test_the_clis_exit_status_is_passed_on(machine: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EXIT", "3")
    assert main(["login", "codex", "--account", "alice"]) == 3
    captured = capsys.readouterr()
    assert "exited 3" in captured.err
    assert "not in config.json" not in captured.out
    monkeypatch.delenv("FAKE_EXIT")
    monkeypatch.setenv("FAKE_SIGNAL", str(int(signal.SIGTERM)))
    assert main(["login", "codex", "--account", "alice"]) == 128 + signal.SIGTERM


def test_without_a_browser_codex_uses_the_device_code_and_gemini_a_pasted_code(
        machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["login", "codex", "--account", "alice", "--device-auth"]) == 0
    assert _record(machine)["argv"] == ["login", "--device-auth"]
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.1 50000 192.0.2.2 22")  # chosen by itself
    assert main(["login", "codex", "--account", "alice"]) == 0
    assert _record(machine)["argv"] == ["login", "--device-auth"]
    assert main(["login", "gemini", "--account", "alice"]) == 0
    assert _record(machine)["argv"] == []
    env = _env(machine)
    assert env["NO_BROWSER"] == "true"
    assert env["GEMINI_CLI_HOME"] == str(machine / "olp" / "accounts" / "gemini" / "alice")
    assert "GEMINI_API_KEY" not in env
    assert main(["login", "vibe", "--account", "alice"]) == 0
    assert _record(machine)["argv"] == ["--setup"]
    assert "MISTRAL_API_KEY" not in _env(machine)


def test_no_display_means_no_browser_except_on_macos(machine: Path) -> None:
    settings, spec = load_settings(os.environ), login._provider("codex")
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    assert login.plan(settings, spec, "a", env, platform="linux").command[1:] == \
        ["login", "--device-auth"]
    assert login.plan(settings, spec, "a", env, platform="darwin").command[1:] == ["login"]
    assert login.plan(settings, spec, "a", os.environ, platform="linux").command[1:] == \
        ["login"]


def test_a_dry_run_runs_nothing_and_says_what_would_run(
        machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["login", "anthropic", "--account", "alice", "--dry-run"]) == 0
    assert not (machine / "record.json").exists()
    assert not (machine / "olp" / "accounts").exists()
    out = capsys.readouterr().out
    home = machine / "olp" / "accounts" / "anthropic" / "alice"
    assert f"{os.environ['OLP_CLAUDE_BIN']} auth login" in out
    assert f"CLAUDE_CONFIG_DIR={home}" in out
    assert "ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN" in out  # unset for the login
    assert str(home / ".credentials.json") in out


@pytest.mark.parametrize("argv", [["login", "claude", "--account", "Alice"],
                                  ["login", "claude", "--account", "a/b"],
                                  ["login", "claude", "--account", "-x"],
                                  ["login", "copilot"], ["login", "openai-compatible"]])
def test_a_bad_account_name_or_an_unknown_provider_is_a_usage_error(
        machine: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert not (machine / "record.json").exists()
    assert "usage: olp login" in capsys.readouterr().err


def test_qwen_has_no_login_to_run_it_gets_the_env_snippet(
        machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["login", "qwen", "--account", "work"]) == 0
    assert not (machine / "record.json").exists()
    out = capsys.readouterr().out
    snippet = json.loads(next(line for line in out.splitlines() if '"providers"' in line))
    env = snippet["providers"]["qwen"]["accounts"]["work"]["env"]
    assert set(env) == {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
    assert "olp keys update NAME --accounts qwen:work" in out


def test_claudes_token_is_printed_not_stored_so_the_account_gets_the_env_snippet(
        machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("claude", "ci", token=True) == 0
    assert _record(machine)["argv"] == ["setup-token"]
    out = capsys.readouterr().out
    assert '{"providers": {"anthropic": {"accounts": {"ci": {"env": ' \
           '{"CLAUDE_CODE_OAUTH_TOKEN": "<the token>"}}}}}}' in out
    assert main(["login", "codex", "--token"]) == 2  # claude's only


def test_on_macos_claudes_account_login_is_the_token(machine: Path) -> None:
    settings = load_settings(os.environ)
    spec = login._provider("claude")
    how = login.plan(settings, spec, "alice", os.environ, platform="darwin")
    assert how.token and how.command[1:] == ["setup-token"] and "keychain" in how.why
    own = login.plan(settings, spec, "default", os.environ, platform="darwin")
    assert not own.token and own.command[1:] == ["auth", "login"]


def test_a_cli_that_is_not_installed_is_an_error(machine: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLP_VIBE_BIN", str(machine / "missing"))
    monkeypatch.setenv("PATH", str(machine / "bin"))
    assert main(["login", "vibe", "--account", "alice"]) == 1
    assert "vibe not found" in capsys.readouterr().err
    assert not (machine / "olp" / "accounts").exists()
