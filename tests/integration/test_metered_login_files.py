"""``olp start`` with logins found in files of the user's home, not in any environment:
codex's ``~/.codex/auth.json`` in API-key mode and vibe's ``~/.vibe/.env`` are metered spend.
``X-OLP-Credential`` and ``/health`` say so; a registry model of theirs (no chain, so no
entry to consent) answers 404 naming the fix, while a chain entry that consents is served.
Fake CLIs, real sockets, real clock with a hang guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import REPO, Proxy, in_thread, run_proxy

FAKES = REPO / "tests" / "support" / "fakes"


def post(proxy: Proxy, model: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}]})


async def test_keys_in_login_files_are_metered_everywhere(tmp_path: Path) -> None:
    real_home = tmp_path / "realhome"
    (real_home / ".codex").mkdir(parents=True)
    (real_home / ".codex" / "auth.json").write_text(json.dumps(
        {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-from-the-file"}))
    (real_home / ".vibe").mkdir()
    (real_home / ".vibe" / ".env").write_text("MISTRAL_API_KEY=from-the-users-file\n")
    cfg: dict[str, Any] = {
        "providers": {"enabled": {"anthropic": False},
                      "openai": {"binary": str(FAKES / "fake_codex.py"),
                                 "env": {"FAKE_CODEX_SCENARIO": "success"}},
                      "mistral": {"binary": str(FAKES / "fake_vibe.py"),
                                  "env": {"FAKE_VIBE_SCENARIO": "success"}}},
        "routing": {"chains": {
            "codex-paid": [{"provider": "openai", "model": "gpt-5.5", "metered": True}],
            "vibe-paid": [{"provider": "mistral", "model": "devstral", "metered": True}]}}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"HOME": str(real_home)}) as proxy:
            health = (await in_thread(lambda: proxy.get("/health"))).json()
            codex = await in_thread(lambda: post(proxy, "codex-paid"))
            vibe = await in_thread(lambda: post(proxy, "vibe-paid"))
            registry = await in_thread(lambda: post(proxy, "gpt-5.5"))
            listed = (await in_thread(lambda: proxy.get("/v1/models"))).json()
    assert health["providers"]["openai"]["metered"] is True
    assert health["providers"]["openai"]["metered_by"] == (
        "OPENAI_API_KEY in ~/.codex/auth.json (auth_mode apikey)")
    assert health["providers"]["mistral"]["metered"] is True
    assert health["providers"]["mistral"]["metered_by"] == "MISTRAL_API_KEY in ~/.vibe/.env"
    for resp in (codex, vibe):
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-olp-credential"] == "metered"
    assert registry.status_code == 404
    assert "set providers.openai.metered to true" in registry.json()["error"]["message"]
    ids = [m["id"] for m in listed["data"]]
    assert "codex-paid" in ids and "gpt-5.5" not in ids and "devstral" not in ids
