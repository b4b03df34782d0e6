//! Board profiles: the hardware Hark runs on, described as data.
//!
//! A profile is a TOML file naming which GPIO the push-to-talk button and
//! the mute switch are on, which LEDs the board has (plain GPIO LEDs or an
//! APA102 ring on SPI), which ALSA card captures the microphones, where the
//! microphones sit (the beamformer needs their geometry), an optional UART
//! link to a microcontroller, and how to recognise the board when the
//! daemon's config says `board = "auto"` (see [`crate::detect`]).
//!
//! The shipped profiles live in `board/profiles/*.toml` and are compiled in
//! ([`Profile::builtin`], [`Profile::builtins`]); a user profile is any file
//! in the same format ([`Profile::load`]). [`Profile::open`] takes either, the
//! way the daemon's `board = "…"` setting does.
//!
//! ```
//! let profile = hark_board::profile::Profile::builtin("respeaker-2mic")?;
//! assert_eq!(profile.button.map(|b| b.pin), Some(17));
//! # Ok::<(), hark_board::profile::ProfileError>(())
//! ```
//!
//! # What the hardware needs
//!
//! Pins are BCM GPIO numbers on the 40-pin header (0–27), not physical pin
//! numbers. The daemon's user must be in the `gpio` group for
//! `/dev/gpiochip*`, in `spi` for `/dev/spidev*` (APA102 rings; enable SPI
//! with `dtparam=spi=on` in `config.txt`) and in `dialout` for a UART link.
//! An I2S sound HAT needs its device-tree overlay (the profile's
//! `detect.overlay` says which); it then owns the I2S pins (GPIO 18–21) and
//! usually I2C1 (GPIO 2–3) for its codec, which the profile lists in
//! `audio.header_pins` so nothing else is put on them.
//!
//! # Validation
//!
//! Parsing is strict: an unknown key, a missing key or a value of the wrong
//! type is an error naming the key and the line. After parsing, [`Profile::validate`]
//! checks what TOML cannot: pins on the header, no GPIO used twice, nothing
//! on the pins of the SPI bus that drives the LEDs, LED counts and
//! brightness in range, finite microphone positions, enough capture
//! channels for the microphones.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// BCM GPIO numbers on the 40-pin header. GPIO 28 and up exist on the SoC
/// but are not on the header (or not on every model), so a profile using
/// them is a typo or a board we cannot drive.
pub const HEADER_GPIO: RangeInclusive<u8> = 0..=27;

/// APA102 global brightness: a 5-bit field in each LED frame.
pub const APA102_BRIGHTNESS: RangeInclusive<u8> = 0..=31;

/// SPI clock for an LED ring, Hz. APA102s are specified to about 20 MHz;
/// the upper bound leaves room for clones and long wires are the user's call.
pub const SPI_CLOCK_HZ: RangeInclusive<u32> = 1_000..=32_000_000;

/// Audio sample rates a profile may ask for, Hz.
pub const SAMPLE_RATE_HZ: RangeInclusive<u32> = 8_000..=192_000;

/// Channel counts a profile may ask for (ALSA allows more; no voice board does).
pub const CHANNELS: RangeInclusive<u16> = 0..=32;

/// UART baud rates a link may use.
pub const BAUD: RangeInclusive<u32> = 300..=4_000_000;

/// The shipped profiles, by name. The file name is the profile name, which
/// the tests check, so `board = "respeaker-2mic"` and the file agree.
const BUILTINS: &[(&str, &str)] = &[
    ("generic-pi", include_str!("../profiles/generic-pi.toml")),
    (
        "respeaker-2mic",
        include_str!("../profiles/respeaker-2mic.toml"),
    ),
    (
        "respeaker-4mic",
        include_str!("../profiles/respeaker-4mic.toml"),
    ),
    (
        "usb-mic-array",
        include_str!("../profiles/usb-mic-array.toml"),
    ),
];

/// The GPIO of SPI0 and SPI1 on the header, with their functions. When the
/// bus is enabled (`dtparam=spi=on`, the `spi1-*` overlays) the kernel
/// claims all of them, chip selects included, whichever one a device uses.
const SPI0_PINS: &[(u8, &str)] = &[
    (7, "SPI0 CE1"),
    (8, "SPI0 CE0"),
    (9, "SPI0 MISO"),
    (10, "SPI0 MOSI"),
    (11, "SPI0 SCLK"),
];
const SPI1_PINS: &[(u8, &str)] = &[
    (16, "SPI1 CE2"),
    (17, "SPI1 CE1"),
    (18, "SPI1 CE0"),
    (19, "SPI1 MISO"),
    (20, "SPI1 MOSI"),
    (21, "SPI1 SCLK"),
];

