//! GPT-2's byte-level token strings back to bytes.
//!
//! Whisper's tokenizer writes each byte as a printable character: bytes that
//! are printable Latin-1 map to themselves, the other 68 to U+0100 and up, in
//! byte order. CTranslate2's `vocabulary.txt` holds those strings; whisper.cpp's
//! files hold the raw bytes.

/// The byte each printable stand-in character represents.
fn char_to_byte(c: char) -> Option<u8> {
    let printable = |b: u32| {
        (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    let code = c as u32;
    if code < 0x100 && printable(code) {
        return u8::try_from(code).ok();
    }
    // The n-th non-printable byte is U+0100 + n.
    let n = code.checked_sub(0x100)?;
    (0u32..256)
        .filter(|b| !printable(*b))
        .nth(n as usize)
        .and_then(|b| u8::try_from(b).ok())
}

/// Decodes one token string; `None` if it holds a character that is not a
/// byte stand-in (special tokens such as `<|endoftext|>` are plain ASCII and
/// decode to themselves).
pub fn token_bytes(token: &str) -> Option<Vec<u8>> {
    token.chars().map(char_to_byte).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_stand_ins() {
        assert_eq!(token_bytes("hello"), Some(b"hello".to_vec()));
        // 'Ġ' (U+0120) stands for the space byte 0x20.
        assert_eq!(token_bytes("Ġthe"), Some(b" the".to_vec()));
        // 'Ċ' (U+010A) is the newline byte.
        assert_eq!(token_bytes("Ċ"), Some(b"\n".to_vec()));
        assert_eq!(
            token_bytes("<|endoftext|>"),
            Some(b"<|endoftext|>".to_vec())
        );
        assert_eq!(token_bytes("€"), None);
    }
}
