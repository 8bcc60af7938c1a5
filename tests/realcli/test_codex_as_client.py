"""The real ``codex exec`` used as a *client* of OLP (a ``model_providers`` entry with
``wire_api = "responses"`` pointed at the proxy, an OLP key as its key), answered through a
chain whose hop is the real ``claude`` against the loopback mock Anthropic API: a codex user
out of quota keeps working through claude. Proves the Responses dialect with the client it
exists for (its long instructions, its developer messages, its own tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_anthropic import serve_mock
from mock_anthropic._weather import RESULT_PREFIX
from olp_harness import descendants, real_cli, run_proxy, wait_until
from test_proxy_real_claude import config

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


async def test_a_call_of_codexs_own_tool_comes_back_to_codex_and_its_result_goes_on(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """The model behind claude calls codex's ``exec_command``: the call comes back to codex as
    a Responses ``function_call``, codex runs it (on its side, in its own sandbox), sends the
    ``function_call_output``, and claude answers from it — a whole agent turn through OLP."""
    claude, codex = real_cli("OLP_REAL_CLAUDE"), real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await nursery.start(lambda task_status: serve_mock(
            scenario="success", tool_suffix="exec_command",
            tool_input={"cmd": "echo olp-was-here"}, task_status=task_status))
        cfg: dict[str, Any] = config(claude, mock)
        cfg["routing"] = {"chains": {"gpt-5.5": [
            {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            home, work = tmp_path / "codex-home", tmp_path / "codex-work"
            codex_home(home, proxy.url)
            work.mkdir()
            # codex is the test's own client here: it runs `echo` in its scratch directory
            # without its sandbox (its helper cannot be installed under /tmp).
            done = await trio.run_process(
                [codex, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
                 "--sandbox", "danger-full-access", "-m", "gpt-5.5", "-"],
                stdin=b"Run the check.", env={"PATH": "/usr/bin:/bin", "HOME": str(home),
                                              "OLP_KEY": proxy.token},
                cwd=work, capture_stdout=True, capture_stderr=True, check=False)
            assert await wait_until(lambda: not descendants(proxy.process.pid), within=10)
    detail = done.stderr.decode(errors="replace")[-2000:] + done.stdout.decode(
        errors="replace")[-3000:]
    assert done.returncode == 0, detail
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
    messages = [e["item"]["text"] for e in lines if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]
    assert messages and messages[-1].startswith(RESULT_PREFIX), detail
    # Two upstream turns: the call, then the answer from codex's result (the command's output,
    # which only codex running it could produce). claude's kept session takes it as a real
    # tool_result block (issue #25). codex 0.171's --json prints no item for an exec_command run.
    assert len(mock.requests) == 2
    messages = mock.requests[1]["body"]["messages"]
    results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert any("olp-was-here" in json.dumps(b["content"]) for b in results), \
        json.dumps(messages)[-3000:]
