"""Warm pools with the real claude and codex through ``olp start`` against the loopback mocks:
the request after the first is answered by a CLI started ahead of time, correctly, with its
own system text and nothing of the first request; nothing is left after stop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_proxy_real_claude as claude_tests
import test_proxy_real_codex as codex_tests
import test_proxy_real_vibe as vibe_tests
import trio
from olp_harness import Proxy, alive, descendants, in_thread, real_cli, run_proxy, wait_until


def warm(proxy: Proxy, provider: str) -> dict[str, Any]:
    stats: dict[str, Any] = proxy.get("/health").json()["providers"][provider]["warm"]
    return stats


def ask(proxy: Proxy, model: str, text: str, *, stream: bool = False) -> str:
    messages: Any = [{"role": "system", "content": "Answer in one line."},
                     {"role": "user", "content": text}]
    if stream:
        chunks = proxy.client().chat.completions.create(model=model, messages=messages,
                                                        stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer = proxy.client().chat.completions.create(model=model, messages=messages)
    return answer.choices[0].message.content or ""


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
async def test_a_warm_claude_answers_and_nothing_is_left(tmp_path: Path, nursery: trio.Nursery,
                                                         stream: bool) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(120):
        mock = await claude_tests.start(nursery, "success")
        cfg = claude_tests.config(claude, mock)
        cfg["providers"]["anthropic"]["warm"] = 1
        cfg["cache"] = {"enabled": False}
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            first = await in_thread(lambda: ask(proxy, "sonnet", "FIRST-QUESTION"))
            assert await wait_until(lambda: warm(proxy, "anthropic")["warm"] == 1, within=30)
            second = await in_thread(lambda: ask(proxy, "sonnet", "SECOND-QUESTION",
                                                 stream=stream))
            stats = warm(proxy, "anthropic")
            running = descendants(proxy.process.pid)
    assert first == second == "Hello from the mock upstream."
    assert stats["hits"] == 1 and stats["memory_bytes"] > 50_000_000
    bodies = [json.dumps(r["body"]) for r in mock.requests
              if r["path"].split("?")[0] == "/v1/messages"]
    assert len(bodies) == 2 and "SECOND-QUESTION" in bodies[1]
    assert "FIRST-QUESTION" not in bodies[1] and "Answer in one line." in bodies[1]
    assert running  # the refilled warm claude was waiting
    assert await wait_until(lambda: not any(alive(p) for p in running), within=10)


async def test_a_warm_codex_answers_and_nothing_is_left(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(120):
        mock = await codex_tests.start(nursery, "success")
        cfg = codex_tests.config(codex, mock, mode="exec")  # the app-server needs no pool
        cfg["providers"]["openai"]["warm"] = 1
        cfg["cache"] = {"enabled": False}
        async with run_proxy(tmp_path / "home", cfg, env=codex_tests.proxy_env(tmp_path)
                             ) as proxy:
            first = await in_thread(lambda: ask(proxy, "gpt-5.5", "FIRST-QUESTION"))
            assert await wait_until(lambda: warm(proxy, "openai")["warm"] == 1, within=30)
            second = await in_thread(lambda: ask(proxy, "gpt-5.5", "SECOND-QUESTION"))
            stats = warm(proxy, "openai")
            running = descendants(proxy.process.pid)
    assert first == second == "Hello from the mock upstream."
    assert stats["hits"] == 1
    bodies = [json.dumps(r["body"]) for r in mock.requests]
    assert len(bodies) == 2 and "SECOND-QUESTION" in bodies[1]
    assert "FIRST-QUESTION" not in bodies[1]
    assert running
    assert await wait_until(lambda: not any(alive(p) for p in running), within=10)


async def test_a_vibe_session_made_ahead_answers_and_nothing_is_left(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """vibe's warm unit is a session on a long-lived vibe-acp, made ahead of time; the key
    comes from the user's ~/.vibe/.env (not linked into the server's home: passed in its
    environment)."""
    vibe = real_cli("OLP_REAL_VIBE")
    real_home = tmp_path / "realhome"
    (real_home / ".vibe").mkdir(parents=True)
    (real_home / ".vibe" / ".env").write_text(f"MISTRAL_API_KEY={vibe_tests.KEY}\n")
    with trio.fail_after(150):
        mock = await vibe_tests.start(nursery, "success")
        cfg = vibe_tests.config(vibe, mock, key_in_env=False)
        cfg["providers"]["mistral"]["warm"] = 1
        cfg["cache"] = {"enabled": False}
        async with run_proxy(tmp_path / "home", cfg, env={"HOME": str(real_home)}) as proxy:
            first = await in_thread(lambda: ask(proxy, "devstral", "FIRST-QUESTION"))
            assert await wait_until(lambda: warm(proxy, "mistral")["warm"] == 1, within=60)
            second = await in_thread(lambda: ask(proxy, "devstral", "/proxy-setup X y",
                                                 stream=True))
            assert await wait_until(lambda: warm(proxy, "mistral")["warm"] == 1, within=30)
            third = await in_thread(lambda: ask(proxy, "devstral", "THIRD-QUESTION"))
            stats = warm(proxy, "mistral")
            running = descendants(proxy.process.pid)
    assert first == second == third == vibe_tests.ANSWER
    assert stats["hits"] == 2
    chats = [json.dumps(r["body"]) for r in mock.chat_requests()]
    assert len(chats) == 3  # no title-generation request after a session's turn
    assert "proxy-setup X y" in chats[1] and "FIRST-QUESTION" not in chats[1]
    assert "THIRD-QUESTION" in chats[2] and "proxy-setup" not in chats[2]
    assert (real_home / ".vibe" / ".env").read_text() == f"MISTRAL_API_KEY={vibe_tests.KEY}\n"
    assert running
    assert await wait_until(lambda: not any(alive(p) for p in running), within=15)
