"""``olp setup``: finds the CLIs on PATH (here a fake ``claude`` with a credentials file),
writes a config that enables them with chains from the registry, leaves metered providers
out without consent, never overwrites a config without ``--force`` (then keeps a ``.bak``),
and needs ``--yes`` where it cannot ask."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from olp.commands import setup
from olp.commands.main import main
from olp.config import load_settings

FAKE_CLAUDE = Path(__file__).resolve().parents[2] / "support" / "fakes" / "fake_claude.py"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with claude logged in (its credentials file) and a PATH with only claude."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(FAKE_CLAUDE)
    bwrap = shutil.which("bwrap")  # spawns are confined: ./dev installs it (CI included)
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (./dev installs it)")
    (bin_dir / "bwrap").symlink_to(bwrap)
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    for name in ("OLP_CLAUDE_BIN", "OLP_CODEX_BIN", "OLP_VIBE_BIN", "OLP_OWNER_TOKEN",
                 "MISTRAL_API_KEY", "CODEX_HOME", "VIBE_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OLP_HOME", str(tmp_path / "olp"))
    return tmp_path


def run(*, yes: bool = True, force: bool = False, allow_metered: bool = False,
        answers: list[bool] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    asked = iter(answers or [])
    code = setup.run(load_settings(os.environ, read_config=False), yes=yes, force=force,
                     allow_metered=allow_metered, out=out, versions=False,
                     ask=None if answers is None else (lambda q: next(asked)))
    return code, out.getvalue()


def test_it_enables_what_it_found_with_chains_from_the_registry(machine: Path) -> None:
    code, out = run()
    assert code == 0, out
    config = json.loads((machine / "olp" / "config.json").read_text())
    assert config["providers"]["enabled"] == {"anthropic": True, "openai": False,
                                              "gemini": False, "qwen": False,
                                              "mistral": False}
    chains = config["routing"]["chains"]
    assert chains["default"] == [{"name": "anthropic-default", "provider": "anthropic",
                                  "model": "claude-sonnet-4-6"}]
    assert chains["smart"][0]["model"] == "claude-opus-4-8"
    assert chains["fast"][0]["model"] == "claude-haiku-4-5"
    assert "anthropic  used:" in out and "openai     not used:" in out
    assert "npm install -g @openai/codex" in out  # the fix for what is missing
    assert stat.S_IMODE((machine / "olp" / "config.json").stat().st_mode) == 0o600
    load_settings(os.environ)  # what it wrote is a valid config


def test_an_existing_config_is_kept_unless_forced(machine: Path) -> None:
    path = machine / "olp" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"streaming": {"heartbeat_interval_ms": 5}}')
    code, out = run()
    assert code == 1 and "nothing changed" in out
    assert json.loads(path.read_text()) == {"streaming": {"heartbeat_interval_ms": 5}}
    code, out = run(force=True)
    assert code == 0 and "config.json.bak" in out
    assert json.loads((path.parent / "config.json.bak").read_text()) == \
        {"streaming": {"heartbeat_interval_ms": 5}}
    assert json.loads(path.read_text())["providers"]["enabled"]["anthropic"] is True


def test_a_metered_credential_needs_consent(machine: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (machine / "bin" / "vibe").symlink_to(FAKE_CLAUDE.with_name("fake_vibe.py"))
    monkeypatch.setenv("MISTRAL_API_KEY", "sk-mistral")  # vibe spends an API key: metered
    code, out = run()
    assert code == 0
    assert "mistral    not used: metered (an API key): not used without consent" in out
    assert _providers_in_chains(machine) == {"anthropic"}
    code, out = run(force=True, allow_metered=True)
    assert "mistral    used:" in out and "metered" in out
    default = _chains(machine)["default"]
    assert default[-1] == {"name": "mistral-default", "provider": "mistral",
                           "model": "devstral-2-25-12", "metered": True}
    code, out = run(force=True, yes=False, answers=[False])  # asked: no
    assert _providers_in_chains(machine) == {"anthropic"}
    code, out = run(force=True, yes=False, answers=[True])  # asked: yes
    assert _providers_in_chains(machine) == {"anthropic", "mistral"}


def _chains(machine: Path) -> dict[str, list[dict[str, object]]]:
    config = json.loads((machine / "olp" / "config.json").read_text())
    chains: dict[str, list[dict[str, object]]] = config["routing"]["chains"]
    return chains


def _providers_in_chains(machine: Path) -> set[object]:
    return {e["provider"] for entries in _chains(machine).values() for e in entries}


def test_a_broken_config_can_be_replaced_and_no_terminal_needs_yes(
        machine: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = machine / "olp" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal
    assert main(["setup", "--force"]) == 2  # it would ask, and there is no one to ask
    assert "--yes" in capsys.readouterr().out
    assert main(["setup", "--yes", "--force"]) == 0
    assert json.loads(path.read_text())["providers"]["enabled"]["anthropic"] is True
    assert (path.parent / "config.json.bak").read_text() == "{not json"


def test_a_chain_olp_start_could_not_use_is_not_written(
        machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What setup detected and what the proxy sees can differ. Here codex's only login is an
    API key (metered) but detection says "subscription", so every entry lacks
    ``"metered": true``: no chain is written, and setup says why (issue #30)."""
    (machine / "bin" / "claude").unlink()
    (machine / "bin" / "codex").symlink_to(FAKE_CLAUDE.with_name("fake_codex.py"))
    codex_home = machine / "user" / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "auth.json").write_text(json.dumps(
        {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-codex"}))
    detect = setup.detect

    def misread(*args: object, **kwargs: object) -> list[setup.Found]:
        found = detect(*args, **kwargs)  # type: ignore[arg-type]
        for f in found:
            if f.name == "openai":
                f.metered = False
        return found

    monkeypatch.setattr(setup, "detect", misread)
    code, out = run()
    assert code == 1
    assert "openai     used:" in out
    assert 'chain default: not written, `olp start` could not use it: ' in out
    assert '"metered": true' in out
    assert "No chain can be used yet (see why above)" in out
    config = json.loads((machine / "olp" / "config.json").read_text())
    assert "routing" not in config


def test_it_lists_the_logins_olp_login_made_and_writes_their_accounts(machine: Path) -> None:
    alice = machine / "olp" / "accounts" / "anthropic" / "alice"
    alice.mkdir(parents=True)
    (alice / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    (machine / "olp" / "accounts" / "anthropic" / "empty").mkdir()  # no login in it
    (machine / "olp" / "accounts" / "anthropic" / "Not A Name").mkdir()
    code, out = run()
    assert code == 0, out
    config = json.loads((machine / "olp" / "config.json").read_text())
    assert config["providers"]["anthropic"]["accounts"] == {"alice": {}}
    assert "logins: default (yours, for every key), alice (for the keys bound to it)" in out
    assert "olp login PROVIDER --account NAME" in out
    settings = load_settings(os.environ)
    assert [a.name for a in settings.provider("anthropic").accounts] == ["default", "alice"]
