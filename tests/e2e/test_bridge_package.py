"""`hark-connect`, the stdio bridge packaged for PyPI (appliance/bridge/python),
as a user on macOS or Windows installs it: built into a wheel, installed
into a fresh virtual environment with nothing else, and started by MCP
clients as a stdio server. The same checks as `hark connect`'s
(test_stdio.py): the official SDK through it, an unreachable appliance,
a restart survived, a call in flight answered when the appliance drops,
and a token presented for an appliance that trusts no one."""

import shutil
import subprocess
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from harness import REPO, TOOLS, Daemon, new_token
from test_stdio import (INIT, Bridge, a_call_in_flight_is_answered_when_the_appliance_drops,
                        a_restart_is_survived, unreachable_is_an_error_not_a_hang)

PACKAGE = REPO / "appliance" / "bridge" / "python"


@pytest.fixture(scope="module")
def hark_connect(tmp_path_factory):
    """The `hark-connect` command of a fresh venv with only the wheel in it."""
    tmp = tmp_path_factory.mktemp("bridge")
    # Built from a copy: a build leaves its egg-info and build/ beside the
    # sources. Its build backend (setuptools) comes from PyPI, as for any
    # user building it.
    source = tmp / "source"
    shutil.copytree(PACKAGE, source)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheels = list((tmp / "dist").glob("hark_connect-*.whl"))
    assert len(wheels) == 1, wheels
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    # The wheel is pure Python with no dependencies: pip is needed only to
    # install it, so the test's own pip installs it into the new venv.
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(tmp / "venv" / "bin" / "python"),
                                "install", "--no-index", "--no-deps", str(wheels[0])],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    command = tmp / "venv" / "bin" / "hark-connect"
    assert command.exists()
    return str(command)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_works_through_it(daemon, hark_connect, mode):
    host, port = daemon.tcp

    async def main():
        params = StdioServerParameters(command=hark_connect, args=[f"{host}:{port}", "--name", "desk-agent"])
        async with Client(params, mode=mode, cache=None) as client:
            tools = await client.list_tools()
            result = await client.call_tool("get_status", {})
            return [t.name for t in tools.tools], result.structured_content

    names, status = anyio.run(main)
    assert names == TOOLS
    assert status["recording"] is False
    assert "desk-agent" in {c["name"] for c in status["clients"]}, status["clients"]


def test_an_unreachable_appliance_is_an_error_not_a_hang(hark_connect):
    unreachable_is_an_error_not_a_hang([hark_connect])


def test_it_survives_an_appliance_restart(start_daemon, hark_connect):
    a_restart_is_survived(start_daemon, [hark_connect])


def test_a_call_in_flight_is_answered_when_the_appliance_drops(hark_connect):
    a_call_in_flight_is_answered_when_the_appliance_drops([hark_connect])


def test_it_presents_the_token_pairing_gave(tmp_path, hark_connect):
    d = Daemon(tmp_path, {"auth": {"trust_loopback": False}}).start()
    try:
        host, port = d.tcp
        token = new_token(d, "laptop", "listen,speak")
        paired = Bridge(f"{host}:{port}", [hark_connect], ["--token", token])
        paired.send(INIT)
        assert paired.recv()["result"]["serverInfo"]["name"] == "hark"
        paired.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        paired.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "speak_text", "arguments": {"text": "Hello from the laptop.", "wait": True}}})
        said = paired.recv(30)
        assert said["result"]["structuredContent"]["status"] == "spoken", said
        assert paired.close() == 0
        # A wrong token is an error naming the refusal, not a hang.
        wrong = Bridge(f"{host}:{port}", [hark_connect], ["--token", "hark_wrong"])
        wrong.send(INIT)
        reply = wrong.recv()
        assert reply["error"]["code"] == -32000 and "refused the token" in reply["error"]["message"], reply
        assert wrong.close() == 0
        # No token: the appliance says how to pair.
        unpaired = Bridge(f"{host}:{port}", [hark_connect])
        unpaired.send(INIT)
        assert unpaired.recv()["result"]["serverInfo"]["name"] == "hark"
        unpaired.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        unpaired.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "speak_text", "arguments": {"text": "Hi."}}})
        refused = unpaired.recv()
        assert refused["result"]["structuredContent"]["error"]["type"] == "NotPairedError", refused
        assert unpaired.close() == 0
    finally:
        assert d.stop() == 0
