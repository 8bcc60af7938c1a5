"""The lockdown self-check with the five pinned real CLIs (issue #26; ADR 0024).

``olp doctor`` checks every enabled CLI at once, each against OLP's own loopback mock of its
vendor (``olp/lockdown``), with exactly the spawn requests get: each of the five passes. A
lockdown weakened by the owner (a tool switched back on in ``extra_args``, as the security
tests do) fails, naming the tools. Through ``olp start``, a verified claude answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from mock_anthropic import MockAnthropic
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_claude import config, start

ANSWER = "Hello from the mock upstream."


def doctor(home: Path, providers: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"providers": providers}))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLP_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "olp", "doctor"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def all_five() -> dict[str, Any]:
    return {"enabled": {"anthropic": True, "openai": True, "gemini": True, "qwen": True,
                        "mistral": True},
            "qwen": {"consent": True, "binary": real_cli("OLP_REAL_QWEN")},
            "anthropic": {"binary": real_cli("OLP_REAL_CLAUDE")},
            "openai": {"binary": real_cli("OLP_REAL_CODEX")},
            "gemini": {"binary": real_cli("OLP_REAL_GEMINI")},
            "mistral": {"binary": real_cli("OLP_REAL_VIBE")}}


def lockdown_lines(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.strip().startswith("lockdown:")]


def test_each_pinned_cli_passes(tmp_path: Path) -> None:
    done = doctor(tmp_path / "home", all_five())
    assert sorted(lockdown_lines(done.stdout)) == sorted([
        "lockdown: verified (claude 2.1.332 (Claude Code))",
        "lockdown: verified (codex codex-cli 0.171.0)",
        "lockdown: verified (gemini 0.61.0)",
        "lockdown: verified (qwen 0.24.4)",
        "lockdown: verified (vibe vibe 3.0.2)"]), done.stdout + done.stderr
    tested_on = sorted(line.strip() for line in done.stdout.splitlines()
                       if line.strip().startswith("tested on:"))
    assert tested_on == ["tested on:   claude 2.1.332", "tested on:   codex 0.171.0",
                         "tested on:   gemini 0.61.0", "tested on:   qwen 0.24.4",
                         "tested on:   vibe 3.0.2"]  # the installed ones: nothing flagged
    kept = json.loads((tmp_path / "home" / "lockdown.json").read_text())
    assert len(kept) == 5
    again = doctor(tmp_path / "home", all_five())  # kept by binary: not run again
    assert lockdown_lines(again.stdout) == lockdown_lines(done.stdout)


def test_a_tool_switched_back_on_fails_the_check_naming_it(tmp_path: Path) -> None:
    providers = all_five()
    providers["enabled"].update(gemini=False, qwen=False, mistral=False)
    providers["anthropic"]["extra_args"] = ["--tools", "Bash,Read", "--allowedTools", "Bash,Read"]
    providers["openai"]["extra_args"] = ["--enable", "shell_tool"]
    done = doctor(tmp_path / "home", providers)
    assert done.returncode == 1
    assert sorted(lockdown_lines(done.stdout)) == [
        "lockdown: FAILED: offers Bash, Read",
        "lockdown: FAILED: offers exec_command, write_stdin"], done.stdout
    assert "providers.anthropic.lockdown_check: false" in done.stdout  # the way out, named


async def test_a_verified_claude_serves_through_olp_start(tmp_path: Path,
                                                         nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock: MockAnthropic = await start(nursery, "success")
        cfg = config(claude, mock)
        cfg["providers"]["anthropic"]["lockdown_check"] = True
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=[{"role": "user", "content": "Hello?"}]))
            health = proxy.get("/health").json()["providers"]["anthropic"]["lockdown"]
    assert completion.choices[0].message.content == ANSWER
    assert health["state"] == "verified" and health["version"].startswith("2.1.332")
    assert len(mock.requests) == 1  # the check used OLP's own mock, not the test's


def test_codex_on_its_app_server_is_checked_there_too(tmp_path: Path) -> None:
    providers = all_five()
    providers["enabled"].update(anthropic=False, gemini=False, qwen=False, mistral=False)
    providers["openai"]["codex_mode"] = "app-server"
    done = doctor(tmp_path / "home", providers)
    assert lockdown_lines(done.stdout) == ["lockdown: verified (codex codex-cli 0.171.0)"], \
        done.stdout + done.stderr
    providers["openai"]["extra_args"] = ["-c", "features.shell_tool=true"]
    weakened = doctor(tmp_path / "weakened", providers)
    assert weakened.returncode == 1
    assert lockdown_lines(weakened.stdout) == [
        "lockdown: FAILED: offers exec_command, write_stdin"], weakened.stdout
