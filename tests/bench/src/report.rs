//! The markdown report printed to stdout.

use std::{fmt::Write, time::Duration};

use crate::{
    client::Transport,
    load::{IdleResult, LoadResult, LoadSpec},
    procfs::Memory,
    server::Stopped,
};

/// Round-trip p99 target with many clients on loopback.
pub const P99_TARGET: Duration = Duration::from_millis(2);
/// Idle CPU target, in % of one core.
pub const IDLE_CPU_TARGET: f64 = 0.5;

/// Everything measured on one server.
pub struct ServerRun {
    pub name: String,
    pub memory_start: Memory,
    pub idle: anyhow::Result<IdleResult>,
    pub loads: Vec<Result<LoadResult, (LoadSpec, anyhow::Error)>>,
    pub memory_after_load: Option<Memory>,
    pub stopped: anyhow::Result<Stopped>,
}

impl ServerRun {
    fn load(&self, transport: Transport, clients: usize) -> Option<&LoadResult> {
        self.loads.iter().find_map(|load| match load {
            Ok(r) if r.spec.transport == transport && r.spec.clients == clients => Some(r),
            _ => None,
        })
    }
}

pub struct Report {
    pub machine: String,
    pub hark: ServerRun,
    /// The peer's run, or why there is none.
    pub peer: anyhow::Result<ServerRun>,
    pub peer_versions: Option<String>,
    pub many_clients: usize,
    /// The resolution of the CPU figures (`/proc/PID/stat` counts ticks).
    pub ticks_per_second: u64,
    pub think: Duration,
}

