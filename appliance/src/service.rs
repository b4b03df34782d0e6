//! The daemon's lifecycle: bind every listener, tell systemd we are ready,
//! keep the watchdog fed while the health checks pass, and on SIGTERM or
//! SIGINT stop accepting, let calls in flight finish (or cancel them) and
//! release everything within the shutdown budget.
//!
//! [`run`] takes the shutdown signal as a future, so tests drive a real daemon
//! on port 0 and stop it when they like (mini-redis's shape).

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_core::status::Health;
use hark_mcp::transport::{Listeners, Shared, TransportError};
use hark_room::start::{StartError, Started, start_board, start_room};
use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Room(#[from] StartError),
    #[error("cannot listen for Wyoming on {address}: {source}")]
    Wyoming {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen for the ESPHome API on {address}: {source}")]
    Esphome {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Opening the tokens on the blocking pool died (it panicked).
    #[error("authentication start-up failed")]
    Auth(#[source] tokio::task::JoinError),
}

/// Sends a notification to systemd when it is listening (`NOTIFY_SOCKET`).
/// A failure is logged as a warning once, then quietly: the watchdog would
/// otherwise repeat it every few seconds.
fn notify(states: &[NotifyState]) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        if WARNED.swap(true, Ordering::Relaxed) {
            tracing::debug!(error = %e, "cannot notify systemd");
        } else {
            tracing::warn!(error = %e, "cannot notify systemd");
        }
    }
}

/// Runs the daemon until `shutdown` resolves.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServiceError> {
    // Uptime counts from here: loading the models is part of it.
    let started = std::time::Instant::now();
    let token = CancellationToken::new();
    // Bound first, so port 0 and bind errors are known before anything
    // is announced.
    let mut listeners = Listeners::bind(&config.mcp).await?;
    let tls = open_tls(&config, &mut listeners).await;
    let wyoming = match config.wyoming.enabled {
        true => Some(
            hark_wyoming::server::bind(&config.wyoming)
                .await
                .map_err(|source| ServiceError::Wyoming {
                    address: config.wyoming.listen,
                    source,
                })?,
        ),
        false => None,
    };
    let esphome = match config.esphome.enabled {
        true => Some(
            hark_esphome::server::bind(&config.esphome)
                .await
                .map_err(|source| ServiceError::Esphome {
                    address: config.esphome.listen,
                    source,
                })?,
        ),
        false => None,
    };
    let health = Arc::new(Health::default());
    let mut room_config = config.room();
    // The person's starts Home Assistant's pipeline takes, when Hark is its
    // satellite: the room is made with them.
    let starts = esphome.as_ref().map(|_| {
        hark_esphome::pipeline::Starts::new(
            config.esphome.run_on_wake_word,
            config.esphome.run_on_press,
        )
    });
    let Started {
        state,
        board,
        conductor,
        audio,
        wake,
        history,
    } = start_room(
        &mut room_config,
        &health,
        &token,
        starts
            .clone()
            .map(|s| s as Arc<dyn hark_core::room::TakeStarts>),
    )
    .await?;
    let state = Arc::new(state);
    let board = start_board(&state, &room_config, board, conductor, &token);
    let mut serving = listeners
        .addresses()
        .iter()
        .map(|(transport, address)| format!("{transport}={address}"))
        .collect::<Vec<_>>();
    let wyoming_address = wyoming.as_ref().and_then(|l| l.local_addr().ok());
    if let Some(address) = wyoming_address {
        serving.push(format!("wyoming={address}"));
    }
    let esphome_address = esphome.as_ref().and_then(|l| l.local_addr().ok());
    if let Some(address) = esphome_address {
        serving.push(format!("esphome={address}"));
    }
    let serving = serving.join(" ");
    // One room for the services that reach it from outside MCP.
    let room = hark_room::room::Room::new(Arc::clone(&state));
    // What the satellite advertises on the LAN: its node name, port and MAC.
    let mut esphome_advert = None;
    if let (Some(listener), Some(starts)) = (esphome, starts) {
        let device = satellite(&config, room.as_ref()).await;
        esphome_advert = esphome_address.filter(|a| !a.ip().is_loopback()).map(|a| {
            hark_mcp::discovery::EsphomeAdvert {
                port: a.port(),
                name: device.name.clone(),
                mac: device.mac_address.clone(),
                friendly_name: device.friendly_name.clone(),
            }
        });
        let services = hark_esphome::server::Room {
            speak: room.clone(),
            fetch: hark_esphome::media::over_http(),
            play: room.clone(),
            schedule: room.clone(),
            record: room.clone(),
            starts,
        };
        tokio::spawn(hark_esphome::server::run(
            listener,
            Arc::new(device),
            services,
            config.esphome.clone(),
            token.clone(),
        ));
    }
    if let Some(listener) = wyoming {
        let services: Arc<dyn hark_core::room::PcmSpeech> = room.clone();
        tokio::spawn(hark_wyoming::server::run(
            listener,
            services,
            config.wyoming.clone(),
            token.clone(),
        ));
    }
    let (shared, loops) = serve(&config, &state, tls, &health, listeners, started, &token).await?;
    // On the LAN by name: advertised once the listeners serve.
    let advertising = advertise(
        &shared,
        config.discovery.clone(),
        &config.service.hostname,
        wyoming_address,
        esphome_advert,
    )
    .await;

    tracing::info!(version = env!("CARGO_PKG_VERSION"), %serving, "hark is ready");
    let status = format!("serving {serving}");
    notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
    let watchdog = sd_notify::watchdog_enabled().map(|period| {
        let health = Arc::clone(&health);
        let token = token.clone();
        tokio::spawn(feed_watchdog(period / 2, health, token, status.clone()))
    });

    shutdown.await;
    tracing::info!("shutting down");
    notify(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
    token.cancel();
    // Withdrawn first: browsers stop offering an appliance that is going.
    if let Some(advertising) = advertising {
        let _ = tokio::task::spawn_blocking(move || drop(advertising)).await;
    }
    stop_serving(&shared, loops, config.shutdown_timeout()).await;
    if let Some(watchdog) = watchdog {
        watchdog.abort();
    }
    // The LEDs go dark and the pins are released.
    if let Some(board) = board {
        board.shutdown().await;
    }
    // The wake word's thread (it reads the capture ring), the speech
    // thread (it feeds the player), then the audio threads (each wakes
    // within one period).
    let tts = Arc::clone(&state.voice.tts);
    let _ = tokio::task::spawn_blocking(move || {
        drop(wake);
        tts.shutdown();
        drop(audio);
    })
    .await;
    // Last, the history: the speech and listening cut off above have said
    // how they ended.
    if let Some(history) = history {
        history.finish(Duration::from_secs(2)).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// HTTPS's certificate authority and this start's certificate, made off
/// the runtime; a failure leaves HTTPS off (said in the log) and the rest
/// serves.
async fn open_tls(config: &Config, listeners: &mut Listeners) -> Option<hark_mcp::tls::Tls> {
    if !config.mcp.https.enabled {
        return None;
    }
    let (dir, names, addresses) = (
        config.service.state_dir.join("tls"),
        hark_mcp::transport::guard::appliance_names(&config.service.hostname),
        tls_addresses(),
    );
    match tokio::task::spawn_blocking(move || hark_mcp::tls::open(&dir, &names, &addresses)).await {
        Ok(Ok(made)) => {
            tracing::info!(fingerprint = %made.fingerprint, ca = %made.ca_path.display(), "HTTPS ready");
            Some(made)
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "HTTPS is off: its certificate cannot be made");
            listeners.without_https();
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "HTTPS is off");
            listeners.without_https();
            None
        }
    }
}

/// The MCP side, serving the room: tokens opened (a database: off the
/// runtime), its state made, every listener serving with a health check
/// that its accept loop is alive.
async fn serve(
    config: &Config,
    state: &Arc<hark_room::state::ApplianceState>,
    tls: Option<hark_mcp::tls::Tls>,
    health: &Health,
    listeners: Listeners,
    started: std::time::Instant,
    token: &CancellationToken,
) -> Result<(Arc<Shared>, Vec<tokio::task::JoinHandle<()>>), ServiceError> {
    let auth = {
        let (auth_config, dir) = (config.auth.clone(), config.service.state_dir.clone());
        tokio::task::spawn_blocking(move || hark_mcp::auth::Auth::open(&auth_config, &dir))
            .await
            .map_err(ServiceError::Auth)?
    };
    let room = hark_core::room::Capabilities::of(hark_room::room::Room::new(Arc::clone(state)));
    let served = Arc::new(hark_mcp::ServerState {
        agents_seen: Arc::clone(&state.keeping.agents_seen),
        inbox: state.keeping.inbox.clone(),
        history: state.keeping.history.clone(),
        tls,
        shutdown: token.clone(),
        ..hark_mcp::ServerState::new(state.bus.clone(), Arc::new(auth), started)
    });
    tokio::spawn(hark_mcp::resources::notify_subscribers(
        Arc::clone(&served),
        token.clone(),
    ));
    tokio::spawn(hark_mcp::channels::push(Arc::clone(&served), token.clone()));
    let shared = Arc::new(Shared::new(
        config.mcp.clone(),
        &config.service.hostname,
        config.shutdown_timeout(),
        served,
        room,
        token.clone(),
    ));
    let mut loops = Vec::new();
    for (transport, handle) in listeners.serve(&shared) {
        let alive = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&alive);
        health.add(
            format!("{transport} listener"),
            Box::new(move || match flag.load(Ordering::Relaxed) {
                true => Ok(()),
                false => Err("stopped accepting connections".into()),
            }),
        );
        loops.push(tokio::spawn(async move {
            let _ = handle.await;
            alive.store(false, Ordering::Relaxed);
        }));
    }
    Ok((shared, loops))
}

