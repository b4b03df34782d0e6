//! The self-test's report: one line per step — passed, failed or skipped,
//! and what was found — as text for the person or JSON for a script.

use serde::Serialize;
use serde_json::Value;

/// The steps, in the order they run (`--skip` names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum StepName {
    /// Which board profile was found, and what it has.
    #[value(skip)]
    Board,
    /// A tone through the speaker.
    Tone,
    /// A sentence in Hark's voice.
    Speech,
    /// The room's noise floor, from a quiet second.
    NoiseFloor,
    /// The speech level of a short recording.
    Level,
    /// The recording played back.
    Playback,
    /// A short press of the button.
    Press,
    /// A long press of the button.
    LongPress,
    /// The mute switch, on and off.
    Mute,
    /// Every light in turn.
    Lights,
    /// The microcontroller link.
    Link,
}

impl StepName {
    pub fn as_str(self) -> &'static str {
        match self {
            StepName::Board => "board",
            StepName::Tone => "tone",
            StepName::Speech => "speech",
            StepName::NoiseFloor => "noise_floor",
            StepName::Level => "level",
            StepName::Playback => "playback",
            StepName::Press => "press",
            StepName::LongPress => "long_press",
            StepName::Mute => "mute",
            StepName::Lights => "lights",
            StepName::Link => "link",
        }
    }
}

/// How a step came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    Skipped,
}

impl Outcome {
    /// Passed or failed, by what the step measured.
    pub fn of(passed: bool) -> Outcome {
        if passed { Outcome::Pass } else { Outcome::Fail }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One step's line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub step: StepName,
    pub result: Outcome,
    /// What was found, or what is wrong.
    pub detail: String,
    /// What was measured (levels in dBFS, events with their times); null
    /// when nothing was.
    pub values: Value,
}

/// How many steps came out each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skipped: usize,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Which board (`get_status`'s board line); none when there is none.
    pub board: Option<String>,
    /// No step failed.
    pub passed: bool,
    pub counts: Counts,
    pub steps: Vec<StepReport>,
}

impl Report {
    pub fn push(&mut self, step: StepName, result: Outcome, detail: String, values: Value) {
        match result {
            Outcome::Pass => self.counts.pass += 1,
            Outcome::Fail => self.counts.fail += 1,
            Outcome::Skipped => self.counts.skipped += 1,
        }
        self.passed = self.counts.fail == 0;
        self.steps.push(StepReport {
            step,
            result,
            detail,
            values,
        });
    }

    /// The step's line, if it ran.
    #[cfg(test)]
    pub fn step(&self, step: StepName) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.step == step)
    }

    /// The report as the person reads it.
    pub fn text(&self) -> String {
        let mut out = format!(
            "Hark self-test: {}\n\n",
            self.board.as_deref().unwrap_or("no board")
        );
        for step in &self.steps {
            out.push_str(&format!(
                "  {:<8} {:<12} {}\n",
                step.result.as_str(),
                step.step.as_str(),
                step.detail
            ));
        }
        let Counts {
            pass,
            fail,
            skipped,
        } = self.counts;
        out.push_str(&format!(
            "\n{pass} passed, {fail} failed, {skipped} skipped{}\n",
            if self.passed {
                "."
            } else {
                ": see the failed steps above."
            }
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_fails_the_report_and_every_step_has_a_line() {
        let mut report = Report {
            board: Some("simulated (board = \"simulated\")".into()),
            ..Report::default()
        };
        report.push(StepName::Tone, Outcome::Pass, "played".into(), Value::Null);
        assert!(report.passed);
        report.push(
            StepName::Level,
            Outcome::Fail,
            "speech at -120.0 dBFS: too low".into(),
            serde_json::json!({"level_dbfs": -120.0}),
        );
        report.push(
            StepName::Link,
            Outcome::Skipped,
            "no link".into(),
            Value::Null,
        );
        assert!(!report.passed);
        assert_eq!(
            report.counts,
            Counts {
                pass: 1,
                fail: 1,
                skipped: 1
            }
        );
        let text = report.text();
        assert!(text.starts_with("Hark self-test: simulated"), "{text}");
        assert!(
            text.contains("  fail     level        speech at -120.0 dBFS"),
            "{text}"
        );
        assert!(
            text.contains("1 passed, 1 failed, 1 skipped: see"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["passed"], false);
        assert_eq!(json["steps"][1]["step"], "level");
        assert_eq!(json["steps"][1]["result"], "fail");
        assert_eq!(json["steps"][2]["result"], "skipped");
        assert_eq!(report.step(StepName::Level).unwrap().result, Outcome::Fail);
    }
}
