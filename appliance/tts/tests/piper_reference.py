"""Reference phonemes and phoneme ids for Hark's parity test (tests/phonemes.rs).

The reference is piper-tts 1.2.0 from PyPI, the last piper-tts that phonemizes
with piper-phonemize 1.1.0: the espeak-ng 1.51 phonemizer piper voices such as
en_US-joe-medium were trained with (later piper-tts releases bundle a newer
espeak-ng whose English dictionary differs). Run with tests/.venv/bin/python
(`bash tests/setup.sh` installs the pinned packages).

Usage: piper_reference.py --map PHONEME_ID_MAP.json --texts TEXTS.json [--voice en-us]

Prints one JSON object: {"versions": {...}, "results": [{"text": ...,
"sentences": [{"phonemes": [...], "ids": [...], "piper_tts_ids": [...]}]}]}
where, per sentence as piper-tts splits the text:
  phonemes       PiperVoice.phonemize (piper_phonemize.phonemize_espeak)
  ids            piper_phonemize.phoneme_ids_espeak: the ids piper's training
                 and its C++ runtime use, `^ _ p _ ... $`
  piper_tts_ids  PiperVoice.phonemes_to_ids with the given map: piper-tts
                 1.2.0's Python, which leaves out the pad after `^`
"""

import argparse
import json
import sys

WANT = {"piper-tts": "1.2.0", "piper-phonemize": "1.1.0"}
SETUP_HINT = "run `bash tests/setup.sh` to install the pinned reference into tests/.venv"


def fail(message: str) -> int:
    print(f"piper_reference.py: {message}; {SETUP_HINT}", file=sys.stderr)
    return 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", required=True, help="JSON phoneme_id_map of the voice")
    parser.add_argument("--texts", required=True, help="JSON list of texts")
    parser.add_argument("--voice", default="en-us", help="espeak-ng voice")
    args = parser.parse_args()

    try:
        from importlib.metadata import PackageNotFoundError, version

        from piper.config import PiperConfig
        from piper.voice import PiperVoice
        from piper_phonemize import get_espeak_map, phoneme_ids_espeak
    except ImportError as error:
        return fail(f"cannot import the reference ({error})")

    try:
        versions = {name: version(name) for name in WANT}
    except PackageNotFoundError as error:
        return fail(f"reference package not installed ({error})")
    if versions != WANT:
        return fail(f"need {WANT}, found {versions}")

    with open(args.map, encoding="utf-8") as f:
        id_map = json.load(f)
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)

    # phoneme_ids_espeak always uses piper-phonemize's built-in map; it is only
    # a reference for this voice if the voice's map agrees with it.
    builtin = get_espeak_map()
    disagree = sorted(k for k, v in id_map.items() if list(builtin.get(k, [])) != list(v))
    if disagree:
        print(f"piper_reference.py: the voice's map differs from piper-phonemize's on {disagree}", file=sys.stderr)
        return 1

    # Phonemizing and id mapping need no model, so the voice gets no session.
    config = PiperConfig.from_dict(
        {
            "num_symbols": 256,
            "num_speakers": 1,
            "audio": {"sample_rate": 22050},
            "espeak": {"voice": args.voice},
            "phoneme_type": "espeak",
            "phoneme_id_map": id_map,
        }
    )
    voice = PiperVoice(session=None, config=config)

    results = []
    for text in texts:
        sentences = []
        for phonemes in voice.phonemize(text):
            sentences.append(
                {
                    "phonemes": phonemes,
                    "ids": list(phoneme_ids_espeak(phonemes)),
                    "piper_tts_ids": voice.phonemes_to_ids(phonemes),
                }
            )
        results.append({"text": text, "sentences": sentences})

    json.dump({"versions": versions, "results": results}, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
