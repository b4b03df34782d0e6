//! Interpreting what a person in the room said.
//!
//! Transcripts come from speech-to-text (whisper and friends), so they arrive with arbitrary
//! casing, punctuation and the odd misspelling. Every decision here is therefore made on
//! normalised words ([`words`]) rather than raw text. Three questions are answered: did the person
//! say yes or no ([`YesNo`]), which of several options did they pick ([`choose`]), and which agent
//! are they talking to ([`Addressing`]).
//!
//! When in doubt every function answers "unclear" (or "not addressed"): the caller can always ask
//! again, while acting on a misheard yes cannot be undone.

use std::cmp::Ordering;

/// A word of a transcript together with where it sits in the original text, so that callers who
/// need the person's own wording back (see [`Addressed::rest`]) can slice it out.
struct Token {
    word: String,
    start: usize,
    end: usize,
}

/// Whisper emits both the ASCII and the typographic apostrophe, sometimes in one transcript.
fn is_apostrophe(c: char) -> bool {
    c == '\'' || c == '\u{2019}'
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let in_word = c.is_alphanumeric() || is_apostrophe(c);
        match (in_word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push_token(text, s, i, &mut out);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push_token(text, s, text.len(), &mut out);
    }
    out
}

fn push_token(text: &str, start: usize, end: usize, out: &mut Vec<Token>) {
    let raw = &text[start..end];
    // Apostrophes at the edges are quotation marks ('yes') or elisions, not part of the word.
    let left = raw.trim_start_matches(is_apostrophe);
    let start = start + (raw.len() - left.len());
    let kept = left.trim_end_matches(is_apostrophe);
    if kept.is_empty() {
        return;
    }
    let word = kept
        .chars()
        .map(|c| if is_apostrophe(c) { '\'' } else { c })
        .flat_map(char::to_lowercase)
        .collect();
    out.push(Token {
        word,
        start,
        end: start + kept.len(),
    });
}

/// Words of a transcript: lowercase; letters, digits and apostrophes (' and ’ both become ') kept,
/// everything else separates words; an apostrophe at either end of a word is dropped.
///
/// `"Yes, do it!"` → `["yes", "do", "it"]`; `"Don’t."` → `["don't"]`;
/// `"Claude-Code:"` → `["claude", "code"]`.
#[must_use]
pub fn words(text: &str) -> Vec<String> {
    tokens(text).into_iter().map(|t| t.word).collect()
}

/// Punctuation that ends a clause. A pause the transcriber marked this way means the words on
/// either side were not said as one phrase.
const CLAUSE_BREAKS: &[char] = &[',', '.', ';', ':', '!', '?', '…', '–', '—'];

fn clause_break_between(text: &str, before: &Token, after: &Token) -> bool {
    text.get(before.end..after.start)
        .is_some_and(|gap| gap.contains(CLAUSE_BREAKS))
}

fn starts_with<S: AsRef<str>>(words: &[&str], phrase: &[S]) -> bool {
    phrase.len() <= words.len() && phrase.iter().zip(words).all(|(p, w)| p.as_ref() == *w)
}

/// Words people put in front of an answer without changing it.
const FILLERS: &[&str] = &[
    "uh", "uhm", "um", "erm", "er", "ah", "hm", "hmm", "well", "oh", "so", "and", "i", "think",
    "guess", "say", "please",
];

fn is_filler(word: &str) -> bool {
    FILLERS.contains(&word)
}

/// The person's answer to a yes/no question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    Unclear,
}

/// Phrase lists for yes and no (each phrase one or more words).
#[derive(Debug, Clone)]
pub struct YesNo {
    yes: Vec<Vec<String>>,
    no: Vec<Vec<String>>,
}

/// One phrase found by [`YesNo::scan`]: `len` words from word `start`.
#[derive(Clone, Copy)]
struct PhraseMatch {
    start: usize,
    len: usize,
    answer: Answer,
}

