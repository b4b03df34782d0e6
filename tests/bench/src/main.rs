//! `hark-bench`: starts the Hark daemon, measures the MCP round trip of
//! `tools/call get_status` on every transport with one and with many
//! concurrent clients, the daemon's CPU while clients sit idle, and its
//! memory; then does the same over Streamable HTTP against a peer server built
//! on the official Python SDK, and prints a markdown report.
//!
//! `hark-bench audio` benchmarks the audio engine instead, on the virtual
//! sound card (see [`audio`]); `hark-bench stt` speech to text against
//! whisper.cpp and faster-whisper (see [`stt`]); `hark-bench tts` text to
//! speech against piper-tts (see [`tts`]); `hark-bench person` the button
//! press to the listening light and chime, and a message's delivery to a
//! waiting agent (see [`person`]); `hark-bench wyoming` the Wyoming
//! services against Home Assistant's own servers (see [`wyoming`]).
//!
//! ```sh
//! cargo build --release -p hark
//! cargo run --release -p hark-bench -- --help
//! cargo run --release -p hark-bench -- audio --help
//! ```
//!
//! Everything runs on loopback, and every loop is bounded by call counts and
//! per-call timeouts. `docs/benchmarks.md` has the method and a result.

mod audio;
mod client;
mod daemon;
mod echo;
mod eot;
mod figures;
mod files;
mod host;
mod load;
mod person;
mod procfs;
mod report;
mod room;
mod server;
mod soak;
mod speech;
mod stress;
mod stt;
mod tts;
mod turn;
mod wake;
mod wer;
mod wyoming;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::Parser;

use crate::{
    client::{Endpoints, Transport},
    host::{Scratch, machine, tidy},
    load::{IdleSpec, LoadSpec},
    report::{Report, ServerRun},
    server::Server,
};

/// Benchmarks a Hark daemon against the official Python MCP SDK; with
/// `audio`, the audio engine on the virtual sound card; with `stt`, speech
/// to text against whisper.cpp and faster-whisper; with `tts`, text to
/// speech against piper-tts.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Args {
    /// What to benchmark instead of the MCP daemon (the default).
    #[command(subcommand)]
    mode: Option<Mode>,
    /// The hark binary to start (`cargo build --release -p hark` builds it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// Transports to measure, comma-separated (tcp, unix, http, websocket).
    #[arg(long, value_delimiter = ',', default_value = "tcp,unix,http,websocket")]
    transports: Vec<Transport>,
    /// Concurrent clients in the many-clients runs (each its own connection).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Measured calls in the single-client runs.
    #[arg(long, default_value_t = 2000)]
    calls_single: usize,
    /// Measured calls per client in the many-clients runs.
    #[arg(long, default_value_t = 200)]
    calls_per_client: usize,
    /// Unmeasured calls each client makes before the measurement starts.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Pause between a client's measured calls, in milliseconds (0: back to
    /// back, the default). With a pause the many-clients runs measure latency
    /// at a paced load instead of at saturation.
    #[arg(long, default_value_t = 0)]
    think_ms: u64,
    /// A call unanswered after this many milliseconds fails its client.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Length of the idle-CPU window, in seconds.
    #[arg(long, default_value_t = 30)]
    idle_secs: u64,
    /// Idle raw-TCP clients held open during the idle window.
    #[arg(long, default_value_t = 4)]
    idle_tcp: usize,
    /// Idle HTTP sessions (each with its GET event stream) during the idle window.
    #[arg(long, default_value_t = 1)]
    idle_http: usize,
    /// Worker threads of the bench's own (client) runtime. It shares the
    /// machine's cores with the server under test.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Python with the `mcp` 2.x SDK, for the peer server (`bash tests/setup.sh`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python"))]
    peer_python: PathBuf,
    /// The peer server script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/peer_server.py"))]
    peer_script: PathBuf,
    /// Skip the peer comparison.
    #[arg(long)]
    no_peer: bool,
    /// Measured calls in the peer's single-client run.
    #[arg(long, default_value_t = 500)]
    peer_calls_single: usize,
    /// Measured calls per client in the peer's many-clients run.
    #[arg(long, default_value_t = 50)]
    peer_calls_per_client: usize,
    /// Unmeasured calls per client against the peer.
    #[arg(long, default_value_t = 10)]
    peer_warmup: usize,
    /// Length of the peer's idle-CPU window, in seconds (default: --idle-secs).
    #[arg(long)]
    peer_idle_secs: Option<u64>,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    Audio(audio::AudioArgs),
    Stt(stt::SttArgs),
    Tts(tts::TtsArgs),
    /// The person starts: button press to the listening light and chime,
    /// and a message's delivery to a waiting agent (see [`person`]).
    Person(person::PersonArgs),
    /// Several agents: the floor's hand-over, event fan-out to 32
    /// subscribers, the history's write cost (see [`room`]).
    Room(room::RoomArgs),
    /// Many agents on TCP, HTTP, WebSocket and HTTPS polling while one
    /// listens to recorded people and one speaks: round trips, and no
    /// overrun, underrun or mishearing (see [`stress`]).
    Stress(stress::StressArgs),
    /// The appliance used for a long time: cycles of listen, speak,
    /// converse and a message with eight agents connected; memory,
    /// descriptors, threads and the history checked (see [`soak`]).
    Soak(soak::SoakArgs),
    /// The turn: end of speech to the transcript at an MCP client, the
    /// live path against whisper with silence and a faster-whisper
    /// pipeline; the pause set; memory; first sound (see [`turn`]).
    Turn(turn::TurnArgs),
    /// Where the turn ends on real recorded speech: dead air against turns
    /// cut, for silence, Smart Turn and Hark's rules (see [`eot`]).
    Eot(eot::EotArgs),
    /// Word errors of the live engine, Hark's whisper and faster-whisper
    /// on the same audio, by six espeak-ng voices and piper's (see
    /// [`wer`]).
    Wer(wer::WerArgs),
    /// Files as an agent transcribes them: `transcribe_audio` over MCP on
    /// recorded people, every source capped equally, against
    /// faster-whisper in the same run (see [`files`]).
    Files(files::FilesArgs),
    /// The wake word: false wakes an hour on recorded speech and music,
    /// missed words on synthetic voices near, far and in noise, how late,
    /// and CPU against pymicro-wakeword (see [`wake`]).
    Wake(wake::WakeArgs),
    /// Echo cancellation on recorded people in a simulated room: their
    /// words while Hark speaks, the echo removed, false barge-ins an hour
    /// and the barge-in's reaction, AEC3 against speexdsp (see [`echo`]).
    Echo(echo::EchoArgs),
    /// Hark's Wyoming speech to text and text to speech against Home
    /// Assistant's wyoming-faster-whisper and wyoming-piper, measured by
    /// wyoming-bench on recorded people, interleaved (see [`wyoming`]).
    Wyoming(wyoming::WyomingArgs),
}

