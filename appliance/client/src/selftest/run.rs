//! `hark selftest` itself: the steps in order, what each tells the person,
//! and how each is judged. Every step is one request to the running
//! daemon over its Unix socket ([`super::serve`]); a step that fails or
//! times out is reported and the next one runs.
//!
//! Who is at the appliance decides how questions go ([`Person`]): at a
//! terminal, with a real board, the person is asked to press, to switch and
//! whether they heard and saw things, and may skip a step (Enter while
//! Hark waits, `s` to a question). On the simulated board, or without a
//! terminal, nobody is asked: the simulated board's button and switch are
//! moved by the daemon, and what Hark can measure decides.

use std::{
    io::{IsTerminal, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use rmcp::{
    RoleClient, ServiceExt,
    model::{ClientRequest, CustomRequest, CustomResult, ServerResult},
    service::{PeerRequestOptions, RunningService},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use hark_core::selftest::{
    BoardInfo, LightSeen, Moved, Played, Press, Recorded, Request, Shown, Spoken,
    signal::{self, Verdict},
};

use super::report::{Outcome, Report, StepName};
use hark_audio::AudioConfig;

/// What `hark selftest` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a step waits for the person's hand (a press, the switch).
    pub timeout: Duration,
    /// Steps to leave out.
    pub skip: Vec<StepName>,
    /// A WAV file played into the virtual microphone as the person's speech
    /// while the level step records.
    pub speech: Option<PathBuf>,
}

/// The tone: A4, a second.
const TONE_HZ: f32 = 440.0;
const TONE_MS: u32 = 1000;
/// What Hark says in the speech step.
const SENTENCE: &str =
    "This is Hark's self-test. If you can hear this sentence, the speaker works.";
/// The quiet second, and the speech recording.
const QUIET_MS: u32 = 1000;
const SPEECH_MS: u32 = 3000;
/// Each status of the light cycle: long enough to see with a person
/// watching, short where only Hark looks.
const LIGHT_MS_WATCHED: u32 = 1500;
const LIGHT_MS_UNWATCHED: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error(
        "cannot reach the Hark daemon at {socket}: {source}; is it running (`systemctl status hark`), and is `mcp.unix` on?"
    )]
    NoDaemon {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the Hark daemon at {socket} did not start a session: {reason}")]
    Session { socket: String, reason: String },
    #[error("the Hark daemon at {socket} stopped answering during the self-test: {reason}")]
    Lost { socket: String, reason: String },
    #[error(
        "--speech plays into the virtual sound card's microphone, which is off here ([audio.virtual_card] enabled = false)"
    )]
    NoVirtualCard,
    #[error("--speech: {0}")]
    SpeechFile(#[source] hark_audio::clip::ClipError),
}

/// Someone at the appliance, or nobody.
pub(crate) trait Person {
    /// Whether questions get answers.
    fn present(&self) -> bool;
    /// Says what happens now (on stderr: `--json` keeps stdout for the
    /// report).
    fn tell(&mut self, text: &str) {
        eprintln!("{text}");
    }
    /// A yes-or-no question.
    fn ask(&mut self, question: &str) -> impl Future<Output = Reply>;
    /// Resolves when the person asks to skip the step under way.
    fn skip(&mut self) -> impl Future<Output = ()>;
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    Yes,
    No,
    Skip,
}

/// Nobody to ask: the simulated board, or no terminal.
pub(crate) struct Unattended;

impl Person for Unattended {
    fn present(&self) -> bool {
        false
    }

    async fn ask(&mut self, _question: &str) -> Reply {
        Reply::Skip
    }

    async fn skip(&mut self) {
        std::future::pending().await
    }
}

/// A person at this terminal. Lines come from a thread of their own: a
/// read of stdin cannot be cancelled, and must not hold up the end of the
/// program.
pub(crate) struct AtTerminal {
    lines: mpsc::Receiver<String>,
}

