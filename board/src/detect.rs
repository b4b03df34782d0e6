//! Which board is this? `board = "auto"` in the daemon's config.
//!
//! Detection reads two files and nothing else, so it needs no permissions
//! and cannot disturb the hardware:
//!
//! - `/proc/device-tree/model`: the board's model, e.g. "Raspberry Pi 4
//!   Model B Rev 1.4" (NUL-terminated). Absent on x86 and on other machines
//!   without a device tree.
//! - `/proc/asound/cards`: the ALSA sound cards, two lines each:
//!
//!   ```text
//!    0 [seeed2micvoicec]: seeed-2mic-voic - seeed-2mic-voicecard
//!                         seeed-2mic-voicecard
//!   ```
//!
//!   (index, id in brackets padded to 15 characters, driver, name; then the
//!   long name). "--- no soundcards ---" when there are none.
//!
//! Each shipped profile's `[detect]` table says what identifies it: model
//! substrings and/or ALSA cards, every non-empty list needing a hit. A card
//! hit counts for more than a model hit, so a Pi with a ReSpeaker HAT gets
//! the HAT's profile and a bare Pi the generic one; a USB array's profile
//! names only cards, so it is found on any machine. A machine with no match
//! (no Raspberry Pi, no known card: a laptop, CI) gets the simulated board,
//! with the reason.
//!
//! The root is a parameter so tests run detection on fixture trees.
//!
//! ```no_run
//! use hark_board::detect::{detect, Detected};
//! match detect(std::path::Path::new("/"))? {
//!     Detected::Profile { profile, reason } => println!("board {}: {reason}", profile.name),
//!     Detected::Simulated { reason } => println!("simulated board: {reason}"),
//! }
//! # Ok::<(), hark_board::detect::DetectError>(())
//! ```

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::profile::{Profile, ProfileError};

/// The device-tree model file, relative to the root.
const MODEL_PATH: &str = "proc/device-tree/model";
/// The ALSA card list, relative to the root.
const CARDS_PATH: &str = "proc/asound/cards";
/// What every Raspberry Pi's device-tree model starts with ("Raspberry Pi 5
/// Model B Rev 1.0", "Raspberry Pi Zero 2 W Rev 1.0", "Raspberry Pi
/// Compute Module 4 Rev 1.0").
const PI_MODEL: &str = "Raspberry Pi";

/// The outcome of detection.
#[derive(Debug, Clone, PartialEq)]
pub enum Detected {
    /// A profile fits this machine.
    Profile {
        /// Boxed: a profile is large next to a reason string.
        profile: Box<Profile>,
        /// What matched, for the log: the model and the card.
        reason: String,
    },
    /// Nothing fits: run the simulated board.
    Simulated {
        /// Why, for a warning in the log.
        reason: String,
    },
}

/// Why detection or a profile check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// A file exists but could not be read (permissions, I/O). A missing
    /// file is not an error: it says what the machine lacks.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A shipped profile failed to parse (a build with a broken profile).
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A profile that drives GPIO, chosen by name, on a machine that is not
    /// a Raspberry Pi: it would only fail later, inside the GPIO library.
    #[error(
        "profile {profile} needs a Raspberry Pi's GPIO, but this machine is not a Raspberry Pi ({found}); use board = \"auto\" or a profile without GPIO, such as usb-mic-array"
    )]
    NotAPi {
        profile: String,
        /// What the model file said, or that it is missing.
        found: String,
    },
}

/// One line pair of `/proc/asound/cards`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlsaCard {
    /// Card number, as in `hw:1`.
    pub index: u32,
    /// Card id, as in `hw:CARD=seeed2micvoicec` (the bracketed name).
    pub id: String,
    /// Driver, e.g. "USB-Audio" (cut to 15 characters by the kernel).
    pub driver: String,
    /// Short name, e.g. "ReSpeaker 4 Mic Array (UAC1.0)".
    pub name: String,
    /// Long name (the second line), e.g. with the USB port.
    pub long_name: String,
}

