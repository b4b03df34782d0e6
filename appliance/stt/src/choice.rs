//! Models chosen per request: the configured ones (`stt.model` and its
//! multilingual partner) and any other whisper model installed in the
//! store, named or asked for by size, loaded when first wanted.
//!
//! Agents name a model as their own tools do: the audio tool spec's
//! `model_size` (`tiny`, `base`, `small`, … `large-v3`) and Voicebox's
//! `model` (a size, or here also a model's name in the store). A size is
//! matched against the sizes the installed files' headers give, so it
//! finds whatever was installed under any name. For English an English-only
//! model of the size wins (faster for the same words, docs/benchmarks.md),
//! for any other language or `auto` only a multilingual one will do.
//!
//! Everything runs on the engine's one worker, one inference at a time as
//! ever. Beside the configured models one other model may be held loaded
//! (the last one asked for): asking for a third drops it, so a board never
//! holds more than three whisper models at once, and an agent that keeps
//! asking for the same model does not reload it per call.

use std::path::{Path, PathBuf};

use hark_models::{Language, ModelKind, Store, StoreError};

use crate::recognizer::{
    EngineConfig, LanguageGuess, ModelChoice, ModelInfo, Recognizer, Request, SttError, Transcript,
};
use crate::whisper::{LazyWhisper, LoadFailures};

/// An installed whisper model, as the store and its header describe it.
#[derive(Debug, Clone)]
pub struct Installed {
    pub name: String,
    pub path: PathBuf,
    /// `tiny`, `base`, … from the header.
    pub size: &'static str,
    pub multilingual: bool,
}

