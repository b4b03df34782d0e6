//! GPIO through the kernel's character device (`/dev/gpiochipN`, uAPI v2):
//! buttons and switches on input lines with edge events, LEDs and power
//! switches on output lines.
//!
//! Every current kernel has the character device, Debian's and Raspberry Pi
//! OS's alike; nothing here needs `/dev/gpiomem` or `/dev/mem`.
//!
//! # Which chip, which line
//!
//! A profile's pins are BCM numbers. On every Raspberry Pi they are the line
//! offsets of the chip that drives the 40-pin header, whatever that chip's
//! number (`gpiochip0` on one kernel, `gpiochip4` on another), so the chip
//! is found by its label: `pinctrl-bcm2835` (Pi 1–3, Zero), `pinctrl-bcm2711`
//! (Pi 4, 400, CM4), `pinctrl-rp1` (Pi 5's RP1). A profile's `gpio_chip`
//! names another chip by label, name or path: a GPIO expander, or the
//! kernel's `gpio-sim` in the image's test boot.
//!
//! # What the hardware needs
//!
//! The service's user in the `gpio` group, which the package's udev rule
//! (`60-hark.rules`) gives `/dev/gpiochip*` to. Lines are requested with the
//! consumer name `hark` (what `gpioinfo` shows) and released when their
//! owner is dropped, SIGTERM included: the file descriptor closes and the
//! kernel frees the lines. LED outputs go dark first (the
//! [`crate::led::Lights`] thread shows a dark frame when it stops).

use std::{
    io::ErrorKind,
    path::{Path, PathBuf},
    time::Duration,
};

use gpiocdev::{Chip, Request, line::Value};

use crate::led::{LedError, LedOutput, Rgb};

/// The consumer name on every line Hark holds.
pub const CONSUMER: &str = "hark";

/// Labels of the chips that drive a Raspberry Pi's header, by model.
pub const PI_HEADER_CHIPS: &[&str] = &["pinctrl-bcm2835", "pinctrl-bcm2711", "pinctrl-rp1"];

/// The kernel's debounce on input lines. Short: the board's classifier
/// does the real debounce (30 ms by default) behind every backend alike;
/// this only keeps a bouncing contact from filling the event queue.
pub(crate) const KERNEL_DEBOUNCE: Duration = Duration::from_millis(2);

/// Why a GPIO or SPI backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum GpioError {
    #[error("there is no GPIO chip (no /dev/gpiochip*): is this a Raspberry Pi?")]
    NoChips,
    #[error(
        "no GPIO chip drives a Raspberry Pi header here (looked for {}; found {}); name the chip with `gpio_chip` in the board profile",
        PI_HEADER_CHIPS.join(", "),
        list(.found)
    )]
    NoHeaderChip { found: Vec<ChipSummary> },
    #[error("no GPIO chip is called {wanted:?} (found {})", list(.found))]
    NoSuchChip {
        wanted: String,
        found: Vec<ChipSummary>,
    },
    #[error("more than one GPIO chip is labelled {wanted:?} ({}); name one by path in `gpio_chip`", list(.found))]
    AmbiguousChip {
        wanted: String,
        found: Vec<ChipSummary>,
    },
    #[error(
        "cannot open {}: permission denied; the service's user must be in the `gpio` group (the package's udev rule 60-hark.rules gives /dev/gpiochip* to it)",
        .path.display()
    )]
    Permission { path: PathBuf },
    #[error("cannot open {}: {source}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: gpiocdev::Error,
    },
    #[error("GPIO {pin} for {purpose}: {chip} has only {lines} lines")]
    NoSuchLine {
        pin: u8,
        purpose: &'static str,
        chip: ChipSummary,
        lines: u32,
    },
    #[error("GPIO {pin} for {purpose} (line {pin} of {chip}) is busy: {holder}")]
    Busy {
        pin: u8,
        purpose: &'static str,
        chip: ChipSummary,
        holder: String,
    },
    #[error("cannot use GPIO {pin} for {purpose} (line {pin} of {chip}): {source}")]
    Line {
        pin: u8,
        purpose: &'static str,
        chip: ChipSummary,
        #[source]
        source: gpiocdev::Error,
    },
    #[error(
        "cannot open SPI bus {bus} chip select {cs} for the LEDs: {source}; is SPI enabled (dtparam=spi=on) and the user in the `spi` group?"
    )]
    Spi {
        bus: u8,
        cs: u8,
        #[source]
        source: rppal::spi::Error,
    },
    #[error("SPI bus {bus} chip select {cs} does not exist on a Raspberry Pi")]
    NoSuchSpi { bus: u8, cs: u8 },
}