/// Device nodes of the header's UART (GPIO 14 TXD, GPIO 15 RXD). A link on
/// one of these takes the two pins; a USB serial adapter takes none.
const HEADER_UART_DEVICES: &[&str] = &["/dev/serial0", "/dev/ttyAMA0", "/dev/ttyS0"];
const HEADER_UART_PINS: [u8; 2] = [14, 15];

/// One board: its inputs, lights, sound card, microphone geometry and how to
/// recognise it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name, lowercase letters, digits and `-` (`respeaker-2mic`):
    /// what `board = "…"` in the daemon's config names.
    pub name: String,
    /// One line for people: the product and what is on it.
    pub description: String,
    /// Microphone positions `[x, y, z]` in metres, relative to the centre of
    /// the array, in the order of [`Audio::mic_channels`] (by default the
    /// first capture channels). x to the right and y away from the viewer
    /// when looking down on the board with its header at the top; z up.
    /// At least one; a single microphone is `[[0.0, 0.0, 0.0]]`.
    pub mics: Vec<[f64; 3]>,
    /// The GPIO chip whose lines the pin numbers below are: a chip's label
    /// (`pinctrl-bcm2711`), its name (`gpiochip0`) or its path
    /// (`/dev/gpiochip0`). Absent: the Raspberry Pi header's chip, found by
    /// its label (see [`crate::gpio`]). Lines are taken by offset, which on
    /// every Pi is the BCM number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpio_chip: Option<String>,
    /// The push-to-talk button: a momentary input. Absent: no button.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button: Option<InputPin>,
    /// Status lights. Absent: none.
    #[serde(default)]
    pub leds: Leds,
    /// The microphone mute switch: a latching input (a switch, not a
    /// button), "muted" while it reads active. Absent: no switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mute: Option<InputPin>,
    /// The sound card and its formats.
    pub audio: Audio,
    /// UART link to a microcontroller, for builds that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    /// How `board = "auto"` recognises this board. Absent: never detected,
    /// only chosen by name.
    #[serde(default)]
    pub detect: Detect,
}

/// A GPIO input: the button or the mute switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputPin {
    /// BCM GPIO number, 0–27.
    pub pin: u8,
    /// `true` when pressed (or muted) reads low: a contact to ground, the
    /// usual wiring with a pull-up.
    pub active_low: bool,
    /// The SoC's internal pull resistor on this pin.
    pub pull: Pull,
}

/// Internal pull resistor of a GPIO input (about 50 kΩ on a Pi).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pull {
    /// Pull up to 3.3 V: for a contact to ground (`active_low = true`).
    Up,
    /// Pull down to ground: for a contact to 3.3 V (`active_low = false`).
    Down,
    /// No pull: the board has its own resistor.
    None,
}

/// The board's status lights, `type = "none" | "gpio" | "apa102"`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
// Read through a flat table rather than serde's internally tagged enums,
// which buffer the table and so lose the path of an error inside it
// (`leds.pins[0].role` would be reported as `leds`).
#[serde(tag = "type", rename_all = "lowercase", try_from = "LedsTable")]
pub enum Leds {
    /// No lights Hark can drive (`type = "none"`).
    #[default]
    None,
    /// One LED per role, each on its own GPIO (`type = "gpio"`).
    Gpio(GpioLeds),
    /// A chain of APA102 RGB LEDs on SPI (`type = "apa102"`).
    Apa102(Apa102Ring),
}

/// The `[leds]` table as written: every key of every type, sorted out by
/// `TryFrom` so that a key of another type is reported as unknown.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LedsTable {
    #[serde(rename = "type")]
    kind: LedsType,
    pins: Option<Vec<GpioLed>>,
    spi_bus: Option<u8>,
    chip_select: Option<u8>,
    count: Option<u16>,
    max_clock_hz: Option<u32>,
    brightness: Option<u8>,
    power_pin: Option<u8>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum LedsType {
    None,
    Gpio,
    Apa102,
}

