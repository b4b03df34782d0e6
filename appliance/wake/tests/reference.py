"""The reference the wake word crate is compared with: pymicro-features (the
micro frontend the models were trained on) and pymicro-wakeword (their
detector), run on the same 16 kHz audio the Rust test reads.

    reference.py OUT_DIR MODELS_DIR CLIP...

CLIP is a WAV file, or `say:TEXT` for espeak-ng speaking TEXT (a synthetic
smoke clip). Writes OUT_DIR/<n>.raw (16-bit mono 16 kHz, one second of
silence after the clip) and prints one JSON object: per clip its name, raw
file, features (40 integers a frame) and per model the windows over the
cutoff and the highest window mean.
"""

import io
import json
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
from pymicro_features import MicroFrontend
from pymicro_wakeword import MicroWakeWord

SCALE = 0.0390625


def audio_of(clip: str) -> np.ndarray:
    if clip.startswith("say:"):
        data = subprocess.run(
            ["espeak-ng", "-v", "en-us", "--stdout", clip[4:]],
            check=True,
            capture_output=True,
        ).stdout
        source = io.BytesIO(data)
    else:
        source = clip
    with wave.open(source, "rb") as w:
        rate, channels = w.getframerate(), w.getnchannels()
        frames = w.readframes(w.getnframes())
        # espeak-ng's stream header leaves the length unset.
        if not frames and not isinstance(source, str):
            source.seek(44)
            frames = source.read()
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float64)
    samples = samples.reshape(-1, channels).mean(axis=1)
    if rate != 16000:
        at = np.arange(0, len(samples) * 16000 // rate) * rate / 16000
        samples = np.interp(at, np.arange(len(samples)), samples)
    samples = np.concatenate([samples, np.zeros(16000)])
    return np.clip(np.round(samples), -32768, 32767).astype("<i2")


def main() -> None:
    out_dir, models_dir, clips = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    manifests = sorted(models_dir.glob("*.json"))
    lib = models_dir.parent / "lib" / "libtensorflowlite_c.so"
    results = []
    for n, clip in enumerate(clips):
        audio = audio_of(clip)
        raw = out_dir / f"{n}.raw"
        raw.write_bytes(audio.tobytes())
        frontend = MicroFrontend()
        data, features, at = audio.tobytes(), [], 0
        while at + 320 <= len(data):
            out = frontend.process_samples(data[at : at + 320])
            at += out.samples_read * 2
            if out.features:
                features.append(out.features)
        models = {}
        for manifest in manifests:
            model = MicroWakeWord.from_config(manifest, libtensorflowlite_c_path=lib)
            hits, best = 0, 0.0
            for frame in features:
                mean = model.process_streaming_prob(
                    np.array(frame, dtype=np.float32).reshape(1, 1, 40)
                )
                if mean is not None and len(model._probabilities) >= model.sliding_window_size:
                    best = max(best, mean)
                    hits += mean > model.probability_cutoff
            models[manifest.stem] = {"hits": int(hits), "best": float(best)}
        results.append(
            {
                "clip": clip,
                "raw": str(raw),
                "features": [[round(v / SCALE) for v in f] for f in features],
                "models": models,
            }
        )
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
