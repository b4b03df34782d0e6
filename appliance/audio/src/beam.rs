//! Delay-and-sum beamforming towards the loudest direction.
//!
//! For a microphone array whose geometry is known (from the board profile:
//! each channel's position in metres, in the array's plane), sound from a
//! direction reaches each microphone at a slightly different time. Delaying
//! each channel by its offset for a direction and averaging adds the sound
//! from that direction coherently while uncorrelated noise partly cancels:
//! with N microphones, up to 10·log10(N) dB better signal-to-noise for
//! noise that is independent between microphones.
//!
//! Method: 12 candidate directions (30° apart) in the array's plane, far-field
//! (plane wave) model, speed of sound 343 m/s, fractional delays by linear
//! interpolation. Every 50 ms the direction whose beam carried the most
//! energy (smoothed over about half a second) becomes the steering
//! direction, if it beats the current one by 1 dB (hysteresis, so the beam
//! does not flutter between two talkers' syllables).
//!
//! Limits, stated plainly: a small array (ReSpeaker 4-mic: 6.5 cm) has a
//! wide beam below about 1 kHz, so most of the gain is in the upper speech
//! band; "loudest direction" follows the loudest source, which is the
//! talker only if they are louder than the television; linear interpolation
//! softens frequencies near Nyquist; reverberant rooms blur directions; and
//! noise that is correlated between microphones (one loud noise source) is
//! steered at, not cancelled, when it is the loudest thing in the room.

/// Speed of sound in air at about 20 °C, m/s.
const SPEED_OF_SOUND: f32 = 343.0;
/// Candidate steering directions.
const DIRECTIONS: usize = 12;
/// History kept per channel, in samples: more than the largest delay of any
/// array up to ~30 cm at 48 kHz.
const HISTORY: usize = 64;

pub struct Beamformer {
    channels: usize,
    /// Per direction, per channel: delay in samples (≥ 0).
    delays: Vec<f32>,
    /// Per channel ring of past samples.
    history: Vec<f32>,
    head: usize,
    /// Smoothed energy per direction.
    energy: [f32; DIRECTIONS],
    current: usize,
    /// Samples until the next direction decision.
    countdown: usize,
    decide_every: usize,
    smoothing: f32,
}

impl Beamformer {
    /// `positions`: one (x, y) in metres per channel. `rate`: sample rate.
    pub fn new(positions: &[[f32; 2]], rate: u32) -> Self {
        let channels = positions.len();
        let mut delays = vec![0.0; DIRECTIONS * channels];
        for d in 0..DIRECTIONS {
            let angle = d as f32 * std::f32::consts::TAU / DIRECTIONS as f32;
            let (ux, uy) = (angle.cos(), angle.sin());
            // A plane wave from direction u reaches the microphone that lies
            // furthest towards u first; its lead is (p · u) / c.
            let leads: Vec<f32> = positions
                .iter()
                .map(|p| (p[0] * ux + p[1] * uy) / SPEED_OF_SOUND * rate as f32)
                .collect();
            let min = leads.iter().copied().fold(f32::MAX, f32::min);
            for (c, lead) in leads.iter().enumerate() {
                // Delay each microphone by how early it hears the wave, so
                // all line up with the last one to hear it.
                delays[d * channels + c] = (lead - min).min(HISTORY as f32 - 2.0);
            }
        }
        let decide_every = (rate / 20).max(1) as usize; // 50 ms
        Self {
            channels,
            delays,
            history: vec![0.0; channels * HISTORY],
            head: 0,
            energy: [0.0; DIRECTIONS],
            current: 0,
            countdown: decide_every,
            decide_every,
            // ~0.5 s time constant in 50 ms steps.
            smoothing: 0.9,
        }
    }

    /// The direction the beam points at now, in degrees (0–330).
    pub fn direction_degrees(&self) -> f32 {
        self.current as f32 * 360.0 / DIRECTIONS as f32
    }

    fn delayed(&self, channel: usize, delay: f32) -> f32 {
        let whole = delay as usize;
        let frac = delay - whole as f32;
        let at = |back: usize| {
            let i = (self.head + HISTORY - back) % HISTORY;
            self.history[channel * HISTORY + i]
        };
        at(whole) * (1.0 - frac) + at(whole + 1) * frac
    }

    fn beam(&self, direction: usize) -> f32 {
        let mut sum = 0.0;
        for c in 0..self.channels {
            sum += self.delayed(c, self.delays[direction * self.channels + c]);
        }
        sum / self.channels as f32
    }

