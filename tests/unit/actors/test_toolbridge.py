"""The tool bridge: the shared helpers, and the stdio MCP server run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from olp.actors._toolbridge import (
    BRIDGE_SCRIPT,
    SERVER_NAME,
    TOOLS_FILE,
    bridge_command,
    bridge_read_roots,
    forced_tool,
    offered_tools,
    tool_instruction,
    tools_file_text,
)
from olp.ir import ChatRequest, Message, TextPart, ToolSpec

WEATHER = ToolSpec(name="get_weather", description="Weather of a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
CLOCK = ToolSpec(name="get_time")


def request(**kw: Any) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message(role="user", content=(TextPart(text="hi"),)),),
                       **kw)


def test_names_are_the_shared_constants() -> None:
    assert SERVER_NAME == "olp"
    assert TOOLS_FILE == "olp-tools.json"
    assert BRIDGE_SCRIPT.is_absolute() and BRIDGE_SCRIPT.is_file()
    assert BRIDGE_SCRIPT.name == "mcp_bridge_server.py"


@pytest.mark.parametrize(("choice", "offered"), [
    (None, ("get_weather", "get_time")), ("auto", ("get_weather", "get_time")),
    ("required", ("get_weather", "get_time")), ("none", ()),
    ({"type": "function", "function": {"name": "get_time"}}, ("get_weather", "get_time")),
])
def test_offered_tools_are_all_but_for_choice_none(choice: Any, offered: tuple[str, ...]) -> None:
    req = request(tools=(WEATHER, CLOCK), tool_choice=choice)
    assert tuple(t.name for t in offered_tools(req)) == offered


def test_tools_file_is_mcp_shaped_with_a_default_schema() -> None:
    data = json.loads(tools_file_text([WEATHER, CLOCK]))
    assert data == {"tools": [
        {"name": "get_weather", "description": "Weather of a city",
         "inputSchema": WEATHER.parameters},
        {"name": "get_time", "description": "",
         "inputSchema": {"type": "object", "properties": {}}}]}


def test_bridge_command_runs_this_interpreter_isolated(tmp_path: Path) -> None:
    command, args = bridge_command(tmp_path)
    assert command == sys.executable
    assert args == ["-I", "-S", str(BRIDGE_SCRIPT), str(tmp_path / TOOLS_FILE)]


def test_read_roots_cover_the_interpreter_and_the_script_but_never_root() -> None:
    roots = bridge_read_roots()
    assert Path("/") not in roots
    assert BRIDGE_SCRIPT.parent in roots
    assert any(Path(sys.executable).resolve().is_relative_to(r) for r in roots)
    assert any(Path(sys.prefix) == r for r in roots)


@pytest.mark.parametrize(("choice", "forced", "says"), [
    (None, None, None), ("auto", None, None), ("none", None, None),
    ("required", "*", "one of your tools (get_weather, get_time)"),
    ({"type": "function", "function": {"name": "get_time"}}, "get_time", "the tool get_time"),
])
def test_forced_choice_and_its_instruction(choice: Any, forced: str | None,
                                           says: str | None) -> None:
    req = request(tools=(WEATHER, CLOCK), tool_choice=choice)
    assert forced_tool(req) == forced
    text = tool_instruction(req)
    if says is None:
        assert text is None
    else:
        assert text is not None and says in text and "Do not answer in prose" in text


def test_no_tools_forces_nothing() -> None:
    assert forced_tool(request(tool_choice="required")) is None
    assert tool_instruction(request(tool_choice="required")) is None


# --- the server, as the CLI runs it ---------------------------------------------------------

class Bridge:
    """The bridge as a subprocess, with line-wise JSON-RPC helpers."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.buffer = b""

    async def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.proc.stdin.send_all(data + b"\n")

    async def receive(self) -> Any:
        assert self.proc.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.proc.stdout.receive_some()
            if not chunk:
                raise EOFError(self.buffer)
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


async def start_bridge(tmp_path: Path, tools: list[ToolSpec]) -> Bridge:
    (tmp_path / TOOLS_FILE).write_text(tools_file_text(tools), encoding="utf-8")
    command, args = bridge_command(tmp_path)
    proc = await trio.lowlevel.open_process([command, *args], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return Bridge(proc)


async def test_bridge_speaks_the_handshake_claude_uses(tmp_path: Path) -> None:
    with trio.fail_after(30):
        bridge = await start_bridge(tmp_path, [WEATHER])
        try:
            await bridge.send({"jsonrpc": "2.0", "id": "server-discover-probe-1",
                               "method": "server/discover",
                               "params": {"_meta": {
                                   "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
            assert await bridge.receive() == {"jsonrpc": "2.0", "id": "server-discover-probe-1",
                                              "result": {}}
            await bridge.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "claude-code", "version": "2"}}})
            init = await bridge.receive()
            assert init["id"] == 0
            assert init["result"]["protocolVersion"] == "2025-11-25"
            assert init["result"]["serverInfo"]["name"] == "olp"
            assert "tools" in init["result"]["capabilities"]
            await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await bridge.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
            listed = await bridge.receive()
            assert listed == {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
                {"name": "get_weather", "description": "Weather of a city",
                 "inputSchema": WEATHER.parameters}]}}
            await bridge.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert await bridge.receive() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        finally:
            bridge.proc.kill()
            await bridge.proc.wait()


async def test_bridge_answers_an_unknown_protocol_version_with_its_latest(tmp_path: Path) -> None:
    with trio.fail_after(30):
        bridge = await start_bridge(tmp_path, [])
        try:
            await bridge.send({"jsonrpc": "2.0", "id": 7, "method": "initialize",
                               "params": {"protocolVersion": "1999-01-01"}})
            assert (await bridge.receive())["result"]["protocolVersion"] == "2025-11-25"
            await bridge.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
            assert (await bridge.receive())["result"] == {"tools": []}
        finally:
            bridge.proc.kill()
            await bridge.proc.wait()


async def test_unknown_method_is_32601_and_garbage_is_32700(tmp_path: Path) -> None:
    with trio.fail_after(30):
        bridge = await start_bridge(tmp_path, [WEATHER])
        try:
            await bridge.send({"jsonrpc": "2.0", "id": 3, "method": "resources/list"})
            reply = await bridge.receive()
            assert reply["id"] == 3 and reply["error"]["code"] == -32601
            await bridge.send(b"{not json")
            reply = await bridge.receive()
            assert reply["id"] is None and reply["error"]["code"] == -32700
        finally:
            bridge.proc.kill()
            await bridge.proc.wait()


async def test_tools_call_is_never_answered_and_eof_exits(tmp_path: Path) -> None:
    with trio.fail_after(30):
        bridge = await start_bridge(tmp_path, [WEATHER])
        await bridge.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                           "params": {"name": "get_weather", "arguments": {"city": "Paris"}}})
        # Lines are answered in order: the ping's reply coming first proves the call was read
        # and deliberately left unanswered.
        await bridge.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
        assert await bridge.receive() == {"jsonrpc": "2.0", "id": 5, "result": {}}
        assert bridge.proc.stdin is not None
        await bridge.proc.stdin.aclose()
        assert await bridge.proc.wait() == 0


async def test_unreadable_tools_file_exits_2(tmp_path: Path) -> None:
    with trio.fail_after(30):
        command, args = bridge_command(tmp_path)  # no tools file written
        done = await trio.run_process([command, *args], stdin=b"", capture_stdout=True,
                                      capture_stderr=True, check=False)
    assert done.returncode == 2
    assert b"cannot read the tools file" in done.stderr
    assert done.stdout == b""
