//! Starting and stopping the servers under test: the Hark daemon (its ports
//! learned from the `STATUS=serving …` it sends to `NOTIFY_SOCKET`) and the
//! Python SDK peer (a port the bench picks, polled until it answers).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use tokio::{net::UnixDatagram, process::Child};

use crate::client::{Client, Endpoints, Transport};

/// How long a server may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server process.
pub struct Server {
    pub child: Child,
    pub pid: u32,
    pub endpoints: Endpoints,
    /// Its stderr, for the report and for diagnosing a failed start.
    pub log: PathBuf,
    /// Hark's `NOTIFY_SOCKET`, kept bound so its `STOPPING=1` finds a reader.
    notify: Option<(UnixDatagram, PathBuf)>,
}

/// How a server ended when asked to.
pub struct Stopped {
    pub status: Option<ExitStatus>,
    pub took: Duration,
    /// It ignored SIGTERM for [`STOP_TIMEOUT`] and was killed.
    pub killed: bool,
    /// Warning and error lines in its log, shutdown included.
    pub problems: Vec<String>,
}

fn log_file(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))
}

/// The last lines of a log, to explain a failed start.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Starts `hark run` with every transport on loopback and a free port.
pub async fn start_hark(binary: &Path, dir: &Path) -> anyhow::Result<Server> {
    let config = dir.join("hark.toml");
    let socket = dir.join("mcp.sock");
    let notify = dir.join("notify.sock");
    let log = dir.join("hark.log");
    // Enough connection slots for the many-clients runs plus the idle clients.
    std::fs::write(
        &config,
        format!(
            "[mcp]\nmax_connections = 256\n\
             [mcp.tcp]\nlisten = \"127.0.0.1:0\"\n\
             [mcp.http]\nlisten = \"127.0.0.1:0\"\n\
             [mcp.unix]\npath = \"{}\"\n",
            socket.display()
        ),
    )
    .with_context(|| format!("cannot write {}", config.display()))?;
    let _ = std::fs::remove_file(&notify);
    let listener =
        UnixDatagram::bind(&notify).with_context(|| format!("cannot bind {}", notify.display()))?;

    let mut child = tokio::process::Command::new(binary)
        .arg("-c")
        .arg(&config)
        .arg("run")
        .env("NOTIFY_SOCKET", &notify)
        // The daemon's own default filter, whatever the caller's shell has.
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(&log)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let pid = child.id().context("hark exited at once")?;

    let ready = async {
        let mut buf = vec![0u8; 4096];
        loop {
            let n = listener.recv(&mut buf).await?;
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            if let Some(endpoints) = parse_notify(&message) {
                return anyhow::Ok(endpoints);
            }
        }
    };
    let endpoints = tokio::select! {
        endpoints = tokio::time::timeout(START_TIMEOUT, ready) => match endpoints {
            Ok(endpoints) => endpoints?,
            Err(_) => bail!("hark sent no READY=1 within {START_TIMEOUT:?}; log:\n{}", tail(&log)),
        },
        status = child.wait() => bail!("hark exited before it was ready ({status:?}); log:\n{}", tail(&log)),
    };
    Ok(Server {
        child,
        pid,
        endpoints,
        log,
        notify: Some((listener, notify)),
    })
}

/// Reads the endpoints out of `READY=1\nSTATUS=serving tcp=… http=… unix=…`.
fn parse_notify(message: &str) -> Option<Endpoints> {
    let mut ready = false;
    let mut serving = None;
    for line in message.lines() {
        if line == "READY=1" {
            ready = true;
        } else if let Some(status) = line.strip_prefix("STATUS=serving") {
            serving = Some(status);
        }
    }
    let serving = serving.filter(|_| ready)?;
    let mut endpoints = Endpoints::default();
    for item in serving.split_whitespace() {
        match item.split_once('=') {
            Some(("tcp", addr)) => endpoints.tcp = addr.parse().ok(),
            Some(("http", addr)) => endpoints.http = addr.parse().ok(),
            Some(("unix", path)) => endpoints.unix = Some(PathBuf::from(path)),
            _ => {}
        }
    }
    Some(endpoints)
}

/// A loopback port that was free a moment ago, for the peer to listen on.
fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("no free port")?;
    Ok(listener.local_addr()?)
}

/// Starts the Python SDK peer and waits until an MCP client can initialise.
pub async fn start_peer(python: &Path, script: &Path, dir: &Path) -> anyhow::Result<Server> {
    let addr = free_port()?;
    let log = dir.join("peer.log");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .arg(addr.port().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(&log)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {} {}", python.display(), script.display()))?;
    let pid = child.id().context("the peer exited at once")?;
    let endpoints = Endpoints {
        http: Some(addr),
        ..Endpoints::default()
    };
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!(
                "the peer exited before it was ready ({status}); log:\n{}",
                tail(&log)
            );
        }
        if let Ok(client) = Client::connect(&endpoints, Transport::Http).await {
            client.close().await;
            break;
        }
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "the peer did not answer on {addr} within {START_TIMEOUT:?}; log:\n{}",
                tail(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Server {
        child,
        pid,
        endpoints,
        log,
        notify: None,
    })
}

/// `python -V` and the installed `mcp` version, for the report.
pub fn peer_versions(python: &Path) -> String {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys, importlib.metadata as m; print(f\"Python {sys.version.split()[0]}, mcp {m.version('mcp')}\")",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "unknown versions".into(),
    }
}

impl Server {
    /// Sends SIGTERM and waits for the exit (SIGKILL after [`STOP_TIMEOUT`]).
    pub async fn stop(mut self) -> anyhow::Result<Stopped> {
        let started = Instant::now();
        // `kill` rather than an unsafe libc call; the process is our child.
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status();
        if !sent.is_ok_and(|s| s.success()) {
            self.child.start_kill()?;
        }
        let (status, killed) = match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => (Some(status?), false),
            Err(_) => {
                self.child.start_kill()?;
                (self.child.wait().await.ok(), true)
            }
        };
        if let Some((socket, path)) = self.notify.take() {
            drop(socket);
            let _ = std::fs::remove_file(path);
        }
        Ok(Stopped {
            status,
            took: started.elapsed(),
            killed,
            problems: self.problems(),
        })
    }

    /// Warning and error lines the server logged.
    fn problems(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter(|line| {
                line.contains(" WARN ")
                    || line.contains("ERROR")
                    || line.contains("WARNING")
                    || line.contains("Traceback")
            })
            .map(str::to_owned)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_endpoints_from_the_status() {
        let endpoints = parse_notify(
            "READY=1\nSTATUS=serving tcp=127.0.0.1:35033 http=127.0.0.1:38079 unix=/tmp/x/mcp.sock",
        )
        .expect("ready");
        assert_eq!(endpoints.tcp, "127.0.0.1:35033".parse().ok());
        assert_eq!(endpoints.http, "127.0.0.1:38079".parse().ok());
        assert_eq!(endpoints.unix, Some(PathBuf::from("/tmp/x/mcp.sock")));
        assert!(parse_notify("WATCHDOG=1").is_none());
    }
}
