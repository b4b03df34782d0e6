//! How a text is cut into pieces, one model run each.
//!
//! A caller that plays piece k while it makes piece k+1 keeps the listener
//! waiting for the first piece only. The pieces are piper's sentences, with
//! two cuts:
//!
//! * a sentence over [`MAX_PIECE_PHONEMES`] is cut after clauses
//!   (`split_long`): one model run's memory grows with its length;
//! * with [`Lead::Early`], for a caller that streams, the first piece is cut
//!   early (`cut_lead`): after its first clause, or after its first words
//!   when no clause ends soon enough, so that speech starts after about a
//!   third of the first sentence instead of all of it. The rest of that
//!   sentence is the next piece, marked [`Planned::continues`]. A cut
//!   between words gets a comma, so piper ends the first piece as a clause
//!   that goes on (a short pause and the pitch of a comma), not a sentence.
//!
//! Only the first piece is cut early: later pieces are made while earlier
//! ones play, and piper speaks a whole sentence best. Where the cut goes is
//! decided from phoneme counts, which speech time follows closely (about 19
//! phonemes a second for en_US-joe-medium at rate 1).

use std::ops::Range;

use crate::{
    espeak::{Clause, Espeak, EspeakError},
    phonemize::{Sentence, clause_phonemes, phonemize},
};

/// A piece longer than this many phonemes (about 8 s of speech) is cut at
/// clause boundaries: the listener waits for the whole first piece before
/// hearing anything, and one model run's memory grows with its length
/// (ONNX Runtime's arena held some 30 MB per second of speech: a daemon
/// speaking a 10 s sentence of three clauses peaked at 537 MiB with pieces
/// of up to 400 phonemes, 348 MiB with 160; docs/architecture.md).
pub const MAX_PIECE_PHONEMES: usize = 160;

/// Neither part of a first sentence cut early is shorter than this many
/// phonemes, about a second of speech (four or five words). Below that the
/// cut saves less than it costs: each model run has a fixed cost and each
/// piece piper's own edge silence, a two-word piece gets the pitch of a
/// whole utterance, and a sentence under twice this length (two seconds,
/// "Here is a summary of your morning.") is made in under 200 ms on a
/// 2-core x86 machine anyway, so it is not cut.
pub const MIN_LEAD_PHONEMES: usize = 20;

/// The slowest real-time factor (synthesis time over speech time) the early
/// cut allows for. The rest of the sentence is made while its first piece
/// plays, so the first piece must last at least this share of the rest, or
/// the speaker runs dry at the join. A 2-core x86 machine makes the medium
/// voices at 0.08–0.1 (docs/benchmarks.md); a Raspberry Pi is several times
/// slower, and the speech recogniser may share the cores. 0.5 holds for a
/// machine five times slower than the x86 one.
pub const SLOWEST_RTF: f32 = 0.5;

/// How many phonemes past the shortest possible first piece a clause may end
/// and still be where the cut goes, rather than between words: piper ends a
/// clause with its own pause and pitch, which a comma put between words only
/// imitates. About a second of speech, 0.1 s of synthesis on the x86 machine.
pub const MAX_CLAUSE_WAIT_PHONEMES: usize = 20;

/// Places to try for a cut between words before giving up (each one
/// phonemizes the two sides again).
const WORD_CUT_TRIES: usize = 6;

/// How the first piece is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// The first sentence whole, like the rest: for a caller that wants all
    /// the audio before it uses any.
    Sentence,
    /// The first sentence cut early: for a caller that plays piece k while it
    /// makes piece k+1.
    Early,
}

/// One piece as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Byte range of the text.
    pub text: Range<usize>,
    /// piper's phonemes for it.
    pub phonemes: Vec<char>,
    /// It is the rest of the sentence the piece before it began (the first
    /// sentence cut early), not a sentence or part of a long one of its own.
    pub continues: bool,
}

/// `text`'s pieces in the espeak-ng voice `voice`, in order; pieces without
/// anything to say (punctuation alone) are left out.
pub fn plan(
    espeak: &Espeak,
    voice: &str,
    text: &str,
    lead: Lead,
) -> Result<Vec<Planned>, EspeakError> {
    let mut pieces = Vec::new();
    for sentence in phonemize(espeak, voice, text)? {
        for part in split_long(sentence) {
            let phonemes = part.phonemes();
            // Punctuation alone (a stray quote, "..."): nothing to say.
            if !phonemes.iter().any(|c| c.is_alphabetic()) {
                continue;
            }
            if lead == Lead::Early && pieces.is_empty() {
                match cut_lead(espeak, voice, text, &part) {
                    Ok(Some([first, rest])) => {
                        pieces.push(first);
                        pieces.push(rest);
                        continue;
                    }
                    Ok(None) => {}
                    // Speech sooner is not worth no speech: the sentence is
                    // spoken whole.
                    Err(e) => tracing::warn!(error = %e, "cannot cut the first sentence early"),
                }
            }
            pieces.push(Planned {
                text: part.text,
                phonemes,
                continues: false,
            });
        }
    }
    Ok(pieces)
}

