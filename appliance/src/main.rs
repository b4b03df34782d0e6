use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use hark::{
    audio,
    cli::{Cli, Command, ConfigCommand, ModelsCommand},
    client,
    config::Config,
    logging, service,
};

fn main() -> ExitCode {
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
        Command::Connect { target } => {
            logging::init("warn")?;
            runtime.block_on(client::connect(&target))?;
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
        Command::Models(ModelsCommand::Import { source, output }) => {
            let model = hark_stt::ct2::Ct2Model::read(&source)?;
            let hparams = hark_stt::import::write_ggml(&model, &output)?;
            println!(
                "wrote {} (f16): n_vocab {}, audio {} ctx × {} state × {} layers, text {} ctx × {} layers, {} mels",
                output.display(),
                hparams.n_vocab,
                hparams.n_audio_ctx,
                hparams.n_audio_state,
                hparams.n_audio_layer,
                hparams.n_text_ctx,
                hparams.n_text_layer,
                hparams.n_mels
            );
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