    /// Feeds one frame (one sample per channel) and returns the beamformed
    /// sample.
    pub fn process_frame(&mut self, frame: &[f32]) -> f32 {
        self.head = (self.head + 1) % HISTORY;
        for (c, s) in frame.iter().take(self.channels).enumerate() {
            self.history[c * HISTORY + self.head] = *s;
        }
        // Energy of every beam, on every 4th sample: enough to rank them.
        if self.countdown.is_multiple_of(4) {
            for d in 0..DIRECTIONS {
                let b = self.beam(d);
                self.energy[d] += b * b;
            }
        }
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = self.decide_every;
            self.decide();
        }
        self.beam(self.current)
    }

    fn decide(&mut self) {
        let (best, best_energy) =
            self.energy
                .iter()
                .enumerate()
                .fold(
                    (0, f32::MIN),
                    |acc, (d, e)| if *e > acc.1 { (d, *e) } else { acc },
                );
        // 1 dB hysteresis.
        if best != self.current && best_energy > self.energy[self.current] * 1.26 {
            self.current = best;
        }
        for e in &mut self.energy {
            *e *= self.smoothing;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ReSpeaker 4-mic-like array: four microphones on a 6.5 cm circle.
    fn square() -> Vec<[f32; 2]> {
        let h = 0.0325;
        vec![[h, 0.0], [0.0, h], [-h, 0.0], [0.0, -h]]
    }

    fn noise(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.max(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as f32 / u32::MAX as f32 * 2.0 - 1.0
            })
            .collect()
    }

    /// A source from `angle` degrees: band-limited noise (speech-like band,
    /// below about 4 kHz) reaching each microphone with its plane-wave delay
    /// (simulated at 8× the rate for fractional accuracy), plus independent
    /// noise at each microphone. Returns the oversampled source too.
    fn simulate(
        positions: &[[f32; 2]],
        angle: f32,
        rate: u32,
        n: usize,
    ) -> (Vec<f32>, Vec<Vec<f32>>) {
        let over = 8;
        let window = over * 12;
        let source_hi = noise((n + 400) * over, 99);
        let smooth: Vec<f32> = source_hi
            .windows(window)
            .map(|w| w.iter().sum::<f32>() / window as f32 * 3.0)
            .collect();
        let (ux, uy) = (angle.to_radians().cos(), angle.to_radians().sin());
        let mut channels = Vec::new();
        for (c, p) in positions.iter().enumerate() {
            let lead = (p[0] * ux + p[1] * uy) / SPEED_OF_SOUND * (rate * over as u32) as f32;
            // A microphone nearer the source hears it earlier: at sample i it
            // already has the source from `lead` later.
            let shift = (200.0 * over as f32 + lead).round() as usize;
            let n_c = noise(n, 1 + c as u32);
            let ch: Vec<f32> = (0..n)
                .map(|i| smooth[i * over + shift] + n_c[i] * 0.25)
                .collect();
            channels.push(ch);
        }
        (smooth, channels)
    }

    /// SNR of `got` against the source, at the best sub-sample alignment
    /// (the beam lines up with the last microphone, a few samples late).
    fn snr_db(source: &[f32], got: &[f32], over: usize) -> f32 {
        let mut best = f32::MIN;
        for k in 0..over * 16 {
            let clean: Vec<f32> = (0..got.len())
                .map(|i| source[i * over + 200 * over - k])
                .collect();
            let dot: f32 = clean.iter().zip(got).map(|(a, b)| a * b).sum();
            let cc: f32 = clean.iter().map(|a| a * a).sum();
            let g = dot / cc;
            let err: f32 = clean
                .iter()
                .zip(got)
                .map(|(a, b)| (b - g * a).powi(2))
                .sum();
            let sig: f32 = clean.iter().map(|a| (g * a).powi(2)).sum();
            best = best.max(10.0 * (sig / err).log10());
        }
        best
    }

    #[test]
    fn steers_to_the_source_and_improves_snr() {
        let rate = 48_000;
        let n = rate as usize * 2;
        let positions = square();
        for angle in [90.0f32, 210.0] {
            let (source, chans) = simulate(&positions, angle, rate, n);
            let mut bf = Beamformer::new(&positions, rate);
            let mut out = Vec::with_capacity(n);
            let mut frame = [0.0f32; 4];
            for i in 0..n {
                for (slot, channel) in frame.iter_mut().zip(&chans) {
                    *slot = channel[i];
                }
                out.push(bf.process_frame(&frame));
            }
            let dir = bf.direction_degrees();
            let off = ((dir - angle + 540.0) % 360.0 - 180.0).abs();
            assert!(off <= 30.0, "steered to {dir}°, source at {angle}°");
            // Judge the second half, after the beam settled; a slice of
            // 0.25 s is plenty and keeps the alignment search quick.
            let from = n / 2;
            let len = 12_000;
            let shifted = |v: &[f32]| v[from..from + len].to_vec();
            let source_from = &source[from * 8..];
            let single = snr_db(source_from, &shifted(&chans[0]), 8);
            let beamed = snr_db(source_from, &shifted(&out), 8);
            println!(
                "source {angle}°: steered {dir}°, one mic {single:.1} dB, beam {beamed:.1} dB"
            );
            assert!(
                beamed > single + 4.0,
                "beamformed {beamed:.1} dB vs one microphone {single:.1} dB"
            );
        }
    }
}
