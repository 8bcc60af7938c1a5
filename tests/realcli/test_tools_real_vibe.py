"""Why the ``mistral`` provider (vibe 3.0.2) does not carry a client's tools: the real ``vibe``
CLI given OLP's tool bridge as a stdio MCP server, against the loopback mock Mistral API.

vibe starts the bridge, completes ``initialize`` and ``tools/list`` (its descriptor cache in the
spawn's ``VIBE_HOME`` holds the listed tool), but its Unified Harness offers MCP tools only
*programmatically* (inside ``run_typescript`` code, found through ``search_tool_functions``):
the upstream request's ``tools`` never holds the bridge's tool and always holds the runtime's
builtins. So the mock, which calls a tool whose name ends with ``get_weather`` only when one is
offered, answers in prose. Transcripts: ``tests/fixtures/cli-reference/vibe/tools/``.

These tests fail when a vibe version starts offering MCP tools as functions (then the tool
path can be built) or stops starting MCP servers. Each runs one vibe (~5 s idle).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mock_mistral import WEATHER_TOOL_SUFFIX, MockMistral, serve_mock
from olp_harness import real_cli
from test_proxy_real_vibe import KEY, MODEL, vibe_config

from olp.actors._toolbridge import SERVER_NAME, TOOLS_FILE, bridge_command, tools_file_text
from olp.ir import ChatRequest, Message, TextPart, ToolSpec
from olp.providers.vibe._invocation import build_invocation, spawn_home

WEATHER = ToolSpec(name="get_weather", description="Get the weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
#: vibe 3.0.2's runtime builtins, offered whatever the settings (each call denied).
BUILTINS = {"search_tool_functions", "run_typescript", "read_file", "write_file", "edit", "bash",
            "skill"}


def request(text: str) -> ChatRequest:
    return ChatRequest(model="devstral", messages=(Message(role="user",
                                                           content=(TextPart(text=text),)),),
                       tools=(WEATHER,))


async def run_vibe_with_bridge(tmp_path: Path, mock: MockMistral, text: str,
                               ) -> tuple[bytes, Path]:
    """One ``vibe -p`` with OLP's invocation plus the bridge (``VIBE_MCP_SERVERS``, MCP on);
    returns stdout and the spawn's ``VIBE_HOME``."""
    vibe = real_cli("OLP_REAL_VIBE")
    workdir = tmp_path / "job" / "work"
    home = spawn_home(workdir)
    vibe_home = home / ".vibe"
    vibe_home.mkdir(parents=True)
    workdir.mkdir()
    (vibe_home / "config.toml").write_text(vibe_config(mock))
    (workdir / TOOLS_FILE).write_text(tools_file_text([WEATHER]))
    invocation = build_invocation(request(text), binary=vibe, model=MODEL, workdir=workdir)
    command, args = bridge_command(workdir)
    server = {"name": SERVER_NAME, "transport": "stdio", "command": command, "args": args}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "MISTRAL_API_KEY": KEY,
           **invocation.env, "VIBE_ENABLE_MCP": "true",
           "VIBE_MCP_SERVERS": json.dumps([server])}
    result = await trio.run_process(invocation.argv, stdin=invocation.stdin, env=env,
                                    cwd=workdir, capture_stdout=True, capture_stderr=True,
                                    check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout, vibe_home


def listed_tools(vibe_home: Path) -> list[str]:
    """The tool names vibe cached from the bridge's ``tools/list`` answer."""
    names = []
    for path in (vibe_home / "logs" / "mcp-descriptors").rglob("*.json"):
        data: dict[str, Any] = json.loads(path.read_text())
        if data.get("sourceName") == SERVER_NAME:
            names += [d["remoteName"] for d in data["descriptors"]]
    return names


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


async def test_bridge_listed_but_its_tool_never_offered(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    """Asked to use bash and the weather tool: vibe lists the bridge's tool, but the upstream
    request offers only the runtime builtins (the bridge's tool is programmatic-only), so the
    mock answers in prose and no tool call is printed."""
    mock: MockMistral = await nursery.start(serve_mock)
    with trio.fail_after(60):
        stdout, vibe_home = await run_vibe_with_bridge(
            tmp_path, mock, "Use bash to run `id`, then get the weather in Paris.")
    assert listed_tools(vibe_home) == ["get_weather"]  # the bridge answered tools/list
    [chat] = mock.chat_requests()
    names = offered(chat["body"])
    assert not [n for n in names if n.endswith(WEATHER_TOOL_SUFFIX)]
    assert set(names) == BUILTINS
    # With every tool disabled (OLP's lockdown) the bridge is not even a searchable group.
    assert "mcp_olp" not in chat["body"]["messages"][0]["content"]
    assert "tool_calls" not in chat
    entries = [json.loads(line) for line in stdout.splitlines()]
    assert [(e["type"], e["role"]) for e in entries] == [("message", "user"),
                                                        ("message", "assistant")]
