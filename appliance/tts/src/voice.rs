//! A piper voice's configuration: the `.onnx.json` written next to every
//! piper model. It says how the model was trained (sample rate, espeak-ng
//! voice, phoneme ids) and how piper drives it (the inference scales).
//!
//! The JSON is read field by field rather than through derived structs so
//! that every error can name the exact field (`audio.sample_rate`), which a
//! person fixing a hand-edited or foreign config needs. Defaults follow
//! piper-tts 1.x (`piper/config.py`): `inference` and `phoneme_type` may be
//! absent; `audio.sample_rate`, `espeak.voice`, `num_speakers` and
//! `phoneme_id_map` may not. Turning phonemes into ids with the map is
//! `phonemize`'s job.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// piper-tts' defaults for a config without an `inference` section.
const DEFAULT_NOISE_SCALE: f32 = 0.667;
const DEFAULT_LENGTH_SCALE: f32 = 1.0;
const DEFAULT_NOISE_W: f32 = 0.8;

/// The symbols piper puts in every sentence's ids (`piper/const.py`):
/// beginning and end of sentence, and the pad after every phoneme. A map
/// without them cannot speak anything.
const BOS: &str = "^";
const EOS: &str = "$";
const PAD: &str = "_";

/// The speaking rates `VoiceConfig::scales` accepts; outside them VITS
/// voices slur or drag past intelligibility.
pub const MIN_RATE: f32 = 0.5;
pub const MAX_RATE: f32 = 2.0;

/// Sample rates piper voices are trained at are 16000 and 22050 Hz; this
/// range rejects a config whose rate is garbage without ruling out others.
const SAMPLE_RATES: std::ops::RangeInclusive<u32> = 8000..=48000;

/// What went wrong reading a voice config. `file` is the config's path, or
/// `<string>` for `VoiceConfig::from_json`.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    #[error("cannot read the voice config {}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the voice config {} is not valid JSON: {source}", file.display())]
    Json {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the voice config {}: `{field}` {problem}", file.display())]
    Field {
        file: PathBuf,
        /// Dotted path of the offending field, e.g. `inference.noise_w`.
        field: String,
        problem: String,
    },
}

impl VoiceError {
    /// The dotted path of the field that is wrong, if the error is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            VoiceError::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// The inference scales piper feeds the model as its `scales` input, in the
/// model's order `[noise, length, noise_w]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scales {
    /// Generator noise: variation in timbre. 0 makes the output depend on
    /// the ids alone.
    pub noise: f32,
    /// Phoneme duration multiplier: above 1 is slower speech.
    pub length: f32,
    /// Duration-predictor noise: variation in rhythm.
    pub noise_w: f32,
}

/// A piper voice's `.onnx.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceConfig {
    /// `audio.sample_rate`: the rate of the model's output, in Hz.
    pub sample_rate: u32,
    /// `audio.quality` (x_low, low, medium, high), if given.
    pub quality: Option<String>,
    /// `espeak.voice`: the espeak-ng voice whose phonemes the model learnt.
    pub espeak_voice: String,
    /// `inference.noise_scale`.
    pub noise_scale: f32,
    /// `inference.length_scale`.
    pub length_scale: f32,
    /// `inference.noise_w`.
    pub noise_w: f32,
    /// `num_speakers`: more than one means the model takes a `sid` input.
    pub num_speakers: u32,
    /// `speaker_id_map`: speaker name → id, for multi-speaker voices.
    pub speaker_id_map: HashMap<String, i64>,
    /// `phoneme_type`: always "espeak" (the only kind Hark phonemizes).
    pub phoneme_type: String,
    /// `phoneme_id_map`: phoneme (one NFD code point, or a few) → ids.
    pub phoneme_id_map: HashMap<String, Vec<i64>>,
    /// `num_symbols`: the size of the model's id embedding, if given.
    pub num_symbols: Option<u32>,
    /// `language.code`, e.g. "en_US", if given.
    pub language: Option<String>,
    /// `dataset`: the voice's name in its training set, if given.
    pub dataset: Option<String>,
}

