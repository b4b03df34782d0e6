use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use hark::{
    audio,
    board::BoardControl,
    cli::{Cli, Command, ConfigCommand, OnOff},
    client,
    config::Config,
    logging, service,
};

fn main() -> ExitCode {
    hark::memory::tune_allocator();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hark: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, leaving out a cause whose text the message
/// already quotes (most of Hark's errors name their cause inline).
fn describe(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // The virtual sound card is set up through the environment, which may
    // only change while this is the process's one thread.
    if let Command::Run = cli.command {
        let (config, _) = Config::load(cli.config.as_deref())?;
        if config.audio.enabled && config.audio.virtual_card.enabled {
            audio::prepare_virtual_card(&config.audio)?;
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("hark-rt")
        .build()
        .context("cannot start the async runtime")?;
    match cli.command {
        Command::Run => {
            let (config, file) = Config::load(cli.config.as_deref())?;
            logging::init(&config.service.log_level)?;
            match file {
                Some(file) => tracing::info!(config = %file.display(), "configuration loaded"),
                None => tracing::info!("no configuration file; using defaults"),
            }
            runtime.block_on(async {
                let shutdown = service::termination().context("cannot watch SIGTERM and SIGINT")?;
                service::run(config, shutdown)
                    .await
                    .context("the daemon failed")
            })
        }
        Command::Status { host, json } => {
            logging::init("warn")?;
            let status = runtime.block_on(client::status(&host))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", client::format_status(&host, &status));
            }
            Ok(())
        }
        Command::Connect { target, name } => {
            logging::init("warn")?;
            runtime.block_on(client::connect(&target, name.as_deref()))?;
            Ok(())
        }
        Command::Inject { file } => {
            let (config, _) = Config::load(cli.config.as_deref())?;
            let seconds = audio::inject(&config.audio, &file)?;
            println!(
                "injected {} ({seconds:.1} s) into {}",
                file.display(),
                config.audio.virtual_card.inject_fifo.display()
            );
            Ok(())
        }
        Command::Button { action } => {
            logging::init("warn")?;
            let (config, _) = Config::load(cli.config.as_deref())?;
            let control = BoardControl {
                button: Some(action),
                mute: None,
            };
            runtime.block_on(client::board(&config.mcp.unix.path, &control))?;
            Ok(())
        }
        Command::Mute { state } => {
            logging::init("warn")?;
            let (config, _) = Config::load(cli.config.as_deref())?;
            let control = BoardControl {
                button: None,
                mute: Some(state == OnOff::On),
            };
            let result = runtime.block_on(client::board(&config.mcp.unix.path, &control))?;
            let muted = result["muted"].as_bool().unwrap_or(false);
            println!("mute {}", if muted { "on" } else { "off" });
            Ok(())
        }
        Command::Models(command) => {
            logging::init("warn")?;
            let (config, _) = Config::load(cli.config.as_deref())?;
            hark::models::run(command, &config.stt.models_dir)?;
            Ok(())
        }
        Command::Voices(command) => {
            logging::init("warn")?;
            let (config, _) = Config::load(cli.config.as_deref())?;
            hark::voices::run(command, &config.tts.voices_dir)?;
            Ok(())
        }
        Command::Listen {
            host,
            timeout,
            json,
        } => {
            logging::init("warn")?;
            let result = runtime.block_on(client::listen(&host, timeout))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                println!("{}", result["text"].as_str().unwrap_or_default());
            }
            Ok(())
        }
        Command::Say {
            text,
            voice,
            rate,
            out,
            host,
        } => {
            logging::init("warn")?;
            let result = runtime.block_on(client::say(
                &host,
                &text,
                voice.as_deref(),
                rate,
                out.as_deref(),
            ))?;
            match out {
                Some(out) => eprintln!(
                    "wrote {} s of speech ({}, {}) to {}",
                    result["duration_seconds"],
                    result["voice"].as_str().unwrap_or("?"),
                    result["engine"].as_str().unwrap_or("?"),
                    out.display()
                ),
                None => eprintln!(
                    "{} ({}, {})",
                    result["status"].as_str().unwrap_or("?"),
                    result["voice"].as_str().unwrap_or("?"),
                    result["engine"].as_str().unwrap_or("?")
                ),
            }
            Ok(())
        }
        Command::Transcribe {
            file,
            language,
            format,
        } => {
            logging::init("warn")?;
            if !["text", "json", "srt", "vtt"].contains(&format.as_str()) {
                anyhow::bail!("unknown format `{format}`: use text, json, srt or vtt");
            }
            let (config, _) = Config::load(cli.config.as_deref())?;
            let transcript = hark::stt::transcribe_file(&config, &file, language)?;
            match format.as_str() {
                "text" => println!("{}", transcript.text),
                "json" => println!("{}", serde_json::to_string_pretty(&transcript)?),
                "srt" => print!("{}", hark::stt::subtitles(&transcript, false)),
                _ => print!("{}", hark::stt::subtitles(&transcript, true)),
            }
            Ok(())
        }
        Command::Config(ConfigCommand::Check { file }) => {
            let explicit = file.or(cli.config);
            let (config, read) = Config::load(explicit.as_deref())?;
            match read {
                Some(path) => println!("# {} is valid; effective configuration:", path.display()),
                None => println!("# no configuration file; built-in defaults:"),
            }
            print!("{}", config.to_toml());
            Ok(())
        }
    }
}
