"""Conversation continuity with the real ``codex`` through ``olp start`` (issue #25): OLP
resumes codex's own thread (``exec … resume <thread> -``), so every turn of a conversation
goes upstream under one ``prompt_cache_key`` and each request's input is the previous one's
plus the previous answer and the new turn; each turn's usage is its own, not the thread's
running total."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import trio
from mock_openai_responses import WEATHER_ANSWER_PREFIX
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_codex import PNG, config, proxy_env, start
from test_tools_real_codex import TOOLS, tools_config
from test_tools_real_codex import start_mock as start_tools_mock

TURN = "Turn {k}. Please read these notes and reply briefly. " + "lorem ipsum dolor " * 50


def items(body: dict[str, Any]) -> list[str]:
    return [json.dumps(item, sort_keys=True) for item in body["input"]]


def converse(proxy: Any, turns: int) -> tuple[list[str], list[int]]:
    client = proxy.client()
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
    states, prompts = [], []
    for k in range(1, turns + 1):
        messages.append({"role": "user", "content": TURN.format(k=k)})
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.5",
                                                               messages=messages)
        answer = raw.parse()
        states.append(raw.headers.get("x-olp-session", "-"))
        prompts.append(answer.usage.prompt_tokens if answer.usage else -1)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    return states, prompts


async def test_turns_resume_codexs_own_thread(tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    mock = await start(nursery, "success")
    cfg = config(codex, mock)
    cfg["providers"]["openai"]["sessions"] = True
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(150):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            states, prompts = await in_thread(lambda: converse(proxy, 4))
    assert states == ["new", "resumed", "resumed", "resumed"]
    bodies = [r["body"] for r in mock.requests]
    assert len(bodies) == 4
    assert len({b["prompt_cache_key"] for b in bodies}) == 1  # one thread, one cache key
    for k in range(1, 4):  # the previous request's input, its answer, then the new turn
        before, now = items(bodies[k - 1]), items(bodies[k])
        assert now[:len(before)] == before
        assert len(now) == len(before) + 2 and f"Turn {k + 1}." in now[-1]
        assert "Turn" not in "".join(now[len(before):-1])  # the answer, not a replayed turn
    assert len(set(prompts)) == 1  # each turn's own usage, not the thread's running total


async def test_an_image_in_a_resumed_turn_reaches_codex(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    """``--image`` is an option of ``exec resume`` itself: a resumed turn's image arrives."""
    codex = real_cli("OLP_REAL_CODEX")
    mock = await start(nursery, "success")
    cfg = config(codex, mock)
    cfg["cache"] = {"enabled": False}
    image = "data:image/png;base64," + base64.b64encode(PNG).decode()
    with trio.fail_after(120):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            first = await in_thread(lambda: client.chat.completions.create(
                model="gpt-5.5", messages=[{"role": "user", "content": "Hi."}]))
            raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="gpt-5.5", messages=[
                    {"role": "user", "content": "Hi."},
                    {"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": image}}]}]))
    assert raw.headers["x-olp-session"] == "resumed"
    last = mock.requests[-1]["body"]["input"][-1]
    kinds = [c.get("type") for c in last["content"]]
    assert last["role"] == "user" and "input_image" in kinds, kinds


async def test_a_tool_result_is_given_to_codexs_own_thread(tmp_path: Path,
                                                          nursery: trio.Nursery) -> None:
    """After a tool call, the client's result is written into codex's kept rollout as a real
    ``function_call_output`` and the thread resumes: the upstream input is the call's request,
    the call, the client's result (and a neutral ``Continue.``), under the same cache key."""
    codex = real_cli("OLP_REAL_CODEX")
    mock = await start_tools_mock(nursery)
    cfg = tools_config(codex, mock)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(120):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
            first = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="gpt-5.5", messages=ask, tools=TOOLS))
            choice = first.parse().choices[0]
            [call] = choice.message.tool_calls or []
            history = [*ask, choice.message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 22 C"}]
            second = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="gpt-5.5", messages=history, tools=TOOLS))
    assert first.headers["x-olp-session"] == "new"
    assert second.headers["x-olp-session"] == "resumed"
    assert second.parse().choices[0].message.content == f"{WEATHER_ANSWER_PREFIX}Sunny, 22 C"
    before, after = (r["body"] for r in mock.requests)
    assert before["prompt_cache_key"] == after["prompt_cache_key"]
    assert after["input"][:len(before["input"])] == before["input"]
    added = after["input"][len(before["input"]):]
    assert [i.get("type") for i in added[:2]] == ["function_call", "function_call_output"]
    assert added[1]["output"] == "Sunny, 22 C"
