"""Home Assistant core itself (2024.3.3 from PyPI, the newest release for
this machine's Python 3.11: later ones need 3.12 or 3.13) uses Hark as its
voice services: its Wyoming integration is added by address as a user
adds it, and an Assist pipeline runs through Hark's wake word, speech to
text and text to speech (tests/e2e/ha/assist.py, in tests/.venv-ha)."""

import json
import subprocess
import wave

import numpy as np

from harness import REPO, heard, words
from test_wyoming import ON, clip, espeak, resample, run, transcribe

HA_PYTHON = REPO / "tests" / ".venv-ha" / "bin" / "python"
ASSIST = REPO / "tests" / "e2e" / "ha" / "assist.py"


def test_an_assist_pipeline_runs_through_hark_from_the_wake_word_to_the_reply(start_daemon, tmp_path):
    assert HA_PYTHON.exists(), f"{HA_PYTHON} is missing: bash tests/setup.sh installs Home Assistant core"
    d = start_daemon(ON)
    # The person says the wake word (espeak-ng: the plumbing; how well it
    # is heard is measured on the wake word benchmark), then a sentence
    # (a LibriVox reader).
    samples, text = clip("ps-librivox-0880")
    silence = lambda s: np.zeros(int(16000 * s), dtype=np.float32)
    stream = np.concatenate([silence(0.5), espeak(tmp_path, "Okay Nabu."), silence(0.7), samples, silence(1.5)])
    raw = tmp_path / "microphone.raw"
    (np.clip(stream, -1, 1) * 32767).astype("<i2").tofile(raw)
    reply = tmp_path / "reply.wav"
    host, port = d.wyoming
    done = subprocess.run(
        [str(HA_PYTHON), str(ASSIST), str(tmp_path / "ha"), host, str(port), str(raw), str(reply), "okay_nabu"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Home Assistant found all three services in Hark's `describe`.
    assert report["flow"]["type"].endswith("create_entry"), report["flow"]
    assert report["entities"] == ["stt.hark_stt", "tts.hark_tts", "wake_word.hark_wake"], report["entities"]
    events = {e["type"].split(".")[-1].lower().replace("_", "-"): e["data"] for e in report["events"]}
    assert "error" not in events, report["events"]
    woke = events["wake-word-end"]["wake_word_output"]
    assert woke["wake_word_id"] == "okay_nabu", woke
    said = events["stt-end"]["stt_output"]["text"]
    assert heard(said, words(text)), (said, text)
    answer = events["intent-end"]["intent_output"]["response"]["speech"]["plain"]["speech"]
    assert events["tts-start"]["tts_input"] == answer, events["tts-start"]
    # The reply Home Assistant would play: Hark's voice saying the answer,
    # as Hark's own speech to text hears it.
    assert report["tts_audio"]["extension"] == "wav", report["tts_audio"]
    with wave.open(str(reply)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
    assert len(pcm) / rate > 0.5, len(pcm) / rate
    back = run(transcribe(d.wyoming, resample(pcm, rate, 16000), 16000))
    assert heard(back.text, words(answer)), (back.text, answer)
