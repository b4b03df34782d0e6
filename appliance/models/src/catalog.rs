//! The official whisper.cpp ggml models, by name.
//!
//! Files are fetched from whisper.cpp's Hugging Face repository
//! (`https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-<name>.bin`,
//! the URL whisper.cpp's `models/download-ggml-model.sh` uses).
//!
//! Where the checksums come from (none were computed by Hark):
//!
//! - **SHA-1**: published by whisper.cpp. The unquantised models' values are
//!   in `models/README.md` of github.com/ggml-org/whisper.cpp (checked at
//!   commit 233fe1fc9b48); the quantised ones in the model card
//!   (`README.md`) of huggingface.co/ggerganov/whisper.cpp, which lists
//!   every file with the same figures for the unquantised ones.
//! - **SHA-256 and size**: the Git LFS metadata Hugging Face publishes for
//!   each file (`lfs.sha256`, `lfs.size` of
//!   `https://huggingface.co/api/models/ggerganov/whisper.cpp?blobs=true`),
//!   revision 5359861c739e955e79d9a303bcbc70fb988958b1, as recorded in
//!   independent projects' copies of that response. For 13 of the 18
//!   files the SHA-256 is also what Nix fixed-output derivations pin
//!   (Nix refuses a download whose hash differs); tiny-, base-, base.en-,
//!   small- and small.en-q8_0 rest on the LFS metadata (and their SHA-1).
//!
//! A fetch checks both hashes and the size; a mismatch on any of them
//! deletes the download. If Hugging Face ever replaces a file, the fetch
//! fails, naming the expected and the actual checksum, rather than
//! installing something nobody vouched for.

use crate::manifest::Language;

/// Where whisper.cpp's models are downloaded from.
pub const BASE_URL: &str = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/";

/// One published model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogModel {
    /// whisper.cpp's name, e.g. `tiny.en-q8_0`; also its name in the store.
    pub name: &'static str,
    /// Exact size in bytes.
    pub size: u64,
    pub language: Language,
    /// `f16`, `q8_0`, `q5_1`.
    pub quantisation: &'static str,
    /// Published SHA-256 (lowercase hex), if known.
    pub sha256: Option<&'static str>,
    /// Published SHA-1 (lowercase hex), if known.
    pub sha1: Option<&'static str>,
}

impl CatalogModel {
    /// The download URL.
    pub fn url(&self) -> String {
        format!("{BASE_URL}ggml-{}.bin", self.name)
    }
}

/// The model called `name`, if the catalog has it.
pub fn find(name: &str) -> Option<&'static CatalogModel> {
    CATALOG.iter().find(|m| m.name == name)
}

/// The catalog's names, in catalog order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|m| m.name)
}

const fn model(
    name: &'static str,
    size: u64,
    language: Language,
    quantisation: &'static str,
    sha256: &'static str,
    sha1: &'static str,
) -> CatalogModel {
    CatalogModel {
        name,
        size,
        language,
        quantisation,
        sha256: Some(sha256),
        sha1: Some(sha1),
    }
}

use Language::{En, Multilingual as Multi};

