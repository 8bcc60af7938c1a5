"""The real ``claude -p`` used as a *client* of OLP (``ANTHROPIC_BASE_URL`` pointed at the
proxy, an OLP key as its API key), answered through a chain whose hop is the real ``codex``
against the loopback mock Responses API: Claude Code keeps working when its own window is
shut. Proves the Messages dialect with the client it exists for (its system prompt blocks,
its own tools offered as client tools, streaming)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_openai_responses import serve_mock
from olp_harness import real_cli, run_proxy, spawned, wait_until
from test_proxy_real_codex import ANSWER, config, proxy_env

SONNET = "claude-sonnet-4-6"


@pytest.mark.parametrize("mode", ["app-server", "exec"])
async def test_claude_code_is_answered_by_codex_through_olp(tmp_path: Path,
                                                             nursery: trio.Nursery,
                                                             mode: str) -> None:
    claude, codex = real_cli("OLP_REAL_CLAUDE"), real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await nursery.start(lambda task_status: serve_mock(
            scenario="success", task_status=task_status))
        cfg: dict[str, Any] = config(codex, mock, mode=mode)
        # Every model Claude Code asks for (its main model and its small fast one) goes to
        # codex; the mock's API key is metered spend, so the entries consent.
        entry = {"provider": "openai", "model": "gpt-5.5", "metered": True}
        cfg["routing"] = {"chains": {SONNET: [entry], "claude-haiku-4-5": [entry]}}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            home = tmp_path / "claude-home"
            work = tmp_path / "claude-work"
            home.mkdir()
            work.mkdir()
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home),
                   "ANTHROPIC_BASE_URL": proxy.url, "ANTHROPIC_API_KEY": proxy.token,
                   "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_AUTOUPDATER": "1",
                   "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
            done = await trio.run_process(
                [claude, "-p", "--output-format", "json", "--model", SONNET,
                 "--no-session-persistence"],
                stdin=b"Say hello in four words.", env=env, cwd=work,
                capture_stdout=True, capture_stderr=True, check=False)
            logs = list(proxy.logs)
            assert await wait_until(lambda: not spawned(proxy.process.pid), within=10)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False and result["result"] == ANSWER
    chats = [e for e in logs if e.get("event") == "chat"]
    assert chats and {e["provider"] for e in chats} == {"openai"}
    assert {e["status"] for e in chats} == {200}
    # Claude Code's own tools (Bash, Read, Edit, Write, Agent, … in 2.1.332) came in the
    # request as client tools and reached codex's hop as the client's, never as codex
    # built-ins: on exec in the bridge's namespace, on the app-server as the thread's own.
    tools = [t for r in mock.requests if r["route"] == "/v1/responses"
             for t in r["body"].get("tools") or []]
    if mode == "exec":
        assert any(t.get("type") == "namespace" and t.get("name") == "mcp__olp"
                   for t in tools)
    else:
        names = {t.get("name") for t in tools}
        assert {"Bash", "Read"} <= names and "exec_command" not in names, names
