"""``olp status`` and ``olp chain show`` against a running ``olp start`` (and after it stopped):
providers with in-flight and cooldowns, chains with their entries, the pruned ones and why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, OWNER_TOKEN, Proxy, in_thread, run_proxy

from olp.store import HEALTH_STATE, Database, StateStore


def olp(home: Path, proxy: Proxy | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "OLP_HOME": str(home), "OLP_OWNER_TOKEN": OWNER_TOKEN,
           "OLP_PORT": proxy.url.rsplit(":", 1)[1] if proxy else "9"}
    return subprocess.run([sys.executable, "-m", "olp", *args], env=env, capture_output=True,
                          text=True, timeout=30)


async def test_status_and_chain_show(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config: dict[str, Any] = {
        "providers": {"enabled": {"mistral": False},
                      "openai": {"binary": str(tmp_path / "no-codex")},  # not there: pruned
                      "anthropic": {"binary": str(FAKE_CLAUDE), "env": {
                          "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}},
        "routing": {"chains": {"smart": [
            {"name": "gpt", "provider": "openai", "model": "gpt-5.5"},
            {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}
    # a usage window a previous run hit: the proxy restores it at start
    home.mkdir()
    with Database(home / "olp.db") as db:
        await StateStore(db).save_async(HEALTH_STATE, {"circuits": [], "cooldowns": [{
            "provider": "anthropic", "model": None, "category": "usage_window",
            "reason": "USAGE_WINDOW", "until": time.time() + 3600}]})
    with trio.fail_after(60):
        async with run_proxy(home, config) as proxy:
            limited = await in_thread(lambda: httpx.post(
                f"{proxy.url}/v1/chat/completions", timeout=30,
                headers={"Authorization": f"Bearer {proxy.token}"},
                json={"model": "smart", "messages": [{"role": "user", "content": "hi"}]}))
            status = await in_thread(lambda: olp(home, proxy, "status"))
            status_json = await in_thread(lambda: olp(home, proxy, "status", "--json"))
            shown = await in_thread(lambda: olp(home, proxy, "chain", "show", "smart", "--json"))
            text = await in_thread(lambda: olp(home, proxy, "chain", "show"))
        stopped = await in_thread(lambda: olp(home, None, "chain", "show", "smart", "--json"))
        down = await in_thread(lambda: olp(home, None, "status"))
    assert limited.status_code == 429  # every hop is resting
    assert limited.json()["error"]["code"] == "all_hops_cooling"
    assert status.returncode == 0, status.stderr
    assert "anthropic  0/4 in flight" in status.stdout
    assert "cooling (USAGE_WINDOW) for 59m" in status.stdout
    assert "openai     not running" in status.stdout and "chain smart: ok" in status.stdout
    assert json.loads(status_json.stdout)["providers"]["anthropic"]["running"] is True
    view = json.loads(shown.stdout)
    route = view["routes"]["smart"]
    assert view["source"] == "running proxy" and route["kind"] == "chain"
    assert [(h["entry"], h["provider"]) for h in route["hops"]] == [("sub", "anthropic")]
    assert route["hops"][0]["resting"] and route["hops"][0]["resting"][0].startswith("cooling")
    assert len(route["pruned"]) == 1 and route["pruned"][0].startswith("gpt: ")
    assert "not found" in route["pruned"][0]
    assert "chain smart:" in text.stdout and "pruned: gpt:" in text.stdout
    saved = json.loads(stopped.stdout)
    assert saved["source"] == "saved state"
    assert saved["routes"]["smart"]["hops"][0]["resting"]  # the cooldown it saved
    assert down.returncode == 1 and "no proxy answered" in down.stderr


async def test_status_and_chain_show_name_each_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    alice = home / "accounts" / "anthropic" / "alice"
    alice.mkdir(parents=True)
    (alice / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "a"}}')
    config: dict[str, Any] = {
        "providers": {"enabled": {"openai": False, "mistral": False},
                      "anthropic": {"binary": str(FAKE_CLAUDE),
                                    "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                                    "accounts": {"alice": {}, "bob": {"serves": "*"}}}},
        "routing": {"chains": {"smart": [
            {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}
    with Database(home / "olp.db") as db:  # alice's login rests; the others do not
        await StateStore(db).save_async(HEALTH_STATE, {"circuits": [], "cooldowns": [{
            "provider": "anthropic@alice", "model": None, "category": "usage_window",
            "reason": "USAGE_WINDOW", "until": time.time() + 3600}]})
    with trio.fail_after(60):
        async with run_proxy(home, config) as proxy:
            status = await in_thread(lambda: olp(home, proxy, "status"))
            text = await in_thread(lambda: olp(home, proxy, "chain", "show", "smart"))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    [alice_line] = [line for line in lines if "anthropic@alice" in line]
    assert "account alice" in alice_line and "subscription" in alice_line
    assert any("cooling (USAGE_WINDOW)" in line for line in lines)
    [bob_line] = [line for line in lines if "anthropic@bob" in line]
    assert "account bob, NO LOGIN" in bob_line
    assert "accounts=default,alice(bound): alice: cooling (USAGE_WINDOW)" in text.stdout
