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
    /// The token to present to an appliance on another host (`hark token
    /// create` makes one); not needed on the appliance itself.
    #[arg(long, global = true, env = "HARK_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
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
        /// The agent's name on the appliance (what the person calls it and
        /// `get_status` shows), in place of the client's own
        /// `clientInfo.name`.
        #[arg(long)]
        name: Option<String>,
        /// Push the person's messages into the session as Claude Code
        /// channel events (start Claude Code with
        /// `--dangerously-load-development-channels server:NAME`).
        #[arg(long)]
        channel: bool,
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
    /// Speak text through the running appliance's speaker (calls
    /// `speak_text` and waits until it has been said), or with `--out`
    /// write the speech to a WAV file here (calls `synthesize_speech`).
    Say {
        /// The text to speak; `-` reads standard input and says each line
        /// as it comes, in order, until it ends (a response pipe).
        text: String,
        /// A voice id from `hark voices list`.
        #[arg(long)]
        voice: Option<String>,
        /// Speaking rate, 0.5–2.0.
        #[arg(long)]
        rate: Option<f64>,
        /// Write a WAV file instead of speaking.
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Appliance to use, HOST or HOST:PORT of its raw TCP transport.
        #[arg(long, default_value = "127.0.0.1:7340")]
        host: String,
    },
    /// Transcribe an audio file (WAV, FLAC, MP3, OGG/Vorbis) with the
    /// configured model, in this process.
    Transcribe {
        file: PathBuf,
        /// Language spoken (ISO 639-1), or `auto` to have it detected;
        /// default `stt.language` (`en`).
        #[arg(long)]
        language: Option<String>,
        /// text, json, srt or vtt.
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Press, hold or release the simulated board's push-to-talk button in
    /// the running daemon (machines without GPIO; over its Unix socket).
    Button {
        /// `press` (a tap), `hold` (down until `release`) or `release`.
        #[arg(value_enum)]
        action: ButtonArg,
    },
    /// Turn the simulated board's mute switch on or off in the running
    /// daemon (machines without GPIO; over its Unix socket).
    Mute {
        #[arg(value_enum)]
        state: OnOff,
    },
    /// Check a newly assembled board through the running daemon: the board
    /// profile found, a tone and a sentence, the noise floor and speech
    /// level of a short recording (played back), a press, a long press,
    /// the mute switch, every light and the microcontroller link; then a
    /// report, one line per step. Exits non-zero when a step failed. On the
    /// simulated board it needs nobody: the daemon moves the simulated
    /// button and switch itself (over its Unix socket).
    Selftest(SelftestArgs),
    /// Pair this machine's agents with an appliance: it asks the person
    /// aloud, and a short press of its button within a minute makes a
    /// token, kept here for `hark connect` and printed with the lines to
    /// use it in Claude Code, Cursor, Codex and the Python SDK.
    Pair {
        /// The appliance, HOST or HOST:PORT of its raw TCP transport
        /// [default: the one `hark discover` finds on the LAN].
        host: Option<String>,
        /// The agent's name on the appliance (said aloud when it asks;
        /// default: this machine's host name).
        #[arg(long)]
        name: Option<String>,
        /// What it may do: listen, speak, files, admin, comma-separated
        /// [default: listen,speak]. admin is said aloud.
        #[arg(long)]
        scopes: Option<String>,
        /// Print the result (with the token) as JSON, and keep nothing.
        #[arg(long)]
        json: bool,
    },
    /// List the Hark appliances on the LAN (mDNS): their names, addresses,
    /// ports, versions, and whether an agent must pair first.
    Discover {
        /// Seconds to listen for answers.
        #[arg(long, default_value_t = 3.0)]
        timeout: f64,
        /// Only on these network interfaces (repeat for several).
        #[arg(long = "interface", value_name = "NAME")]
        interfaces: Vec<String>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Tokens for agents on other hosts: make, list and revoke them (on
    /// the appliance, over its Unix socket).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Speech-to-text models.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Piper voices for text to speech.
    #[command(subcommand)]
    Voices(VoicesCommand),
}

/// `hark selftest`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct SelftestArgs {
    /// Print the report as JSON (the prompts still go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Seconds each step waits for a press or the mute switch (1–300).
    #[arg(long, default_value_t = 20.0)]
    pub timeout: f64,
    /// Steps to leave out, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub skip: Vec<hark_client::selftest::report::StepName>,
    /// With the virtual sound card: a WAV file played into its microphone
    /// as the person's speech while the level step records.
    #[arg(long, value_name = "WAV")]
    pub speech: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token for an agent, printed once: it is kept only as a hash.
    Create {
        /// The agent's name on the appliance (what the person calls it).
        name: String,
        /// What it may do: listen, speak, files, admin (comma-separated),
        /// or all.
        #[arg(long, default_value = "listen,speak")]
        scopes: String,
        /// Replace (and revoke) a token of the same name.
        #[arg(long)]
        replace: bool,
        /// Print the token and its record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the tokens: name, scopes, made, last used and from where.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: its agent is refused from its next request on, and
    /// its calls in flight end.
    Revoke { name: String },
}

#[derive(Debug, Subcommand)]
pub enum VoicesCommand {
    /// Show the installed voices, downloads in progress, problems, and the
    /// catalog voices `install` can download.
    List {
        /// The voices directory [default: /var/lib/hark/voices].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Install a voice: a catalog id (`en_US-lessac-medium` or
    /// `en-us-lessac-medium`), the URL of a voice's .onnx (its .onnx.json is
    /// fetched from beside it), or a local .onnx file (with its .onnx.json
    /// beside it, or --json). Downloads resume where an interrupted install
    /// stopped and are checked against the catalog's size and checksums.
    Install {
        /// Catalog id, URL, or path of an .onnx file.
        source: String,
        /// The local voice's .onnx.json [default: <source>.json].
        #[arg(long)]
        json: Option<PathBuf>,
        /// Install a local voice under this id [default: its file name
        /// without .onnx].
        #[arg(long)]
        id: Option<String>,
        /// The .onnx's expected SHA-256 (with a URL).
        #[arg(long)]
        sha256: Option<String>,
        /// Replace an installed voice of the same id.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Delete an installed voice (or the files of a broken one).
    Remove {
        voice: String,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
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
    /// is converted to ggml in the chosen weight format; a ggml file, a
    /// Moonshine folder (encoder_model.ort, decoder_model_merged.ort,
    /// tokenizer.bin, and its LICENSE if there) or a Smart Turn .onnx file
    /// is copied in.
    Import {
        /// The CTranslate2 or Moonshine model folder, a ggml .bin file or a
        /// Smart Turn .onnx file.
        source: PathBuf,
        /// The name to install it under [default: from the source, e.g.
        /// `tiny.en-q8_0`, `moonshine-tiny-en` for a folder `tiny-en`,
        /// `smart-turn-v3.2` for `smart-turn-v3.2-cpu.onnx`].
        #[arg(long)]
        name: Option<String>,
        /// Weights for a converted model: f16, q8_0, q5_1, q5_0 or q4_0.
        #[arg(long, short = 'q', default_value = "q8_0")]
        quantisation: String,
        /// Write the converted model to this file instead of the store
        /// (CTranslate2 folders only).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Replace an installed model of the same name.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Check installed models against the manifest's sizes and SHA-256
    /// (every file of a Moonshine folder, naming the ones that changed).
    Verify {
        /// One model [default: all].
        name: Option<String>,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Delete an installed model (a Moonshine folder with all its files).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// `hark button`'s action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ButtonArg {
    /// A tap: down, 120 ms, up.
    Press,
    /// Down, and kept down.
    Hold,
    /// Up.
    Release,
}

impl From<ButtonArg> for hark_core::room::ButtonAction {
    fn from(arg: ButtonArg) -> Self {
        match arg {
            ButtonArg::Press => Self::Press,
            ButtonArg::Hold => Self::Hold,
            ButtonArg::Release => Self::Release,
        }
    }
}