impl AtTerminal {
    pub(crate) fn start() -> AtTerminal {
        let (tx, lines) = mpsc::channel(4);
        let spawned = std::thread::Builder::new()
            .name("hark-selftest-stdin".into())
            .spawn(move || {
                for line in std::io::stdin().lines() {
                    let Ok(line) = line else { break };
                    if tx.blocking_send(line).is_err() {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            // Without it every question goes unanswered, as if skipped.
            eprintln!("warning: cannot read the terminal: {e}");
        }
        AtTerminal { lines }
    }

    /// Forgets what was typed before the question or the wait.
    fn drain(&mut self) {
        while self.lines.try_recv().is_ok() {}
    }
}

impl Person for AtTerminal {
    fn present(&self) -> bool {
        true
    }

    async fn ask(&mut self, question: &str) -> Reply {
        self.drain();
        loop {
            eprint!("{question} [Y/n, s to skip] ");
            let _ = std::io::stderr().flush();
            let Some(line) = self.lines.recv().await else {
                return Reply::Skip;
            };
            match line.trim().to_lowercase().as_str() {
                "" | "y" | "yes" => return Reply::Yes,
                "n" | "no" => return Reply::No,
                "s" | "skip" => return Reply::Skip,
                _ => eprintln!("Please answer y, n or s."),
            }
        }
    }

    async fn skip(&mut self) {
        self.drain();
        if self.lines.recv().await.is_none() {
            // The terminal closed: nobody can skip any more.
            std::future::pending::<()>().await;
        }
    }
}

/// A step's answer from the daemon.
enum Answer<T> {
    Done(T),
    /// The daemon said what is wrong.
    Failed(String),
    /// The person skipped it.
    Skipped,
}

/// The session with the daemon.
struct Appliance {
    client: RunningService<RoleClient, rmcp::model::ClientConfig>,
    socket: String,
}

impl Appliance {
    async fn open(socket: &Path) -> Result<Appliance, SelftestError> {
        let shown = socket.display().to_string();
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|source| SelftestError::NoDaemon {
                socket: shown.clone(),
                source,
            })?;
        let client = crate::cli_info()
            .serve(stream)
            .await
            .map_err(|e| SelftestError::Session {
                socket: shown.clone(),
                reason: e.to_string(),
            })?;
        Ok(Appliance {
            client,
            socket: shown,
        })
    }

    /// Runs one step; with `person`, they may skip it while it runs.
    async fn step<T: DeserializeOwned, P: Person>(
        &self,
        request: &Request,
        person: Option<&mut P>,
    ) -> Result<Answer<T>, SelftestError> {
        let lost = |reason: String| SelftestError::Lost {
            socket: self.socket.clone(),
            reason,
        };
        let params = serde_json::to_value(request).map_err(|e| lost(e.to_string()))?;
        let mut handle = self
            .client
            .send_cancellable_request(
                ClientRequest::CustomRequest(CustomRequest::new(
                    hark_core::methods::SELFTEST,
                    Some(params),
                )),
                PeerRequestOptions::no_options(),
            )
            .await
            .map_err(|e| lost(e.to_string()))?;
        let skip = async {
            match person {
                Some(person) => person.skip().await,
                None => std::future::pending().await,
            }
        };
        let reply = tokio::select! {
            reply = &mut handle.rx => reply,
            () = skip => {
                // The daemon lets go of what the step held.
                let _ = handle.cancel(Some("skipped by the person".into())).await;
                return Ok(Answer::Skipped);
            }
        };
        match reply {
            Ok(Ok(ServerResult::CustomResult(CustomResult(value)))) => {
                serde_json::from_value(value)
                    .map(Answer::Done)
                    .map_err(|e| lost(format!("an answer of the wrong shape: {e}")))
            }
            Ok(Ok(other)) => Err(lost(format!("an unexpected answer: {other:?}"))),
            Ok(Err(rmcp::ServiceError::McpError(error))) => {
                Ok(Answer::Failed(error.message.to_string()))
            }
            Ok(Err(e)) => Err(lost(e.to_string())),
            Err(_) => Err(lost("the session ended".into())),
        }
    }

    async fn close(self) {
        let _ = self.client.cancel().await;
    }
}

/// Runs the self-test against the daemon on the Unix socket `socket`,
/// whose audio is `audio` (the person's speech, with `--speech`, goes into
/// its virtual microphone).
pub async fn run(
    socket: &std::path::Path,
    audio: &AudioConfig,
    options: Options,
) -> Result<Report, SelftestError> {
    if let Some(speech) = &options.speech {
        if !audio.virtual_card.enabled {
            return Err(SelftestError::NoVirtualCard);
        }
        hark_audio::clip::Clip::read_wav(speech).map_err(SelftestError::SpeechFile)?;
    }
    let appliance = Appliance::open(socket).await?;
    let board = appliance
        .step::<BoardInfo, Unattended>(&Request::Board, None)
        .await?;
    let mut steps = Steps {
        appliance: &appliance,
        audio,
        options,
        report: Report::default(),
        noise: None,
        clip: None,
    };
    let info = steps.board(board);
    let simulated = info.as_ref().is_some_and(|info| info.simulated);
    let result = if !simulated && std::io::stdin().is_terminal() {
        steps.rest(info.as_ref(), &mut AtTerminal::start()).await
    } else {
        steps.rest(info.as_ref(), &mut Unattended).await
    };
    let report = std::mem::take(&mut steps.report);
    appliance.close().await;
    result.map(|()| report)
}

struct Steps<'a> {
    appliance: &'a Appliance,
    audio: &'a AudioConfig,
    options: Options,
    report: Report,
    /// The quiet second's level, dBFS.
    noise: Option<f64>,
    /// The speech recording, for its playback.
    clip: Option<Recorded>,
}

/// A step's outcome after asking the person `question`, when someone is
/// there: `done` when they heard or saw it (or nobody was asked), `not`
/// when they did not.
async fn confirm<P: Person>(
    person: &mut P,
    question: &str,
    done: String,
    not: String,
) -> (Outcome, String) {
    if !person.present() {
        return (Outcome::Pass, done);
    }
    match person.ask(question).await {
        Reply::Yes => (Outcome::Pass, format!("{done}; confirmed by you")),
        Reply::No => (Outcome::Fail, not),
        Reply::Skip => (Outcome::Skipped, format!("{done}; not confirmed (skipped)")),
    }
}

fn seconds(ms: u32) -> f64 {
    f64::from(ms) / 1000.0
}

impl Steps<'_> {
    fn push(&mut self, step: StepName, (result, detail): (Outcome, String), values: Value) {
        let mark = match result {
            Outcome::Pass => "ok",
            Outcome::Fail => "FAILED",
            Outcome::Skipped => "skipped",
        };
        eprintln!("  {mark} {}: {detail}", step.as_str());
        self.report.push(step, result, detail, values);
    }

