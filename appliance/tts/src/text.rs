//! Text as agents send it, made speakable.
//!
//! Agents write for screens: Markdown emphasis and headings, HTML tags,
//! links, code spans, emoji. Read aloud literally these become "asterisk
//! asterisk" or, for emoji, nothing at all in the middle of a sentence.
//! [`speakable`] keeps the words and drops the decoration; it never adds
//! words of its own.

/// `text` without markup and emoji, with whitespace runs collapsed (line
/// breaks kept: a blank line ends a sentence for the phonemizer).
pub fn speakable(text: &str) -> String {
    let text = strip_tags(text);
    let text = unescape_entities(&text);
    let text = markdown_links(&text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            // Emphasis, headings, code and quote markers read as symbols.
            '*' | '_' | '`' | '#' | '~' | '|' => out.push(' '),
            // A bullet at the start of a line is a pause, not "dash".
            c if is_emoji(c) => out.push(' '),
            c => out.push(c),
        }
    }
    collapse_spaces(&out)
}

/// Pictographs and the joiners and selectors that build emoji sequences.
fn is_emoji(c: char) -> bool {
    matches!(u32::from(c),
        0x1F000..=0x1FAFF   // pictographs, emoticons, transport, symbols
        | 0x2600..=0x27BF   // miscellaneous symbols, dingbats
        | 0x2B00..=0x2BFF   // arrows and shapes used as emoji
        | 0xFE00..=0xFE0F   // variation selectors
        | 0x200D            // zero-width joiner
        | 0x20E3            // keycap
        | 0xE0020..=0xE007F // tag characters (flag sequences)
    )
}

/// Removes `<tag …>` and `</tag>`; a `<` that does not open a tag (as in
/// "3 < 5") stays.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let opens_tag = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!');
        match (opens_tag, after.find('>')) {
            (true, Some(end)) if !after[..end].contains('<') => {
                // A block tag separates words.
                out.push(' ');
                rest = &after[end + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn unescape_entities(text: &str) -> String {
    const ENTITIES: [(&str, &str); 7] = [
        ("&nbsp;", " "),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&apos;", "'"),
        // Last, so "&amp;lt;" becomes "&lt;" and not "<".
        ("&amp;", "&"),
    ];
    let mut out = text.to_owned();
    for (entity, plain) in ENTITIES {
        if out.contains(entity) {
            out = out.replace(entity, plain);
        }
    }
    out
}

/// `[words](url)` → `words`; a bare URL stays (espeak-ng spells it out).
fn markdown_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else { break };
        let Some(end) = after[close + 2..].find(')') else {
            break;
        };
        if after[..close].contains('[') {
            out.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..open]);
        out.push_str(&after[..close]);
        rest = &after[close + 2 + end + 1..];
    }
    out.push_str(rest);
    out
}

fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        out.push_str(&words.join(" "));
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::speakable;

    #[test]
    fn markdown_and_html_lose_their_markers_not_their_words() {
        assert_eq!(
            speakable("**Bold** and _italic_ with `code`"),
            "Bold and italic with code"
        );
        assert_eq!(speakable("# Heading\nText"), "Heading\nText");
        assert_eq!(
            speakable("<p>Hello <b>there</b></p>, friend"),
            "Hello there , friend"
        );
        assert_eq!(
            speakable("See [the docs](https://example.com/x) now"),
            "See the docs now"
        );
        assert_eq!(speakable("Fish &amp; chips &lt;3"), "Fish & chips <3");
    }

    #[test]
    fn comparisons_are_not_tags() {
        assert_eq!(speakable("3 < 5 and 7 > 2"), "3 < 5 and 7 > 2");
        assert_eq!(speakable("a <b"), "a <b");
    }

    #[test]
    fn emoji_are_dropped() {
        assert_eq!(speakable("Done 🎉 see you 👋🏽!"), "Done see you !");
        assert_eq!(speakable("👨‍👩‍👧 ❤️"), "");
    }

    #[test]
    fn blank_lines_survive_for_sentence_breaks() {
        assert_eq!(speakable("One\n\n  Two  three"), "One\n\nTwo three");
    }
}
