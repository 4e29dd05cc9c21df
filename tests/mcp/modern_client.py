"""A client of the newest MCP revision for tests/mcp.rs: the PyPI SDK `mcp` 2.x, whose default
mode probes `server/discover` (revision 2026-07-28, stateless requests) and falls back to the
initialize handshake only for a server that does not answer it.

Usage: python3 modern_client.py PTYD [ARGS...]   (starts `PTYD mcp ARGS...` over stdio)

Prints one JSON object: the negotiated protocol version, the listed tool names, and the text of
two terminal_send results (a command and the default terminal's state after it).
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


async def main() -> None:
    ptyd, *args = sys.argv[1:]
    server = StdioServerParameters(command=ptyd, args=["mcp", *args])
    async with Client(server) as client:
        tools = await client.list_tools()
        first = await client.call_tool("terminal_send", {"text": "cd /; echo modern"})
        second = await client.call_tool("terminal_send", {"text": "pwd"})

        def text(result) -> str:
            return "".join(block.text for block in result.content if block.type == "text")

        print(
            json.dumps(
                {
                    "protocol_version": client.protocol_version,
                    "tools": [tool.name for tool in tools.tools],
                    "first": text(first),
                    "second": text(second),
                    "structured": first.structured_content,
                }
            )
        )


asyncio.run(main())
