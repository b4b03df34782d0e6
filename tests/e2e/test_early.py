"""Transcription ahead of the end of the turn, end to end: while the person
speaks, the live engine's partial transcripts reach the listening call as
progress and the event stream as `utterance_partial`; the final pass starts
at the first pause and is kept when the turn ends there (`speculative`),
thrown away when speech resumes, and abandoned when the client cancels."""

import array
import re
import wave

import pytest

from harness import response, start_listening, status_of, wait_for
from test_live import MOONSHINE
from test_room import Events
from test_stt import inject, speak, words
from test_turn import SMART_TURN, join, say

# How much more quietly the last word is said in the trailing-off clip.
QUIET_DB = -40

LIVE = {"stt": {"live_model": str(MOONSHINE), "turn_model": str(SMART_TURN), "partial_ms": 500},
        "audio.vad": {"end_of_turn": "smart-turn"}}


@pytest.fixture(scope="module")
def live(steady_voices):
    """LIVE with the steady voice: the clips of these tests are the same
    every run."""
    return {**LIVE, "tts": {"voices_dir": str(steady_voices)}}


def listen_with_progress(daemon, wav, id=7):
    """transcribe_voice with a progress token while `wav` is spoken; the
    result and the progress notifications."""
    c, watcher = start_listening(daemon, id, meta={"progressToken": "turn"})
    inject(daemon, wav)
    reply, notes = response(c, id)
    c.close()
    watcher.close()
    progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
    return reply["result"], progress


def test_partial_transcripts_arrive_while_the_person_speaks(start_daemon, live, tmp_path):
    d = start_daemon(live)
    events = Events(d)
    clip = say(d, tmp_path / "long.wav",
               "The meeting has been moved to Thursday afternoon, so please tell everyone on the team "
               "before lunch tomorrow.")
    result, progress = listen_with_progress(d, clip)
    # The event stream may deliver the final words just after the answer.
    assert wait_for(lambda: events.of("utterance_transcribed"), 5), events.events
    events.stop = True
    s = result["structuredContent"]
    assert not result.get("isError"), result
    assert s["model"] == "tiny-en" and s["end_reason"] == "end_of_turn", s
    # The final pass began at the pause the turn ended at.
    assert s["speculative"] is True, s
    # A finished sentence ends the turn about 300 ms after its last word
    # (two asks of the end-of-turn model, at 200 and 300 ms of silence),
    # before the silence rule's 800 ms would have: `end_of_turn` above says
    # the model ended it. The asks run on the recorder's thread, so on a
    # loaded machine their time adds to the silence heard (0.57 s seen with
    # an image build beside the tests). 1.5 s leaves 0.9 s over that and is
    # still well short of a pause held open (2.5 s); how soon it is on a
    # quiet machine is the benchmark's (docs/benchmarks.md).
    assert s["duration"] - s["speech_end"] < 1.5, s

    messages = [p["message"] for p in progress]
    partials = [m for m in messages if m.startswith("heard so far: ")]
    assert messages[:2] == ["listening", "speech detected"] and messages[-1] == "transcribing", messages
    assert len(partials) >= 2, messages
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values), values
    assert all(p.get("total") in (None, 3) and p["progress"] <= 3 for p in progress), progress
    # Partial transcripts grow with the speech; the early ones lack the end.
    assert "lunch" not in words(partials[0]) and "meeting" in words(" ".join(partials)), partials

    # On the event stream, partials of this recording came before the
    # microphone closed: they are of speech still going on.
    ended = next(e for e in events.of("listening_ended"))
    listen = ended["listen"]
    mine = [e for e in events.of("utterance_partial") if e["listen"] == listen]
    assert mine and mine[0]["seq"] < ended["seq"], events.events
    final = next(e for e in events.of("utterance_transcribed") if e["listen"] == listen)
    assert final["text"] == s["text"] and final["seq"] > mine[-1]["seq"]


def thinking(daemon, tmp_path, pause):
    """A sentence with `pause` seconds to think after a word no sentence
    ends on."""
    first = say(daemon, tmp_path / "a.wav", "So I was thinking that we could")
    second = say(daemon, tmp_path / "b.wav", "go to the park on Saturday morning.")
    return join(tmp_path / "paused.wav", first, pause, second)


def test_the_early_pass_is_thrown_away_when_speech_resumes(start_daemon, live, tmp_path):
    d = start_daemon(live)
    # 600 ms: under the silence rule's 800, so the test is of the early
    # pass thrown away, whatever the words up to the pause read as.
    result, progress = listen_with_progress(d, thinking(d, tmp_path, 0.6))
    s = result["structuredContent"]
    # Had the pass begun at the pause been kept, the second half would be
    # missing; the one begun at the final pause is the turn's. Two of the
    # three words (the model's words differ by machine): any two hold "park"
    # or "saturday", said after the pause.
    assert len({"thinking", "park", "saturday"} & set(words(s["text"]))) >= 2, s
    # The final pause ends the turn by the model, or by the silence rule
    # when its two asks disagree (both at the same pause, the pass begun
    # there kept either way); never at the first pause.
    assert s["end_reason"] in ("end_of_turn", "end_of_speech") and s["speculative"] is True, s
    assert "the early transcription is thrown away: speech resumed" in d.log()
    # The pause's own pass was shown as what had been said so far.
    halves = [p["message"] for p in progress if p["message"].startswith("heard so far: ")]
    assert any("thinking" in words(m) and "park" not in words(m) for m in halves), halves


