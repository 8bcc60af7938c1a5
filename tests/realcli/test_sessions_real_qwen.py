"""Conversation continuity with the real ``qwen`` through ``olp start`` (issue #25): OLP
resumes qwen's own session (``--chat-recording true --resume <id>``, the job always at
``/olp/job``, since qwen resumes only from the same cwd), so the upstream request of each turn
carries the earlier turns as real messages: the previous request's messages, the answer, then
the new turn (qwen's own ``<system-reminder>`` blocks aside: its date reminder moves to the
newest user message on every request). Each turn's usage is its own, not the session's
running total, and another key with the very same history never resumes the first key's
session."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_qwen import ANSWER, chats, config, proxy_env, start
from test_tools_real_qwen import QUESTION, TOOLS

TURN = "Turn {k}. Please read these notes and reply briefly. " + "lorem ipsum dolor " * 50
REMINDER = "<system-reminder>"


def texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [p.get("text", "") for p in content or [] if isinstance(p, dict)]


def turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's conversation: each non-system message's role and text (stripped: qwen
    ends the prompt it read with a blank line), qwen's own ``<system-reminder>`` parts left
    out."""
    return [(m["role"], "".join(t for t in texts(m) if not t.startswith(REMINDER)).strip())
            for m in body["messages"] if m["role"] != "system"]


def uncached(before: dict[str, Any], now: dict[str, Any]) -> int:
    """The characters of ``now``'s messages past their common prefix with ``before``'s."""
    old = json.dumps(before["messages"], sort_keys=True)
    new = json.dumps(now["messages"], sort_keys=True)
    common = len(os.path.commonprefix([old, new]))
    return len(new) - common


def converse(proxy: Any, token: str, turns: int,
             messages: list[dict[str, str]]) -> tuple[list[str], list[tuple[int, int]]]:
    """An agent's conversation: each turn re-sends the history (``messages`` grows); each
    turn's X-OLP-Session and (prompt, completion) tokens."""
    client = proxy.client(token)
    states, usage = [], []
    for k in range(1, turns + 1):
        messages.append({"role": "user", "content": TURN.format(k=k)})
        raw = client.chat.completions.with_raw_response.create(model="qwen-coder",
                                                               messages=messages)
        answer = raw.parse()
        states.append(raw.headers.get("x-olp-session", "-"))
        usage.append((answer.usage.prompt_tokens, answer.usage.completion_tokens)
                     if answer.usage else (-1, -1))
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    return states, usage


async def test_turns_resume_qwens_own_session(tmp_path: Path, nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    home = tmp_path / "home"
    mock = await start(nursery, "success")
    cfg = config(qwen, mock, sessions=True)  # off by default (the spec says why)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(200):
        async with run_proxy(home, cfg, env=proxy_env(tmp_path)) as proxy:
            history: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
            states, usage = await in_thread(lambda: converse(proxy, proxy.token, 4, history))
            made = await in_thread(lambda: subprocess.run(
                [sys.executable, "-m", "olp", "keys", "create", "kid", "--json"],
                env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)}, capture_output=True,
                text=True, timeout=30, check=True))
            kid = json.loads(made.stdout)["key"]
            # the first key's history up to its second turn, sent with another key
            stolen = history[:3] + [{"role": "user", "content": TURN.format(k=2)}]
            client = proxy.client(kid)
            other = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="qwen-coder", messages=stolen).headers["x-olp-session"])
    assert states == ["new", "resumed", "resumed", "resumed"]
    assert other == "new"  # the same history, another key: never the first key's session
    bodies = [r["body"] for r in chats(mock)]
    assert len(bodies) == 5  # one upstream request per turn
    mine = [turns(b) for b in bodies[:4]]
    for k in range(1, 4):  # turn k+1: turn k's request, its answer, then the new turn only
        assert mine[k] == [*mine[k - 1], ("assistant", ANSWER),
                           ("user", TURN.format(k=k + 1).strip())]
        assert all(b["messages"][0] == bodies[0]["messages"][0] for b in bodies)  # the system
    # each turn's own usage (the mock's fixed 21 + 4), not the session's running total
    assert usage == [(21, 4)] * 4, usage
    flattened = turns(bodies[4])  # the other key: the history flattened, as before
    assert len(flattened) == 1 and "Turn 1." in flattened[0][1] and "Turn 2." in flattened[0][1]


