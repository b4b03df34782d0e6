//! A safe wrapper over libespeak-ng (Debian's 1.51): phonemes with clause
//! punctuation, as piper phonemizes, and espeak-ng's own synthesiser for the
//! fallback voice.
//!
//! libespeak-ng is one global state machine: the current voice, the speech
//! parameters, and a read-ahead character that `espeak_TextToPhonemes` keeps
//! between calls (the first character of the next clause). So there is one
//! process-wide [`Espeak`], initialised once, and every call into the library
//! happens under its mutex, from the first clause of a text to the last.
//! Calls are blocking and CPU-bound (synthesis of a long text holds the lock
//! for its whole duration): run them on a blocking thread, not on the async
//! runtime.
//!
//! Side effect of initialisation: espeak-ng sets the process's C `LC_CTYPE`
//! locale to a UTF-8 one so its `isw*()` character classes work.
//!
//! ## Clause punctuation on espeak-ng 1.51
//!
//! piper gets each clause's terminator from `espeak_TextToPhonemesWithTerminator`,
//! a function of its espeak-ng fork that Debian's 1.51 lacks. The terminator is
//! recovered here from the text instead. `espeak_TextToPhonemes` moves the
//! caller's text pointer to where its reader stopped, which is one character
//! past the clause: it has already read the next clause's first character and
//! holds it back internally. So each clause's text is "the held-back character
//! of the previous call, then everything up to the new pointer except its last
//! character". How that text ends tells which rule of espeak-ng's clause reader
//! (`ReadClause`) ended the clause, and so which terminator piper would have
//! seen (the rules are listed at `terminator` below).
//!
//! Known limits of the recovery (none matter for English voices): the
//! ordinal-number dot of languages with `NUM_ORDINAL_DOT` (e.g. Hungarian), the
//! `lowercase_sentence` language option, and Armenian in-word punctuation are
//! not modelled.

use std::any::Any;
use std::ffi::{CStr, CString, c_int, c_short, c_void};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use espeakng_sys as sys;

/// Slowest rate (words per minute) of espeak-ng's synthesiser.
pub const RATE_MIN_WPM: u32 = sys::espeakRATE_MINIMUM;
/// Fastest rate (words per minute) espeak-ng's synthesiser reaches without its
/// optional speed-up library.
pub const RATE_MAX_WPM: u32 = sys::espeakRATE_MAXIMUM;

/// Why a call into libespeak-ng failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EspeakError {
    #[error(
        "libespeak-ng failed to initialise (espeak_Initialize returned {code}); \
         is the espeak-ng-data package installed?"
    )]
    Init { code: i32 },
    #[error("espeak-ng has no voice named {voice:?}")]
    UnknownVoice { voice: String },
    #[error("espeak-ng could not load voice {voice:?} (error {code})")]
    VoiceLoad { voice: String, code: i32 },
    #[error("the {what} contains a NUL character at byte {position}")]
    Nul { what: &'static str, position: usize },
    #[error("espeak-ng failed to convert text to phonemes")]
    Phonemes,
    #[error("espeak-ng synthesis failed (error {code})")]
    Synthesis { code: i32 },
}

/// One clause as espeak-ng reads it, with the terminator piper would give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Byte range of the source text this clause consumed. The clauses of a
    /// text are contiguous and together cover all of it; a clause includes
    /// the whitespace after its terminator.
    pub text: Range<usize>,
    /// espeak-ng's IPA for the clause, with `(lang)` switch flags removed.
    pub phonemes: String,
    /// The terminator piper appends: one of `. ? ! , : ;`, or none (no
    /// final mark, an ellipsis, a blank line after the mark, a mark espeak-ng
    /// treats specially such as `？` or `¡`).
    pub punctuation: Option<char>,
    /// Whether piper ends a sentence after this clause.
    pub sentence_end: bool,
}

/// The process-wide libespeak-ng.
pub struct Espeak {
    sample_rate: u32,
    state: Mutex<State>,
}

