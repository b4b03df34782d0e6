//! One function per `hark` command: `main` parses the command line and
//! hands it to the one it names.

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use hark::{
    cli::{ButtonArg, ModelsCommand, OnOff, SelftestArgs, TokenCommand, VoicesCommand},
    config::Config,
    service,
};
use hark_client as client;
use hark_core::{logging, methods::TokenRequest, room::BoardControl};

/// What every command may use: the async runtime and the global options.
pub struct Globals {
    pub runtime: tokio::runtime::Runtime,
    pub config: Option<PathBuf>,
    pub token: Option<String>,
}

/// `hark run`: the daemon, until SIGTERM or SIGINT.
/// `hark run`, with the configuration `main` read (from `file`).
pub fn daemon(cli: &Globals, config: Config, file: Option<PathBuf>) -> anyhow::Result<()> {
    logging::init(&config.service.log_level)?;
    match file {
        Some(file) => tracing::info!(config = %file.display(), "configuration loaded"),
        None => tracing::info!("no configuration file; using defaults"),
    }
    cli.runtime.block_on(async {
        let shutdown = service::termination().context("cannot watch SIGTERM and SIGINT")?;
        service::run(config, shutdown)
            .await
            .context("the daemon failed")
    })
}

/// `hark status`.
pub fn status(cli: &Globals, host: String, json: bool) -> anyhow::Result<()> {
    logging::init("warn")?;
    let status = cli.runtime.block_on(client::status(
        &host,
        token_for(cli.token.as_deref(), &host).as_ref(),
    ))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", client::format_status(&host, &status));
    }
    Ok(())
}

/// `hark connect`: the stdio bridge.
pub fn connect(
    cli: &Globals,
    target: String,
    name: Option<String>,
    channel: bool,
) -> anyhow::Result<()> {
    logging::init("warn")?;
    cli.runtime.block_on(client::connect(
        &target,
        name.as_deref(),
        token_for(cli.token.as_deref(), &target).as_ref(),
        channel,
    ))?;
    Ok(())
}

/// `hark discover`.
pub fn discover(timeout: f64, interfaces: Vec<String>, json: bool) -> anyhow::Result<()> {
    logging::init("warn")?;
    if !(0.1..=60.0).contains(&timeout) {
        anyhow::bail!("--timeout must be 0.1–60 seconds, got {timeout}");
    }
    let found = hark_mcp::discovery::discover(Duration::from_secs_f64(timeout), &interfaces)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        print!("{}", hark_mcp::discovery::format_found(&found));
    }
    Ok(())
}

