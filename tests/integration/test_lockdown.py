"""The lockdown self-check through ``olp start`` (issue #26; ADR 0024), with the fake ``claude``
sending the check's mock the request the real CLI would (``FAKE_CLAUDE_UPSTREAM=1``): a
version that offers a tool OLP did not ask for (``FAKE_CLAUDE_EXTRA_TOOLS``) is refused with
the tool named, in the answer, ``/health`` and the log; with ``lockdown_check: false`` it is
used, with a warning; a binary replaced while OLP runs is checked again before its next
request. Real clock; every test has a hang guard."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_openai_upstream import MockOpenAI, serve_mock
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy

MESSAGES: list[Any] = [{"role": "user", "content": "Hello?"}]
ANSWER = "Hello from the mock upstream."


def config(binary: Path, *, check: bool = True, **env: str) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(binary), "metered": True, "sandbox": False,
                      "lockdown_check": check,
                      "env": {"ANTHROPIC_API_KEY": "sk-ant-fake", "FAKE_CLAUDE_UPSTREAM": "1",
                              **env},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 1}, "cache": {"enabled": False}}


def wrapper(path: Path, *, extra_tools: str = "") -> None:
    """An executable at ``path`` that runs the fake claude, offering ``extra_tools`` too: a
    new file each time (another inode), as a CLI's self-update makes."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(f"#!/bin/sh\nFAKE_CLAUDE_EXTRA_TOOLS='{extra_tools}' "
                   f"exec '{sys.executable}' '{FAKE_CLAUDE}' \"$@\"\n")
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR)
    os.replace(tmp, path)


def ask(proxy: Any) -> str:
    completion = proxy.client().chat.completions.create(model="sonnet", messages=MESSAGES)
    return completion.choices[0].message.content or ""


def refusal(proxy: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        ask(proxy)
    return caught.value


async def test_a_cli_that_offers_a_new_tool_is_refused_with_its_name(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                FAKE_CLAUDE, FAKE_CLAUDE_EXTRA_TOOLS="Teleport,Bash")) as proxy:
            error = await in_thread(lambda: refusal(proxy))
            health = proxy.get("/health").json()["providers"]["anthropic"]
    assert "lockdown_failed" in str(error.body) and "offers Bash, Teleport" in str(error.body)
    assert health["lockdown"]["state"] == "failed"
    assert health["lockdown"]["tested_on"] == "claude 2.1.332"
    assert health["lockdown"]["tested"] is False  # the fake reports no version
    assert health["lockdown"]["offered"] == ["Bash", "Teleport"]
    assert health["jobs_started"] == 0  # nothing was spawned for the request
    warned = [str(r.get("msg")) for r in proxy.logs if r.get("level") == "warning"]
    assert any("lockdown FAILED: offers Bash, Teleport" in m for m in warned), warned


async def test_with_the_check_off_the_same_cli_is_used_with_a_warning(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                FAKE_CLAUDE, check=False, FAKE_CLAUDE_EXTRA_TOOLS="Teleport")) as proxy:
            answer = await in_thread(lambda: ask(proxy))
            health = proxy.get("/health").json()["providers"]["anthropic"]
    assert answer == ANSWER
    assert health["lockdown"]["state"] == "off"
    assert any(r.get("level") == "warning" and "lockdown check is OFF" in str(r.get("msg"))
               for r in proxy.logs)


async def test_a_clean_cli_is_verified_and_a_replaced_binary_is_checked_again(
        tmp_path: Path) -> None:
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    wrapper(claude)
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(claude)) as proxy:
            assert await in_thread(lambda: ask(proxy)) == ANSWER
            assert proxy.get("/health").json()["providers"]["anthropic"]["lockdown"][
                "state"] == "verified"
            wrapper(claude, extra_tools="Teleport")  # the CLI updated itself
            error = await in_thread(lambda: refusal(proxy))
            assert "offers Teleport" in str(error.body)
            wrapper(claude)  # and back: checked again, then served
            assert await in_thread(lambda: ask(proxy)) == ANSWER
    kept = (tmp_path / "home" / "lockdown.json").read_text()
    assert "Teleport" in kept and oct((tmp_path / "home" / "lockdown.json").stat().st_mode
                                      & 0o777) == "0o600"


async def test_an_http_provider_answers_while_a_cli_is_still_being_checked(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """The checks run off the path: a request for an HTTP provider does not wait for a CLI's
    check (here one that takes minutes: its CLI starts slowly)."""
    mock: MockOpenAI = await nursery.start(serve_mock)
    slow = tmp_path / "bin" / "claude"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\n"
                    'case "$1" in --version) echo "2.1.332 (Claude Code)"; exit 0;; esac\n'
                    f"sleep 300\nexec '{sys.executable}' '{FAKE_CLAUDE}' \"$@\"\n")
    slow.chmod(0o755)
    cfg = config(slow)
    cfg["providers"]["router"] = {
        "kind": "openai-compatible", "base_url": mock.base_url, "api_key_env": "ROUTER_KEY",
        "metered": True, "timeouts": {"first_output_s": 5, "idle_s": 5, "total_s": 20}}
    cfg["routing"] = {"chains": {"fast": [{"provider": "router", "model": "gpt-x",
                                           "metered": True}]}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            answer = await in_thread(lambda: proxy.client().chat.completions.create(
                model="fast", messages=MESSAGES))
            lockdown = proxy.get("/health").json()["providers"]["anthropic"]["lockdown"]
    assert answer.choices[0].message.content == ANSWER
    assert lockdown["state"] == "pending"  # claude's check had not finished
