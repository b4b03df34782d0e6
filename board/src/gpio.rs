//! Raspberry Pi backends through rppal: buttons and switches on GPIO input
//! pins, single LEDs on GPIO output pins, APA102 rings on SPI.
//!
//! Hardware needs (the Debian image sets them up): the `hark` user in the
//! `gpio` group for `/dev/gpiomem` (BCM2835–BCM2711) or `/dev/gpiochip*`
//! (rppal's RP1 path on the Pi 5), in `spi` for `/dev/spidev0.*`, and SPI
//! enabled (`dtparam=spi=on`). rppal builds on any Linux; off a Pi,
//! `Gpio::new` fails and the error says so.
//!
//! Pins are released when their owner is dropped: rppal puts an input or
//! output pin back into the mode it found it in. LED outputs turn their LEDs
//! off first (the [`crate::led::Lights`] thread shows a dark frame when it
//! stops, SIGTERM included).

use rppal::{
    gpio::{Gpio, OutputPin, Trigger},
    spi::{Bus, Mode, SlaveSelect, Spi},
};
use tokio::sync::mpsc;

use crate::{
    BoardError, apa102,
    button::Level,
    led::{LedError, LedOutput, Rgb},
    ports::{Contact, Running},
    profile::{InputPin, Pull},
};

