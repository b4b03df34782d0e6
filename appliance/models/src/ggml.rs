//! What a whisper.cpp ggml file says about itself.
//!
//! The file starts with the magic `ggml` (a little-endian u32), eleven
//! little-endian i32: the ten hyper-parameters (`n_vocab` first), then
//! `ftype`. whisper.cpp itself decides "multilingual" from the vocabulary
//! size (`n_vocab >= 51865`, `whisper_vocab::is_multilingual`) and the
//! weight type from `ftype % GGML_QNT_VERSION_FACTOR` (1000), so the store
//! reads both from the file rather than trusting its name.

use std::{fs::File, io::Read, path::Path};

use crate::manifest::Language;

/// whisper.cpp's file magic, "ggml" as a little-endian u32.
pub const GGML_MAGIC: u32 = 0x6767_6d6c;
/// The smallest multilingual vocabulary (whisper.cpp `is_multilingual`).
const MULTILINGUAL_VOCAB: i32 = 51_865;
/// ggml's `GGML_QNT_VERSION_FACTOR`: `ftype` = version × 1000 + type.
const QNT_VERSION_FACTOR: i32 = 1000;
/// Magic + 10 hyper-parameters + ftype.
const HEADER_LEN: usize = 4 + 11 * 4;

/// The facts read from a model's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub language: Language,
    /// `f32`, `f16`, `q8_0`, `q5_1`… (ggml's names, lower case).
    pub quantisation: String,
    /// The model's size by its encoder's layers, as whisper.cpp names it
    /// (`tiny`, `base`, `small`, `medium`, `large`; `unknown` otherwise).
    pub kind: &'static str,
    /// The languages it transcribes: 1 for English-only models; 99 for
    /// multilingual ones before large-v3, which added Cantonese (each
    /// language is a token, so the vocabulary's size tells).
    pub languages: usize,
}

/// Why a file is not a whisper.cpp model.
#[derive(Debug, thiserror::Error)]
pub enum HeaderProblem {
    #[error("it is shorter than a whisper.cpp header ({0} bytes)")]
    Short(usize),
    #[error("it does not start with the ggml magic (found {0:#010x})")]
    Magic(u32),
    #[error("its vocabulary size {0} is not a whisper vocabulary")]
    Vocab(i32),
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
}

/// Reads and checks the header of the file at `path`.
pub fn read_header(path: &Path) -> Result<Header, HeaderProblem> {
    let mut buf = [0u8; HEADER_LEN];
    let mut file = File::open(path)?;
    let mut got = 0;
    while got < HEADER_LEN {
        match file.read(&mut buf[got..])? {
            0 => return Err(HeaderProblem::Short(got)),
            n => got += n,
        }
    }
    parse_header(&buf)
}

/// Parses the first [`HEADER_LEN`] bytes of a model.
fn parse_header(buf: &[u8; HEADER_LEN]) -> Result<Header, HeaderProblem> {
    let word = |i: usize| [buf[i * 4], buf[i * 4 + 1], buf[i * 4 + 2], buf[i * 4 + 3]];
    let magic = u32::from_le_bytes(word(0));
    if magic != GGML_MAGIC {
        return Err(HeaderProblem::Magic(magic));
    }
    let n_vocab = i32::from_le_bytes(word(1));
    let n_audio_layer = i32::from_le_bytes(word(5));
    let ftype = i32::from_le_bytes(word(11));
    // Whisper's vocabularies are 51864–51866 tokens. Old llama.cpp files
    // carry the same magic (with 32000), so the size tells them apart.
    if !(50_000..60_000).contains(&n_vocab) {
        return Err(HeaderProblem::Vocab(n_vocab));
    }
    let language = if n_vocab >= MULTILINGUAL_VOCAB {
        Language::Multilingual
    } else {
        Language::En
    };
    Ok(Header {
        languages: match language {
            Language::Multilingual => (n_vocab - MULTILINGUAL_VOCAB + 99) as usize,
            _ => 1,
        },
        language,
        quantisation: ftype_name(ftype),
        // whisper.cpp's own rule (`model_type` from `n_audio_layer`).
        kind: match n_audio_layer {
            4 => "tiny",
            6 => "base",
            12 => "small",
            24 => "medium",
            32 => "large",
            _ => "unknown",
        },
    })
}

/// A header's `ftype` (ggml's `enum ggml_ftype`, plus 1000 × the
/// quantisation version for quantised files) as the weight format's name.
pub fn ftype_name(ftype: i32) -> String {
    let name = match ftype % QNT_VERSION_FACTOR {
        0 => "f32",
        1 => "f16",
        2 => "q4_0",
        3 => "q4_1",
        4 => "q4_1_some_f16",
        7 => "q8_0",
        8 => "q5_0",
        9 => "q5_1",
        10 => "q2_k",
        11 => "q3_k",
        12 => "q4_k",
        13 => "q5_k",
        14 => "q6_k",
        24 => "bf16",
        other => return format!("ftype {other}"),
    };
    name.to_owned()
}

/// A header for tests and tools: what whisper.cpp writes for a model with
/// this vocabulary size and `ftype` (the remaining hyper-parameters are
/// tiny's; nothing here reads them).
pub fn header_bytes(n_vocab: i32, ftype: i32) -> Vec<u8> {
    let mut out = GGML_MAGIC.to_le_bytes().to_vec();
    for v in [n_vocab, 1500, 384, 6, 4, 448, 384, 6, 4, 80, ftype] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Header, HeaderProblem> {
        parse_header(bytes.try_into().unwrap())
    }

    #[test]
    fn language_and_quantisation_come_from_the_header() {
        // tiny.en f16, tiny q8_0 (quantisation version 2), large-v3 q5_0.
        let h = parse(&header_bytes(51_864, 1)).unwrap();
        assert_eq!((h.language, h.quantisation.as_str()), (Language::En, "f16"));
        // Four encoder layers: tiny.
        assert_eq!(h.kind, "tiny");
        let mut base = header_bytes(51_864, 1);
        base[20..24].copy_from_slice(&6i32.to_le_bytes());
        assert_eq!(parse(&base).unwrap().kind, "base");
        let h = parse(&header_bytes(51_865, 2007)).unwrap();
        assert_eq!(
            (h.language, h.quantisation.as_str()),
            (Language::Multilingual, "q8_0")
        );
        assert_eq!(h.languages, 99);
        // large-v3 added Cantonese: a hundredth language token.
        let h = parse(&header_bytes(51_866, 2008)).unwrap();
        assert_eq!(
            (h.language, h.quantisation.as_str(), h.languages),
            (Language::Multilingual, "q5_0", 100)
        );
        assert_eq!(parse(&header_bytes(51_864, 1)).unwrap().languages, 1);
        assert_eq!(
            parse(&header_bytes(51_864, 99)).unwrap().quantisation,
            "ftype 99"
        );
    }

    #[test]
    fn other_files_are_refused() {
        let mut html = b"<!DOCTYPE html><html><head><title>x</title></head>".to_vec();
        html.truncate(HEADER_LEN);
        assert!(matches!(parse(&html), Err(HeaderProblem::Magic(_))));
        assert!(matches!(
            parse(&header_bytes(32_000, 1)),
            Err(HeaderProblem::Vocab(32_000))
        ));
    }

    #[test]
    fn short_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.bin");
        std::fs::write(&path, &header_bytes(51_864, 1)[..20]).unwrap();
        assert!(matches!(read_header(&path), Err(HeaderProblem::Short(20))));
    }
}
