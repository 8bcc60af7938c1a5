"""The three real CLIs in one chain: claude → codex → vibe. claude's mock answers 429, so
the request is served by codex — within seconds, not after claude's minutes of retries —
and vibe is never spawned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import test_proxy_real_claude as claude_t
import test_proxy_real_codex as codex_t
import test_proxy_real_vibe as vibe_t
import trio
from olp_harness import in_thread, real_cli, run_proxy

pytestmark = pytest.mark.realcli

MESSAGES: list[Any] = [{"role": "user", "content": "Say hello in four words."}]


async def test_claude_429_is_served_by_codex(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude, codex, vibe = (real_cli(v) for v in ("OLP_REAL_CLAUDE", "OLP_REAL_CODEX",
                                                 "OLP_REAL_VIBE"))
    with trio.fail_after(60):
        anthropic_mock = await claude_t.start(nursery, "rate_limit")
        responses_mock = await codex_t.start(nursery, "success")
        mistral_mock = await vibe_t.start(nursery, "success")
        providers = {
            **claude_t.config(claude, anthropic_mock)["providers"],
            **{k: v for k, v in codex_t.config(codex, responses_mock)["providers"].items()
               if k != "enabled"},
            **{k: v for k, v in vibe_t.config(vibe, mistral_mock)["providers"].items()
               if k != "enabled"},
            "enabled": {"anthropic": True, "openai": True, "mistral": True},
        }
        del providers["anthropic"]["env"]["CLAUDE_CODE_MAX_RETRIES"]  # claude's default: 10
        cfg = {"providers": providers, "server": {"kill_grace_s": 1},
               "auth": {"fallback_detail_header_policy": "all"},
               "routing": {"chains": {"family": [
                   # each CLI spends an API key against its mock: metered entries, each
                   # with its consent
                   {"name": "claude", "provider": "anthropic", "model": "claude-sonnet-4-6",
                    "metered": True},
                   {"name": "codex", "provider": "openai", "model": "gpt-5.5", "metered": True},
                   {"name": "vibe", "provider": "mistral", "model": "devstral-2-25-12",
                    "metered": True}]}}}
        async with run_proxy(tmp_path / "home", cfg,
                             env=codex_t.proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="family", messages=MESSAGES))
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the mock upstream."
    assert raw.headers["x-olp-served-by"] == "codex"
    assert raw.headers["x-olp-provider-used"] == "openai"
    assert '"RETRY_ABANDONED"' in raw.headers["x-olp-fallback-detail"]
    assert anthropic_mock.request_count <= 2  # claude was stopped at its first retry
    assert responses_mock.request_count == 1
    assert mistral_mock.chat_requests() == []  # vibe was never needed
