"""The real ``claude -p`` as a *client* of OLP, answered by the real ``qwen`` (qwen-code 0.24.4)
against the loopback OpenAI-compatible mock (issue #44).

Claude Code asks for thinking on every request, and qwen's coder models take no reasoning: by
default (``"unsupported"`` unset) such a hop serves, without reasoning, and the whole agent
loop runs (the model calls Claude Code's own ``Read`` tool through OLP's bridge, Claude Code
reads the file and sends the result back, the model answers from it). A hop skipped for tools
and a hop skipped for reasoning (``"unsupported": "skip"``) are each named with their own
cause in the 400 Claude Code shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio
from mock_openai_upstream import READ_ANSWER_PREFIX, MockOpenAI
from olp_harness import FAKES, descendants, in_thread, real_cli, run_proxy, wait_until
from test_proxy_real_qwen import chats, config, proxy_env, start

SONNET = "claude-sonnet-4-6"
HAIKU = "claude-haiku-4-5"  # Claude Code's small fast model, for its side requests
MARKER = "NOTES-MARKER-5d1e: the launch is on Tuesday."
QWEN = {"provider": "qwen", "model": "qwen3-coder-plus", "metered": True}
#: A model without tool calling (models-registry.json): a hop Claude Code's requests skip.
DEVSTRAL = {"provider": "mistral", "model": "devstral-2-25-12", "metered": True}


#: A Messages request with what Claude Code's requests need of a hop: tools, and thinking.
LIKE_CLAUDE_CODE: dict[str, Any] = {
    "model": SONNET, "max_tokens": 1024, "thinking": {"type": "enabled", "budget_tokens": 2048},
    "tools": [{"name": "Read", "description": "Read a file",
               "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                "required": ["file_path"]}}],
    "messages": [{"role": "user", "content": "Say hello."}]}


def proxy_config(qwen: str, mock: MockOpenAI, chain: list[dict[str, Any]]) -> dict[str, Any]:
    cfg = config(qwen, mock)
    cfg["providers"]["enabled"]["mistral"] = True
    # never spawned (skipped before spawning): the fake binary only has to exist
    cfg["providers"]["mistral"] = {"binary": str(FAKES / "fake_vibe.py"), "lockdown_check": False,
                                   "env": {"MISTRAL_API_KEY": "mock-key"}}
    cfg["routing"] = {"chains": {SONNET: chain, HAIKU: [QWEN]}}
    return cfg


async def ask_claude_code(tmp_path: Path, proxy: Any) -> tuple[int, str]:
    """One ``claude -p`` run in a directory holding ``notes.txt``: its exit code and its
    output (JSON; its stderr's tail when it printed nothing)."""
    claude = real_cli("OLP_REAL_CLAUDE")
    home, work = tmp_path / "claude-home", tmp_path / "claude-work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    notes = work / "notes.txt"
    notes.write_text(MARKER + "\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home),
           "ANTHROPIC_BASE_URL": proxy.url, "ANTHROPIC_API_KEY": proxy.token,
           "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    done = await trio.run_process(
        [claude, "-p", "--output-format", "json", "--model", SONNET,
         "--no-session-persistence"],
        stdin=b"What does notes.txt say?", env=env, cwd=work,
        capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(errors="replace") or \
        done.stderr.decode(errors="replace")[-2000:]


async def run_loop(tmp_path: Path, nursery: trio.Nursery, chain: list[dict[str, Any]]
                   ) -> tuple[int, str, MockOpenAI, list[dict[str, Any]], httpx.Response]:
    """Claude Code's run through a proxy serving ``chain``, then one request of the same
    needs (tools, thinking) by hand, for the headers Claude Code does not show."""
    qwen = real_cli("OLP_REAL_QWEN")
    # the model's one call: Claude Code's Read of the file, by its absolute path
    path = tmp_path / "claude-work" / "notes.txt"
    mock = await start(nursery, "read", tool_arguments=json.dumps({"file_path": str(path)}))
    async with run_proxy(tmp_path / "home", proxy_config(qwen, mock, chain),
                         env=proxy_env(tmp_path)) as proxy:
        code, out = await ask_claude_code(tmp_path, proxy)
        logs = list(proxy.logs)
        by_hand = await in_thread(lambda: httpx.post(
            f"{proxy.url}/v1/messages", timeout=60, json=LIKE_CLAUDE_CODE,
            headers={"x-api-key": proxy.token, "anthropic-version": "2023-06-01"}))
        assert await wait_until(lambda: not descendants(proxy.process.pid), within=10)
    return code, out, mock, logs, by_hand


def assert_the_loop_ran(code: int, out: str, mock: MockOpenAI,
                        logs: list[dict[str, Any]]) -> None:
    assert code == 0, out
    result = json.loads(out)
    assert result["is_error"] is False, out
    assert result["result"].startswith(READ_ANSWER_PREFIX) and MARKER in result["result"]
    # qwen was offered Claude Code's Read through the bridge, called it, and the next turn
    # carried what Claude Code read from the file
    bodies = [json.dumps(r["body"]) for r in chats(mock)]
    assert any('"mcp__olp__Read"' in b for b in bodies)
    assert any(MARKER in b for b in bodies)
    requests = [e for e in logs if e.get("event") == "chat"]
    assert len(requests) >= 2 and {e["status"] for e in requests} == {200}
    assert {e["provider"] for e in requests} == {"qwen"}
    # Claude Code asked for thinking, which qwen's coder model takes none of: said, not refused
    assert any("reasoning" in e.get("ignored", ()) for e in requests)
    assert any(e.get("trigger_type") == "degraded" and e.get("lacks") == ["reasoning"]
               for e in logs if e.get("event") == "hop")


async def test_claude_code_runs_its_tool_loop_on_a_qwen_hop(tmp_path: Path,
                                                            nursery: trio.Nursery) -> None:
    with trio.fail_after(120):
        code, out, mock, logs, by_hand = await run_loop(tmp_path, nursery, [QWEN])
    assert_the_loop_ran(code, out, mock, logs)
    assert by_hand.status_code == 200, by_hand.text
    assert by_hand.headers["x-olp-ignored-params"].split(",")[-1] == "reasoning"
    assert "x-olp-fallback-detail" not in by_hand.headers  # nothing failed, nothing skipped


async def test_a_hop_without_tools_is_passed_over_for_its_own_cause(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(120):
        code, out, mock, logs, by_hand = await run_loop(tmp_path, nursery, [DEVSTRAL, QWEN])
    assert_the_loop_ran(code, out, mock, logs)
    skips = [e for e in logs if e.get("event") == "hop" and e.get("trigger_type") == "soft"]
    assert skips and {(e["provider"], e["code"]) for e in skips} == {("mistral", "CAPABILITY")}
    assert all(e["lacks"] == ["tools"] for e in skips)  # not reasoning: that would degrade
    assert by_hand.status_code == 200, by_hand.text
    assert by_hand.headers["x-olp-ignored-params"].split(",")[-1] == "reasoning"
    [skip] = json.loads(by_hand.headers["x-olp-fallback-detail"])
    assert (skip["provider"], skip["code"], skip["lacks"], skip["error_message"]) == (
        "mistral", "CAPABILITY", ["tools"], "mistral:devstral-2-25-12 cannot take tools")


async def test_every_hop_refused_names_each_ones_own_cause(tmp_path: Path,
                                                           nursery: trio.Nursery) -> None:
    strict = {**QWEN, "unsupported": "skip"}  # the behaviour before issue #44
    with trio.fail_after(120):
        code, out, mock, logs, by_hand = await run_loop(tmp_path, nursery, [DEVSTRAL, strict])
    assert chats(mock) == []  # no hop was spawned
    # What Claude Code shows its user: each hop with what it lacks, and a lead-in that
    # claims no cause that was not every hop's (before: "can take tools").
    result = json.loads(out)
    assert result["is_error"] is True and result["api_error_status"] == 400, out
    assert result["result"] == (
        f"API Error: 400 No hop of `{SONNET}` can take this request: "
        "mistral:devstral-2-25-12 cannot take tools; "
        "qwen:qwen3-coder-plus cannot take reasoning")
    refused = [e for e in logs if e.get("event") == "chat"]
    assert refused and {(e["status"], e["outcome"]) for e in refused} == {
        (400, "capability_unsupported")}
    skips = {(e["provider"], tuple(e["lacks"])) for e in logs if e.get("event") == "hop"}
    assert skips == {("mistral", ("tools",)), ("qwen", ("reasoning",))}
    assert by_hand.status_code == 400
    assert by_hand.json()["error"]["message"] == result["result"].removeprefix("API Error: 400 ")
    detail = json.loads(by_hand.headers["x-olp-fallback-detail"])
    assert [(d["provider"], d["lacks"]) for d in detail] == [("mistral", ["tools"]),
                                                              ("qwen", ["reasoning"])]