/// A sentence as pieces of at most [`MAX_PIECE_PHONEMES`] phonemes, cut
/// after a clause (never inside one: a clause is piper's smallest unit of
/// intonation).
fn split_long(sentence: Sentence) -> Vec<Sentence> {
    if sentence.clauses.len() < 2 || sentence.phonemes().len() <= MAX_PIECE_PHONEMES {
        return vec![sentence];
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < sentence.clauses.len() {
        let mut end = start + 1;
        while end < sentence.clauses.len()
            && clause_phonemes(&sentence.clauses[start..=end]).len() <= MAX_PIECE_PHONEMES
        {
            end += 1;
        }
        pieces.push(sentence_of(&sentence.clauses[start..end]));
        start = end;
    }
    pieces
}

/// Whether a sentence of `first + rest` phonemes may be cut into those two:
/// both long enough to be worth a join, and the first long enough to cover
/// making the rest even on a slow machine.
fn fits(first: usize, rest: usize) -> bool {
    first >= MIN_LEAD_PHONEMES
        && rest >= MIN_LEAD_PHONEMES
        && first as f32 >= SLOWEST_RTF * rest as f32
}

/// The shortest first piece of a sentence of `total` phonemes that covers
/// making the rest ([`SLOWEST_RTF`]): a third of it, or
/// [`MIN_LEAD_PHONEMES`].
fn shortest_lead(total: usize) -> usize {
    (MIN_LEAD_PHONEMES..total)
        .find(|&first| first as f32 >= SLOWEST_RTF * (total - first) as f32)
        .unwrap_or(total)
}

/// The first speakable piece `first` cut in two, if it is long enough:
/// after the earliest clause that [`fits`], unless that clause runs more
/// than [`MAX_CLAUSE_WAIT_PHONEMES`] past the shortest first piece, in which
/// case between words there.
fn cut_lead(
    espeak: &Espeak,
    voice: &str,
    text: &str,
    first: &Sentence,
) -> Result<Option<[Planned; 2]>, EspeakError> {
    let total = first.phonemes().len();
    if total < 2 * MIN_LEAD_PHONEMES {
        return Ok(None);
    }
    let shortest = shortest_lead(total);
    let mut clause_end = None;
    for k in 1..first.clauses.len() {
        let head = clause_phonemes(&first.clauses[..k]).len();
        if fits(head, total - head) {
            clause_end = Some((k, head));
            break;
        }
    }
    if let Some((k, head)) = clause_end
        && head <= shortest + MAX_CLAUSE_WAIT_PHONEMES
    {
        return Ok(Some(cut_after_clause(first, k)));
    }
    if let Some(cut) = cut_between_words(espeak, voice, text, first, shortest)? {
        return Ok(Some(cut));
    }
    // No word boundary where one was wanted: a late clause end still starts
    // speech before the whole sentence is made.
    Ok(clause_end.map(|(k, _)| cut_after_clause(first, k)))
}

fn cut_after_clause(sentence: &Sentence, k: usize) -> [Planned; 2] {
    let (head, rest) = sentence.clauses.split_at(k);
    [
        planned(&sentence_of(head), false),
        planned(&sentence_of(rest), true),
    ]
}

/// `sentence` cut at a word boundary in the clause where its first
/// `shortest` phonemes end. The two sides are phonemized again, the first
/// with a comma after its last word, so that it ends as a clause that goes
/// on; espeak-ng then gives exact text ranges, which phonemes alone cannot
/// (its words are not the text's: "on the" is one, "3.5" three).
fn cut_between_words(
    espeak: &Espeak,
    voice: &str,
    text: &str,
    sentence: &Sentence,
    shortest: usize,
) -> Result<Option<[Planned; 2]>, EspeakError> {
    // The clause in which the shortest first piece ends.
    let mut before = 0;
    let Some((j, clause)) = sentence.clauses.iter().enumerate().find(|(_, clause)| {
        let length = clause_phonemes(std::slice::from_ref(clause)).len();
        if before + length > shortest {
            return true;
        }
        before += length;
        false
    }) else {
        return Ok(None);
    };
    let Some(words) = text.get(clause.text.clone()) else {
        return Ok(None);
    };
    let starts = word_starts(words);
    if starts.is_empty() {
        return Ok(None);
    }
    // Phonemes follow letters closely enough within a clause to guess the
    // word; the loop below moves on when the guess was short.
    let length = clause_phonemes(std::slice::from_ref(clause)).len().max(1);
    let guess = (shortest - before) * words.trim_end().len() / length;
    // From the word before the guess: one try more, but no overshoot.
    let from = starts
        .iter()
        .position(|&start| start > guess)
        .unwrap_or(starts.len())
        .saturating_sub(1);
    for &start in starts.iter().skip(from).take(WORD_CUT_TRIES) {
        let cut = clause.text.start + start;
        let Some(said) = text.get(clause.text.start..cut) else {
            continue;
        };
        let mut head: Vec<Clause> = sentence.clauses[..j].to_vec();
        head.extend(clauses_of(espeak, voice, &format!("{},", said.trim_end()))?);
        if let Some(last) = head.last_mut() {
            // The comma is what makes piper end the piece as a clause that
            // goes on, whatever espeak-ng made of the words before it.
            last.punctuation = Some(',');
            last.sentence_end = false;
        }
        let first = clause_phonemes(&head);
        if first.len() < shortest {
            continue;
        }
        let rest_text = text.get(cut..clause.text.end).unwrap_or("");
        let mut rest = clauses_of(espeak, voice, rest_text)?;
        rest.extend_from_slice(&sentence.clauses[j + 1..]);
        let rest = clause_phonemes(&rest);
        if rest.len() < MIN_LEAD_PHONEMES || !rest.iter().any(|c| c.is_alphabetic()) {
            // Later words leave even less for the rest.
            return Ok(None);
        }
        if !fits(first.len(), rest.len()) {
            continue;
        }
        return Ok(Some([
            Planned {
                text: sentence.text.start..cut,
                phonemes: first,
                continues: false,
            },
            Planned {
                text: cut..sentence.text.end,
                phonemes: rest,
                continues: true,
            },
        ]));
    }
    Ok(None)
}

/// Byte offsets in `clause` where a word starts after white space, up to
/// the last word (the white space after the clause is not a boundary).
fn word_starts(clause: &str) -> Vec<usize> {
    // A no-break space keeps its neighbours together ("10\u{a0}km").
    let breaks = |c: char| c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}');
    let spoken = clause.trim_end();
    spoken
        .char_indices()
        .zip(spoken.chars().skip(1))
        .filter(|((_, c), next)| breaks(*c) && !next.is_whitespace())
        .map(|((at, c), _)| at + c.len_utf8())
        .collect()
}

