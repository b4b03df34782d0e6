"""The official MCP conformance suite (@modelcontextprotocol/conformance)
against /mcp: every scenario that needs no fixture tools."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness import NODE_BIN

HERE = Path(__file__).parent
EXPECTED = HERE / "conformance-expected-failures.yml"

SCENARIOS = [
    # (scenario, spec version)
    ("server-initialize", "2025-11-25"),
    ("ping", "2025-11-25"),
    ("tools-list", "2025-11-25"),
    ("server-session-lifecycle", "2025-11-25"),
    ("dns-rebinding-protection", "2025-11-25"),
    ("server-sse-multiple-streams", "2025-11-25"),
    ("tools-list", "2026-07-28"),
    ("dns-rebinding-protection", "2026-07-28"),
    ("server-stateless", "2026-07-28"),
    ("http-header-validation", "2026-07-28"),
    ("caching", "2026-07-28"),
    ("sep-2164-resource-not-found", "2026-07-28"),
    ("input-required-result-unsupported-methods", "2026-07-28"),
]


def expected_failures() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in EXPECTED.read_text().splitlines():
        m = re.match(r"\s*-\s*([\w-]+):([\w-]+)", line)
        if m:
            out.setdefault(m.group(1), set()).add(m.group(2))
    return out


@pytest.mark.parametrize("scenario,version", SCENARIOS, ids=[f"{s}@{v}" for s, v in SCENARIOS])
def test_conformance(daemon, tmp_path, scenario, version):
    node = NODE_BIN / "node"
    if not node.exists():
        pytest.fail("tests/node is not installed; run tests/setup.sh")
    out = subprocess.run(
        [str(node), str(NODE_BIN / "conformance"), "server", "--url", daemon.url, "--scenario", scenario,
         "--spec-version", version, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    reports = list(tmp_path.glob("*/checks.json"))
    assert reports, f"no report written:\n{out.stdout}\n{out.stderr}"
    checks = json.loads(reports[0].read_text())
    assert checks, "the scenario ran no checks"
    failed = {c["id"] for c in checks if c["status"] == "FAILURE"}
    passed = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    expected = expected_failures().get(scenario, set())
    unexpected = failed - expected
    assert not unexpected, "\n".join(
        f"{c['id']}: {c.get('errorMessage') or c['description']}" for c in checks if c["id"] in unexpected
    )
    stale = expected & passed
    assert not stale, f"expected failures now pass; remove them from {EXPECTED.name}: {stale}"
    assert passed, "no check passed"
