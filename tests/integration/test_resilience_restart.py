"""Circuits survive a restart (SQLite), and the owner can reset them (`olp cooldowns reset`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, OWNER_TOKEN, in_thread, pids_from, run_proxy

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


def config(tmp_path: Path) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "env": {
            "FAKE_CLAUDE_SCENARIO": "server_error", "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"),
            "ANTHROPIC_API_KEY": "sk-fake"}}},
        "routing": {"resilience": {"circuit_failures": 2, "probe_after_s": 600}},
        "server": {"kill_grace_s": 1}}


def status_of(client: openai.OpenAI) -> tuple[int, str]:
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="sonnet", messages=MESSAGES)
    return info.value.status_code, info.value.response.json()["error"]["code"]


async def test_an_open_circuit_survives_a_restart_until_reset(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spawns = lambda: len(pids_from(tmp_path / "pids")) // 2  # noqa: E731
    with trio.fail_after(90):
        async with run_proxy(home, config(tmp_path)) as proxy:
            client = proxy.client()
            assert await in_thread(lambda: status_of(client)) == (503, "upstream_5xx")
            assert await in_thread(lambda: status_of(client)) == (503, "upstream_5xx")
            # Two failures opened the circuit: no spawn, 429 with the time to the probe.
            assert await in_thread(lambda: status_of(client)) == (429, "all_hops_cooling")
            assert spawns() == 2
        async with run_proxy(home, config(tmp_path)) as proxy:
            client = proxy.client()
            assert await in_thread(lambda: status_of(client)) == (429, "all_hops_cooling")
            health = await in_thread(lambda: proxy.get("/health").json())
            assert [c["provider"] for c in health["resilience"]["circuits"]] == ["anthropic"]
            reset = await trio.run_process(
                [sys.executable, "-m", "olp", "cooldowns", "reset", "--url", proxy.url],
                env={**os.environ, "OLP_HOME": str(home), "OLP_OWNER_TOKEN": OWNER_TOKEN},
                capture_stdout=True)
            assert b"Reset 1" in reset.stdout
            assert await in_thread(lambda: status_of(client)) == (503, "upstream_5xx")
            assert spawns() == 3


async def test_soft_trigger_counts_survive_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config(tmp_path)
    cfg["providers"]["anthropic"]["env"]["FAKE_CLAUDE_SCENARIO"] = "success"
    cfg["routing"] = {"soft_triggers": {"anthropic": {"daily_request_count_threshold": 2}}}

    def ask(client: openai.OpenAI, n: int) -> int:
        try:  # distinct questions: the cache must not answer them
            client.chat.completions.create(model="sonnet",
                                           messages=[{"role": "user", "content": f"q{n}"}])
            return 200
        except openai.APIStatusError as exc:
            return exc.status_code

    with trio.fail_after(90):
        async with run_proxy(home, cfg) as proxy:
            client = proxy.client()
            assert [await in_thread(lambda n=n: ask(client, n)) for n in (1, 2)] == [200, 200]
        async with run_proxy(home, cfg) as proxy:
            client = proxy.client()
            assert await in_thread(lambda: ask(client, 3)) == 429  # today's budget is spent
    assert len(pids_from(tmp_path / "pids")) // 2 == 2
