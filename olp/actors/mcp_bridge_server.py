"""OLP's tool bridge: a stdio MCP server that lists a request's tools and executes none.

Run by a vendor CLI as ``python -I -S mcp_bridge_server.py <tools file>`` (standard library
only, so it starts in tens of milliseconds and needs no virtualenv). JSON-RPC 2.0, one JSON
object per line on stdin/stdout. ``tools/call`` is never answered: the proxy ends the spawn as
soon as the CLI printed the model's call, and the client runs the tool itself. Exits 0 on
stdin EOF, 2 when the tools file cannot be read.
"""

from __future__ import annotations

import json
import sys
from typing import Any

KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = KNOWN_VERSIONS[-1]
SERVER_INFO = {"name": "olp", "version": "1"}


def load_tools(path: str) -> list[dict[str, Any]]:
    """The ``tools`` array of the tools file (MCP ``Tool`` objects)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    tools = data["tools"]
    if not isinstance(tools, list):
        raise ValueError("tools is not a list")
    return tools


def answer(message: Any, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reply to one incoming message, or ``None`` (notifications, responses, and
    ``tools/call``, which is deliberately left unanswered)."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    method, rid = message["method"], message["id"]
    params = message.get("params")
    if method == "initialize":
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        version = asked if asked in KNOWN_VERSIONS else LATEST_VERSION
        result: dict[str, Any] = {"protocolVersion": version,
                                  "capabilities": {"tools": {"listChanged": False}},
                                  "serverInfo": SERVER_INFO}
    elif method in ("server/discover", "ping"):
        result = {}
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        return None
    else:
        return {"jsonrpc": "2.0", "id": rid,
                "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def serve(tools: list[dict[str, Any]]) -> None:
    """Answer stdin's requests on stdout until stdin ends."""
    out = sys.stdout
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            reply: dict[str, Any] | None = {
                "jsonrpc": "2.0", "id": None,
                "error": {"code": -32700, "message": "Parse error"}}
        else:
            reply = answer(message, tools)
        if reply is not None:
            out.write(json.dumps(reply, ensure_ascii=False) + "\n")
            out.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: mcp_bridge_server.py TOOLS_FILE\n")
        return 2
    try:
        tools = load_tools(argv[1])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"olp bridge: cannot read the tools file: {exc}\n")
        return 2
    try:
        serve(tools)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
