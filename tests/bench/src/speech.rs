//! The real-speech set `bash tests/setup.sh` builds in `tests/.speech`
//! (`tests/speech/build.py`): recorded people, each clip with its
//! transcript from the source package, its subset, source and licence, and
//! where its speech starts and ends.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

pub const DEFAULT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.speech");

/// Where the real-speech set is.
#[derive(Debug, clap::Args)]
pub struct SpeechDir {
    /// The real-speech set (`bash tests/setup.sh` builds it).
    #[arg(long, default_value = DEFAULT_DIR)]
    pub speech: PathBuf,
}

#[derive(Debug, Clone)]
pub struct RealClip {
    pub id: String,
    pub subset: String,
    /// The whole source the clip comes from (a speaker, or one
    /// recording's people): the unit every source is capped by, and what
    /// is held out.
    pub group: String,
    pub language: String,
    pub text: String,
    /// 16 kHz mono.
    pub samples: Vec<f32>,
    /// Where speech starts and ends, seconds into the clip.
    pub speech: (f64, f64),
    /// Kept apart from the pooled figures (its licence, or its speech
    /// repeating other clips).
    pub evaluation_only: bool,
    /// Silences between words of at least 250 ms, where the set has word
    /// timings: (from, to) seconds.
    pub pauses: Vec<(f64, f64)>,
}

impl RealClip {
    /// The longest pause between the clip's words, seconds (0 without word
    /// timings).
    pub fn longest_pause(&self) -> f64 {
        self.pauses.iter().map(|(a, b)| b - a).fold(0.0, f64::max)
    }
}

/// Sources no rule, threshold or constant is ever tuned on: figures on
/// them are reported apart (the held-out split) and say how the rules do
/// on speech they were not shaped by. Chosen when they entered the set,
/// before any rule was run on them: a telephone system's read prompts, a
/// game's narrator, and an adventure game's characters (added after the
/// end-of-turn rule was set).
pub const HELD_OUT: [&str; 3] = [
    "asterisk prompts (Allison)",
    "Warzone 2100 tutorial",
    "Flight of the Amazon Queen",
];

/// Whether a source is in the held-out split ([`HELD_OUT`]: a name, or
/// the start of each of a production's voices).
pub fn held_out(group: &str) -> bool {
    HELD_OUT
        .iter()
        .any(|h| group == *h || group.starts_with(&format!("{h}: ")))
}

/// The clips a pooled English figure is measured on: English speech not
/// kept for evaluation only, at most `per_group` from each source so no
/// one speaker outweighs the rest. Within a source the subsets take turns
/// (a speaker's monologues are not crowded out by their many short
/// variations), each in an order fixed by a hash of the clip's id: the
/// same clips on every machine and every run.
pub fn capped(clips: &[RealClip], per_group: usize) -> Vec<RealClip> {
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&RealClip>>> = BTreeMap::new();
    for c in clips
        .iter()
        .filter(|c| c.language == "en" && !c.evaluation_only && !c.text.trim().is_empty())
    {
        groups
            .entry(&c.group)
            .or_default()
            .entry(&c.subset)
            .or_default()
            .push(c);
    }
    let mut out = Vec::new();
    for subsets in groups.values_mut() {
        for list in subsets.values_mut() {
            list.sort_by_key(|c| fnv(&c.id));
        }
        let mut taken = 0;
        let mut round = 0;
        while taken < per_group {
            let before = taken;
            for list in subsets.values() {
                if taken < per_group
                    && let Some(c) = list.get(round)
                {
                    out.push((*c).clone());
                    taken += 1;
                }
            }
            if taken == before {
                break;
            }
            round += 1;
        }
    }
    out
}

/// A stable 64-bit hash of a string (FNV-1a): the same on every machine
/// and Rust version, unlike the standard library's hasher.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Every clip of the set, resampled to 16 kHz.
pub fn load(dir: &Path) -> anyhow::Result<Vec<RealClip>> {
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).with_context(|| {
        format!(
            "cannot read {} (bash tests/setup.sh builds the real-speech set)",
            manifest.display()
        )
    })?;
    let mut clips = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let entry: Value = serde_json::from_str(line)
            .with_context(|| format!("{}: line {}", manifest.display(), n + 1))?;
        let field = |key: &str| -> anyhow::Result<String> {
            entry[key]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("{}: line {} has no {key}", manifest.display(), n + 1))
        };
        let file = dir.join(field("file")?);
        let clip = hark_audio::clip::Clip::read_wav(&file)
            .and_then(|c| c.resampled(16_000))
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let span = |v: &Value| -> Option<(f64, f64)> { Some((v[0].as_f64()?, v[1].as_f64()?)) };
        let speech = span(&entry["speech"]).unwrap_or((0.0, 0.0));
        let pauses = entry["pauses"]
            .as_array()
            .map(|a| a.iter().filter_map(span).collect())
            .unwrap_or_default();
        clips.push(RealClip {
            id: field("id")?,
            subset: field("subset")?,
            group: field("group")?,
            language: field("language")?,
            text: field("text")?,
            samples: clip.samples,
            speech,
            evaluation_only: entry["evaluation_only"] == true,
            pauses,
        });
    }
    anyhow::ensure!(!clips.is_empty(), "{} lists no clips", manifest.display());
    Ok(clips)
}

/// Short English readings and commands by real people (under
/// `max_seconds`, none kept for evaluation only), written as 16 kHz WAV
/// files into `dir/clips` for `hark inject`: each file and its clip.
pub fn short_english(
    set: &Path,
    dir: &Path,
    max_seconds: f64,
) -> anyhow::Result<Vec<(PathBuf, RealClip)>> {
    let clips: Vec<RealClip> = load(set)?
        .into_iter()
        .filter(|c| {
            c.language == "en"
                && !c.evaluation_only
                && matches!(c.subset.as_str(), "read" | "commands")
                && (c.samples.len() as f64) < 16_000.0 * max_seconds
        })
        .collect();
    anyhow::ensure!(
        !clips.is_empty(),
        "no short English clips in the real-speech set"
    );
    let clip_dir = dir.join("clips");
    std::fs::create_dir_all(&clip_dir)?;
    clips
        .into_iter()
        .map(|clip| {
            let path = clip_dir.join(format!("{}.wav", clip.id));
            write_wav(&path, &clip.samples)?;
            Ok((path, clip))
        })
        .collect()
}

/// 16 kHz mono samples as a 16-bit WAV file.
pub fn write_wav(path: &Path, samples: &[f32]) -> anyhow::Result<()> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec)?;
    for s in samples {
        w.write_sample((s.clamp(-1.0, 1.0) * 32767.0) as i16)?;
    }
    w.finalize()?;
    Ok(())
}
