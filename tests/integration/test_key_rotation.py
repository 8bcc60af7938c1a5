"""Rotating a leaked key while ``olp start`` runs: ``olp keys rotate NAME --json`` (another
process, the same ``OLP_HOME``) gives the key a new secret; the running proxy stops taking the
old one within its 2 s lookup memo and takes the new one at once. The key keeps its id, so its
cache namespace stays its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy


def olp_keys(home: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "olp", "keys", *args, "--json"],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def models(proxy: Proxy, key: str) -> int:
    return httpx.get(f"{proxy.url}/v1/models", timeout=10,
                     headers={"Authorization": f"Bearer {key}"}).status_code


async def test_a_rotated_key_stops_working_and_its_new_secret_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"providers": {"enabled": {"openai": False, "mistral": False},
                            "anthropic": {"binary": str(FAKE_CLAUDE),
                                          "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}}}
    with trio.fail_after(60):
        async with run_proxy(home, config) as proxy:
            created = await in_thread(lambda: olp_keys(home, "create", "tablet"))
            old = created["key"]
            assert await in_thread(lambda: models(proxy, old)) == 200
            rotated = await in_thread(lambda: olp_keys(home, "rotate", "tablet"))
            new = rotated["key"]
            assert rotated["id"] == created["id"] and new != old
            assert await in_thread(lambda: models(proxy, new)) == 200  # at once
            statuses = []
            with trio.move_on_after(10):  # the memo of a successful lookup lasts 2 s
                while not statuses or statuses[-1] != 401:
                    statuses.append(await in_thread(lambda: models(proxy, old)))
                    await trio.sleep(0.25)
    assert statuses[-1] == 401  # the old secret is refused
    assert set(statuses) <= {200, 401}
