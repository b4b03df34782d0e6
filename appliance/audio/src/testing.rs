//! Speech for the unit tests.

use crate::config::PIPELINE_RATE;

/// `text` spoken by espeak-ng, at 16 kHz.
pub fn spoken(text: &str) -> Vec<f32> {
    let dir = tempfile::tempdir().expect("temp dir");
    let wav = dir.path().join("speech.wav");
    let ok = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng is installed (appliance/setup-build)");
    assert!(ok.success());
    crate::clip::Clip::read_wav(&wav)
        .and_then(|clip| clip.resampled(PIPELINE_RATE))
        .expect("espeak's WAV")
        .samples
}
