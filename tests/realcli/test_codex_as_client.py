"""The real ``codex exec`` used as a *client* of OLP (a ``model_providers`` entry with
``wire_api = "responses"`` pointed at the proxy, an OLP key as its key), answered through a
chain whose hop is the real ``claude`` against the loopback mock Anthropic API: a codex user
out of quota keeps working through claude. Proves the Responses dialect with the client it
exists for (its long instructions, its developer messages, its own tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_anthropic import serve_mock
from olp_harness import descendants, real_cli, run_proxy, wait_until
from test_proxy_real_claude import config

pytestmark = pytest.mark.realcli

ANSWER = "Hello from the mock upstream."


def codex_home(home: Path, proxy_url: str) -> None:
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        'model_provider = "olp"\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.olp]\n"
        'name = "OLP"\n'
        f'base_url = "{proxy_url}/v1"\n'
        'env_key = "OLP_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n\n"
        "[analytics]\nenabled = false\n")


async def test_codex_is_answered_by_claude_through_olp(tmp_path: Path,
                                                       nursery: trio.Nursery) -> None:
    claude, codex = real_cli("OLP_REAL_CLAUDE"), real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await nursery.start(lambda task_status: serve_mock(
            scenario="success", task_status=task_status))
        cfg: dict[str, Any] = config(claude, mock)
        cfg["routing"] = {"chains": {"gpt-5.5": [
            {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            home, work = tmp_path / "codex-home", tmp_path / "codex-work"
            codex_home(home, proxy.url)
            work.mkdir()
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "OLP_KEY": proxy.token}
            done = await trio.run_process(
                [codex, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                 "-m", "gpt-5.5", "-"],
                stdin=b"Say hello in four words.", env=env, cwd=work,
                capture_stdout=True, capture_stderr=True, check=False)
            logs = list(proxy.logs)
            assert await wait_until(lambda: not descendants(proxy.process.pid), within=10)
    detail = done.stderr.decode(errors="replace")[-2000:] + done.stdout.decode(
        errors="replace")[-2000:]
    assert done.returncode == 0, detail
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
    messages = [e["item"]["text"] for e in lines if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]
    assert messages == [ANSWER], detail
    chats = [e for e in logs if e.get("event") == "chat"]
    assert chats and {e["provider"] for e in chats} == {"anthropic"}
    assert {e["status"] for e in chats} == {200}
    # codex's function tools reached claude's hop through OLP's bridge; its freeform and
    # server tools (apply_patch, tool_search, web_search) were dropped, loudly.
    offered = {t["name"] for r in mock.requests for t in r["body"].get("tools") or []}
    assert "mcp__olp__exec_command" in offered
    assert not {n for n in offered if not n.startswith("mcp__olp__")}