/// What is known about libespeak-ng's global state; only touched under the lock.
struct State {
    /// The voice last selected successfully. Selecting one reloads its
    /// dictionary, so it is only done when the voice changes.
    voice: Option<String>,
    /// The library may hold a read-ahead character that belongs to no text of
    /// ours: a synthesis stopped mid-text, or a phonemizing loop abandoned on
    /// an error, leaves the next clause's first character behind, and the next
    /// text would start with it.
    stale_read_ahead: bool,
}

static ESPEAK: OnceLock<Result<Espeak, EspeakError>> = OnceLock::new();

impl Espeak {
    /// The process's libespeak-ng, initialised on first use. A failed
    /// initialisation is not retried: the library's data is missing or broken,
    /// which does not change while the process runs.
    pub fn get() -> Result<&'static Espeak, EspeakError> {
        ESPEAK
            .get_or_init(Self::init)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn init() -> Result<Espeak, EspeakError> {
        // SAFETY: runs once per process (OnceLock) before any other call into
        // the library. A NULL path makes espeak-ng use ESPEAK_DATA_PATH or its
        // built-in data directory; DONT_EXIT makes it return an error instead
        // of exiting the process when the data is missing.
        let rate = unsafe {
            sys::espeak_Initialize(
                sys::espeak_AUDIO_OUTPUT_AUDIO_OUTPUT_SYNCHRONOUS,
                0,
                std::ptr::null(),
                sys::espeakINITIALIZE_DONT_EXIT as c_int,
            )
        };
        if rate <= 0 {
            return Err(EspeakError::Init { code: rate });
        }
        // The callback is global in the library, but it finds its sink through
        // each synthesis' user data, so one installation serves every call.
        // SAFETY: `synth_callback` has the C signature espeak-ng expects and
        // stays valid for the life of the process.
        unsafe { sys::espeak_SetSynthCallback(Some(synth_callback)) };
        tracing::debug!(sample_rate = rate, "libespeak-ng initialised");
        Ok(Espeak {
            sample_rate: rate.unsigned_abs(),
            state: Mutex::new(State {
                voice: None,
                stale_read_ahead: false,
            }),
        })
    }

