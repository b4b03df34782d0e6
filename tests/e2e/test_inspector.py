"""The MCP Inspector CLI (@modelcontextprotocol/inspector) over HTTP and over
socat as a stdio server."""

import json
import subprocess

import pytest

from harness import TOOLS, NODE_BIN


def inspector(tmp_path, *args) -> subprocess.CompletedProcess:
    node = NODE_BIN / "node"
    if not node.exists():
        pytest.fail("tests/node is not installed; run tests/setup.sh")
    return subprocess.run(
        [str(node), str(NODE_BIN / "mcp-inspector"), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": f"{NODE_BIN}:/usr/bin:/bin", "MCP_STORAGE_DIR": str(tmp_path), "HOME": str(tmp_path)},
    )


def targets(daemon):
    host, port = daemon.tcp
    return {
        "http": [daemon.url, "--transport", "http"],
        "socat": ["--transport", "stdio", "--", "socat", "STDIO", f"TCP:{host}:{port}"],
    }


@pytest.mark.parametrize("via", ["http", "socat"])
def test_tools_list(daemon, tmp_path, via):
    target = targets(daemon)[via]
    # The stdio target's command must come last.
    args = ["--method", "tools/list", "--format", "json", *target] if via == "socat" else [*target, "--method", "tools/list", "--format", "json"]
    out = inspector(tmp_path, *args)
    assert out.returncode == 0, out.stderr
    tools = json.loads(out.stdout)["result"]["tools"]
    assert [t["name"] for t in tools] == TOOLS
    assert "outputSchema" in tools[0]


@pytest.mark.parametrize("via", ["http", "socat"])
def test_tools_call(daemon, tmp_path, via):
    target = targets(daemon)[via]
    call = ["--method", "tools/call", "--tool-name", "get_status", "--format", "json"]
    args = [*call, *target] if via == "socat" else [*target, *call]
    out = inspector(tmp_path, *args)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)["result"]
    assert result["structuredContent"]["recording"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_unknown_tool(daemon, tmp_path):
    out = inspector(tmp_path, daemon.url, "--transport", "http", "--method", "tools/call", "--tool-name", "speak_text")
    assert out.returncode != 0
    assert "speak_text" in (out.stdout + out.stderr)


def test_the_troubleshooting_pages_inspector_steps_run_as_shown(daemon, tmp_path):
    """docs/troubleshooting.md's Inspector steps, as written, with the
    appliance's address replaced by this test's daemon."""
    import re
    import shlex

    from harness import HARK, REPO

    text = (REPO / "docs" / "troubleshooting.md").read_text()
    pinned = json.loads((REPO / "tests" / "node" / "package.json").read_text())["dependencies"]["@modelcontextprotocol/inspector"]
    steps = re.findall(r"^\s*npx @modelcontextprotocol/inspector@(\S+) (.*)$", text, re.M)
    assert len(steps) == 4, steps
    host, port = daemon.tcp
    outputs = []
    for version, line in steps:
        assert version == pinned, f"the page names {version}, the tests run {pinned}"
        line = line.replace("http://hark.local:7341/mcp", daemon.url)
        line = line.replace("-- hark connect hark.local", f"-- {HARK} connect {host}:{port}")
        args = shlex.split(line)
        assert args[0] == "--cli", line
        out = inspector(tmp_path, *args[1:])
        assert out.returncode == 0, (line, out.stderr)
        outputs.append(out.stdout)
    listed, status, spoken, bridged = outputs
    assert "speak_text" in listed and "speak_text" in bridged
    assert '"recording": false' in status
    assert '"status": "spoken"' in spoken