/// `hark pair`: asks the appliance, keeps the token and its CA.
pub fn pair(
    cli: &Globals,
    host: Option<String>,
    name: Option<String>,
    scopes: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    logging::init("warn")?;
    let host = match host {
        Some(host) => host,
        None => discovered_host()?,
    };
    // This machine's short host name, as the appliance finds its own.
    let name = name.unwrap_or_else(|| hark_mcp::transport::guard::short_hostname(""));
    eprintln!(
        "Asking Hark at {host} to pair `{name}`: press its button briefly within a minute to allow it (hold it to refuse)."
    );
    let result = cli
        .runtime
        .block_on(client::pair(&host, &name, scopes.as_deref()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    // The answer's fields are the kept record's, by name.
    let mut saved: hark_client::saved::Saved = serde_json::from_value(result.clone())
        .context("the appliance's answer to hark/pair is not a pairing")?;
    saved.paired_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    if let Some(pem) = result["ca_pem"].as_str() {
        match hark_client::saved::store_ca(&host, pem) {
            Ok(path) => saved.ca_file = Some(path),
            Err(e) => eprintln!("warning: the appliance's CA certificate is not kept: {e}"),
        }
    }
    let ca_file = saved.ca_file.clone();
    // The token is printed whatever happens to the file: it is
    // shown only this once.
    let kept = match hark_client::saved::store(&host, saved) {
        Ok(path) => Some(path),
        Err(e) => {
            eprintln!("warning: the token is not kept for `hark connect`: {e}");
            None
        }
    };
    print!(
        "{}",
        client::format_paired(&host, &result, kept.as_deref(), ca_file.as_deref())
    );
    Ok(())
}

/// `hark inject`: a WAV file into the virtual microphone.
pub fn inject(cli: &Globals, file: PathBuf) -> anyhow::Result<()> {
    let (config, _) = Config::load(cli.config.as_deref())?;
    let seconds = hark_audio::virtual_mic::inject(&config.audio, &file)?;
    println!(
        "injected {} ({seconds:.1} s) into {}",
        file.display(),
        config.audio.virtual_card.inject_fifo.display()
    );
    Ok(())
}

/// `hark button`: the simulated board's button.
pub fn button(cli: &Globals, action: ButtonArg) -> anyhow::Result<()> {
    logging::init("warn")?;
    let (config, _) = Config::load(cli.config.as_deref())?;
    let control = BoardControl {
        button: Some(action.into()),
        mute: None,
    };
    cli.runtime
        .block_on(client::board(&config.mcp.unix.path, &control))?;
    Ok(())
}

/// `hark mute`: the simulated board's switch.
pub fn mute(cli: &Globals, state: OnOff) -> anyhow::Result<()> {
    logging::init("warn")?;
    let (config, _) = Config::load(cli.config.as_deref())?;
    let control = BoardControl {
        button: None,
        mute: Some(state == OnOff::On),
    };
    let result = cli
        .runtime
        .block_on(client::board(&config.mcp.unix.path, &control))?;
    let muted = result["muted"].as_bool().unwrap_or(false);
    println!("mute {}", if muted { "on" } else { "off" });
    Ok(())
}

/// `hark models …`.
pub fn models(cli: &Globals, command: ModelsCommand) -> anyhow::Result<()> {
    logging::init("warn")?;
    let (config, _) = Config::load(cli.config.as_deref())?;
    hark::models::run(command, &config.stt.models_dir)?;
    Ok(())
}

/// `hark voices …`.
pub fn voices(cli: &Globals, command: VoicesCommand) -> anyhow::Result<()> {
    logging::init("warn")?;
    let (config, _) = Config::load(cli.config.as_deref())?;
    hark::voices::run(command, &config.tts.voices_dir)?;
    Ok(())
}

/// `hark listen`.
pub fn listen(cli: &Globals, host: String, timeout: Option<f64>, json: bool) -> anyhow::Result<()> {
    logging::init("warn")?;
    let result = cli.runtime.block_on(client::listen(
        &host,
        token_for(cli.token.as_deref(), &host).as_ref(),
        timeout,
    ))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        println!("{}", result["text"].as_str().unwrap_or_default());
    }
    Ok(())
}

/// `hark say`.
pub fn say(
    cli: &Globals,
    text: String,
    voice: Option<String>,
    rate: Option<f64>,
    out: Option<PathBuf>,
    host: String,
) -> anyhow::Result<()> {
    logging::init("warn")?;
    let token = token_for(cli.token.as_deref(), &host);
    if text == "-" {
        if out.is_some() {
            anyhow::bail!("`hark say -` speaks each line it reads; --out takes one text");
        }
        return say_lines(cli, &host, token.as_ref(), voice.as_deref(), rate);
    }
    let result = cli.runtime.block_on(client::say(
        &host,
        token.as_ref(),
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

/// `hark say -`: each line of standard input said as it comes, one after
/// the other (a line is read while the one before is being said); blank
/// lines are skipped. A line the appliance refuses is reported and the
/// rest go on; the exit status says whether any was refused.
fn say_lines(
    cli: &Globals,
    host: &str,
    token: Option<&client::Token>,
    voice: Option<&str>,
    rate: Option<f64>,
) -> anyhow::Result<()> {
    let (lines, mut next) = tokio::sync::mpsc::channel::<std::io::Result<String>>(64);
    // Standard input is read on a thread of its own: a read blocks.
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            if lines.blocking_send(line).is_err() {
                return;
            }
        }
    });
    let refused = cli.runtime.block_on(async {
        let mut refused = 0usize;
        while let Some(line) = next.recv().await {
            let line = line.map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))?;
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            match client::say(host, token, text, voice, rate, None).await {
                Ok(result) => eprintln!("{}: {text}", result["status"].as_str().unwrap_or("?")),
                Err(e) => {
                    refused += 1;
                    eprintln!("not said: {text}: {e}");
                }
            }
        }
        anyhow::Ok(refused)
    })?;
    if refused > 0 {
        anyhow::bail!("{refused} line(s) were not said");
    }
    Ok(())
}