impl TryFrom<LedsTable> for Leds {
    // serde turns this into its own error; the text follows serde's
    // "unknown field `x`" / "missing field `x`" wording so that the error
    // is reported like any other unknown or missing key.
    type Error = String;

    fn try_from(table: LedsTable) -> Result<Leds, String> {
        let LedsTable {
            kind,
            pins,
            spi_bus,
            chip_select,
            count,
            max_clock_hz,
            brightness,
            power_pin,
        } = table;
        let gpio_keys = [("pins", pins.is_some())];
        let ring_keys = [
            ("spi_bus", spi_bus.is_some()),
            ("chip_select", chip_select.is_some()),
            ("count", count.is_some()),
            ("max_clock_hz", max_clock_hz.is_some()),
            ("brightness", brightness.is_some()),
            ("power_pin", power_pin.is_some()),
        ];
        let stray = |keys: &[(&'static str, bool)], kind: &str, expected: &str| {
            keys.iter().find(|(_, present)| *present).map(|(key, _)| {
                format!("unknown field `{key}`, expected {expected} (for type = \"{kind}\")")
            })
        };
        let missing = |key: &str| format!("missing field `{key}`");
        match kind {
            LedsType::None => {
                let all: Vec<_> = gpio_keys.iter().chain(&ring_keys).copied().collect();
                match stray(&all, "none", "only `type`") {
                    Some(error) => Err(error),
                    None => Ok(Leds::None),
                }
            }
            LedsType::Gpio => {
                if let Some(error) = stray(&ring_keys, "gpio", "`type` or `pins`") {
                    return Err(error);
                }
                Ok(Leds::Gpio(GpioLeds {
                    pins: pins.ok_or_else(|| missing("pins"))?,
                }))
            }
            LedsType::Apa102 => {
                let expected = "one of `type`, `spi_bus`, `chip_select`, `count`, `max_clock_hz`, `brightness`, `power_pin`";
                if let Some(error) = stray(&gpio_keys, "apa102", expected) {
                    return Err(error);
                }
                Ok(Leds::Apa102(Apa102Ring {
                    spi_bus: spi_bus.ok_or_else(|| missing("spi_bus"))?,
                    chip_select: chip_select.ok_or_else(|| missing("chip_select"))?,
                    count: count.ok_or_else(|| missing("count"))?,
                    max_clock_hz: max_clock_hz.ok_or_else(|| missing("max_clock_hz"))?,
                    brightness: brightness.ok_or_else(|| missing("brightness"))?,
                    power_pin,
                }))
            }
        }
    }
}

/// LEDs on plain GPIO outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpioLeds {
    /// The LEDs, at least one.
    pub pins: Vec<GpioLed>,
}

/// One LED on a GPIO output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpioLed {
    /// What the LED shows.
    pub role: LedRole,
    /// BCM GPIO number, 0–27.
    pub pin: u8,
    /// `true` when the LED lights with the pin low (LED to 3.3 V, a sinking
    /// driver); `false` for an LED and resistor from the pin to ground.
    pub active_low: bool,
}

/// What a single-colour LED shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LedRole {
    /// The daemon is up and idle.
    Ready,
    /// The microphone is open for an agent.
    Listening,
    /// Speech is being transcribed.
    Thinking,
    /// The speaker is playing.
    Speaking,
    /// The mute switch is on.
    Muted,
    /// Something needs attention (a device failed, a model is missing).
    Error,
}

/// An APA102 ("DotStar") chain on one of the header's SPI buses. The LEDs
/// only use MOSI and SCLK; the chip select names the `spidev` node
/// (`/dev/spidev{spi_bus}.{chip_select}`) the kernel drives the bus through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Apa102Ring {
    /// SPI bus: 0 (GPIO 7–11) or 1 (GPIO 16–21).
    pub spi_bus: u8,
    /// Chip select: 0 or 1 on SPI0, 0–2 on SPI1.
    pub chip_select: u8,
    /// Number of LEDs in the chain, at least 1.
    pub count: u16,
    /// Highest SPI clock to use, Hz (1 kHz–32 MHz).
    pub max_clock_hz: u32,
    /// Global brightness, 0–31 (the APA102's 5-bit current setting): the
    /// ceiling for every colour the daemon shows.
    pub brightness: u8,
    /// GPIO that switches the LEDs' power on when driven high, for boards
    /// that gate it (the ReSpeaker 4-Mic Array: GPIO 5). Absent: always powered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_pin: Option<u8>,
}

