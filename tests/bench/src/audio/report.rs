//! The audio benchmark's markdown report.

use std::{fmt::Write, time::Duration};

use super::{
    cpu::{Case, CpuResult},
    eos::{Clip, Condition, Live, Offline},
    stop::StopResult,
};

/// Capture + detection, in % of one core.
pub const CPU_TARGET: f64 = 3.0;
/// Stop → silence.
pub const STOP_TARGET: Duration = Duration::from_millis(50);
/// The end-of-speech decision may come this long after the hang-over.
pub const DECISION_MARGIN: Duration = Duration::from_millis(50);

pub struct OfflineRun {
    pub condition: Condition,
    pub clips: Vec<Clip>,
    pub detectors: Vec<Offline>,
}

pub struct AudioReport {
    pub machine: String,
    pub ticks_per_second: u64,
    pub cpu: Vec<Result<CpuResult, (Case, anyhow::Error)>>,
    pub stop: anyhow::Result<StopResult>,
    pub live: anyhow::Result<Vec<Live>>,
    pub offline: Vec<OfflineRun>,
    /// The peers' versions, or why they did not run.
    pub peer_versions: anyhow::Result<String>,
    pub hangover_ms: u32,
}

/// Today (UTC) as YYYY-MM-DD, from the system clock.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| text.trim().to_owned())
}

pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let commit = commit().map_or_else(String::new, |c| format!(", commit `{c}`"));
    format!(
        "Machine: {cores} cores, {model}, Linux {kernel}; {}{commit}.",
        today()
    )
}

/// An error with its causes, on one line that fits in a table cell.
fn cell(error: &anyhow::Error) -> String {
    format!("{error:#}").replace('|', "/").replace('\n', " ")
}

fn yes_no(met: bool) -> &'static str {
    match met {
        true => "**yes**",
        false => "**NO**",
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// The nearest-rank percentile `p` (0..=1) of `samples`.
fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// One detector's results on one condition's clips.
struct Summary {
    ended: usize,
    mean_abs_error: Option<f64>,
    max_abs_error: Option<f64>,
    mean_decision: Option<f64>,
}

fn summarize(detector: &Offline, clips: &[Clip]) -> Summary {
    let found: Vec<(f64, f64)> = detector
        .detections
        .iter()
        .zip(clips)
        .filter_map(|(d, clip)| d.map(|d| (d.end_error_ms(clip).abs(), d.decision_ms(clip))))
        .collect();
    let errors: Vec<f64> = found.iter().map(|f| f.0).collect();
    let decisions: Vec<f64> = found.iter().map(|f| f.1).collect();
    Summary {
        ended: found.len(),
        mean_abs_error: mean(&errors),
        max_abs_error: errors.iter().copied().reduce(f64::max),
        mean_decision: mean(&decisions),
    }
}

fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".into(), |v| format!("{v:.decimals$}"))
}