/// Tiny, base and small (the sizes a Raspberry Pi–class board runs in
/// real time or close to it), each English-only and multilingual, each in
/// f16, q8_0 and q5_1.
#[rustfmt::skip]
pub const CATALOG: &[CatalogModel] = &[
    model("tiny", 77_691_713, Multi, "f16",
        "be07e048e1e599ad46341c8d2a135645097a538221678b7acdd1b1919c6e1b21",
        "bd577a113a864445d4c299885e0cb97d4ba92b5f"),
    model("tiny-q8_0", 43_537_433, Multi, "q8_0",
        "c2085835d3f50733e2ff6e4b41ae8a2b8d8110461e18821b09a15c40c42d1cca",
        "19e8118f6652a650569f5a949d962154e01571d9"),
    model("tiny-q5_1", 32_152_673, Multi, "q5_1",
        "818710568da3ca15689e31a743197b520007872ff9576237bda97bd1b469c3d7",
        "2827a03e495b1ed3048ef28a6a4620537db4ee51"),
    model("tiny.en", 77_704_715, En, "f16",
        "921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f",
        "c78c86eb1a8faa21b369bcd33207cc90d64ae9df"),
    model("tiny.en-q8_0", 43_550_795, En, "q8_0",
        "5bc2b3860aa151a4c6e7bb095e1fcce7cf12c7b020ca08dcec0c6d018bb7dd94",
        "802d6668e7d411123e672abe4cb6c18f12306abb"),
    model("tiny.en-q5_1", 32_166_155, En, "q5_1",
        "c77c5766f1cef09b6b7d47f21b546cbddd4157886b3b5d6d4f709e91e66c7c2b",
        "3fb92ec865cbbc769f08137f22470d6b66e071b6"),
    model("base", 147_951_465, Multi, "f16",
        "60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe",
        "465707469ff3a37a2b9b8d8f89f2f99de7299dac"),
    model("base-q8_0", 81_768_585, Multi, "q8_0",
        "c577b9a86e7e048a0b7eada054f4dd79a56bbfa911fbdacf900ac5b567cbb7d9",
        "7bb89bb49ed6955013b166f1b6a6c04584a20fbe"),
    model("base-q5_1", 59_707_625, Multi, "q5_1",
        "422f1ae452ade6f30a004d7e5c6a43195e4433bc370bf23fac9cc591f01a8898",
        "a3733eda680ef76256db5fc5dd9de8629e62c5e7"),
    model("base.en", 147_964_211, En, "f16",
        "a03779c86df3323075f5e796cb2ce5029f00ec8869eee3fdfb897afe36c6d002",
        "137c40403d78fd54d454da0f9bd998f78703390c"),
    model("base.en-q8_0", 81_781_811, En, "q8_0",
        "a4d4a0768075e13cfd7e19df3ae2dbc4a68d37d36a7dad45e8410c9a34f8c87e",
        "bb1574182e9b924452bf0cd1510ac034d323e948"),
    model("base.en-q5_1", 59_721_011, En, "q5_1",
        "4baf70dd0d7c4247ba2b81fafd9c01005ac77c2f9ef064e00dcf195d0e2fdd2f",
        "d26d7ce5a1b6e57bea5d0431b9c20ae49423c94a"),
    model("small", 487_601_967, Multi, "f16",
        "1be3a9b2063867b937e64e2ec7483364a79917e157fa98c5d94b5c1fffea987b",
        "55356645c2b361a969dfd0ef2c5a50d530afd8d5"),
    model("small-q8_0", 264_464_607, Multi, "q8_0",
        "49c8fb02b65e6049d5fa6c04f81f53b867b5ec9540406812c643f177317f779f",
        "bcad8a2083f4e53d648d586b7dbc0cd673d8afad"),
    model("small-q5_1", 190_085_487, Multi, "q5_1",
        "ae85e4a935d7a567bd102fe55afc16bb595bdb618e11b2fc7591bc08120411bb",
        "6fe57ddcfdd1c6b07cdcc73aaf620810ce5fc771"),
    model("small.en", 487_614_201, En, "f16",
        "c6138d6d58ecc8322097e0f987c32f1be8bb0a18532a3f88f734d1bbf9c41e5d",
        "db8a495a91d927739e50b3fc1cc4c6b8f6c2d022"),
    model("small.en-q8_0", 264_477_561, En, "q8_0",
        "67a179f608ea6114bd3fdb9060e762b588a3fb3bd00c4387971be4d177958067",
        "9d75ff4ccfa0a8217870d7405cf8cef0a5579852"),
    model("small.en-q5_1", 190_098_681, En, "q5_1",
        "bfdff4894dcb76bbf647d56263ea2a96645423f1669176f4844a1bf8e478ad30",
        "20f54878d608f94e4a8ee3ae56016571d47cba34"),
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::{hash::normalise_hex, name::check_name};

    #[test]
    fn names_are_unique_valid_and_whisper_cpp_style() {
        let mut seen = HashSet::new();
        for m in CATALOG {
            assert!(seen.insert(m.name), "{} is listed twice", m.name);
            assert_eq!(check_name(m.name), Ok(()), "{}", m.name);
            assert_eq!(find(m.name), Some(m));
        }
        assert_eq!(find("tiny.en-q8_0").map(|m| m.size), Some(43_550_795));
        assert_eq!(find("large-v9"), None);
    }

    #[test]
    fn urls_are_well_formed() {
        for m in CATALOG {
            let url = m.url();
            assert!(
                url.starts_with("https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-"),
                "{url}"
            );
            assert!(url.ends_with(".bin"), "{url}");
            let path = &url["https://".len()..];
            assert!(
                path.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/.-_".contains(&b)),
                "{url} needs escaping"
            );
            assert!(!path.contains("//") && !path.contains(".."), "{url}");
            let parsed: Result<ureq::http::Uri, _> = url.parse();
            let parsed = parsed.unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(parsed.scheme_str(), Some("https"));
            assert_eq!(parsed.host(), Some("huggingface.co"));
        }
    }

    #[test]
    fn checksums_are_lowercase_hex_of_the_right_length() {
        let mut sha256s = HashSet::new();
        for m in CATALOG {
            assert!(
                m.sha256.is_some() || m.sha1.is_some(),
                "{} has no checksum",
                m.name
            );
            if let Some(h) = m.sha256 {
                assert_eq!(
                    normalise_hex(h, 64).as_deref(),
                    Some(h),
                    "{} sha256",
                    m.name
                );
                assert!(sha256s.insert(h), "{} shares a sha256", m.name);
            }
            if let Some(h) = m.sha1 {
                assert_eq!(normalise_hex(h, 40).as_deref(), Some(h), "{} sha1", m.name);
            }
        }
    }

    #[test]
    fn language_and_quantisation_follow_the_name() {
        for m in CATALOG {
            let english = m.name.contains(".en");
            assert_eq!(m.language == Language::En, english, "{}", m.name);
            let quant = m.name.rsplit_once('-').map_or("f16", |(_, q)| q);
            assert_eq!(m.quantisation, quant, "{}", m.name);
            assert!(m.size > 30_000_000, "{}: {} bytes", m.name, m.size);
        }
        // The minimum: the base sizes and tiny/base q5_1 and q8_0.
        for name in [
            "tiny",
            "tiny.en",
            "base",
            "base.en",
            "small",
            "small.en",
            "tiny-q5_1",
            "tiny-q8_0",
            "tiny.en-q5_1",
            "tiny.en-q8_0",
            "base-q5_1",
            "base-q8_0",
            "base.en-q5_1",
            "base.en-q8_0",
        ] {
            assert!(find(name).is_some(), "{name} missing");
        }
    }
}
