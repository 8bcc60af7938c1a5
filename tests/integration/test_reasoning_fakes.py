"""Reasoning through ``olp start`` with the fake CLIs (issues #27, #44): the level a client asks
for becomes each CLI's own flags (the fake records its argv), a hop whose model takes no level
serves it with ``reasoning`` named in ``X-OLP-Ignored-Params`` (by default, and under
``"unsupported": "ignore"``) or is skipped under ``"unsupported": "skip"``, and a request that
asks nothing runs every hop as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from olp_harness import FAKE_CLAUDE, REPO, in_thread, run_proxy

FAKE_QWEN = REPO / "tests" / "support" / "fakes" / "fake_qwen.py"


def config(tmp_path: Path, *, qwen_unsupported: str | None = "skip") -> dict[str, Any]:
    qwen: dict[str, Any] = {"provider": "qwen", "model": "qwen3-coder-plus", "metered": True}
    if qwen_unsupported is not None:
        qwen["unsupported"] = qwen_unsupported
    return {
        "providers": {
            "enabled": {"openai": False, "mistral": False, "qwen": True},
            "qwen": {"binary": str(FAKE_QWEN), "consent": True, "metered": True,
                     "env": {"OPENAI_API_KEY": "sk-fake", "QWEN_CODE_UNATTENDED_RETRY": "1"}},
            "anthropic": {"binary": str(FAKE_CLAUDE),
                          "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake",
                                  "FAKE_CLAUDE_ARGV_FILE": str(tmp_path / "argv.json")}}},
        "routing": {"chains": {"c": [
            qwen, {"provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}


def ask(proxy: Any, text: str, **extra: Any) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": "c", "messages": [{"role": "user", "content": text}],
                            **extra})


def flags(argv: list[str]) -> dict[str, str]:
    wanted = ("--effort", "--max-thinking-tokens", "--thinking", "--thinking-display")
    return {a: argv[i + 1] for i, a in enumerate(argv) if a in wanted}


async def test_a_model_without_levels_is_skipped_and_claude_gets_its_flags(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            plain = await in_thread(lambda: ask(proxy, "hello"))
            high = await in_thread(lambda: ask(proxy, "think", reasoning_effort="high"))
    assert plain.headers["x-olp-provider-used"] == "qwen"  # asking nothing: as before
    assert high.status_code == 200, high.text
    assert high.headers["x-olp-provider-used"] == "anthropic"
    detail = json.loads(high.headers["x-olp-fallback-detail"])
    assert [(d["provider"], d["code"]) for d in detail] == [("qwen", "CAPABILITY")]
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert flags(argv)["--effort"] == "high"
    assert flags(argv)["--thinking-display"] == "summarized"  # a chat effort wants it back


@pytest.mark.parametrize("unsupported", [None, "degrade", "ignore"])
async def test_the_hop_serves_it_and_says_so(tmp_path: Path, unsupported: str | None) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home",
                             config(tmp_path, qwen_unsupported=unsupported)) as proxy:
            answer = await in_thread(lambda: ask(proxy, "think", reasoning_effort="low"))
            logs = list(proxy.logs)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-olp-provider-used"] == "qwen"
    assert answer.headers["x-olp-ignored-params"] == "reasoning"
    assert "x-olp-fallback-detail" not in answer.headers  # no hop failed or was skipped
    assert not (tmp_path / "argv.json").exists()  # claude, which reasons, was not spawned
    [hop] = [e for e in logs if e.get("event") == "hop"]
    assert (hop["provider"], hop["trigger_type"], hop["lacks"]) == (
        "qwen", "degraded", ["reasoning"])
    [chat] = [e for e in logs if e.get("event") == "chat"]
    assert chat["ignored"] == ["reasoning"]
