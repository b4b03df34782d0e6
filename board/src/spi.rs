//! An APA102 LED chain on SPI (`/dev/spidevB.C`, through rppal's spidev
//! wrapper, which needs no `/dev/gpiomem`), with an optional GPIO line
//! that powers it (the ReSpeaker 4-mic array switches its LEDs' supply
//! with GPIO 5).
//!
//! Hardware needs: SPI enabled (`dtparam=spi=on`, or the image's overlay)
//! and the service's user in the `spi` group.

use rppal::spi::{Bus, Mode, SlaveSelect, Spi};

use crate::{
    apa102,
    gpio::{GpioChip, GpioError, OutputLine},
    led::{LedError, LedOutput, Rgb},
};

/// An APA102 chain on SPI.
pub struct Apa102 {
    spi: Spi,
    count: usize,
    brightness: u8,
    bytes: Vec<u8>,
    name: String,
    _power: Option<OutputLine>,
}

impl Apa102 {
    /// Opens the bus; `power`: the chip and line that switch the chain's
    /// supply, turned on here and off when this is dropped.
    pub fn open(
        bus: u8,
        cs: u8,
        clock_hz: u32,
        count: usize,
        brightness: u8,
        power: Option<(&GpioChip, u8)>,
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
        let power = match power {
            Some((chip, pin)) => Some(OutputLine::open(chip, pin, false, true, "the LEDs' power")?),
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
