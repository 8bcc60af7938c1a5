"""Conversation continuity with the real ``claude`` through ``olp start`` (issue #25): an
agent re-sends the whole conversation each turn; OLP resumes claude's own session, so the
upstream request carries the earlier turns as real messages, each request's messages are the
previous one's plus the new turn, and the only message breakpoint is on the new turn. Another
key with the very same history never resumes the first key's session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from mock_anthropic import MockAnthropic
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_claude import config, start

TURN = "Turn {k}. Please read these notes and reply briefly. " + "lorem ipsum dolor " * 50


def without_cache_control(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) \
        else block


def blocks(body: dict[str, Any]) -> list[str]:
    """Every content block of the request's messages, serialised without breakpoints."""
    out = []
    for message in body["messages"]:
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [json.dumps([message["role"], without_cache_control(b)], sort_keys=True)
                for b in content]
    return out


def breakpoints(body: dict[str, Any]) -> list[int]:
    """The indexes (into :func:`blocks`) of the message blocks that carry ``cache_control``."""
    found, index = [], 0
    for message in body["messages"]:
        content = message["content"]
        for block in ([] if isinstance(content, str) else content):
            if isinstance(block, dict) and "cache_control" in block:
                found.append(index)
            index += 1
        index += 1 if isinstance(content, str) else 0
    return found


def converse(proxy: Any, token: str, turns: int,
             messages: list[dict[str, str]] | None = None) -> list[str]:
    """An agent's conversation: each turn re-sends the history (``messages`` grows); the
    X-OLP-Session of each turn."""
    client = proxy.client(token)
    messages = [{"role": "system", "content": "You are terse."}] if messages is None else messages
    states = []
    for k in range(1, turns + 1):
        messages.append({"role": "user", "content": TURN.format(k=k)})
        raw = client.chat.completions.with_raw_response.create(model="sonnet",
                                                               messages=messages)
        states.append(raw.headers.get("x-olp-session", "-"))
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    return states


async def test_turns_resume_claudes_own_session(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    home = tmp_path / "home"
    mock: MockAnthropic = await start(nursery, "success")
    cfg = config(claude, mock)
    cfg["providers"]["anthropic"]["sessions"] = True
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(150):
        async with run_proxy(home, cfg) as proxy:
            history: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
            states = await in_thread(lambda: converse(proxy, proxy.token, 4, history))
            made = await in_thread(lambda: subprocess.run(
                [sys.executable, "-m", "olp", "keys", "create", "kid", "--json"],
                env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)}, capture_output=True,
                text=True, timeout=30, check=True))
            kid = json.loads(made.stdout)["key"]
            # the first key's history up to its second turn, sent with another key
            stolen = history[:3] + [{"role": "user", "content": TURN.format(k=2)}]
            client = proxy.client(kid)
            other = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="sonnet", messages=stolen).headers["x-olp-session"])
    assert states == ["new", "resumed", "resumed", "resumed"]
    assert other == "new"  # the same history, another key: never the first key's session
    bodies = [r["body"] for r in mock.requests]
    assert len(bodies) == 5
    mine = [blocks(b) for b in bodies[:4]]
    for k in range(1, 4):  # turn k+1 carries turn k's request, its answer, then the new turn
        assert mine[k][:len(mine[k - 1])] == mine[k - 1]
        roles = [m["role"] for m in bodies[k]["messages"]]
        assert roles == ["user", "assistant"] * k + ["user"]
        assert breakpoints(bodies[k]) == [len(mine[k]) - 1]  # only on the new turn
        assert f"Turn {k + 1}." in mine[k][-1] and f"Turn {k + 1}." not in "".join(mine[k][:-1])
    assert len(bodies[4]["messages"]) == 1  # the other key: the history flattened, as before