/// The sound card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Audio {
    /// ALSA cards to use, best first. Each entry matches a card whose id
    /// (the name in brackets in `/proc/asound/cards`, as in
    /// `hw:CARD=seeed2micvoicec`) equals it, or whose name or long name
    /// contains it, ignoring case. Empty: the system's default card.
    #[serde(default)]
    pub cards: Vec<String>,
    /// Channels to capture, 1–32: at least one per microphone. A card may
    /// deliver more (a processed channel, a playback reference).
    pub capture_channels: u16,
    /// Playback channels, 0–32. 0: the card has no output, and speech plays
    /// on the system's default card.
    pub playback_channels: u16,
    /// Sample rate for capture and playback, Hz (8000–192000).
    pub rate: u32,
    /// Capture channel (0-based) of each microphone in `mics`, for cards
    /// whose microphones are not the first channels. Absent: channel i is
    /// microphone i.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mic_channels: Option<Vec<u16>>,
    /// GPIO the sound card itself uses (I2S: 18–21; I2C1 for the codec: 2,
    /// 3), so that no button or LED is put on them. Empty for USB cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub header_pins: Vec<u8>,
}

/// A serial link to a microcontroller (see `crate::link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Serial device, an absolute path: `/dev/serial0` (the header's UART,
    /// GPIO 14 and 15) or a USB adapter such as `/dev/ttyACM0`.
    pub device: PathBuf,
    /// Baud rate, bits per second (300–4000000).
    pub baud: u32,
}

/// How automatic detection recognises the board (see [`crate::detect`]).
/// A profile matches when every list that is not empty has a hit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detect {
    /// Substrings of the device-tree model (`/proc/device-tree/model`,
    /// e.g. "Raspberry Pi 4 Model B Rev 1.4"), any of which must be there.
    #[serde(default)]
    pub models: Vec<String>,
    /// ALSA cards, matched as in [`Audio::cards`], any of which must be there.
    #[serde(default)]
    pub cards: Vec<String>,
    /// For people: the device-tree overlay or driver the board needs
    /// (`config.txt` lines, where to get the driver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<String>,
}

