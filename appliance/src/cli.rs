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
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Speech-to-text models.
    #[command(subcommand)]
    Models(ModelsCommand),
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Convert a CTranslate2 whisper model folder (model.bin, vocabulary.txt)
    /// to a whisper.cpp ggml file with f16 weights.
    Import {
        /// The CTranslate2 model folder.
        source: PathBuf,
        /// The ggml file to write.
        output: PathBuf,
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
