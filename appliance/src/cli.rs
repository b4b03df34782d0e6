//! The `hark` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Hark: a voice appliance for AI agents.
///
/// Runs the daemon that serves MCP tools over raw TCP (7340), Streamable HTTP
/// and WebSocket (7341, path /mcp) and a Unix socket, and talks to a running
/// daemon.
#[derive(Debug, Parser)]
#[command(name = "hark", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file [default: /etc/hark/hark.toml if it exists, else
    /// built-in defaults].
    #[arg(
        long,
        short = 'c',
        global = true,
        env = "HARK_CONFIG",
        value_name = "FILE"
    )]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the appliance daemon in the foreground (what systemd starts).
    Run,
    /// Ask a running appliance for its status (calls the `get_status` tool).
    Status {
        /// Appliance to ask, HOST or HOST:PORT of its raw TCP transport.
        #[arg(long, default_value = "127.0.0.1:7340")]
        host: String,
        /// Print the status as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Bridge stdin/stdout to an appliance, for MCP clients that only speak
    /// stdio. Reconnects if the appliance restarts; calls that were in flight
    /// get a JSON-RPC error instead of hanging.
    Connect {
        /// Appliance to reach, HOST or HOST:PORT of its raw TCP transport.
        #[arg(default_value = "127.0.0.1:7340")]
        target: String,
    },
    /// Play a WAV file into the running daemon's virtual microphone, as if
    /// someone spoke it in the room (machines without a sound card).
    Inject {
        /// The WAV file (any rate, any channel count).
        file: PathBuf,
    },
    /// Listen for one utterance through the running appliance's microphone
    /// and print what was said (calls the `transcribe_voice` tool).
    Listen {
        /// Appliance to use, HOST or HOST:PORT of its raw TCP transport.
        #[arg(long, default_value = "127.0.0.1:7340")]
        host: String,
        /// Seconds to wait for speech to begin.
        #[arg(long)]
        timeout: Option<f64>,
        /// Print the structured result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Transcribe an audio file (WAV, FLAC, MP3, OGG/Vorbis) with the
    /// configured model, in this process.
    Transcribe {
        file: PathBuf,
        /// Language spoken (ISO 639-1) or `auto`.
        #[arg(long)]
        language: Option<String>,
        /// text, json, srt or vtt.
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Speech-to-text models.
    #[command(subcommand)]
    Models(ModelsCommand),
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Show the installed models, downloads in progress, and the models
    /// `fetch` knows.
    List {
        /// The models directory [default: stt.models_dir].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Download a whisper.cpp model (a catalog name, or any name with
    /// --url), resuming an interrupted download, and check its checksum.
    Fetch {
        name: String,
        /// Download from this URL instead of the catalog's.
        #[arg(long)]
        url: Option<String>,
        /// The file's expected SHA-256 (with --url).
        #[arg(long, requires = "url")]
        sha256: Option<String>,
        /// Replace an installed model of the same name.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Add a model: a CTranslate2 whisper folder (model.bin, vocabulary.txt)
    /// is converted to ggml in the chosen weight format; a ggml file is
    /// copied in.
    Import {
        /// The CTranslate2 model folder, or a ggml .bin file.
        source: PathBuf,
        /// The name to install it under [default: from the source, e.g.
        /// `tiny.en-q8_0`].
        #[arg(long)]
        name: Option<String>,
        /// Weights for a converted model: f16, q8_0, q5_1, q5_0 or q4_0.
        #[arg(long, short = 'q', default_value = "q8_0")]
        quantisation: String,
        /// Write the converted model to this file instead of the store.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Replace an installed model of the same name.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Check installed models against the manifest's sizes and SHA-256.
    Verify {
        /// One model [default: all].
        name: Option<String>,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Delete an installed model.
    Remove {
        name: String,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file and print the effective configuration.
    Check {
        /// File to check [default: the --config file, else /etc/hark/hark.toml
        /// if it exists, else the built-in defaults].
        file: Option<PathBuf>,
    },
}
