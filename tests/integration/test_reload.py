"""Live reload of a running ``olp start`` (``olp reload`` sends SIGHUP): a changed provider's
actor is replaced while its stream in flight finishes on the old one; an unchanged provider
keeps its actor; a new chain is served at once; a config that does not load is refused and
the running one stays, with the error naming the path."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, OWNER_TOKEN, Proxy, in_thread, run_proxy


def config(hold: Path, *, chains: dict[str, str] | None = None) -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": False, "mistral": False},
                          # the fake talks to no API: nothing for the lockdown check to see
                          "anthropic": {"binary": str(FAKE_CLAUDE), "sandbox": False,
                                        "lockdown_check": False,
                                        "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake",
                                                "FAKE_CLAUDE_HOLD_FILE": str(hold)}}},
            "routing": {"chains": {name: [{"name": name, "provider": "anthropic",
                                           "model": model}]
                                   for name, model in (chains or {"smart": "claude-sonnet-4-6"}
                                                       ).items()}}}


def olp_reload(home: Path, proxy: Proxy) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "olp", "reload"], capture_output=True,
                          text=True, timeout=60, env={
                              "PATH": "/usr/bin:/bin", "OLP_HOME": str(home),
                              "OLP_OWNER_TOKEN": OWNER_TOKEN,
                              "OLP_PORT": proxy.url.rsplit(":", 1)[1]})


def chat(proxy: Proxy, model: str = "smart") -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}]})


def held_stream(proxy: Proxy, first: threading.Event) -> str:
    """A stream read to its end; ``first`` is set once its first content has arrived."""
    body = ""
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", timeout=60,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": "smart", "stream": True,
                            "messages": [{"role": "user", "content": "hold"}]}) as resp:
        for line in resp.iter_lines():
            body += line + "\n"
            if '"content"' in line:
                first.set()
    return body


async def test_reload_replaces_changed_actors_and_keeps_the_rest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hold1, hold2 = tmp_path / "hold1", tmp_path / "hold2"
    with trio.fail_after(90):
        async with run_proxy(home, config(hold1)) as proxy:
            first = threading.Event()
            async with trio.open_nursery() as nursery:
                result: list[str] = []

                async def stream() -> None:
                    result.append(await in_thread(lambda: held_stream(proxy, first)))

                nursery.start_soon(stream)
                await in_thread(lambda: first.wait(30))
                # the provider's env changes: its actor is replaced mid-stream
                hold2.touch()
                (home / "config.json").write_text(json.dumps(config(hold2)))
                replaced = await in_thread(lambda: olp_reload(home, proxy))
                after_replace = await in_thread(lambda: chat(proxy))
                hold1.touch()  # the old actor's held stream may finish now
            # the same provider settings, one more chain: the actor is kept
            (home / "config.json").write_text(json.dumps(config(hold2, chains={
                "smart": "claude-sonnet-4-6", "fresh": "claude-haiku-4-5"})))
            jobs_before = proxy.get("/health").json()["providers"]["anthropic"]["jobs_started"]
            kept = await in_thread(lambda: olp_reload(home, proxy))
            fresh = await in_thread(lambda: chat(proxy, "fresh"))
            health = proxy.get("/health").json()
            (home / "config.json").write_text("{broken")
            refused = await in_thread(lambda: olp_reload(home, proxy))
            still = await in_thread(lambda: chat(proxy, "fresh"))
            health_after = proxy.get("/health").json()
    assert replaced.returncode == 0, replaced.stderr
    assert "started anthropic; retired anthropic" in replaced.stdout
    assert result[0].rstrip().endswith("data: [DONE]")  # finished on the retired actor
    assert after_replace.status_code == 200
    assert kept.returncode == 0 and "kept anthropic; started none" in kept.stdout
    assert fresh.status_code == 200 and fresh.headers["x-olp-model-used"] == "claude-haiku-4-5"
    assert health["providers"]["anthropic"]["jobs_started"] == jobs_before + 1  # same actor
    assert health["config"]["generation"] == 3
    assert refused.returncode == 1 and str(home / "config.json") in refused.stderr
    assert still.status_code == 200  # the running config stayed
    assert health_after["config"]["generation"] == 3
    assert "invalid JSON" in health_after["config"]["last_error"]
    assert any(e.get("event") == "reload_failed" for e in proxy.logs)
