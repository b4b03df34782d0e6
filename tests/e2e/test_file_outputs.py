"""The audio tool spec's (seed 004) file outputs, called as its examples
call them: a transcription written as subtitles, text or JSON with
`output_file`, a batch written into `output_directory`, both only inside
`stt.output_dirs`; and the spec's result names (`language_confidence`,
`duration`, `output`, `format`, `voice_used`, `file_size_kb`); speech
synthesized as WAV, Ogg Opus or MP3 (heard back by the transcription tools,
or decoded by libsndfile first). The speech transcribed is people recorded
(tests/.speech)."""

import base64
import json

import soundfile

import pytest

from harness import LineClient, call, heard
from test_languages import OTHERS, SPEECH, real_clip

ENGLISH = "ps-librivox-0880"
# Half of them are asked for (`heard`): the files written are under test
# here, and the model's words differ by machine.
ENGLISH_WORDS = {"ill", "disposed", "young", "man"}


def error_of(r):
    assert r["isError"], r
    return r["structuredContent"]["error"]["type"], r["content"][0]["text"]


@pytest.fixture
def outputs(start_daemon, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    d = start_daemon({"stt": {"audio_dirs": [str(SPEECH), str(out)], "output_dirs": [str(out)]},
                      "tts": {"output_dirs": [str(out)]}})
    c = LineClient.tcp(d, timeout=240)
    c.initialize("notes")
    yield c, out.resolve()
    c.close()


def test_a_transcription_is_written_as_subtitles_text_or_json(outputs):
    c, out = outputs
    english = str(real_clip(ENGLISH))
    # The spec's example, with the file to write.
    r = call(c, "transcribe_audio", {"audio_path": english, "language": "en", "model_size": "base",
                                     "output_format": "srt", "output_file": str(out / "clip.srt")}, 2)
    assert not r["isError"], r
    s = r["structuredContent"]
    assert s["output_file"] == str(out / "clip.srt") and s["model"] == "base-q8_0", s
    assert s["duration"] > 2.9 and "language_confidence" in s, s
    srt = (out / "clip.srt").read_text()
    assert srt == r["content"][0]["text"], srt
    assert srt.startswith("1\n00:00:00,") and " --> " in srt and heard(srt, ENGLISH_WORDS), srt
    # Text: the words and a newline; replaced when written again.
    (out / "clip.txt").write_text("an older transcript\n")
    r = call(c, "transcribe_audio", {"audio_path": english, "output_file": "clip.txt"}, 3)
    text = (out / "clip.txt").read_text()
    assert text == r["structuredContent"]["text"] + "\n" and "older" not in text, text
    # JSON: the whole result, segments and all.
    r = call(c, "transcribe_audio", {"audio_path": english, "output_format": "json", "word_timestamps": True,
                                     "output_file": str(out / "clip.json")}, 4)
    kept = json.loads((out / "clip.json").read_text())
    assert kept["text"] == r["structuredContent"]["text"] and kept["segments"][0]["words"], kept
    assert kept["output_file"] == str(out / "clip.json"), kept

    # Only inside stt.output_dirs, checked before any work.
    for bad, kind in [(str(SPEECH / "stolen.txt"), "PathNotAllowedError"),
                      (str(out / ".." / "x.txt"), "PathNotAllowedError"),
                      (str(out / "missing-dir" / "x.txt"), "FileNotFoundError")]:
        got, text = error_of(call(c, "transcribe_audio", {"audio_path": english, "output_file": bad}, 5))
        assert got == kind, (bad, text)
    assert not (SPEECH / "stolen.txt").exists()


def test_a_batch_is_written_into_a_directory(outputs):
    c, out = outputs
    batch = out / "batch"
    batch.mkdir()
    name, lang, expect = OTHERS[1]
    paths = [str(real_clip(ENGLISH)), str(real_clip(name))]
    r = call(c, "transcribe_batch", {"audio_paths": paths, "language": "auto", "output_directory": str(batch)}, 2)
    s = r["structuredContent"]
    assert (s["processed"], s["failed"]) == (2, 0), s
    first, second = s["results"]
    assert first["output"] == str(batch / f"{ENGLISH}.txt") and first["language"] == "en", first
    assert second["output"] == str(batch / f"{name}.txt") and second["language"] == lang, second
    assert (batch / f"{ENGLISH}.txt").read_text() == first["text"] + "\n"
    assert heard((batch / f"{name}.txt").read_text(), expect)
    assert first["duration"] > 2.9, first
    # Subtitles per file; two audio files of one name cannot both be
    # written: the second fails, the first is kept.
    r = call(c, "transcribe_batch", {"audio_paths": [paths[0], paths[0]], "output_directory": str(batch),
                                     "output_format": "vtt"}, 3)
    s = r["structuredContent"]
    assert (s["processed"], s["failed"]) == (1, 1), s
    assert (batch / f"{ENGLISH}.vtt").read_text().startswith("WEBVTT"), s
    assert "also written as" in s["results"][1]["error"]["message"], s
    # A directory outside stt.output_dirs: every file fails, saying why.
    r = call(c, "transcribe_batch", {"audio_paths": paths[:1], "output_directory": str(SPEECH)}, 4)
    s = r["structuredContent"]
    assert s["failed"] == 1 and s["results"][0]["error"]["type"] == "PathNotAllowedError", s


def test_without_output_dirs_files_are_refused_naming_the_setting(start_daemon):
    d = start_daemon({"stt": {"audio_dirs": [str(SPEECH)]}})
    c = LineClient.tcp(d, timeout=60)
    c.initialize()
    kind, text = error_of(call(c, "transcribe_audio", {"audio_path": str(real_clip(ENGLISH)),
                                                       "output_file": "/tmp/x.txt"}, 2))
    assert kind == "PathNotAllowedError" and "stt.output_dirs" in text, text
    c.close()


def test_synthesis_answers_under_the_specs_names(outputs):
    c, out = outputs
    r = call(c, "synthesize_speech", {"text": "Hello, welcome to the demo!", "output_path": str(out / "hello.wav")}, 2)
    s = r["structuredContent"]
    assert s["output_path"] == str(out / "hello.wav") and s["format"] == "wav", s
    assert s["duration"] == s["duration_seconds"] > 0.5 and s["voice_used"] == s["voice"], s
    size = (out / "hello.wav").stat().st_size
    assert s["bytes"] == size and abs(s["file_size_kb"] - size / 1000) < 0.06, s


SENTENCE = "Please remember to water the plants on Tuesday."
# Half of them are asked for (`heard`): piper's default voice differs every
# run and whisper's words differ by machine; the format is under test.
SENTENCE_WORDS = {"remember", "water", "plants", "tuesday"}


def test_speech_is_made_as_ogg_opus_or_mp3_and_heard_back(outputs):
    c, out = outputs
    # MP3 by the name's extension: the spec's example shape.
    r = call(c, "synthesize_speech", {"text": SENTENCE, "output_path": str(out / "note.mp3")}, 2)
    s = r["structuredContent"]
    assert (s["format"], s["mime_type"]) == ("mp3", "audio/mpeg"), s
    mp3 = (out / "note.mp3").read_bytes()
    assert mp3[0] == 0xFF and mp3[1] & 0xE0 == 0xE0 and s["bytes"] == len(mp3), s
    back = call(c, "transcribe_audio", {"audio_path": str(out / "note.mp3")}, 3)["structuredContent"]
    assert back["format"] == "mp3" and abs(back["duration"] - s["duration"]) < 0.15, (back, s)
    assert heard(back["text"], SENTENCE_WORDS), back
    # Ogg Opus asked for by name, whatever the file is called.
    r = call(c, "synthesize_speech", {"text": SENTENCE, "output_path": str(out / "note.audio"), "format": "ogg"}, 4)
    s = r["structuredContent"]
    assert (s["format"], s["mime_type"]) == ("ogg", "audio/ogg"), s
    data, rate = soundfile.read(str(out / "note.audio"))
    assert soundfile.info(str(out / "note.audio")).subtype == "OPUS"
    assert abs(len(data) / rate - s["duration"]) < 0.1, (len(data), rate, s)
    soundfile.write(str(out / "note-from-opus.wav"), data, rate)
    back = call(c, "transcribe_audio", {"audio_path": str(out / "note-from-opus.wav")}, 5)["structuredContent"]
    assert heard(back["text"], SENTENCE_WORDS), back
    # Smaller than the WAV of the same words.
    wav = call(c, "synthesize_speech", {"text": SENTENCE, "output_path": str(out / "note.wav")}, 6)
    assert wav["structuredContent"]["bytes"] > 5 * s["bytes"], (wav, s)
    # Inline: the MCP audio content item says its type.
    r = call(c, "synthesize_speech", {"text": "Hi.", "format": "ogg"}, 7)
    item = next(x for x in r["content"] if x["type"] == "audio")
    assert item["mimeType"] == "audio/ogg" and base64.b64decode(item["data"])[:4] == b"OggS", item["mimeType"]
    # A format it cannot make is refused, naming those it can.
    reply = c.call_tool("synthesize_speech", {"text": "Hi.", "format": "flac"}, id=8)
    refused = json.dumps(reply.get("error") or reply["result"])
    assert "flac" in refused and "mp3" in refused, reply
