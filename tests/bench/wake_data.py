"""Builds the audio `hark-bench wake` measures, from Debian packages and
espeak-ng (tests/bench/wake-data runs it; docs/benchmarks.md, the wake word).

  wake_data.py ROOT OUT

ROOT holds the packages unpacked (dpkg-deb -x); OUT gets

  negatives/SOURCE-NN.wav   long 16 kHz mono recordings nobody says a wake
                            word in, cut in 20-minute parts
  noise/music.wav           the bed the noisy wake words are mixed into
  positives/WORD/*.wav      each wake word said by espeak-ng in many voices,
                            speeds, distances (a simulated room) and noise
  manifest.json             every file, with the source, licence and (for a
                            wake word) the sample where the word ends

Recorded people saying a wake word are in no package: the positives are a
synthetic voice, and say so in every figure made of them.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

RATE = 16000
ROOT, OUT = Path(sys.argv[1]), Path(sys.argv[2])

# Where each source's audio is in its package, what it is, and its licence.
SOURCES = {
    "fotaq": ("English dialogue, many actors (Flight of the Amazon Queen's speech)",
              "flight-of-the-amazon-queen 1.0.0-9; freeware licence, evaluation only"),
    "fillets-cs": ("Czech dialogue, several actors (Fish Fillets NG)",
                   "fillets-ng-data-cs 1.0.1-1.1; GPL-2+"),
    "asterisk-en": ("English telephone prompts, one speaker (8 kHz)",
                    "asterisk-core-sounds-en-wav 1.6.1-1; CC-BY-SA-3.0"),
    "codec2": ("noisy amateur-radio and other speech recordings",
               "codec2-examples 1.0.5-1; LGPL-2.1"),
    "music": ("music on hold: five tracks",
              "asterisk-moh-opsound-wav 2.03-1.1; CC-BY-SA-3.0"),
}

WORDS = {
    "okay_nabu": "Okay Nabu.",
    "hey_jarvis": "Hey Jarvis.",
    "hey_mycroft": "Hey Mycroft.",
    "alexa": "Alexa.",
}
# espeak-ng accents and voice variants (pitch, formants, breathiness).
VOICES = [
    ("en-us", ""), ("en-us", "+f2"), ("en-us", "+m3"), ("en-gb", ""), ("en-gb", "+f4"),
    ("en-gb-scotland", ""), ("en-gb-scotland", "+f1"), ("en-gb-x-rp", "+m7"),
    ("en-gb-x-gbclan", ""), ("en-gb-x-gbcwmd", "+f5"), ("en-029", ""), ("en-029", "+m1"),
    ("en-us-nyc", "+klatt"),
]
SPEEDS = [130, 170, 220]  # words a minute (espeak-ng's default: 175)


def decode(files, out_pattern, seconds=1200):
    """Decodes `files` in order into 16 kHz mono 16-bit WAV parts."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as lst:
        for f in files:
            lst.write("file '" + str(f).replace("'", "'\\''") + "'\n")
    subprocess.run(["ffmpeg", "-v", "fatal", "-y", "-f", "concat", "-safe", "0", "-i", lst.name,
                    "-ac", "1", "-ar", str(RATE), "-sample_fmt", "s16", "-f", "segment",
                    "-segment_time", str(seconds), str(out_pattern)], check=True)
    Path(lst.name).unlink()


def fotaq_clips(work):
    """The speech files inside the game's resource archive: each `NAME.SB`
    entry of its table is an MP3 (name, then big-endian offset and size)."""
    import re
    import struct

    data = (ROOT / "usr/share/scummvm/flight-of-the-amazon-queen/queen.1c").read_bytes()
    out = work / "fotaq"
    out.mkdir(exist_ok=True)
    files = []
    for m in re.finditer(rb"[0-9A-Z_]{1,8}\.SB\x00", data[:400000]):
        s = m.start()
        name = data[s:s + 12].split(b"\x00")[0].decode()
        offset, size = struct.unpack(">II", data[s + 13:s + 21])
        path = out / f"{name}.mp3"
        path.write_bytes(data[offset:offset + size])
        files.append(path)
    if len(files) < 6000:
        sys.exit(f"wake_data: only {len(files)} speech files in queen.1c (6745 expected)")
    return files


