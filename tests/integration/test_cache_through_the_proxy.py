"""The cache over a real socket: miss then hit with no spawn, per-key isolation, survives a
restart, Cache-Control honoured, owner-only stats and clearing (`olp cache`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, OWNER_TOKEN, Proxy, in_thread, pids_from, run_proxy

BODY: dict[str, Any] = {"model": "sonnet", "messages": [{"role": "user", "content": "hi"}]}


def config(tmp_path: Path) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "env": {
            "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"), "ANTHROPIC_API_KEY": "sk-fake"}}}}


def post(proxy: Proxy, token: str, stream: bool = False, **headers: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", json={**BODY, "stream": stream},
                      headers={"Authorization": f"Bearer {token}", **headers}, timeout=30)


async def olp(home: Path, *args: str) -> str:
    done = await trio.run_process([sys.executable, "-m", "olp", *args], capture_stdout=True,
                                  env={**os.environ, "OLP_HOME": str(home),
                                       "OLP_OWNER_TOKEN": OWNER_TOKEN})
    return done.stdout.decode()


async def test_cache_miss_hit_isolation_restart_and_clear(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spawns = lambda: len(pids_from(tmp_path / "pids")) // 2  # noqa: E731
    with trio.fail_after(90):
        async with run_proxy(home, config(tmp_path)) as proxy:
            created = await olp(home, "keys", "create", "kid")
            guest = next(w for w in created.split() if w.startswith("olp_"))
            first = await in_thread(lambda: post(proxy, OWNER_TOKEN))
            again = await in_thread(lambda: post(proxy, OWNER_TOKEN, stream=True))
            assert first.headers["x-olp-cache"] == "miss"
            assert again.headers["x-olp-cache"] == "hit" and spawns() == 1
            assert '"content":"Hello"' in again.text and again.text.endswith("[DONE]\n\n")
            assert first.json()["choices"][0]["message"]["content"] == \
                "Hello from the mock upstream."
            stats = await in_thread(lambda: proxy.get("/cache/stats").json())
            assert (stats["hits"], stats["misses"], stats["entries"]) == (1, 1, 1)
            # Another key never sees this answer; and it may not read the owner's stats.
            other = await in_thread(lambda: post(proxy, guest))
            assert other.headers["x-olp-cache"] == "miss" and spawns() == 2
            assert (await in_thread(lambda: proxy.get("/cache/stats", guest))).status_code \
                == 403
            bypass = await in_thread(lambda: post(proxy, OWNER_TOKEN, **{
                "Cache-Control": "no-store"}))
            assert bypass.headers["x-olp-cache"] == "bypass" and spawns() == 3
        async with run_proxy(home, config(tmp_path)) as proxy:
            after = await in_thread(lambda: post(proxy, OWNER_TOKEN))
            assert after.headers["x-olp-cache"] == "hit" and spawns() == 3  # survived
            forbidden = await in_thread(lambda: httpx.delete(
                f"{proxy.url}/cache", headers={"Authorization": "Bearer " + OWNER_TOKEN[:-1]}))
            assert forbidden.status_code == 401
            out = await olp(home, "cache", "stats", "--url", proxy.url)
            assert "entries    2" in out
            out = await olp(home, "cache", "clear", "--url", proxy.url)
            assert "Deleted 2" in out  # the owner's and the guest's
            cleared = await in_thread(lambda: post(proxy, OWNER_TOKEN))
            assert cleared.headers["x-olp-cache"] == "miss" and spawns() == 4
