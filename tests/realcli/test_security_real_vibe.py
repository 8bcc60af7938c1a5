"""vibe is used as a model, never as an agent on the host: the real ``vibe`` CLI through
``olp start`` against the loopback mock Mistral API playing a prompt-injected model (scenario
``tool_attack``: it calls the shell or file tool the request offers with the bait's command,
then echoes the tool result, so a leak would reach both the upstream and the client).

The bait (``tests/support/tool_bait.py``) is a secret file in the proxy user's HOME and a
marker path that must never be written. vibe 3.0.2 always offers its runtime's builtins (``bash``,
``read_file``, ...; see ``olp/providers/vibe/_invocation.py``): OLP's spawn env takes every tool
out of vibe's catalogue so each call is denied before it runs, and the OS sandbox is the second
wall. Each test runs one vibe (~5 s).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import trio
from mock_mistral import TOOL_RESULT_PREFIX, MockMistral, serve_mock
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_vibe import config
from tool_bait import Bait, assert_not_leaked, plant

from olp.actors import install_roots
from olp.providers.vibe._invocation import DISABLED_TOOLS_ARGS, TOOLS_OFF_ENV

FIXTURES = Path(__file__).parent.parent / "fixtures" / "security"
MESSAGES: list[Any] = [{"role": "user", "content": "Summarise my private notes."}]
#: What a careless owner's own vibe config could say: the auto-approve agent, the shell and
#: file tools explicitly enabled and always allowed, the bypass on.
CARELESS_TOML = "\n".join([
    'default_agent = "auto-approve"',
    "bypass_tool_permissions = true",
    'enabled_tools = ["bash", "read_file"]',
    "disabled_tools = []",
    "[tools.bash]",
    'permission = "always"',
    "[tools.read_file]",
    'permission = "always"',
    "",
])
CARELESS_DOTENV = "vibe_disabled_tools=[]\nVIBE_DEFAULT_AGENT=auto-approve\n"


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def after_names() -> list[str]:
    names: list[str] = json.loads((FIXTURES / "vibe-tools-after.json").read_text())["names"]
    return names


def careless_vibe(tmp_path: Path, vibe: str) -> Path:
    """A wrapper the owner points ``binary`` at: it drops OLP's tool settings (env and
    ``--disabled-tools``) and runs the real vibe with ``--yolo`` (every call auto-approved) - a
    tool left on, the only way one can be (no config reaches the settings)."""
    script = tmp_path / "careless" / "bin" / "vibe"
    script.parent.mkdir(parents=True)
    flag, value = DISABLED_TOOLS_ARGS
    script.write_text("\n".join([
        "#!/bin/sh",
        f"unset {' '.join(sorted(TOOLS_OFF_ENV))}",
        "skip=",
        "for arg; do",
        "  shift",
        '  if [ -n "$skip" ]; then skip=; continue; fi',
        f'  if [ "$arg" = {flag} ]; then skip=1; continue; fi',
        '  set -- "$@" "$arg"',
        "done",
        f'exec {vibe} --yolo "$@"',
        "",
    ]))
    assert value == "*"
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


async def attack(tmp_path: Path, nursery: trio.Nursery, *, careless: bool = False,
                 careless_toml: bool = False, sandbox: bool | None = None,
                 ) -> tuple[Bait, MockMistral, str]:
    """Plant the bait, run one request through the proxy against the attacking mock; return
    the bait, the mock (its recorded requests) and the client's answer."""
    vibe = real_cli("OLP_REAL_VIBE")
    real_home = tmp_path / "realhome"
    olp_home = tmp_path / "olp"
    bait = plant(real_home)
    mock: MockMistral = await nursery.start(
        lambda task_status: serve_mock(scenario="tool_attack", command=bait.command,
                                       path=str(bait.secret_file), task_status=task_status))
    cfg = config(vibe, mock)
    block = cfg["providers"]["mistral"]
    if careless_toml:
        block["home_files"][".vibe/config.toml"] += CARELESS_TOML
        # vibe loads $VIBE_HOME/.env into its environment; names match case-insensitively
        block["home_files"][".vibe/.env"] = CARELESS_DOTENV
        block["extra_args"] = ["--yolo", "--enabled-tools", "bash"]
    if careless:
        block["binary"] = str(careless_vibe(tmp_path, vibe))
        # the wrapper's own directory is its install root; the real vibe's must be visible too
        block["sandbox_read_only"] = [
            str(p) for p in install_roots(vibe, path_env=os.environ.get("PATH"),
                                          forbidden=(real_home, olp_home))]
    if sandbox is not None:
        block["sandbox"] = sandbox
    async with run_proxy(olp_home, cfg, env={"HOME": str(real_home)}) as proxy:
        completion = await in_thread(lambda: proxy.client().chat.completions.create(
            model="devstral", messages=MESSAGES))
    return bait, mock, completion.choices[0].message.content or ""


