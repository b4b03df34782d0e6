//! A board, assembled: the profile chosen (by name, by path, or detected),
//! the backends it names started, every input going through the button
//! classifier, and the lights on their thread.
//!
//! The backends, by name (librespot's table idea, here picked by the
//! profile rather than by a flag):
//!
//! | backend | buttons and switch | lights |
//! |---|---|---|
//! | `gpio` | input lines of the GPIO character device, with edge events | output lines, or an APA102 chain on SPI (spidev) |
//! | `simulated` | [`SimControl`] (`hark button`, `hark mute`) | [`SimLeds`], shown in `get_status` |
//!
//! A profile with a serial `link` adds the microcontroller's inputs and
//! lights (see [`crate::link`]).

use std::path::Path;
use std::time::SystemTime;

use std::sync::{Arc, Mutex, PoisonError};

use hark_board_protocol::{LedPattern, Rgb as WireRgb};
use tokio::{sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::{
    button::{self, ButtonEvent, ButtonTiming, Level},
    contact::GpioContact,
    detect::{self, Detected, Machine},
    error::BoardError,
    gpio,
    led::{LedOutput, Lights, Pattern, Rgb, Shown},
    link::{Command, Link, LinkConfig, LinkEvent, LinkHandle},
    ports::{ChannelContact, Contact, Running},
    profile::{LedRole, Leds, Profile},
    sim::{SimControl, SimLedView, SimLeds},
    spi::Apa102,
    status::{Countdown, LedRoles, Status, light_at},
};

/// The board's settings (the daemon's `[board]` section).
#[derive(Debug, Clone, PartialEq)]
pub struct BoardConfig {
    /// `auto`, `simulated`, a shipped profile's name, or a profile file.
    pub board: String,
    pub timing: ButtonTiming,
    /// LEDs on the simulated board (a ring's worth by default).
    pub simulated_leds: usize,
}

impl Default for BoardConfig {
    fn default() -> Self {
        Self {
            board: "auto".into(),
            timing: ButtonTiming::default(),
            simulated_leds: 12,
        }
    }
}

/// Which board to run, before anything is started: the daemon resolves it
/// first, so that the audio engine can take the profile's sound card.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// The simulated board, and why.
    Simulated(String),
    /// A profile's hardware.
    Hardware(Box<Profile>),
}

/// Chooses the board `config` names on the machine under `root`: detection
/// for `auto`, the named or given profile otherwise (checked against the
/// machine). Returns the machine too, for its sound cards.
pub fn resolve(config: &BoardConfig, root: &Path) -> Result<(Resolved, Machine), BoardError> {
    let machine = Machine::probe(root)?;
    let resolved = match config.board.as_str() {
        "simulated" => Resolved::Simulated("board = \"simulated\"".into()),
        "auto" => match detect::detect_among(&machine, &Profile::builtins()?) {
            Detected::Simulated { reason } => {
                tracing::warn!(%reason, "no board detected: using the simulated board");
                Resolved::Simulated(reason)
            }
            Detected::Profile { profile, reason } => {
                tracing::info!(profile = %profile.name, %reason, "board detected");
                Resolved::Hardware(profile)
            }
        },
        spec => {
            let profile = Profile::open(spec)?;
            detect::check_explicit(&profile, &machine)?;
            Resolved::Hardware(Box::new(profile))
        }
    };
    Ok((resolved, machine))
}

/// What the board tells the appliance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardEvent {
    /// The push-to-talk button.
    Button(ButtonEvent),
    /// The mute switch moved: `true` is muted.
    Mute(bool),
}

/// The board, running. Dropping it stops the inputs, turns the LEDs off
/// and releases every pin.
pub struct Board {
    events: Option<mpsc::Receiver<BoardEvent>>,
    /// Where attached inputs (the microcontroller's) send their events.
    events_tx: mpsc::Sender<BoardEvent>,
    timing: ButtonTiming,
    /// The microcontroller's LED ring, and the pattern it should show
    /// (re-sent when it reconnects).
    link: Option<LinkHandle>,
    link_pattern: Arc<Mutex<LedPattern>>,
    shutdown: CancellationToken,
    lights: Lights,
    roles: LedRoles,
    profile: Option<Profile>,
    simulated: Option<(SimControl, SimLedView)>,
    description: String,
    tasks: Vec<JoinHandle<()>>,
    /// The contacts' backends. Declared last: the pins go after the tasks
    /// reading them stop.
    _contacts: Vec<Running>,
}

/// What a contact is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactKind {
    /// The push-to-talk button: press, release, long and double press.
    Button,
    /// The mute switch: closed is muted.
    Mute,
}