async def test_what_a_turn_leaves_uncached_resumed_and_flattened(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """Why qwen's sessions are off by default: the characters of each request past its common
    prefix with the previous request (what a prefix cache cannot serve). Resumed, qwen's date
    reminder moves to the newest user turn, so the previous turn, the answer and the new turn
    are uncached; flattened, the one user message only grows at its end."""
    qwen = real_cli("OLP_REAL_QWEN")
    left: dict[bool, list[int]] = {}
    for sessions in (True, False):
        mock = await start(nursery, "success")
        cfg = config(qwen, mock, sessions=sessions)
        cfg["cache"] = {"enabled": False}
        with trio.fail_after(120):
            async with run_proxy(tmp_path / f"home-{sessions}", cfg,
                                 env=proxy_env(tmp_path)) as proxy:
                await in_thread(functools.partial(
                    converse, proxy, proxy.token, 4, [{"role": "system", "content": "Be terse."}]))
        bodies = [r["body"] for r in chats(mock)]
        left[sessions] = [uncached(bodies[k - 1], bodies[k]) for k in range(1, 4)]
    turn = len(json.dumps(TURN.format(k=1)))
    print(f"qwen, uncached characters of turns 2-4 ({turn}-character turns): "
          f"resumed {left[True]}, flattened {left[False]}")
    assert len(set(left[True])) == 1 and left[True][0] > 2 * turn  # two turns and a reminder
    # if this fails, qwen keeps its prefix on resume now: revisit the spec's default
    assert left[False][1:] == [left[False][1]] * 2 and left[False][1] < left[True][1]


async def test_a_changed_system_text_starts_a_new_session(tmp_path: Path,
                                                          nursery: trio.Nursery) -> None:
    """The system text is a file qwen reads at every start, and part of the conversation's
    identity: the same turns under another system text start afresh, with the new text."""
    qwen = real_cli("OLP_REAL_QWEN")
    mock = await start(nursery, "success")
    cfg = config(qwen, mock, sessions=True)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(120):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            first: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
            states, _ = await in_thread(lambda: converse(proxy, proxy.token, 1, first))
            changed = [{"role": "system", "content": "You are verbose."}, *first[1:],
                       {"role": "user", "content": "Turn 2."}]
            client = proxy.client()
            again = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="qwen-coder", messages=changed).headers["x-olp-session"])
    assert states == ["new"] and again == "new"
    system = chats(mock)[-1]["body"]["messages"][0]
    assert "You are verbose." in "".join(texts(system))


async def test_a_tool_call_in_a_resumed_turn_reports_its_own_usage(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """A resumed turn the model answers with a call: the call reaches the client and its
    usage is that request's own (qwen's ``assistant`` line), not less the session's total."""
    qwen = real_cli("OLP_REAL_QWEN")
    mock = await start(nursery, "success")
    mock.push("success")
    mock.push("weather")
    cfg = config(qwen, mock, sessions=True)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(120):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            history: list[Any] = [{"role": "user", "content": "Hi."}]
            first = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="qwen-coder", messages=history, tools=TOOLS))
            history += [{"role": "assistant", "content": first.parse().choices[0].message.content},
                        {"role": "user", "content": QUESTION}]
            second = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="qwen-coder", messages=history, tools=TOOLS))
    assert [first.headers["x-olp-session"], second.headers["x-olp-session"]] == ["new",
                                                                                  "resumed"]
    answer = second.parse()
    assert answer.choices[0].finish_reason == "tool_calls"
    assert answer.usage is not None and answer.usage.prompt_tokens == 21
    assert turns(chats(mock)[1]["body"]) == [("user", "Hi."), ("assistant", ANSWER),
                                             ("user", QUESTION)]
