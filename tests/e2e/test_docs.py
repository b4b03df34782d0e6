"""docs/mcp.md must describe exactly the tools and resources the daemon
serves: the same names, the same arguments, the same result fields."""

import re
from pathlib import Path

from harness import HARK, REPO, LineClient

DOC = REPO / "docs" / "mcp.md"


def documented_tools(text: str) -> dict[str, dict[str, set[str]]]:
    tools_section = text.split("\n## Tools\n", 1)[1].split("\n## ", 1)[0]
    tools = {}
    for block in re.split(r"\n### ", tools_section)[1:]:
        name = re.match(r"`([^`]+)`", block).group(1)
        tables = {"argument": set(), "field": set()}
        current = None
        for line in block.splitlines():
            header = re.match(r"\|\s*(argument|field)\s*\|", line)
            if header:
                current = header.group(1)
                continue
            row = re.match(r"\|\s*`([^`]+)`\s*\|", line)
            if row and current:
                tables[current].add(row.group(1))
            elif not line.startswith("|"):
                current = None
        tools[name] = tables
    return tools


def test_reference_matches_tools_list(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()
    served = c.request("tools/list", id=1)["result"]["tools"]
    documented = documented_tools(DOC.read_text())
    assert set(documented) == {t["name"] for t in served}
    for tool in served:
        doc = documented[tool["name"]]
        assert doc["argument"] == set(tool["inputSchema"].get("properties", {})), tool["name"]
        assert doc["field"] == set(tool["outputSchema"]["properties"]), tool["name"]


def documented_resources(text: str) -> set[str]:
    section = text.split("\n## Resources\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^### `([^`]+)`", section, re.M))


def test_resources_match_resources_list(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()
    served = c.request("resources/list", id=1)["result"]["resources"]
    assert documented_resources(DOC.read_text()) == {r["uri"] for r in served}
    # An unknown one is a clear error naming what is served.
    reply = c.request("resources/read", {"uri": "hark://nothing"}, id=2)
    assert reply["error"]["code"] == -32002 and "hark://inbox" in reply["error"]["message"], reply
    reply = c.request("resources/subscribe", {"uri": "file:///etc/passwd"}, id=3)
    assert reply["error"]["code"] == -32002, reply
    c.close()


def test_documented_limits_match_the_defaults():
    out = __import__("subprocess").run(
        [str(HARK), "config", "check", "/dev/null"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    text = DOC.read_text()
    for key, doc_value in [("max_connections", "32"), ("idle_timeout_secs", "3600")]:
        assert re.search(rf"^{key} = {doc_value}$", out.stdout, re.M), key
        assert re.search(rf"`mcp\.{key}` \| {doc_value}", text), key
    assert re.search(r"^max_message_bytes = 16777216$", out.stdout, re.M)
    assert "`mcp.max_message_bytes` | 16 MiB" in text


def test_readme_configuration_example_is_valid(tmp_path):
    import subprocess

    readme = (REPO / "README.md").read_text()
    # The example of the "Configuration" section (others show one section).
    configuration = readme[readme.index("## Configuration"):]
    block = re.search(r"```toml\n(.*?)```", configuration, re.S)
    assert block, "the README shows a configuration example"
    example = tmp_path / "example.toml"
    example.write_text(block.group(1))
    out = subprocess.run([str(HARK), "config", "check", str(example)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "beamform = true" in out.stdout


def test_every_configuration_block_in_the_readme_is_valid(tmp_path):
    import subprocess

    # Hark's own; another program's (```toml codex) has a word after the
    # language.
    blocks = re.findall(r"```toml\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert len(blocks) >= 2, "the configuration example and Home Assistant's"
    for n, block in enumerate(blocks):
        example = tmp_path / f"block-{n}.toml"
        example.write_text(block)
        out = subprocess.run([str(HARK), "config", "check", str(example)], capture_output=True, text=True)
        assert out.returncode == 0, (block, out.stderr)


TROUBLE = REPO / "docs" / "troubleshooting.md"


def configuration_keys() -> set[str]:
    """Every key of the configuration, as `section.sub.key`."""
    import subprocess

    out = subprocess.run([str(HARK), "config", "check", "/dev/null"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    keys, section = set(), ""
    for line in out.stdout.splitlines():
        if m := re.match(r"^\[([a-z_.-]+)\]$", line):
            section = m.group(1)
            keys.add(section)
        elif m := re.match(r"^([a-z_]+) = ", line):
            keys.add(f"{section}.{m.group(1)}" if section else m.group(1))
    return keys


def test_troubleshooting_names_only_real_commands_and_settings(tmp_path):
    import subprocess

    text = TROUBLE.read_text()
    help_text = subprocess.run([str(HARK), "--help"], capture_output=True, text=True).stdout
    commands = set(re.findall(r"^  ([a-z]+)\s", help_text, re.M))
    named = set(re.findall(r"`hark ([a-z]+)", text)) | set(re.findall(r"-- hark ([a-z]+)", text))
    assert named and named <= commands, named - commands
    keys = configuration_keys()
    sections = {k.split(".")[0] for k in keys}
    settings = {k for k in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", text) if k.split(".")[0] in sections}
    assert {"audio.vad.sensitivity", "mcp.allowed_hosts"} <= settings, settings
    assert settings <= keys, settings - keys
    for n, block in enumerate(re.findall(r"```toml\n(.*?)```", text, re.S)):
        example = tmp_path / f"block-{n}.toml"
        example.write_text(block)
        out = subprocess.run([str(HARK), "config", "check", str(example)], capture_output=True, text=True)
        assert out.returncode == 0, (block, out.stderr)
