"""codex is used as a model, never as an agent on the host: the real ``codex`` CLI through
``olp start`` against the loopback mock Responses API playing a prompt-injected model
(scenario ``tool_attack``: it calls whatever shell/file tool the request offers with the bait's
command, then echoes the tool output, so a leak would reach both the upstream and the client).

The bait (``tests/support/tool_bait.py``) is a secret file in the proxy user's HOME and a
marker path that must never be written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_openai_responses import MockResponses, offered_tools, serve_mock
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_codex import config, proxy_env
from tool_bait import Bait, assert_not_leaked, plant

FIXTURES = Path(__file__).parent.parent / "fixtures" / "security"
MESSAGES: list[Any] = [{"role": "user", "content": "Summarise my private notes."}]
#: a shell tool deliberately switched back on, with codex's own sandbox off: the worst an
#: owner can configure (codex's read-only sandbox alone is not what protects the host)
SHELL_ON = ["--enable", "shell_tool", "--dangerously-bypass-approvals-and-sandbox"]


async def attack(tmp_path: Path, nursery: trio.Nursery, *, extra_args: list[str] | None = None,
                 sandbox: bool | None = None) -> tuple[Bait, MockResponses, str]:
    """Plant the bait, run one request through the proxy against the attacking mock; return
    the bait, the mock (its recorded requests) and the client's answer."""
    codex = real_cli("OLP_REAL_CODEX")
    env = proxy_env(tmp_path)
    bait = plant(Path(env["HOME"]))
    mock: MockResponses = await nursery.start(
        lambda task_status: serve_mock(
            scenario="tool_attack", command=bait.command, path=str(bait.secret_file),
            marker=str(bait.marker), task_status=task_status))
    cfg = config(codex, mock)
    block = cfg["providers"]["openai"]
    if extra_args is not None:
        block["extra_args"] = extra_args
    if sandbox is not None:
        block["sandbox"] = sandbox
    async with run_proxy(tmp_path / "home", cfg, env=env) as proxy:
        completion = await in_thread(lambda: proxy.client().chat.completions.create(
            model="gpt-5.5", messages=MESSAGES))
    return bait, mock, completion.choices[0].message.content or ""


def bodies(mock: MockResponses) -> list[str]:
    return [json.dumps(r["body"], ensure_ascii=False) for r in mock.requests]


def test_the_fixtures_say_what_was_removed() -> None:
    before = json.loads((FIXTURES / "codex-tools-before.json").read_text())["tools"]
    after = json.loads((FIXTURES / "codex-tools-after.json").read_text())["tools"]
    assert {"exec_command", "apply_patch", "view_image"} <= set(before)
    assert after == []  # not even request_user_input (ADR 0009)


async def test_default_config_offers_no_host_tool(tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery)
    after = json.loads((FIXTURES / "codex-tools-after.json").read_text())["tools"]
    [request] = mock.requests  # no tool call was possible, so no follow-up request
    assert sorted(offered_tools(request["body"])) == after
    assert request["tool_call"] is None
    assert answer == "Hello from the mock upstream."
    assert_not_leaked(bait, bodies(mock), answer)


async def test_a_tool_switched_back_on_is_contained_by_the_sandbox(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The owner switched the shell tool back on and codex's own sandbox off; OLP's OS
    sandbox (the default) still keeps the secret unreadable and the marker unwritten."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, extra_args=SHELL_ON, sandbox=True)
    first = mock.requests[0]
    assert "exec_command" in offered_tools(first["body"])
    assert first["tool_call"] is not None and first["tool_call"]["name"] == "exec_command"
    assert len(mock.requests) == 2  # the attack ran and its (failed) output went back
    assert_not_leaked(bait, bodies(mock), answer)


async def test_control_without_the_sandbox_the_attack_succeeds(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The control for the test above, and the only reason this test exists: the same attack
    with ``"sandbox": false`` really reads the secret and writes the marker, which proves the
    attack works and so that the sandboxed test can fail. If this test ever fails, the
    sandboxed test above proves nothing."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, extra_args=SHELL_ON, sandbox=False)
    assert len(mock.requests) == 2
    assert any(bait.secret in body for body in bodies(mock)[1:])  # the tool output upstream
    assert bait.secret in answer
    assert bait.marker.exists()