/// Why a profile cannot be used. Every variant names the profile (its name,
/// or the file it came from) and the offending field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file could not be read: missing, or no permission.
    #[error("board profile {profile}: cannot read {}: {source}", path.display())]
    Read {
        profile: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not TOML.
    #[error(
        "board profile {profile}: TOML syntax error at line {line}, column {column}: {message}"
    )]
    Syntax {
        profile: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A key the format does not have (often a typo).
    #[error(
        "board profile {profile}: unknown field `{field}` at line {line}, column {column}; expected {expected}"
    )]
    UnknownField {
        profile: String,
        /// Dotted path of the key, e.g. `button.pins`.
        field: String,
        line: usize,
        column: usize,
        /// The keys allowed there.
        expected: String,
    },
    /// A required key is not there.
    #[error("board profile {profile}: missing field `{field}`")]
    MissingField {
        profile: String,
        /// Dotted path of the key, e.g. `button.pin`.
        field: String,
    },
    /// A value of the wrong type or an unknown choice (`pull = "sideways"`).
    #[error("board profile {profile}: `{field}` at line {line}, column {column}: {message}")]
    InvalidValue {
        profile: String,
        field: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A GPIO number that is not on the 40-pin header.
    #[error("board profile {profile}: {field} = {pin} is not a GPIO on the 40-pin header (BCM {}–{})", HEADER_GPIO.start(), HEADER_GPIO.end())]
    PinOutOfRange {
        profile: String,
        field: String,
        pin: u8,
    },
    /// Two functions on one GPIO.
    #[error("board profile {profile}: GPIO {pin} is used twice, by {first} and by {second}")]
    DuplicatePin {
        profile: String,
        pin: u8,
        first: String,
        second: String,
    },
    /// A plain pin on a GPIO that the LEDs' SPI bus claims.
    #[error(
        "board profile {profile}: {field} = GPIO {pin} is {function}, which the APA102 LEDs' bus claims (leds.spi_bus = {bus}: GPIO {bus_pins}); use another pin"
    )]
    SpiPinConflict {
        profile: String,
        field: String,
        pin: u8,
        /// The pin's SPI function, e.g. "SPI0 CE0".
        function: &'static str,
        bus: u8,
        /// The bus's pins, e.g. "7–11".
        bus_pins: &'static str,
    },
    /// An APA102 chain of no LEDs.
    #[error(
        "board profile {profile}: leds.count is 0; an APA102 chain needs at least one LED (or use leds.type = \"none\")"
    )]
    ZeroLedCount { profile: String },
    /// APA102 brightness above its 5 bits.
    #[error("board profile {profile}: leds.brightness = {value} is out of range {}–{} (the APA102's 5-bit global brightness)", APA102_BRIGHTNESS.start(), APA102_BRIGHTNESS.end())]
    Brightness { profile: String, value: u8 },
    /// `mics = []`.
    #[error(
        "board profile {profile}: mics is empty; give at least one microphone position (a single microphone is [[0.0, 0.0, 0.0]])"
    )]
    NoMics { profile: String },
    /// A microphone coordinate that is NaN or infinite.
    #[error(
        "board profile {profile}: mics[{index}] = {position:?} is not a finite position in metres"
    )]
    MicPosition {
        profile: String,
        index: usize,
        position: [f64; 3],
    },
    /// Fewer capture channels than microphones.
    #[error(
        "board profile {profile}: audio.capture_channels = {capture_channels} is fewer than the {mics} microphones in mics"
    )]
    TooFewChannels {
        profile: String,
        capture_channels: u16,
        mics: usize,
    },
    /// Any other value out of its range; `reason` says the range.
    #[error("board profile {profile}: {field}: {reason}")]
    Invalid {
        profile: String,
        field: String,
        reason: String,
    },
    /// `Profile::builtin` with a name that is not shipped.
    #[error("no board profile named {name:?}; the shipped ones are {known}")]
    UnknownBuiltin { name: String, known: String },
}

impl Profile {
    /// Parses and validates a profile from TOML text. `source` names it in
    /// errors: the profile's name for a shipped one, the path for a file.
    pub fn from_toml(source: &str, text: &str) -> Result<Profile, ProfileError> {
        // Syntax first, apart from the fields: a syntax error has no field
        // to name, and the parser's own message is the useful one.
        let deserializer = toml::Deserializer::parse(text).map_err(|error| {
            let (line, column) = position(text, error.span());
            ProfileError::Syntax {
                profile: source.to_owned(),
                line,
                column,
                message: error.message().trim().to_owned(),
            }
        })?;
        // serde_path_to_error tracks the dotted path of the value being
        // decoded, which serde's own errors leave out.
        let profile: Profile = serde_path_to_error::deserialize(deserializer)
            .map_err(|error| field_error(source, text, error))?;
        profile.validate(source)?;
        Ok(profile)
    }

