"""``olp start`` with one chain whose only provider cannot run (its binary is missing): the
proxy starts and serves the healthy chain; the broken one is loud (a warning at start,
``/health``, ``olp doctor``) and answers 503 naming what is missing; a registry model of the
missing provider is a 404 that says why. A CLI spending an API key is reported metered in
``X-OLP-Credential``, ``/health`` and ``olp doctor`` alike, and needs the consent to spend for
a chain entry and a registry model alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy

MESSAGES = [{"role": "user", "content": "hi"}]


def config(tmp_path: Path, claude_env: dict[str, str]) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "env": claude_env},
        "openai": {"binary": str(tmp_path / "no-codex-here")}},
        "routing": {"chains": {
            "works": [{"provider": "anthropic", "model": "claude-sonnet-4-6"}],
            "broken": [{"provider": "openai", "model": "gpt-5.5"}]}}}


def post(proxy: Proxy, model: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": model, "messages": MESSAGES})


def doctor(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "olp", "doctor"], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": str(home),
                               "OLP_HOME": str(home)})


async def test_a_chain_without_a_usable_entry_is_loud_and_the_rest_serves(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config(tmp_path, {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"})
    with trio.fail_after(60):
        async with run_proxy(home, cfg) as proxy:
            broken = await in_thread(lambda: post(proxy, "broken"))
            works = await in_thread(lambda: post(proxy, "works"))
            unserved = await in_thread(lambda: post(proxy, "gpt-5.5"))
            health = (await in_thread(lambda: proxy.get("/health"))).json()
            models = (await in_thread(lambda: proxy.get("/v1/models"))).json()
            one = await in_thread(lambda: proxy.get("/v1/models/works"))
            logs = list(proxy.logs)
    assert broken.status_code == 503
    error = broken.json()["error"]
    assert error["code"] == "chain_unusable"
    assert "no-codex-here` not found on PATH" in error["message"]
    assert "olp doctor" in error["message"]
    assert works.status_code == 200
    assert works.json()["choices"][0]["message"]["content"] == "Hello from the mock upstream."
    assert works.headers["x-olp-credential"] == "subscription"
    # A registry model of the provider that cannot run: the cause and the fix, not a typo.
    assert unserved.status_code == 404
    message = unserved.json()["error"]["message"]
    assert "not found on PATH" in message and "npm install -g @openai/codex" in message
    assert health["chains"]["works"]["usable"] is True
    assert health["chains"]["works"]["pruned"] == []
    assert health["chains"]["broken"]["usable"] is False
    assert "not found on PATH" in health["chains"]["broken"]["reason"]
    assert health["providers"]["anthropic"]["metered"] is False
    ids = [m["id"] for m in models["data"]]
    assert "works" in ids and "broken" not in ids and "gpt-5.5" not in ids
    assert one.status_code == 200 and one.json()["owned_by"] == "olp"
    warned = [e for e in logs if e.get("chain") == "broken"]
    assert warned and warned[0]["level"].lower() == "warning"
    done = await trio.to_thread.run_sync(doctor, home)
    assert "chain broken: PROBLEM" in done.stdout and "not found on PATH" in done.stdout


async def test_an_api_key_in_the_providers_env_is_metered_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config(tmp_path, {"ANTHROPIC_API_KEY": "sk-ant-fake"})
    with trio.fail_after(60):
        async with run_proxy(home, cfg) as proxy:
            # By the registry: no entry to consent, and the provider did not: refused.
            refused = await in_thread(lambda: post(proxy, "sonnet"))
            health = (await in_thread(lambda: proxy.get("/health"))).json()
            chain = await in_thread(lambda: post(proxy, "works"))
    assert refused.status_code == 404
    assert "set providers.anthropic.metered to true" in refused.json()["error"]["message"]
    assert health["providers"]["anthropic"]["metered"] is True
    assert "ANTHROPIC_API_KEY" in health["providers"]["anthropic"]["metered_by"]
    # The chain's entry did not consent to metered spend: pruned, and the 503 says so.
    assert chain.status_code == 503 and "metered" in chain.json()["error"]["message"]
    done = await trio.to_thread.run_sync(doctor, home)
    assert "credential:  metered (ANTHROPIC_API_KEY in providers.anthropic.env)" in done.stdout
    # The provider's own consent serves its registry models, said metered.
    cfg["providers"]["anthropic"]["metered"] = True
    with trio.fail_after(60):
        async with run_proxy(home, cfg) as proxy:
            resp = await in_thread(lambda: post(proxy, "sonnet"))
    assert resp.status_code == 200
    assert resp.headers["x-olp-credential"] == "metered"
