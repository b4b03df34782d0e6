//! The real daemon for the benchmarks that drive it end to end (`tts` for
//! its memory, `person` for the button and the voice inbox): its
//! configuration on the virtual sound card, as tests/e2e/harness.py has it,
//! starting it and waiting for `READY=1`, a newline-delimited JSON-RPC
//! client over TCP or the Unix socket, and stopping it with SIGTERM.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    os::unix::net::{UnixDatagram, UnixStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::procfs;

/// How long the daemon may take to start, to load its model, to answer.
pub const START: Duration = Duration::from_secs(30);
pub const MODEL: Duration = Duration::from_secs(120);
pub const CALL: Duration = Duration::from_secs(120);

/// The daemon's config: every transport on loopback, no discovery (no
/// multicast onto the machine's network), the speech-to-text model from the
/// test store, the virtual sound card, then `extra`: lines under a
/// `[section]` the config already has join that section (TOML allows a
/// table once).
pub fn config(dir: &Path, models_dir: &Path, extra: &[String]) -> String {
    let run = dir.join("run");
    let config = format!(
        "[service]\nlog_level = \"info\"\nstate_dir = {}\n\
         [mcp.tcp]\nlisten = \"127.0.0.1:0\"\n\
         [mcp.http]\nlisten = \"127.0.0.1:0\"\n\
         [mcp.unix]\npath = {}\n\
         [discovery]\nenabled = false\n\
         [stt]\nmodels_dir = {}\naudio_dirs = [{}]\n\
         [audio.capture]\ndevice = \"hark_virtual_mic\"\n\
         [audio.playback]\ndevice = \"hark_virtual_speaker\"\nrate = 22050\nchannels = 1\n\
         [audio.virtual_card]\nenabled = true\nmic_fifo = {}\ninject_fifo = {}\nspeaker_wav = {}\n",
        toml_str(&dir.join("state")),
        toml_str(&run.join("mcp.sock")),
        toml_str(models_dir),
        toml_str(dir),
        toml_str(&run.join("virtual-mic.fifo")),
        toml_str(&run.join("inject.fifo")),
        toml_str(&dir.join("speaker.wav")),
    );
    let lines: Vec<String> = config
        .lines()
        .map(str::to_owned)
        .chain(extra.iter().cloned())
        .collect();
    let mut merged = String::new();
    for line in merge_sections(&lines) {
        merged.push_str(&line);
        merged.push('\n');
    }
    merged
}

/// `lines` with each `[section]` once, its lines gathered in order, the
/// sections in the order they first appear.
fn merge_sections(lines: &[String]) -> Vec<String> {
    let mut sections: Vec<(String, Vec<String>)> = vec![(String::new(), Vec::new())];
    let mut current = 0;
    for line in lines {
        if line.trim_start().starts_with('[') {
            current = match sections.iter().position(|(s, _)| s == line) {
                Some(i) => i,
                None => {
                    sections.push((line.clone(), Vec::new()));
                    sections.len() - 1
                }
            };
        } else {
            sections[current].1.push(line.clone());
        }
    }
    sections
        .into_iter()
        .flat_map(|(header, body)| {
            (!header.is_empty())
                .then_some(header)
                .into_iter()
                .chain(body)
        })
        .collect()
}

/// Starts `binary` on the virtual card in `dir` with the tiny.en q8_0 from
/// `models_dir`, the log at `log_level`, then `extra`; waits for the model
/// and returns the daemon and a `get_status` client.
pub fn start_listening(
    binary: &Path,
    models_dir: &Path,
    dir: &Path,
    log_level: &str,
    extra: &[String],
) -> anyhow::Result<(Daemon, Rpc)> {
    anyhow::ensure!(
        models_dir.join("ggml-tiny.en-q8_0.bin").is_file(),
        "no tiny.en q8_0 in {} (`tests/run` makes it with appliance/setup-models, or pass --models-dir)",
        models_dir.display()
    );
    std::fs::create_dir_all(dir)?;
    let config = config(dir, models_dir, extra).replace(
        "log_level = \"info\"",
        &format!("log_level = {}", Value::String(log_level.to_owned())),
    );
    let daemon = Daemon::start(binary, dir, &config)?;
    let mut status = Rpc::tcp(daemon.tcp, "hark-bench watcher")?;
    daemon.wait_stt(&mut status)?;
    Ok((daemon, status))
}

/// Starts the daemon as [`start_listening`] does (log at `info`), runs
/// `body` against it, stops it and removes `dir`; a failure carries the end
/// of the daemon's log.
pub fn with_daemon<T>(
    binary: &Path,
    models_dir: &Path,
    dir: &Path,
    extra: &[String],
    body: impl FnOnce(&Daemon, &mut Rpc) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (daemon, mut watcher) = start_listening(binary, models_dir, dir, "info", extra)?;
    let result = body(&daemon, &mut watcher);
    let tail = daemon.tail();
    daemon.stop()?;
    let _ = std::fs::remove_dir_all(dir);
    result.with_context(|| format!("the daemon's log ends:\n{tail}"))
}

