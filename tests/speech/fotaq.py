"""Flight of the Amazon Queen's spoken lines with their on-screen text, read
out of Debian's flight-of-the-amazon-queen package (the CD "talkie" version,
freeware): `lines(queen_1c)` yields each voiced piece of text with its audio
and speaker, the voice file found by the game's own rule for naming it.

The format notes below describe the data files in our own words; they were
established by reading the data, with ScummVM's engine sources consulted as
documentation of the formats.
"""

import hashlib
import re
import struct

# ==========================================================================
# Flight of the Amazon Queen  (queen.1c, "rebuilt" CD talkie data file)
# ==========================================================================
#
# queen.1c (rebuilt/compressed by ScummVM's tools) layout, big-endian:
#   "QTBL"  4 bytes magic
#   6 bytes game version string, e.g. "CEM10\0"  (C = CD talkie, E = English)
#   2 bytes unused
#   1 byte  audio compression of the .SB entries: 0 raw, 1 MP3, 2 Ogg, 3 FLAC
#   u16     number of table entries
#   entries: 12-byte NUL padded upper-case file name, u8 bundle number,
#            u32 offset (from start of queen.1c), u32 size
# The English CD data holds 7671 entries, 6745 of them *.SB sounds stored as
# MP3 (11025 Hz mono) -- speech and sound effects.
#
# Text lives in three kinds of file, and the voice file name of every spoken
# piece is derived from where its text lives:
#
#  * QUEEN.JAS (binary, after a 20-byte "AmBk" wrapper header): u16 counts of
#    rooms, names, objects, descriptions, then one 16-byte record per object
#    (eight i16: name, x, y, description, entry object, room, state, image;
#    image -3/-4 marks a person).  QUEEN2.JAS is CRLF separated text: first all
#    object descriptions, then object names, room names, 12 verb names, then 40
#    "Joe responses".  When Joe speaks Joe response k (1..40) the voice prefix
#    is "JOE%04d" % k; for object description k it is "JOE%04d" % (k + 40).
#
#  * *.DOG dialogue files (20-byte wrapper header, then):
#      i16 levelMax (sign = can quit), i16 unique key, i16 talk key,
#      i16 jMax (Joe lines), i16 pMax (person lines), 2x(i16,i16,i16) item
#      rules, u16 offset of the person line table, u16 cutaway info offset,
#      u16 offset of the "second visit" strings; the dialogue tree starts at 32
#      (levelMax * 96 bytes), and the Joe line table follows it.
#    A line table is a sequence of (2 unused bytes, i16 id, string) with the
#    string padded so that the next record starts at a multiple of 4.  Strings
#    are length-prefixed (1 byte) and padded to even length elsewhere.
#    Voice prefixes: person line id h -> "%2d%4xP" % (talkkey, h);
#    Joe line id h -> "%2d%4xJ"; Joe's opening line (in the Joe table header,
#    present when the u16 flag before it is 0) -> "%2dSSSSJ"; the second-visit
#    pair (person, Joe) -> "%2dXXXXP", "%2dXXXXJ".  Spaces become '0'.
#
#  * *.CUT cutaway scripts (20-byte wrapper header, then):
#      u16 panel mode, i16 object count (sign = can quit), i16 flags,
#      u16 game-state table offset, u16 sentence list offset,
#      u16 bank-name list offset, then the object records.
#    Every object record is 17 i16 (object number first, 5th = anim list,
#    6th = execute flag, 13th = "from object"), then i16 n + n i16 people, and
#    -- only for animated objects -- 10-word animation frames until a -2.
#    The sentence list holds one string for the entry facing, then exactly one
#    string per object, in order ("*" = nothing said).  Object number 0 (or -1,
#    room fade) is Joe, >0 a room object (a person), -2/-3 a narrated caption
#    spoken as a whole.  Voice prefix for object i (1-based) of cutaway
#    "C30E.CUT": base name padded with '_' to 5 chars + "%02d" % i, e.g.
#    "C30E_01".  Captions use that prefix + "1".
#
# A spoken sentence is split into segments at '*' commands: '*' followed by a
# 2-character code ("XY" codes carry 11 more characters of coordinates).  The
# text before each command (and the tail after the last one) is one segment,
# shown on screen alone while its own voice clip plays; segment k (1-based,
# counting every command, even ones that show nothing) is the voice file
# prefix + "%x" % k + ".SB".  Codes GD/GM (grab animations) show and play
# nothing.  Empty segments have no voice file.

