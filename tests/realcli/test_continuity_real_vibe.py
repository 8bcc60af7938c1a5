"""Conversation continuity with the real ``vibe`` through ``olp start`` (issue #25).

vibe is not resumed (ADR 0023, "vibe"): its warm ``vibe-acp`` sessions answer in ~0.3 s where a
resumed ``vibe -p --resume`` is a cold ~7 s start. So each turn is the flattened history, and
what keeps it cheap is that the upstream request of turn k+1 starts with turn k's: vibe's own
system prompt (the same paths on every turn: ``/olp/job``), then OLP's flattened transcript,
whose turns are only ever appended to. This test measures what the vendor's prefix cache
cannot serve: the characters of each request past its common prefix with the previous one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_mistral import MockMistral
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_vibe import ANSWER, config, start

SYSTEM = "SYSTEM-MARKER-7c31: you are terse."
TURN = "Turn {k}. Please read these notes and reply briefly. " + "lorem ipsum dolor " * 50


def converse(proxy: Any, turns: int) -> list[str]:
    """An agent's conversation: each turn re-sends the whole history."""
    client = proxy.client()
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    answers = []
    for k in range(1, turns + 1):
        messages.append({"role": "user", "content": TURN.format(k=k)})
        completion = client.chat.completions.create(model="devstral", messages=messages)
        answer = completion.choices[0].message.content or ""
        answers.append(answer)
        messages.append({"role": "assistant", "content": answer})
    return answers


def past_common_prefix(before: str, after: str) -> int:
    """Characters of ``after`` past its longest common prefix with ``before``."""
    same = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        same += 1
    return len(after) - same


async def test_each_turn_extends_the_previous_request(tmp_path: Path,
                                                      nursery: trio.Nursery) -> None:
    vibe = real_cli("OLP_REAL_VIBE")
    mock: MockMistral = await start(nursery, "success")
    cfg = config(vibe, mock)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(150):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            answers = await in_thread(lambda: converse(proxy, 4))
    assert answers == [ANSWER] * 4
    bodies = [r["body"] for r in mock.chat_requests()]
    assert len(bodies) == 4
    texts = [json.dumps(b["messages"], ensure_ascii=False) for b in bodies]
    extra = [past_common_prefix(a, b) for a, b in zip(texts, texts[1:], strict=False)]
    turn = len(TURN.format(k=2))
    print("vibe: characters past the previous request's prefix, turns 2-4:", extra,
          "of", [len(t) for t in texts[1:]], "turn", turn)
    for k, n in enumerate(extra, start=2):
        # the previous answer, the new turn, the labels and the closing instruction: nothing
        # of vibe's system prompt or of the earlier turns
        assert n < turn + len(ANSWER) + 400, (k, n)
