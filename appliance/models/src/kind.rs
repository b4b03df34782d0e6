//! The kinds of model the store holds, and what each looks like on disk.
//!
//! | kind | what | in the store | language |
//! |---|---|---|---|
//! | `whisper` | a whisper.cpp ggml file (`stt.model`) | `ggml-<name>.bin` | `en` or `multilingual`, from its header ([`crate::ggml`]) |
//! | `moonshine` | Moonshine, the live engine (`stt.live_model`): a directory of [`MOONSHINE_FILES`] | `<name>/` | `en` (Hark runs Moonshine for English only) |
//! | `smart-turn` | Smart Turn, the end-of-turn model (`stt.turn_model`): one ONNX file | `<name>.onnx` | `any` (it hears the audio, not the words) |
//!
//! The checks here are the cheap ones that catch a wrong or damaged file
//! before it is copied (an HTML page, a truncated download, a directory
//! without its decoder); ONNX Runtime has the last word when the daemon
//! loads the model.

use std::{
    fmt,
    fs::File,
    io::{self, Read},
    path::Path,
};

use serde::{Deserialize, Serialize};

use crate::name::check_name;

/// What a model is for, which decides its layout in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// A whisper.cpp ggml file. The default, so manifests written before
    /// kinds existed (all whisper) keep their meaning.
    #[default]
    Whisper,
    /// A Moonshine directory (encoder, merged decoder, tokenizer).
    Moonshine,
    /// A Smart Turn ONNX file.
    SmartTurn,
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelKind::Whisper => "whisper",
            ModelKind::Moonshine => "moonshine",
            ModelKind::SmartTurn => "smart-turn",
        })
    }
}

/// The files a Moonshine model directory must hold (the names
/// `moonshine-voice` ships and `hark-stt` loads).
pub const MOONSHINE_FILES: [&str; 3] = [
    "encoder_model.ort",
    "decoder_model_merged.ort",
    "tokenizer.bin",
];

/// ONNX Runtime's own format (`.ort`) is a FlatBuffer whose file
/// identifier, bytes 4–7, is this.
const ORT_IDENTIFIER: &[u8; 4] = b"ORTM";

/// An ONNX model is a protobuf `ModelProto`, written in field order, so it
/// starts with field 1 (`ir_version`, a varint): key byte `1 << 3 | 0`.
const ONNX_FIRST_KEY: u8 = 0x08;

impl ModelKind {
    /// The name of the model's file (or directory) in the store.
    pub fn file_name(self, name: &str) -> String {
        match self {
            ModelKind::Whisper => format!("ggml-{name}.bin"),
            ModelKind::Moonshine => name.to_owned(),
            ModelKind::SmartTurn => format!("{name}.onnx"),
        }
    }

    /// The model is a directory of files rather than one file.
    pub fn is_dir(self) -> bool {
        matches!(self, ModelKind::Moonshine)
    }
}

/// Why a file or directory is not a model of the kind it was taken for.
#[derive(Debug, thiserror::Error)]
pub enum KindProblem {
    #[error("it lacks {}, which a Moonshine model directory holds", .0.join(", "))]
    MoonshineMissing(Vec<&'static str>),
    #[error("`{file}` is empty")]
    EmptyFile { file: String },
    #[error(
        "`{file}` is not in ONNX Runtime's format (no `ORTM` identifier at byte 4; found {found:?})"
    )]
    NotOrt { file: String, found: Vec<u8> },
    #[error("`{file}` is {len} bytes, shorter than an ONNX Runtime model's header")]
    ShortOrt { file: String, len: u64 },
    #[error("it is empty")]
    Empty,
    #[error(
        "it does not start like an ONNX model (first byte {0:#04x}, where ONNX's ir_version field key is 0x08)"
    )]
    NotOnnx(u8),
    #[error("`{file}` cannot be read: {source}")]
    Read {
        file: String,
        #[source]
        source: io::Error,
    },
}

/// Checks that `dir` holds a Moonshine model: the three files, none empty,
/// the two `.ort` files in ONNX Runtime's format.
pub fn check_moonshine(dir: &Path) -> Result<(), KindProblem> {
    let missing: Vec<&'static str> = MOONSHINE_FILES
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(KindProblem::MoonshineMissing(missing));
    }
    for file in MOONSHINE_FILES {
        let mut head = Vec::with_capacity(8);
        let len = File::open(dir.join(file))
            .and_then(|f| {
                let len = f.metadata()?.len();
                f.take(8).read_to_end(&mut head)?;
                Ok(len)
            })
            .map_err(|source| KindProblem::Read {
                file: file.to_owned(),
                source,
            })?;
        if len == 0 {
            return Err(KindProblem::EmptyFile {
                file: file.to_owned(),
            });
        }
        if !file.ends_with(".ort") {
            continue;
        }
        if head.len() < 8 {
            return Err(KindProblem::ShortOrt {
                file: file.to_owned(),
                len,
            });
        }
        if &head[4..8] != ORT_IDENTIFIER {
            return Err(KindProblem::NotOrt {
                file: file.to_owned(),
                found: head[4..8].to_vec(),
            });
        }
    }
    Ok(())
}

