"""claude is used as a model, never as an agent on the host: the real ``claude`` CLI through
``olp start`` against the loopback mock Anthropic API playing a prompt-injected model (scenario
``tool_attack``: it calls ``Bash`` with the bait's command, or ``Read`` with the secret file,
whichever the request offers, then echoes the tool result, so a leak would reach both the
upstream and the client).

The bait (``tests/support/tool_bait.py``) is a secret file in the proxy user's HOME and a
marker path that must never be written. What OLP's argv keeps away, and how that was verified, is in
``olp/providers/anthropic/_invocation.py``; the OS sandbox is ``olp/actors/_sandbox.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_anthropic import NO_TOOL_TEXT, TOOL_RESULT_PREFIX, MockAnthropic, serve_mock
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_claude import config
from tool_bait import Bait, assert_not_leaked, plant

FIXTURES = Path(__file__).parent.parent / "fixtures" / "security"
MESSAGES: list[Any] = [{"role": "user", "content": "Summarise my private notes."}]
#: tools deliberately switched back on by the owner, allowed without a prompt: the worst an
#: owner can configure with claude running as root (``--dangerously-skip-permissions`` is
#: refused as root; ``--allowedTools`` is enough for ``claude -p`` to run them). Appended after
#: OLP's own flags, so these win.
TOOLS_ON = ["--tools", "Bash,Read", "--allowedTools", "Bash,Read"]


def fixture_tools(name: str) -> list[str]:
    tools: list[str] = json.loads((FIXTURES / name).read_text())["tools"]
    return tools


def offered(body: dict[str, Any]) -> list[str]:
    """The tool names a recorded upstream request offered the model."""
    return sorted(t["name"] for t in body.get("tools") or [])


def bodies(mock: MockAnthropic) -> list[str]:
    return [json.dumps(r["body"], ensure_ascii=False) for r in mock.requests]


async def attack(tmp_path: Path, nursery: trio.Nursery, *, extra_args: list[str] | None = None,
                 sandbox: bool | None = None) -> tuple[Bait, MockAnthropic, str]:
    """Plant the bait, run one request through the proxy against the attacking mock; return
    the bait, the mock (its recorded requests) and the client's answer."""
    claude = real_cli("OLP_REAL_CLAUDE")
    user_home = tmp_path / "user-home"  # the proxy user's HOME: no developer login linked in
    user_home.mkdir()
    bait = plant(user_home)
    mock: MockAnthropic = await nursery.start(
        lambda task_status: serve_mock(scenario="tool_attack", command=bait.command,
                                       path=str(bait.secret_file), task_status=task_status))
    cfg = config(claude, mock)
    block = cfg["providers"]["anthropic"]
    if extra_args is not None:
        block["extra_args"] = extra_args
    if sandbox is not None:
        block["sandbox"] = sandbox
    async with run_proxy(tmp_path / "home", cfg, env={"HOME": str(user_home)}) as proxy:
        completion = await in_thread(lambda: proxy.client().chat.completions.create(
            model="sonnet", messages=MESSAGES))
    return bait, mock, completion.choices[0].message.content or ""


def test_the_fixtures_say_what_is_offered() -> None:
    assert fixture_tools("claude-tools-after.json") == []
    assert fixture_tools("claude-tools-left-on.json") == ["Bash", "Read"]


async def test_default_config_offers_no_tool(tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery)
    [request] = mock.requests  # no tool call was possible, so no follow-up request
    body = request["body"]
    assert "tools" not in body or body["tools"] == []
    assert offered(body) == fixture_tools("claude-tools-after.json")
    assert request["tool_attack"] == "no tool"
    assert answer == NO_TOOL_TEXT
    assert_not_leaked(bait, bodies(mock), answer)


async def test_a_tool_left_on_is_contained_by_the_sandbox(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The owner switched ``Bash`` and ``Read`` back on and allowed them; OLP's OS sandbox (on
    by default, here said explicitly) still keeps the secret unreadable and the marker
    unwritten."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, extra_args=TOOLS_ON, sandbox=True)
    first = mock.requests[0]
    assert offered(first["body"]) == fixture_tools("claude-tools-left-on.json")
    assert first["tool_attack"] == "tool_use Bash"
    assert len(mock.requests) == 2  # the attack ran and its (failed) result went back
    assert mock.requests[1]["tool_attack"] == "echoed tool result"
    assert answer.startswith(TOOL_RESULT_PREFIX)
    assert_not_leaked(bait, bodies(mock), answer)


async def test_control_without_the_sandbox_the_attack_succeeds(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The control for the test above, and the only reason this test exists: the same attack
    with ``"sandbox": false`` really reads the secret and writes the marker, which proves the
    attack works and so that the sandboxed test can fail. If this test ever fails, the
    sandboxed test above proves nothing."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, extra_args=TOOLS_ON, sandbox=False)
    assert offered(mock.requests[0]["body"]) == fixture_tools("claude-tools-left-on.json")
    assert len(mock.requests) == 2
    assert any(bait.secret in body for body in bodies(mock)[1:])  # the tool result upstream
    assert bait.secret in answer
    assert bait.marker.exists()
