//! `list_voices`, `install_voice`, `remove_voice` — the voice store (crate
//! `hark-tts`, `voices`) for agents: what is installed and what the catalog
//! offers, adding a voice from a URL, a catalog id or files on the
//! appliance, and deleting one (seed 003's add/delete).

use std::{path::PathBuf, sync::Arc};

use hark_tts::voices::{VoiceStore, VoicesError};
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolError, speak_text::tts_of, success};
use crate::mcp::HarkServer;

/// Most voices one `list_voices` call returns by default.
const DEFAULT_LIMIT: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListVoices {
    /// Only voices of this language: a code such as `en_US`, `en-us` or
    /// `en` (case and `-`/`_` do not matter).
    pub language: Option<String>,
    /// Most voices to return (1–1000, default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VoiceInfo {
    /// The voice id to pass as `voice`.
    pub id: String,
    /// Language code, e.g. `en_US`.
    pub language: Option<String>,
    /// `x_low`, `low`, `medium` or `high`.
    pub quality: Option<String>,
    /// Sample rate in Hz (installed voices).
    pub sample_rate: Option<u32>,
    /// Size of the model in bytes.
    pub size: u64,
    pub installed: bool,
    /// The appliance's default voice (`tts.voice`).
    pub default: bool,
    /// Loaded in memory now (speaks without a load delay).
    pub loaded: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Voices {
    pub voices: Vec<VoiceInfo>,
    /// Voices matching before `limit` applied.
    pub total: usize,
    /// Why espeak-ng speaks instead of piper voices, if it does.
    pub piper_unavailable: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallVoice {
    /// An http(s) URL of a piper voice's `.onnx` (its `.onnx.json` must be
    /// beside it), or a catalog id from `list_voices` (`en_US-amy-low`).
    pub url: Option<String>,
    /// A voice's `.onnx` file on the appliance, inside `tts.output_dirs`;
    /// its `.onnx.json` must be beside it.
    pub path: Option<String>,
    /// The `.onnx`'s SHA-256 to check a URL download against.
    pub sha256: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InstalledVoice {
    pub id: String,
    pub language: Option<String>,
    pub quality: Option<String>,
    pub sample_rate: u32,
    pub size: u64,
    /// SHA-256 of the installed `.onnx`.
    pub sha256: String,
    /// Where it came from.
    pub source: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemoveVoice {
    /// The installed voice's id.
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RemovedVoice {
    pub id: String,
    /// Files deleted.
    pub deleted: Vec<String>,
}

impl From<VoicesError> for ToolError {
    fn from(e: VoicesError) -> Self {
        let kind = match &e {
            VoicesError::NotInstalled { .. } | VoicesError::UnknownVoice { .. } => {
                "VoiceNotFoundError"
            }
            _ => "VoiceError",
        };
        ToolError::new(kind, e.to_string())
    }
}

#[tool_router(router = voices_router, vis = "pub(crate)")]
impl HarkServer {
    /// List the voices installed on the appliance and those the catalog
    /// offers for `install_voice`.
    #[tool(
        name = "list_voices",
        output_schema = super::output_schema::<Voices>(),
        annotations(
            title = "List voices",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_voices(
        &self,
        Parameters(args): Parameters<ListVoices>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.voices(args).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Install a piper voice from a URL, a catalog id, or files on the
    /// appliance. Downloads are checked against the catalog's checksums.
    #[tool(
        name = "install_voice",
        output_schema = super::output_schema::<InstalledVoice>(),
        annotations(title = "Install a voice", open_world_hint = true)
    )]
    pub async fn install_voice(
        &self,
        Parameters(args): Parameters<InstallVoice>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.install(args).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Delete an installed voice (not the appliance's default voice).
    #[tool(
        name = "remove_voice",
        output_schema = super::output_schema::<RemovedVoice>(),
        annotations(
            title = "Remove a voice",
            destructive_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn remove_voice(
        &self,
        Parameters(RemoveVoice { id }): Parameters<RemoveVoice>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.remove(id).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

/// Language codes compared loosely: `en_US`, `en-us` and `EN_us` are one.
fn language_matches(code: &str, wanted: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let (code, wanted) = (norm(code), norm(wanted));
    code == wanted || code.split('_').next() == Some(wanted.as_str())
}

impl HarkServer {
    async fn voices(&self, args: ListVoices) -> Result<CallToolResult, ToolError> {
        let tts = tts_of(self)?;
        let limit = match args.limit {
            None => DEFAULT_LIMIT,
            Some(n @ 1..=1000) => n as usize,
            Some(n) => {
                return Err(ToolError::invalid(format!("limit must be 1–1000, got {n}")));
            }
        };
        let default = tts.default_voice.clone();
        // The synthesiser's lock may be held for a whole sentence (or a
        // voice loading): off the async runtime.
        let (listing, loaded, problem) = {
            let tts = Arc::clone(&tts);
            tokio::task::spawn_blocking(move || {
                let listing = VoiceStore::open(&tts.voices_dir)?.list()?;
                let synth = tts
                    .synthesizer()
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let loaded: Vec<String> = synth
                    .loaded_voices()
                    .into_iter()
                    .map(str::to_owned)
                    .collect();
                let problem = synth.runtime_problem().map(str::to_owned);
                Ok::<_, VoicesError>((listing, loaded, problem))
            })
            .await
            .map_err(|e| ToolError::new("VoiceError", format!("listing failed: {e}")))??
        };
        let key = hark_tts::catalog::id_key;
        let mut voices: Vec<VoiceInfo> = listing
            .installed
            .iter()
            .map(|v| VoiceInfo {
                id: v.id.clone(),
                language: v.language.clone(),
                quality: v.quality.clone(),
                sample_rate: Some(v.sample_rate),
                size: v.size,
                installed: true,
                default: key(&v.id) == key(&default),
                loaded: loaded.iter().any(|l| key(l) == key(&v.id)),
            })
            .chain(listing.available.iter().map(|v| VoiceInfo {
                id: v.id.to_owned(),
                language: Some(v.language.to_owned()),
                quality: Some(v.quality.to_owned()),
                sample_rate: None,
                size: v.size(),
                installed: false,
                default: false,
                loaded: false,
            }))
            .filter(|v| match (&args.language, &v.language) {
                (None, _) => true,
                (Some(wanted), Some(code)) => language_matches(code, wanted),
                (Some(_), None) => false,
            })
            .collect();
        let total = voices.len();
        voices.truncate(limit);
        let text = voices
            .iter()
            .map(|v| {
                format!(
                    "{}{}{}",
                    v.id,
                    if v.installed { " (installed)" } else { "" },
                    if v.default { " (default)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(success(
            text,
            Voices {
                voices,
                total,
                piper_unavailable: problem,
            },
        ))
    }

    async fn install(&self, args: InstallVoice) -> Result<CallToolResult, ToolError> {
        let tts = tts_of(self)?;
        let dir = tts.voices_dir.clone();
        let installed = match (args.url, args.path) {
            (Some(url), None) => {
                let sha256 = args.sha256;
                tokio::task::spawn_blocking(move || {
                    let store = VoiceStore::open(dir)?;
                    let request = match &sha256 {
                        Some(sha) => hark_tts::voices::VoiceRequest::url(&url, Some(sha))?,
                        None => hark_tts::voices::VoiceRequest::parse(&url)?,
                    };
                    store
                        .install_request(
                            &request,
                            &hark_models::FetchOptions::default(),
                            hark_models::Progress::Silent,
                        )
                        .map(|done| done.voice)
                })
                .await
                .map_err(|e| ToolError::new("VoiceError", format!("install failed: {e}")))??
            }
            (None, Some(path)) => {
                let onnx = tts.outputs.resolve_read(std::path::Path::new(&path))?;
                let json = PathBuf::from(format!("{}.json", onnx.display()));
                let json = tts.outputs.resolve_read(&json)?;
                tokio::task::spawn_blocking(move || {
                    VoiceStore::open(dir)?.install_files(&onnx, &json)
                })
                .await
                .map_err(|e| ToolError::new("VoiceError", format!("install failed: {e}")))??
            }
            _ => {
                return Err(ToolError::invalid(
                    "give exactly one of `url` (a URL or catalog id) and `path`",
                ));
            }
        };
        Ok(success(
            format!("installed voice {}", installed.id),
            InstalledVoice {
                id: installed.id,
                language: installed.language,
                quality: installed.quality,
                sample_rate: installed.sample_rate,
                size: installed.size,
                sha256: installed.sha256,
                source: installed.source,
            },
        ))
    }

    async fn remove(&self, id: String) -> Result<CallToolResult, ToolError> {
        let tts = tts_of(self)?;
        let synth = Arc::clone(tts.synthesizer());
        let (dir, default) = (tts.voices_dir.clone(), tts.default_voice.clone());
        let key = hark_tts::catalog::id_key;
        if key(&id) == key(&default) {
            return Err(ToolError::invalid(format!(
                "{id} is the appliance's default voice (tts.voice); set another default first"
            )));
        }
        let removed = {
            let id = id.clone();
            tokio::task::spawn_blocking(move || {
                let removed = VoiceStore::open(dir)?.remove(&id)?;
                synth
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .unload(&removed.id);
                Ok::<_, VoicesError>(removed)
            })
            .await
            .map_err(|e| ToolError::new("VoiceError", format!("remove failed: {e}")))??
        };
        let deleted: Vec<String> = removed
            .deleted
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        Ok(success(
            format!("removed voice {}", removed.id),
            RemovedVoice {
                id: removed.id,
                deleted,
            },
        ))
    }
}