/// The files of the Moonshine directory `dir` that go into the store:
/// [`MOONSHINE_FILES`] and its licence or notice (`LICENSE`, `LICENCE.txt`,
/// `NOTICE`, `COPYING`…), if it has one, which must travel with the
/// weights. Anything else (a sample clip, caches) stays behind.
pub fn moonshine_files(dir: &Path) -> io::Result<Vec<String>> {
    let mut files: Vec<String> = MOONSHINE_FILES.iter().map(|f| (*f).to_owned()).collect();
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let Some(name) = item.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let upper = name.to_ascii_uppercase();
        let licence = ["LICENSE", "LICENCE", "NOTICE", "COPYING"]
            .iter()
            .any(|p| upper.starts_with(p));
        if licence && check_name(&name).is_ok() && item.file_type()?.is_file() {
            files.push(name);
        }
    }
    files.sort();
    Ok(files)
}

/// The store's own check of a Smart Turn file: not empty, and starting
/// like an ONNX protobuf. `hark models import` also walks the file's
/// fields first (hark-tts's ONNX reader), which catches a truncated one.
pub fn check_smart_turn(path: &Path) -> Result<(), KindProblem> {
    let read = |source| KindProblem::Read {
        file: path.display().to_string(),
        source,
    };
    let mut first = [0u8; 1];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut first))
        .map_err(read)?;
    match (n, first[0]) {
        (0, _) => Err(KindProblem::Empty),
        (_, ONNX_FIRST_KEY) => Ok(()),
        (_, other) => Err(KindProblem::NotOnnx(other)),
    }
}

/// Checks that `src` is a model of `kind` (a whisper file's header is read
/// by [`crate::ggml`] instead, since its language comes from there).
pub(crate) fn check(kind: ModelKind, src: &Path) -> Result<(), KindProblem> {
    match kind {
        ModelKind::Whisper => Ok(()),
        ModelKind::Moonshine => check_moonshine(src),
        ModelKind::SmartTurn => check_smart_turn(src),
    }
}

/// A name for a model imported from `src` when none is given:
/// `moonshine-<directory>` (`tiny-en` → `moonshine-tiny-en`), and for
/// Smart Turn the file's stem without the `-cpu` of the CPU build
/// (`smart-turn-v3.2-cpu.onnx` → `smart-turn-v3.2`).
pub fn default_name(kind: ModelKind, src: &Path) -> String {
    let stem = match kind {
        ModelKind::Moonshine => src.file_name(),
        ModelKind::Whisper | ModelKind::SmartTurn => src.file_stem(),
    }
    .map(|s| s.to_string_lossy().into_owned())
    .unwrap_or_default();
    match kind {
        ModelKind::Whisper => stem.trim_start_matches("ggml-").to_owned(),
        ModelKind::Moonshine if stem.starts_with("moonshine") => stem,
        ModelKind::Moonshine => format!("moonshine-{stem}"),
        ModelKind::SmartTurn => stem.strip_suffix("-cpu").unwrap_or(&stem).to_owned(),
    }
}

