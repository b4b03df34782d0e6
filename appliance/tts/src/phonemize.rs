//! Text to piper's phonemes and phoneme ids.
//!
//! piper voices were trained on espeak-ng IPA grouped the way piper-phonemize
//! 1.1.0 groups it; the model only speaks well when it gets exactly that:
//!
//! * each clause's phonemes, then its terminator (`. ? ! , : ;`), then a space
//!   after `, : ;` only; clauses of a sentence are joined with nothing between
//!   them (an ellipsis clause runs straight into the next);
//! * a sentence ends after a clause espeak-ng marks as sentence end; what is
//!   left at the end of the text is a sentence too;
//! * the phonemes are split into NFD code points (`ç` is `c` + U+0327);
//! * ids are `^ _ p₁ _ p₂ _ … pₙ _ $`: the pad follows the beginning marker as
//!   well as every phoneme (piper-phonemize's `phoneme_ids`, which training
//!   used; piper-tts 1.2.0's Python drops the pad after `^`).

use std::collections::HashMap;
use std::ops::Range;

use unicode_normalization::UnicodeNormalization;

use crate::espeak::{Clause, Espeak, EspeakError};

/// Beginning of utterance.
pub const BOS: char = '^';
/// Padding, after `^` and after every phoneme.
pub const PAD: char = '_';
/// End of utterance.
pub const EOS: char = '$';

/// One sentence as piper synthesises it: one model run each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence {
    /// Byte range of the source text, from its first clause to its last.
    pub text: Range<usize>,
    pub clauses: Vec<Clause>,
}

impl Sentence {
    /// The sentence's phonemes as piper feeds them to the model. May be empty
    /// (a closing quote after the last full stop makes a clause of its own);
    /// piper synthesises that as a blip of silence, so callers may skip it.
    pub fn phonemes(&self) -> Vec<char> {
        clause_phonemes(&self.clauses)
    }
}

/// Clauses' phonemes joined as piper joins a sentence's (see the module
/// doc): each clause's phonemes, its terminator, a space after `, : ;`.
pub fn clause_phonemes(clauses: &[Clause]) -> Vec<char> {
    let mut joined = String::new();
    for clause in clauses {
        joined.push_str(&clause.phonemes);
        if let Some(mark) = clause.punctuation {
            joined.push(mark);
            if matches!(mark, ',' | ':' | ';') {
                joined.push(' ');
            }
        }
    }
    joined.nfd().collect()
}

/// `text` as piper's sentences for the espeak-ng voice `voice` (e.g. `en-us`).
pub fn phonemize(espeak: &Espeak, voice: &str, text: &str) -> Result<Vec<Sentence>, EspeakError> {
    Ok(group_sentences(espeak.clauses(voice, text)?))
}

/// Groups clauses into sentences: each ends at a clause with `sentence_end`,
/// and trailing clauses without one form a last sentence.
pub fn group_sentences(clauses: Vec<Clause>) -> Vec<Sentence> {
    let mut sentences = Vec::new();
    let mut current: Vec<Clause> = Vec::new();
    for clause in clauses {
        let ends = clause.sentence_end;
        current.push(clause);
        if ends {
            sentences.push(sentence_of(std::mem::take(&mut current)));
        }
    }
    if !current.is_empty() {
        sentences.push(sentence_of(current));
    }
    sentences
}

fn sentence_of(clauses: Vec<Clause>) -> Sentence {
    let start = clauses.first().map_or(0, |c| c.text.start);
    let end = clauses.last().map_or(start, |c| c.text.end);
    Sentence {
        text: start..end,
        clauses,
    }
}

/// Why a voice's `phoneme_id_map` is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhonemeMapError {
    #[error("the phoneme_id_map has no {symbol:?} ({role})")]
    MissingSymbol { symbol: char, role: &'static str },
    #[error("the phoneme_id_map maps {symbol:?} ({role}) to no id")]
    NoIds { symbol: char, role: &'static str },
    #[error("the phoneme_id_map key {key:?} is not a single code point")]
    NotOneCodePoint { key: String },
}

/// A voice's map from phoneme (one code point) to model ids.
#[derive(Debug, Clone)]
pub struct PhonemeIdMap {
    map: HashMap<char, Vec<i64>>,
    bos: Vec<i64>,
    pad: Vec<i64>,
    eos: Vec<i64>,
}

/// A sentence's ids, and the phonemes the map had no id for (each once, in
/// order of appearance; piper skips them too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhonemeIds {
    pub ids: Vec<i64>,
    pub missing: Vec<char>,
}

impl PhonemeIdMap {
    /// Checks a voice config's `phoneme_id_map`: every key one code point, and
    /// ids for `^`, `_` and `$`.
    pub fn new(map: &HashMap<String, Vec<i64>>) -> Result<PhonemeIdMap, PhonemeMapError> {
        let mut by_char = HashMap::with_capacity(map.len());
        for (key, ids) in map {
            let mut chars = key.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Err(PhonemeMapError::NotOneCodePoint { key: key.clone() });
            };
            by_char.insert(c, ids.clone());
        }
        let special = |symbol: char, role: &'static str| match by_char.get(&symbol) {
            None => Err(PhonemeMapError::MissingSymbol { symbol, role }),
            Some(ids) if ids.is_empty() => Err(PhonemeMapError::NoIds { symbol, role }),
            Some(ids) => Ok(ids.clone()),
        };
        let bos = special(BOS, "beginning of utterance")?;
        let pad = special(PAD, "padding")?;
        let eos = special(EOS, "end of utterance")?;
        Ok(PhonemeIdMap {
            map: by_char,
            bos,
            pad,
            eos,
        })
    }

    /// The ids of one phoneme, if the voice has it.
    pub fn get(&self, phoneme: char) -> Option<&[i64]> {
        self.map.get(&phoneme).map(Vec::as_slice)
    }

    /// piper's id sequence for one sentence's phonemes: `^ _ (p _)* $`.
    pub fn ids(&self, phonemes: &[char]) -> PhonemeIds {
        let mut ids = Vec::with_capacity(2 * phonemes.len() + 3);
        let mut missing = Vec::new();
        ids.extend_from_slice(&self.bos);
        ids.extend_from_slice(&self.pad);
        for &phoneme in phonemes {
            match self.map.get(&phoneme) {
                Some(phoneme_ids) => {
                    ids.extend_from_slice(phoneme_ids);
                    ids.extend_from_slice(&self.pad);
                }
                None => {
                    if !missing.contains(&phoneme) {
                        missing.push(phoneme);
                    }
                }
            }
        }
        ids.extend_from_slice(&self.eos);
        PhonemeIds { ids, missing }
    }
}
