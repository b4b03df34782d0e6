"""Text-to-speech peers for `hark-bench tts`: piper-tts from PyPI.

Each piper-tts release lives in its own venv (they are the same `piper`
package), which the bench creates under tests/bench/.venv-tts; this script
runs inside one of them and measures whichever release is installed there.

    tts_peers.py requirements --peer 1.2.0
        The pinned packages of that peer, one a line.
    tts_peers.py check --peer 1.2.0
        Exit status 0 when every pinned package is installed at its version.
    tts_peers.py serve --model ONNX --config JSON --threads 1 --texts FILE
        FILE is a JSON list of texts. The voice loads once, then one line:
        {"name": ..., "versions": {...}, "sample_rate": n,
         "texts": [{"sentences": n, "ids": [[...], ...]}]}
        with the ids piper feeds the model, per sentence (worked out before
        any timing). Then, for each line `I` read on stdin, text I is spoken
        once and one line is printed:
        {"total_ms": n, "first_ms": n, "samples": n}
        The bench drives the peers and Hark in turns, run by run, so that
        whatever else the machine does falls on all of them alike. A run is
        text in to all audio out: phonemes, ids, the model for every
        sentence, and piper's own normalisation to its output format.
        `first_ms` is when the first sentence's audio came out of piper's
        per-sentence generator. End of input ends the process.
    tts_peers.py memory --model ONNX --config JSON --threads 1 --text TEXT
        {"rss_start_kb", "rss_runtime_kb", "rss_loaded_kb", "rss_spoke_kb",
         "peak_rss_kb", "rss_two_voices_kb", "peak_two_voices_kb", "samples"}
        Meant for a fresh process: the interpreter alone, then with numpy,
        onnxruntime and piper imported, then with the voice loaded; RSS and
        the peak (VmHWM) after speaking TEXT; then a second session of the
        same voice loaded (RSS), and the peak after it spoke TEXT too.

The session: piper-tts's PiperVoice.load makes an InferenceSession with
default SessionOptions (ONNX Runtime's intra-op threads: one per core) and,
in 1.2.0, no way to change them. So this script builds the session itself,
exactly as load does but with `intra_op_num_threads` set to --threads and
intra-op spinning off (as Hark's session has it), and hands it to the
PiperVoice dataclass with the voice's PiperConfig. Everything after that is
piper-tts's own code: PiperVoice.synthesize_stream_raw (1.2.0) and
PiperVoice.synthesize (1.8.0), one chunk per sentence.

The peers (pinned in PEERS):
- piper-tts 1.2.0 with piper-phonemize 1.1.0: espeak-ng 1.51 phonemes, as
  the voices were trained and as Hark makes them. Its Python leaves out the
  pad after `^` (one id per sentence less than Hark and piper's training).
- piper-tts 1.8.0: bundles a newer espeak-ng (1.52), whose English
  dictionary gives some words other phonemes; its ids are piper's full
  `^ _ p _ ... $`.
Both on onnxruntime 1.31.1, the ONNX Runtime Hark loads.
"""

import argparse
import importlib.metadata
import json
import os
import re
import sys
import time

import pins  # tests/bench/pins.py, beside this script

PEERS = {
    "1.2.0": [
        "piper-tts==1.2.0",
        "piper-phonemize==1.1.0",
        "onnxruntime==1.31.1",
        "numpy==2.4.6",
    ],
    "1.8.0": [
        "piper-tts==1.8.0",
        "onnxruntime==1.31.1",
        "numpy==2.4.6",
    ],
}


