use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use hark::{
    cli::{Cli, Command, ConfigCommand},
    config::Config,
};
use hark_room::audio;

mod commands;

/// `log10f` for the whole binary, in place of glibc's. glibc 2.43 (the
/// image's build root, Debian forky) gave `log10f` a new symbol version, and
/// a binary that links that version cannot start on the appliance's Debian
/// trixie (glibc 2.41; `image/build` refuses such a binary). Hark's own code
/// takes its logarithms in f64, but the echo canceller (the `aec3` crate)
/// takes them on f32. Defined here, every call in the binary resolves to
/// this at link time; f64's `log10` has one symbol version everywhere, and
/// the answer is at least as close as glibc's f32 one.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[unsafe(no_mangle)]
pub extern "C" fn log10f(x: f32) -> f32 {
    f64::from(x).log10() as f32
}

fn main() -> ExitCode {
    hark_room::memory::tune_allocator();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The report said which steps failed; the exit code says so too.
        Err(e) if e.is::<commands::StepsFailed>() => ExitCode::from(1),
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
    // The daemon's configuration, read once.
    let mut daemon = None;
    if let Command::Run = cli.command {
        let (config, file) = Config::load(cli.config.as_deref())?;
        if config.audio.enabled && config.audio.virtual_card.enabled {
            audio::prepare_virtual_card(&config.audio)?;
        }
        daemon = Some((config, file));
    } else {
        // A one-shot command's output piped into `head` ends it quietly, as
        // any Unix tool does, instead of a panic on the closed pipe. Not for
        // the daemon: a client hanging up must never kill it.
        // SAFETY: one thread still, and SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("hark-rt")
        .build()
        .context("cannot start the async runtime")?;
    let globals = commands::Globals {
        runtime,
        config: cli.config,
        token: cli.token,
    };
    match cli.command {
        Command::Run => {
            let (config, file) = daemon.context("the daemon's configuration was read")?;
            commands::daemon(&globals, config, file)
        }
        Command::Status { host, json } => commands::status(&globals, host, json),
        Command::Connect {
            target,
            name,
            channel,
        } => commands::connect(&globals, target, name, channel),
        Command::Discover {
            timeout,
            interfaces,
            json,
        } => commands::discover(timeout, interfaces, json),
        Command::Pair {
            host,
            name,
            scopes,
            json,
        } => commands::pair(&globals, host, name, scopes, json),
        Command::Inject { file } => commands::inject(&globals, file),
        Command::Button { action } => commands::button(&globals, action),
        Command::Mute { state } => commands::mute(&globals, state),
        Command::Models(command) => commands::models(&globals, command),
        Command::Voices(command) => commands::voices(&globals, command),
        Command::Listen {
            host,
            timeout,
            json,
        } => commands::listen(&globals, host, timeout, json),
        Command::Say {
            text,
            voice,
            rate,
            out,
            host,
        } => commands::say(&globals, text, voice, rate, out, host),
        Command::Transcribe {
            file,
            language,
            format,
        } => commands::transcribe(&globals, file, language, format),
        Command::Token(command) => commands::token(&globals, command),
        Command::Selftest(args) => commands::selftest(&globals, args),
        Command::Config(ConfigCommand::Check { file }) => commands::config_check(&globals, file),
    }
}