impl VoiceConfig {
    /// Reads and validates a voice config file.
    pub fn from_path(path: &Path) -> Result<VoiceConfig, VoiceError> {
        let text = std::fs::read_to_string(path).map_err(|source| VoiceError::Read {
            file: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates a voice config given as JSON text.
    pub fn from_json(json: &str) -> Result<VoiceConfig, VoiceError> {
        Self::parse(json, Path::new("<string>"))
    }

    fn parse(json: &str, file: &Path) -> Result<VoiceConfig, VoiceError> {
        let root: Value = serde_json::from_str(json).map_err(|source| VoiceError::Json {
            file: file.to_path_buf(),
            source,
        })?;
        let r = Reader { file, root: &root };
        r.object("", &root)?;

        let sample_rate = r.required_uint("audio.sample_rate")?;
        let sample_rate = u32::try_from(sample_rate)
            .ok()
            .filter(|rate| SAMPLE_RATES.contains(rate))
            .ok_or_else(|| {
                r.bad(
                    "audio.sample_rate",
                    format!(
                        "is {sample_rate} Hz; expected {}..={} Hz",
                        SAMPLE_RATES.start(),
                        SAMPLE_RATES.end()
                    ),
                )
            })?;
        let quality = r.optional_string("audio.quality")?;

        let espeak_voice = r.required_string("espeak.voice")?;
        if espeak_voice.trim().is_empty() {
            return Err(r.bad("espeak.voice", "is empty".into()));
        }

        // piper multiplies durations by length_scale, so it must be > 0;
        // the noise scales may be 0 (deterministic output) but not below.
        let noise_scale = r.scale("inference.noise_scale", DEFAULT_NOISE_SCALE, false)?;
        let length_scale = r.scale("inference.length_scale", DEFAULT_LENGTH_SCALE, true)?;
        let noise_w = r.scale("inference.noise_w", DEFAULT_NOISE_W, false)?;

        let num_speakers = r.required_uint("num_speakers")?;
        let num_speakers = u32::try_from(num_speakers)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                r.bad(
                    "num_speakers",
                    format!("is {num_speakers}; expected at least 1"),
                )
            })?;

        let mut speaker_id_map = HashMap::new();
        if let Some(map) = r.optional_object("speaker_id_map")? {
            for (name, id) in map {
                let id = id
                    .as_i64()
                    .filter(|id| (0..i64::from(num_speakers)).contains(id))
                    .ok_or_else(|| {
                        r.bad(
                            "speaker_id_map",
                            format!(
                                "maps {name:?} to {id}; expected an id in 0..{num_speakers} (num_speakers)"
                            ),
                        )
                    })?;
                speaker_id_map.insert(name.clone(), id);
            }
        }

        let phoneme_type = r
            .optional_string("phoneme_type")?
            .unwrap_or_else(|| "espeak".to_owned());
        if phoneme_type != "espeak" {
            return Err(r.bad(
                "phoneme_type",
                format!("is {phoneme_type:?}; Hark only speaks \"espeak\" voices"),
            ));
        }

        let num_symbols = match r.optional_uint("num_symbols")? {
            None => None,
            Some(n) => Some(
                u32::try_from(n)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| r.bad("num_symbols", format!("is {n}; expected at least 1")))?,
            ),
        };

        let phoneme_id_map = r.phoneme_id_map(num_symbols)?;

        let language = r.optional_string("language.code")?;
        let dataset = r.optional_string("dataset")?;

        Ok(VoiceConfig {
            sample_rate,
            quality,
            espeak_voice,
            noise_scale,
            length_scale,
            noise_w,
            num_speakers,
            speaker_id_map,
            phoneme_type,
            phoneme_id_map,
            num_symbols,
            language,
            dataset,
        })
    }

    /// The config's scales at a speaking rate: 1.0 is the voice's own pace,
    /// 2.0 twice as fast, 0.5 half as fast. Rates outside 0.5..=2.0 are
    /// clamped to it and a NaN rate counts as 1.0, so a bad setting cannot
    /// make the model produce hours of audio or none.
    pub fn scales(&self, rate: f32) -> Scales {
        let rate = if rate.is_nan() {
            1.0
        } else {
            rate.clamp(MIN_RATE, MAX_RATE)
        };
        Scales {
            noise: self.noise_scale,
            length: self.length_scale / rate,
            noise_w: self.noise_w,
        }
    }

    /// Whether the model takes a speaker id (`sid`) input.
    pub fn is_multi_speaker(&self) -> bool {
        self.num_speakers > 1
    }
}

/// Reads typed fields out of the config by dotted path, making errors that
/// name the file and the field.
struct Reader<'a> {
    file: &'a Path,
    root: &'a Value,
}

/// JSON type names for messages.
struct Kind<'a>(&'a Value);

impl fmt::Display for Kind<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        })
    }
}

impl<'a> Reader<'a> {
    fn bad(&self, field: &str, problem: String) -> VoiceError {
        VoiceError::Field {
            file: self.file.to_path_buf(),
            field: if field.is_empty() {
                "(top level)".to_owned()
            } else {
                field.to_owned()
            },
            problem,
        }
    }

