"""`hark-connect`, the stdio bridge packaged for PyPI (appliance/bridge/python),
as a user on macOS or Windows installs it: built into a wheel, or
downloaded from the appliance, installed into a fresh virtual environment
with nothing else, and started by MCP
clients as a stdio server. The same checks as `hark connect`'s
(test_stdio.py): the official SDK through it, an unreachable appliance,
a restart survived, a call in flight answered when the appliance drops,
and a token presented for an appliance that trusts no one."""

import io
import shutil
import subprocess
import sys
import zipfile

import httpx

import anyio
import pytest
from mcp import Client, StdioServerParameters

from harness import REPO, TOOLS, Daemon, new_token
from test_stdio import (INIT, Bridge, a_call_in_flight_is_answered_when_the_appliance_drops,
                        a_restart_is_survived, unreachable_is_an_error_not_a_hang)

PACKAGE = REPO / "appliance" / "bridge" / "python"


def wheel_built(tmp):
    """The wheel as pip builds it from the sources."""
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
    return str(wheels[0])


@pytest.fixture(scope="module", params=["built", "served"])
def hark_connect(request, tmp_path_factory):
    """The `hark-connect` command of a fresh venv with only the wheel in it:
    built by pip from the sources, or served by the appliance itself (what
    a Mac installs it from: `pipx install http://hark.local:7341/…`)."""
    tmp = tmp_path_factory.mktemp("bridge")
    if request.param == "built":
        wheel = wheel_built(tmp)
    else:
        appliance = Daemon(tmp / "appliance", {"auth": {"trust_loopback": False}}).start()
        try:
            base = f"http://127.0.0.1:{appliance.http[1]}/hark-connect/"
            # Named wrongly: where it is instead. No token needed for it.
            r = httpx.get(base + "hark_connect.whl", timeout=10)
            assert r.status_code == 404 and "hark_connect-0.1.0-py3-none-any.whl" in r.text, r.text
            wheel = base + "hark_connect-0.1.0-py3-none-any.whl"
            r = httpx.get(wheel, timeout=10)
            assert r.status_code == 200 and r.headers["content-type"] == "application/zip", r.headers
            # The same package as the sources build.
            with zipfile.ZipFile(io.BytesIO(r.content)) as served:
                for name in ["hark_connect/__init__.py", "hark_connect/__main__.py"]:
                    assert served.read(name) == (PACKAGE / "src" / name).read_bytes(), name
            venv = tmp / "venv"
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
            # pip installs it from the URL, checking RECORD's hashes.
            installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                                        "install", "--no-index", "--no-deps", wheel],
                                       capture_output=True, text=True, timeout=300)
            assert installed.returncode == 0, installed.stderr
        finally:
            assert appliance.stop() == 0
        command = venv / "bin" / "hark-connect"
        assert command.exists()
        return str(command)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    # The wheel is pure Python with no dependencies: pip is needed only to
    # install it, so the test's own pip installs it into the new venv.
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(tmp / "venv" / "bin" / "python"),
                                "install", "--no-index", "--no-deps", wheel],
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
