"""Speech-to-text peers for `hark-bench stt`.

Runs whisper.cpp (through pywhispercpp) and faster-whisper on the bench's
clips (raw S16_LE, 16 kHz mono files named on the command line), with the
same thread count and beam width as Hark, and prints one JSON object on
stdout.

    stt_peers.py requirements
        The pinned packages, one a line (the bench pip-installs them into
        tests/bench/.venv-stt, which it creates).
    stt_peers.py check
        Exit status 0 when every pinned package is installed at its version.
    stt_peers.py bench --ggml FILE --ct2 DIR --threads 2 --beam 5 --runs 5 CLIP...
        {"versions": {...},
         "peers": [{"name": ..., "error": null or why it did not run,
                    "load_ms": n,
                    "clips": [{"times_ms": [n, ...], "text": ...}, ...]}]}
        Each peer loads its model once, transcribes each clip once unmeasured
        (warm-up), then --runs times measured. The time is the call alone:
        the samples are already in memory as float32.
    stt_peers.py serve --peer NAME --ggml FILE --ct2 DIR --threads 2 --beam 5
        Loads one peer, prints {"ready": true, "load_ms": n}, then for each
        clip path read from stdin (one a line) transcribes it once and prints
        {"ms": n, "text": ...} (or {"error": ...}): for `hark-bench turn`,
        which asks in turn with the daemons it measures.
    stt_peers.py memory --peer NAME --ggml FILE --ct2 DIR --threads 2 --beam 5 CLIP
        {"rss_start_kb": n, "rss_loaded_kb": n, "peak_rss_kb": n, "text": ...}
        Meant for a fresh process: loads one peer's model, transcribes the
        clip once and reports VmHWM (peak RSS) from /proc/self/status.

The peers (pinned in REQUIREMENTS):
- pywhispercpp: whisper.cpp's C API through pybind11, the PyPI wheel (it
  bundles its own whisper.cpp and ggml build). Loads the same q8_0 ggml file
  Hark loads; beam search with `beam_size`, `n_threads`, language `en`,
  `no_context`, default audio context (the full 1500 frames); once with
  whisper.cpp's default context parameters (flash attention on) and once
  with flash attention off, as whisper-rs 0.16's defaults load it in Hark.
- faster-whisper: CTranslate2 on the CTranslate2 tiny.en folder Hark imports
  from, `compute_type="int8"`, `cpu_threads`, `beam_size`, language `en`,
  no VAD filter.
"""

import argparse
import importlib.metadata
import json
import os
import sys
import time
from array import array

import pins  # tests/bench/pins.py, beside this script

RATE = 16_000

REQUIREMENTS = [
    "pywhispercpp==1.5.1",
    "faster-whisper==1.2.1",
    "ctranslate2==4.8.5",
    "numpy==2.4.6",
]

PEERS = [
    "whisper.cpp (pywhispercpp)",
    "whisper.cpp (pywhispercpp), flash attention off",
    "faster-whisper",
]