/// What kind of model `src` looks like, from the outside: a directory
/// holding any of [`MOONSHINE_FILES`] is Moonshine, a `.onnx` file Smart
/// Turn, any other file whisper (whose header is checked when it is
/// added). `None`: neither a file nor such a directory.
pub fn sniff(src: &Path) -> Option<ModelKind> {
    if src.is_dir() {
        MOONSHINE_FILES
            .iter()
            .any(|f| src.join(f).exists())
            .then_some(ModelKind::Moonshine)
    } else if src.is_file() {
        let onnx = src
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
        Some(if onnx {
            ModelKind::SmartTurn
        } else {
            ModelKind::Whisper
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// An `.ort` file's first bytes: a root offset, then the identifier.
    fn ort(rest: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0x14, 0, 0, 0];
        bytes.extend_from_slice(ORT_IDENTIFIER);
        bytes.extend_from_slice(rest);
        bytes
    }

    fn moonshine_dir(dir: &Path) {
        fs::write(dir.join("encoder_model.ort"), ort(b"encoder")).unwrap();
        fs::write(dir.join("decoder_model_merged.ort"), ort(b"decoder")).unwrap();
        fs::write(dir.join("tokenizer.bin"), b"\x05<unk>").unwrap();
    }

    #[test]
    fn a_moonshine_directory_needs_its_three_files_in_their_formats() {
        let dir = tempfile::tempdir().unwrap();
        moonshine_dir(dir.path());
        check_moonshine(dir.path()).unwrap();

        fs::remove_file(dir.path().join("decoder_model_merged.ort")).unwrap();
        fs::remove_file(dir.path().join("tokenizer.bin")).unwrap();
        let err = check_moonshine(dir.path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("lacks decoder_model_merged.ort, tokenizer.bin"),
            "{err}"
        );

        moonshine_dir(dir.path());
        fs::write(
            dir.path().join("encoder_model.ort"),
            b"<html>not a model</html>",
        )
        .unwrap();
        let err = check_moonshine(dir.path()).unwrap_err();
        assert!(
            matches!(&err, KindProblem::NotOrt { file, .. } if file == "encoder_model.ort"),
            "{err:?}"
        );

        moonshine_dir(dir.path());
        fs::write(dir.path().join("tokenizer.bin"), b"").unwrap();
        assert!(matches!(
            check_moonshine(dir.path()),
            Err(KindProblem::EmptyFile { file }) if file == "tokenizer.bin"
        ));
    }

    #[test]
    fn a_moonshine_model_takes_its_licence_and_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        moonshine_dir(dir.path());
        fs::write(dir.path().join("LICENSE"), b"MIT License").unwrap();
        fs::write(dir.path().join("beckett.wav"), b"RIFF").unwrap();
        fs::create_dir(dir.path().join("LICENSES")).unwrap();
        assert_eq!(
            moonshine_files(dir.path()).unwrap(),
            [
                "LICENSE",
                "decoder_model_merged.ort",
                "encoder_model.ort",
                "tokenizer.bin"
            ]
        );
    }

    #[test]
    fn a_smart_turn_file_must_start_like_onnx() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.onnx");
        fs::write(&path, b"\x08\x0a\x12\x0donnx.quantize").unwrap();
        check_smart_turn(&path).unwrap();
        fs::write(&path, b"").unwrap();
        assert!(matches!(check_smart_turn(&path), Err(KindProblem::Empty)));
        fs::write(&path, b"<!DOCTYPE html>").unwrap();
        assert!(matches!(
            check_smart_turn(&path),
            Err(KindProblem::NotOnnx(b'<'))
        ));
    }

    #[test]
    fn kinds_name_their_files_and_sources() {
        assert_eq!(ModelKind::Whisper.file_name("tiny.en"), "ggml-tiny.en.bin");
        assert_eq!(ModelKind::Moonshine.file_name("m"), "m");
        assert_eq!(ModelKind::SmartTurn.file_name("t"), "t.onnx");
        for (kind, src, name) in [
            (
                ModelKind::Moonshine,
                "/x/moonshine-voice/tiny-en",
                "moonshine-tiny-en",
            ),
            (
                ModelKind::Moonshine,
                "/x/moonshine-base-en",
                "moonshine-base-en",
            ),
            (
                ModelKind::SmartTurn,
                "/x/smart-turn-v3.2-cpu.onnx",
                "smart-turn-v3.2",
            ),
            (ModelKind::Whisper, "/x/ggml-base.en.bin", "base.en"),
        ] {
            assert_eq!(default_name(kind, Path::new(src)), name, "{src}");
        }
    }

    #[test]
    fn sniff_tells_the_kinds_apart() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(sniff(dir.path()), None, "an empty directory");
        fs::write(dir.path().join("tokenizer.bin"), b"x").unwrap();
        assert_eq!(sniff(dir.path()), Some(ModelKind::Moonshine));
        let onnx = dir.path().join("T.ONNX");
        fs::write(&onnx, b"\x08").unwrap();
        assert_eq!(sniff(&onnx), Some(ModelKind::SmartTurn));
        assert_eq!(
            sniff(&dir.path().join("tokenizer.bin")),
            Some(ModelKind::Whisper)
        );
        assert_eq!(sniff(&dir.path().join("nothing")), None);
    }

    #[test]
    fn kinds_serialise_as_the_manifest_spells_them() {
        let json = serde_json::to_string(&[
            ModelKind::Whisper,
            ModelKind::Moonshine,
            ModelKind::SmartTurn,
        ])
        .unwrap();
        assert_eq!(json, r#"["whisper","moonshine","smart-turn"]"#);
        assert_eq!(ModelKind::SmartTurn.to_string(), "smart-turn");
    }
}