/// An error with its causes, on one line that fits in a table cell.
fn cell(error: &anyhow::Error) -> String {
    format!("{error:#}").replace('|', "/").replace('\n', " ")
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn ratio(a: f64, b: f64) -> String {
    if !(b > 0.0 && a.is_finite()) {
        return "n/a".into();
    }
    let r = a / b;
    match r {
        r if r >= 10.0 => format!("{r:.0}×"),
        r if r >= 1.0 => format!("{r:.1}×"),
        r => format!("{r:.3}×"),
    }
}

/// CPU per call in µs; zero ticks is shown as the bound it really is.
fn micros(total: Duration, calls: usize, tick: Duration) -> String {
    match (calls, total.is_zero()) {
        (0, _) => "n/a".into(),
        (_, true) => format!("< {:.0}", tick.as_secs_f64() * 1e6 / calls as f64),
        (_, false) => format!("{:.0}", total.as_secs_f64() * 1e6 / calls as f64),
    }
}

fn yes_no(met: bool) -> &'static str {
    match met {
        true => "**yes**",
        false => "**NO**",
    }
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = self.write(&mut out);
        out
    }

    fn runs(&self) -> Vec<&ServerRun> {
        let mut runs = vec![&self.hark];
        if let Ok(peer) = &self.peer {
            runs.push(peer);
        }
        runs
    }

    fn write(&self, out: &mut String) -> std::fmt::Result {
        let tick = Duration::from_secs_f64(1.0 / self.ticks_per_second.max(1) as f64);
        writeln!(out, "# hark-bench\n")?;
        writeln!(out, "{}\n", self.machine)?;
        if let Some(versions) = &self.peer_versions {
            writeln!(
                out,
                "Peer: official Python MCP SDK ({versions}), `MCPServer` over Streamable HTTP (uvicorn).\n"
            )?;
        }

        writeln!(out, "## Round trip of `tools/call get_status`\n")?;
        match self.think.is_zero() {
            true => writeln!(
                out,
                "Each client sends its next call as soon as the last is answered.\n"
            )?,
            false => writeln!(
                out,
                "Each client pauses {} ms between calls (`--think-ms`).\n",
                self.think.as_millis()
            )?,
        }
        writeln!(
            out,
            "| server | transport | clients | calls | failed clients | p50 ms | p99 ms | max ms | calls/s | server CPU µs/call | bench CPU µs/call |"
        )?;
        writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
        for run in self.runs() {
            for load in &run.loads {
                match load {
                    Ok(r) => writeln!(
                        out,
                        "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} |",
                        run.name,
                        r.spec.transport,
                        r.spec.clients,
                        r.calls,
                        r.errors,
                        ms(r.p50),
                        ms(r.p99),
                        ms(r.max),
                        r.throughput(),
                        micros(r.server_cpu, r.calls, tick),
                        micros(r.client_cpu, r.calls, tick),
                    )?,
                    Err((spec, why)) => writeln!(
                        out,
                        "| {} | {} | {} | FAILED: {} | | | | | | | |",
                        run.name,
                        spec.transport,
                        spec.clients,
                        cell(why),
                    )?,
                }
            }
        }
        let failures: Vec<String> = self
            .runs()
            .iter()
            .flat_map(|run| {
                run.loads.iter().filter_map(move |load| match load {
                    Ok(r) => r.first_error.as_ref().map(|e| {
                        format!(
                            "{} {} ×{}: {}",
                            run.name,
                            r.spec.transport,
                            r.spec.clients,
                            cell(e)
                        )
                    }),
                    Err(_) => None,
                })
            })
            .collect();
        if !failures.is_empty() {
            writeln!(out, "\nFirst failure per run:\n")?;
            for failure in failures {
                writeln!(out, "- {}", failure.replace('\n', " "))?;
            }
        }

        writeln!(out, "\n## Idle CPU and memory\n")?;
        writeln!(
            out,
            "CPU is utime + stime from `/proc/PID/stat`, in ticks of {} ms.\n",
            1000 / self.ticks_per_second.max(1)
        )?;
        writeln!(
            out,
            "| server | idle clients | window s | CPU % of one core | RSS at start MiB | RSS idle MiB | RSS after load MiB | peak RSS MiB |"
        )?;
        writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|")?;
        for run in self.runs() {
            let after = run
                .memory_after_load
                .map(|m| (mib(m.rss_kib), mib(m.peak_kib)))
                .unwrap_or_else(|| ("n/a".into(), "n/a".into()));
            match &run.idle {
                Ok(idle) => writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.3} | {} | {} | {} | {} |",
                    run.name,
                    idle.spec.describe(),
                    idle.wall.as_secs_f64(),
                    idle.percent_of_core(),
                    mib(run.memory_start.rss_kib),
                    mib(idle.memory.rss_kib),
                    after.0,
                    after.1,
                )?,
                Err(why) => writeln!(
                    out,
                    "| {} | FAILED: {} | | | {} | | {} | {} |",
                    run.name,
                    cell(why),
                    mib(run.memory_start.rss_kib),
                    after.0,
                    after.1,
                )?,
            }
        }

        writeln!(
            out,
            "\n## Peer comparison (Streamable HTTP, same machine, same run)\n"
        )?;
        match &self.peer {
            Err(why) => writeln!(out, "Peer skipped: {why:#}")?,
            Ok(peer) => {
                writeln!(
                    out,
                    "Ratios are peer ÷ hark: above 1× for latency, or below 1× for throughput, means hark is faster.\n"
                )?;
                writeln!(
                    out,
                    "| clients | p50 peer/hark | p99 peer/hark | throughput peer/hark | throughput hark/peer |"
                )?;
                writeln!(out, "|--:|--:|--:|--:|--:|")?;
                for clients in [1, self.many_clients] {
                    if let (Some(h), Some(p)) = (
                        self.hark.load(Transport::Http, clients),
                        peer.load(Transport::Http, clients),
                    ) {
                        writeln!(
                            out,
                            "| {clients} | {} | {} | {} | {} |",
                            ratio(p.p50.as_secs_f64(), h.p50.as_secs_f64()),
                            ratio(p.p99.as_secs_f64(), h.p99.as_secs_f64()),
                            ratio(p.throughput(), h.throughput()),
                            ratio(h.throughput(), p.throughput()),
                        )?;
                    }
                }
                if let (Ok(h), Ok(p)) = (&self.hark.idle, &peer.idle) {
                    let hark_idle = match h.cpu.is_zero() {
                        // Zero ticks: below the resolution of the window.
                        true => format!(
                            "hark 0 ticks (< {:.3} %)",
                            100.0 / (self.ticks_per_second as f64 * h.wall.as_secs_f64())
                        ),
                        false => format!("hark {:.3} %", h.percent_of_core()),
                    };
                    writeln!(
                        out,
                        "\nIdle CPU (% of one core): peer {:.3} %, {hark_idle}; peer/hark {}.",
                        p.percent_of_core(),
                        ratio(p.percent_of_core(), h.percent_of_core()),
                    )?;
                }
            }
        }

        writeln!(out, "\n## Targets (hark)\n")?;
        writeln!(out, "| target | measured | met |")?;
        writeln!(out, "|---|--:|---|")?;
        for load in self.hark.loads.iter().flatten() {
            if load.spec.clients != self.many_clients {
                continue;
            }
            let met = load.errors == 0 && load.p99 < P99_TARGET;
            writeln!(
                out,
                "| p99 < {} ms, {} clients, {} | {} ms | {} |",
                ms(P99_TARGET),
                load.spec.clients,
                load.spec.transport,
                ms(load.p99),
                yes_no(met),
            )?;
        }
        if let Ok(idle) = &self.hark.idle {
            writeln!(
                out,
                "| idle CPU < {IDLE_CPU_TARGET} % of one core | {:.3} % | {} |",
                idle.percent_of_core(),
                yes_no(idle.percent_of_core() < IDLE_CPU_TARGET),
            )?;
        }

        writeln!(out, "\n## Server logs and shutdown\n")?;
        for run in self.runs() {
            match &run.stopped {
                Ok(stopped) => {
                    writeln!(
                        out,
                        "- {}: stopped on SIGTERM in {} ms, {}{}; {} warning/error line(s) in its log",
                        run.name,
                        stopped.took.as_millis(),
                        stopped
                            .status
                            .map(|s| s.to_string())
                            .unwrap_or_else(|| "exit status unknown".into()),
                        match stopped.killed {
                            true => " (killed: it ignored SIGTERM)",
                            false => "",
                        },
                        stopped.problems.len(),
                    )?;
                    for line in stopped.problems.iter().take(10) {
                        writeln!(out, "  - `{}`", line.replace('`', "'"))?;
                    }
                }
                Err(why) => writeln!(out, "- {}: could not stop it: {why:#}", run.name)?,
            }
        }
        Ok(())
    }
}
