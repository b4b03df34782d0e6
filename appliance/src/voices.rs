//! `hark voices …`: the piper voice store (crate `hark-tts`, module
//! `voices`) from the command line.

use std::path::{Path, PathBuf};

use hark_models::{FetchOptions, Progress};
use hark_tts::voices::{FileOptions, VoiceRequest, VoiceStore, VoicesError};

use crate::cli::VoicesCommand;

#[derive(Debug, thiserror::Error)]
pub enum VoicesCliError {
    #[error(transparent)]
    Store(#[from] VoicesError),
    /// Options that do not fit the kind of source given.
    #[error("{0}")]
    Usage(String),
}

/// Runs one `hark voices` command; `default_dir` is where voices live when
/// `--dir` is not given. Prints for a person; returns an error for the exit
/// status.
pub fn run(command: VoicesCommand, default_dir: &Path) -> Result<(), VoicesCliError> {
    let dir_or = |dir: Option<PathBuf>| dir.unwrap_or_else(|| default_dir.to_path_buf());
    match command {
        VoicesCommand::List { dir } => {
            let store = VoiceStore::open(dir_or(dir))?;
            print!("{}", listing(&store)?);
            Ok(())
        }
        VoicesCommand::Install {
            source,
            json,
            id,
            sha256,
            replace,
            dir,
        } => {
            let store = VoiceStore::open(dir_or(dir))?;
            let is_url = source.contains("://");
            let local = Path::new(&source);
            // Catalog ids are never paths, so anything path-like is a file
            // (and a missing one an error naming it).
            let is_file =
                !is_url && (local.exists() || source.contains('/') || source.ends_with(".onnx"));
            if json.is_some() || is_file {
                if sha256.is_some() {
                    return Err(VoicesCliError::Usage(
                        "--sha256 is for URLs; local files are checked by validating them".into(),
                    ));
                }
                // piper keeps a voice's config beside its model, named after it.
                let json = json.unwrap_or_else(|| PathBuf::from(format!("{source}.json")));
                let options = FileOptions { id, replace };
                let voice = store.install_files_with(local, &json, &options)?;
                println!(
                    "installed {} ({} bytes, sha256 {}) from {}",
                    voice.id,
                    voice.size,
                    voice.sha256,
                    local.display()
                );
                return Ok(());
            }
            if id.is_some() {
                return Err(VoicesCliError::Usage(
                    "--id is for local files; a downloaded voice is named by its URL or catalog id"
                        .into(),
                ));
            }
            let request = match (is_url, &sha256) {
                (true, sha256) => VoiceRequest::url(&source, sha256.as_deref())?,
                (false, None) => VoiceRequest::catalog(&source)?,
                (false, Some(_)) => {
                    return Err(VoicesCliError::Usage(
                        "--sha256 is for URLs; catalog voices are checked against the catalog"
                            .into(),
                    ));
                }
            };
            let options = FetchOptions {
                replace,
                ..FetchOptions::default()
            };
            let installed = store.install_request(&request, &options, Progress::for_terminal())?;
            println!("{installed}");
            Ok(())
        }
        VoicesCommand::Remove { voice, dir } => {
            let store = VoiceStore::open(dir_or(dir))?;
            let removed = store.remove(&voice)?;
            let bytes: u64 = removed.voice.as_ref().map_or(0, |v| v.size + v.json_size);
            println!(
                "removed {} ({} files, {bytes} bytes)",
                removed.id,
                removed.deleted.len()
            );
            Ok(())
        }
    }
}

/// `hark voices list`'s text.
fn listing(store: &VoiceStore) -> Result<String, VoicesError> {
    let listing = store.list()?;
    let mut out = format!("voices in {}:\n", store.dir().display());
    if listing.installed.is_empty() {
        out.push_str("  (none)\n");
    }
    for v in &listing.installed {
        out.push_str(&format!(
            "  {:<36} {:>4} MB  {:<6} {:<7} {:>5} Hz  {}\n      sha256 {}\n",
            v.id,
            v.size / 1_000_000,
            v.language.as_deref().unwrap_or("?"),
            v.quality.as_deref().unwrap_or("?"),
            v.sample_rate,
            v.source,
            v.sha256
        ));
    }
    for p in &listing.partial {
        out.push_str(&format!(
            "  {} partial download, {} bytes (install again to resume)\n",
            p.name, p.bytes
        ));
    }
    if !listing.problems.is_empty() {
        out.push_str("\nproblems:\n");
        for p in &listing.problems {
            out.push_str(&format!("  {p}\n"));
        }
    }
    out.push_str("\nvoices `hark voices install <id>` can download:\n");
    if listing.available.is_empty() {
        out.push_str("  (all installed)\n");
    }
    for v in &listing.available {
        let speakers = if v.num_speakers > 1 {
            format!("  {} speakers", v.num_speakers)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<36} {:>4} MB  {:<6} {}{speakers}\n",
            v.id,
            v.size() / 1_000_000,
            v.language,
            v.quality
        ));
    }
    Ok(out)
}