fn main() -> ExitCode {
    // As the daemon runs: the engines measured in this process allocate
    // the way they do in it.
    hark_room::memory::tune_allocator();
    let mut args = Args::parse();
    // Still one thread here: the audio benchmark sets ALSA's environment
    // before it starts any.
    let result = match args.mode.take() {
        Some(Mode::Audio(audio)) => audio::main(audio),
        Some(Mode::Stt(stt)) => stt::main(stt),
        Some(Mode::Tts(tts)) => tts::main(tts),
        Some(Mode::Person(person)) => person::main(person),
        Some(Mode::Room(room)) => room::main(room),
        Some(Mode::Stress(stress)) => stress::main(stress),
        Some(Mode::Soak(soak)) => soak::main(soak),
        Some(Mode::Turn(turn)) => turn::main(turn),
        Some(Mode::Eot(eot)) => eot::main(eot),
        Some(Mode::Wer(wer)) => wer::main(wer),
        Some(Mode::Files(files)) => files::main(files),
        Some(Mode::Wake(wake)) => wake::main(wake),
        Some(Mode::Echo(echo)) => echo::main(echo),
        Some(Mode::Wyoming(wyoming)) => wyoming::main(wyoming),
        None => bench(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hark-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    anyhow::ensure!(
        args.client_threads > 0,
        "--client-threads must be at least 1"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(run(&args))?;
    print!("{}", report.render());
    Ok(())
}

/// Which load runs to make, and with what counts.
struct Plan {
    transports: Vec<Transport>,
    single: usize,
    many: usize,
    per_client: usize,
    warmup: usize,
    timeout: Duration,
    think: Duration,
}

impl Plan {
    fn specs(&self) -> Vec<LoadSpec> {
        let mut specs = Vec::new();
        for &transport in &self.transports {
            for (clients, calls_per_client) in [(1, self.single), (self.many, self.per_client)] {
                specs.push(LoadSpec {
                    transport,
                    clients,
                    calls_per_client,
                    warmup: self.warmup,
                    timeout: self.timeout,
                    think: self.think,
                });
            }
        }
        specs
    }
}

/// Measures one started server: idle first (fresh process), then the load.
async fn measure(
    name: &str,
    server: Server,
    idle: IdleSpec,
    plan: &Plan,
    ticks: u64,
) -> anyhow::Result<ServerRun> {
    let pid = server.pid;
    let endpoints: Endpoints = server.endpoints.clone();
    let memory_start = procfs::memory(pid)?;
    eprintln!(
        "[bench] {name}: idle window of {:?} with {}",
        idle.window,
        idle.describe()
    );
    let idle = load::run_idle(pid, &endpoints, idle, ticks).await;
    let mut loads = Vec::new();
    for spec in plan.specs() {
        eprintln!(
            "[bench] {name}: {} × {} client(s), {} calls each",
            spec.transport, spec.clients, spec.calls_per_client
        );
        let result = load::run_load(pid, &endpoints, spec, ticks)
            .await
            .map_err(|e| (spec, e));
        if let Err((_, e)) = &result {
            eprintln!("[bench] {name}: run failed: {e:#}");
        }
        loads.push(result);
        // Let closed connections wind down before the next run.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let memory_after_load = procfs::memory(pid).ok();
    let stopped = server.stop().await;
    Ok(ServerRun {
        name: name.to_owned(),
        memory_start,
        idle,
        loads,
        memory_after_load,
        stopped,
    })
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    let scratch = Scratch::new()?;
    let ticks = procfs::clock_ticks_per_second();
    let timeout = Duration::from_millis(args.timeout_ms);
    let think = Duration::from_millis(args.think_ms);

    let hark_binary = tidy(&args.hark);
    anyhow::ensure!(
        hark_binary.is_file(),
        "no hark binary at {} (run `cargo build --release -p hark`, or pass --hark)",
        hark_binary.display()
    );
    eprintln!("[bench] starting {}", hark_binary.display());
    let hark = server::start_hark(&hark_binary, &scratch.0).await?;
    let hark_plan = Plan {
        transports: args.transports.clone(),
        single: args.calls_single,
        many: args.clients,
        per_client: args.calls_per_client,
        warmup: args.warmup,
        timeout,
        think,
    };
    let hark_idle = IdleSpec {
        tcp: args.idle_tcp,
        http: args.idle_http,
        window: Duration::from_secs(args.idle_secs),
    };
    let hark = measure("hark", hark, hark_idle, &hark_plan, ticks).await?;

    let python = tidy(&args.peer_python);
    let script = tidy(&args.peer_script);
    let mut peer_versions = None;
    let peer = if args.no_peer {
        Err(anyhow::anyhow!("--no-peer given"))
    } else if !python.is_file() {
        let why = anyhow::anyhow!(
            "no Python at {} (run `bash tests/setup.sh`, or pass --peer-python)",
            python.display()
        );
        eprintln!("[bench] peer skipped: {why}");
        Err(why)
    } else {
        peer_versions = Some(server::peer_versions(&python));
        eprintln!(
            "[bench] starting the peer: {} {}",
            python.display(),
            script.display()
        );
        match server::start_peer(&python, &script, &scratch.0).await {
            Ok(peer) => {
                let plan = Plan {
                    transports: vec![Transport::Http],
                    single: args.peer_calls_single,
                    many: args.clients,
                    per_client: args.peer_calls_per_client,
                    warmup: args.peer_warmup,
                    timeout,
                    think,
                };
                // The peer speaks only HTTP: the same number of idle clients,
                // all as HTTP sessions.
                let idle = IdleSpec {
                    tcp: 0,
                    http: args.idle_tcp + args.idle_http,
                    window: Duration::from_secs(args.peer_idle_secs.unwrap_or(args.idle_secs)),
                };
                Ok(measure("peer", peer, idle, &plan, ticks).await?)
            }
            Err(e) => {
                eprintln!("[bench] peer skipped: {e:#}");
                Err(e.context("the peer did not start"))
            }
        }
    };

    Ok(Report {
        machine: machine(),
        ticks_per_second: ticks,
        think,
        hark,
        peer,
        peer_versions,
        many_clients: args.clients,
    })
}
