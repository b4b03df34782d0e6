"""A short soak: `hark-bench soak` (built with the workspace) for a few
cycles of listen, speak, converse and a message with eight agents
connected, so the harness behind docs/reliability.md's long run keeps
working. It fails when a step fails, descriptors or threads grow past the
warm-up's, or the history misses an utterance."""

import csv
import subprocess

import pytest

from harness import HARK, REPO

BENCH = REPO / "target" / "debug" / "hark-bench"


@pytest.mark.skipif(not BENCH.exists(), reason="hark-bench is built by `cargo build --workspace --all-targets`")
def test_a_few_cycles_account_for_every_utterance(tmp_path):
    samples = tmp_path / "soak.csv"
    run = subprocess.run(
        [str(BENCH), "soak", "--hark", str(HARK), "--cycles", "4", "--csv", str(samples)],
        capture_output=True, text=True, timeout=600,
    )
    print(run.stdout)
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    assert "history: 8 heard, 4 messages, 8 spoken; the cycles made 8 heard, 4 messages, 8 spoken" in run.stdout
    with open(samples, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["cycle"]) for r in rows] == [0, 1, 2, 3]
    assert all(int(r["rss_kib"]) > 0 and int(r["fds"]) > 0 and int(r["threads"]) > 0 for r in rows)
