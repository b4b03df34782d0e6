"""The benchmark's peer: a minimal MCP server on the official Python SDK (2.x).

One tool, `get_status`, answering like Hark's does (the two booleans), served
over Streamable HTTP at http://127.0.0.1:PORT/mcp. `hark-bench` starts it with
the port it picked, measures it the same way as Hark, and stops it with SIGTERM.

    tests/.venv/bin/python tests/bench/peer_server.py PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-peer", log_level="WARNING")


@server.tool()
def get_status() -> dict[str, bool]:
    """Whether the microphone is open and the speaker is playing."""
    return {"recording": False, "speaking": False}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: peer_server.py PORT")
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))


if __name__ == "__main__":
    main()
