"""Runs under tests/.venv-ws (mcp[ws] 1.x): the official SDK's WebSocket
client against Hark. Prints one JSON object describing what it saw."""

import json
import sys
import warnings

import anyio
from mcp import ClientSession
from mcp.client.websocket import websocket_client

warnings.simplefilter("ignore", DeprecationWarning)


async def main(url: str) -> None:
    async with websocket_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("get_status", {})
            print(
                json.dumps(
                    {
                        "protocol": init.protocolVersion,
                        "server": init.serverInfo.name,
                        "tools": [t.name for t in tools.tools],
                        "structured": result.structuredContent,
                        "text": result.content[0].text,
                        "is_error": result.isError,
                    }
                )
            )


anyio.run(main, sys.argv[1])