/// Stops the MCP side: connections let calls in flight finish within
/// `grace`, then cancel them (the margin covers closing their sockets).
async fn stop_serving(shared: &Shared, loops: Vec<tokio::task::JoinHandle<()>>, grace: Duration) {
    shared.tasks.close();
    if tokio::time::timeout(grace + Duration::from_millis(300), shared.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            remaining = shared.tasks.len(),
            "connections still closing at the end of the shutdown budget"
        );
    }
    for handle in loops {
        let _ = handle.await;
    }
}

async fn feed_watchdog(
    every: Duration,
    health: Arc<Health>,
    token: CancellationToken,
    status: String,
) {
    let mut interval = tokio::time::interval(every);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = interval.tick() => {}
        }
        match health.check() {
            Ok(()) => {
                if failing {
                    tracing::info!("health restored");
                    notify(&[NotifyState::Status(&status)]);
                    failing = false;
                }
                notify(&[NotifyState::Watchdog]);
            }
            Err(why) => {
                // Withholding WATCHDOG=1 lets systemd restart the daemon.
                tracing::error!(%why, "health check failed; not feeding the watchdog");
                notify(&[NotifyState::Status(&format!("unhealthy: {why}"))]);
                failing = true;
            }
        }
    }
}

/// Starts watching SIGTERM (what `systemctl stop` sends) and SIGINT (Ctrl-C)
/// now, and returns a future that resolves when either arrives. Watching
/// from the start matters: a signal during start-up must still lead to a
/// clean stop, not to the default action or to nothing.
pub fn termination() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM"),
            _ = int.recv() => tracing::info!("received SIGINT"),
        }
    })
}