impl Board {
    /// Starts the board `config` names, on `root`'s device tree and sound
    /// cards (`/` but in tests). Call it inside a tokio runtime.
    pub fn open(config: &BoardConfig, root: &Path) -> Result<Board, BoardError> {
        let (resolved, _) = resolve(config, root)?;
        Self::start(config, resolved)
    }

    /// Starts a board [`resolve`] chose. Call it inside a tokio runtime.
    pub fn start(config: &BoardConfig, resolved: Resolved) -> Result<Board, BoardError> {
        match resolved {
            Resolved::Simulated(reason) => Self::simulated(config, format!("simulated ({reason})")),
            Resolved::Hardware(profile) => Self::hardware(config, *profile),
        }
    }

    /// A board with lights on `output` and no contacts yet.
    fn with_lights(
        config: &BoardConfig,
        output: Box<dyn LedOutput>,
        roles: LedRoles,
        description: String,
    ) -> Result<Board, BoardError> {
        let (events, rx) = mpsc::channel(32);
        Ok(Board {
            events: Some(rx),
            events_tx: events,
            timing: config.timing,
            link: None,
            link_pattern: Arc::new(Mutex::new(LedPattern::Off)),
            shutdown: CancellationToken::new(),
            lights: Lights::start(output).map_err(BoardError::Thread)?,
            roles,
            profile: None,
            simulated: None,
            description,
            tasks: Vec::new(),
            _contacts: Vec::new(),
        })
    }

    /// Starts `contact` as the board's button or mute switch, behind the
    /// classifier every contact gets.
    pub fn add_contact(
        &mut self,
        kind: ContactKind,
        contact: Box<dyn Contact>,
    ) -> Result<(), BoardError> {
        let (levels, levels_rx) = mpsc::channel(64);
        let spawn = match kind {
            ContactKind::Button => spawn_button,
            ContactKind::Mute => spawn_switch,
        };
        tracing::debug!(contact = %contact.describe(), ?kind, "contact started");
        self._contacts.push(contact.start(levels)?);
        self.tasks
            .push(spawn(levels_rx, self.events_tx.clone(), self.timing));
        Ok(())
    }

    fn simulated(config: &BoardConfig, description: String) -> Result<Board, BoardError> {
        let (leds, view) = SimLeds::new(config.simulated_leds.max(1));
        let mut board = Self::with_lights(config, Box::new(leds), LedRoles::Shared, description)?;
        let (button, button_contact) = ChannelContact::new("the simulated button");
        let (mute, mute_contact) = ChannelContact::new("the simulated mute switch");
        board.add_contact(ContactKind::Button, Box::new(button_contact))?;
        board.add_contact(ContactKind::Mute, Box::new(mute_contact))?;
        board.simulated = Some((SimControl::new(button, mute), view));
        Ok(board)
    }

    fn hardware(config: &BoardConfig, profile: Profile) -> Result<Board, BoardError> {
        let gpio_error = |source| BoardError::Gpio {
            profile: profile.name.clone(),
            source: Box::new(source),
        };
        // The chip only when the profile has GPIO lines to take: an LED ring
        // on SPI without a power line needs none.
        let chip = if profile.gpio_lines() {
            let chip = gpio::find_chip(profile.gpio_chip.as_deref()).map_err(gpio_error)?;
            tracing::info!(chip = %chip, path = %chip.path.display(), "GPIO lines on this chip");
            Some(chip)
        } else {
            None
        };
        let (output, roles): (Box<dyn LedOutput>, LedRoles) = match (&chip, &profile.leds) {
            (Some(chip), Leds::Gpio(leds)) => {
                let pins: Vec<(u8, bool)> =
                    leds.pins.iter().map(|l| (l.pin, l.active_low)).collect();
                let roles = leds.pins.iter().map(|l| statuses(l.role)).collect();
                (
                    Box::new(gpio::GpioLeds::open(chip, &pins).map_err(gpio_error)?),
                    LedRoles::PerLed(roles),
                )
            }
            (chip, Leds::Apa102(ring)) => (
                Box::new(
                    Apa102::open(
                        ring.spi_bus,
                        ring.chip_select,
                        ring.max_clock_hz,
                        usize::from(ring.count),
                        ring.brightness,
                        chip.as_ref().zip(ring.power_pin),
                    )
                    .map_err(gpio_error)?,
                ),
                LedRoles::Shared,
            ),
            // No lights Hark can drive (a USB array): the lights still
            // run, on nothing, so status reports what would show.
            _ => (Box::new(SimLeds::new(1).0), LedRoles::Shared),
        };
        let description = match &chip {
            Some(chip) => format!("{} ({}) on {chip}", profile.name, profile.description),
            None => format!("{} ({})", profile.name, profile.description),
        };
        let mut board = Self::with_lights(config, output, roles, description)?;
        if let Some(chip) = &chip {
            let contacts = [
                (
                    ContactKind::Button,
                    &profile.button,
                    "the push-to-talk button",
                ),
                (ContactKind::Mute, &profile.mute, "the mute switch"),
            ];
            for (kind, pin, purpose) in contacts {
                let Some(pin) = *pin else { continue };
                let contact = GpioContact {
                    chip: chip.clone(),
                    pin,
                    purpose,
                    profile: profile.name.clone(),
                };
                board.add_contact(kind, Box::new(contact))?;
            }
        }
        if let Some(link) = &profile.link {
            let link = Link::spawn_serial(LinkConfig::from_profile(link), board.shutdown.clone());
            board.attach_link(link)?;
        }
        board.profile = Some(profile);
        Ok(board)
    }

