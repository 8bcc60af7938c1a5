"""A tool result given to claude's own kept session (issue #25), with the real ``claude``
through ``olp start`` against the mock's weather model: after a call, the client's result is
appended to the kept session file as a real ``tool_result`` and the session resumes, so the
upstream request holds the call's request as an exact prefix, then the call and the
client's result as real blocks (not OLP's rendered transcript)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_tools_real_claude import WEATHER, config, no_spawn_left, start_mock

RESULT = "Sunny, 22 C"


def without_cache_control(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages' blocks, breakpoints left out (they move from turn to turn)."""
    out = []
    for m in messages:
        content = m["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out.append([m["role"], [{k: v for k, v in b.items() if k != "cache_control"}
                                for b in content]])
    return out


async def test_a_tool_result_is_given_to_claudes_own_session(tmp_path: Path,
                                                             nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    mock = await start_mock(nursery)
    cfg = config(claude, mock)
    cfg["cache"] = {"enabled": False}
    with trio.fail_after(180):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
            first = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="agent", messages=ask, tools=[WEATHER]))
            assert await no_spawn_left(proxy)
            choice = first.parse().choices[0]
            [call] = choice.message.tool_calls or []
            history = [*ask, choice.message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
            second = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="agent", messages=history, tools=[WEATHER]))
            assert await no_spawn_left(proxy)
    assert first.headers["x-olp-session"] == "new"
    assert second.headers["x-olp-session"] == "resumed"
    assert second.parse().choices[0].message.content == f"The weather tool said: {RESULT}"
    before, after = (without_cache_control(r["body"]["messages"]) for r in mock.requests)
    assert len(mock.requests) == 2  # the first spawn never asked the model again
    assert after[:len(before)] == before  # the call's request, an exact prefix
    added = after[len(before):]
    assert added[0][0] == "assistant"
    [use] = [b for b in added[0][1] if b["type"] == "tool_use"]
    assert use["name"] == "mcp__olp__get_weather" and use["input"] == {"city": "Paris"}
    assert added[1][0] == "user"
    [result] = [b for b in added[1][1] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == use["id"] and json.dumps(result["content"]).find(RESULT) > 0
    assert "returned]" not in json.dumps(after)  # real blocks, not OLP's rendering