/// A chip as errors and logs name it: `gpiochip0 "pinctrl-bcm2711"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChipSummary {
    pub name: String,
    pub label: String,
}

impl std::fmt::Display for ChipSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.name, self.label)
    }
}

fn list(chips: &[ChipSummary]) -> String {
    if chips.is_empty() {
        return "none".into();
    }
    chips
        .iter()
        .map(ChipSummary::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A GPIO chip, found: its device node and what it says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpioChip {
    pub path: PathBuf,
    pub summary: ChipSummary,
    pub lines: u32,
}

impl std::fmt::Display for GpioChip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.summary.fmt(f)
    }
}

/// Opens a chip's device node, telling a permission problem apart.
fn open(path: &Path) -> Result<Chip, GpioError> {
    Chip::from_path(path).map_err(|source| {
        if os_error(&source) == Some(ErrorKind::PermissionDenied) {
            GpioError::Permission {
                path: path.to_owned(),
            }
        } else {
            GpioError::Open {
                path: path.to_owned(),
                source,
            }
        }
    })
}

/// Finds the chip a profile's pins are on: `wanted` (the profile's
/// `gpio_chip`: a label, a name or a path), or the Pi header's chip.
pub fn find_chip(wanted: Option<&str>) -> Result<GpioChip, GpioError> {
    if let Some(path) = wanted.filter(|w| w.starts_with('/')) {
        return describe(Path::new(path));
    }
    let paths = gpiocdev::chip::chips().map_err(|_| GpioError::NoChips)?;
    if paths.is_empty() {
        return Err(GpioError::NoChips);
    }
    // A chip this user may not open (another board's expander, say) only
    // matters when the one wanted is not among those it may: then the
    // permission is the likely reason, and the error says so.
    let mut chips = Vec::with_capacity(paths.len());
    let mut unopened = None;
    for path in &paths {
        match describe(path) {
            Ok(chip) => chips.push(chip),
            Err(e) => {
                tracing::debug!(chip = %path.display(), error = %e, "GPIO chip not usable");
                unopened.get_or_insert(e);
            }
        }
    }
    match (pick(&chips, wanted), unopened) {
        (Ok(chip), _) => Ok(chip.clone()),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e),
    }
}

fn describe(path: &Path) -> Result<GpioChip, GpioError> {
    let chip = open(path)?;
    let info = chip.info().map_err(|source| GpioError::Open {
        path: path.to_owned(),
        source,
    })?;
    Ok(GpioChip {
        path: chip.path().to_owned(),
        summary: ChipSummary {
            name: info.name,
            label: info.label,
        },
        lines: info.num_lines,
    })
}

/// The chip among `chips` that `wanted` names (by label or by name), or
/// without a name the first that drives a Pi's header.
pub fn pick<'a>(chips: &'a [GpioChip], wanted: Option<&str>) -> Result<&'a GpioChip, GpioError> {
    let found = || chips.iter().map(|c| c.summary.clone()).collect();
    let Some(wanted) = wanted else {
        return chips
            .iter()
            .find(|c| PI_HEADER_CHIPS.contains(&c.summary.label.as_str()))
            .ok_or_else(|| GpioError::NoHeaderChip { found: found() });
    };
    if let Some(chip) = chips.iter().find(|c| c.summary.name == wanted) {
        return Ok(chip);
    }
    let labelled: Vec<&GpioChip> = chips.iter().filter(|c| c.summary.label == wanted).collect();
    match labelled[..] {
        [chip] => Ok(chip),
        [] => Err(GpioError::NoSuchChip {
            wanted: wanted.to_owned(),
            found: found(),
        }),
        _ => Err(GpioError::AmbiguousChip {
            wanted: wanted.to_owned(),
            found: labelled.iter().map(|c| c.summary.clone()).collect(),
        }),
    }
}