def test_a_thinking_pause_after_a_dangling_word_outlasts_the_silence_rule(start_daemon, live, tmp_path):
    """1.2 s to think after "…that we could": longer than the silence
    rule's 800 ms. The words up to the pause stop midway, so the pause is
    held open; the second look finds nothing sounded since the first (a
    transcription of the quiet could read words into it and let the pause
    go) and the turn goes on to its end."""
    d = start_daemon(live)
    result, _ = listen_with_progress(d, thinking(d, tmp_path, 1.2))
    s = result["structuredContent"]
    log = d.log()
    # Cut at the pause, the turn would have only the first half. Two of the
    # three words, as in the test above: any two hold one said after it.
    assert len({"thinking", "park", "saturday"} & set(words(s["text"]))) >= 2, \
        (s, log[log.find("speech detected"):])
    assert "nothing sounded after the first look; still held" in log
    assert s["end_reason"] in ("end_of_turn", "end_of_speech"), s


def test_whisper_starts_at_the_pause_and_a_cancel_abandons_it(start_daemon, tmp_path):
    # No live engine: whisper and the silence rule (800 ms), the final pass
    # still started at the 200 ms pause.
    d = start_daemon({})
    wav = speak(tmp_path / "s.wav", "Please turn off the lights in the kitchen.")
    result, progress = listen_with_progress(d, wav)
    s = result["structuredContent"]
    assert s["end_reason"] == "end_of_speech" and s["speculative"] is True, s
    assert "kitchen" in words(s["text"]), s
    # No partials from whisper (each would cost a whole pass).
    assert not [p for p in progress if p["message"].startswith("heard so far")], progress

    # The client cancels between the first pause and the end of the turn,
    # while the early pass runs: the appliance answers the next call.
    c, watcher = start_listening(d, 9, timeout=60)
    log_at = len(d.log())
    inject(d, wav)
    assert wait_for(lambda: "starts early, at a pause" in d.log()[log_at:], 20)
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    assert wait_for(lambda: not status_of(watcher)["recording"], 10)
    assert wait_for(lambda: status_of(watcher)["subsystems"]["stt"].startswith("ready"), 20), \
        status_of(watcher)
    c.close()
    result, _ = listen_with_progress(d, wav, id=11)
    assert "kitchen" in words(result["structuredContent"]["text"]), result
    watcher.close()
    # whisper.cpp stopped on the cancel logs "failed to encode": asked for,
    # no error.
    errors = [line for line in d.log()[log_at:].splitlines() if " ERROR " in line]
    assert not errors, errors


def quieter(path, out, db):
    """The clip at `db` dB (negative: quieter), as a voice trailing off."""
    with wave.open(str(path)) as w:
        params = w.getparams()
        samples = array.array("h", w.readframes(w.getnframes()))
    gain = 10 ** (db / 20)
    samples = array.array("h", (int(s * gain) for s in samples))
    with wave.open(str(out), "wb") as w:
        w.setparams(params)
        w.writeframes(samples.tobytes())
    return out


def test_a_pause_held_midway_is_looked_at_again(start_daemon, live, tmp_path):
    """A last word said far more quietly than the rest ("turn on the …
    lights" at -40 dB) is not voice to the detector, so the words up to the
    pause ("turn on that") read as a sentence stopped midway and hold it
    open. 500 ms in, as something sounded after the first look, the pause
    is transcribed again up to that sound. At this level the live engine hears the quiet word in some
    takes and not in others (at the first look, at the second, or not at
    all): heard, the turn ends soon after; not heard, it stays held to
    `audio.vad.max_pause_ms`. (A second reading of the same words cannot
    end it: `turn::heard_further`'s test.)"""
    d = start_daemon(live)
    first = say(d, tmp_path / "a.wav", "Turn on the")
    last = quieter(say(d, tmp_path / "b.wav", "lights."), tmp_path / "quiet.wav", QUIET_DB)
    clip = join(tmp_path / "trailing.wav", first, 0.05, last)
    result, _ = listen_with_progress(d, clip)
    s = result["structuredContent"]
    log = d.log()
    held = re.search(r'transcribing all of it again .*heard=(Some|None)', log)
    looked = re.search(r'the pause held open, looked at again .*further=(true|false)', log)
    silence = s["duration"] - s["speech_end"]
    # The second look lets the pause go when it hears further than the first
    # (or the first had heard nothing); its decision is in the log. (The final
    # transcript cannot tell: it is made later, on more audio, and may hear the
    # quiet word when the second look did not.)
    further = looked.group(1) == "true" if looked else held is not None and held.group(1) == "None"
    if held is None or further:
        # Not held (the first look heard the words finished), or the second
        # look heard further: ended by the model or the silence rule, well
        # before the longest pause (2.5 s). Held with no second look, or
        # let go by one that heard nothing new, it would not be.
        assert silence < 1.2, (s, log[held.start() if held else 0:])
    else:
        assert s["end_reason"] == "end_of_speech" and silence > 2.3, (s, log[held.start():])