/// The addresses the HTTPS certificate is for: this start's.
fn tls_addresses() -> Vec<std::net::IpAddr> {
    let mut addresses = hark_mcp::transport::guard::interface_addresses();
    for a in [
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ] {
        if !addresses.contains(&a) {
            addresses.push(a);
        }
    }
    addresses
}

/// Advertises the appliance by mDNS (docs/mcp.md, Discovery); a failure is
/// logged, never fatal: agents can still be given the address.
async fn advertise(
    shared: &Shared,
    config: hark_mcp::config::DiscoveryConfig,
    hostname: &str,
    wyoming: Option<std::net::SocketAddr>,
    esphome: Option<hark_mcp::discovery::EsphomeAdvert>,
) -> Option<hark_mcp::discovery::Advertising> {
    if !config.enabled {
        return None;
    }
    let mut advert = hark_mcp::discovery::Advert {
        instance: String::new(),
        host: hark_mcp::transport::guard::short_hostname(hostname),
        tcp_port: None,
        http_port: None,
        // On the LAN only: a loopback listener is not advertised.
        wyoming_port: wyoming.filter(|a| !a.ip().is_loopback()).map(|a| a.port()),
        esphome,
        auth: shared.auth().mode.as_str(),
        version: env!("CARGO_PKG_VERSION"),
    };
    for listener in shared.state.listeners() {
        let port = hark_mcp::discovery::lan_port(&listener);
        match listener.transport {
            hark_mcp::TransportKind::Tcp => advert.tcp_port = port,
            hark_mcp::TransportKind::Http => advert.http_port = port,
            _ => {}
        }
    }
    advert.instance = shown_name(&config, &advert.host);
    let result =
        tokio::task::spawn_blocking(move || hark_mcp::discovery::advertise(&config, &advert)).await;
    match result {
        Ok(Ok(Some(advertising))) => {
            tracing::info!(how = %advertising.describe(), "advertised on the LAN");
            Some(advertising)
        }
        Ok(Ok(None)) => {
            tracing::info!("not advertised: no transport listens beyond loopback");
            None
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot advertise the appliance on the LAN");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "advertising failed");
            None
        }
    }
}

