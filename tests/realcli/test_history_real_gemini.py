"""Conversation continuity with the real ``gemini`` through ``olp start`` (issue #25): an agent
re-sends the whole conversation each turn; OLP writes the earlier turns as a session file
gemini loads (``--session-file``, ``olp/providers/gemini/_history.py``), so the upstream
request carries them as real ``contents`` entries and each request's ``contents`` is the
previous request's plus the new turns (the vendor's prefix cache can serve all the rest).
The answer streams and does not, as before. A session file gemini refuses moves the chain on
once (no retry on gemini, no upstream call).
Measured facts: ``tests/fixtures/cli-reference/gemini/sessions/README.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_gemini import DEFAULT_DELTAS, MockGemini
from olp_harness import FAKE_CLAUDE, descendants, in_thread, real_cli, run_proxy, wait_until
from test_proxy_real_gemini import ANSWER, MODEL, config, job_dirs, proxy_env, start

SYSTEM = "SYSTEM-MARKER-5d2e: you are terse."
TURN = "Turn {k}. Please read these notes and reply briefly. " + "lorem ipsum dolor " * 50


def converse(proxy: Any, turns: int) -> tuple[list[str], list[str]]:
    """An agent's conversation: each turn re-sends the history; odd turns are streamed. The
    answers, and the streamed turns' deltas joined by ``|``."""
    client = proxy.client()
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    answers, streamed = [], []
    for k in range(1, turns + 1):
        messages.append({"role": "user", "content": TURN.format(k=k)})
        if k % 2:
            with client.chat.completions.with_streaming_response.create(
                    model="gemini", messages=messages, stream=True) as response:
                deltas = [c.choices[0].delta.content for c in response.parse()
                          if c.choices and c.choices[0].delta.content]
            streamed.append("|".join(deltas))
            answer = "".join(deltas)
        else:
            completion = client.chat.completions.create(model="gemini", messages=messages)
            answer = completion.choices[0].message.content or ""
        answers.append(answer)
        messages.append({"role": "assistant", "content": answer})
    return answers, streamed


def entries(body: dict[str, Any]) -> list[str]:
    """The request's ``contents``, one serialised entry each."""
    return [json.dumps(c, sort_keys=True) for c in body["contents"]]


def uncached(before: list[str], after: list[str]) -> int:
    """Characters of ``after``'s entries past its longest common prefix with ``before``."""
    same = 0
    while same < min(len(before), len(after)) and before[same] == after[same]:
        same += 1
    return sum(len(e) for e in after[same:])


async def test_each_turn_carries_the_earlier_turns_as_a_stable_prefix(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    mock: MockGemini = await start(nursery)
    cfg = config(gemini, mock)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(120):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            answers, streamed = await in_thread(lambda: converse(proxy, 4))
            assert descendants(proxy.process.pid) == set()
            assert await wait_until(lambda: job_dirs(tmp_path) == [], within=2.0)
    assert answers == [ANSWER] * 4
    assert streamed == ["|".join(DEFAULT_DELTAS)] * 2  # token deltas, as the upstream sent
    requests = mock.generate_requests()
    assert len(requests) == 4 and all(r["model"] == MODEL for r in requests)
    bodies = [r["body"] for r in requests]
    mine = [entries(b) for b in bodies]
    sizes = []
    for k, body in enumerate(bodies, start=1):
        assert body["systemInstruction"]["parts"] == [{"text": SYSTEM}]
        assert request_tools(body) == []
        contents = body["contents"]
        assert [c["role"] for c in contents] == ["user", "model"] * (k - 1) + ["user"]
        # gemini's own session context first, in the first user content, then turn 1
        first = [p["text"] for p in contents[0]["parts"]]
        assert first[0].startswith("<session_context>") and len(first) == 2
        assert "/olp/job/home/.gemini/tmp/work" in first[0]  # the fixed path inside
        texts = [first[1]] + [c["parts"][0]["text"] for c in contents[1:]]
        assert all(len(c["parts"]) == 1 for c in contents[1:])
        expected = [TURN.format(k=1)]
        for i in range(2, k + 1):
            expected += [ANSWER, TURN.format(k=i)]
        assert texts == expected  # the earlier turns are real contents, in order
        if k > 1:  # the previous request is an exact prefix; only the new turns follow
            assert mine[k - 1][:len(mine[k - 2])] == mine[k - 2]
            assert len(mine[k - 1]) == len(mine[k - 2]) + 2
            sizes.append(uncached(mine[k - 2], mine[k - 1]))
    # uncached characters per turn: the answer and the new turn, serialised, and nothing else
    new_turns = [len(e) for e in mine[3][-2:]]
    assert sizes[-1] == sum(new_turns)
    assert sizes == [sizes[0]] * 3  # constant per turn: the conversation does not grow in it
    print(f"gemini uncached characters per turn (turns 2-4): {sizes}; "
          f"whole last request: {sum(len(e) for e in mine[3])}")


def request_tools(body: dict[str, Any]) -> list[Any]:
    return [d for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]


async def test_a_session_file_gemini_refuses_moves_the_chain_on_once(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """gemini exits 42 ``Error importing session from file`` (here: a file that does not
    exist, named by the owner's ``extra_args``): OLP's ``CONFIG_ERROR``, category
    ``unknown``: the next hop answers, gemini is tried once and calls no upstream."""
    gemini = real_cli("OLP_REAL_GEMINI")
    mock: MockGemini = await start(nursery)
    cfg = config(gemini, mock)
    cfg["providers"]["gemini"]["extra_args"] = ["--session-file", "/olp/job/home/none.json"]
    cfg["providers"]["enabled"]["anthropic"] = True
    cfg["providers"]["anthropic"] = {"binary": str(FAKE_CLAUDE), "env": {
        "FAKE_CLAUDE_SCENARIO": "success", "ANTHROPIC_API_KEY": "sk-ant-fake"}}
    cfg["routing"] = {"chains": {"gemini-then-claude": [
        {"provider": "gemini", "model": MODEL, "metered": True},
        {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
    messages: list[Any] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": "hi"}]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="gemini-then-claude", messages=messages))
            assert await wait_until(lambda: descendants(proxy.process.pid) == set(), within=2.0)
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    [detail] = json.loads(raw.headers["x-olp-fallback-detail"])
    assert (detail["provider"], detail["category"], detail["code"]) == (
        "gemini", "unknown", "CONFIG_ERROR")
    assert mock.request_count == 0