def status_kb(field):
    """A `kB` field of /proc/self/status (VmRSS, VmHWM)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def piper_version():
    return importlib.metadata.version("piper-tts")


def is_1_2():
    return piper_version().startswith("1.2.")


def load_voice(args):
    """piper's PiperVoice with a session on --threads intra-op threads."""
    # pylint: disable=import-outside-toplevel
    import onnxruntime
    from piper.config import PiperConfig
    from piper.voice import PiperVoice

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(
        str(args.model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    with open(args.config, encoding="utf-8") as f:
        config = PiperConfig.from_dict(json.load(f))
    return PiperVoice(session=session, config=config)


def chunks(voice, text):
    """Samples per sentence, as piper's generator hands each sentence out."""
    if is_1_2():
        # 16-bit mono bytes, normalised by piper (audio_float_to_int16).
        for raw in voice.synthesize_stream_raw(text):
            yield len(raw) // 2
    else:
        # AudioChunk: float32, normalised and clipped by piper.
        for chunk in voice.synthesize(text):
            yield len(chunk.audio_float_array)


def speak(voice, text):
    started = time.perf_counter()
    first = None
    samples = 0
    for n in chunks(voice, text):
        if first is None:
            first = time.perf_counter() - started
        samples += n
    total = time.perf_counter() - started
    if first is None:
        first = total
    return {"total_ms": total * 1000, "first_ms": first * 1000, "samples": samples}


def sentence_ids(voice, text):
    phonemes = voice.phonemize(text)
    if not is_1_2():
        # 1.8.0's synthesize skips empty sentences.
        phonemes = [p for p in phonemes if p]
    return [list(voice.phonemes_to_ids(p)) for p in phonemes]


def espeak_version():
    """The espeak-ng piper phonemizes with, as far as it can be told."""
    if is_1_2():
        return "1.51 (piper-phonemize 1.1.0's fork)"
    # piper-tts 1.8 bundles espeak-ng in its espeakbridge extension, which
    # has no version call; the library carries its version string.
    import piper  # pylint: disable=import-outside-toplevel

    for name in os.listdir(os.path.dirname(piper.__file__)):
        if name.startswith("espeakbridge") and name.endswith(".so"):
            with open(os.path.join(os.path.dirname(piper.__file__), name), "rb") as f:
                found = re.search(rb"\b1\.5\d\.\d+(?:\.\d+)?\b", f.read())
            if found:
                return found.group().decode() + " (bundled)"
    return "unknown (bundled)"


def versions():
    out = {"python": sys.version.split()[0]}
    for package in ("piper-tts", "piper-phonemize", "onnxruntime", "numpy"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    out["espeak-ng"] = espeak_version()
    return out


def serve(args):
    """The voice loaded, then text I spoken for each line I on stdin."""
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    voice = load_voice(args)
    hello = {
        "name": f"piper-tts {piper_version()}",
        "versions": versions(),
        "sample_rate": voice.config.sample_rate,
        "texts": [],
    }
    for text in texts:
        ids = sentence_ids(voice, text)
        hello["texts"].append({"sentences": len(ids), "ids": ids})
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        index = int(line)
        if not 0 <= index < len(texts):
            print(f"[tts_peers] no text {index}", file=sys.stderr)
            return 2
        print(json.dumps(speak(voice, texts[index])), flush=True)
    return 0


def memory(args):
    start = status_kb("VmRSS")
    # pylint: disable=import-outside-toplevel,unused-import
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401
    import piper.voice  # noqa: F401

    runtime = status_kb("VmRSS")
    voice = load_voice(args)
    loaded = status_kb("VmRSS")
    run = speak(voice, args.text)
    spoke = status_kb("VmRSS")
    peak = status_kb("VmHWM")
    second = load_voice(args)
    two = status_kb("VmRSS")
    speak(second, args.text)
    return {
        "rss_start_kb": start,
        "rss_runtime_kb": runtime,
        "rss_loaded_kb": loaded,
        "rss_spoke_kb": spoke,
        "peak_rss_kb": peak,
        "rss_two_voices_kb": two,
        "peak_two_voices_kb": status_kb("VmHWM"),
        "samples": run["samples"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("mode", choices=["requirements", "check", "serve", "memory"])
    parser.add_argument("--peer", choices=sorted(PEERS), help="requirements, check: which piper-tts")
    parser.add_argument("--model", help="the voice's .onnx")
    parser.add_argument("--config", help="the voice's .onnx.json")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--texts", help="serve: JSON list of texts")
    parser.add_argument("--text", help="memory: the text to speak")
    args = parser.parse_args()

    if args.mode in ("requirements", "check"):
        if not args.peer:
            parser.error("--peer is required")
        if args.mode == "requirements":
            print("\n".join(PEERS[args.peer]))
            return 0
        return pins.installed(PEERS[args.peer])
    if not args.model or not args.config:
        parser.error("--model and --config are required")
    if args.mode == "serve" and not args.texts:
        parser.error("serve needs --texts")
    if args.mode == "memory" and args.text is None:
        parser.error("memory needs --text")
    # No OpenMP or BLAS threads beyond the ones asked for.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(args.threads, 1)))
    if args.mode == "serve":
        return serve(args)
    json.dump(memory(args), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