impl AlsaCard {
    /// Whether a profile's card pattern names this card: the id exactly, or
    /// a substring of the name or long name, ignoring case.
    pub fn matches(&self, pattern: &str) -> bool {
        let pattern = pattern.to_lowercase();
        self.id.to_lowercase() == pattern
            || self.name.to_lowercase().contains(&pattern)
            || self.long_name.to_lowercase().contains(&pattern)
    }
}

/// What detection looks at, read from a root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The device-tree model without its trailing NUL; `None` when the file
    /// is missing.
    pub model: Option<String>,
    /// The ALSA cards; empty when there are none or no `/proc/asound`.
    pub cards: Vec<AlsaCard>,
    /// Where the model was looked for, for messages.
    pub model_path: PathBuf,
}

impl Machine {
    /// Reads the model and the card list under `root` (`/` on a real machine).
    pub fn probe(root: &Path) -> Result<Machine, DetectError> {
        let model_path = root.join(MODEL_PATH);
        let model = read_optional(&model_path)?.map(|bytes| {
            // The property is NUL-terminated; text after a NUL is not part
            // of the model.
            let text = bytes.split(|b| *b == 0).next().unwrap_or(&[]);
            String::from_utf8_lossy(text).trim().to_owned()
        });
        let cards = read_optional(&root.join(CARDS_PATH))?
            .map(|bytes| parse_asound_cards(&String::from_utf8_lossy(&bytes)))
            .unwrap_or_default();
        Ok(Machine {
            model,
            cards,
            model_path,
        })
    }

    /// The card a profile's audio uses on this machine: the first of its
    /// `audio.cards` patterns, in order, that names a card here.
    pub fn card_for(&self, profile: &Profile) -> Option<&AlsaCard> {
        profile
            .audio
            .cards
            .iter()
            .find_map(|pattern| self.cards.iter().find(|card| card.matches(pattern)))
    }

    /// Whether the device-tree model is a Raspberry Pi's.
    pub fn is_raspberry_pi(&self) -> bool {
        self.model.as_deref().is_some_and(|m| m.contains(PI_MODEL))
    }

    /// The model for messages: quoted, or where it was missing.
    fn describe_model(&self) -> String {
        match &self.model {
            Some(model) => format!("device-tree model {model:?}"),
            None => format!("no {}", self.model_path.display()),
        }
    }

    /// The cards for messages: "0 [PCH], 1 [ArrayUAC10]" or "none".
    fn describe_cards(&self) -> String {
        if self.cards.is_empty() {
            return "none".to_owned();
        }
        let mut text = String::new();
        for (n, card) in self.cards.iter().enumerate() {
            if n > 0 {
                text.push_str(", ");
            }
            // Writing to a String cannot fail.
            let _ = write!(text, "{} [{}]", card.index, card.id);
        }
        text
    }
}

/// Parses `/proc/asound/cards`. Lines that do not fit the format are
/// skipped: the file is the kernel's, and an odd line should not hide the
/// cards around it.
pub fn parse_asound_cards(text: &str) -> Vec<AlsaCard> {
    let mut cards: Vec<AlsaCard> = Vec::new();
    let mut last_was_header = false;
    for line in text.lines() {
        if let Some(card) = parse_card_header(line) {
            cards.push(card);
            last_was_header = true;
            continue;
        }
        // The long name is the indented line right after a card's header.
        if last_was_header
            && line.starts_with(' ')
            && let Some(card) = cards.last_mut()
        {
            card.long_name = line.trim().to_owned();
        }
        last_was_header = false;
    }
    cards
}

/// ` 0 [seeed2micvoicec]: seeed-2mic-voic - seeed-2mic-voicecard`
fn parse_card_header(line: &str) -> Option<AlsaCard> {
    let (index, rest) = line.trim_start().split_once(' ')?;
    let index = index.parse().ok()?;
    let rest = rest.trim_start().strip_prefix('[')?;
    let (id, rest) = rest.split_once(']')?;
    let rest = rest.strip_prefix(':')?;
    let (driver, name) = rest.split_once(" - ").unwrap_or((rest, ""));
    Some(AlsaCard {
        index,
        id: id.trim().to_owned(),
        driver: driver.trim().to_owned(),
        name: name.trim().to_owned(),
        long_name: String::new(),
    })
}