/// A path as a TOML basic string (JSON's escapes are TOML's).
pub fn toml_str(path: &Path) -> String {
    Value::String(path.display().to_string()).to_string()
}

/// The addresses the ready line names.
struct Listeners {
    tcp: SocketAddr,
    http: Option<SocketAddr>,
    https: Option<SocketAddr>,
    wyoming: Option<SocketAddr>,
}

/// The daemon process; killed if still running when dropped.
pub struct Daemon {
    child: Child,
    /// The binary it runs (`hark inject` into it is the same one).
    pub binary: PathBuf,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
    pub tcp: SocketAddr,
    /// The HTTP listener, if it serves one.
    pub http: Option<SocketAddr>,
    /// The HTTPS listener, if `[mcp.https]` is on.
    pub https: Option<SocketAddr>,
    /// The Wyoming listener, if `[wyoming]` is on.
    pub wyoming: Option<SocketAddr>,
}

impl Daemon {
    /// Writes `config` to `dir/hark.toml`, starts `binary` on it and waits
    /// for `READY=1`.
    pub fn start(binary: &Path, dir: &Path, config: &str) -> anyhow::Result<Daemon> {
        anyhow::ensure!(
            binary.is_file(),
            "no hark binary at {} (run `cargo build --release -p hark`, or pass --hark)",
            binary.display()
        );
        std::fs::create_dir_all(dir.join("run"))?;
        let config_path = dir.join("hark.toml");
        std::fs::write(&config_path, config)
            .with_context(|| format!("cannot write {}", config_path.display()))?;
        let notify = dir.join("notify.sock");
        let _ = std::fs::remove_file(&notify);
        let listener = UnixDatagram::bind(&notify)
            .with_context(|| format!("cannot bind {}", notify.display()))?;
        listener.set_read_timeout(Some(Duration::from_millis(200)))?;
        let log = dir.join("hark.log");
        let child = Command::new(binary)
            .arg("--config")
            .arg(&config_path)
            .arg("run")
            .env("NOTIFY_SOCKET", &notify)
            .env_remove("RUST_LOG")
            .env_remove("JOURNAL_STREAM")
            .env_remove("ALSA_CONFIG_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let mut daemon = Daemon {
            child,
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            config: config_path,
            log,
            tcp: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: None,
            https: None,
            wyoming: None,
        };
        let ready = daemon.wait_ready(&listener)?;
        daemon.tcp = ready.tcp;
        daemon.http = ready.http;
        daemon.https = ready.https;
        daemon.wyoming = ready.wyoming;
        Ok(daemon)
    }

