//! `hark models …`: the model store (crate `hark-models`) from the command
//! line, and the CTranslate2 importer (crate `hark-stt`) feeding it.
//! `import` tells the kinds apart by what it is given: a folder with
//! `model.bin` is converted, a Moonshine folder and a Smart Turn `.onnx`
//! file are copied in whole, any other file must be a ggml model.

use std::path::{Path, PathBuf};

use hark_models::{
    AddOptions, ModelEntry, ModelKind, Progress, Store, Transfer, catalog, fetch, kind,
};
use hark_stt::{ct2::Ct2Model, import::Quantisation};
use hark_tts::voices::OnnxProblem;

use crate::cli::ModelsCommand;

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error(transparent)]
    Store(#[from] hark_models::StoreError),
    #[error(transparent)]
    Fetch(#[from] hark_models::FetchError),
    #[error(transparent)]
    Ct2(#[from] hark_stt::ct2::Ct2Error),
    #[error(transparent)]
    Import(#[from] hark_stt::import::ImportError),
    #[error("{0}")]
    Quantisation(String),
    #[error(
        "{0} is neither a CTranslate2 whisper folder (with model.bin), a Moonshine folder ({files}), a Smart Turn .onnx file nor a ggml file",
        files = kind::MOONSHINE_FILES.join(", ")
    )]
    Source(PathBuf),
    #[error("--output writes a converted whisper model; {0} is copied into the store as it is")]
    Output(PathBuf),
    #[error("{path} is not a Smart Turn model: {problem}")]
    Onnx {
        path: PathBuf,
        #[source]
        problem: OnnxProblem,
    },
    #[error(
        "{path} is an ONNX model whose inputs are [{}], not Smart Turn's input_features",
        .inputs.join(", ")
    )]
    NotSmartTurn { path: PathBuf, inputs: Vec<String> },
    #[error("{0} is a piper voice, not a Smart Turn model; install it with `hark voices`")]
    PiperVoice(PathBuf),
    #[error("{failed} of {total} models failed verification")]
    Verify { failed: usize, total: usize },
}

/// Runs one `hark models` command; `default_dir` is `stt.models_dir`.
/// Prints for a person; returns an error for the exit status.
pub fn run(command: ModelsCommand, default_dir: &Path) -> Result<(), ModelsError> {
    let dir_or = |dir: Option<PathBuf>| dir.unwrap_or_else(|| default_dir.to_path_buf());
    match command {
        ModelsCommand::List { dir } => {
            let store = Store::open(dir_or(dir))?;
            let listing = store.list()?;
            println!("models in {}:", store.dir().display());
            if listing.models.is_empty() {
                println!("  (none)");
            }
            if !listing.models.is_empty() {
                println!(
                    "  {:<20} {:<10} {:>9}  {:<12} {:<7}  source",
                    "name", "kind", "size", "language", "weights"
                );
            }
            for m in &listing.models {
                let weights = if m.quantisation.is_empty() {
                    "-"
                } else {
                    m.quantisation.as_str()
                };
                println!(
                    "  {:<20} {:<10} {:>6} MB  {:<12} {:<7}  {}",
                    m.name,
                    m.kind.to_string(),
                    m.size / 1_000_000,
                    m.language.to_string(),
                    weights,
                    m.source
                );
            }
            for name in &listing.missing {
                println!("  {name:<20} MISSING (in the manifest, file gone)");
            }
            for p in &listing.partial {
                println!(
                    "  {:<20} partial download, {} bytes (run fetch again to resume)",
                    p.name, p.bytes
                );
            }
            for p in &listing.unmanaged {
                println!("  {} (not in the manifest)", p.display());
            }
            println!("\nwhisper models `hark models fetch` can download:");
            for m in catalog::CATALOG {
                println!("  {:<20} {:>6} MB", m.name, m.size / 1_000_000);
            }
            Ok(())
        }
        ModelsCommand::Fetch {
            name,
            url,
            sha256,
            replace,
            dir,
        } => {
            let store = Store::open(dir_or(dir))?;
            let request = match &url {
                Some(url) => fetch::FetchRequest::url(&name, url, sha256.as_deref())?,
                None => fetch::FetchRequest::catalog(&name)?,
            };
            let options = fetch::FetchOptions {
                replace,
                ..fetch::FetchOptions::default()
            };
            let fetched =
                fetch::fetch_request(&store, &request, &options, Progress::for_terminal())?;
            println!("{fetched}");
            Ok(())
        }
        ModelsCommand::Import {
            source,
            name,
            quantisation,
            output,
            replace,
            dir,
        } => {
            let quantisation: Quantisation =
                quantisation.parse().map_err(ModelsError::Quantisation)?;
            if source.join("model.bin").is_file() {
                let model = Ct2Model::read(&source)?;
                if let Some(output) = output {
                    let hp = hark_stt::import::write_ggml(&model, &output, quantisation)?;
                    println!(
                        "wrote {} ({quantisation}): n_vocab {}, {} audio layers, {} text layers",
                        output.display(),
                        hp.n_vocab,
                        hp.n_audio_layer,
                        hp.n_text_layer
                    );
                    return Ok(());
                }
                let store = Store::open(dir_or(dir))?;
                let name = name.unwrap_or_else(|| default_name(&model, quantisation));
                // Written inside the store's directory, then moved in by
                // rename: a half-written model is never visible.
                let tmp = store.dir().join(format!(".import-{name}.tmp"));
                let written = hark_stt::import::write_ggml(&model, &tmp, quantisation);
                let added = written.map_err(ModelsError::from).and_then(|_| {
                    let options = AddOptions {
                        source: format!("imported from {} ({quantisation})", source.display()),
                        replace,
                        transfer: Transfer::Move,
                    };
                    Ok(store.add_file(&name, &tmp, &options)?)
                });
                let _ = std::fs::remove_file(&tmp);
                println!("{}", installed(&added?));
                return Ok(());
            }
            let Some(kind) = kind::sniff(&source) else {
                return Err(ModelsError::Source(source));
            };
            if output.is_some() {
                return Err(ModelsError::Output(source));
            }
            if kind == ModelKind::SmartTurn {
                check_smart_turn(&source)?;
            }
            let store = Store::open(dir_or(dir))?;
            let name = name.unwrap_or_else(|| kind::default_name(kind, &source));
            let mut options = AddOptions::import(&source);
            options.replace = replace;
            let entry = store.add(kind, &name, &source, &options)?;
            println!("{}", installed(&entry));
            Ok(())
        }
        ModelsCommand::Verify { name, dir } => {
            let store = Store::open(dir_or(dir))?;
            let reports = match name {
                Some(name) => vec![store.verify(&name)?],
                None => store.verify_all()?,
            };
            if reports.is_empty() {
                println!("no models are installed in {}", store.dir().display());
            }
            let failed = reports.iter().filter(|r| !r.is_ok()).count();
            for report in &reports {
                println!("{report}");
            }
            if failed > 0 {
                return Err(ModelsError::Verify {
                    failed,
                    total: reports.len(),
                });
            }
            Ok(())
        }
        ModelsCommand::Remove { name, dir } => {
            let store = Store::open(dir_or(dir))?;
            let entry = store.remove(&name)?;
            println!("removed {} ({} bytes)", entry.name, entry.size);
            Ok(())
        }
    }
}