/// The OS error behind a gpiocdev error, if one is.
fn os_error(error: &gpiocdev::Error) -> Option<ErrorKind> {
    let errno = match error {
        gpiocdev::Error::Os(errno) => errno.0,
        gpiocdev::Error::Uapi(_, gpiocdev_uapi::Error::Os(errno)) => errno.0,
        _ => return None,
    };
    Some(std::io::Error::from_raw_os_error(errno).kind())
}

/// A line's request failed: says who holds it when it is busy.
pub(crate) fn line_error(
    chip: &GpioChip,
    pin: u8,
    purpose: &'static str,
    source: gpiocdev::Error,
) -> GpioError {
    if os_error(&source) == Some(ErrorKind::ResourceBusy) {
        let holder = Chip::from_path(&chip.path)
            .and_then(|c| c.line_info(u32::from(pin)))
            .map(|info| match info.consumer.as_str() {
                "" => "held by a program that gave no name".to_owned(),
                name => format!("held by {name:?}"),
            })
            .unwrap_or_else(|_| "held by another program".to_owned());
        return GpioError::Busy {
            pin,
            purpose,
            chip: chip.summary.clone(),
            holder,
        };
    }
    GpioError::Line {
        pin,
        purpose,
        chip: chip.summary.clone(),
        source,
    }
}

pub(crate) fn check_line(
    chip: &GpioChip,
    pin: u8,
    purpose: &'static str,
) -> Result<u32, GpioError> {
    let offset = u32::from(pin);
    if offset >= chip.lines {
        return Err(GpioError::NoSuchLine {
            pin,
            purpose,
            chip: chip.summary.clone(),
            lines: chip.lines,
        });
    }
    Ok(offset)
}

/// One output line, driven until dropped: an LED, or the supply of an LED
/// ring.
pub struct OutputLine {
    request: Request,
    offset: u32,
    on: bool,
}

impl OutputLine {
    /// Requests `pin` of `chip` as an output, lit (active) when `on`;
    /// `active_low`: active drives the pin low.
    pub fn open(
        chip: &GpioChip,
        pin: u8,
        active_low: bool,
        on: bool,
        purpose: &'static str,
    ) -> Result<OutputLine, GpioError> {
        let offset = check_line(chip, pin, purpose)?;
        let mut builder = Request::builder();
        builder
            .on_chip(&chip.path)
            .with_consumer(CONSUMER)
            .with_line(offset)
            .as_output(if on { Value::Active } else { Value::Inactive });
        if active_low {
            builder.as_active_low();
        }
        let request = builder
            .request()
            .map_err(|source| line_error(chip, pin, purpose, source))?;
        Ok(OutputLine {
            request,
            offset,
            on,
        })
    }

    /// Drives the line; writes only changes (the lights call this every
    /// frame).
    pub fn set(&mut self, on: bool) -> Result<(), gpiocdev::Error> {
        if on != self.on {
            self.request.set_value(
                self.offset,
                if on { Value::Active } else { Value::Inactive },
            )?;
            self.on = on;
        }
        Ok(())
    }
}

/// Single LEDs, one per output line; an LED is lit when its colour in the
/// frame is bright enough.
pub struct GpioLeds {
    lines: Vec<OutputLine>,
    name: String,
}