    /// Waits for `READY=1` with `STATUS=serving … tcp=ADDR http=ADDR …`.
    fn wait_ready(&mut self, listener: &UnixDatagram) -> anyhow::Result<Listeners> {
        let started = Instant::now();
        let mut buf = vec![0u8; 4096];
        while started.elapsed() < START {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "hark exited before it was ready ({status}):\n{}",
                    self.tail()
                );
            }
            let n = match listener.recv(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let message = String::from_utf8_lossy(&buf[..n]);
            if !message.lines().any(|l| l == "READY=1") {
                continue;
            }
            let find = |kind: &str| {
                message
                    .lines()
                    .filter_map(|l| l.strip_prefix("STATUS=serving"))
                    .flat_map(str::split_whitespace)
                    .find_map(|item| item.strip_prefix(kind))
                    .and_then(|addr| addr.parse().ok())
            };
            let tcp = find("tcp=").with_context(|| format!("no tcp= in {message:?}"))?;
            return Ok(Listeners {
                tcp,
                http: find("http="),
                https: find("https="),
                wyoming: find("wyoming="),
            });
        }
        bail!("hark sent no READY=1 within {START:?}:\n{}", self.tail())
    }

    /// Plays `wav` into the virtual microphone (`hark inject`), returning
    /// once it is handed over (it plays in real time).
    pub fn inject(&self, wav: &Path) -> anyhow::Result<()> {
        self.cli("inject", [wav.as_os_str()])
    }

    /// Runs `hark COMMAND ARGS…` against this daemon's configuration; an
    /// error with its standard error if it fails.
    pub fn cli<S: AsRef<std::ffi::OsStr>>(
        &self,
        command: &str,
        args: impl IntoIterator<Item = S>,
    ) -> anyhow::Result<()> {
        let done = Command::new(&self.binary)
            .arg("--config")
            .arg(&self.config)
            .arg(command)
            .args(args)
            .output()
            .with_context(|| format!("cannot run hark {command}"))?;
        anyhow::ensure!(
            done.status.success(),
            "hark {command} failed: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn memory(&self) -> anyhow::Result<procfs::Memory> {
        procfs::memory(self.pid())
    }

    /// The Unix socket (as [`config`] places it).
    pub fn unix(&self) -> PathBuf {
        self.dir.join("run").join("mcp.sock")
    }

    /// The times of the lines in the daemon's log since `after` that
    /// contain `needle` (its timestamps are the wall clock's, in µs).
    pub fn logged(&self, needle: &str, after: std::time::SystemTime) -> Vec<std::time::SystemTime> {
        self.logged_where(|l| l.contains(needle), after)
    }

    /// The times of the log lines `keep` picks, from `after` on.
    pub fn logged_where(
        &self,
        keep: impl Fn(&str) -> bool,
        after: std::time::SystemTime,
    ) -> Vec<std::time::SystemTime> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter(|l| keep(l))
            .filter_map(|l| l.split_whitespace().next())
            .filter_map(|t| humantime::parse_rfc3339(t).ok())
            .filter(|t| *t >= after)
            .collect()
    }

    /// Waits until speech to text has its model loaded.
    pub fn wait_stt(&self, rpc: &mut Rpc) -> anyhow::Result<String> {
        let started = Instant::now();
        loop {
            let status = rpc.call("get_status", json!({}))?;
            let stt = status["structuredContent"]["subsystems"]["stt"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if stt.starts_with("ready") {
                return Ok(stt);
            }
            if stt.starts_with("unavailable") || started.elapsed() > MODEL {
                bail!("speech to text is not ready: {stt:?}\n{}", self.tail());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child.kill()?;
        self.child.wait()?;
        bail!("the daemon ignored SIGTERM for 10 s and was killed")
    }

    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A byte stream to the daemon.
pub trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// Newline-delimited JSON-RPC, enough for `tools/call` and `hark/board`.
pub struct Rpc {
    stream: BufReader<Box<dyn Stream>>,
    next: u64,
}

impl Rpc {
    /// Over TCP, initialised as `name`.
    pub fn tcp(addr: SocketAddr, name: &str) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).with_context(|| format!("cannot connect {addr}"))?;
        stream.set_read_timeout(Some(CALL))?;
        stream.set_nodelay(true)?;
        Self::over(Box::new(stream), name)
    }

    /// Over the Unix socket (where `hark/board` is served), as `name`.
    pub fn unix(path: &Path, name: &str) -> anyhow::Result<Self> {
        let stream = UnixStream::connect(path)
            .with_context(|| format!("cannot connect {}", path.display()))?;
        stream.set_read_timeout(Some(CALL))?;
        Self::over(Box::new(stream), name)
    }

    fn over(stream: Box<dyn Stream>, name: &str) -> anyhow::Result<Self> {
        let mut rpc = Self {
            stream: BufReader::new(stream),
            next: 1,
        };
        rpc.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1"},
            }),
        )?;
        rpc.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(rpc)
    }

    pub fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stream.get_mut().write_all(line.as_bytes())?;
        Ok(())
    }

    /// Sends a request without waiting; [`Rpc::answer`] reads its result.
    pub fn start(&mut self, method: &str, params: Value) -> anyhow::Result<u64> {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Reads until the result of request `id`, skipping notifications.
    pub fn answer(&mut self, id: u64) -> anyhow::Result<Value> {
        loop {
            let mut line = String::new();
            let n = self
                .stream
                .read_line(&mut line)
                .with_context(|| format!("no answer to request {id}"))?;
            anyhow::ensure!(
                n > 0,
                "the daemon closed the connection during request {id}"
            );
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("invalid JSON from the daemon: {line}"))?;
            if message["id"].as_u64() != Some(id) || message.get("method").is_some() {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("request {id} failed: {error}");
            }
            return Ok(message["result"].clone());
        }
    }

    /// Sends a request and returns its result, skipping notifications.
    pub fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.start(method, params)?;
        self.answer(id)
            .with_context(|| format!("{method} did not answer"))
    }

    pub fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Polls `get_status` until its structured content satisfies `done`;
    /// returns it.
    pub fn wait_status(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            let now = self.call("get_status", json!({}))?["structuredContent"].take();
            if done(&now) {
                return Ok(now);
            }
            if started.elapsed() > timeout {
                bail!("{what} did not happen within {timeout:?}: {now}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_quotes_paths_and_appends_lines() {
        let config = config(
            Path::new("/tmp/a \"b\""),
            Path::new("/m"),
            &["[tts]".into(), "voice = \"x\"".into()],
        );
        assert!(config.contains("models_dir = \"/m\"\n"));
        assert!(config.contains("audio_dirs = [\"/tmp/a \\\"b\\\"\"]\n"));
        assert!(config.contains("state_dir = \"/tmp/a \\\"b\\\"/state\"\n"));
        assert!(config.ends_with("[tts]\nvoice = \"x\"\n"));
        // A section the config has: joined, not repeated.
        let config = super::config(
            Path::new("/d"),
            Path::new("/m"),
            &["[stt]".into(), "x = 1".into()],
        );
        assert_eq!(config.matches("[stt]").count(), 1, "{config}");
        let stt = config.split("[stt]\n").nth(1).unwrap_or_default();
        assert!(
            stt.split("\n[")
                .next()
                .unwrap_or_default()
                .contains("\nx = 1"),
            "{config}"
        );
    }
}
