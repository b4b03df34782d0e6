"""Models chosen per call, as the peers' users choose them: the audio tool
spec's `model_size` and Voicebox's `model` on `transcribe_audio`,
and `transcribe_batch` (`POST /transcribe`'s in test_peer_scripts), any installed model loaded when
first asked for; and `list_models`, with sizes, languages and roles.

The daemon here has no multilingual model set up (`stt.multilingual_model`
empty), so the multilingual whisper base in the store serves only the calls
that ask for it: loaded on demand, not configured. The speech is people
recorded (tests/.speech, tests/speech/README.md)."""

from harness import MODELS, LineClient, call, heard
from test_languages import OTHERS, SPEECH, real_clip

ENGLISH = "ps-librivox-0880"
# Half of them are asked for (`heard`): which model wrote the words is
# under test here, not how many it gets right, and its words differ by
# machine.
ENGLISH_WORDS = {"ill", "disposed", "young", "man"}


def error_of(r):
    assert r["isError"], r
    return r["structuredContent"]["error"]["type"], r["content"][0]["text"]


def test_list_models_names_each_model_with_its_size_languages_and_role(start_daemon):
    d = start_daemon({"stt": {"live_model": "moonshine-tiny-en"}})
    c = LineClient.tcp(d, timeout=60)
    c.initialize()
    r = call(c, "list_models", {})
    assert not r["isError"], r
    s = r["structuredContent"]
    by_name = {m["name"]: m for m in s["models"]}
    assert s["default"] == "tiny.en-q8_0", s
    tiny, base = by_name["tiny.en-q8_0"], by_name["base-q8_0"]
    assert (tiny["purpose"], tiny["size"], tiny["language"], tiny["languages"]) == \
        ("transcription", "tiny", "en", ["en"]), tiny
    assert tiny["roles"] == ["default"] and tiny["per_call"] and tiny["quantisation"] == "q8_0", tiny
    assert tiny["bytes"] == (MODELS / "ggml-tiny.en-q8_0.bin").stat().st_size, tiny
    assert (base["size"], base["language"], base["roles"]) == ("base", "multilingual", ["other_languages"]), base
    assert {"en", "de", "es", "sv", "ja"} <= set(base["languages"]) and len(base["languages"]) == 99, base
    live = by_name["moonshine-tiny-en"]
    assert (live["purpose"], live["roles"], live["per_call"], live["size"]) == ("live", ["live"], True, None), live
    turn = by_name["smart-turn-v3.2"]
    assert (turn["purpose"], turn["language"], turn["per_call"]) == ("end_of_turn", "any", False), turn
    text = r["content"][0]["text"]
    assert "base-q8_0 (transcription, base, 99 languages) [stt.multilingual_model]" in text, text
    c.close()


def test_a_model_is_chosen_per_call_by_name_or_size(start_daemon):
    d = start_daemon({"stt": {"audio_dirs": [str(SPEECH)], "multilingual_model": "",
                              "live_model": "moonshine-tiny-en"}})
    c = LineClient.tcp(d, timeout=240)
    c.initialize()
    name, lang, expect = OTHERS[1]
    swedish = str(real_clip(name))
    english = str(real_clip(ENGLISH))
    # Without a model set up for other languages, `auto` is refused...
    kind, _ = error_of(call(c, "transcribe_audio", {"audio_path": swedish, "language": "auto"}, id=2))
    assert kind == "LanguageError"
    # ...and the spec's model_size finds the installed multilingual base.
    r = call(c, "transcribe_audio", {"audio_path": swedish, "language": "auto", "model_size": "base"}, id=3)
    assert not r["isError"], r
    s = r["structuredContent"]
    assert (s["model"], s["language"]) == ("base-q8_0", lang) and s["language_confidence"] > 0.5, s
    assert heard(s["text"], expect), s
    # By name, in English: the multilingual model, not the English one.
    s = call(c, "transcribe_audio", {"audio_path": english, "language": "en", "model": "base-q8_0"}, id=4)
    assert s["structuredContent"]["model"] == "base-q8_0", s
    assert heard(s["structuredContent"]["text"], ENGLISH_WORDS), s
    # Voicebox's `model` as a size: for English, the English-only tiny.
    s = call(c, "transcribe_audio", {"audio_path": english, "model": "tiny"}, id=5)["structuredContent"]
    assert s["model"] == "tiny.en-q8_0" and heard(s["text"], ENGLISH_WORDS), s
    # The live engine's model transcribes files too.
    s = call(c, "transcribe_audio", {"audio_path": english, "model": "moonshine-tiny-en"}, id=6)
    s = s["structuredContent"]
    assert s["model"] == "moonshine-tiny-en" and heard(s["text"], ENGLISH_WORDS), s
    # A batch takes one model for all its files.
    r = call(c, "transcribe_batch", {"audio_paths": [swedish, english], "language": "auto", "model_size": "base"}, id=7)
    results = r["structuredContent"]["results"]
    assert [x.get("model") for x in results] == ["base-q8_0", "base-q8_0"], results
    assert [x.get("language") for x in results] == [lang, "en"], results

    # What cannot be had says what can.
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model_size": "small"}, id=8))
    assert kind == "ModelNotLoadedError", text
    assert "no small model" in text and "tiny.en-q8_0 (tiny, English)" in text and "base-q8_0 (base, multilingual)" in text, text
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": swedish, "language": "sv", "model_size": "tiny"}, id=9))
    assert kind == "ModelNotLoadedError" and "no tiny model for language `sv`" in text, text
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model": "whisper-huge"}, id=10))
    assert kind == "ModelNotLoadedError" and "`whisper-huge`" in text and "base-q8_0" in text, text
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model": "smart-turn-v3.2"}, id=11))
    assert kind == "InvalidArgumentError" and "smart-turn model" in text, text
    for bad in ["../ggml-base-q8_0", str(MODELS / "ggml-base-q8_0.bin")]:
        kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model": bad}, id=12))
        assert kind == "ModelNotLoadedError" and "is installed" in text, text
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model": "base", "model_size": "tiny"}, id=13))
    assert kind == "InvalidArgumentError" and "not both" in text, text
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "model_size": "huge"}, id=14))
    assert kind == "InvalidArgumentError" and "`huge`" in text, text
    # The configured model still serves calls that name none (files go to
    # the live engine only with stt.live_files_seconds: test_live).
    s = call(c, "transcribe_audio", {"audio_path": english}, id=15)["structuredContent"]
    assert s["model"] == "tiny.en-q8_0", s
    c.close()

