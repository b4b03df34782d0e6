//! Opening an ALSA PCM with the parameters Hark needs, for capture and
//! playback alike, with errors that say what the device supports.

use alsa::{
    Direction, ValueOr,
    pcm::{Access, Format, HwParams, PCM},
};

use crate::config::SampleFormat;

/// errno values ALSA returns that Hark tells apart.
pub mod errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const ENXIO: i32 = 6;
    pub const ENODEV: i32 = 19;
    pub const EPIPE: i32 = 32;
    pub const ESTRPIPE: i32 = 86;
}

/// ENOENT: no such device name or node; ENODEV/ENXIO: the device went away.
pub fn is_missing(code: i32) -> bool {
    matches!(code, errno::ENOENT | errno::ENODEV | errno::ENXIO)
}

pub struct Params {
    pub direction: Direction,
    pub format: SampleFormat,
    pub channels: u32,
    pub rate: u32,
    pub period_ms: u32,
    pub periods: u32,
}

pub enum OpenError {
    /// The device does not exist (now).
    Missing(alsa::Error),
    /// It exists but cannot do what was asked; `supported` says what it can.
    Unsupported { wanted: String, supported: String },
    Alsa {
        operation: &'static str,
        source: alsa::Error,
    },
}

pub fn alsa_format(format: SampleFormat) -> Format {
    match format {
        SampleFormat::S16Le => Format::S16LE,
        SampleFormat::S32Le => Format::S32LE,
        SampleFormat::FloatLe => Format::FloatLE,
    }
}

/// Opens `device` with `params`; returns the PCM, prepared, and its period
/// in frames.
pub fn open(device: &str, params: &Params) -> Result<(PCM, usize), OpenError> {
    let pcm = PCM::new(device, params.direction, false).map_err(|e| {
        if is_missing(e.errno()) {
            OpenError::Missing(e)
        } else {
            OpenError::Alsa {
                operation: "open",
                source: e,
            }
        }
    })?;
    let alsa_err = |operation| move |source| OpenError::Alsa { operation, source };
    let period = {
        let hwp = HwParams::any(&pcm).map_err(alsa_err("reading hardware parameters"))?;
        let unsupported = |wanted: String| OpenError::Unsupported {
            wanted,
            supported: supported(&hwp),
        };
        hwp.set_access(Access::RWInterleaved)
            .map_err(|_| unsupported("interleaved access".into()))?;
        hwp.set_format(alsa_format(params.format))
            .map_err(|_| unsupported(params.format.name().to_owned()))?;
        hwp.set_channels(params.channels)
            .map_err(|_| unsupported(format!("{} channels", params.channels)))?;
        hwp.set_rate(params.rate, ValueOr::Nearest)
            .map_err(|_| unsupported(format!("at {} Hz", params.rate)))?;
        let period = i64::from(params.rate * params.period_ms / 1000);
        let period = hwp
            .set_period_size_near(period, ValueOr::Nearest)
            .map_err(alsa_err("setting the period size"))?;
        hwp.set_buffer_size_near(period * i64::from(params.periods))
            .map_err(alsa_err("setting the buffer size"))?;
        pcm.hw_params(&hwp)
            .map_err(alsa_err("applying hardware parameters"))?;
        let current = pcm
            .hw_params_current()
            .map_err(alsa_err("reading back parameters"))?;
        let rate = current.get_rate().map_err(alsa_err("reading the rate"))?;
        if rate != params.rate {
            return Err(OpenError::Unsupported {
                wanted: format!("at {} Hz (it offers {rate} Hz)", params.rate),
                supported: supported(
                    &HwParams::any(&pcm).map_err(alsa_err("reading hardware parameters"))?,
                ),
            });
        }
        current
            .get_period_size()
            .map_err(alsa_err("reading the period size"))? as usize
    };
    pcm.prepare().map_err(alsa_err("prepare"))?;
    Ok((pcm, period))
}

/// What a device offers, for error messages.
fn supported(hwp: &HwParams) -> String {
    let formats: Vec<&str> = [
        SampleFormat::S16Le,
        SampleFormat::S32Le,
        SampleFormat::FloatLe,
    ]
    .into_iter()
    .filter(|f| hwp.test_format(alsa_format(*f)).is_ok())
    .map(SampleFormat::name)
    .collect();
    let channels = match (hwp.get_channels_min(), hwp.get_channels_max()) {
        (Ok(lo), Ok(hi)) => format!("{lo}–{hi}"),
        _ => "?".into(),
    };
    let rates = match (hwp.get_rate_min(), hwp.get_rate_max()) {
        (Ok(lo), Ok(hi)) => format!("{lo}–{hi} Hz"),
        _ => "?".into(),
    };
    let formats = if formats.is_empty() {
        "none of S16_LE, S32_LE, FLOAT_LE".to_owned()
    } else {
        formats.join(", ")
    };
    format!("formats {formats}; channels {channels}; rates {rates}")
}