_Q_ALIAS = {
    # dialogue-file key -> character name.  Made by hand from the game's
    # actor name list (QUEEN2.JAS) and the object names of the people the
    # cutaways open each dialogue with.
    "AND": "Anderson", "APE": "gorilla", "BOB": "Trader Bob", "BUD": "Bud",
    "CHEF": "chef", "CHIEF": "chief", "DEATH": "Death (Charon)", "DOG": "guard dog",
    "FAYE": "Faye", "FRANK": "Frank", "HENRY": "Henry", "IAN": "Ian",
    "JIM": "Jimmy", "JOHN": "John", "KLUNK": "Klunk", "LARIS": "Mike Laris",
    "LOLA": "Lola", "LOU": "Mary-Lou", "MAN": "man", "NAOMI": "Naomi",
    "ORACLE": "guardian", "PRIN": "Princess Azura", "SEC": "secretary",
    "SHOWERAM": "showering Amazon", "SPARKY": "Sparky", "TALLPYG": "tall pygmy",
    "TAM": "Tammy", "WEDGE": "Wedgewood", "WITCH": "witch doctor",
    "ZOMBIE": "zombie woman",
}
# object names that are placeholders rather than people (cutaways sometimes
# make a prop "speak" for an off-screen voice)
_Q_OBJECT_ALIAS = {"azura obj": "Princess Azura", "Joe King": "Joe"}
_Q_PROPS = {"note", "path", "smoke", "telephone", "door", "rock", "lily pad",
            "buttons", "torch"}


def _q_i16(d, o):
    return struct.unpack_from(">h", d, o)[0]


def _q_u16(d, o):
    return struct.unpack_from(">H", d, o)[0]


def _q_string(d, o, align=2):
    """Length-prefixed string at o; returns (text, offset of next item)."""
    n = d[o]
    o += 1
    s = d[o:o + n].decode("latin-1")
    if n:
        o = (o + n + align - 1) & ~(align - 1)
    return s, o


def _q_segments(sentence):
    """Split a spoken sentence at its '*' commands.

    Returns [(k, text)] for the segments that are displayed and voiced, k being
    the 1-based segment number used in the voice file name."""
    out = []
    i = start = seg = 0
    n = len(sentence)
    while i < n:
        if sentence[i] != "*":
            i += 1
            continue
        text = sentence[start:i]
        code = sentence[i + 1:i + 3]
        i += 3 + (11 if code == "XY" else 0)
        if code not in ("GD", "GM"):
            out.append((seg + 1, text))
        seg += 1
        start = i
    if start < n:
        out.append((seg + 1, sentence[start:]))
    return out


def _q_voice(prefix, k):
    return (prefix + "%x" % k).replace(" ", "0").upper() + ".SB"


def _q_table(blob):
    if blob[:4] != b"QTBL":
        raise ValueError("queen.1c is not a rebuilt (QTBL) data file")
    version = blob[4:10].split(b"\0")[0].decode("ascii")
    compression = blob[12]
    count = _q_u16(blob, 13)
    table = {}
    p = 15
    for _ in range(count):
        name = blob[p:p + 12].split(b"\0")[0].decode("ascii")
        off, size = struct.unpack_from(">II", blob, p + 13)
        table[name] = (off, size)
        p += 21
    return version, compression, table


