//! The two measurements: round trips under load (N clients, each on its own
//! connection or session, issuing calls one after another) and the server's
//! CPU while clients are connected but idle.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use tokio::sync::Barrier;

use crate::{
    client::{Client, Endpoints, Transport},
    procfs::{self, CpuSample, Memory},
};

/// One load run.
#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    pub transport: Transport,
    pub clients: usize,
    /// Measured calls per client.
    pub calls_per_client: usize,
    /// Unmeasured calls per client before the measurement starts.
    pub warmup: usize,
    /// A call taking longer than this fails (and ends its client).
    pub timeout: Duration,
    /// Pause between a client's measured calls (zero: back to back).
    pub think: Duration,
}

/// What a load run measured.
#[derive(Debug)]
pub struct LoadResult {
    pub spec: LoadSpec,
    /// Successful measured calls.
    pub calls: usize,
    /// Clients that stopped on a failed call.
    pub errors: usize,
    pub first_error: Option<anyhow::Error>,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// From the moment every client finished warming up to the last call.
    pub wall: Duration,
    /// Server CPU time (user + system) over `wall`.
    pub server_cpu: Duration,
    /// The bench's own CPU time over `wall`: it shares the cores.
    pub client_cpu: Duration,
}

impl LoadResult {
    pub fn throughput(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64().max(f64::EPSILON)
    }
}

/// The nearest-rank percentile `p` (0..=1) of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn timed_call(client: &mut Client, id: u64, timeout: Duration) -> anyhow::Result<()> {
    match tokio::time::timeout(timeout, client.call(id)).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!("no answer to call {id} within {timeout:?}"),
    }
}

/// Runs `spec` against the server `pid` listening at `endpoints`.
pub async fn run_load(
    pid: u32,
    endpoints: &Endpoints,
    spec: LoadSpec,
    ticks_per_second: u64,
) -> anyhow::Result<LoadResult> {
    let connects = (0..spec.clients).map(|_| Client::connect(endpoints, spec.transport));
    let clients = futures::future::try_join_all(connects)
        .await
        .with_context(|| format!("cannot connect {} {} clients", spec.clients, spec.transport))?;

    // Everyone warms up, then the clock starts for all at once.
    let start = Arc::new(Barrier::new(spec.clients + 1));
    let mut tasks = Vec::with_capacity(spec.clients);
    for mut client in clients {
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            let mut id = 1;
            let mut error = None;
            for _ in 0..spec.warmup {
                if let Err(e) = timed_call(&mut client, id, spec.timeout).await {
                    error = Some(e.context("during warm-up"));
                    break;
                }
                id += 1;
            }
            start.wait().await;
            let mut latencies = Vec::with_capacity(spec.calls_per_client);
            if error.is_none() {
                for _ in 0..spec.calls_per_client {
                    let sent = Instant::now();
                    if let Err(e) = timed_call(&mut client, id, spec.timeout).await {
                        error = Some(e);
                        break;
                    }
                    latencies.push(sent.elapsed());
                    id += 1;
                    if !spec.think.is_zero() {
                        tokio::time::sleep(spec.think).await;
                    }
                }
            }
            (client, latencies, error)
        }));
    }
    start.wait().await;
    let began = Instant::now();
    let cpu_before = CpuSample::take(pid)?;
    let own_before = CpuSample::take(std::process::id())?;
    let mut finished = Vec::with_capacity(tasks.len());
    for task in tasks {
        finished.push(task.await.context("a client task panicked")?);
    }
    let wall = began.elapsed();
    let cpu_after = CpuSample::take(pid)?;
    let own_after = CpuSample::take(std::process::id())?;
    let (server_cpu, _) = cpu_before.until(&cpu_after, ticks_per_second);
    let (client_cpu, _) = own_before.until(&own_after, ticks_per_second);

    let mut latencies = Vec::with_capacity(spec.clients * spec.calls_per_client);
    let mut errors = 0;
    let mut first_error = None;
    let mut clients = Vec::with_capacity(finished.len());
    for (client, samples, error) in finished {
        latencies.extend(samples);
        if let Some(error) = error {
            errors += 1;
            first_error.get_or_insert(error);
        }
        clients.push(client);
    }
    futures::future::join_all(clients.into_iter().map(Client::close)).await;
    latencies.sort_unstable();
    Ok(LoadResult {
        spec,
        calls: latencies.len(),
        errors,
        first_error,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        max: latencies.last().copied().unwrap_or_default(),
        wall,
        server_cpu,
        client_cpu,
    })
}

/// Idle clients to hold open during the idle measurement.
#[derive(Debug, Clone, Copy)]
pub struct IdleSpec {
    pub tcp: usize,
    /// HTTP sessions, each with its `GET` event stream open as SDK clients do.
    pub http: usize,
    pub window: Duration,
}

impl IdleSpec {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.tcp > 0 {
            parts.push(format!("{} TCP", self.tcp));
        }
        if self.http > 0 {
            parts.push(format!("{} HTTP session(s) + GET stream", self.http));
        }
        match parts.is_empty() {
            true => "none".into(),
            false => parts.join(", "),
        }
    }
}

#[derive(Debug, Clone)]
pub struct IdleResult {
    pub spec: IdleSpec,
    pub cpu: Duration,
    pub wall: Duration,
    /// Memory at the end of the idle window.
    pub memory: Memory,
}

impl IdleResult {
    /// CPU use as a percentage of one core.
    pub fn percent_of_core(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(f64::EPSILON)
    }
}

/// Connects the idle clients, lets the server settle, then measures its CPU
/// over the window while nobody sends anything.
pub async fn run_idle(
    pid: u32,
    endpoints: &Endpoints,
    spec: IdleSpec,
    ticks_per_second: u64,
) -> anyhow::Result<IdleResult> {
    let mut clients = Vec::new();
    for _ in 0..spec.tcp {
        let mut client = Client::connect(endpoints, Transport::Tcp).await?;
        client
            .call(1)
            .await
            .context("first call of an idle client")?;
        clients.push(client);
    }
    for _ in 0..spec.http {
        let mut client = Client::connect(endpoints, Transport::Http).await?;
        client
            .call(1)
            .await
            .context("first call of an idle client")?;
        if let Client::Http(http) = &mut client {
            http.open_event_stream().await?;
        }
        clients.push(client);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = CpuSample::take(pid)?;
    tokio::time::sleep(spec.window).await;
    let after = CpuSample::take(pid)?;
    let memory = procfs::memory(pid)?;
    let (cpu, wall) = before.until(&after, ticks_per_second);
    futures::future::join_all(clients.into_iter().map(Client::close)).await;
    Ok(IdleResult {
        spec,
        cpu,
        wall,
        memory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.50), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&samples, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&samples[..1], 0.99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