fn clauses_of(espeak: &Espeak, voice: &str, text: &str) -> Result<Vec<Clause>, EspeakError> {
    Ok(phonemize(espeak, voice, text)?
        .into_iter()
        .flat_map(|sentence| sentence.clauses)
        .collect())
}

fn sentence_of(clauses: &[Clause]) -> Sentence {
    let start = clauses.first().map_or(0, |c| c.text.start);
    let end = clauses.last().map_or(start, |c| c.text.end);
    Sentence {
        text: start..end,
        clauses: clauses.to_vec(),
    }
}

fn planned(sentence: &Sentence, continues: bool) -> Planned {
    Planned {
        text: sentence.text.clone(),
        phonemes: sentence.phonemes(),
        continues,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_piece_covers_making_the_rest() {
        // A sentence of 90 phonemes: a first piece of 30 plays while the
        // other 60 are made at half of real time.
        assert_eq!(shortest_lead(90), 30);
        assert!(fits(30, 60));
        assert!(!fits(29, 61));
        // Short sides are never cut off, whatever the ratio.
        assert_eq!(shortest_lead(30), MIN_LEAD_PHONEMES);
        assert!(!fits(MIN_LEAD_PHONEMES - 1, MIN_LEAD_PHONEMES));
        assert!(!fits(100, MIN_LEAD_PHONEMES - 1));
        assert!(fits(MIN_LEAD_PHONEMES, MIN_LEAD_PHONEMES));
    }

    #[test]
    fn words_start_after_white_space() {
        assert_eq!(word_starts("Turn on  the lights, "), vec![5, 9, 13]);
        assert_eq!(word_starts("Hello "), Vec::<usize>::new());
        // Multi-byte letters; a no-break space is no boundary.
        assert_eq!(word_starts("Café\u{a0}olé\u{2003}done"), vec![14]);
    }
}
