"""The real CLIs in one chain. claude → codex → vibe: claude's mock answers 429, so the
request is served by codex — within seconds, not after claude's minutes of retries — and vibe
is never spawned. claude → codex → gemini → qwen → vibe: the family's chain answers from
whichever CLI still has quota."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_proxy_real_claude as claude_t
import test_proxy_real_codex as codex_t
import test_proxy_real_vibe as vibe_t
import trio
from olp_harness import in_thread, real_cli, run_proxy

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


@pytest.mark.parametrize("served_by", ["gemini", "qwen", "vibe"])
async def test_five_clis_answer_from_whichever_has_quota(tmp_path: Path, nursery: trio.Nursery,
                                                         served_by: str) -> None:
    """claude → codex → gemini → qwen → vibe, every real CLI against its mock: the hops before
    ``served_by`` answer 429, so the request goes down the chain to the first with quota, and
    the hops after it are never spawned."""
    import test_proxy_real_gemini as gemini_t
    import test_proxy_real_qwen as qwen_t

    order = ["claude", "codex", "gemini", "qwen", "vibe"]
    out_of_quota = set(order[:order.index(served_by)])
    bins = {name: real_cli(f"OLP_REAL_{name.upper()}") for name in order}

    def scenario(name: str) -> str:
        return "rate_limit" if name in out_of_quota else "success"

    with trio.fail_after(60):
        anthropic_mock = await claude_t.start(nursery, scenario("claude"))
        responses_mock = await codex_t.start(nursery, scenario("codex"))
        gemini_mock = await gemini_t.start(nursery, scenario("gemini"))
        # qwen retries a 429 itself 7 times; Retry-After: 1 keeps that to seconds
        qwen_mock = await qwen_t.start(nursery, scenario("qwen"), retry_after=1)
        mistral_mock = await vibe_t.start(nursery, scenario("vibe"))
        blocks = [claude_t.config(bins["claude"], anthropic_mock),
                  codex_t.config(bins["codex"], responses_mock),
                  gemini_t.config(bins["gemini"], gemini_mock),
                  qwen_t.config(bins["qwen"], qwen_mock),
                  vibe_t.config(bins["vibe"], mistral_mock)]
        providers: dict[str, Any] = {k: v for b in blocks for k, v in b["providers"].items()
                                     if k != "enabled"}
        providers["enabled"] = dict.fromkeys(("anthropic", "openai", "gemini", "qwen",
                                              "mistral"), True)
        cfg = {"providers": providers, "server": {"kill_grace_s": 1},
               "auth": {"fallback_detail_header_policy": "all"},
               "routing": {"chains": {"family": [
                   # each CLI spends an API key against its mock: metered entries, each
                   # with its consent (qwen's tier-B consent is in its provider block)
                   {"name": "claude", "provider": "anthropic", "model": "claude-sonnet-4-6",
                    "metered": True},
                   {"name": "codex", "provider": "openai", "model": "gpt-5.5", "metered": True},
                   {"name": "gemini", "provider": "gemini", "model": gemini_t.MODEL,
                    "metered": True},
                   {"name": "qwen", "provider": "qwen", "model": qwen_t.MODEL,
                    "metered": True},
                   {"name": "vibe", "provider": "mistral", "model": "devstral-2-25-12",
                    "metered": True}]}}}
        async with run_proxy(tmp_path / "home", cfg,
                             env=gemini_t.proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="family", messages=MESSAGES))
    assert raw.parse().choices[0].message.content == "Hello from the mock upstream."
    assert raw.headers["x-olp-served-by"] == served_by
    provider = {"claude": "anthropic", "codex": "openai", "gemini": "gemini", "qwen": "qwen",
                "vibe": "mistral"}
    failed = [(d["provider"], d["category"])
              for d in json.loads(raw.headers["x-olp-fallback-detail"])]
    assert failed == [(provider[n], "rate_limited") for n in order if n in out_of_quota]
    asked = {"claude": anthropic_mock.request_count, "codex": responses_mock.request_count,
             "gemini": gemini_mock.request_count, "qwen": len(qwen_t.chats(qwen_mock)),
             "vibe": len(mistral_mock.chat_requests())}
    assert asked[served_by] == 1
    assert all(asked[n] == 0 for n in order[order.index(served_by) + 1:])  # never spawned
    assert all(asked[n] >= 1 for n in out_of_quota)
