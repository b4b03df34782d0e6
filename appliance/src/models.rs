//! `hark models …`: the model store (crate `hark-models`) from the command
//! line, and the CTranslate2 importer (crate `hark-stt`) feeding it.

use std::path::{Path, PathBuf};

use hark_models::{AddOptions, Progress, Store, Transfer, catalog, fetch};
use hark_stt::{ct2::Ct2Model, import::Quantisation};

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
    #[error("{0} is neither a CTranslate2 whisper folder (with model.bin) nor a ggml file")]
    Source(PathBuf),
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
            for m in &listing.models {
                println!(
                    "  {:<20} {:>6} MB  {:<12} {:<5}  {}",
                    m.name,
                    m.size / 1_000_000,
                    m.language.to_string(),
                    m.quantisation,
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
            println!("\nmodels `hark models fetch` can download:");
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
                let entry = added?;
                println!(
                    "installed {} ({}, {} bytes, sha256 {})",
                    entry.name, entry.quantisation, entry.size, entry.sha256
                );
                Ok(())
            } else if source.is_file() {
                let store = Store::open(dir_or(dir))?;
                let name = name.unwrap_or_else(|| {
                    source
                        .file_stem()
                        .map(|s| s.to_string_lossy().trim_start_matches("ggml-").to_owned())
                        .unwrap_or_default()
                });
                let mut options = AddOptions::import(&source);
                options.replace = replace;
                let entry = store.add_file(&name, &source, &options)?;
                println!(
                    "installed {} ({}, {} bytes, sha256 {})",
                    entry.name, entry.quantisation, entry.size, entry.sha256
                );
                Ok(())
            } else {
                Err(ModelsError::Source(source))
            }
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
