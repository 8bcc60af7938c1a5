"""Warm CLIs through ``olp start``: a fake ``claude`` started ahead of time answers the next
request with the same system text, never another; nothing is left after stop.

The fake records its pid when it starts (before it has a request) and echoes what it got,
with its pid, as its answer. Real clock, real processes; every test has a hang guard.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import trio
from olp_harness import FAKE_CLAUDE, alive, in_thread, pids_from, run_proxy, wait_until


def config(tmp_path: Path, **block: Any) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "warm": 1,
                      "env": {"FAKE_CLAUDE_ECHO": "1",
                              "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"),
                              "ANTHROPIC_API_KEY": "sk-ant-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60},
                      **block}},
        "cache": {"enabled": False},
        "server": {"kill_grace_s": 1}}


def ask(proxy: Any, system: str, text: str, *, images: int = 0) -> dict[str, Any]:
    """One request; the fake's digest of what it received (its answer)."""
    content: Any = text
    if images:
        png = "data:image/png;base64,iVBORw0KGgo="
        content = [{"type": "text", "text": text},
                   *[{"type": "image_url", "image_url": {"url": png}}] * images]
    answer = proxy.client().chat.completions.create(model="sonnet", messages=[
        {"role": "system", "content": system}, {"role": "user", "content": content}])
    digest: dict[str, Any] = json.loads(answer.choices[0].message.content or "")
    return digest


def leaders(pidfile: Path) -> list[int]:
    """The fake claudes' own pids, in start order (each line is ``pid grandchild``)."""
    return pids_from(pidfile)[0::2]


def warm_stats(proxy: Any) -> dict[str, Any]:
    stats: dict[str, Any] = proxy.get("/health").json()["providers"]["anthropic"]["warm"]
    return stats


async def test_a_warm_claude_serves_only_its_own_system_text(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with trio.fail_after(90):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            first = await in_thread(lambda: ask(proxy, "Be terse.", "one"))
            # the first request was a miss: a warm claude for its spawn starts at once,
            # beside the cold one
            assert await wait_until(lambda: len(leaders(pidfile)) == 2, within=20)
            assert await wait_until(lambda: warm_stats(proxy)["warm"] == 1, within=20)
            [warm_pid] = set(leaders(pidfile)) - {first["pid"]}
            second = await in_thread(lambda: ask(proxy, "Be terse.", "two"))
            # another system text: never the warm claude bound to "Be terse."
            assert await wait_until(lambda: len(leaders(pidfile)) == 3, within=20)
            third = await in_thread(lambda: ask(proxy, "Be verbose.", "three"))
            stats = warm_stats(proxy)
            everyone = pids_from(pidfile)
    assert first["system_prompt"] == "Be terse."
    assert second["pid"] == warm_pid and second["system_prompt"] == "Be terse."
    assert second["stdin_head"] == "two"
    assert third["system_prompt"] == "Be verbose." and third["pid"] not in (warm_pid, first["pid"])
    assert third["stdin_head"] == "three"
    assert stats["hits"] == 1 and stats["misses"] == 2 and stats["size"] == 1
    assert stats["memory_bytes"] > 0
    # nothing left after stop: every fake claude (warm or not) and its grandchild is gone
    assert await wait_until(lambda: not any(alive(p) for p in everyone), within=10)


async def test_a_warm_claude_killed_while_it_waits_is_a_miss_not_a_failure(
        tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with trio.fail_after(90):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            first = await in_thread(lambda: ask(proxy, "Be terse.", "one"))
            assert await wait_until(lambda: warm_stats(proxy)["warm"] == 1, within=20)
            [warm_pid] = set(leaders(pidfile)) - {first["pid"]}
            os.kill(warm_pid, signal.SIGKILL)
            assert await wait_until(lambda: not alive(warm_pid), within=10)
            answer = await in_thread(lambda: ask(proxy, "Be terse.", "two"))
            stats = warm_stats(proxy)
    assert answer["stdin_head"] == "two" and answer["pid"] != warm_pid
    assert stats["hits"] == 0 and stats["failures"] == 1


async def test_images_reach_claude_as_image_blocks_warm_or_cold(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            cold = await in_thread(lambda: ask(proxy, "Look.", "what is this?", images=2))
            assert await wait_until(lambda: warm_stats(proxy)["warm"] == 1, within=20)
            warm = await in_thread(lambda: ask(proxy, "Look.", "and this?", images=1))
            stats = warm_stats(proxy)
    assert cold["images"] == ["image/png", "image/png"]
    assert warm["images"] == ["image/png"] and stats["hits"] == 1


async def test_warm_zero_starts_nothing_ahead(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, warm=0)) as proxy:
            await in_thread(lambda: ask(proxy, "Be terse.", "one"))
            await trio.sleep(1)
            health = proxy.get("/health").json()["providers"]["anthropic"]
    assert len(leaders(pidfile)) == 1 and health["warm"] is None