impl GpioLeds {
    /// `pins`: BCM number and whether the LED lights when the pin is low;
    /// all start dark.
    pub fn open(chip: &GpioChip, pins: &[(u8, bool)]) -> Result<GpioLeds, GpioError> {
        let mut lines = Vec::with_capacity(pins.len());
        for &(pin, active_low) in pins {
            lines.push(OutputLine::open(chip, pin, active_low, false, "an LED")?);
        }
        let numbers: Vec<u8> = pins.iter().map(|&(p, _)| p).collect();
        Ok(GpioLeds {
            lines,
            name: format!("GPIO LEDs on {numbers:?} ({chip})"),
        })
    }
}

impl LedOutput for GpioLeds {
    fn count(&self) -> usize {
        self.lines.len()
    }

    fn show(&mut self, frame: &[Rgb]) -> Result<(), LedError> {
        for (line, color) in self.lines.iter_mut().zip(frame) {
            // A dim pulse is still "on" for a plain LED; below a quarter it
            // is off, so pulses and spins read as blinking.
            let on = color.0.max(color.1).max(color.2) >= 64;
            line.set(on).map_err(|e| LedError::Write {
                device: self.name.clone(),
                source: std::io::Error::other(e),
            })?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip(name: &str, label: &str) -> GpioChip {
        GpioChip {
            path: PathBuf::from(format!("/dev/{name}")),
            summary: ChipSummary {
                name: name.into(),
                label: label.into(),
            },
            lines: 54,
        }
    }

    #[test]
    fn the_header_chip_is_found_by_label_whatever_its_number() {
        // A Pi 5 on a kernel that numbers RP1 fourth, after the SoC's own.
        let chips = [
            chip("gpiochip0", "gpio-brcmstb@107d508500"),
            chip("gpiochip1", "gpio-brcmstb@107d508520"),
            chip("gpiochip2", "gpio-brcmstb@107d517c00"),
            chip("gpiochip3", "gpio-brcmstb@107d517c20"),
            chip("gpiochip4", "pinctrl-rp1"),
        ];
        assert_eq!(pick(&chips, None).unwrap().summary.name, "gpiochip4");
        let pi4 = [
            chip("gpiochip0", "pinctrl-bcm2711"),
            chip("gpiochip1", "raspberrypi-exp-gpio"),
        ];
        assert_eq!(pick(&pi4, None).unwrap().summary.name, "gpiochip0");
    }

    #[test]
    fn without_a_header_chip_the_error_lists_what_there_is() {
        let e = pick(&[chip("gpiochip0", "9030000.pl061")], None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(r#"gpiochip0 "9030000.pl061""#), "{text}");
        assert!(text.contains("gpio_chip"), "{text}");
    }

    #[test]
    fn a_named_chip_is_found_by_name_or_label() {
        let chips = [
            chip("gpiochip0", "pinctrl-bcm2711"),
            chip("gpiochip1", "hark-sim"),
        ];
        assert_eq!(
            pick(&chips, Some("hark-sim")).unwrap().summary.name,
            "gpiochip1"
        );
        assert_eq!(
            pick(&chips, Some("gpiochip0")).unwrap().summary.label,
            "pinctrl-bcm2711"
        );
        let e = pick(&chips, Some("mcp23017")).unwrap_err().to_string();
        assert!(e.contains(r#""mcp23017""#) && e.contains("hark-sim"), "{e}");
    }

    #[test]
    fn two_chips_with_one_label_are_not_guessed_between() {
        let chips = [chip("gpiochip0", "hark-sim"), chip("gpiochip1", "hark-sim")];
        let e = pick(&chips, Some("hark-sim")).unwrap_err().to_string();
        assert!(
            e.contains("gpiochip0") && e.contains("gpiochip1") && e.contains("by path"),
            "{e}"
        );
    }

    #[test]
    fn a_line_past_the_chip_is_named() {
        let mut small = chip("gpiochip2", "pca9536");
        small.lines = 4;
        let e = check_line(&small, 17, "the push-to-talk button")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GPIO 17") && e.contains("pca9536") && e.contains("4 lines"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_device_node_is_named() {
        let e = find_chip(Some("/dev/gpiochip-that-is-not-there"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/gpiochip-that-is-not-there"), "{e}");
    }
}