    /// Sample rate of [`Espeak::synthesize`]'s audio (22050 Hz for espeak-ng).
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Whether espeak-ng has `voice` (it is selected to find out, as a
    /// speech in it would).
    pub fn has_voice(&self, voice: &str) -> bool {
        let mut state = self.lock();
        select_voice(&mut state, voice).is_ok()
    }

    /// Splits `text` into espeak-ng's clauses with their phonemes for `voice`
    /// (an espeak-ng voice name such as `en-us`), and the terminator and
    /// sentence end piper derives for each.
    ///
    /// Any text works, empty too (one empty clause, as in piper). ASCII control
    /// characters other than whitespace are read as spaces: espeak-ng would
    /// take `\x01` as the start of an embedded command that can change its
    /// global settings.
    pub fn clauses(&self, voice: &str, text: &str) -> Result<Vec<Clause>, EspeakError> {
        let source = SourceText::new(text)?;
        let mut state = self.lock();
        select_voice(&mut state, voice)?;
        if state.stale_read_ahead {
            state.stale_read_ahead = !drain_read_ahead();
        }
        let clauses = read_clauses(&source);
        if clauses.is_err() {
            state.stale_read_ahead = true;
        }
        clauses
    }

    /// Speaks `text` with espeak-ng's own synthesiser: mono i16 samples at
    /// [`Espeak::sample_rate`], handed to `sink` in chunks as they are made.
    ///
    /// `rate_wpm` sets the speaking rate for this call only (clamped to
    /// [`RATE_MIN_WPM`]..=[`RATE_MAX_WPM`]); `None` keeps espeak-ng's default.
    /// Synthesis stops early, returning `Ok`, when `sink` returns false or
    /// `cancel` becomes true (checked before each chunk). `sink` must not call
    /// back into [`Espeak`]: the lock is held while it runs. If `sink` panics
    /// the panic is carried over the C code and resumed here.
    pub fn synthesize(
        &self,
        voice: &str,
        text: &str,
        rate_wpm: Option<u32>,
        cancel: &AtomicBool,
        sink: &mut dyn FnMut(&[i16]) -> bool,
    ) -> Result<(), EspeakError> {
        let source = SourceText::new(text)?;
        let mut state = self.lock();
        select_voice(&mut state, voice)?;
        if cancel.load(Ordering::Relaxed) {
            return Ok(());
        }
        let rate = rate_wpm.map(RateOverride::set);
        let mut context = SynthContext {
            sink,
            cancel,
            stopped: false,
            panic: None,
        };
        // SAFETY: the lock is held, so nothing else drives the library. The
        // text is NUL-terminated and outlives the call. In synchronous mode
        // espeak_Synth returns only after its last callback, so the pointer to
        // `context` handed over as user data is never used after this
        // statement. Flags: plain text (no SSML, no `[[phoneme]]` input), which
        // also resets those options for later phonemizing calls.
        let code = unsafe {
            sys::espeak_Synth(
                source.bytes.as_ptr().cast(),
                source.bytes.len(),
                0,
                sys::espeak_POSITION_TYPE_POS_CHARACTER,
                0,
                sys::espeakCHARS_AUTO,
                std::ptr::null_mut(),
                (&raw mut context).cast(),
            )
        };
        drop(rate);
        // Synthesis reads clauses with the same reader as phonemizing; unless
        // it ran to the end of the text it left a character behind.
        state.stale_read_ahead = true;
        if let Some(panic) = context.panic.take() {
            drop(state);
            resume_unwind(panic);
        }
        // A stop requested by the callback makes espeak-ng report an error;
        // that is the outcome the caller asked for.
        if code == sys::espeak_ERROR_EE_OK || context.stopped {
            Ok(())
        } else {
            Err(EspeakError::Synthesis { code })
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (only a sink can panic, and espeak-ng
        // had finished cleanly by then) leaves nothing half-done in `State`.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The text as espeak-ng gets it: NUL-terminated, with the control characters
/// that would trigger embedded commands replaced. Every replacement is one
/// ASCII byte for one ASCII byte, so offsets are the caller's offsets.
struct SourceText<'a> {
    original: &'a str,
    /// The text espeak-ng reads, then a NUL.
    bytes: Vec<u8>,
}

impl<'a> SourceText<'a> {
    fn new(text: &'a str) -> Result<Self, EspeakError> {
        let mut bytes = Vec::with_capacity(text.len() + 1);
        for (position, &b) in text.as_bytes().iter().enumerate() {
            match b {
                0 => {
                    return Err(EspeakError::Nul {
                        what: "text",
                        position,
                    });
                }
                b'\t' | b'\n' | 0x0b | 0x0c | b'\r' => bytes.push(b),
                0x01..=0x1f => bytes.push(b' '),
                _ => bytes.push(b),
            }
        }
        bytes.push(0);
        Ok(SourceText {
            original: text,
            bytes,
        })
    }

    /// The text as espeak-ng reads it (without the NUL).
    fn read(&self) -> &str {
        let body = &self.bytes[..self.bytes.len() - 1];
        // Only ASCII bytes were replaced by ASCII bytes, so this is still the
        // caller's valid UTF-8; the fallback is unreachable.
        std::str::from_utf8(body).unwrap_or(self.original)
    }
}

fn select_voice(state: &mut State, voice: &str) -> Result<(), EspeakError> {
    if state.voice.as_deref() == Some(voice) {
        return Ok(());
    }
    // espeak-ng looks voice names up as files under its data directory; a
    // name that climbs out of it is no voice.
    if voice.is_empty() || voice.starts_with('/') || voice.split('/').any(|part| part == "..") {
        return Err(EspeakError::UnknownVoice {
            voice: voice.to_owned(),
        });
    }
    let name = CString::new(voice).map_err(|e| EspeakError::Nul {
        what: "voice name",
        position: e.nul_position(),
    })?;
    // A failed load can leave the library half-switched; forget the old voice
    // so the next call selects again.
    state.voice = None;
    // SAFETY: the caller holds the lock; `name` is NUL-terminated and lives
    // across the call, which copies what it needs.
    let code = unsafe { sys::espeak_SetVoiceByName(name.as_ptr()) };
    match code {
        sys::espeak_ERROR_EE_OK => {
            state.voice = Some(voice.to_owned());
            Ok(())
        }
        sys::espeak_ERROR_EE_NOT_FOUND => Err(EspeakError::UnknownVoice {
            voice: voice.to_owned(),
        }),
        code => Err(EspeakError::VoiceLoad {
            voice: voice.to_owned(),
            code,
        }),
    }
}

/// Makes espeak-ng's reader consume the character it holds back, so the next
/// text starts clean: a throwaway text of one space is read to its end, taking
/// the held-back character into its only clause. Returns whether it finished.
fn drain_read_ahead() -> bool {
    let blank = b" \0";
    let mut cursor: *const c_void = blank.as_ptr().cast();
    for _ in 0..4 {
        // SAFETY: called with the lock held and a voice selected; `blank` is
        // a static NUL-terminated buffer, and the phoneme string returned is
        // not used.
        unsafe {
            sys::espeak_TextToPhonemes(
                &mut cursor,
                sys::espeakCHARS_AUTO as c_int,
                sys::espeakPHONEMES_IPA as c_int,
            );
        }
        if cursor.is_null() {
            return true;
        }
    }
    false
}

/// Runs `espeak_TextToPhonemes` over the whole text (the caller holds the
/// lock and has selected the voice) and recovers each clause's extent and
/// terminator.
fn read_clauses(source: &SourceText<'_>) -> Result<Vec<Clause>, EspeakError> {
    let text = source.read();
    let len = text.len();
    let base = source.bytes.as_ptr();
    let mut cursor: *const c_void = base.cast();
    let mut clauses = Vec::new();
    // Where the previous clause ended: the start of the character espeak-ng
    // held back for the next clause.
    let mut consumed = 0usize;
    // Each call consumes at least one byte (the NUL included) of the buffer,
    // so this bound is only reached if the library misbehaves.
    for _ in 0..len + 2 {
        let mode = sys::espeakPHONEMES_IPA as c_int;
        // SAFETY: the lock is held, the voice is set, and `cursor` points into
        // `source.bytes`, a NUL-terminated buffer that outlives the loop (the
        // library reads it up to the NUL and moves `cursor` within it or sets
        // it to NULL at the end). The returned string lives in a static buffer
        // that is copied out before the next call.
        let raw = unsafe {
            sys::espeak_TextToPhonemes(&mut cursor, sys::espeakCHARS_AUTO as c_int, mode)
        };
        if raw.is_null() {
            return Err(EspeakError::Phonemes);
        }
        // SAFETY: non-NULL, NUL-terminated, valid until the next call.
        let phonemes = strip_language_flags(&unsafe { CStr::from_ptr(raw) }.to_string_lossy());

        let at_end = cursor.is_null();
        let reached = if at_end {
            len
        } else {
            let offset = (cursor as usize).wrapping_sub(base as usize);
            if offset > len || !text.is_char_boundary(offset) {
                tracing::error!(
                    offset,
                    len,
                    "espeak-ng moved the text pointer out of the text"
                );
                return Err(EspeakError::Phonemes);
            }
            offset
        };
        // The last character before the pointer was read ahead for the next
        // clause; it is not part of this one.
        let end = if at_end {
            len
        } else {
            text.get(consumed..reached)
                .and_then(|s| s.char_indices().next_back())
                .map_or(consumed.max(reached), |(i, _)| consumed + i)
        };
        let start = consumed.min(end);
        let held_back = text.get(end..reached).and_then(|s| s.chars().next());
        let after_held_back = text.get(reached..).and_then(|s| s.chars().next());
        let (punctuation, sentence_end) = terminator(
            text.get(start..end).unwrap_or_default(),
            if at_end { None } else { held_back },
            after_held_back,
        );
        clauses.push(Clause {
            text: start..end,
            phonemes,
            punctuation,
            sentence_end,
        });
        consumed = end;
        if at_end {
            return Ok(clauses);
        }
    }
    tracing::error!(len, "espeak-ng did not reach the end of the text");
    Err(EspeakError::Phonemes)
}

/// Drops espeak-ng's language-switch flags such as `(fr)` … `(en)`, which mark
/// words it read with another language's rules; piper drops them too.
fn strip_language_flags(phonemes: &str) -> String {
    let mut out = String::with_capacity(phonemes.len());
    let mut in_flag = false;
    for c in phonemes.chars() {
        match c {
            '(' if !in_flag => in_flag = true,
            ')' if in_flag => in_flag = false,
            _ if in_flag => {}
            _ => out.push(c),
        }
    }
    out
}

/// How piper treats a clause that espeak-ng ended at a punctuation mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    /// What piper appends to the clause's phonemes.
    piper: Option<char>,
    /// Whether the clause ends a sentence.
    sentence: bool,
    /// espeak-ng's "optional space after": the mark ends a clause even when
    /// a letter follows directly (CJK full stops, ellipses, inverted marks).
    no_space_needed: bool,
}

const fn mark(piper: Option<char>, sentence: bool, no_space_needed: bool) -> Mark {
    Mark {
        piper,
        sentence,
        no_space_needed,
    }
}

// piper maps only the exact terminator values of the plain marks; the
// "optional space" variants and ellipses keep their clause or sentence type
// but get no punctuation phoneme.
const FULL_STOP: Mark = mark(Some('.'), true, false);
const FULL_STOP_NO_SPACE: Mark = mark(None, true, true);
const QUESTION: Mark = mark(Some('?'), true, false);
const QUESTION_NO_SPACE: Mark = mark(None, true, true);
const EXCLAMATION: Mark = mark(Some('!'), true, false);
const EXCLAMATION_NO_SPACE: Mark = mark(None, true, true);
const COMMA: Mark = mark(Some(','), false, false);
const COMMA_NO_SPACE: Mark = mark(None, false, true);
const COLON: Mark = mark(Some(':'), false, false);
const COLON_NO_SPACE: Mark = mark(None, false, true);
// Semicolons and espeak-ng's "extended dashes" (en and em dash, …).
const SEMICOLON: Mark = mark(Some(';'), false, false);
// Also the inverted marks ¡ ¿, which espeak-ng reads as a pause.
const SEMICOLON_NO_SPACE: Mark = mark(None, false, true);
const ELLIPSIS: Mark = mark(None, false, true);
const PARAGRAPH: Mark = mark(None, true, false);

/// The characters espeak-ng 1.51 ends clauses at (its ucd property table),
/// as sorted, disjoint, inclusive code point ranges.
#[rustfmt::skip]
const MARKS: &[(u32, u32, Mark)] = &[
    (0x0021, 0x0021, EXCLAMATION),
    (0x002C, 0x002C, COMMA),
    (0x002E, 0x002E, FULL_STOP),
    (0x003A, 0x003A, COLON),
    (0x003B, 0x003B, SEMICOLON),
    (0x003F, 0x003F, QUESTION),
    (0x00A1, 0x00A1, SEMICOLON_NO_SPACE),
    (0x00BF, 0x00BF, SEMICOLON_NO_SPACE),
    (0x037E, 0x037E, QUESTION),
    (0x0387, 0x0387, SEMICOLON),
    (0x055D, 0x055D, COMMA),
    (0x0589, 0x0589, FULL_STOP_NO_SPACE),
    (0x060C, 0x060C, COMMA),
    (0x061B, 0x061B, SEMICOLON),
    (0x061F, 0x061F, QUESTION),
    (0x06D4, 0x06D4, FULL_STOP),
    (0x0700, 0x0700, PARAGRAPH),
    (0x0701, 0x0701, FULL_STOP),
    (0x0702, 0x0702, COMMA),
    (0x0703, 0x0703, EXCLAMATION),
    (0x0704, 0x0704, FULL_STOP),
    (0x0706, 0x0707, COLON),
    (0x0708, 0x0708, SEMICOLON),
    (0x0709, 0x0709, QUESTION),
    (0x07F8, 0x07F8, COMMA),
    (0x07F9, 0x07F9, EXCLAMATION),
    (0x0964, 0x0964, FULL_STOP_NO_SPACE),
    (0x0965, 0x0965, PARAGRAPH),
    (0x0DF4, 0x0DF4, FULL_STOP_NO_SPACE),
    (0x0EAF, 0x0EAF, ELLIPSIS),
    (0x0F0D, 0x0F0D, FULL_STOP_NO_SPACE),
    (0x0F0E, 0x0F0E, PARAGRAPH),
    (0x0F14, 0x0F14, COMMA),
    (0x10FB, 0x10FB, PARAGRAPH),
    (0x1362, 0x1362, FULL_STOP),
    (0x1363, 0x1363, COMMA),
    (0x1364, 0x1364, SEMICOLON),
    (0x1365, 0x1366, COLON),
    (0x1367, 0x1367, QUESTION),
    (0x1368, 0x1368, PARAGRAPH),
    (0x166E, 0x166E, FULL_STOP),
    (0x1801, 0x1801, ELLIPSIS),
    (0x1802, 0x1802, COMMA),
    (0x1803, 0x1803, FULL_STOP),
    (0x1804, 0x1804, COLON),
    (0x1808, 0x1808, COMMA),
    (0x1809, 0x1809, FULL_STOP),
    (0x1944, 0x1944, EXCLAMATION),
    (0x1945, 0x1945, QUESTION),
    (0x2013, 0x2014, SEMICOLON),
    (0x2026, 0x2026, ELLIPSIS),
    (0x203C, 0x203C, EXCLAMATION),
    (0x2047, 0x2047, QUESTION),
    (0x204F, 0x204F, SEMICOLON),
    (0x22EE, 0x22F1, ELLIPSIS),
    (0x2488, 0x249B, FULL_STOP),
    (0x2753, 0x2754, QUESTION),
    (0x2755, 0x2755, EXCLAMATION),
    (0x2757, 0x2757, EXCLAMATION),
    (0x2762, 0x2763, EXCLAMATION),
    (0x2982, 0x2982, COLON),
    (0x2CF9, 0x2CF9, FULL_STOP),
    (0x2CFA, 0x2CFB, QUESTION),
    (0x2CFE, 0x2CFE, FULL_STOP),
    (0x2E32, 0x2E32, COMMA),
    (0x2E33, 0x2E33, FULL_STOP),
    (0x2E34, 0x2E34, COMMA),
    (0x2E35, 0x2E35, SEMICOLON),
    (0x2E3A, 0x2E3B, SEMICOLON),
    (0x2E3C, 0x2E3C, FULL_STOP),
    (0x2E41, 0x2E41, COMMA),
    (0x3001, 0x3001, COMMA_NO_SPACE),
    (0x3002, 0x3002, FULL_STOP_NO_SPACE),
    (0xA4FE, 0xA4FE, COMMA),
    (0xA4FF, 0xA4FF, FULL_STOP),
    (0xA60D, 0xA60D, COMMA),
    (0xA60E, 0xA60E, FULL_STOP),
    (0xA60F, 0xA60F, QUESTION),
    (0xA6F3, 0xA6F3, FULL_STOP),
    (0xA6F4, 0xA6F4, COLON),
    (0xA6F5, 0xA6F5, COMMA),
    (0xA6F6, 0xA6F6, SEMICOLON),
    (0xA6F7, 0xA6F7, QUESTION),
    (0xFE10, 0xFE11, COMMA),
    (0xFE12, 0xFE12, FULL_STOP),
    (0xFE13, 0xFE13, COLON),
    (0xFE14, 0xFE14, SEMICOLON),
    (0xFE15, 0xFE15, EXCLAMATION),
    (0xFE16, 0xFE16, QUESTION),
    (0xFE19, 0xFE19, ELLIPSIS),
    (0xFE31, 0xFE32, SEMICOLON),
    (0xFE50, 0xFE51, COMMA),
    (0xFE52, 0xFE52, FULL_STOP),
    (0xFE54, 0xFE54, SEMICOLON),
    (0xFE55, 0xFE55, COLON),
    (0xFE56, 0xFE56, QUESTION),
    (0xFE57, 0xFE57, EXCLAMATION),
    (0xFF01, 0xFF01, EXCLAMATION_NO_SPACE),
    (0xFF0C, 0xFF0C, COMMA_NO_SPACE),
    (0xFF0E, 0xFF0E, FULL_STOP_NO_SPACE),
    (0xFF1A, 0xFF1A, COLON_NO_SPACE),
    (0xFF1B, 0xFF1B, SEMICOLON_NO_SPACE),
    (0xFF1F, 0xFF1F, QUESTION_NO_SPACE),
    (0xFF61, 0xFF61, FULL_STOP),
    (0xFF64, 0xFF64, COMMA),
    (0x11143, 0x11143, QUESTION),
    (0x1144D, 0x1144D, COMMA),
    (0x12471, 0x12472, COLON),
    (0x16AF5, 0x16AF5, FULL_STOP),
    (0x1BC9F, 0x1BC9F, FULL_STOP),
    (0x1DA87, 0x1DA87, COMMA),
    (0x1DA88, 0x1DA88, FULL_STOP),
    (0x1DA89, 0x1DA89, SEMICOLON),
    (0x1DA8A, 0x1DA8A, COLON),
    (0x1E95E, 0x1E95E, EXCLAMATION),
    (0x1E95F, 0x1E95F, QUESTION),
    (0x1F100, 0x1F100, FULL_STOP),
    (0x1F101, 0x1F10A, COMMA),
    (0xE0021, 0xE0021, EXCLAMATION),
    (0xE002C, 0xE002C, COMMA),
    (0xE002E, 0xE002E, FULL_STOP),
    (0xE003A, 0xE003A, COLON),
    (0xE003B, 0xE003B, SEMICOLON),
    (0xE003F, 0xE003F, QUESTION),
];

fn mark_of(c: char) -> Option<Mark> {
    let c = u32::from(c);
    let i = MARKS.partition_point(|&(_, hi, _)| hi < c);
    MARKS
        .get(i)
        .filter(|&&(lo, _, _)| lo <= c)
        .map(|&(_, _, m)| m)
}

/// Whitespace as espeak-ng sees it (glibc's `iswspace` in a UTF-8 locale):
/// Unicode white space except the no-break spaces and NEL.
fn is_space(c: char) -> bool {
    c.is_whitespace() && !matches!(c, '\u{85}' | '\u{a0}' | '\u{2007}' | '\u{202f}')
}

/// espeak-ng's "bracket" characters: a mark directly followed by one of these
/// still ends a clause (`He said "hi." Then`).
fn is_bracket(c: char) -> bool {
    matches!(
        c,
        '(' | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '<'
            | '>'
            | '"'
            | '\''
            | '`'
            | '«'
            | '»'
            | '\u{300a}'
            | '\u{300b}'
            | '\u{e03c}'
            | '\u{2014}'..='\u{201f}'
    )
}

/// The terminator piper gets for a clause espeak-ng read as `clause`, given
/// the character it held back for the next clause (`None` at the end of the
/// text) and the character after that.
///
/// espeak-ng ends a clause (a) at a punctuation mark followed by whitespace, a
/// bracket or the end of the text, unless the rules for abbreviations hold it
/// back; the first mark of a run decides and the rest of the run is swallowed
/// (`?!`, `.?`, `!...`), three or more dots are an ellipsis; (b) at a blank
/// line; (c) at the end of the text; (d) when its buffer fills in a very long
/// stretch without punctuation. A blank line after a mark replaces the mark.
fn terminator(
    clause: &str,
    held_back: Option<char>,
    after_held_back: Option<char>,
) -> (Option<char>, bool) {
    let at_end = held_back.is_none();
    // (c) and (d): no terminator; only the end of the text ends a sentence.
    let unpunctuated = (None, at_end);

    let body = clause.trim_end_matches(is_space);
    let newlines = clause[body.len()..].matches('\n').count();
    if newlines >= 2 {
        return (None, true);
    }

    let run_start = body
        .char_indices()
        .rev()
        .take_while(|&(_, c)| mark_of(c).is_some())
        .last()
        .map(|(i, _)| i);
    let Some(run_start) = run_start else {
        return unpunctuated;
    };
    let run = &body[run_start..];
    let Some(first) = run.chars().next() else {
        return unpunctuated;
    };
    let Some(mut kind) = mark_of(first) else {
        return unpunctuated;
    };
    let dots = run.starts_with("...");
    if dots {
        kind = ELLIPSIS;
    }

    let followed_by_space = body.len() < clause.len();
    let ends_here =
        followed_by_space || at_end || kind.no_space_needed || held_back.is_some_and(is_bracket);
    if !ends_here {
        return unpunctuated;
    }
    if newlines == 0 {
        // A mark with no letter or digit before it in the clause is not a
        // clause end.
        if !body[..run_start].chars().any(char::is_alphanumeric) {
            return unpunctuated;
        }
        if first == '.' && !dots {
            // An abbreviation: the next word starts in lower case.
            if held_back.is_some_and(char::is_lowercase) {
                return unpunctuated;
            }
            // An acronym's possessive: "U.S.A.'s".
            if held_back == Some('\'') && after_held_back == Some('s') {
                return unpunctuated;
            }
        }
    }
    (kind.piper, kind.sentence)
}

/// Sets the speaking rate for one synthesis and puts the previous rate back.
struct RateOverride {
    previous: c_int,
}

impl RateOverride {
    fn set(wpm: u32) -> Self {
        let wpm = wpm.clamp(RATE_MIN_WPM, RATE_MAX_WPM);
        let wpm = c_int::try_from(wpm).unwrap_or(sys::espeakRATE_NORMAL as c_int);
        // SAFETY: called with the lock held (from `synthesize`); reading and
        // setting a parameter has no other precondition.
        let previous = unsafe {
            let previous = sys::espeak_GetParameter(sys::espeak_PARAMETER_espeakRATE, 1);
            sys::espeak_SetParameter(sys::espeak_PARAMETER_espeakRATE, wpm, 0);
            previous
        };
        RateOverride { previous }
    }
}

impl Drop for RateOverride {
    fn drop(&mut self) {
        // SAFETY: dropped inside `synthesize`, with the lock still held.
        unsafe { sys::espeak_SetParameter(sys::espeak_PARAMETER_espeakRATE, self.previous, 0) };
    }
}

/// What the synthesis callback reaches through espeak-ng's user data.
struct SynthContext<'a> {
    sink: &'a mut dyn FnMut(&[i16]) -> bool,
    cancel: &'a AtomicBool,
    /// The sink or the cancel flag asked to stop.
    stopped: bool,
    /// A panic of the sink, to resume once the C code has returned.
    panic: Option<Box<dyn Any + Send>>,
}

/// espeak-ng's synthesis callback: returns 0 to go on, 1 to stop.
unsafe extern "C" fn synth_callback(
    wav: *mut c_short,
    samples: c_int,
    events: *mut sys::espeak_EVENT,
) -> c_int {
    const GO_ON: c_int = 0;
    const STOP: c_int = 1;
    if events.is_null() {
        return STOP;
    }
    // SAFETY: espeak-ng passes an event list of at least one entry (the list
    // terminator), each carrying the user data of the running espeak_Synth.
    let user_data = unsafe { (*events).user_data };
    if user_data.is_null() {
        return STOP;
    }
    // SAFETY: the only user data ever passed is a `SynthContext` that
    // `synthesize` keeps alive and does not touch until espeak_Synth returns.
    let context = unsafe { &mut *user_data.cast::<SynthContext<'_>>() };
    if context.stopped || context.panic.is_some() {
        return STOP;
    }
    if context.cancel.load(Ordering::Relaxed) {
        context.stopped = true;
        return STOP;
    }
    // A NULL buffer marks the end of the audio.
    let Ok(count) = usize::try_from(samples) else {
        return GO_ON;
    };
    if wav.is_null() || count == 0 {
        return GO_ON;
    }
    // SAFETY: espeak-ng hands over `samples` valid i16 samples at `wav`, which
    // stay valid until the callback returns.
    let chunk = unsafe { std::slice::from_raw_parts(wav.cast_const(), count) };
    // A panic must not unwind into C; carry it over and stop.
    match catch_unwind(AssertUnwindSafe(|| (context.sink)(chunk))) {
        Ok(true) => GO_ON,
        Ok(false) => {
            context.stopped = true;
            STOP
        }
        Err(panic) => {
            context.panic = Some(panic);
            STOP
        }
    }
}
