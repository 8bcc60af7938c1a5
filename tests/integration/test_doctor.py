"""`olp doctor`: what is missing and how to fix it; `--probe` sends one real request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from olp_harness import FAKE_CLAUDE, REPO, fakes_on_exec, unchecked_by_default

FIXTURES = REPO / "tests" / "fixtures"


def doctor(home: Path, config: dict[str, object], *args: str, path: str = "/usr/bin:/bin",
           **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``olp doctor`` with ``config`` (``lockdown_check: false`` where it says nothing: most
    fakes talk to no API, so nothing could be checked)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(fakes_on_exec(unchecked_by_default(
        json.loads(json.dumps(config))))))
    env = {"PATH": path, "HOME": str(home), "OLP_HOME": str(home), **extra_env}
    return subprocess.run([sys.executable, "-m", "olp", "doctor", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_reports_missing_binaries_with_the_fix(tmp_path: Path) -> None:
    done = doctor(tmp_path / "home", {"providers": {"enabled": {"openai": False,
                                                                "mistral": False}}})
    assert done.returncode == 1
    assert "anthropic  PROBLEM" in done.stdout and "`claude` not found on PATH" in done.stdout
    assert "npm install -g @anthropic-ai/claude-code" in done.stdout
    assert "openai     disabled" in done.stdout
    assert done.stderr == ""


def test_missing_credentials_then_a_probe_through_the_fake(tmp_path: Path) -> None:
    base = {"providers": {"enabled": {"openai": False, "mistral": False},
                          "anthropic": {"binary": str(FAKE_CLAUDE),
                                        # the transcripts the fake replays, inside the sandbox
                                        "sandbox_read_only": [str(FIXTURES)]}}}
    done = doctor(tmp_path / "a", base, path=os.environ["PATH"])
    assert done.returncode == 1 and "credentials: missing" in done.stdout
    assert "ANTHROPIC_API_KEY" in done.stdout  # the fix names what to set
    assert "lockdown: not checked (lockdown_check: false)" in done.stdout
    # the fake sends the self-check's mock the request claude would (issue #26)
    base["providers"]["anthropic"].update(  # type: ignore[attr-defined]
        env={"ANTHROPIC_API_KEY": "sk-fake", "FAKE_CLAUDE_UPSTREAM": "1"}, lockdown_check=True)
    done = doctor(tmp_path / "b", base, "--probe", path=os.environ["PATH"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "anthropic  ok" in done.stdout
    assert "  lockdown: verified (claude " in done.stdout
    assert "sandbox:     bubblewrap" in done.stdout  # the probe ran confined
    assert "probe anthropic  ok: 'Hello from the mock upstream.', 32 tokens" in done.stdout


def test_without_bubblewrap_a_cli_provider_is_refused_unless_the_owner_opts_out(
        tmp_path: Path) -> None:
    claude = {"binary": str(FAKE_CLAUDE), "env": {"ANTHROPIC_API_KEY": "sk-fake"}}
    config: dict[str, object] = {"providers": {"enabled": {"openai": False, "mistral": False},
                                               "anthropic": claude}}
    done = doctor(tmp_path / "a", config, path=os.environ["PATH"],
                  OLP_BWRAP_BIN=str(tmp_path / "no-bwrap-here"))
    assert done.returncode == 1
    assert "anthropic  PROBLEM" in done.stdout
    assert "bubblewrap (bwrap) not found" in done.stdout
    assert "apt-get install bubblewrap" in done.stdout and "sandbox: false" in done.stdout
    claude["sandbox"] = False
    done = doctor(tmp_path / "b", config, path=os.environ["PATH"],
                  OLP_BWRAP_BIN=str(tmp_path / "no-bwrap-here"))
    assert done.returncode == 0, done.stdout
    assert "anthropic  ok" in done.stdout
    assert "sandbox:     OFF" in done.stdout


def test_metered_from_a_login_file(tmp_path: Path) -> None:
    """codex's auth.json in API-key mode is metered; with the provider's consent its models
    are served without a chain (no "no chain" line)."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text(json.dumps(
        {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-file"}))
    codex = REPO / "tests" / "support" / "fakes" / "fake_codex.py"
    config: dict[str, object] = {"providers": {
        "enabled": {"anthropic": False, "mistral": False},
        "openai": {"binary": str(codex), "sandbox": False}}}
    done = doctor(home, config, path=os.environ["PATH"])
    assert "credential:  metered (OPENAI_API_KEY in ~/.codex/auth.json (auth_mode apikey))" in (
        done.stdout)
    assert "no chain:    its models answer 404" in done.stdout
    config["providers"]["openai"]["metered"] = True  # type: ignore[index]
    done = doctor(home, config, path=os.environ["PATH"])
    assert "credential:  metered (providers.openai.metered is true)" in done.stdout
    assert "no chain:" not in done.stdout


def test_lists_a_chain_without_a_usable_entry_and_says_what_is_metered(tmp_path: Path) -> None:
    config = {"providers": {"enabled": {"openai": False, "mistral": False},
                            "anthropic": {"binary": str(FAKE_CLAUDE), "sandbox": False,
                                          "env": {"ANTHROPIC_API_KEY": "sk-fake"}}},
              "routing": {"chains": {
                  "pay": [{"provider": "anthropic", "model": "claude-sonnet-4-6",
                           "metered": True}],
                  "cli": [{"provider": "openai", "model": "gpt-5.5"}]}}}
    done = doctor(tmp_path / "home", config, path=os.environ["PATH"])
    assert "credential:  metered (ANTHROPIC_API_KEY in providers.anthropic.env)" in done.stdout
    # Its registry models (no chain, so no entry to consent) are refused, with the fix.
    assert "no chain:    its models answer 404: `anthropic` is metered" in done.stdout
    assert "set providers.anthropic.metered to true" in done.stdout
    assert "chain cli: PROBLEM no usable entry" in done.stdout
    assert "openai:gpt-5.5: disabled" in done.stdout
    assert "chain pay" not in done.stdout
    assert done.returncode == 1  # a chain that answers 503 is a problem to fix


def test_names_each_login_and_what_is_missing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    alice = home / "accounts" / "anthropic" / "alice"
    alice.mkdir(parents=True)
    (alice / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "t"}}')
    config = {"providers": {"enabled": {"openai": False, "mistral": False},
                            "anthropic": {"binary": str(FAKE_CLAUDE), "sandbox": False,
                                          "accounts": {
                                              "alice": {},
                                              "bob": {"serves": "*"},
                                              "work": {"env": {"ANTHROPIC_API_KEY": "sk"}}}}}}
    done = doctor(home, config, path=os.environ["PATH"])
    out = done.stdout
    assert "credentials: found" in out
    assert "account:     default: MISSING login (the owner's own login; serves every key): " \
        "run `olp login anthropic --account default`" in out
    assert f"account:     alice: login found, subscription ({alice}; serves bound keys only)" \
        in out
    assert "account:     bob: MISSING login" in out and "serves every key" in out
    assert "account:     work: login found, metered (ANTHROPIC_API_KEY in providers." in out
