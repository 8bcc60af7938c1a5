"""The back-off on wrong keys against a real ``olp start`` (issue #42): after a flood of wrong
keys from 127.0.0.1, a correct key that has never been used since the start is answered at
once, and so is a key created after the flood began; a wrong key is still 429 while the
address is closed. One HTTP provider, the owner's key in ``OLP_OWNER_TOKEN``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import OWNER_TOKEN, Proxy, in_thread, run_proxy


def config() -> dict[str, Any]:
    return {"providers": {"enabled": {"anthropic": False, "openai": False, "mistral": False,
                                      "gemini": False, "qwen": False},
                          "router": {"kind": "openai-compatible",
                                     "base_url": "http://127.0.0.1:9/v1",
                                     "api_key_env": "ROUTER_KEY", "metered": True}}}


def flood(proxy: Proxy, n: int) -> list[int]:
    """``n`` wrong keys at the dashboard's login form: their statuses."""
    with httpx.Client(timeout=10) as client:
        return [client.post(f"{proxy.url}/dashboard/login", data={"key": f"olp_wrong_{i}"},
                            follow_redirects=False).status_code for i in range(n)]


def fresh_closure(proxy: Proxy) -> None:
    """Wrong keys until one is counted (401) and the next refused (429): the address has just
    been closed again, for a second at least."""
    counted = False
    with httpx.Client(timeout=10) as client:
        while True:
            code = client.get(f"{proxy.url}/v1/models",
                              headers={"Authorization": "Bearer olp_wrong"}).status_code
            if code == 429 and counted:
                return
            counted = code == 401
            time.sleep(0.02)


def health(proxy: Proxy, key: str) -> httpx.Response:
    return httpx.get(f"{proxy.url}/health", headers={"Authorization": f"Bearer {key}"},
                     timeout=10)


def new_key(home: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "olp", "keys", "create", "late", "--json"],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return str(json.loads(done.stdout)["key"])


async def test_a_correct_key_is_served_through_a_flood_of_wrong_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with trio.fail_after(60):
        async with run_proxy(home, config(), env={"ROUTER_KEY": "sk-unused"}) as proxy:
            codes = await in_thread(lambda: flood(proxy, 30))
            late = await in_thread(lambda: new_key(home))  # made after the flood began
            codes += await in_thread(lambda: flood(proxy, 30))
            await in_thread(lambda: fresh_closure(proxy))
            owner = await in_thread(lambda: health(proxy, OWNER_TOKEN))  # first use since start
            created = await in_thread(lambda: health(proxy, late))
            wrong = await in_thread(lambda: health(proxy, "olp_still_wrong"))
    assert codes[:10] == [401] * 10 and 429 in codes  # the back-off did close the address
    assert owner.status_code == 200 and "providers" in owner.json()
    assert created.status_code == 200
    assert wrong.status_code == 429 and wrong.json()["error"]["code"] == "too_many_failed_logins"
    assert int(wrong.headers["Retry-After"]) >= 1