def read(path):
    import wave

    with wave.open(str(path)) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


def write(path, audio):
    import wave

    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())


def espeak(text, voice, speed, work):
    raw = work / "say.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), text], check=True)
    at16 = work / "say16.wav"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(raw), "-ac", "1", "-ar", str(RATE),
                    "-sample_fmt", "s16", str(at16)], check=True)
    audio = read(at16)
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[loud[0]:loud[-1] + 1]


def room(rng, rt60):
    """A simulated room's impulse response: the direct sound, then diffuse
    reverberation decaying 60 dB in `rt60` seconds, starting 5 ms later."""
    n = int(rt60 * RATE)
    t = np.arange(n) / RATE
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60) * 0.25
    tail[: int(0.005 * RATE)] = 0
    ir = tail
    ir[0] = 1.0
    return ir


def rms(x):
    return float(np.sqrt(np.mean(np.square(x)) + 1e-12))


def main():
    manifest = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        neg = OUT / "negatives"
        neg.mkdir(parents=True, exist_ok=True)
        share = ROOT / "usr/share"
        inputs = {
            "fotaq": fotaq_clips(work),
            "fillets-cs": sorted((share / "games/fillets-ng/sound").rglob("cs/*.ogg")),
            "asterisk-en": sorted((share / "asterisk/sounds").rglob("*.wav")),
            "codec2": sorted((share / "codec2/wav").glob("*.wav")),
            "music": sorted((share / "asterisk/moh").glob("*.wav")),
        }
        for source, files in inputs.items():
            if not files:
                sys.exit(f"wake_data: no audio for {source} under {ROOT}")
            decode(files, neg / f"{source}-%02d.wav")
        for part in sorted(neg.glob("*.wav")):
            source = part.stem.rsplit("-", 1)[0]
            what, licence = SOURCES[source]
            manifest.append({"file": str(part.relative_to(OUT)), "kind": "negative", "source": source,
                             "what": what, "licence": licence, "seconds": len(read(part)) / RATE})
        music = np.concatenate([read(p) for p in sorted(neg.glob("music-*.wav"))])
        write(OUT / "noise/music.wav", music)

        rng = np.random.default_rng(2026)
        # Each word: quiet room near the microphone; across a reverberant
        # room (RT60 0.6 s, 12 dB quieter); and that with music at 10 dB SNR.
        conditions = {"near": (None, 40.0, 1.0), "far": (0.6, 25.0, 0.25), "noisy": (0.6, 10.0, 0.25)}
        for word, text in WORDS.items():
            for accent, variant in VOICES:
                for speed in SPEEDS:
                    said = espeak(text, accent + variant, speed, work)
                    for cond, (rt60, snr, gain) in conditions.items():
                        x = said * gain
                        if rt60:
                            x = np.convolve(x, room(rng, rt60))[: len(said) + int(0.3 * RATE)]
                        lead, tail = int(1.0 * RATE), int(1.5 * RATE)
                        clip = np.concatenate([np.zeros(lead), x, np.zeros(tail)])
                        end = lead + len(said)
                        start = rng.integers(0, len(music) - len(clip))
                        bed = music[start:start + len(clip)]
                        clip = clip + bed * (rms(said * gain) / rms(bed)) * 10 ** (-snr / 20)
                        name = f"{accent}{variant.replace('+', '_')}-{speed}-{cond}.wav"
                        path = OUT / "positives" / word / name
                        write(path, clip)
                        manifest.append({"file": str(path.relative_to(OUT)), "kind": "positive",
                                         "word": word, "voice": accent + variant, "speed": speed,
                                         "condition": cond, "word_end": int(end),
                                         "source": "espeak-ng (synthetic)", "seconds": len(clip) / RATE})
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    negatives = sum(m["seconds"] for m in manifest if m["kind"] == "negative")
    positives = sum(1 for m in manifest if m["kind"] == "positive")
    print(f"wake_data: {negatives / 3600:.2f} h of negatives, {positives} wake word clips in {OUT}")


main()