    fn failed(&mut self, step: StepName, why: String) {
        self.push(step, (Outcome::Fail, why), Value::Null);
    }

    /// Capture is the virtual card's microphone, not a real one.
    fn hears_only_the_virtual_card(&self) -> bool {
        self.audio.virtual_card.enabled
            && self.audio.capture.device == hark_audio::config::VIRTUAL_MIC_DEVICE
    }

    fn skipped(&mut self, step: StepName, why: &str) {
        self.push(step, (Outcome::Skipped, why.to_owned()), Value::Null);
    }

    /// What a step found, when it ran to its end; its failure or its skip
    /// is reported here.
    fn settle<T>(&mut self, step: StepName, answer: Answer<T>) -> Option<T> {
        match answer {
            Answer::Done(found) => Some(found),
            Answer::Failed(why) => {
                self.failed(step, why);
                None
            }
            Answer::Skipped => {
                self.skipped(step, "skipped by you");
                None
            }
        }
    }

    /// Runs `request` for `step`; what it found when it ran to its end.
    async fn call<T: DeserializeOwned, P: Person>(
        &mut self,
        step: StepName,
        request: &Request,
        person: Option<&mut P>,
    ) -> Result<Option<T>, SelftestError> {
        let answer = self.appliance.step::<T, P>(request, person).await?;
        Ok(self.settle(step, answer))
    }

    /// Whether `step` runs; a step left out gets its line.
    fn runs(&mut self, step: StepName) -> bool {
        if self.options.skip.contains(&step) {
            self.skipped(step, "left out (--skip)");
            return false;
        }
        true
    }

    /// Reports the board step; what the board is, when the step found it.
    fn board(&mut self, answer: Answer<BoardInfo>) -> Option<BoardInfo> {
        let info = self.settle(StepName::Board, answer)?;
        eprintln!("Board: {}", info.board);
        self.report.board = Some(info.board.clone());
        let parts = [
            info.button
                .clone()
                .unwrap_or_else(|| "no push-to-talk button".into()),
            info.mute.clone().unwrap_or_else(|| "no mute switch".into()),
            info.lights.clone().unwrap_or_else(|| "no lights".into()),
            match &info.link {
                Some(device) => format!("a microcontroller link on {device}"),
                None => "no microcontroller link".into(),
            },
        ];
        let name = info.profile.clone().map_or_else(
            || "the simulated board".to_owned(),
            |profile| format!("profile {profile}"),
        );
        let values = serde_json::to_value(&info).unwrap_or(Value::Null);
        let detail = format!("{name}: {}", parts.join(", "));
        self.push(StepName::Board, (Outcome::Pass, detail), values);
        Some(info)
    }