impl AudioReport {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "# hark-bench audio\n")?;
        writeln!(
            out,
            "{} On Hark's virtual sound card (ALSA's `file` plugin; the microphone is a FIFO fed in real time).\n",
            self.machine
        )?;
        self.write_cpu(out)?;
        self.write_stop(out)?;
        self.write_live(out)?;
        self.write_offline(out)?;
        self.write_targets(out)
    }

    fn write_cpu(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "## Capture + end-of-speech detection CPU\n")?;
        writeln!(
            out,
            "16 kHz S16_LE, 20 ms periods. Speech clips with 1.5 s pauses; on 4 channels the speech is on channel 1 and the others carry noise (about −31 dBFS). \
             The detector thread runs the engine's `Segmenter` over the ring continuously. \
             Per thread: CPU time over the window from {}. Process: utime + stime from `/proc/self/stat`, in ticks of {} ms. \
             The feeder (`hark-virtual-mic`) plays the part of the sound card: it is shown but not counted.\n",
            match self.cpu.iter().flatten().all(|r| r.precise) {
                true => "`/proc/self/task/TID/sched` (`se.sum_exec_runtime`, to the nanosecond)",
                false => "`/proc/self/task/TID/stat` (utime + stime, in clock ticks)",
            },
            1000 / self.ticks_per_second.max(1)
        )?;
        writeln!(
            out,
            "| input | window s | capture thread % | detector thread % | capture + detector % | process − feeder % | feeder % (not counted) | periods/s | overruns | samples dropped | utterances ended / played |"
        )?;
        writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
        for run in &self.cpu {
            match run {
                Ok(r) => writeln!(
                    out,
                    "| {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {} | {} / {} |",
                    r.case.name,
                    r.window.as_secs_f64(),
                    r.percent(r.capture),
                    r.percent(r.detector),
                    r.percent(r.capture + r.detector),
                    r.percent(r.process.saturating_sub(r.feeder)),
                    r.percent(r.feeder),
                    r.periods as f64 / r.window.as_secs_f64().max(1e-9),
                    r.overruns,
                    r.dropped,
                    r.utterances_detected,
                    r.utterances_injected,
                )?,
                Err((case, e)) => writeln!(
                    out,
                    "| {} | FAILED: {} | | | | | | | | | |",
                    case.name,
                    cell(e)
                )?,
            }
        }
        if let Some(Ok(r)) = self.cpu.first() {
            writeln!(
                out,
                "\nThe process figure is in clock ticks: one tick over the window is {:.3} % of one core.",
                r.tick_percent()
            )?;
        }
        writeln!(out)
    }

    fn write_stop(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "## Stop to silence\n")?;
        let r = match &self.stop {
            Ok(r) => r,
            Err(e) => return writeln!(out, "FAILED: {}\n", cell(e)),
        };
        writeln!(
            out,
            "Player on `hark_virtual_speaker` ({} Hz, {} channels, {} ms periods × {}, {} ms fade), a 3 s clip stopped after 150–850 ms. \
             Engine: `stats().last_stop_latency()`, stop request → device buffer dropped. \
             Seen by the caller: `stop()` → the clip's `Stopped` outcome received. Nearest-rank percentiles.\n",
            r.config.rate,
            r.config.channels,
            r.config.period_ms,
            r.config.periods,
            r.config.fade_ms
        )?;
        writeln!(
            out,
            "| measure | stops | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|--:|"
        )?;
        for (name, samples) in [
            ("engine: stop → silence", &r.engine),
            ("caller: stop() → Stopped received", &r.observed),
        ] {
            writeln!(
                out,
                "| {name} | {} of {} | {} | {} | {} |",
                samples.len(),
                r.trials,
                ms(percentile(samples, 0.5)),
                ms(percentile(samples, 0.99)),
                ms(percentile(samples, 1.0)),
            )?;
        }
        writeln!(out, "\nUnderruns: {}.", r.underruns)?;
        for failure in &r.failures {
            writeln!(out, "- {failure}")?;
        }
        writeln!(out)
    }

    fn write_live(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "## End of speech, live through ALSA\n")?;
        writeln!(
            out,
            "`utterance::record` with the default `[audio.vad]` (hang-over {} ms, minimum speech 200 ms), 300 ms pre-roll, 1 channel. \
             Each clip: 1 s of noise (about −55 dBFS), an espeak-ng sentence, 3 s of noise. True end: the last 10 ms window of the clean sentence above −40 dBFS. \
             Wall: from when the true end was played (injection + its offset) to `record` returning. \
             Audio: the decision's place in the recording − the true end's (the clip located by correlation). \
             Capture slip: how many samples the recording gained or lost between the sentence's onset and its end (0: sample for sample).\n",
            self.hangover_ms
        )?;
        let live = match &self.live {
            Ok(live) => live,
            Err(e) => return writeln!(out, "FAILED: {}\n", cell(e)),
        };
        writeln!(
            out,
            "| clip | speech s | ended by | detected end − true end ms | decision after true end, audio ms | decision after true end, wall ms | capture slip, samples |"
        )?;
        writeln!(out, "|---|--:|---|--:|--:|--:|--:|")?;
        let mut walls = Vec::new();
        let mut errors = Vec::new();
        for l in live {
            walls.push(l.wall.as_secs_f64() * 1e3);
            let (error, audio) = match l.detection {
                Some(d) => {
                    errors.push(d.end_error_ms(&l.clip));
                    (
                        format!("{:+.0}", d.end_error_ms(&l.clip)),
                        format!("{:.0}", d.decision_ms(&l.clip)),
                    )
                }
                None => ("not found".into(), "n/a".into()),
            };
            writeln!(
                out,
                "| {} | {:.2} | {:?} | {error} | {audio} | {:.0} | {} |",
                l.clip.name,
                l.clip.speech_secs(),
                l.reason,
                l.wall.as_secs_f64() * 1e3,
                l.slip.map_or_else(|| "n/a".into(), |s| format!("{s:+}")),
            )?;
        }
        writeln!(
            out,
            "| **mean** | | | {} | | {} | |",
            opt(mean(&errors), 0),
            opt(mean(&walls), 0)
        )?;
        let dropped: u64 = live.iter().map(|l| l.dropped).sum();
        if dropped > 0 {
            writeln!(out, "\nThe recorder lost {dropped} samples to the ring.")?;
        }
        writeln!(out)
    }

    fn write_offline(&self, out: &mut String) -> std::fmt::Result {
        writeln!(
            out,
            "## End of speech on the same clips: Hark's detector, a baseline and peers (offline)\n"
        )?;
        match &self.peer_versions {
            Ok(versions) => writeln!(out, "Peers: {versions}.")?,
            Err(e) => writeln!(out, "Peers did not run: {}.", cell(e))?,
        }
        writeln!(
            out,
            "The same 16-bit clips (−55 dBFS noise as played live, and the same sentences in −35 dBFS white noise), fed whole to each detector; \
             every detector's frame decisions go through the `Segmenter`'s rules (200 ms minimum speech, {} ms hang-over). \
             The energy threshold (a frame is speech when its RMS is 12 dB above the noise of the clip's first 500 ms) is a baseline written for this bench, not a product; \
             in −55 dBFS noise its threshold (about −43 dBFS) is nearly the truth's own definition (−40 dBFS on the clean sentence), so its small error there is by construction: \
             the −35 dBFS rows are the informative ones for it. \
             Cells: detected end − true end / decision after true end, in ms of audio.\n",
            self.hangover_ms
        )?;
        let Some(first) = self.offline.first() else {
            return Ok(());
        };
        let names: Vec<&str> = first
            .detectors
            .iter()
            .map(|d| d.detector.as_str())
            .collect();
        writeln!(out, "| noise | clip | {} |", names.join(" | "))?;
        writeln!(out, "|---|---|{}", "--:|".repeat(names.len()))?;
        for run in &self.offline {
            for (i, clip) in run.clips.iter().enumerate() {
                let cells: Vec<String> = run
                    .detectors
                    .iter()
                    .map(|d| match (&d.error, d.detections.get(i)) {
                        (Some(_), _) | (None, None) => "n/a".into(),
                        (None, Some(None)) => "no end".into(),
                        (None, Some(Some(found))) => format!(
                            "{:+.0} / {:.0}",
                            found.end_error_ms(clip),
                            found.decision_ms(clip)
                        ),
                    })
                    .collect();
                writeln!(
                    out,
                    "| {} | {} | {} |",
                    run.condition.name,
                    clip.name,
                    cells.join(" | ")
                )?;
            }
        }
        writeln!(
            out,
            "\n| detector | noise | clips ended | mean abs end error ms | max abs end error ms | mean decision after true end ms | abs end error ÷ Hark's | compute ms per s of audio |"
        )?;
        writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|")?;
        for run in &self.offline {
            let hark = run.detectors.first().map(|d| summarize(d, &run.clips));
            for d in &run.detectors {
                if let Some(e) = &d.error {
                    writeln!(
                        out,
                        "| {} | {} | did not run: {} | | | | | |",
                        d.detector,
                        run.condition.name,
                        e.replace('|', "/")
                    )?;
                    continue;
                }
                let s = summarize(d, &run.clips);
                let ratio = match (
                    s.mean_abs_error,
                    hark.as_ref().and_then(|h| h.mean_abs_error),
                ) {
                    (Some(a), Some(b)) if b > 0.0 && a / b < 1.0 => format!("{:.2}×", a / b),
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.1}×", a / b),
                    _ => "n/a".into(),
                };
                let compute = d.compute.as_secs_f64() * 1e3 / d.audio.as_secs_f64().max(1e-9);
                writeln!(
                    out,
                    "| {} | {} | {} of {} | {} | {} | {} | {ratio} | {compute:.2} |",
                    d.detector,
                    run.condition.name,
                    s.ended,
                    run.clips.len(),
                    opt(s.mean_abs_error, 0),
                    opt(s.max_abs_error, 0),
                    opt(s.mean_decision, 0),
                )?;
            }
        }
        writeln!(
            out,
            "\nCompute is the time spent inside each detector's call (Python peers: the C/C++ call, not the Python loop around it), for scale only."
        )?;
        writeln!(out)
    }

    fn write_targets(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "## Targets\n")?;
        writeln!(out, "| target | measured | met |\n|---|--:|---|")?;
        for run in &self.cpu {
            match run {
                Ok(r) => {
                    let counted = r.percent(r.process.saturating_sub(r.feeder));
                    writeln!(
                        out,
                        "| capture + detection < {CPU_TARGET} % of one core, {} | {counted:.2} % (process − feeder; threads alone {:.2} %) | {} |",
                        r.case.name,
                        r.percent(r.capture + r.detector),
                        yes_no(counted < CPU_TARGET)
                    )?;
                }
                Err((case, _)) => writeln!(
                    out,
                    "| capture + detection < {CPU_TARGET} % of one core, {} | failed | **NO** |",
                    case.name
                )?,
            }
        }
        match &self.stop {
            Ok(r) if !r.engine.is_empty() => {
                let worst = percentile(&r.engine, 1.0);
                writeln!(
                    out,
                    "| stop → silence ≤ {} ms (every stop) | p99 {} ms, max {} ms{} | {} |",
                    STOP_TARGET.as_millis(),
                    ms(percentile(&r.engine, 0.99)),
                    ms(worst),
                    if r.failures.is_empty() {
                        String::new()
                    } else {
                        format!(", {} stops failed", r.failures.len())
                    },
                    yes_no(worst <= STOP_TARGET && r.failures.is_empty())
                )?;
            }
            _ => writeln!(
                out,
                "| stop → silence ≤ {} ms | failed | **NO** |",
                STOP_TARGET.as_millis()
            )?,
        }
        let limit = f64::from(self.hangover_ms) + DECISION_MARGIN.as_secs_f64() * 1e3;
        match &self.live {
            Ok(live) if !live.is_empty() => {
                let walls: Vec<f64> = live.iter().map(|l| l.wall.as_secs_f64() * 1e3).collect();
                let worst = walls.iter().copied().fold(0.0, f64::max);
                writeln!(
                    out,
                    "| end-of-speech decision ≤ hang-over + {} ms = {limit:.0} ms after the true end (every clip, wall) | mean {} ms, max {worst:.0} ms | {} |",
                    DECISION_MARGIN.as_millis(),
                    opt(mean(&walls), 0),
                    yes_no(worst <= limit)
                )?;
            }
            _ => writeln!(
                out,
                "| end-of-speech decision ≤ {limit:.0} ms | failed | **NO** |"
            )?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let samples: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.5), Duration::from_millis(10));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(20));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }
}