    /// Reads, parses and validates a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ProfileError::Read {
            profile: source.clone(),
            path: path.to_owned(),
            source: error,
        })?;
        Profile::from_toml(&source, &text)
    }

    /// A shipped profile by name (`generic-pi`, `respeaker-2mic`,
    /// `respeaker-4mic`, `usb-mic-array`).
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let (name, text) = BUILTINS
            .iter()
            .find(|(builtin, _)| *builtin == name)
            .ok_or_else(|| ProfileError::UnknownBuiltin {
                name: name.to_owned(),
                known: Profile::builtin_names().collect::<Vec<_>>().join(", "),
            })?;
        Profile::from_toml(name, text)
    }

    /// Every shipped profile, in detection order.
    pub fn builtins() -> Result<Vec<Profile>, ProfileError> {
        BUILTINS
            .iter()
            .map(|(name, text)| Profile::from_toml(name, text))
            .collect()
    }

    /// Names of the shipped profiles.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTINS.iter().map(|(name, _)| *name)
    }

    /// What `board = "…"` names: a shipped profile's name, or the path of a
    /// profile file (anything with a `/` or ending in `.toml`).
    pub fn open(spec: &str) -> Result<Profile, ProfileError> {
        if spec.contains('/') || spec.ends_with(".toml") {
            Profile::load(Path::new(spec))
        } else {
            Profile::builtin(spec)
        }
    }

    /// The profile as TOML, in the format [`Profile::from_toml`] reads.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// Every GPIO the profile uses as a plain pin, with the field that uses
    /// it (`button.pin`, `leds.pins[0].pin`, …), in field order. The pins
    /// of an SPI bus driving an LED ring are not listed: see
    /// [`Profile::spi_pins`].
    pub fn gpio_pins(&self) -> Vec<(u8, String)> {
        let mut pins = Vec::new();
        if let Some(button) = &self.button {
            pins.push((button.pin, "button.pin".to_owned()));
        }
        match &self.leds {
            Leds::None => {}
            Leds::Gpio(leds) => {
                for (index, led) in leds.pins.iter().enumerate() {
                    pins.push((led.pin, format!("leds.pins[{index}].pin")));
                }
            }
            Leds::Apa102(ring) => {
                if let Some(pin) = ring.power_pin {
                    pins.push((pin, "leds.power_pin".to_owned()));
                }
            }
        }
        if let Some(mute) = &self.mute {
            pins.push((mute.pin, "mute.pin".to_owned()));
        }
        for (index, pin) in self.audio.header_pins.iter().enumerate() {
            pins.push((*pin, format!("audio.header_pins[{index}]")));
        }
        if let Some(link) = &self.link
            && link.uses_header_uart()
        {
            pins.push((HEADER_UART_PINS[0], "link.device (UART TXD)".to_owned()));
            pins.push((HEADER_UART_PINS[1], "link.device (UART RXD)".to_owned()));
        }
        pins
    }

    /// The GPIO of the SPI bus that drives the LED ring, with their
    /// functions; empty without a ring.
    pub fn spi_pins(&self) -> &'static [(u8, &'static str)] {
        match &self.leds {
            Leds::Apa102(ring) => spi_bus_pins(ring.spi_bus).map_or(&[], |(pins, _)| pins),
            _ => &[],
        }
    }

    /// Whether the profile takes GPIO lines (a button, a switch, LEDs on
    /// lines, an LED ring's power line): then it needs a GPIO chip.
    pub fn gpio_lines(&self) -> bool {
        self.button.is_some()
            || self.mute.is_some()
            || matches!(&self.leds, Leds::Gpio(_))
            || matches!(&self.leds, Leds::Apa102(ring) if ring.power_pin.is_some())
    }

    /// Whether the board needs a Raspberry Pi's header: GPIO lines on the
    /// header's chip, a HAT's pins, an SPI LED ring or the header's UART. A
    /// USB microphone array does not, nor lines on a chip the profile names
    /// (`gpio_chip`: an expander, or the test boot's simulated chip).
    pub fn needs_pi_header(&self) -> bool {
        (self.gpio_lines() && self.gpio_chip.is_none())
            || !self.audio.header_pins.is_empty()
            || matches!(self.leds, Leds::Apa102(_))
            || self.link.as_ref().is_some_and(Link::uses_header_uart)
    }

    /// Checks what the TOML types cannot. `source` names the profile in
    /// errors, as in [`Profile::from_toml`].
    pub fn validate(&self, source: &str) -> Result<(), ProfileError> {
        let profile = || source.to_owned();
        let invalid = |field: &str, reason: String| ProfileError::Invalid {
            profile: profile(),
            field: field.to_owned(),
            reason,
        };

        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(invalid(
                "name",
                format!(
                    "{:?} is not a profile name (lowercase letters, digits and -)",
                    self.name
                ),
            ));
        }

        if let Some(chip) = &self.gpio_chip
            && chip.trim().is_empty()
        {
            return Err(invalid(
                "gpio_chip",
                "is empty; name a chip (label, gpiochipN or /dev/gpiochipN) or leave it out".into(),
            ));
        }

        // Every pin on the header before anything else, so a typo such as
        // 170 is reported as such rather than as a clash.
        let pins = self.gpio_pins();
        for (pin, field) in &pins {
            if !HEADER_GPIO.contains(pin) {
                return Err(ProfileError::PinOutOfRange {
                    profile: profile(),
                    field: field.clone(),
                    pin: *pin,
                });
            }
        }
        let mut owners: BTreeMap<u8, &str> = BTreeMap::new();
        for (pin, field) in &pins {
            if let Some(first) = owners.insert(*pin, field) {
                return Err(ProfileError::DuplicatePin {
                    profile: profile(),
                    pin: *pin,
                    first: first.to_owned(),
                    second: field.clone(),
                });
            }
        }

        match &self.leds {
            Leds::None => {}
            Leds::Gpio(leds) => {
                if leds.pins.is_empty() {
                    return Err(invalid(
                        "leds.pins",
                        "is empty; list at least one LED, or use leds.type = \"none\"".to_owned(),
                    ));
                }
            }
            Leds::Apa102(ring) => {
                let Some((bus_pins, bus_range)) = spi_bus_pins(ring.spi_bus) else {
                    return Err(invalid(
                        "leds.spi_bus",
                        format!(
                            "{} is not a header SPI bus Hark supports (0: GPIO 7–11, 1: GPIO 16–21)",
                            ring.spi_bus
                        ),
                    ));
                };
                let chip_selects = if ring.spi_bus == 0 { 2 } else { 3 };
                if ring.chip_select >= chip_selects {
                    return Err(invalid(
                        "leds.chip_select",
                        format!(
                            "{} is out of range 0–{} for SPI{}",
                            ring.chip_select,
                            chip_selects - 1,
                            ring.spi_bus
                        ),
                    ));
                }
                for (pin, field) in &pins {
                    if let Some((_, function)) = bus_pins.iter().find(|(bus_pin, _)| bus_pin == pin)
                    {
                        return Err(ProfileError::SpiPinConflict {
                            profile: profile(),
                            field: field.clone(),
                            pin: *pin,
                            function,
                            bus: ring.spi_bus,
                            bus_pins: bus_range,
                        });
                    }
                }
                if ring.count == 0 {
                    return Err(ProfileError::ZeroLedCount { profile: profile() });
                }
                if !APA102_BRIGHTNESS.contains(&ring.brightness) {
                    return Err(ProfileError::Brightness {
                        profile: profile(),
                        value: ring.brightness,
                    });
                }
                if !SPI_CLOCK_HZ.contains(&ring.max_clock_hz) {
                    return Err(invalid(
                        "leds.max_clock_hz",
                        format!(
                            "{} Hz is out of range {}–{} Hz",
                            ring.max_clock_hz,
                            SPI_CLOCK_HZ.start(),
                            SPI_CLOCK_HZ.end()
                        ),
                    ));
                }
            }
        }

        if self.mics.is_empty() {
            return Err(ProfileError::NoMics { profile: profile() });
        }
        for (index, position) in self.mics.iter().enumerate() {
            if !position.iter().all(|c| c.is_finite()) {
                return Err(ProfileError::MicPosition {
                    profile: profile(),
                    index,
                    position: *position,
                });
            }
            // Two microphones in one place is a copy-paste slip, and would
            // make the beamformer's geometry singular.
            if let Some(first) = self.mics[..index].iter().position(|p| p == position) {
                return Err(invalid(
                    &format!("mics[{index}]"),
                    format!("{position:?} is the same position as mics[{first}]"),
                ));
            }
        }

        let audio = &self.audio;
        for (field, value) in [
            ("audio.capture_channels", audio.capture_channels),
            ("audio.playback_channels", audio.playback_channels),
        ] {
            if !CHANNELS.contains(&value) {
                return Err(invalid(
                    field,
                    format!(
                        "{value} is out of range {}–{}",
                        CHANNELS.start(),
                        CHANNELS.end()
                    ),
                ));
            }
        }
        if usize::from(audio.capture_channels) < self.mics.len() {
            return Err(ProfileError::TooFewChannels {
                profile: profile(),
                capture_channels: audio.capture_channels,
                mics: self.mics.len(),
            });
        }
        if !SAMPLE_RATE_HZ.contains(&audio.rate) {
            return Err(invalid(
                "audio.rate",
                format!(
                    "{} Hz is out of range {}–{} Hz",
                    audio.rate,
                    SAMPLE_RATE_HZ.start(),
                    SAMPLE_RATE_HZ.end()
                ),
            ));
        }
        if let Some(channels) = &audio.mic_channels {
            if channels.len() != self.mics.len() {
                return Err(invalid(
                    "audio.mic_channels",
                    format!(
                        "lists {} channels for the {} microphones in mics",
                        channels.len(),
                        self.mics.len()
                    ),
                ));
            }
            for (index, channel) in channels.iter().enumerate() {
                let field = format!("audio.mic_channels[{index}]");
                if *channel >= audio.capture_channels {
                    return Err(invalid(
                        &field,
                        format!(
                            "channel {channel} is not among the {} capture channels (0–{})",
                            audio.capture_channels,
                            audio.capture_channels - 1
                        ),
                    ));
                }
                if let Some(first) = channels[..index].iter().position(|c| c == channel) {
                    return Err(invalid(
                        &field,
                        format!("channel {channel} is already audio.mic_channels[{first}]"),
                    ));
                }
            }
        }
        for (field, names) in [
            ("audio.cards", &audio.cards),
            ("detect.models", &self.detect.models),
            ("detect.cards", &self.detect.cards),
        ] {
            if let Some(index) = names.iter().position(|n| n.trim().is_empty()) {
                // An empty pattern would match every card or model.
                return Err(invalid(
                    &format!("{field}[{index}]"),
                    "is empty, which would match anything".to_owned(),
                ));
            }
        }

        if let Some(link) = &self.link {
            if !link.device.is_absolute() {
                return Err(invalid(
                    "link.device",
                    format!(
                        "{} is not an absolute path such as /dev/serial0",
                        link.device.display()
                    ),
                ));
            }
            if !BAUD.contains(&link.baud) {
                return Err(invalid(
                    "link.baud",
                    format!(
                        "{} is out of range {}–{} baud",
                        link.baud,
                        BAUD.start(),
                        BAUD.end()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Link {
    /// Whether the device is the header's UART (GPIO 14 and 15).
    pub fn uses_header_uart(&self) -> bool {
        HEADER_UART_DEVICES
            .iter()
            .any(|device| self.device == Path::new(device))
    }
}

impl fmt::Display for LedRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LedRole::Ready => "ready",
            LedRole::Listening => "listening",
            LedRole::Thinking => "thinking",
            LedRole::Speaking => "speaking",
            LedRole::Muted => "muted",
            LedRole::Error => "error",
        })
    }
}

/// The pins of a header SPI bus and their range as text.
fn spi_bus_pins(bus: u8) -> Option<(&'static [(u8, &'static str)], &'static str)> {
    match bus {
        0 => Some((SPI0_PINS, "7–11")),
        1 => Some((SPI1_PINS, "16–21")),
        _ => None,
    }
}