    async fn rest<P: Person>(
        &mut self,
        info: Option<&BoardInfo>,
        person: &mut P,
    ) -> Result<(), SelftestError> {
        if self.runs(StepName::Tone) {
            self.tone(person).await?;
        }
        if self.runs(StepName::Speech) {
            self.speech(person).await?;
        }
        if self.runs(StepName::NoiseFloor) {
            self.noise_floor(person).await?;
        }
        if self.runs(StepName::Level) {
            self.level(person).await?;
        }
        if self.runs(StepName::Playback) {
            self.playback(person).await?;
        }
        let board_steps = [
            StepName::Press,
            StepName::LongPress,
            StepName::Mute,
            StepName::Lights,
            StepName::Link,
        ];
        for step in board_steps {
            if !self.runs(step) {
                continue;
            }
            let Some(info) = info else {
                self.skipped(step, "no board to test");
                continue;
            };
            match step {
                StepName::Lights => self.lights(info, person).await?,
                StepName::Link => self.link(info).await?,
                _ => self.hand(step, info, person).await?,
            }
        }
        Ok(())
    }

    async fn tone<P: Person>(&mut self, person: &mut P) -> Result<(), SelftestError> {
        person.tell(&format!(
            "Tone: playing {TONE_HZ} Hz for {} s…",
            seconds(TONE_MS)
        ));
        let request = Request::Tone {
            hz: TONE_HZ,
            ms: TONE_MS,
        };
        let Some(played) = self
            .call::<Played, P>(StepName::Tone, &request, None)
            .await?
        else {
            return Ok(());
        };
        let done = format!(
            "{TONE_HZ} Hz played for {} s (the speaker finished it)",
            played.seconds
        );
        let not =
            "played, but not heard: check the speaker's connection and the volume (`set_volume`)";
        let outcome = confirm(person, "Did you hear the tone?", done, not.into()).await;
        let values = json!({"hz": TONE_HZ, "seconds": played.seconds});
        self.push(StepName::Tone, outcome, values);
        Ok(())
    }

    async fn speech<P: Person>(&mut self, person: &mut P) -> Result<(), SelftestError> {
        person.tell("Speech: Hark says a sentence…");
        let request = Request::Speak {
            text: SENTENCE.into(),
        };
        let Some(spoken) = self
            .call::<Spoken, P>(StepName::Speech, &request, None)
            .await?
        else {
            return Ok(());
        };
        let mut done = format!(
            "said in {} s by {} (voice {})",
            spoken.seconds, spoken.engine, spoken.voice
        );
        if let Some(why) = &spoken.fallback {
            done.push_str(&format!("; espeak-ng spoke because {why}"));
        }
        let not = "said, but not heard: check the speaker and the volume";
        let outcome = confirm(person, "Did you hear the sentence?", done, not.into()).await;
        let values = serde_json::to_value(&spoken).unwrap_or(Value::Null);
        self.push(StepName::Speech, outcome, values);
        Ok(())
    }

    async fn noise_floor<P: Person>(&mut self, person: &mut P) -> Result<(), SelftestError> {
        person.tell(&format!(
            "Noise floor: please stay quiet for {} s…",
            seconds(QUIET_MS)
        ));
        let request = Request::Record {
            ms: QUIET_MS,
            chime: false,
        };
        let Some(quiet) = self
            .call::<Recorded, P>(StepName::NoiseFloor, &request, None)
            .await?
        else {
            return Ok(());
        };
        let noise = quiet.levels.median_dbfs;
        self.noise = Some(noise);
        let (ok, detail) = signal::explain_noise(noise);
        let outcome = Outcome::of(ok);
        let values = json!({"noise_floor_dbfs": noise, "levels": quiet.levels});
        self.push(StepName::NoiseFloor, (outcome, detail), values);
        Ok(())
    }