def status_kb(field):
    """A `kB` field of /proc/self/status (VmRSS, VmHWM)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def read_clip(path):
    import numpy as np  # pylint: disable=import-outside-toplevel

    samples = array("h")
    with open(path, "rb") as f:
        samples.frombytes(f.read())
    if sys.byteorder != "little":
        samples.byteswap()
    return np.asarray(samples, dtype=np.float32) / 32768.0


class WhisperCpp:
    name = PEERS[0]
    # whisper.cpp's default context parameters (flash attention on).
    context = None

    def __init__(self, args):
        from pywhispercpp.model import Model  # pylint: disable=import-outside-toplevel

        self.model = Model(
            args.ggml,
            context_params=self.context,
            params_sampling_strategy=1,  # beam search
            redirect_whispercpp_logs_to=None,
            n_threads=args.threads,
            beam_search={"beam_size": args.beam, "patience": -1.0},
            language="en",
            no_context=True,
            print_progress=False,
            print_realtime=False,
            print_timestamps=False,
        )

    def transcribe(self, audio):
        segments = self.model.transcribe(audio)
        return " ".join(s.text.strip() for s in segments if s.text.strip())


class WhisperCppNoFlash(WhisperCpp):
    """As Hark loads it: whisper-rs 0.16 turns flash attention off."""

    name = PEERS[1]
    context = {"flash_attn": False}


class FasterWhisper:
    name = PEERS[2]

    def __init__(self, args):
        from faster_whisper import WhisperModel  # pylint: disable=import-outside-toplevel

        self.beam = args.beam
        self.model = WhisperModel(
            args.ct2,
            device="cpu",
            compute_type="int8",
            cpu_threads=args.threads,
            num_workers=1,
        )

    def transcribe(self, audio):
        segments, _ = self.model.transcribe(
            audio, language="en", beam_size=self.beam, vad_filter=False
        )
        # The segments are a generator: decoding happens while it is read.
        return " ".join(s.text.strip() for s in segments if s.text.strip())


def peer_class(name):
    return {p.name: p for p in (WhisperCpp, WhisperCppNoFlash, FasterWhisper)}[name]


def versions():
    out = {"python": sys.version.split()[0]}
    for package in ("pywhispercpp", "faster-whisper", "ctranslate2", "numpy"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    try:
        import _pywhispercpp as pw  # pylint: disable=import-outside-toplevel

        out["pywhispercpp system_info"] = pw.whisper_print_system_info().strip()
    except Exception as e:  # pylint: disable=broad-except
        out["pywhispercpp system_info"] = f"unavailable: {e}"
    return out


def bench(args):
    clips = [read_clip(p) for p in args.clips]
    peers = []
    for cls in (WhisperCpp, WhisperCppNoFlash, FasterWhisper):
        entry = {"name": cls.name, "error": None, "load_ms": None, "clips": []}
        peers.append(entry)
        try:
            started = time.perf_counter()
            peer = cls(args)
            entry["load_ms"] = (time.perf_counter() - started) * 1000
            for i, audio in enumerate(clips):
                print(f"[stt_peers] {cls.name}: clip {i + 1} of {len(clips)}", file=sys.stderr)
                text = peer.transcribe(audio)  # warm-up
                times = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    text = peer.transcribe(audio)
                    times.append((time.perf_counter() - started) * 1000)
                entry["clips"].append({"times_ms": times, "text": text})
            del peer
        except Exception as e:  # pylint: disable=broad-except
            entry["error"] = f"{type(e).__name__}: {e}"
    return {"versions": versions(), "peers": peers}


def memory(args):
    start = status_kb("VmRSS")
    import numpy  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    audio = read_clip(args.clips[0])
    peer = peer_class(args.peer)(args)
    loaded = status_kb("VmRSS")
    text = peer.transcribe(audio)
    return {
        "rss_start_kb": start,
        "rss_loaded_kb": loaded,
        "peak_rss_kb": status_kb("VmHWM"),
        "text": text,
    }


def serve(args):
    started = time.perf_counter()
    peer = peer_class(args.peer)(args)
    print(json.dumps({"ready": True, "load_ms": (time.perf_counter() - started) * 1000}), flush=True)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            audio = read_clip(path)
            started = time.perf_counter()
            text = peer.transcribe(audio)
            answer = {"ms": (time.perf_counter() - started) * 1000, "text": text}
        except Exception as e:  # pylint: disable=broad-except
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("mode", choices=["requirements", "check", "bench", "memory", "serve"])
    parser.add_argument("--ggml", help="whisper.cpp ggml model file (pywhispercpp)")
    parser.add_argument("--ct2", help="CTranslate2 model folder (faster-whisper)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--peer", choices=PEERS, help="memory, serve: the peer to load")
    parser.add_argument("clips", nargs="*")
    args = parser.parse_intermixed_args()

    if args.mode == "requirements":
        print("\n".join(REQUIREMENTS))
        return 0
    if args.mode == "check":
        return pins.installed(REQUIREMENTS)
    # Neither peer may use more threads than it is given (OpenMP, BLAS).
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if args.mode == "serve":
        if not args.peer:
            parser.error("serve: no --peer")
        serve(args)
        return 0
    if not args.clips:
        parser.error("no clips")
    result = bench(args) if args.mode == "bench" else memory(args)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