/// What Hark tells Home Assistant it is, as a satellite: its name, an
/// identifier that stays the same across restarts (from the machine id),
/// and the wake words it has.
async fn satellite(config: &Config, room: &hark_room::room::Room) -> hark_esphome::server::Device {
    use hark_core::room::PcmSpeech;

    // The host name the MCP side advertises; ESPHome node names are lower
    // case letters, digits and hyphens.
    let host = hark_mcp::transport::guard::short_hostname(&config.service.hostname);
    let name: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let machine = tokio::task::spawn_blocking(|| std::fs::read_to_string("/etc/machine-id"))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_else(|| name.clone());
    let offer = room.offer().await;
    let wake_words: Vec<_> = offer
        .map(|o| o.words)
        .unwrap_or_default()
        .into_iter()
        .map(|w| hark_esphome::server::WakeWord {
            id: w.name,
            phrase: w.phrase,
            trained_languages: w.languages,
        })
        .collect();
    let active = config
        .wake
        .words
        .iter()
        .find(|w| wake_words.iter().any(|o| &o.id == *w))
        .cloned()
        .or_else(|| wake_words.first().map(|w| w.id.clone()));
    hark_esphome::server::Device {
        friendly_name: shown_name(&config.discovery, &host),
        mac_address: mac_from(machine.trim()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        wake_words,
        active_wake_word: active,
        name,
    }
}

/// The name people see for the appliance on the LAN (mDNS, Home
/// Assistant): `discovery.name`, else "Hark on HOST".
fn shown_name(discovery: &hark_mcp::config::DiscoveryConfig, host: &str) -> String {
    match discovery.name.trim() {
        "" => format!("Hark on {host}"),
        name => name.to_owned(),
    }
}

/// A locally administered MAC address (`02:…`) from `seed`: ESPHome keys a
/// device on its MAC, so it must not change between starts.
fn mac_from(seed: &str) -> String {
    use sha2::Digest;

    let b = sha2::Sha256::digest(seed.as_bytes());
    format!(
        "02:{:02X}:{:02X}:{:02X}:{:02X}:{:02X}",
        b[0], b[1], b[2], b[3], b[4]
    )
}
