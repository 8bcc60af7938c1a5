"""The request's tools, handed to a CLI as a per-spawn stdio MCP server (the *bridge*).

A CLI adapter writes :data:`TOOLS_FILE` (:func:`tools_file_text`) into the job's working
directory and configures the CLI to launch :func:`bridge_command` as the MCP server named
:data:`SERVER_NAME`. The bridge (``mcp_bridge_server.py``, stdlib only) lists exactly those
tools and never executes one: the proxy ends the spawn as soon as the CLI printed the model's
call, and the client runs the tool. Everything here is pure and never blocks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from olp.ir import ChatRequest, ToolSpec

SERVER_NAME: Final = "olp"
TOOLS_FILE: Final = "olp-tools.json"
BRIDGE_SCRIPT: Final[Path] = Path(__file__).resolve().with_name("mcp_bridge_server.py")
_EMPTY_SCHEMA: Final = {"type": "object", "properties": {}}


def offered_tools(request: ChatRequest) -> tuple[ToolSpec, ...]:
    """The tools the CLI should see: ``()`` when ``tool_choice`` is ``"none"``, else all of
    ``request.tools`` (a named choice is verified on the answer, not by hiding the others)."""
    if request.tool_choice == "none":
        return ()
    return request.tools


def tools_file_text(tools: Sequence[ToolSpec]) -> str:
    """The JSON the bridge reads: ``{"tools": [{"name", "description", "inputSchema"}, ...]}``
    in MCP's shape; a tool without parameters gets an empty object schema."""
    listed = [{"name": t.name, "description": t.description or "",
               "inputSchema": t.parameters if t.parameters is not None else _EMPTY_SCHEMA}
              for t in tools]
    return json.dumps({"tools": listed}, ensure_ascii=False)


def bridge_command(workdir: Path) -> tuple[str, list[str]]:
    """``(command, args)`` that launch the bridge for a job whose tools file is in ``workdir``:
    the proxy's own interpreter, isolated (``-I``) and without ``site`` (``-S``), so it starts
    fast and needs nothing outside the standard library."""
    return sys.executable, ["-I", "-S", str(BRIDGE_SCRIPT), str(workdir / TOOLS_FILE)]


def bridge_read_roots() -> list[Path]:
    """Read-only paths a sandboxed spawn needs to run the bridge: the interpreter's
    environment (``sys.prefix``, which holds ``pyvenv.cfg`` for a virtualenv), its base
    installation (the standard library) and the script's directory. Never ``/``."""
    roots: list[Path] = []
    for path in (Path(sys.prefix), Path(sys.prefix).resolve(), Path(sys.base_prefix),
                 Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent.parent,
                 BRIDGE_SCRIPT.parent):
        if path != Path("/") and path not in roots:
            roots.append(path)
    return roots


def forced_tool(request: ChatRequest) -> str | None:
    """What ``tool_choice`` forces: ``"*"`` for ``"required"`` (any offered tool), the
    function's name for a named choice, ``None`` when no call is forced."""
    choice = request.tool_choice
    if not request.tools:
        return None
    if choice == "required":
        return "*"
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def tool_instruction(request: ChatRequest) -> str | None:
    """Prompt text for a forced ``tool_choice`` (``"required"`` or a named function): the
    model must call (that) tool now. ``None`` for ``auto``, ``none`` or no choice."""
    forced = forced_tool(request)
    if forced is None:
        return None
    if forced == "*":
        names = ", ".join(t.name for t in request.tools)
        return (f"You must answer this turn by calling one of your tools ({names}) now. "
                "Do not answer in prose.")
    return f"You must answer this turn by calling the tool {forced} now. Do not answer in prose."