    async fn level<P: Person>(&mut self, person: &mut P) -> Result<(), SelftestError> {
        person.tell(&format!(
            "Level: after the chime, speak for {} s as you would to Hark (count from one to ten)…",
            seconds(SPEECH_MS)
        ));
        // The virtual card's microphone hears nobody unless something is
        // played into it: without --speech there is nothing to measure,
        // which is not a fault of the appliance.
        if self.options.speech.is_none() && self.hears_only_the_virtual_card() {
            self.skipped(
                StepName::Level,
                "the virtual sound card's microphone has nobody speaking into it: pass --speech FILE.wav to play a recording of a person into it",
            );
            return Ok(());
        }
        // The person's speech, on the virtual card: played into its
        // microphone while the step records (the chime before the
        // recording costs its first fifth of a second).
        let injected = self.options.speech.clone().map(|path| {
            let audio = self.audio.clone();
            tokio::task::spawn_blocking(move || hark_audio::virtual_mic::inject(&audio, &path))
        });
        let request = Request::Record {
            ms: SPEECH_MS,
            chime: true,
        };
        let answer = self.appliance.step::<Recorded, P>(&request, None).await?;
        let injected = match injected {
            Some(task) => match task.await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(e.to_string()),
            },
            None => None,
        };
        let Some(speech) = self.settle(StepName::Level, answer) else {
            return Ok(());
        };
        let verdict = Verdict::of(&speech.levels, self.noise);
        let mut detail = verdict.explain(&speech.levels, self.noise);
        if let Some(why) = injected {
            detail.push_str(&format!(
                "; --speech could not be played into the virtual microphone: {why}"
            ));
        }
        let outcome = Outcome::of(verdict.passed());
        let level = speech.levels.active_dbfs;
        let values = json!({
            "level_dbfs": level,
            "peak_dbfs": speech.levels.peak_dbfs,
            "clipped": speech.levels.clipped,
            "noise_floor_dbfs": self.noise,
            "snr_db": self.noise.map(|n| ((level - n) * 10.0).round() / 10.0),
            "verdict": verdict,
            "levels": speech.levels,
        });
        self.clip = Some(speech);
        self.push(StepName::Level, (outcome, detail), values);
        Ok(())
    }

    async fn playback<P: Person>(&mut self, person: &mut P) -> Result<(), SelftestError> {
        let Some(recorded) = self.clip.clone() else {
            self.skipped(StepName::Playback, "nothing was recorded to play back");
            return Ok(());
        };
        let noise = self
            .noise
            .map_or_else(String::new, |n| format!(", noise floor {n:.1} dBFS"));
        let level = recorded.levels.active_dbfs;
        person.tell(&format!(
            "Playback: your recording (speech at {level:.1} dBFS{noise})…"
        ));
        let request = Request::Play {
            clip: recorded.clip,
        };
        let Some(played) = self
            .call::<Played, P>(StepName::Playback, &request, None)
            .await?
        else {
            return Ok(());
        };
        let done = format!(
            "played back {} s recorded at {level:.1} dBFS (peak {:.1} dBFS){noise}",
            played.seconds, recorded.levels.peak_dbfs
        );
        let not =
            "played back, but not heard: the microphone may record nothing, or the speaker be off";
        let outcome = confirm(person, "Did you hear your recording?", done, not.into()).await;
        let values =
            json!({"seconds": played.seconds, "level_dbfs": level, "noise_floor_dbfs": self.noise});
        self.push(StepName::Playback, outcome, values);
        Ok(())
    }

    /// The press, the long press and the mute switch.
    async fn hand<P: Person>(
        &mut self,
        step: StepName,
        info: &BoardInfo,
        person: &mut P,
    ) -> Result<(), SelftestError> {
        let timeout_ms = u32::try_from(self.options.timeout.as_millis()).unwrap_or(u32::MAX);
        let secs = self.options.timeout.as_secs_f64();
        let simulate = info.simulated;
        let button = |expect| Request::Button {
            expect,
            simulate,
            timeout_ms,
        };
        let (contact, request, ask, what) = match step {
            StepName::Press => (
                &info.button,
                button(Press::Press),
                "press {} briefly",
                "pressed it",
            ),
            StepName::LongPress => (
                &info.button,
                button(Press::LongPress),
                "press and hold {} for about a second, then let go",
                "held it down and let go",
            ),
            _ => (
                &info.mute,
                Request::Mute {
                    simulate,
                    timeout_ms,
                },
                "move {} over (on, or off if it is on) and back again",
                "moved it over and back",
            ),
        };
        let Some(contact) = contact else {
            let none = if step == StepName::Mute {
                "this board has no mute switch (`hark mute on` is the appliance's mute without one)"
            } else {
                "this board has no push-to-talk button"
            };
            self.skipped(step, none);
            return Ok(());
        };
        if simulate {
            person.tell(&format!("{}: moving {contact}…", step.as_str()));
        } else {
            let skip = if person.present() {
                "; Enter skips"
            } else {
                ""
            };
            person.tell(&format!(
                "{}: please {} now (within {secs} s{skip})…",
                step.as_str(),
                ask.replace("{}", contact)
            ));
        }
        let who = if simulate {
            "the simulated hand"
        } else {
            "you"
        };
        let Some(moved) = self.call::<Moved, P>(step, &request, Some(person)).await? else {
            return Ok(());
        };
        let events: Vec<String> = moved
            .events
            .iter()
            .map(|e| format!("{} at {} ms", e.event, e.at_ms))
            .collect();
        let detail = format!("{who} {what}; classified: {}", events.join(", "));
        let values = serde_json::to_value(&moved).unwrap_or(Value::Null);
        self.push(step, (Outcome::Pass, detail), values);
        Ok(())
    }

    async fn lights<P: Person>(
        &mut self,
        info: &BoardInfo,
        person: &mut P,
    ) -> Result<(), SelftestError> {
        let Some(lights) = &info.lights else {
            self.skipped(StepName::Lights, "this board has no lights Hark drives");
            return Ok(());
        };
        if !info.lights_drawn && !person.present() {
            self.skipped(
                StepName::Lights,
                &format!("{lights} draws its own patterns: only a person can see them"),
            );
            return Ok(());
        }
        let ms = match person.present() {
            true => LIGHT_MS_WATCHED,
            false => LIGHT_MS_UNWATCHED,
        };
        person.tell(&format!(
            "Lights: watch {lights}; each status shows for {} s in turn — muted (red), asking (cyan), listening (blue), ringing (pink, flashing), error (amber, blinking), speaking (green, pulsing), transcribing (white, spinning), pairing (purple, spinning), timer (pink, three quarters of the ring), message (yellow, pulsing), idle…",
            seconds(ms)
        ));
        let Some(shown) = self
            .call::<Shown, P>(StepName::Lights, &Request::Lights { ms }, None)
            .await?
        else {
            return Ok(());
        };
        let values = serde_json::to_value(&shown).unwrap_or(Value::Null);
        let names = |keep: &dyn Fn(&LightSeen) -> bool| -> Vec<String> {
            shown
                .statuses
                .iter()
                .filter(|s| keep(s))
                .map(|s| s.status.clone())
                .collect()
        };
        // What Hark drew itself it can check; a microcontroller's ring only
        // the person can.
        let dark = names(&|s| s.expected && s.lit == 0);
        let none = names(&|s| !s.expected && s.status != "idle");
        let mut detail = if !info.lights_drawn {
            format!("every status sent to {lights}")
        } else if dark.is_empty() {
            format!("every status drawn on {} LED(s) of {lights}", shown.leds)
        } else {
            format!(
                "nothing lit for {} on {lights}: check those LEDs' wiring",
                dark.join(", ")
            )
        };
        if !none.is_empty() {
            detail.push_str(&format!("; no LED for {} on this board", none.join(", ")));
        }
        let outcome = if info.lights_drawn && !dark.is_empty() {
            (Outcome::Fail, detail)
        } else {
            let not = format!("{detail}; but not seen: check the LEDs' wiring and power");
            confirm(person, "Did each light come on in turn?", detail, not).await
        };
        self.push(StepName::Lights, outcome, values);
        Ok(())
    }

    async fn link(&mut self, info: &BoardInfo) -> Result<(), SelftestError> {
        if info.link.is_none() {
            self.skipped(
                StepName::Link,
                "no microcontroller link in this board's profile",
            );
            return Ok(());
        }
        let Some(link) = self
            .call::<hark_core::selftest::LinkState, Unattended>(
                StepName::Link,
                &Request::Link,
                None,
            )
            .await?
        else {
            return Ok(());
        };
        let device = link.device.clone().unwrap_or_default();
        let detail = match link.connected {
            Some(true) => format!("the microcontroller on {device} answered"),
            Some(false) => format!(
                "{device} is there, but the microcontroller has not answered its hello: is its firmware Hark's, at the profile's baud rate?"
            ),
            None => format!("{device} is there"),
        };
        let outcome = Outcome::of(link.connected != Some(false));
        let values = serde_json::to_value(&link).unwrap_or(Value::Null);
        self.push(StepName::Link, (outcome, detail), values);
        Ok(())
    }
}