impl YesNo {
    /// The built-in English yes phrases.
    pub const DEFAULT_YES: &'static [&'static str] = &[
        "yes",
        "yeah",
        "yep",
        "yup",
        "sure",
        "okay",
        "ok",
        "go ahead",
        "do it",
        "please do",
        "of course",
        "absolutely",
        "affirmative",
        "correct",
        "that's right",
        "alright",
        "all right",
    ];

    /// The built-in English no phrases.
    pub const DEFAULT_NO: &'static [&'static str] = &[
        "no",
        "nope",
        "nah",
        "don't",
        "do not",
        "don't do it",
        "do not do it",
        "stop",
        "cancel",
        "not now",
        "no way",
        "negative",
        "never",
        "wait",
    ];

    /// Builds from lists (normalised with [`words`]).
    ///
    /// # Errors
    ///
    /// An empty list ([`WordsError::EmptyList`]), a phrase with no words
    /// ([`WordsError::EmptyPhrase`], `list` is `"yes"` or `"no"`, `index` 0-based), the same
    /// phrase in both lists ([`WordsError::InBoth`]). The yes list is checked before the no list.
    pub fn new(yes: &[String], no: &[String]) -> Result<Self, WordsError> {
        let yes = checked_phrases(yes, "yes")?;
        let no = checked_phrases(no, "no")?;
        if let Some(phrase) = yes.iter().find(|p| no.contains(p)) {
            return Err(WordsError::InBoth {
                phrase: phrase.join(" "),
            });
        }
        Ok(Self { yes, no })
    }

    /// Classifies a transcript.
    ///
    /// The transcript is split with [`words`] and scanned left to right; at each position the
    /// longest phrase of either list that starts there is taken ("don't do it" beats "don't" +
    /// "do it") and consumes its words, other words are skipped. The answer is [`Answer::Yes`]
    /// ([`Answer::No`]) only if
    /// - every word before the first phrase is filler ("uh", "um", "erm", "well", "oh", "hmm",
    ///   "so", "and", "i", "think", "guess", "say", "please", and a few more hesitation
    ///   spellings),
    /// - that first phrase is a yes (no) phrase and no phrase of the other list appears anywhere,
    /// - and the "I don't know" rule does not apply: if "i" is among the leading fillers and the
    ///   word right after the first phrase (with no clause-ending punctuation in between) is
    ///   neither filler nor the start of another phrase, the phrase is part of a statement about
    ///   the speaker ("I don't know", "I do not care"), not an answer.
    ///
    /// Anything else is [`Answer::Unclear`]. So "Sure, why not" is Yes ("not" alone is no
    /// phrase), "I don't think so" is No ("think" is filler), "Okay, but not now" and "Yeah, no."
    /// are Unclear.
    #[must_use]
    pub fn classify(&self, transcript: &str) -> Answer {
        let toks = tokens(transcript);
        let words: Vec<&str> = toks.iter().map(|t| t.word.as_str()).collect();
        let found = self.scan(&words);
        let Some(first) = found.first().copied() else {
            return Answer::Unclear;
        };
        let lead = &words[..first.start];
        if !lead.iter().all(|w| is_filler(w)) {
            return Answer::Unclear;
        }
        if found.iter().any(|m| m.answer != first.answer) {
            return Answer::Unclear;
        }
        let next = first.start + first.len;
        let statement = lead.contains(&"i")
            && words.get(next).is_some_and(|w| !is_filler(w))
            && !clause_break_between(transcript, &toks[next - 1], &toks[next])
            && !found.iter().any(|m| m.start == next);
        if statement {
            return Answer::Unclear;
        }
        first.answer
    }

    fn scan(&self, words: &[&str]) -> Vec<PhraseMatch> {
        let mut found = Vec::new();
        let mut at = 0;
        while at < words.len() {
            match self.longest_at(&words[at..]) {
                Some((len, answer)) => {
                    found.push(PhraseMatch {
                        start: at,
                        len,
                        answer,
                    });
                    at += len;
                }
                None => at += 1,
            }
        }
        found
    }

    fn longest_at(&self, words: &[&str]) -> Option<(usize, Answer)> {
        let yes = self.yes.iter().map(|p| (p, Answer::Yes));
        let no = self.no.iter().map(|p| (p, Answer::No));
        yes.chain(no)
            .filter(|(phrase, _)| starts_with(words, phrase))
            .map(|(phrase, answer)| (phrase.len(), answer))
            .max_by_key(|&(len, _)| len)
    }
}

impl Default for YesNo {
    /// [`YesNo::DEFAULT_YES`] and [`YesNo::DEFAULT_NO`]; the tests check they pass
    /// [`YesNo::new`], which is why this can skip validation instead of panicking.
    fn default() -> Self {
        Self {
            yes: normalised_phrases(Self::DEFAULT_YES),
            no: normalised_phrases(Self::DEFAULT_NO),
        }
    }
}

fn normalised_phrases<S: AsRef<str>>(list: &[S]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::with_capacity(list.len());
    for phrase in list.iter().map(|p| words(p.as_ref())) {
        // Duplicates within one list are harmless ("OK" and "ok"), so they are merged silently.
        if !phrase.is_empty() && !out.contains(&phrase) {
            out.push(phrase);
        }
    }
    out
}

fn checked_phrases(list: &[String], name: &'static str) -> Result<Vec<Vec<String>>, WordsError> {
    if list.is_empty() {
        return Err(WordsError::EmptyList { list: name });
    }
    if let Some(index) = list.iter().position(|p| words(p).is_empty()) {
        return Err(WordsError::EmptyPhrase { list: name, index });
    }
    Ok(normalised_phrases(list))
}

/// How the person picked an option in [`choose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Option `index` (0-based), named by its words.
    Named(usize),
    /// Option `index`, by its position ("the second one", "number two", "two", "option 3",
    /// "the last one", "first").
    Ordinal(usize),
    /// The person said none of them ("none", "neither", "none of them", "nothing", "no",
    /// "neither of those", "none of those").
    NoneOfThem,
    /// Nothing matched, or two options matched equally.
    Unclear,
}

const MIN_OPTIONS: usize = 2;
const MAX_OPTIONS: usize = 8;
const MAX_OPTION_CHARS: usize = 200;

/// Words that say nothing about which option is meant.
const STOP_WORDS: &[&str] = &[
    "the", "a", "an", "of", "to", "and", "or", "in", "on", "at", "for", "with", "one", "option",
    "please", "i", "want", "like", "would", "let's", "lets", "pick", "choose", "take", "go",
];

/// Words that reject every option ("no" is handled separately because it also starts
/// corrections like "no, the second one").
const NONE_WORDS: &[&str] = &["none", "neither", "nothing"];

/// Ordinal words by position: entry `i` names option `i`.
const ORDINALS: &[&[&str]] = &[
    &["first", "one", "1", "1st"],
    &["second", "two", "2", "2nd"],
    &["third", "three", "3", "3rd"],
    &["fourth", "four", "4", "4th"],
    &["fifth", "five", "5", "5th"],
    &["sixth", "six", "6", "6th"],
    &["seventh", "seven", "7", "7th"],
    &["eighth", "eight", "8", "8th"],
];