/// Why a GPIO or SPI backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum GpioError {
    #[error(
        "cannot open the GPIO controller ({0}); is this a Raspberry Pi, and is the user in the `gpio` group?"
    )]
    Controller(#[source] rppal::gpio::Error),
    #[error("cannot use GPIO {pin} for {purpose}: {source}")]
    Pin {
        pin: u8,
        purpose: &'static str,
        #[source]
        source: rppal::gpio::Error,
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

/// A button or switch on an input pin, as a [`Contact`]: the pin is taken
/// when the board starts it and released when the returned [`Running`]
/// is dropped.
pub struct GpioContact {
    pub gpio: Gpio,
    /// The pin, its polarity and pull, from the profile.
    pub pin: InputPin,
    pub purpose: &'static str,
    /// The profile, for errors.
    pub profile: String,
}

impl Contact for GpioContact {
    fn describe(&self) -> String {
        format!("{} on GPIO {}", self.purpose, self.pin.pin)
    }

    fn start(self: Box<Self>, levels: mpsc::Sender<Level>) -> Result<Running, BoardError> {
        let InputPin {
            pin,
            active_low,
            pull,
        } = self.pin;
        let purpose = self.purpose;
        let error = |source| BoardError::Gpio {
            profile: self.profile.clone(),
            source: GpioError::Pin {
                pin,
                purpose,
                source,
            },
        };
        let raw = self.gpio.get(pin).map_err(error)?;
        let mut input = match pull {
            Pull::Up => raw.into_input_pullup(),
            Pull::Down => raw.into_input_pulldown(),
            Pull::None => raw.into_input(),
        };
        let level_of = move |high: bool| {
            if high != active_low {
                Level::Pressed
            } else {
                Level::Released
            }
        };
        // The level it starts in, so a switch already on reads as on.
        let _ = levels.try_send(level_of(input.is_high()));
        input
            .set_async_interrupt(Trigger::Both, None, move |event| {
                let high = event.trigger == Trigger::RisingEdge;
                // rppal's interrupt thread must not block; the classifier
                // drains far faster than a contact can bounce, so a full
                // queue means it is gone or stuck.
                if levels.try_send(level_of(high)).is_err() {
                    tracing::debug!(pin, "input level dropped: its reader is not keeping up");
                }
            })
            .map_err(error)?;
        // Dropping the pin stops the interrupt and releases it.
        Ok(Box::new(input))
    }
}

/// `pin` as an output, for `purpose` (named in the error).
fn output(gpio: &Gpio, pin: u8, purpose: &'static str) -> Result<OutputPin, GpioError> {
    Ok(gpio
        .get(pin)
        .map_err(|source| GpioError::Pin {
            pin,
            purpose,
            source,
        })?
        .into_output())
}

/// Single LEDs, one per output pin; an LED is lit when its colour in the
/// frame is not black.
pub struct GpioLeds {
    pins: Vec<(OutputPin, bool)>,
    names: Vec<u8>,
}

impl GpioLeds {
    /// `pins`: BCM number and whether the LED lights when the pin is low.
    pub fn open(gpio: &Gpio, pins: &[(u8, bool)]) -> Result<GpioLeds, GpioError> {
        let mut out = Vec::with_capacity(pins.len());
        for &(pin, active_low) in pins {
            let mut led = output(gpio, pin, "an LED")?;
            set(&mut led, active_low, false);
            out.push((led, active_low));
        }
        Ok(GpioLeds {
            pins: out,
            names: pins.iter().map(|&(p, _)| p).collect(),
        })
    }
}

fn set(pin: &mut OutputPin, active_low: bool, on: bool) {
    if on != active_low {
        pin.set_high();
    } else {
        pin.set_low();
    }
}

impl LedOutput for GpioLeds {
    fn count(&self) -> usize {
        self.pins.len()
    }

    fn show(&mut self, frame: &[Rgb]) -> Result<(), LedError> {
        for ((pin, active_low), color) in self.pins.iter_mut().zip(frame) {
            // A dim pulse is still "on" for a plain LED; below a quarter it
            // is off, so pulses and spins read as blinking.
            let on = color.0.max(color.1).max(color.2) >= 64;
            set(pin, *active_low, on);
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("GPIO LEDs on {:?}", self.names)
    }
}

/// An APA102 chain on SPI, with an optional pin that powers it (the
/// ReSpeaker 4-mic array switches its LEDs' supply with GPIO 5).
pub struct Apa102 {
    spi: Spi,
    count: usize,
    brightness: u8,
    bytes: Vec<u8>,
    name: String,
    _power: Option<OutputPin>,
}

impl Apa102 {
    pub fn open(
        gpio: &Gpio,
        bus: u8,
        cs: u8,
        clock_hz: u32,
        count: usize,
        brightness: u8,
        power_pin: Option<u8>,
    ) -> Result<Apa102, GpioError> {
        let spi_bus = match bus {
            0 => Bus::Spi0,
            1 => Bus::Spi1,
            _ => return Err(GpioError::NoSuchSpi { bus, cs }),
        };
        let select = match cs {
            0 => SlaveSelect::Ss0,
            1 => SlaveSelect::Ss1,
            2 => SlaveSelect::Ss2,
            _ => return Err(GpioError::NoSuchSpi { bus, cs }),
        };
        let power = match power_pin {
            Some(pin) => {
                let mut power = output(gpio, pin, "the LEDs' power")?;
                power.set_high();
                Some(power)
            }
            None => None,
        };
        let spi = Spi::new(spi_bus, select, clock_hz, Mode::Mode0)
            .map_err(|source| GpioError::Spi { bus, cs, source })?;
        Ok(Apa102 {
            spi,
            count,
            brightness,
            bytes: Vec::with_capacity(apa102::frame_len(count)),
            name: format!("APA102 ×{count} on /dev/spidev{bus}.{cs}"),
            _power: power,
        })
    }
}

impl LedOutput for Apa102 {
    fn count(&self) -> usize {
        self.count
    }

    fn show(&mut self, frame: &[Rgb]) -> Result<(), LedError> {
        apa102::encode(frame, self.brightness, &mut self.bytes);
        self.spi
            .write(&self.bytes)
            .map(|_| ())
            .map_err(|e| LedError::Write {
                device: self.name.clone(),
                source: std::io::Error::other(e),
            })
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

/// Opens the GPIO controller.
pub fn controller() -> Result<Gpio, GpioError> {
    Gpio::new().map_err(GpioError::Controller)
}