/// `hark transcribe`: a file, on this machine.
pub fn transcribe(
    cli: &Globals,
    file: PathBuf,
    language: Option<String>,
    format: String,
) -> anyhow::Result<()> {
    logging::init("warn")?;
    if !["text", "json", "srt", "vtt"].contains(&format.as_str()) {
        anyhow::bail!("unknown format `{format}`: use text, json, srt or vtt");
    }
    let (config, _) = Config::load(cli.config.as_deref())?;
    let transcript = hark_room::stt::transcribe_file(&config.room(), &file, language)?;
    match format.as_str() {
        "text" => println!("{}", transcript.text),
        "json" => println!("{}", serde_json::to_string_pretty(&transcript)?),
        "srt" => print!("{}", hark_room::stt::subtitles(&transcript, false)),
        _ => print!("{}", hark_room::stt::subtitles(&transcript, true)),
    }
    Ok(())
}

/// `hark token …`.
pub fn token(cli: &Globals, command: TokenCommand) -> anyhow::Result<()> {
    logging::init("warn")?;
    let (config, _) = Config::load(cli.config.as_deref())?;
    let socket = config.mcp.unix.path.clone();
    let (request, json) = match command {
        TokenCommand::Create {
            name,
            scopes,
            replace,
            json,
        } => (
            TokenRequest::Create {
                name,
                scopes: Some(scopes),
                replace,
            },
            json,
        ),
        TokenCommand::List { json } => (TokenRequest::List, json),
        TokenCommand::Revoke { name } => (TokenRequest::Revoke { name }, false),
    };
    let result = cli.runtime.block_on(client::tokens(&socket, &request))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    print!("{}", client::format_tokens(&request, &result));
    Ok(())
}

/// `hark selftest`.
pub fn selftest(cli: &Globals, args: SelftestArgs) -> anyhow::Result<()> {
    logging::init("warn")?;
    if !(1.0..=300.0).contains(&args.timeout) {
        anyhow::bail!("--timeout must be 1–300 seconds, got {}", args.timeout);
    }
    let (config, _) = Config::load(cli.config.as_deref())?;
    let options = hark_client::selftest::run::Options {
        timeout: Duration::from_secs_f64(args.timeout),
        skip: args.skip,
        speech: args.speech,
    };
    let report = cli.runtime.block_on(hark_client::selftest::run::run(
        &config.mcp.unix.path,
        &config.audio,
        options,
    ))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    if !report.passed {
        return Err(StepsFailed.into());
    }
    Ok(())
}

/// `hark config check`.
pub fn config_check(cli: &Globals, file: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let explicit = file.or(cli.config.clone());
    let (config, read) = Config::load(explicit.as_deref())?;
    match read {
        Some(path) => println!("# {} is valid; effective configuration:", path.display()),
        None => println!("# no configuration file; built-in defaults:"),
    }
    print!("{}", config.to_toml());
    Ok(())
}

/// `hark selftest` ran, and a step failed (its report says which).
#[derive(Debug, thiserror::Error)]
#[error("a self-test step failed")]
pub struct StepsFailed;

/// The token to present to `target`: `--token` (or `HARK_TOKEN`), else the
/// one `hark pair` kept for that appliance (its host and port). A token
/// file that cannot be read is said, not fatal: the appliance may not need
/// a token at all.
fn token_for(given: Option<&str>, target: &str) -> Option<client::Token> {
    if let Some(token) = given {
        return Some(client::Token::Given(token.to_owned()));
    }
    let file = match hark_client::saved::path() {
        Ok(file) => file,
        Err(_) => return None,
    };
    match hark_client::saved::lookup_in(&file, target) {
        Ok(saved) => saved.map(|s| client::Token::Saved {
            token: s.token,
            file,
        }),
        Err(e) => {
            eprintln!("warning: {e}");
            None
        }
    }
}

/// The one appliance on the LAN, for `hark pair` without a host.
fn discovered_host() -> anyhow::Result<String> {
    eprintln!("Looking for Hark on the LAN…");
    let found = hark_mcp::discovery::discover(Duration::from_secs(3), &[])?;
    match found.as_slice() {
        [] => anyhow::bail!(
            "no Hark appliance answered on the LAN; give its address: `hark pair HOST`"
        ),
        [one] => {
            let address = one
                .address()
                .with_context(|| format!("{} answered without an address", one.name))?;
            let port = one.tcp_port.unwrap_or(client::DEFAULT_PORT);
            eprintln!("Found {} at {address}.", one.name);
            Ok(match address {
                std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                v4 => format!("{v4}:{port}"),
            })
        }
        several => anyhow::bail!(
            "several appliances answered; name one: {}",
            several
                .iter()
                .map(|f| format!("`hark pair {}` ({})", f.host, f.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