/// Spoken numbers, so that "two pm" matches an option written "2 pm".
const NUMBER_WORDS: &[(&str, &str)] = &[
    ("zero", "0"),
    ("one", "1"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("thirteen", "13"),
    ("fourteen", "14"),
    ("fifteen", "15"),
    ("sixteen", "16"),
    ("seventeen", "17"),
    ("eighteen", "18"),
    ("nineteen", "19"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("forty", "40"),
    ("fifty", "50"),
];

/// Checks [`choose`]'s options: 2–8 of them ([`WordsError::OptionCount`]), each at most 200
/// characters ([`WordsError::OptionTooLong`]) with at least one word
/// ([`WordsError::EmptyOption`]), and no two the same after [`words`] normalisation
/// ([`WordsError::DuplicateOptions`]).
///
/// # Errors
///
/// The first problem found, in option order, as one of the errors above; indices are 0-based.
pub fn check_options(options: &[String]) -> Result<(), WordsError> {
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&options.len()) {
        return Err(WordsError::OptionCount { got: options.len() });
    }
    let mut seen: Vec<Vec<String>> = Vec::with_capacity(options.len());
    for (index, option) in options.iter().enumerate() {
        let chars = option.chars().count();
        if chars > MAX_OPTION_CHARS {
            return Err(WordsError::OptionTooLong { index, chars });
        }
        let option_words = words(option);
        if option_words.is_empty() {
            return Err(WordsError::EmptyOption { index });
        }
        if let Some(first) = seen.iter().position(|s| *s == option_words) {
            return Err(WordsError::DuplicateOptions {
                first,
                second: index,
            });
        }
        seen.push(option_words);
    }
    Ok(())
}

/// Which option the transcript picks, in this order:
///
/// 1. "None"-style answers ("none", "neither", "nothing" anywhere) give [`Choice::NoneOfThem`]
///    unless the transcript also names one option by its words (step 2).
/// 2. The options' own words: each option scores the fraction of its content words heard in the
///    transcript. Content words leave out a stop list ("the", "of", "one", "option", "pick", …)
///    and words every option shares (in "Meet on Tuesday at 2 pm" / "Meet on Wednesday at 3 pm"
///    only "tuesday 2" and "wednesday 3" tell them apart), falling back to the non-stop words and
///    then to all words. Spoken numbers match digits ("two" = "2"), and a plain word of at least
///    4 letters also matches when one is a prefix of the other or their edit distance is at most
///    `max(1, shorter length / 5)`, because transcribers misspell ("pizzas", "Tuesdays"). The
///    best option wins with a score of at least 0.5 that is strictly above the runner-up; a tie
///    at the top is [`Choice::Unclear`].
/// 3. Ordinals: "first"/"one"/"1"/"1st" … "eighth"/"eight"/"8"/"8th" and "last", counting only
///    positions that exist. "one" right after "the", "this", "that", "which", "last" or another
///    ordinal is the pronoun ("the second one"). Two different positions are Unclear.
/// 4. "no" as the first non-filler word is [`Choice::NoneOfThem`]; it comes after ordinals so
///    that "no, the second one" is a correction, not a refusal.
///
/// Invalid options (see [`check_options`]) never panic; they just tend to give Unclear.
#[must_use]
pub fn choose(transcript: &str, options: &[String]) -> Choice {
    let heard = words(transcript);
    if heard.is_empty() || options.is_empty() {
        return Choice::Unclear;
    }
    let named = named_option(&heard, options);
    if heard.iter().any(|w| NONE_WORDS.contains(&w.as_str())) && !matches!(named, Named::One(_)) {
        return Choice::NoneOfThem;
    }
    match named {
        Named::One(index) => return Choice::Named(index),
        Named::Tie => return Choice::Unclear,
        Named::Nothing => {}
    }
    let mut positions = ordinal_positions(&heard, options.len());
    positions.dedup();
    match positions.as_slice() {
        [index] => return Choice::Ordinal(*index),
        [_, _, ..] => return Choice::Unclear,
        [] => {}
    }
    if heard
        .iter()
        .find(|w| !is_filler(w))
        .is_some_and(|w| w == "no")
    {
        return Choice::NoneOfThem;
    }
    Choice::Unclear
}

enum Named {
    One(usize),
    Tie,
    Nothing,
}

/// A transcript word prepared for matching against option words.
struct Heard {
    word: String,
    /// Words with a meaning of their own in `choose` (stop, ordinal and none words) must match
    /// exactly, or "three" would pass for "tree" and "none" for "nine".
    fuzzy: bool,
}

fn named_option(heard: &[String], options: &[String]) -> Named {
    let heard: Vec<Heard> = heard
        .iter()
        .flat_map(|w| split_digits(w))
        .map(|piece| Heard {
            fuzzy: !STOP_WORDS.contains(&piece)
                && !NONE_WORDS.contains(&piece)
                && ordinal_number(piece).is_none(),
            word: canonical(piece),
        })
        .collect();
    let mut best: Option<(usize, (usize, usize))> = None;
    let mut tie = false;
    for (index, content) in content_words(options).iter().enumerate() {
        let total = content.len();
        let hits = content
            .iter()
            .filter(|word| heard.iter().any(|h| word_matches(h, word)))
            .count();
        if total == 0 || 2 * hits < total {
            continue;
        }
        let score = (hits, total);
        match best.map(|(_, b)| compare_fractions(score, b)) {
            None | Some(Ordering::Greater) => {
                best = Some((index, score));
                tie = false;
            }
            Some(Ordering::Equal) => tie = true,
            Some(Ordering::Less) => {}
        }
    }
    match best {
        Some(_) if tie => Named::Tie,
        Some((index, _)) => Named::One(index),
        None => Named::Nothing,
    }
}

/// Compares `a.0 / a.1` with `b.0 / b.1` without floating point, so equal scores tie exactly.
fn compare_fractions(a: (usize, usize), b: (usize, usize)) -> Ordering {
    (a.0 * b.1).cmp(&(b.0 * a.1))
}

fn content_words(options: &[String]) -> Vec<Vec<String>> {
    // (canonical word, is a stop word) for each option.
    let per_option: Vec<Vec<(String, bool)>> = options
        .iter()
        .map(|option| {
            words(option)
                .iter()
                .flat_map(|w| split_digits(w))
                .map(|piece| (canonical(piece), STOP_WORDS.contains(&piece)))
                .collect()
        })
        .collect();
    let shared = |word: &str| {
        per_option
            .iter()
            .all(|other| other.iter().any(|(w, _)| w == word))
    };
    per_option
        .iter()
        .map(|option| {
            let pick = |keep: &dyn Fn(&(String, bool)) -> bool| -> Vec<String> {
                let mut out: Vec<String> = Vec::new();
                for (word, _) in option.iter().filter(|entry| keep(entry)) {
                    if !out.contains(word) {
                        out.push(word.clone());
                    }
                }
                out
            };
            let distinct = pick(&|(w, stop)| !stop && !shared(w));
            if !distinct.is_empty() {
                return distinct;
            }
            let content = pick(&|(_, stop)| !stop);
            if !content.is_empty() {
                return content;
            }
            pick(&|_| true)
        })
        .collect()
}

/// Splits where digits meet letters: transcribers write "2pm" as often as "2 pm".
fn split_digits(word: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut previous: Option<bool> = None;
    for (i, c) in word.char_indices() {
        let digit = c.is_numeric();
        if previous.is_some_and(|p| p != digit) {
            pieces.push(&word[start..i]);
            start = i;
        }
        previous = Some(digit);
    }
    if start < word.len() {
        pieces.push(&word[start..]);
    }
    pieces
}

fn canonical(word: &str) -> String {
    NUMBER_WORDS
        .iter()
        .find(|(spoken, _)| *spoken == word)
        .map_or(word, |(_, digits)| digits)
        .to_string()
}

fn word_matches(heard: &Heard, option_word: &str) -> bool {
    heard.word == option_word || (heard.fuzzy && similar(&heard.word, option_word))
}

fn similar(a: &str, b: &str) -> bool {
    let letters = |w: &str| w.chars().all(char::is_alphabetic);
    if !letters(a) || !letters(b) {
        // Numbers must match exactly: "2024" is not "2025".
        return false;
    }
    let shorter = a.chars().count().min(b.chars().count());
    if shorter < 4 {
        return false;
    }
    a.starts_with(b) || b.starts_with(a) || edit_distance(a, b) <= (shorter / 5).max(1)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// 1-based position named by an ordinal word, if it is one ("last" aside).
fn ordinal_number(word: &str) -> Option<usize> {
    ORDINALS
        .iter()
        .position(|forms| forms.contains(&word))
        .map(|i| i + 1)
}

fn ordinal_positions(heard: &[String], count: usize) -> Vec<usize> {
    let is_ordinal = |w: &str| w == "last" || ordinal_number(w).is_some();
    let mut positions = Vec::new();
    for (i, word) in heard.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|p| heard.get(p));
        let pronoun = word == "one"
            && previous.is_some_and(|p| {
                is_ordinal(p) || ["the", "this", "that", "which"].contains(&p.as_str())
            });
        if pronoun {
            continue;
        }
        let number = if word == "last" {
            Some(count)
        } else {
            ordinal_number(word)
        };
        if let Some(n) = number
            && (1..=count).contains(&n)
            && !positions.contains(&(n - 1))
        {
            positions.push(n - 1);
        }
    }
    positions
}

