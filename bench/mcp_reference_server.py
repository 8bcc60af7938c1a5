"""The reference for the bridge benchmark: the same tools/list, served with the ``mcp``
package's low-level server over stdio (``python mcp_reference_server.py TOOLS_FILE``).

Run by ``bench/bridge_startup.py`` with an interpreter that has ``mcp`` installed (it makes a
virtual environment for it outside the repository); never imported by OLP or its tests.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        listed = json.load(f)["tools"]
    tools = [types.Tool(name=t["name"], description=t["description"],
                        inputSchema=t["inputSchema"]) for t in listed]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    server = Server("olp", on_list_tools=list_tools)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
