//! What the bench reads about a process from `/proc`: CPU time
//! (`/proc/PID/stat` utime + stime, all threads; `/proc/self/task/TID/stat`
//! per thread) and memory (`VmRSS`, `VmHWM` from `/proc/PID/status`).

use std::time::Duration;

use anyhow::{Context, bail};

/// Clock ticks per second (`getconf CLK_TCK`), the unit of utime/stime.
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|&ticks| ticks > 0)
        // Linux has used 100 on every architecture for decades.
        .unwrap_or(100)
}

/// User plus system CPU time the process has used so far, in clock ticks.
pub fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("unexpected format of {path}"))
}

fn parse_cpu_ticks(stat: &str) -> anyhow::Result<u64> {
    // The command name (field 2) may contain spaces and parentheses; the
    // fields after the last `)` start at field 3 (state).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        bail!("no `)` after the command name");
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after `state`.
    let field = |index: usize| -> anyhow::Result<u64> {
        fields
            .get(index)
            .context("too few fields")?
            .parse::<u64>()
            .context("field is not a number")
    };
    Ok(field(11)? + field(12)?)
}

/// The command name of a `stat` line: between the first `(` and the last `)`.
fn parse_comm(stat: &str) -> Option<&str> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    stat.get(open + 1..close)
}

/// `se.sum_exec_runtime` (milliseconds, to the nanosecond) from a
/// `/proc/…/sched` file, which kernels built with `CONFIG_SCHED_DEBUG` have.
fn parse_sum_exec_runtime(sched: &str) -> Option<Duration> {
    let line = sched
        .lines()
        .find(|l| l.trim_start().starts_with("se.sum_exec_runtime"))?;
    let ms: f64 = line.rsplit(':').next()?.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1e3))
}

/// The CPU time of every thread of this process, by name.
#[derive(Debug, Clone, Default)]
pub struct ThreadCpu {
    threads: Vec<(String, Duration)>,
    /// Read from `sched` (nanoseconds) rather than `stat` (clock ticks).
    pub precise: bool,
}

impl ThreadCpu {
    /// Reads `/proc/self/task/*/sched` where the kernel has it, else
    /// utime + stime from `/proc/self/task/*/stat`. A thread that exits
    /// while the directory is read is left out.
    pub fn take(ticks_per_second: u64) -> anyhow::Result<Self> {
        let dir = "/proc/self/task";
        let tick = Duration::from_secs_f64(1.0 / ticks_per_second.max(1) as f64);
        let mut threads = Vec::new();
        let mut precise = true;
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {dir}"))? {
            let path = entry.with_context(|| format!("cannot list {dir}"))?.path();
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
                continue;
            };
            let bad = || format!("unexpected format of {}/stat", path.display());
            let name = parse_comm(&stat).with_context(bad)?;
            let cpu = match std::fs::read_to_string(path.join("sched"))
                .ok()
                .and_then(|sched| parse_sum_exec_runtime(&sched))
            {
                Some(cpu) => cpu,
                None => {
                    precise = false;
                    let ticks = parse_cpu_ticks(&stat).with_context(bad)?;
                    tick * u32::try_from(ticks).unwrap_or(u32::MAX)
                }
            };
            threads.push((name.to_owned(), cpu));
        }
        Ok(Self { threads, precise })
    }

    /// CPU time of the threads called `name`. The kernel keeps the first 15
    /// bytes of a thread's name (`hark-virtual-mic` is `hark-virtual-mi`).
    pub fn named(&self, name: &str) -> Duration {
        let short = name.get(..15).unwrap_or(name);
        self.threads
            .iter()
            .filter(|(comm, _)| comm == short)
            .map(|(_, cpu)| *cpu)
            .sum()
    }
}

/// A CPU-time reading, to subtract from a later one.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    ticks: u64,
    at: std::time::Instant,
}

impl CpuSample {
    pub fn take(pid: u32) -> anyhow::Result<Self> {
        Ok(Self {
            ticks: cpu_ticks(pid)?,
            at: std::time::Instant::now(),
        })
    }

    /// CPU time used between `self` and `later`, and the wall time between them.
    pub fn until(&self, later: &CpuSample, ticks_per_second: u64) -> (Duration, Duration) {
        let ticks = later.ticks.saturating_sub(self.ticks);
        let cpu = Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64);
        (cpu, later.at.duration_since(self.at))
    }
}

/// Resident memory, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most that was ever resident.
    pub peak_kib: u64,
}

pub fn memory(pid: u32) -> anyhow::Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let kib = |key: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .with_context(|| format!("no {key} in {path}"))?;
        line.trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .with_context(|| format!("unexpected {key} line in {path}"))
    };
    Ok(Memory {
        rss_kib: kib("VmRSS:")?,
        peak_kib: kib("VmHWM:")?,
    })
}

/// The 1-minute load average: other work on the machine shows up in the
/// spread between median and min.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The last non-empty line of a child's output (its error, usually).
pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_owned()
}

pub fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The JSON a child process printed, or its failure with its last line.
pub fn child_json(output: &std::process::Output) -> anyhow::Result<serde_json::Value> {
    anyhow::ensure!(
        output.status.success(),
        "the child failed ({}): {}",
        output.status,
        last_line(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .map_err(|e| anyhow::anyhow!("the child's output is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_plus_stime_past_an_awkward_name() {
        let stat =
            "4242 (hark (rt) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 17 5 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat).expect("parses"), 22);
    }

    #[test]
    fn thread_names_are_cut_to_15_bytes() {
        let stat = "77 (hark-virtual-mi) S 1 4242 4242 0 -1 4194560 0 0 0 0 3 4 0 0";
        assert_eq!(parse_comm(stat), Some("hark-virtual-mi"));
        let ms = Duration::from_millis;
        let threads = ThreadCpu {
            threads: vec![
                ("hark-virtual-mi".into(), ms(7)),
                ("hark-capture".into(), ms(2)),
            ],
            precise: true,
        };
        assert_eq!(threads.named("hark-virtual-mic"), ms(7));
        assert_eq!(threads.named("hark-capture"), ms(2));
        assert_eq!(threads.named("bench-vad"), Duration::ZERO);
    }

    #[test]
    fn reads_sum_exec_runtime() {
        let sched = "x (1, #threads: 1)\n---\nse.exec_start   :   5.7\nse.sum_exec_runtime                          :           316.145389\n";
        assert_eq!(
            parse_sum_exec_runtime(sched),
            Some(Duration::from_nanos(316_145_389))
        );
        assert_eq!(parse_sum_exec_runtime("nothing"), None);
        assert!(
            ThreadCpu::take(100)
                .expect("threads")
                .named("nobody")
                .is_zero()
        );
    }

    #[test]
    fn this_process_is_readable() {
        let pid = std::process::id();
        assert!(cpu_ticks(pid).is_ok());
        assert!(memory(pid).expect("status").rss_kib > 0);
    }
}