def _q_script_lines(blob, table):
    """Map voice file name -> (text, speaker, speaker_known, source)."""
    def load(name, skip=20):
        off, size = table[name]
        return blob[off + skip:off + size]

    lines = {}
    clash = set()

    def add(prefix, sentence, speaker, known, source):
        segs = [(k, t) for k, t in _q_segments(sentence) if t.strip()]
        for part, (k, text) in enumerate(segs, 1):
            v = _q_voice(prefix, k)
            if v in lines and lines[v][0] != text:
                clash.add(v)          # same voice name, two texts: ambiguous
            lines.setdefault(v, (text, speaker, known, source, part, len(segs)))

    # --- QUEEN.JAS / QUEEN2.JAS ------------------------------------------
    jas = load("QUEEN.JAS")
    n_rooms, n_names, n_objects, n_desc = struct.unpack_from(">4H", jas, 0)
    objects = [None] + [struct.unpack_from(">hHHHhHHh", jas, 8 + 16 * i)
                        for i in range(n_objects)]
    text_lines = load("QUEEN2.JAS", 0).decode("latin-1").split("\r\n")
    descriptions = text_lines[:n_desc]
    names = text_lines[n_desc:n_desc + n_names]
    first_resp = n_desc + n_names + n_rooms + 12
    joe_responses = text_lines[first_resp:first_resp + 40]
    for k, s in enumerate(joe_responses, 1):
        add("JOE%04d" % k, s, "Joe", True, "QUEEN2.JAS:joe-response")
    for k, s in enumerate(descriptions, 1):
        add("JOE%04d" % (k + 40), s, "Joe", True, "QUEEN2.JAS:description")

    # --- dialogues ----------------------------------------------------------
    for name in sorted(n for n in table if n.endswith(".DOG")):
        d = load(name)
        level_max = abs(_q_i16(d, 0))
        key, j_max, p_max = _q_i16(d, 4), _q_i16(d, 6), _q_i16(d, 8)
        person_tab, second_tab = _q_u16(d, 22), _q_u16(d, 26)
        joe_tab = 32 + level_max * 96
        dkey = re.sub(r"\d+$", "", name[:-4])
        person = _Q_ALIAS.get(dkey, "dlg:" + dkey)
        known = dkey in _Q_ALIAS
        o = person_tab
        for _ in range(p_max):
            hid = _q_i16(d, o + 2)
            s, o = _q_string(d, o + 4, 4)
            add("%2d%4xP" % (key, hid), s, person, known, name)
        o = joe_tab
        for _ in range(j_max):
            hid = _q_i16(d, o + 2)
            s, o = _q_string(d, o + 4, 4)
            add("%2d%4xJ" % (key, hid), s, "Joe", True, name)
        if _q_u16(d, joe_tab + 2) == 0:
            s, _ = _q_string(d, joe_tab + 4)
            add("%2dSSSSJ" % key, s, "Joe", True, name)
        s1, o = _q_string(d, second_tab)
        s2, o = _q_string(d, o)
        add("%2dXXXXP" % key, s1, person, known, name)
        add("%2dXXXXJ" % key, s2, "Joe", True, name)

    # --- cutaways -------------------------------------------------------------
    for name in sorted(n for n in table if n.endswith(".CUT")):
        d = load(name)
        count = abs(_q_i16(d, 2))
        sent = _q_u16(d, 8)
        _, sent = _q_string(d, sent)           # entry facing string
        base = name[:-4].ljust(5, "_")
        p = 12
        for idx in range(1, count + 1):
            rec = struct.unpack_from(">17h", d, p)
            p += 34
            p += 2 + 2 * _q_i16(d, p)           # people switched on
            s, sent = _q_string(d, sent)
            num, anim_list, execute, from_obj = rec[0], rec[4], rec[5], rec[12]
            if num == -1:
                num = 0                          # room fade: treated as Joe
            is_person = (anim_list == 0 and
                         (num == 0 or (num > 0 and objects[num][7] in (-3, -4))))
            if num >= 0 and from_obj <= 0 and execute and not is_person:
                # animated object: skip its frame list (-2 terminated)
                while _q_i16(d, p) != -2:
                    p += 20
                p += 2
            if s in ("", "*") or s.startswith("#"):
                continue
            prefix = base + "%02d" % idx
            if num in (-2, -3):
                if s.strip():
                    v = _q_voice(prefix, 1)
                    lines.setdefault(v, (s, "caption:" + name[:-4], False, name, 1, 1))
            elif is_person and from_obj <= 0:
                if num == 0:
                    spk, known = "Joe", True
                else:
                    oname = names[abs(objects[num][0]) - 1]
                    oname = _Q_OBJECT_ALIAS.get(oname, oname)
                    if oname in _Q_PROPS:
                        spk, known = "obj%d:%s" % (num, oname), False
                    else:
                        spk, known = oname, True
                add(prefix, s, spk, known, name)
    for v in clash:
        del lines[v]
    return lines


def lines(blob, dedupe=True):
    """Yield the voiced lines of Flight of the Amazon Queen (`blob`: the
    package's queen.1c) with their exact subtitles.

    dedupe: the data reuses a few clips under two names (the intro exists in
    two cutaways); with dedupe=True a byte-identical clip is yielded once.
    Lines whose text is only a sound marker such as "<gulp>" are skipped.
    """
    version, compression, table = _q_table(blob)
    if not version.startswith("CE"):
        raise ValueError("expected the English CD version, found %r" % version)
    if compression != 1:
        raise ValueError("expected MP3-compressed speech, found type %d" % compression)
    said = _q_script_lines(blob, table)
    seen = set()
    for voice in sorted(said):
        if voice not in table:
            continue                      # line not voiced
        text, speaker, known, source, part, parts = said[voice]
        text = text.strip()
        if re.fullmatch(r"(<[^>]*>\s*)+", text):
            continue
        off, size = table[voice]
        mp3 = blob[off:off + size]
        if dedupe:
            h = hashlib.md5(mp3).digest()
            if h in seen:
                continue
            seen.add(h)
        yield {
            "id": "fotaq/" + voice[:-3],
            # MP3, 11025 Hz mono: decoded by the caller for the lines it keeps.
            "mp3": mp3,
            "text": text,
            "speaker": speaker,
            "speaker_known": known,
            "source": source,
            # a spoken sentence may be cut into several clips, each with its own
            # subtitle; part/parts locate this clip in its sentence
            "part": part,
            "parts": parts,
        }
