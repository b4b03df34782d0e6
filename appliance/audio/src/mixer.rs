//! The card's hardware volume: setting a playback mixer control (what
//! `alsamixer` shows) so `volume` means the same on every card. The software
//! gain in the playback thread does the rest; on cards without the control
//! it is the only volume.

use alsa::mixer::{Mixer, Selem, SelemId};

#[derive(Debug, thiserror::Error)]
pub enum MixerError {
    #[error("cannot open the mixer of `{card}`: {source}")]
    Open {
        card: String,
        #[source]
        source: alsa::Error,
    },
    #[error("mixer `{card}` has no playback volume control `{control}`; it has: {available}")]
    NoControl {
        card: String,
        control: String,
        available: String,
    },
    #[error("cannot set `{control}` on `{card}`: {source}")]
    Set {
        card: String,
        control: String,
        #[source]
        source: alsa::Error,
    },
}

/// The mixer (control device) that belongs to a PCM device name:
/// `plughw:CARD=seeed2micvoicec,DEV=0` → `hw:CARD=seeed2micvoicec`,
/// `hw:1,0` → `hw:1`, anything else (`default`, a plugin name) as is.
pub fn card_of(device: &str) -> String {
    let Some((kind, args)) = device.split_once(':') else {
        return device.to_owned();
    };
    if !matches!(kind, "hw" | "plughw" | "sysdefault" | "dmix" | "dsnoop") {
        return device.to_owned();
    }
    let card = args.split(',').next().unwrap_or(args);
    format!("hw:{card}")
}

/// Sets `control` on the card of `device` to `volume` (0–100), on the
/// control's dB scale when it has one (so 50 sounds like half), else on its
/// raw range.
pub fn set_volume(device: &str, control: &str, volume: u8) -> Result<(), MixerError> {
    let card = card_of(device);
    let mixer = Mixer::new(&card, false).map_err(|source| MixerError::Open {
        card: card.clone(),
        source,
    })?;
    let selem = mixer
        .find_selem(&SelemId::new(control, 0))
        .filter(Selem::has_playback_volume)
        .ok_or_else(|| MixerError::NoControl {
            card: card.clone(),
            control: control.to_owned(),
            available: mixer
                .iter()
                .filter_map(Selem::new)
                .filter(Selem::has_playback_volume)
                .filter_map(|s| s.get_id().get_name().ok().map(str::to_owned))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let set_err = |source| MixerError::Set {
        card: card.clone(),
        control: control.to_owned(),
        source,
    };
    let fraction = f64::from(volume.min(100)) / 100.0;
    let (db_lo, db_hi) = selem.get_playback_db_range();
    if db_hi.0 > db_lo.0 {
        // The top 50 dB of the control's range, like the software curve.
        let floor = db_lo.0.max(db_hi.0 - 5000);
        let target = if volume == 0 {
            db_lo.0
        } else {
            floor + ((db_hi.0 - floor) as f64 * fraction) as i64
        };
        selem
            .set_playback_db_all(alsa::mixer::MilliBel(target), alsa::Round::Floor)
            .map_err(set_err)
    } else {
        let (lo, hi) = selem.get_playback_volume_range();
        selem
            .set_playback_volume_all(lo + ((hi - lo) as f64 * fraction).round() as i64)
            .map_err(set_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixer_of_a_device() {
        assert_eq!(
            card_of("plughw:CARD=seeed2micvoicec,DEV=0"),
            "hw:CARD=seeed2micvoicec"
        );
        assert_eq!(card_of("hw:1,0"), "hw:1");
        assert_eq!(card_of("default"), "default");
        assert_eq!(card_of("hark_virtual_speaker"), "hark_virtual_speaker");
    }

    #[test]
    fn missing_card_is_a_clear_error() {
        let err = set_volume("hw:CARD=NoSuchCard", "Speaker", 50)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hw:CARD=NoSuchCard"), "{err}");
    }
}