/// 1-based line and column of a byte offset, for messages people can act on.
fn position(text: &str, span: Option<std::ops::Range<usize>>) -> (usize, usize) {
    let offset = span.map_or(0, |span| span.start).min(text.len());
    // The span comes from the parser and is a char boundary, but a slice
    // must not panic if it ever is not.
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}

/// Turns a decoding error into the variant that names its field. serde
/// reports unknown and missing fields only as message text, so the text is
/// read; anything else keeps serde's message.
fn field_error(
    source: &str,
    text: &str,
    error: serde_path_to_error::Error<toml::de::Error>,
) -> ProfileError {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let message = inner.message().trim().to_owned();
    let (line, column) = position(text, inner.span());
    // The path of an unknown key already ends in the key (the path tracker
    // sees the key it ignores); the path of a missing one is its table.
    let within = |key: &str| {
        if path == "." || path.is_empty() {
            key.to_owned()
        } else if path == key || path.ends_with(&format!(".{key}")) {
            path.clone()
        } else {
            format!("{path}.{key}")
        }
    };
    if let Some(rest) = message.strip_prefix("unknown field ")
        && let Some(key) = backquoted(rest)
    {
        let expected = rest
            .split_once(", expected ")
            .map_or("no fields here", |(_, expected)| expected)
            .to_owned();
        return ProfileError::UnknownField {
            profile: source.to_owned(),
            field: within(key),
            line,
            column,
            expected,
        };
    }
    if let Some(rest) = message.strip_prefix("missing field ")
        && let Some(key) = backquoted(rest)
    {
        return ProfileError::MissingField {
            profile: source.to_owned(),
            field: within(key),
        };
    }
    ProfileError::InvalidValue {
        profile: source.to_owned(),
        field: if path == "." {
            "(top level)".to_owned()
        } else {
            path
        },
        line,
        column,
        message,
    }
}

/// The text between the first pair of backquotes.
fn backquoted(text: &str) -> Option<&str> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(&text[start..start + len])
}