/// Detects the board under `root` among the shipped profiles.
pub fn detect(root: &Path) -> Result<Detected, DetectError> {
    let machine = Machine::probe(root)?;
    let profiles = Profile::builtins()?;
    Ok(detect_among(&machine, &profiles))
}

/// Picks the profile that fits `machine` best among `profiles` (earlier
/// wins a tie), or the simulated board.
pub fn detect_among(machine: &Machine, profiles: &[Profile]) -> Detected {
    let mut best: Option<(u8, &Profile, String)> = None;
    // A HAT's card on a machine that is not a Pi (another board with the
    // same overlay) is worth telling the user about.
    let mut near_miss: Option<String> = None;
    for profile in profiles {
        let detect = &profile.detect;
        if detect.models.is_empty() && detect.cards.is_empty() {
            continue;
        }
        let model = machine.model.as_deref();
        let model_hit = detect
            .models
            .iter()
            .find(|pattern| model.is_some_and(|m| m.contains(pattern.as_str())));
        let card_hit = machine
            .cards
            .iter()
            .find(|card| detect.cards.iter().any(|pattern| card.matches(pattern)));
        let model_ok = detect.models.is_empty() || model_hit.is_some();
        let cards_ok = detect.cards.is_empty() || card_hit.is_some();
        if !model_ok {
            if let Some(card) = card_hit
                && near_miss.is_none()
            {
                near_miss = Some(format!(
                    "ALSA card {} [{}] fits profile {}, which needs a {} ({})",
                    card.index,
                    card.id,
                    profile.name,
                    detect.models.join(" or "),
                    machine.describe_model()
                ));
            }
            continue;
        }
        if !cards_ok {
            continue;
        }
        let score = 2 * u8::from(card_hit.is_some()) + u8::from(model_hit.is_some());
        if best.as_ref().is_some_and(|(best, _, _)| *best >= score) {
            continue;
        }
        let mut reason = match &machine.model {
            Some(model) if model_hit.is_some() => model.clone(),
            _ => machine.describe_model(),
        };
        match card_hit {
            Some(card) => {
                let _ = write!(reason, " with ALSA card {} [{}]", card.index, card.id);
                if !card.name.is_empty() {
                    let _ = write!(reason, " ({})", card.name);
                }
            }
            None => {
                let _ = write!(
                    reason,
                    ", no known HAT or USB array (ALSA cards: {})",
                    machine.describe_cards()
                );
            }
        }
        best = Some((score, profile, reason));
    }
    match best {
        Some((_, profile, reason)) => Detected::Profile {
            profile: Box::new(profile.clone()),
            reason,
        },
        None => {
            let mut reason = format!(
                "not a Raspberry Pi ({}) and no known sound card (ALSA cards: {})",
                machine.describe_model(),
                machine.describe_cards()
            );
            if let Some(near_miss) = near_miss {
                let _ = write!(reason, "; {near_miss}");
            }
            Detected::Simulated { reason }
        }
    }
}

/// Checks that a profile chosen by name can run here: one that drives GPIO
/// needs a Raspberry Pi. Said at start-up, with the profile's name, rather
/// than as an error from the GPIO library later. A missing sound card is
/// not checked: a USB card can be plugged in later, and the audio engine
/// reports it.
pub fn check_explicit(profile: &Profile, machine: &Machine) -> Result<(), DetectError> {
    if !profile.needs_pi_header() || machine.is_raspberry_pi() {
        return Ok(());
    }
    Err(DetectError::NotAPi {
        profile: profile.name.clone(),
        found: machine.describe_model(),
    })
}

/// The file's bytes, or `None` when it (or its directory) does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, DetectError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DetectError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}