/// Who an utterance is addressed to, from its first words.
#[derive(Debug, Clone, Default)]
pub struct Addressing {
    agents: Vec<Agent>,
}

#[derive(Debug, Clone)]
struct Agent {
    name: String,
    spoken: Vec<Vec<String>>,
}

/// The result of [`Addressing::address`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addressed {
    /// The agent's name as registered (the first argument of [`Addressing::add`]).
    pub agent: String,
    /// The rest of the utterance after the address, with the original text's casing and
    /// punctuation from the first kept word on ("Claude, what's the time?" → "what's the time?";
    /// "tell Cursor to open the file" → "open the file"). Trailing whitespace is trimmed.
    pub rest: String,
}

/// Ways of starting an utterance to an agent: words before the name, and words that may follow
/// the name as part of the address rather than the message ("tell Claude *that* …").
const SHAPES: &[(&[&str], &[&str])] = &[
    (&[], &[]),
    (&["hey"], &[]),
    (&["hi"], &[]),
    (&["ok"], &[]),
    (&["okay"], &[]),
    (&["tell"], &["to", "that"]),
    (&["ask"], &["to"]),
    (&["message", "for"], &[]),
    (&["note", "for"], &[]),
];

impl Addressing {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an agent: `name` as registered (e.g. a client's name "claude-code") and spoken
    /// forms (`aliases`, e.g. `["claude", "clod"]`). The name, normalised with [`words`], is
    /// always a spoken form too ("claude-code" is spoken "claude code"). Registering the same
    /// name again merges the aliases; aliases without words are ignored.
    pub fn add(&mut self, name: &str, aliases: &[String]) {
        let spoken: Vec<Vec<String>> = std::iter::once(name)
            .chain(aliases.iter().map(String::as_str))
            .map(words)
            .filter(|form| !form.is_empty())
            .collect();
        let index = if let Some(index) = self.agents.iter().position(|a| a.name == name) {
            index
        } else {
            self.agents.push(Agent {
                name: name.to_string(),
                spoken: Vec::new(),
            });
            self.agents.len() - 1
        };
        let agent = &mut self.agents[index];
        for form in spoken {
            if !agent.spoken.contains(&form) {
                agent.spoken.push(form);
            }
        }
    }

    /// The agent the utterance starts by naming, if any.
    ///
    /// Accepted shapes (case and punctuation ignored): `<name>, …`, `<name> …`, `hey <name> …`,
    /// `hi <name> …`, `ok/okay <name> …`, `tell <name> [to|that] …`, `ask <name> [to] …`,
    /// `message for <name> …`, `note for <name> …`, each optionally with "please" after the
    /// name. The bracketed words and "please" are not part of `rest`. The longest matching spoken
    /// form wins ("Claude code, run the tests" picks "claude code" over "claude"); on equal
    /// length the agent registered first wins. A spoken form of several words must not be split
    /// by clause-ending punctuation ("Claude, code review" is "claude"). Only the start counts:
    /// "I told Claude yesterday" is not addressed; "Claude." is addressed with an empty `rest`.
    #[must_use]
    pub fn address(&self, transcript: &str) -> Option<Addressed> {
        let toks = tokens(transcript);
        let words: Vec<&str> = toks.iter().map(|t| t.word.as_str()).collect();
        // (spoken form length, agent, index of the first word of `rest`)
        let mut best: Option<(usize, &Agent, usize)> = None;
        for &(prefix, linkers) in SHAPES {
            if !starts_with(&words, prefix) {
                continue;
            }
            let at = prefix.len();
            for agent in &self.agents {
                for form in &agent.spoken {
                    let len = form.len();
                    let said = starts_with(&words[at..], form)
                        && (at + 1..at + len)
                            .all(|i| !clause_break_between(transcript, &toks[i - 1], &toks[i]));
                    if !said || best.is_some_and(|(best_len, _, _)| len <= best_len) {
                        continue;
                    }
                    let mut end = at + len;
                    if words.get(end).is_some_and(|w| linkers.contains(w)) {
                        end += 1;
                    }
                    if words.get(end) == Some(&"please") {
                        end += 1;
                    }
                    best = Some((len, agent, end));
                }
            }
        }
        let (_, agent, end) = best?;
        let rest = toks
            .get(end)
            .and_then(|t| transcript.get(t.start..))
            .unwrap_or("")
            .trim_end()
            .to_string();
        Some(Addressed {
            agent: agent.name.clone(),
            rest,
        })
    }
}

/// Everything that can be wrong with the configuration or arguments this module checks.
///
/// Indices are 0-based in the values and 1-based ("counting from 1") in the messages, because
/// the messages are read by people and agents who count options from one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordsError {
    /// A `confirm.yes` / `confirm.no` phrase (`list` is `"yes"` or `"no"`) has no words.
    #[error("`confirm.{list}` phrase {} (counting from 1) has no words; remove it or give it a word", index + 1)]
    EmptyPhrase { list: &'static str, index: usize },
    /// `confirm.yes` or `confirm.no` has no phrases.
    #[error("`confirm.{list}` is empty; give it at least one phrase")]
    EmptyList { list: &'static str },
    /// A phrase is in both `confirm.yes` and `confirm.no`.
    #[error(
        "\"{phrase}\" is in both `confirm.yes` and `confirm.no`; a phrase can only mean one answer"
    )]
    InBoth { phrase: String },
    /// `choose` needs 2 to 8 options.
    #[error("choose takes {MIN_OPTIONS} to {MAX_OPTIONS} options, got {got}")]
    OptionCount { got: usize },
    /// An option has no words.
    #[error("option {} (counting from 1) has no words; give every option at least one word", index + 1)]
    EmptyOption { index: usize },
    /// An option is longer than 200 characters.
    #[error("option {} (counting from 1) is {chars} characters long; options can be at most {MAX_OPTION_CHARS} characters", index + 1)]
    OptionTooLong { index: usize, chars: usize },
    /// Two options have the same words.
    #[error("options {} and {} (counting from 1) are the same once case and punctuation are ignored; give each option different words", first + 1, second + 1)]
    DuplicateOptions { first: usize, second: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    // ---- words ----

    #[test]
    fn words_examples() {
        assert_eq!(
            words("Yes, do it!"),
            ["yes", "do", "it"],
            "punctuation separates"
        );
        assert_eq!(
            words("Don’t."),
            ["don't"],
            "typographic apostrophe becomes '"
        );
        assert_eq!(
            words("Claude-Code:"),
            ["claude", "code"],
            "hyphen separates"
        );
    }

    #[test]
    fn words_edge_cases() {
        assert!(words("").is_empty(), "empty text has no words");
        assert!(
            words("  ...!? ").is_empty(),
            "punctuation only has no words"
        );
        assert_eq!(words("'yes'"), ["yes"], "quotes at the edges are dropped");
        assert_eq!(
            words("’’’"),
            Vec::<String>::new(),
            "apostrophes alone are no word"
        );
        assert_eq!(
            words("Option 3, 2pm"),
            ["option", "3", "2pm"],
            "digits are kept"
        );
        assert_eq!(
            words("ROCK’N’ROLL"),
            ["rock'n'roll"],
            "inner apostrophes kept"
        );
        assert_eq!(
            words("Crème BRÛLÉE"),
            ["crème", "brûlée"],
            "unicode letters lowercase"
        );
        assert_eq!(words("a_b@c"), ["a", "b", "c"], "symbols separate");
    }

    #[test]
    fn tokens_keep_byte_spans() {
        let text = "Héllo, ’world’!";
        let toks = tokens(text);
        assert_eq!(toks.len(), 2, "two words");
        assert_eq!(
            &text[toks[0].start..toks[0].end],
            "Héllo",
            "span of first word"
        );
        assert_eq!(
            &text[toks[1].start..toks[1].end],
            "world",
            "span excludes edge apostrophes"
        );
    }

    // ---- yes / no ----

    #[test]
    fn defaults_are_valid() {
        let built = YesNo::new(&strings(YesNo::DEFAULT_YES), &strings(YesNo::DEFAULT_NO));
        assert!(built.is_ok(), "default lists pass validation: {built:?}");
    }

    #[test]
    fn classify_examples() {
        let yn = YesNo::default();
        let cases = [
            ("Yes.", Answer::Yes),
            ("Yeah, go ahead.", Answer::Yes),
            ("Sure, why not", Answer::Yes),
            ("No, don't do it.", Answer::No),
            ("Nope", Answer::No),
            ("Not now.", Answer::No),
            ("Please don't.", Answer::No),
            ("I don't know", Answer::Unclear),
            ("Okay, but not now", Answer::Unclear),
            ("Yeah, no.", Answer::Unclear),
            ("", Answer::Unclear),
            ("What do you mean?", Answer::Unclear),
            ("Maybe later", Answer::Unclear),
            ("Yes please", Answer::Yes),
            ("Um, yes.", Answer::Yes),
            ("OK.", Answer::Yes),
            ("Stop!", Answer::No),
            ("Cancel that.", Answer::No),
            ("Absolutely, do it now.", Answer::Yes),
            ("Don't.", Answer::No),
            ("Do it.", Answer::Yes),
            ("Do not do it", Answer::No),
        ];
        for (text, expected) in cases {
            assert_eq!(yn.classify(text), expected, "classify({text:?})");
        }
    }

    #[test]
    fn classify_longest_phrase_wins() {
        // With only "don't" and "do it" a shorter scan would see both lists.
        let yn = YesNo::new(&strings(&["do it"]), &strings(&["don't", "don't do it"]))
            .expect("valid lists");
        assert_eq!(
            yn.classify("Don't do it"),
            Answer::No,
            "don't do it is one phrase"
        );
        let short = YesNo::new(&strings(&["do it"]), &strings(&["don't"])).expect("valid lists");
        assert_eq!(
            short.classify("Don't do it"),
            Answer::Unclear,
            "without the long phrase both lists appear"
        );
    }

    #[test]
    fn classify_filler_and_statement_rule() {
        let yn = YesNo::default();
        assert_eq!(
            yn.classify("I don't think so"),
            Answer::No,
            "think is filler"
        );
        assert_eq!(yn.classify("I do not know."), Answer::Unclear, "statement");
        assert_eq!(yn.classify("I guess yes"), Answer::Yes, "filler then yes");
        assert_eq!(
            yn.classify("I don't, no."),
            Answer::No,
            "comma ends the phrase"
        );
        assert_eq!(
            yn.classify("Well, cancel that"),
            Answer::No,
            "no i: object allowed"
        );
        assert_eq!(
            yn.classify("Please do it now"),
            Answer::Yes,
            "please do is a phrase"
        );
        assert_eq!(
            yn.classify("Hmm so yes, wait"),
            Answer::Unclear,
            "wait is a no"
        );
        assert_eq!(
            yn.classify("Maybe yes"),
            Answer::Unclear,
            "maybe is not filler"
        );
        assert_eq!(
            yn.classify("That’s right!"),
            Answer::Yes,
            "unicode apostrophe phrase"
        );
        assert_eq!(yn.classify("Um... uh..."), Answer::Unclear, "filler only");
    }

    #[test]
    fn classify_custom_lists() {
        let yn =
            YesNo::new(&strings(&["ja", "Make it so!"]), &strings(&["nein"])).expect("valid lists");
        assert_eq!(
            yn.classify("Make it so."),
            Answer::Yes,
            "custom multi-word phrase"
        );
        assert_eq!(yn.classify("Nein"), Answer::No, "custom no");
        assert_eq!(
            yn.classify("Yes"),
            Answer::Unclear,
            "defaults are not included"
        );
    }

    #[test]
    fn yes_no_new_errors() {
        assert_eq!(
            YesNo::new(&strings(&["yes", " , "]), &strings(&["no"])).unwrap_err(),
            WordsError::EmptyPhrase {
                list: "yes",
                index: 1
            },
            "empty yes phrase"
        );
        assert_eq!(
            YesNo::new(&strings(&["yes"]), &strings(&["no", "", "x"])).unwrap_err(),
            WordsError::EmptyPhrase {
                list: "no",
                index: 1
            },
            "empty no phrase"
        );
        assert_eq!(
            YesNo::new(&[], &strings(&["no"])).unwrap_err(),
            WordsError::EmptyList { list: "yes" },
            "empty yes list"
        );
        assert_eq!(
            YesNo::new(&strings(&["yes"]), &[]).unwrap_err(),
            WordsError::EmptyList { list: "no" },
            "empty no list"
        );
        assert_eq!(
            YesNo::new(&strings(&["yes", "Stop!"]), &strings(&["no", "stop"])).unwrap_err(),
            WordsError::InBoth {
                phrase: "stop".to_string()
            },
            "phrase in both lists after normalisation"
        );
    }

    #[test]
    fn yes_no_error_messages() {
        let msg = WordsError::EmptyPhrase {
            list: "yes",
            index: 2,
        }
        .to_string();
        assert!(
            msg.starts_with("`confirm.yes` phrase 3 (counting from 1) has no words"),
            "{msg}"
        );
        let msg = WordsError::InBoth {
            phrase: "stop".to_string(),
        }
        .to_string();
        assert!(
            msg.starts_with("\"stop\" is in both `confirm.yes` and `confirm.no`"),
            "{msg}"
        );
        let msg = WordsError::EmptyList { list: "no" }.to_string();
        assert!(msg.contains("`confirm.no` is empty"), "{msg}");
    }

    // ---- choose ----

    #[test]
    fn choose_food_examples() {
        let food = strings(&["pizza", "sushi", "tacos"]);
        let cases = [
            ("Pizza please", Choice::Named(0)),
            ("the second one", Choice::Ordinal(1)),
            ("number three", Choice::Ordinal(2)),
            ("Let's go with sushi.", Choice::Named(1)),
            ("none of them", Choice::NoneOfThem),
            ("neither", Choice::NoneOfThem),
            ("I don't know", Choice::Unclear),
            ("", Choice::Unclear),
            ("the last one", Choice::Ordinal(2)),
            ("pizzas", Choice::Named(0)),
            ("option 4", Choice::Unclear),
        ];
        for (text, expected) in cases {
            assert_eq!(choose(text, &food), expected, "choose({text:?}) from food");
        }
    }

    #[test]
    fn choose_meeting_examples() {
        let meet = strings(&["Meet on Tuesday at 2 pm", "Meet on Wednesday at 3 pm"]);
        assert_eq!(choose("Wednesday", &meet), Choice::Named(1), "Wednesday");
        assert_eq!(choose("tuesday", &meet), Choice::Named(0), "tuesday");
        assert_eq!(choose("the first", &meet), Choice::Ordinal(0), "the first");
        assert_eq!(
            choose("Tuesdays", &meet),
            Choice::Named(0),
            "plural misspelling"
        );
        assert_eq!(
            choose("Wednsday", &meet),
            Choice::Named(1),
            "dropped letter"
        );
        assert_eq!(
            choose("the three pm one", &meet),
            Choice::Named(1),
            "spoken number"
        );
        assert_eq!(
            choose("at 2pm", &meet),
            Choice::Named(0),
            "digits glued to letters"
        );
        assert_eq!(choose("meet", &meet), Choice::Unclear, "shared word only");
    }

    #[test]
    fn choose_ties_and_ordinals() {
        let colours = strings(&["red", "blue"]);
        assert_eq!(choose("red or blue", &colours), Choice::Unclear, "tie");
        assert_eq!(
            choose("neither red nor blue", &colours),
            Choice::NoneOfThem,
            "neither"
        );
        let food = strings(&["pizza", "sushi", "tacos"]);
        assert_eq!(choose("first", &food), Choice::Ordinal(0), "bare ordinal");
        assert_eq!(choose("two", &food), Choice::Ordinal(1), "bare number word");
        assert_eq!(
            choose("Option 3.", &food),
            Choice::Ordinal(2),
            "option digit"
        );
        assert_eq!(choose("the 2nd", &food), Choice::Ordinal(1), "2nd");
        assert_eq!(
            choose("the first one", &food),
            Choice::Ordinal(0),
            "one is a pronoun"
        );
        assert_eq!(
            choose("number one", &food),
            Choice::Ordinal(0),
            "number one"
        );
        assert_eq!(
            choose("first or second", &food),
            Choice::Unclear,
            "two ordinals"
        );
        assert_eq!(
            choose("the third, the last", &food),
            Choice::Ordinal(2),
            "same position"
        );
        assert_eq!(
            choose("sushi, the first", &food),
            Choice::Named(1),
            "words beat ordinals"
        );
        assert_eq!(choose("nothing", &food), Choice::NoneOfThem, "nothing");
        assert_eq!(choose("No.", &food), Choice::NoneOfThem, "bare no");
        assert_eq!(
            choose("Neither of those", &food),
            Choice::NoneOfThem,
            "neither of those"
        );
        assert_eq!(
            choose("None of those", &food),
            Choice::NoneOfThem,
            "none of those"
        );
        assert_eq!(
            choose("No, the second one", &food),
            Choice::Ordinal(1),
            "correction"
        );
        assert_eq!(
            choose("No, tacos", &food),
            Choice::Named(2),
            "no then a name"
        );
        assert_eq!(
            choose("none, pizza", &food),
            Choice::Named(0),
            "name beats none"
        );
        assert_eq!(choose("burgers", &food), Choice::Unclear, "unrelated word");
    }

    #[test]
    fn choose_fuzzy_limits() {
        let opts = strings(&["a tree", "a bush", "a flower"]);
        assert_eq!(
            choose("three", &opts),
            Choice::Ordinal(2),
            "ordinal words match exactly"
        );
        let opts = strings(&["cat", "car"]);
        assert_eq!(
            choose("cab", &opts),
            Choice::Unclear,
            "short words match exactly"
        );
        let years = strings(&["2024", "2025"]);
        assert_eq!(choose("2025", &years), Choice::Named(1), "exact number");
        let opts = strings(&["nine am", "ten am"]);
        assert_eq!(
            choose("none", &opts),
            Choice::NoneOfThem,
            "none is not nine"
        );
        let opts = strings(&["option one", "option two"]);
        assert_eq!(
            choose("option two", &opts),
            Choice::Named(1),
            "option words"
        );
        assert_eq!(
            choose("option one", &opts),
            Choice::Named(0),
            "stop-word fallback"
        );
    }

    #[test]
    fn check_options_errors() {
        assert_eq!(
            check_options(&strings(&["pizza"])),
            Err(WordsError::OptionCount { got: 1 }),
            "one option"
        );
        let nine: Vec<String> = (0..9).map(|i| format!("option {i}")).collect();
        assert_eq!(
            check_options(&nine),
            Err(WordsError::OptionCount { got: 9 }),
            "nine options"
        );
        let fifty: Vec<String> = (0..50).map(|i| format!("option {i}")).collect();
        assert_eq!(
            check_options(&fifty),
            Err(WordsError::OptionCount { got: 50 }),
            "fifty options"
        );
        assert_eq!(
            check_options(&strings(&["Pizza", "sushi", "pizza!"])),
            Err(WordsError::DuplicateOptions {
                first: 0,
                second: 2
            }),
            "duplicate after normalisation"
        );
        assert_eq!(
            check_options(&strings(&["pizza", "  "])),
            Err(WordsError::EmptyOption { index: 1 }),
            "blank option"
        );
        let long = "a".repeat(201);
        assert_eq!(
            check_options(&["pizza".to_string(), long]),
            Err(WordsError::OptionTooLong {
                index: 1,
                chars: 201
            }),
            "201-character option"
        );
        assert_eq!(
            check_options(&["pizza".to_string(), "é".repeat(200)]),
            Ok(()),
            "200 characters (not bytes) is fine"
        );
        assert_eq!(check_options(&strings(&["a", "b"])), Ok(()), "two options");
        let eight: Vec<String> = (0..8).map(|i| format!("option {i}")).collect();
        assert_eq!(check_options(&eight), Ok(()), "eight options");
    }

    #[test]
    fn check_options_messages() {
        let msg = WordsError::OptionCount { got: 1 }.to_string();
        assert_eq!(msg, "choose takes 2 to 8 options, got 1", "count message");
        let msg = WordsError::DuplicateOptions {
            first: 0,
            second: 2,
        }
        .to_string();
        assert!(
            msg.starts_with("options 1 and 3 (counting from 1) are the same"),
            "{msg}"
        );
        let msg = WordsError::OptionTooLong {
            index: 0,
            chars: 201,
        }
        .to_string();
        assert!(
            msg.contains("option 1 (counting from 1) is 201 characters"),
            "{msg}"
        );
        let msg = WordsError::EmptyOption { index: 4 }.to_string();
        assert!(
            msg.starts_with("option 5 (counting from 1) has no words"),
            "{msg}"
        );
    }

    // ---- addressing ----

    fn agents() -> Addressing {
        let mut a = Addressing::new();
        a.add("claude", &[]);
        a.add("cursor", &strings(&["", "curser"]));
        a
    }

    fn addressed(agent: &str, rest: &str) -> Option<Addressed> {
        Some(Addressed {
            agent: agent.to_string(),
            rest: rest.to_string(),
        })
    }

    #[test]
    fn address_shapes() {
        let a = agents();
        let cases = [
            ("Claude, what's the time?", "claude", "what's the time?"),
            ("Cursor, open the file", "cursor", "open the file"),
            ("claude run the tests", "claude", "run the tests"),
            ("Hey Claude, run the tests.", "claude", "run the tests."),
            ("Hi, Cursor. Build it", "cursor", "Build it"),
            ("OK Claude do it", "claude", "do it"),
            ("Okay, Claude: do it", "claude", "do it"),
            ("tell Cursor to open the file", "cursor", "open the file"),
            (
                "Tell Claude that the build broke",
                "claude",
                "the build broke",
            ),
            ("Tell Claude the build broke", "claude", "the build broke"),
            (
                "ask Claude whether it rained",
                "claude",
                "whether it rained",
            ),
            ("Ask Cursor to fix it", "cursor", "fix it"),
            ("Message for Claude: call me", "claude", "call me"),
            ("Note for cursor, buy milk", "cursor", "buy milk"),
            ("Claude please stop", "claude", "stop"),
            ("Claude.", "claude", ""),
            ("Curser, save", "cursor", "save"),
        ];
        for (text, agent, rest) in cases {
            assert_eq!(a.address(text), addressed(agent, rest), "address({text:?})");
        }
    }

    #[test]
    fn address_not_addressed() {
        let a = agents();
        assert_eq!(a.address("open the file"), None, "no name");
        assert_eq!(a.address("I told Claude"), None, "name not at the start");
        assert_eq!(
            a.address("I told Claude yesterday"),
            None,
            "name not at the start"
        );
        assert_eq!(a.address(""), None, "empty");
        assert_eq!(a.address("hey"), None, "prefix only");
        assert_eq!(Addressing::new().address("Claude, hi"), None, "no agents");
    }

    #[test]
    fn address_longest_form_wins() {
        let mut a = Addressing::new();
        a.add("claude", &[]);
        a.add("claude-code", &[]);
        assert_eq!(
            a.address("Claude code, run the tests"),
            addressed("claude-code", "run the tests"),
            "longest spoken form"
        );
        assert_eq!(
            a.address("Claude, code review please"),
            addressed("claude", "code review please"),
            "a comma splits a multi-word name"
        );
        assert_eq!(
            a.address("hey Claude-Code"),
            addressed("claude-code", ""),
            "hyphenated name spoken as written"
        );
    }

    #[test]
    fn address_merges_aliases() {
        let mut a = Addressing::new();
        a.add("claude-code", &strings(&["claude"]));
        a.add("claude-code", &strings(&["clod"]));
        assert_eq!(
            a.address("Clod, hi"),
            addressed("claude-code", "hi"),
            "second alias"
        );
        assert_eq!(
            a.address("Claude, hi"),
            addressed("claude-code", "hi"),
            "first alias"
        );
        assert_eq!(
            a.address("Claude Code, hi"),
            addressed("claude-code", "hi"),
            "name itself"
        );
        assert_eq!(a.agents.len(), 1, "one agent after merging");
    }

    #[test]
    fn address_rest_keeps_original_text() {
        let a = agents();
        assert_eq!(
            a.address("CLAUDE —  Don’t DELETE it!  "),
            addressed("claude", "Don’t DELETE it!"),
            "original casing and punctuation, trailing space trimmed"
        );
    }
}
