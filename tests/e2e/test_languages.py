"""Other languages, for real: the multilingual whisper base (CTranslate2,
from two PyPI packages the set-up joins) imported by Hark's own importer,
then German and Spanish spoken by espeak-ng: `detect_language` names them,
`transcribe_audio` writes them down, and with the English-only live engine
on, a German request to the microphone goes to whisper."""

import subprocess

import pytest

from harness import HARK, REPO, LineClient, call, status_of
from test_live import MOONSHINE, listen
from test_stt import words

BASE = REPO / "tests" / ".models" / "whisper-base"
GERMAN = "Guten Morgen. Heute ist das Wetter schön, und ich gehe in den Park."
SPANISH = "Buenos días. Hoy hace muy buen tiempo y voy a pasear por el parque."


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    assert (BASE / "model.bin").is_file(), "run tests/setup.sh"
    r = subprocess.run([str(HARK), "models", "import", str(BASE), "--name", "base-q8_0", "--quantisation", "q8_0",
                        "--dir", str(store)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return store / "ggml-base-q8_0.bin"


def spoken(dir, name, voice, text):
    path = dir / name
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)
    return path


def test_german_and_spanish_are_detected_and_transcribed(start_daemon, base_model, tmp_path):
    audio = tmp_path / "audio"
    audio.mkdir()
    d = start_daemon({"stt": {"model": str(base_model), "audio_dirs": [str(audio)], "language": "auto"}})
    c = LineClient.tcp(d, timeout=120)
    c.initialize()
    assert "multilingual" in status_of(c)["subsystems"]["stt"]
    for voice, text, lang, expect in [("de", GERMAN, "de", {"guten", "morgen", "park"}),
                                      ("es", SPANISH, "es", {"buenos", "tiempo", "parque"})]:
        wav = spoken(audio, f"{voice}.wav", voice, text)
        guesses = call(c, "detect_language", {"audio_path": str(wav)}, id=2)
        assert not guesses["isError"], guesses
        top = guesses["structuredContent"]
        assert top["language"] == lang and top["confidence"] > 0.5, top
        r = call(c, "transcribe_audio", {"audio_path": str(wav)}, id=3)
        assert not r["isError"], r
        s = r["structuredContent"]
        assert s["language"] == lang and expect <= set(words(s["text"])), s
    c.close()


def test_the_english_live_engine_hands_german_to_whisper(start_daemon, base_model, tmp_path):
    d = start_daemon({"stt": {"model": str(base_model), "live_model": str(MOONSHINE)}})
    wav = spoken(tmp_path, "de.wav", "de", GERMAN)
    s = listen(d, wav, language="de")["structuredContent"]
    assert s["model"] == "base-q8_0" and s["language"] == "de", s
    assert {"guten", "morgen"} <= set(words(s["text"])), s
