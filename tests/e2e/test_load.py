"""Load: 64 agents on TCP, HTTP, WebSocket and HTTPS polling get_status and
list_captures while one agent listens to recorded people and another
speaks (`hark-bench stress`, built with the workspace). The bench fails
when a call fails, capture overruns, playback underruns or a listen loses
its recording; its round trips (in a release build) are in
docs/benchmarks.md, "Many agents at once"."""

import subprocess

import pytest

from harness import HARK, REPO

BENCH = REPO / "target" / "debug" / "hark-bench"


@pytest.mark.skipif(not BENCH.exists(), reason="hark-bench is built by `cargo build --workspace --all-targets`")
def test_64_agents_on_every_transport_while_the_room_listens_and_speaks():
    run = subprocess.run(
        [str(BENCH), "stress", "--hark", str(HARK), "--clients", "64", "--seconds", "20"],
        capture_output=True, text=True, timeout=300,
    )
    print(run.stdout)
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    assert "capture overruns 0, playback underruns 0" in run.stdout, run.stdout
    for transport in ("tcp", "http", "websocket", "https"):
        for tool in ("get_status", "list_captures"):
            assert f"| {transport} | `{tool}` |" in run.stdout, run.stdout