/// The whisper models in the store at `dir` that can be read, in name
/// order (a file whose header does not read is skipped: `hark models
/// verify` reports it).
pub fn installed(dir: &Path) -> Result<Vec<Installed>, StoreError> {
    // Opening would make the directory; a missing one holds nothing.
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let store = Store::open(dir)?;
    let mut found = Vec::new();
    for entry in store.list()?.models {
        if entry.kind != ModelKind::Whisper {
            continue;
        }
        let path = store.dir().join(&entry.file);
        let Ok(header) = hark_models::ggml::read_header(&path) else {
            continue;
        };
        found.push(Installed {
            name: entry.name,
            path,
            size: header.kind,
            multilingual: header.language == Language::Multilingual,
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The configured models and the one other model loaded on demand.
pub(crate) struct Models {
    main: Box<dyn Recognizer>,
    /// The multilingual partner of an English-only `main`.
    other: Option<LazyWhisper>,
    /// The last other model asked for.
    extra: Option<LazyWhisper>,
    /// The model store, where models asked for are found.
    store: Option<PathBuf>,
    config: EngineConfig,
    /// `stt.language`, for requests that name none.
    language: String,
    failures: LoadFailures,
    info: ModelInfo,
}

/// Which of the held models serves a request.
enum Slot {
    Main,
    Other,
    Extra,
}

impl Models {
    pub(crate) fn new(
        main: Box<dyn Recognizer>,
        other: Option<LazyWhisper>,
        config: EngineConfig,
        failures: LoadFailures,
    ) -> Self {
        // The engine as a whole serves every language when it has a
        // multilingual partner.
        let info = match &other {
            Some(other) => ModelInfo {
                other_languages: Some(other.info().name.clone()),
                multilingual: true,
                ..main.info().clone()
            },
            None => main.info().clone(),
        };
        Self {
            main,
            other,
            extra: None,
            store: config.store.clone(),
            language: config.language.to_ascii_lowercase(),
            config,
            failures,
            info,
        }
    }

    fn held(&self) -> impl Iterator<Item = (Slot, &ModelInfo)> {
        std::iter::once((Slot::Main, self.main.info()))
            .chain(self.other.as_ref().map(|o| (Slot::Other, o.info())))
            .chain(self.extra.as_ref().map(|e| (Slot::Extra, e.info())))
    }

    fn recognizer(&mut self, slot: Slot) -> &mut dyn Recognizer {
        match (slot, &mut self.other, &mut self.extra) {
            (Slot::Other, Some(other), _) => other,
            (Slot::Extra, _, Some(extra)) => extra,
            _ => self.main.as_mut(),
        }
    }

    /// The slot serving `request`, loading another model into the extra
    /// slot when it asks for one not held.
    fn slot(&mut self, request: &Request) -> Result<Slot, SttError> {
        let language = request
            .language
            .as_deref()
            .filter(|l| !l.is_empty())
            .map_or_else(|| self.language.clone(), str::to_ascii_lowercase);
        let name = match &request.model {
            None if self.other.is_some() && language != "en" => return Ok(Slot::Other),
            None => return Ok(Slot::Main),
            Some(ModelChoice::Name(name)) => name.clone(),
            Some(ModelChoice::Size(size)) => self.by_size(size, &language)?,
        };
        if let Some((slot, _)) = self.held().find(|(_, info)| info.name == name) {
            return Ok(slot);
        }
        let path = self.find(&name)?;
        let loaded = LazyWhisper::checked(
            EngineConfig {
                model: path,
                multilingual: None,
                ..self.config.clone()
            },
            &self.failures,
        )?;
        // The one it replaces is unloaded, and no longer reported.
        if let Some(old) = self.extra.replace(loaded) {
            self.failures.set(&old.info().name, None);
        }
        Ok(Slot::Extra)
    }

    /// The store's file for `name`, or why there is none.
    fn find(&self, name: &str) -> Result<PathBuf, SttError> {
        let unknown = || SttError::UnknownModel {
            name: name.to_owned(),
            installed: self.listing(),
        };
        let dir = self.store.as_deref().ok_or_else(unknown)?;
        // A name, never a path: agents choose among what is installed.
        if name.contains('/') {
            return Err(unknown());
        }
        match hark_models::resolve(dir, name, ModelKind::Whisper) {
            Ok(path) if path.is_file() => Ok(path),
            Ok(_) => Err(unknown()),
            Err(StoreError::WrongKind { kind, .. }) => Err(SttError::Choice(format!(
                "`{name}` is a {kind} model, not a whisper model this tool transcribes with; list_models shows which are"
            ))),
            Err(StoreError::NotFound { .. } | StoreError::BadName { .. }) => Err(unknown()),
            Err(e) => Err(SttError::ModelLoad {
                path: dir.join(name),
                reason: e.to_string(),
            }),
        }
    }

    /// The installed models, for errors.
    fn listing(&self) -> String {
        let mut names: Vec<String> = self
            .held()
            .map(|(_, i)| describe(&i.name, &i.kind, i.multilingual))
            .collect();
        if let Some(dir) = &self.store {
            for model in installed(dir).unwrap_or_default() {
                let named = describe(&model.name, model.size, model.multilingual);
                if !names.contains(&named) {
                    names.push(named);
                }
            }
        }
        names.join(", ")
    }

    /// The model of `size` for `language`: one held first, then the
    /// store's; English-only ones first for English, only multilingual
    /// ones otherwise.
    fn by_size(&self, size: &str, language: &str) -> Result<String, SttError> {
        let mut candidates: Vec<(String, bool)> = self
            .held()
            .filter(|(_, info)| info.kind == size)
            .map(|(_, info)| (info.name.clone(), info.multilingual))
            .collect();
        if let Some(dir) = &self.store {
            // A store that cannot be read leaves the held models.
            for model in installed(dir).unwrap_or_default() {
                if model.size == size && !candidates.iter().any(|(n, _)| *n == model.name) {
                    candidates.push((model.name, model.multilingual));
                }
            }
        }
        let english = language == "en";
        // Stable: held before installed within each group.
        candidates.sort_by_key(|(_, multilingual)| *multilingual == english);
        candidates
            .into_iter()
            .find(|(_, multilingual)| english || *multilingual)
            .map(|(name, _)| name)
            .ok_or_else(|| SttError::NoModelOfSize {
                size: size.to_owned(),
                language: language.to_owned(),
                installed: self.listing(),
            })
    }
}

/// A model as errors list it: `base-q8_0 (base, multilingual)`.
fn describe(name: &str, size: &str, multilingual: bool) -> String {
    let languages = if multilingual {
        "multilingual"
    } else {
        "English"
    };
    format!("{name} ({size}, {languages})")
}

impl Recognizer for Models {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        let slot = self.slot(&request)?;
        self.recognizer(slot).transcribe(request)
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        match &mut self.other {
            Some(other) => other.detect(audio),
            None => self.main.detect(audio),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_models::{AddOptions, ggml::header_bytes};

    /// A recogniser that only has a name: the choice never runs it.
    struct Named(ModelInfo);

    impl Recognizer for Named {
        fn info(&self) -> &ModelInfo {
            &self.0
        }
        fn transcribe(&mut self, _: Request) -> Result<Transcript, SttError> {
            Err(SttError::Unsupported("a name only".into()))
        }
        fn detect(&mut self, _: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
            Err(SttError::Unsupported("a name only".into()))
        }
    }

    /// A store of whisper headers: (name, vocabulary, encoder layers).
    fn store(models: &[(&str, i32, i32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (name, vocab, layers) in models {
            let src = dir.path().join(format!(".src-{name}"));
            let mut bytes = header_bytes(*vocab, 1);
            bytes[20..24].copy_from_slice(&layers.to_le_bytes());
            std::fs::write(&src, bytes).unwrap();
            store
                .add_file(name, &src, &AddOptions::import(&src))
                .unwrap();
        }
        dir
    }

    #[test]
    fn a_size_finds_the_model_for_the_language() {
        let dir = store(&[
            ("tiny.en-x", 51_864, 4),
            ("tiny-x", 51_865, 4),
            ("base-x", 51_865, 6),
            ("small.en-x", 51_864, 12),
        ]);
        let main = Named(ModelInfo {
            path: dir.path().join("ggml-tiny.en-x.bin"),
            name: "tiny.en-x".into(),
            kind: "tiny".into(),
            multilingual: false,
            quantisation: "f16".into(),
            load_ms: 0,
            other_languages: None,
        });
        let config = EngineConfig {
            store: Some(dir.path().to_owned()),
            ..EngineConfig::default()
        };
        let models = Models::new(Box::new(main), None, config, LoadFailures::default());
        // English: the English-only model first; others: multilingual only.
        assert_eq!(models.by_size("tiny", "en").unwrap(), "tiny.en-x");
        assert_eq!(models.by_size("tiny", "de").unwrap(), "tiny-x");
        assert_eq!(models.by_size("tiny", "auto").unwrap(), "tiny-x");
        // A multilingual model serves English when it is the size's only one.
        assert_eq!(models.by_size("base", "en").unwrap(), "base-x");
        let none = models.by_size("small", "es").unwrap_err().to_string();
        assert!(
            none.contains("no small model for language `es`")
                && none.contains("small.en-x (small, English)")
                && none.contains("base-x (base, multilingual)"),
            "{none}"
        );
        let missing = models.by_size("large", "en").unwrap_err().to_string();
        assert!(missing.contains("no large model"), "{missing}");
        // Names: installed ones are found, anything else (paths too) is not.
        assert!(models.find("base-x").unwrap().ends_with("ggml-base-x.bin"));
        for bad in ["nope", "../ggml-base-x", "/etc/passwd"] {
            let why = models.find(bad).unwrap_err().to_string();
            assert!(why.contains("is installed"), "{bad}: {why}");
        }
    }

    #[test]
    fn sizes_and_names_are_told_apart() {
        let parse = |m: Option<&str>, s: Option<&str>| ModelChoice::parse(m, s);
        assert_eq!(parse(None, None).unwrap(), None);
        assert_eq!(
            parse(None, Some("base")).unwrap(),
            Some(ModelChoice::Size("base"))
        );
        assert_eq!(
            parse(None, Some("large-v3")).unwrap(),
            Some(ModelChoice::Size("large"))
        );
        assert_eq!(
            parse(Some("turbo"), None).unwrap(),
            Some(ModelChoice::Size("large"))
        );
        assert_eq!(
            parse(Some("Small"), None).unwrap(),
            Some(ModelChoice::Size("small"))
        );
        assert_eq!(
            parse(Some("tiny.en"), None).unwrap(),
            Some(ModelChoice::Size("tiny"))
        );
        assert_eq!(
            parse(Some("base-q8_0"), None).unwrap(),
            Some(ModelChoice::Name("base-q8_0".into()))
        );
        assert_eq!(
            parse(Some("small-q5_1"), None).unwrap(),
            Some(ModelChoice::Name("small-q5_1".into()))
        );
        assert_eq!(parse(Some("  "), Some("")).unwrap(), None);
        let both = parse(Some("base-q8_0"), Some("tiny")).unwrap_err();
        assert!(both.to_string().contains("not both"), "{both}");
        let bad = parse(None, Some("huge")).unwrap_err();
        assert!(
            bad.to_string().contains("`huge`") && bad.to_string().contains("medium"),
            "{bad}"
        );
    }
}