/// What `import` says it installed.
fn installed(entry: &ModelEntry) -> String {
    let what = match entry.kind {
        ModelKind::Whisper => entry.quantisation.clone(),
        kind if entry.files.is_empty() => format!("{kind}, {}", entry.language),
        kind => format!("{kind}, {}, {} files", entry.language, entry.files.len()),
    };
    format!(
        "installed {} ({what}, {} bytes, sha256 {})",
        entry.name, entry.size, entry.sha256
    )
}

/// Walks the whole ONNX file, so a truncated or foreign one is refused
/// before it is copied. The reader is hark-tts's, which the voice store
/// checks piper voices with: a complete model whose graph does not take
/// piper's inputs comes back as `NotPiper`, naming the inputs it does take.
fn check_smart_turn(path: &Path) -> Result<(), ModelsError> {
    match hark_tts::voices::check_onnx(path) {
        Err(OnnxProblem::NotPiper(inputs)) if inputs.iter().any(|i| i == "input_features") => {
            Ok(())
        }
        Err(OnnxProblem::NotPiper(inputs)) => Err(ModelsError::NotSmartTurn {
            path: path.to_owned(),
            inputs,
        }),
        Err(problem) => Err(ModelsError::Onnx {
            path: path.to_owned(),
            problem,
        }),
        Ok(()) => Err(ModelsError::PiperVoice(path.to_owned())),
    }
}

/// `tiny.en-q8_0` for tiny.en in q8_0: the size from the encoder's layer
/// count and width, `.en` for English-only vocabularies.
fn default_name(model: &Ct2Model, quantisation: Quantisation) -> String {
    let hp = hark_stt::import::HParams::of(model).ok();
    let size = match hp.map(|h| (h.n_audio_layer, h.n_audio_state)) {
        Some((4, 384)) => "tiny",
        Some((6, 512)) => "base",
        Some((12, 768)) => "small",
        Some((24, 1024)) => "medium",
        Some((32, 1280)) => "large",
        _ => "whisper",
    };
    // Multilingual vocabularies have 51865 entries or more; English 51864.
    let english = hp.map(|h| h.n_vocab == 51_864).unwrap_or(false);
    format!("{size}{}-{quantisation}", if english { ".en" } else { "" })
}