    /// Takes a microcontroller's inputs and LED ring into the board: its
    /// push-to-talk button (id 0) and mute switch go through the same
    /// classifiers as GPIO ones, and the lights are sent to its ring as
    /// patterns (it animates them itself). `Board::open` attaches the
    /// profile's link; tests attach one over a pseudo-terminal.
    pub fn attach_link(&mut self, link: Link) -> Result<(), BoardError> {
        let (handle, mut link_events, link_task) = link.into_parts();
        let device = handle.device().display().to_string();
        let (button_levels, button) = ChannelContact::new(format!("the button on {device}"));
        let (mute_levels, mute) = ChannelContact::new(format!("the mute switch on {device}"));
        self.add_contact(ContactKind::Button, Box::new(button))?;
        self.add_contact(ContactKind::Mute, Box::new(mute))?;
        let resend = (handle.clone(), Arc::clone(&self.link_pattern));
        self.tasks.push(tokio::spawn(async move {
            // Whether the button is down as far as the board knows: a link
            // lost while it is held (the cable pulled, the release's frame
            // cut in half) would otherwise hold push-to-talk open for good.
            let mut held = false;
            while let Some(event) = link_events.recv().await {
                let sent = match event {
                    LinkEvent::Connected { hello } => {
                        tracing::info!(mcu = %hello.name, device = %resend.0.device().display(), "microcontroller connected");
                        let pattern = *resend.1.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Err(e) = resend.0.send(Command::Leds(pattern)) {
                            tracing::debug!(error = %e, "LED pattern not re-sent");
                        }
                        Ok(())
                    }
                    LinkEvent::Button { id: 0, pressed, .. } => {
                        held = pressed;
                        button_levels
                            .send(if pressed { Level::Pressed } else { Level::Released })
                            .await
                    }
                    LinkEvent::Mute(on) => mute_levels
                        .send(if on { Level::Pressed } else { Level::Released })
                        .await,
                    LinkEvent::Disconnected { reason } => {
                        tracing::warn!(error = %reason, "microcontroller link down; reconnecting");
                        // Let go of a held button, as the person would be
                        // seen to if the link could still say so. (The mute
                        // switch keeps its last state: it is a switch, and
                        // the state report on reconnecting corrects it.)
                        if std::mem::take(&mut held) {
                            tracing::info!("the button was held when the link went down: released");
                            button_levels.send(Level::Released).await
                        } else {
                            Ok(())
                        }
                    }
                    LinkEvent::Rejected { command, code } => {
                        tracing::warn!(?command, ?code, "the microcontroller refused a command");
                        Ok(())
                    }
                    other => {
                        tracing::debug!(event = ?other, "microcontroller event with no action");
                        Ok(())
                    }
                };
                if sent.is_err() {
                    break;
                }
            }
            let _ = link_task.await;
        }));
        self.link = Some(handle);
        Ok(())
    }

    /// Whether the microcontroller answers on its link right now (its
    /// handshake done, its heartbeat alive); `None`: the board has no link.
    pub fn link_connected(&self) -> Option<bool> {
        self.link.as_ref().map(LinkHandle::is_connected)
    }

    /// The board's events; taken once, by the appliance's board task.
    pub fn take_events(&mut self) -> Option<mpsc::Receiver<BoardEvent>> {
        self.events.take()
    }

    /// Shows `status` on the board's lights (never blocks); with
    /// [`Status::Timer`], `timer` counted down from now.
    pub fn show(&self, status: Status, timer: Option<Countdown>) {
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let light = light_at(status, timer, now_ms, &self.roles);
        self.lights.set(light);
        if let Some(link) = &self.link {
            let pattern = wire_pattern(light.pattern);
            *self
                .link_pattern
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = pattern;
            // Disconnected: it is re-sent on connecting. Full: the newest
            // change is the one that matters, and the next one follows
            // within the lights' period.
            if let Err(e) = link.send(Command::Leds(pattern)) {
                tracing::debug!(error = %e, "LED pattern not sent to the microcontroller");
            }
        }
    }

