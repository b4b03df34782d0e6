"""Draws `hark-bench soak --csv FILE`'s samples: resident memory (now and
peak) and open descriptors and threads against the cycle, as the PNG in
docs/reliability.md.

    python3 -m venv /tmp/plot && /tmp/plot/bin/pip install matplotlib==3.11.2
    /tmp/plot/bin/python tests/bench/plot_soak.py soak.csv docs/soak.png
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source, target):
    with open(source, newline="") as f:
        rows = list(csv.DictReader(f))
    cycle = [int(r["cycle"]) for r in rows]
    mib = lambda key: [int(r[key]) / 1024 for r in rows]  # noqa: E731
    fig, (memory, handles) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    memory.plot(cycle, mib("rss_kib"), label="resident (VmRSS)")
    memory.plot(cycle, mib("peak_kib"), label="peak (VmHWM)")
    memory.set_ylabel("MiB")
    memory.set_ylim(bottom=0)
    memory.legend(loc="lower right")
    memory.grid(alpha=0.3)
    handles.plot(cycle, [int(r["fds"]) for r in rows], label="open descriptors")
    handles.plot(cycle, [int(r["threads"]) for r in rows], label="threads")
    handles.set_ylim(bottom=0)
    handles.set_xlabel("cycle (listen, speak, converse, a message)")
    handles.legend(loc="lower right")
    handles.grid(alpha=0.3)
    minutes = float(rows[-1]["seconds"]) / 60
    fig.suptitle(f"hark soak: {len(rows)} cycles, {minutes:.0f} min, eight agents connected")
    fig.tight_layout()
    fig.savefig(target, dpi=100)


if __name__ == "__main__":
    main(*sys.argv[1:3])