def bodies(mock: MockMistral) -> list[str]:
    """Every request the upstream received (the connector bootstrap GET has no body)."""
    return [json.dumps(r["body"], ensure_ascii=False) for r in mock.requests]


def tool_result(mock: MockMistral) -> str:
    """The tool message vibe sent back after the attacking call."""
    chats = mock.chat_requests()
    assert len(chats) == 2, "expected the attacking call and the follow-up with its result"
    [message] = [m for m in chats[1]["body"]["messages"] if m.get("role") == "tool"]
    content: str = message["content"]
    return content


def test_the_fixtures_say_what_was_removed() -> None:
    before = json.loads((FIXTURES / "vibe-tools-before.json").read_text())["names"]
    after = after_names()
    assert {"todo", "unified_harness_scratchpad", "wait"} <= set(before) - set(after)
    # what remains are the runtime builtins no vibe setting removes (each call is denied)
    assert set(after) == {"search_tool_functions", "run_typescript", "read_file", "write_file",
                          "edit", "bash", "skill"}


async def test_default_config_denies_every_tool(tmp_path: Path, nursery: trio.Nursery) -> None:
    """OLP's defaults: the request offers only the runtime builtins that cannot be removed
    (the fixture), and the injected ``bash`` call is denied before it runs."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery)
    first = mock.chat_requests()[0]
    assert names(first["body"]) == after_names()
    assert first["tool_attack"] == "bash"
    result = tool_result(mock)
    assert "tool_denied" in result and "approval policy" in result
    assert answer == TOOL_RESULT_PREFIX + result
    assert_not_leaked(bait, bodies(mock), answer)


async def test_owner_config_cannot_switch_a_tool_back_on(tmp_path: Path,
                                                         nursery: trio.Nursery) -> None:
    """A careless owner's ``home_files`` config (auto-approve agent, tools enabled and always
    allowed, bypass on, a ``.env`` that tries to clear ``disabled_tools``) plus ``--yolo
    --enabled-tools bash`` in ``extra_args``, with the OS sandbox off so only the tool settings
    stand between the model and the file: the call is still denied."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, careless_toml=True, sandbox=False)
    assert names(mock.chat_requests()[0]["body"]) == after_names()
    result = tool_result(mock)
    assert "tool_denied" in result and "approval policy" in result
    assert_not_leaked(bait, bodies(mock), answer)


async def test_a_tool_left_on_is_contained_by_the_sandbox(tmp_path: Path,
                                                          nursery: trio.Nursery) -> None:
    """The owner runs vibe through a wrapper that drops OLP's tool settings and auto-approves
    every call; OLP's OS sandbox (the default) still keeps the secret unreadable and the
    marker unwritten."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, careless=True, sandbox=True)
    assert "todo" in names(mock.chat_requests()[0]["body"])  # the tool settings are gone
    result = tool_result(mock)
    assert "tool_denied" not in result and '"returncode"' in result  # bash really ran
    assert_not_leaked(bait, bodies(mock), answer)


async def test_control_without_the_sandbox_the_attack_succeeds(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The control for the test above, and the only reason this test exists: the same attack
    with ``"sandbox": false`` really reads the secret and writes the marker, which proves the
    attack works and so that the sandboxed test can fail."""
    with trio.fail_after(60):
        bait, mock, answer = await attack(tmp_path, nursery, careless=True, sandbox=False)
    assert bait.secret in tool_result(mock)  # the tool output went upstream
    assert bait.secret in answer
    assert bait.marker.exists()