    /// What the lights show now.
    pub fn shown(&self) -> Shown {
        self.lights.shown()
    }

    /// The simulated board's controls and LEDs, if this is it.
    pub fn simulated_control(&self) -> Option<&SimControl> {
        self.simulated.as_ref().map(|(control, _)| control)
    }

    pub fn simulated_leds(&self) -> Option<&SimLedView> {
        self.simulated.as_ref().map(|(_, view)| view)
    }

    /// The profile in use (none for the simulated board).
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_ref()
    }

    /// Which board this is, and why, for logs and `get_status`.
    pub fn describe(&self) -> &str {
        &self.description
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        // The link task sends nothing more and closes the port.
        self.shutdown.cancel();
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The statuses a single LED of `role` shows. A ready LED is lit (steady)
/// when the appliance is idle; see [`status::light`](crate::status::light).
fn statuses(role: LedRole) -> Vec<Status> {
    match role {
        LedRole::Ready => vec![Status::Idle, Status::Timer, Status::Message],
        // Asking is listening too: the microphone is open for the answer.
        LedRole::Listening => vec![Status::Listening, Status::Asking],
        LedRole::Thinking => vec![Status::Transcribing, Status::Pairing, Status::Message],
        // A ringing timer is sound too; it blinks.
        LedRole::Speaking => vec![Status::Speaking, Status::Ringing],
        LedRole::Muted => vec![Status::Muted],
        LedRole::Error => vec![Status::Error],
    }
}

/// A button: its classifier, its events forwarded as board events.
fn spawn_button(
    levels: mpsc::Receiver<Level>,
    events: mpsc::Sender<BoardEvent>,
    timing: ButtonTiming,
) -> JoinHandle<()> {
    spawn_classifier(levels, events, timing, |event| {
        Some(BoardEvent::Button(event))
    })
}

/// A switch: the same debounce as a button; closed is on.
fn spawn_switch(
    levels: mpsc::Receiver<Level>,
    events: mpsc::Sender<BoardEvent>,
    timing: ButtonTiming,
) -> JoinHandle<()> {
    spawn_classifier(levels, events, timing, |event| match event {
        ButtonEvent::Press => Some(BoardEvent::Mute(true)),
        ButtonEvent::Release => Some(BoardEvent::Mute(false)),
        ButtonEvent::LongPress | ButtonEvent::DoublePress => None,
    })
}

/// Classifies `levels` and forwards what `map` makes of each event.
fn spawn_classifier(
    levels: mpsc::Receiver<Level>,
    events: mpsc::Sender<BoardEvent>,
    timing: ButtonTiming,
    map: fn(ButtonEvent) -> Option<BoardEvent>,
) -> JoinHandle<()> {
    let (tx, mut rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let classify = button::run(levels, tx, timing);
        let forward = async {
            while let Some(event) = rx.recv().await {
                let Some(event) = map(event) else { continue };
                if events.send(event).await.is_err() {
                    break;
                }
            }
        };
        tokio::join!(classify, forward);
    })
}

/// A light pattern as the microcontroller protocol carries it (full
/// brightness: the colour already holds the level).
fn wire_pattern(pattern: Pattern) -> LedPattern {
    let wire = |Rgb(r, g, b): Rgb| WireRgb { r, g, b };
    let period = |ms: u32| u16::try_from(ms).unwrap_or(u16::MAX);
    match pattern {
        Pattern::Off => LedPattern::Off,
        Pattern::Solid { color } => LedPattern::Solid {
            color: wire(color),
            brightness: 255,
        },
        Pattern::Blink { color, period_ms } => LedPattern::Blink {
            color: wire(color),
            brightness: 255,
            period_ms: period(period_ms),
        },
        Pattern::Pulse { color, period_ms } => LedPattern::Pulse {
            color: wire(color),
            brightness: 255,
            period_ms: period(period_ms),
        },
        Pattern::Spin { color, period_ms } => LedPattern::Spin {
            color: wire(color),
            brightness: 255,
            period_ms: period(period_ms),
        },
        // Protocol 1.0 has no countdown to draw on the microcontroller's
        // ring: a running timer pulses slowly in its colour there.
        Pattern::Countdown { color, .. } => LedPattern::Pulse {
            color: wire(color),
            brightness: 255,
            period_ms: period(crate::led::COUNTDOWN_PULSE_MS),
        },
    }
}