    fn missing(&self, field: &str) -> VoiceError {
        self.bad(field, "is missing".to_owned())
    }

    /// The value at a dotted path, or None when the path (or a parent) is
    /// absent. A parent that exists but is not an object is an error, not
    /// an absence: `"audio": 22050` must not read as "no sample rate".
    fn lookup(&self, field: &str) -> Result<Option<&'a Value>, VoiceError> {
        let mut value = self.root;
        let mut walked = String::new();
        for key in field.split('.') {
            let map = self.object(&walked, value)?;
            match map.get(key) {
                Some(next) => value = next,
                None => return Ok(None),
            }
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(key);
        }
        Ok(Some(value))
    }

    fn object(&self, field: &str, value: &'a Value) -> Result<&'a Map<String, Value>, VoiceError> {
        value
            .as_object()
            .ok_or_else(|| self.bad(field, format!("is {}; expected an object", Kind(value))))
    }

    fn optional_object(&self, field: &str) -> Result<Option<&'a Map<String, Value>>, VoiceError> {
        match self.lookup(field)? {
            None | Some(Value::Null) => Ok(None),
            Some(value) => self.object(field, value).map(Some),
        }
    }

    fn optional_string(&self, field: &str) -> Result<Option<String>, VoiceError> {
        match self.lookup(field)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.bad(field, format!("is {}; expected a string", Kind(other)))),
        }
    }

    fn required_string(&self, field: &str) -> Result<String, VoiceError> {
        self.optional_string(field)?
            .ok_or_else(|| self.missing(field))
    }

    fn optional_uint(&self, field: &str) -> Result<Option<u64>, VoiceError> {
        match self.lookup(field)? {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                self.bad(
                    field,
                    format!("is {value}; expected a non-negative whole number"),
                )
            }),
        }
    }

    fn required_uint(&self, field: &str) -> Result<u64, VoiceError> {
        self.optional_uint(field)?
            .ok_or_else(|| self.missing(field))
    }

    /// An inference scale: absent means piper's default; present, it must be
    /// a finite number, > 0 if `positive`, else ≥ 0.
    fn scale(&self, field: &str, default: f32, positive: bool) -> Result<f32, VoiceError> {
        let value = match self.lookup(field)? {
            None | Some(Value::Null) => return Ok(default),
            Some(value) => value,
        };
        let number = value
            .as_f64()
            .ok_or_else(|| self.bad(field, format!("is {}; expected a number", Kind(value))))?;
        // f64 → f32 turns values beyond f32's range into infinity, which the
        // finiteness check then rejects.
        let scale = number as f32;
        let ok = scale.is_finite() && if positive { scale > 0.0 } else { scale >= 0.0 };
        if ok {
            Ok(scale)
        } else {
            let expected = if positive {
                "a finite number above 0"
            } else {
                "a finite number, 0 or above"
            };
            Err(self.bad(field, format!("is {number}; expected {expected}")))
        }
    }

    fn phoneme_id_map(
        &self,
        num_symbols: Option<u32>,
    ) -> Result<HashMap<String, Vec<i64>>, VoiceError> {
        const FIELD: &str = "phoneme_id_map";
        let map = match self.lookup(FIELD)? {
            None | Some(Value::Null) => return Err(self.missing(FIELD)),
            Some(value) => self.object(FIELD, value)?,
        };
        if map.is_empty() {
            return Err(self.bad(FIELD, "is empty".to_owned()));
        }
        let mut out = HashMap::with_capacity(map.len());
        for (phoneme, ids) in map {
            let bad_ids = || {
                let range = match num_symbols {
                    Some(n) => format!("ids in 0..{n} (num_symbols)"),
                    None => "non-negative ids".to_owned(),
                };
                self.bad(
                    FIELD,
                    format!("maps {phoneme:?} to {ids}; expected a non-empty array of {range}"),
                )
            };
            let array = ids
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(bad_ids)?;
            let parsed = array
                .iter()
                .map(|id| {
                    id.as_i64()
                        .filter(|id| *id >= 0 && num_symbols.is_none_or(|n| *id < i64::from(n)))
                })
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(bad_ids)?;
            out.insert(phoneme.clone(), parsed);
        }
        for symbol in [BOS, PAD, EOS] {
            if !out.contains_key(symbol) {
                return Err(self.bad(
                    FIELD,
                    format!("has no id for {symbol:?}, which piper puts in every sentence"),
                ));
            }
        }
        Ok(out)
    }
}
