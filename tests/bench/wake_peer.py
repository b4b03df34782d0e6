"""The peer for `hark-bench wake`: pymicro-features and pymicro-wakeword (what
Home Assistant's linux-voice-assistant runs) on the same files, 10 ms at a
time, with the daemon's rule after a detection (the model starts again and
nothing wakes for 1 s).

  wake_peer.py LIB MODELS_DIR FILE...

Prints one JSON line per file: its detections per word at each model's own
cutoff, and the seconds spent processing (reading the file excluded).
"""

import json
import sys
import time
import wave
from pathlib import Path

import numpy as np
from pymicro_features import MicroFrontend
from pymicro_wakeword import MicroWakeWord

CHUNK = 160
REFRACTORY = 16000


def main() -> None:
    lib, models = Path(sys.argv[1]), Path(sys.argv[2])
    manifests = sorted(models.glob("*.json"))
    for path in sys.argv[3:]:
        with wave.open(path) as w:
            audio = w.readframes(w.getnframes())
        # One front end for every model, as linux-voice-assistant runs them.
        models_ = [MicroWakeWord.from_config(m, libtensorflowlite_c_path=lib) for m in manifests]
        frontend = MicroFrontend()
        hits = [0] * len(models_)
        quiet_until = [0] * len(models_)
        started = time.perf_counter()
        for at in range(0, len(audio) - 2 * CHUNK + 1, 2 * CHUNK):
            out = frontend.process_samples(audio[at:at + 2 * CHUNK])
            if not out.features:
                continue
            features = np.array(out.features, dtype=np.float32).reshape(1, 1, 40)
            end = at // 2 + CHUNK
            for i, model in enumerate(models_):
                if model.process_streaming(features) and end >= quiet_until[i]:
                    hits[i] += 1
                    quiet_until[i] = end + REFRACTORY
                    model.reset()
        spent = time.perf_counter() - started
        counts = {m.stem: h for m, h in zip(manifests, hits)}
        print(json.dumps({"file": path, "detections": counts, "seconds": spent}), flush=True)


if __name__ == "__main__":
    main()
