"""A stdio MCP server that forwards to a Hark appliance's raw TCP transport.

Each line of standard input (one JSON-RPC message, MCP's stdio framing) is
sent to the appliance; each line it sends back is written to standard
output. The bridge keeps the client's `initialize` and
`notifications/initialized`: when the appliance drops the connection
(a restart, the network), requests still waiting are answered with a
JSON-RPC error at once, and the next message reconnects, presents the
token again and replays the handshake, so the client's session carries on.

Only the standard library: it runs wherever Python 3.9+ does.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading

__version__ = "0.1.0"

DEFAULT_PORT = 7340
#: The error code for "the appliance is not there" (as `hark connect`).
UNREACHABLE = -32000
AUTH_ID = "hark-connect-auth"
REPLAY_ID = "hark-connect-replay"
CONNECT_TIMEOUT = 5.0


class Unreachable(Exception):
    """The appliance could not be reached, or refused the token."""


def target_of(text: str) -> tuple[str, int]:
    """HOST or HOST:PORT (an IPv6 address in brackets) as (host, port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else DEFAULT_PORT
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, DEFAULT_PORT


class Upstream:
    """One connection to the appliance, read line by line."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reader = sock.makefile("rb")

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode("utf-8") + b"\n")

    def read_line(self) -> str | None:
        try:
            line = self.reader.readline()
        except OSError:
            return None
        return line.decode("utf-8").rstrip("\r\n") if line else None

    def wait_for(self, wanted_id: str) -> dict | None:
        """Reads until the answer to `wanted_id` (what comes before it is
        the handshake's business and dropped)."""
        while True:
            line = self.read_line()
            if line is None:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == wanted_id:
                return message

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class Bridge:
    def __init__(self, host: str, port: int, token: str | None, name: str | None, out=None):
        self.host, self.port, self.token, self.name = host, port, token, name
        self.out = out or sys.stdout
        self.out_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.upstream: Upstream | None = None
        self.handshake: list[str] = []
        self.pending: dict[str, object] = {}

    # ---- output ----------------------------------------------------------

    def write(self, line: str) -> None:
        with self.out_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def write_error(self, request_id, message: str) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "error": {"code": UNREACHABLE, "message": message}}))

    # ---- the appliance ---------------------------------------------------

    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def open(self, replay: list[str]) -> Upstream:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT)
        except OSError as e:
            raise Unreachable(f"cannot reach Hark at {self.where()}: {e}") from e
        sock.settimeout(CONNECT_TIMEOUT)
        up = Upstream(sock)
        try:
            if self.token:
                up.send(json.dumps({"jsonrpc": "2.0", "id": AUTH_ID, "method": "hark/auth",
                                    "params": {"token": self.token}}))
                answer = up.wait_for(AUTH_ID)
                if answer is None:
                    raise Unreachable(f"Hark at {self.where()} did not answer the token")
                if "result" not in answer:
                    reason = (answer.get("error") or {}).get("message", "no reason given")
                    raise Unreachable(f"Hark at {self.where()} refused the token: {reason}")
            for line in replay:
                message = json.loads(line)
                if "id" in message:
                    message["id"] = REPLAY_ID
                    up.send(json.dumps(message))
                    if up.wait_for(REPLAY_ID) is None:
                        raise Unreachable(f"Hark at {self.where()} did not answer the replayed initialize")
                else:
                    up.send(json.dumps(message))
        except (OSError, ValueError) as e:
            up.close()
            raise Unreachable(f"lost Hark at {self.where()} while connecting: {e}") from e
        except Unreachable:
            up.close()
            raise
        # Answers may take as long as the person does: no timeout from now.
        sock.settimeout(None)
        threading.Thread(target=self.pump, args=(up,), daemon=True).start()
        return up

    def pump(self, up: Upstream) -> None:
        """Copies the appliance's lines to standard output until it goes."""
        while True:
            line = up.read_line()
            if line is None:
                break
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "method" not in message and "id" in message:
                with self.state_lock:
                    self.pending.pop(json.dumps(message["id"]), None)
            self.write(line)
        self.lost(up)

    def lost(self, up: Upstream) -> None:
        """The connection went: every call waiting on it gets an error."""
        with self.state_lock:
            if self.upstream is not up:
                return
            self.upstream = None
            waiting = list(self.pending.values())
            self.pending.clear()
        up.close()
        for request_id in waiting:
            self.write_error(request_id, f"connection to Hark at {self.where()} was lost before it "
                                         "answered; the call may not have completed")

    # ---- the client ------------------------------------------------------

    def rename(self, message: dict) -> bool:
        if not self.name or not isinstance(message.get("params"), dict):
            return False
        params = message["params"]
        if message.get("method") == "initialize":
            info = params.get("clientInfo")
        else:
            info = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientInfo")
        if isinstance(info, dict):
            info["name"] = self.name
            return True
        return False

    def handle(self, line: str) -> None:
        """One line from the client."""
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            message = None
        if message is not None and self.rename(message):
            line = json.dumps(message)
        method = message.get("method") if message else None
        request_id = message.get("id") if message else None
        is_request = method is not None and message is not None and "id" in message
        handshake = method in ("initialize", "notifications/initialized")
        with self.state_lock:
            if method == "initialize":
                self.handshake = []
            up = self.upstream
            replay = [] if handshake else list(self.handshake)
        if up is None:
            try:
                up = self.open(replay)
            except Unreachable as e:
                if is_request:
                    self.write_error(request_id, str(e))
                return
            with self.state_lock:
                self.upstream = up
        with self.state_lock:
            if handshake:
                self.handshake.append(line)
            if is_request:
                self.pending[json.dumps(request_id)] = request_id
        try:
            up.send(line)
        except OSError:
            self.lost(up)

    def run(self, lines) -> None:
        for line in lines:
            self.handle(line.rstrip("\r\n"))
        with self.state_lock:
            up = self.upstream
        if up is not None:
            up.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hark-connect",
        description="A stdio MCP server that forwards to a Hark voice appliance on the LAN "
                    "(its raw TCP transport).")
    parser.add_argument("target", nargs="?", default="hark.local",
                        help="the appliance: HOST or HOST:PORT (default hark.local:7340)")
    parser.add_argument("--token", default=os.environ.get("HARK_TOKEN"),
                        help="the token pairing gave (default: $HARK_TOKEN); not needed on the appliance itself")
    parser.add_argument("--name", help="the agent's name on the appliance, in place of the client's own")
    parser.add_argument("--version", action="version", version=f"hark-connect {__version__}")
    args = parser.parse_args(argv)
    try:
        host, port = target_of(args.target)
    except ValueError:
        parser.error(f"`{args.target}` is not HOST or HOST:PORT")
    # MCP's stdio is UTF-8 lines ending in \n on every system (Windows
    # would write \r\n and read its own code page otherwise).
    sys.stdin.reconfigure(encoding="utf-8")
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")
    Bridge(host, port, args.token, args.name).run(sys.stdin)
    return 0
