//! `hark-bench echo`: echo cancellation, measured on recorded people in a
//! simulated room.
//!
//! Hark speaks (its own piper voice, what it plays) through a simulated
//! speaker and room into the microphone, where the person's recorded
//! speech (the real-speech set's English clips) is added at several echo
//! levels. Each canceller gets the speaker's signal as its reference, as
//! in the appliance. Measured:
//!
//! - **words**: Moonshine tiny-en (the live engine) on the person's clip
//!   while Hark speaks, without and with each canceller, against the same
//!   clip in silence, per subset;
//! - **echo reduction** (ERLE) over minutes of Hark speaking alone;
//! - **false barge-ins an hour** of Hark speaking alone: how many of its
//!   sentences (each watched from its start, as the daemon does) the
//!   barge-in rule (the voice detector, speech of `--barge-ms`) fires on
//!   what the canceller leaves;
//! - **barge-in reaction**: from the person's first word to the rule
//!   firing, in the audio, while Hark speaks;
//! - **CPU**: each canceller's time per second of audio.
//!
//! The candidates: AEC3 (the `aec3` crate, as `hark_audio::echo` runs it,
//! alone and with WebRTC's noise suppressor) and speexdsp 1.2.1 (Debian's
//! `libspeexdsp1`, its echo canceller and residual suppressor), loaded at
//! run time; left out with a note when the library is missing.

use std::{
    ffi::{c_int, c_void},
    fmt::Write as _,
    sync::Arc,
    time::Instant,
};

use clap::Args;
use hark_audio::{
    config::VadConfig,
    echo::{self, FRAME},
    vad::{Event, Segmenter},
};
use realfft::RealFftPlanner;

use crate::{figures::percentile, host::tidy, speech, stt};

const RATE: usize = 16_000;

#[derive(Debug, Args)]
pub struct EchoArgs {
    #[command(flatten)]
    speech: speech::SpeechDir,
    #[command(flatten)]
    live: stt::LivePaths,
    /// Minutes of Hark speaking alone per room, level and canceller.
    #[arg(long, default_value_t = 10.0)]
    alone_minutes: f64,
    /// Speech the barge-in rule waits for before it stops Hark, ms.
    #[arg(long, default_value_t = 120)]
    barge_ms: u32,
    /// The cancellers to measure (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    cancellers: Vec<Kind>,
    /// Threads for Moonshine.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Only the cold starts (a minute, no recogniser).
    #[arg(long)]
    cold_only: bool,
}

/// Cold starts per room and level: a new canceller each, Hark speaking
/// from the first sentence on a different one each time.
const COLD_STARTS: usize = 14;
/// Seconds of each cold start.
const COLD_SECONDS: f64 = 16.0;
/// The echo reductions a new canceller must reach before a barge-in,
/// compared on cold starts, dB (0: none; Hark runs
/// `echo::LEARNED_ERLE_DB`).
const COLD_HOLDS: [f64; 4] = [0.0, 6.0, echo::LEARNED_ERLE_DB, 14.0];

/// The person's speech level at the microphone, dBFS RMS over its speech.
const PERSON_DBFS: f32 = -28.0;
/// The microphone's own noise, dBFS RMS.
const NOISE_DBFS: f32 = -65.0;
/// Hark's speech before it reaches the speaker, dBFS RMS.
const RENDER_DBFS: f32 = -20.0;
/// Echo at the microphone against the person, dB.
const LEVELS: [f32; 3] = [0.0, 10.0, 20.0];
/// Hark speaking alone before each clip starts, s.
const LEAD: f64 = 2.0;
/// After each clip, s.
const TAIL: f64 = 0.6;

/// A speaker in a room: how late its sound reaches the microphone after
/// the reference (device buffers and the air), and how long the room
/// rings.
pub(crate) struct Room {
    pub(crate) name: &'static str,
    pub(crate) delay_ms: f64,
    pub(crate) rt60: f64,
    /// The reverberant tail against the direct sound.
    pub(crate) wet: f32,
}

const ROOMS: [Room; 2] = [
    Room {
        name: "near (40 ms, RT60 0.3 s)",
        delay_ms: 40.0,
        rt60: 0.3,
        wet: 0.3,
    },
    Room {
        name: "reverberant (120 ms, RT60 0.7 s)",
        delay_ms: 120.0,
        rt60: 0.7,
        wet: 0.8,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    None,
    Aec3,
    Aec3Ns,
    Aec3Linear,
    Aec3Long,
    Aec3LongLinear,
    Aec3Shorter,
    Aec3ShorterLinear,
    Speex,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Aec3 => "AEC3, suppressed",
            Kind::Aec3Ns => "AEC3 + noise suppression",
            Kind::Aec3Linear => "AEC3's filter alone",
            Kind::Aec3Long => "AEC3 320 ms, suppressed (Hark's barge-in)",
            Kind::Aec3LongLinear => "AEC3 320 ms filter alone (Hark's listening)",
            Kind::Aec3Shorter => "AEC3 160 ms, suppressed",
            Kind::Aec3ShorterLinear => "AEC3 160 ms filter alone",
            Kind::Speex => "speexdsp + residual suppression",
        }
    }
}

/// The filter length Hark ran before [`echo::FILTER_BLOCKS`] (160 ms),
/// measured beside it.
const SHORTER_FILTER_BLOCKS: usize = 40;

/// One canceller, fed 10 ms at a time.
enum Canceller {
    None,
    /// With the filter's output (`true`) or the suppressor's.
    Aec3(Box<echo::Canceller>, bool),
    Speex(Speex),
}

impl Canceller {
    fn new(kind: Kind, speex: Option<&Arc<SpeexLib>>) -> anyhow::Result<Self> {
        let aec3 = |filter_blocks, noise_suppression, linear| -> anyhow::Result<Self> {
            let stages = echo::Stages {
                noise_suppression,
                filter_blocks,
                learned_erle_db: echo::LEARNED_ERLE_DB,
            };
            Ok(Canceller::Aec3(
                Box::new(echo::Canceller::new(stages)?),
                linear,
            ))
        };
        match kind {
            Kind::None => Ok(Canceller::None),
            Kind::Aec3 => aec3(0, false, false),
            Kind::Aec3Ns => aec3(0, true, false),
            Kind::Aec3Linear => aec3(0, false, true),
            Kind::Aec3Long => aec3(echo::FILTER_BLOCKS, false, false),
            Kind::Aec3LongLinear => aec3(echo::FILTER_BLOCKS, false, true),
            Kind::Aec3Shorter => aec3(SHORTER_FILTER_BLOCKS, false, false),
            Kind::Aec3ShorterLinear => aec3(SHORTER_FILTER_BLOCKS, false, true),
            Kind::Speex => Ok(Canceller::Speex(Speex::new(Arc::clone(
                speex.ok_or_else(|| anyhow::anyhow!("no speexdsp"))?,
            )))),
        }
    }

    /// The whole stream, frame by frame; returns the output and the time
    /// it took.
    fn run(&mut self, reference: &[f32], mic: &[f32]) -> anyhow::Result<(Vec<f32>, f64)> {
        let started = Instant::now();
        let mut out = vec![0.0; mic.len()];
        let mut clean = echo::Cleaned::default();
        for ((r, m), o) in reference
            .chunks_exact(FRAME)
            .zip(mic.chunks_exact(FRAME))
            .zip(out.chunks_exact_mut(FRAME))
        {
            let (r, m, o): (&[f32; FRAME], &[f32; FRAME], &mut [f32; FRAME]) =
                (r.try_into()?, m.try_into()?, o.try_into()?);
            match self {
                Canceller::None => o.copy_from_slice(m),
                Canceller::Aec3(c, linear) => {
                    c.process(r, m, &mut clean)?;
                    o.copy_from_slice(if *linear {
                        &clean.linear
                    } else {
                        &clean.suppressed
                    });
                }
                Canceller::Speex(s) => s.process(r, m, o),
            }
        }
        Ok((out, started.elapsed().as_secs_f64()))
    }
}

/// Debian's libspeexdsp, opened at run time.
struct SpeexLib {
    _lib: libloading::Library,
    echo_init: unsafe extern "C" fn(c_int, c_int) -> *mut c_void,
    echo_ctl: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int,
    echo_cancel: unsafe extern "C" fn(*mut c_void, *const i16, *const i16, *mut i16),
    echo_destroy: unsafe extern "C" fn(*mut c_void),
    pre_init: unsafe extern "C" fn(c_int, c_int) -> *mut c_void,
    pre_ctl: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int,
    pre_run: unsafe extern "C" fn(*mut c_void, *mut i16) -> c_int,
    pre_destroy: unsafe extern "C" fn(*mut c_void),
}

impl SpeexLib {
    fn open() -> Result<Self, libloading::Error> {
        // SAFETY: libspeexdsp's initialisers have no side effects beyond
        // its own state; the symbols are looked up with their C signatures
        // from speex_echo.h and speex_preprocess.h.
        unsafe {
            let lib = libloading::Library::new("libspeexdsp.so.1")?;
            Ok(Self {
                echo_init: *lib.get(b"speex_echo_state_init\0")?,
                echo_ctl: *lib.get(b"speex_echo_ctl\0")?,
                echo_cancel: *lib.get(b"speex_echo_cancellation\0")?,
                echo_destroy: *lib.get(b"speex_echo_state_destroy\0")?,
                pre_init: *lib.get(b"speex_preprocess_state_init\0")?,
                pre_ctl: *lib.get(b"speex_preprocess_ctl\0")?,
                pre_run: *lib.get(b"speex_preprocess_run\0")?,
                pre_destroy: *lib.get(b"speex_preprocess_state_destroy\0")?,
                _lib: lib,
            })
        }
    }
}

/// speexdsp's canceller with a 256 ms filter and its residual suppressor.
struct Speex {
    lib: Arc<SpeexLib>,
    echo: *mut c_void,
    pre: *mut c_void,
}

const SPEEX_ECHO_SET_SAMPLING_RATE: c_int = 24;
const SPEEX_PREPROCESS_SET_ECHO_STATE: c_int = 24;

impl Speex {
    fn new(lib: Arc<SpeexLib>) -> Self {
        // SAFETY: the states are created, used and destroyed only here,
        // with the frame size they were made for.
        unsafe {
            let echo = (lib.echo_init)(FRAME as c_int, 4096);
            let mut rate = RATE as c_int;
            (lib.echo_ctl)(
                echo,
                SPEEX_ECHO_SET_SAMPLING_RATE,
                (&raw mut rate).cast::<c_void>(),
            );
            let pre = (lib.pre_init)(FRAME as c_int, RATE as c_int);
            (lib.pre_ctl)(pre, SPEEX_PREPROCESS_SET_ECHO_STATE, echo);
            Self { lib, echo, pre }
        }
    }

    fn process(&mut self, reference: &[f32; FRAME], mic: &[f32; FRAME], out: &mut [f32; FRAME]) {
        let s16 = |x: f32| (x * 32767.0).clamp(-32768.0, 32767.0) as i16;
        let r: [i16; FRAME] = std::array::from_fn(|i| s16(reference[i]));
        let m: [i16; FRAME] = std::array::from_fn(|i| s16(mic[i]));
        let mut o = [0i16; FRAME];
        // SAFETY: every buffer holds FRAME samples, the states' frame size.
        unsafe {
            (self.lib.echo_cancel)(self.echo, m.as_ptr(), r.as_ptr(), o.as_mut_ptr());
            (self.lib.pre_run)(self.pre, o.as_mut_ptr());
        }
        for (y, x) in out.iter_mut().zip(o) {
            *y = f32::from(x) / 32768.0;
        }
    }
}

impl Drop for Speex {
    fn drop(&mut self) {
        // SAFETY: made in `new`, destroyed once.
        unsafe {
            (self.lib.pre_destroy)(self.pre);
            (self.lib.echo_destroy)(self.echo);
        }
    }
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| v * v).sum::<f32>() / x.len().max(1) as f32).sqrt()
}

fn db_gain(from_rms: f32, to_dbfs: f32) -> f32 {
    10f32.powf(to_dbfs / 20.0) / from_rms.max(1e-9)
}

/// A fixed-seed generator for the room's tail and the microphone's noise.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// The room's impulse response: the direct sound after `delay_ms`, then a
/// tail of noise decaying 60 dB in `rt60` seconds.
pub(crate) fn impulse(room: &Room, seed: u64) -> Vec<f32> {
    let delay = (room.delay_ms * RATE as f64 / 1000.0) as usize;
    let tail = (room.rt60 * RATE as f64) as usize;
    let mut h = vec![0.0; delay + tail];
    h[delay] = 1.0;
    let mut rng = Lcg(seed);
    // Reflections start some 3 ms after the direct sound.
    for i in 48..tail {
        let t = i as f64 / RATE as f64;
        h[delay + i] = rng.next() * room.wet * 0.1 * (-6.9 * t / room.rt60).exp() as f32;
    }
    h
}

/// A small speaker: no bass (a second-order high-pass at 150 Hz) and a
/// soft limit where it is driven hard.
fn speaker(x: &[f32]) -> Vec<f32> {
    // The virtual card's room has the same speaker.
    let mut highpass = hark_audio::virtual_room::Highpass::new(150.0, RATE as f32);
    x.iter()
        .map(|&x0| (DRIVE * highpass.run(x0)).tanh() / DRIVE)
        .collect()
}

/// How hard the speaker is driven into its soft limit: at Hark's level
/// its loudest syllables lose about 1 dB.
const DRIVE: f32 = 1.0;

/// `x` convolved with `h`, the length of `x` (FFT overlap-add).
pub(crate) fn convolve(x: &[f32], h: &[f32]) -> Vec<f32> {
    let n = (2 * h.len()).next_power_of_two();
    let step = n - h.len() + 1;
    let mut planner = RealFftPlanner::<f32>::new();
    let (fwd, inv) = (planner.plan_fft_forward(n), planner.plan_fft_inverse(n));
    let mut hbuf = vec![0.0; n];
    hbuf[..h.len()].copy_from_slice(h);
    let mut hs = fwd.make_output_vec();
    let _ = fwd.process(&mut hbuf, &mut hs);
    let mut out = vec![0.0; x.len() + n];
    let (mut block, mut spec, mut back) = (vec![0.0; n], fwd.make_output_vec(), vec![0.0; n]);
    for start in (0..x.len()).step_by(step) {
        block.fill(0.0);
        let end = (start + step).min(x.len());
        block[..end - start].copy_from_slice(&x[start..end]);
        let _ = fwd.process(&mut block, &mut spec);
        for (s, k) in spec.iter_mut().zip(&hs) {
            *s *= *k;
        }
        let _ = inv.process(&mut spec, &mut back);
        for (o, v) in out[start..start + n].iter_mut().zip(&back) {
            *o += v / n as f32;
        }
    }
    out.truncate(x.len());
    out
}

/// Hark's speech for `seconds`: the piper voice's sentences in turn with
/// a short breath between them, at the render level, and where each
/// sentence lies in it (start, end).
fn hark_speech(sentences: &[Vec<f32>], seconds: f64) -> (Vec<f32>, Vec<(usize, usize)>) {
    let n = (seconds * RATE as f64) as usize;
    let gap = vec![0.0; RATE / 4];
    let mut out = Vec::with_capacity(n + RATE * 10);
    let mut spans = Vec::new();
    for s in sentences.iter().cycle() {
        if out.len() >= n {
            break;
        }
        spans.push((out.len(), (out.len() + s.len()).min(n)));
        out.extend_from_slice(s);
        out.extend_from_slice(&gap);
    }
    out.truncate(n);
    let g = db_gain(rms(&out), RENDER_DBFS);
    out.iter_mut().for_each(|v| *v *= g);
    (out, spans)
}

/// How many of Hark's sentences the barge-in rule stops: each is one
/// speech, watched from its start with a fresh detector, as the daemon's
/// watch does from each `SpeakingStarted`. (One detector over the whole
/// stream would stay in speech through echo that keeps leaking and count
/// it once.)
fn false_barge_ins(out: &[f32], spans: &[(usize, usize)], barge_ms: u32) -> usize {
    spans
        .iter()
        .filter(|&&(a, b)| !barge_ins(&out[a..b], barge_ms).is_empty())
        .count()
}

/// What the barge-in rule makes of a stream: the sample positions where
/// it fires.
fn barge_ins(audio: &[f32], barge_ms: u32) -> Vec<u64> {
    let config = echo::barge_in_rule(&VadConfig::default(), barge_ms);
    let mut segmenter = Segmenter::new(&config, 0);
    let mut fired = Vec::new();
    let mut consumed = 0usize;
    while consumed < audio.len() {
        let end = (consumed + FRAME).min(audio.len());
        let (used, event) = segmenter.push(&audio[consumed..end]);
        consumed += used;
        if let Some(Event::SpeechStart { .. }) = event {
            fired.push(consumed as u64);
        }
    }
    fired
}

/// A clip placed in the double-talk stream.
struct Placed<'a> {
    clip: &'a speech::RealClip,
    /// Where its audio starts in the stream.
    start: usize,
    /// The person's audio, at the person's level.
    audio: Vec<f32>,
}

/// Words heard, per subset.
#[derive(Default, Clone)]
struct Tally {
    errors: usize,
    words: usize,
}

struct Condition {
    room: usize,
    level: f32,
    kind: Kind,
    /// Per clip.
    errors: Vec<(usize, usize)>,
    /// Per clip: the reaction in ms, or none when the rule did not fire.
    reactions: Vec<Option<f64>>,
    /// Fired in the lead, before the person spoke.
    early: usize,
    erle: f64,
    false_per_hour: f64,
    cpu: f64,
}

pub fn main(args: EchoArgs) -> anyhow::Result<()> {
    let set = speech::load(&tidy(&args.speech.speech))?;
    let clips: Vec<&speech::RealClip> = set
        .iter()
        .filter(|c| c.language == "en" && !c.text.trim().is_empty())
        .collect();
    anyhow::ensure!(!clips.is_empty(), "the real set has no English clips");
    let runtime = hark_onnx::OnnxRuntime::load(&tidy(&args.live.onnxruntime))?;
    let mut moonshine =
        hark_stt::moonshine::Moonshine::load(&runtime, &tidy(&args.live.moonshine), args.threads)?;
    let speex = match SpeexLib::open() {
        Ok(lib) => Some(Arc::new(lib)),
        Err(e) => {
            eprintln!("[echo] speexdsp left out: {e} (apt-get install libspeexdsp1)");
            None
        }
    };
    // By default the candidates that decide: the two AEC3 stages Hark
    // runs, the same with the shorter filter, AEC3 as it comes, and
    // speexdsp.
    let default = [
        Kind::None,
        Kind::Aec3,
        Kind::Aec3Long,
        Kind::Aec3LongLinear,
        Kind::Aec3Shorter,
        Kind::Aec3ShorterLinear,
        Kind::Speex,
    ];
    let kinds: Vec<Kind> = default
        .into_iter()
        .chain(
            args.cancellers
                .iter()
                .copied()
                .filter(|k| !default.contains(k)),
        )
        .filter(|k| *k != Kind::Speex || speex.is_some())
        .filter(|k| args.cancellers.is_empty() || args.cancellers.contains(k))
        .collect();

    eprintln!("[echo] Hark's voice: the piper sentences");
    let sentences: Vec<Vec<f32>> = crate::turn::UTTERANCES
        .iter()
        .map(|s| (*s).to_owned())
        .chain(crate::turn::PAUSED.iter().map(|(a, b)| format!("{a} {b}")))
        .map(|text| {
            let (samples, rate) = hark_tts::test_voice::speak(&text);
            hark_audio::clip::Clip { samples, rate }
                .resampled(RATE as u32)
                .map(|c| c.samples)
                .map_err(|e| anyhow::anyhow!("piper: {e}"))
        })
        .collect::<anyhow::Result<_>>()?;

    let cold = cold_starts(&sentences, args.barge_ms)?;
    if args.cold_only {
        print!("{cold}");
        return Ok(());
    }

    // The double-talk stream: each clip after LEAD seconds of Hark alone.
    let mut placed = Vec::new();
    let mut length = 0usize;
    for clip in &clips {
        let (a, b) = clip.speech;
        let span = &clip.samples
            [(a * RATE as f64) as usize..((b * RATE as f64) as usize).min(clip.samples.len())];
        let g = db_gain(rms(span), PERSON_DBFS);
        let start = length + (LEAD * RATE as f64) as usize;
        let audio: Vec<f32> = clip.samples.iter().map(|v| v * g).collect();
        length = start + audio.len() + (TAIL * RATE as f64) as usize;
        placed.push(Placed { clip, start, audio });
    }
    length = length.next_multiple_of(FRAME);
    let mut person = vec![0.0f32; length];
    for p in &placed {
        person[p.start..p.start + p.audio.len()].copy_from_slice(&p.audio);
    }
    let mut rng = Lcg(7);
    let noise: Vec<f32> = (0..length)
        .map(|_| rng.next() * 10f32.powf(NOISE_DBFS / 20.0) * 3f32.sqrt())
        .collect();
    let (render, _) = hark_speech(&sentences, length as f64 / RATE as f64);
    let person_rms = 10f32.powf(PERSON_DBFS / 20.0);

    // The clips in silence: the mark every condition is held to.
    eprintln!("[echo] {} clips in silence", placed.len());
    let mut silence = Vec::new();
    for p in &placed {
        let heard: Vec<f32> = (0..p.audio.len())
            .map(|i| p.audio[i] + noise[p.start + i])
            .collect();
        let text = moonshine.transcribe(&heard)?.text;
        silence.push(stt::word_errors(&p.clip.text, &text));
    }

    let alone_len = ((args.alone_minutes * 60.0) as usize * RATE).next_multiple_of(FRAME);
    let (alone_render, utterances) = hark_speech(&sentences, alone_len as f64 / RATE as f64);
    let mut conditions = Vec::new();
    for (r, room) in ROOMS.iter().enumerate() {
        let h = impulse(room, 11 + r as u64);
        let echo = convolve(&speaker(&render), &h);
        let alone_echo = convolve(&speaker(&alone_render), &h);
        for &level in &LEVELS {
            let g = person_rms * 10f32.powf(level / 20.0) / rms(&echo).max(1e-9);
            let mic: Vec<f32> = (0..length)
                .map(|i| echo[i] * g + person[i] + noise[i])
                .collect();
            let ga = person_rms * 10f32.powf(level / 20.0) / rms(&alone_echo).max(1e-9);
            let alone_mic: Vec<f32> = (0..alone_len)
                .map(|i| alone_echo[i] * ga + noise[i % length])
                .collect();
            for &kind in &kinds {
                eprintln!("[echo] {}, echo {level:+} dB, {}", room.name, kind.name());
                let (out, took) = Canceller::new(kind, speex.as_ref())?.run(&render, &mic)?;
                let mut errors = Vec::new();
                for p in &placed {
                    let text = moonshine
                        .transcribe(&out[p.start..p.start + p.audio.len()])?
                        .text;
                    errors.push(stt::word_errors(&p.clip.text, &text));
                }
                let fired = barge_ins(&out, args.barge_ms);
                let mut reactions = Vec::new();
                let mut early = 0;
                for p in &placed {
                    let lead_from = (p.start - (LEAD * RATE as f64) as usize) as u64;
                    let first_word = p.start as u64 + (p.clip.speech.0 * RATE as f64) as u64;
                    let end = (p.start + p.audio.len()) as u64;
                    early += fired
                        .iter()
                        .filter(|&&f| f >= lead_from && f < first_word)
                        .count();
                    reactions.push(
                        fired
                            .iter()
                            .find(|&&f| f >= first_word && f <= end)
                            .map(|&f| (f - first_word) as f64 * 1000.0 / RATE as f64),
                    );
                }
                let (alone_out, alone_took) =
                    Canceller::new(kind, speex.as_ref())?.run(&alone_render, &alone_mic)?;
                // Echo reduction after the first 3 s (the filter converging).
                let settled = 3 * RATE;
                let erle = 20.0
                    * (f64::from(rms(&alone_mic[settled..]))
                        / f64::from(rms(&alone_out[settled..])).max(1e-12))
                    .log10();
                let false_fires = false_barge_ins(&alone_out, &utterances, args.barge_ms);
                let hours = alone_len as f64 / RATE as f64 / 3600.0;
                conditions.push(Condition {
                    room: r,
                    level,
                    kind,
                    errors,
                    reactions,
                    early,
                    erle,
                    false_per_hour: false_fires as f64 / hours,
                    cpu: (took + alone_took) / ((length + alone_len) as f64 / RATE as f64) * 1000.0,
                });
            }
        }
    }
    print!(
        "{}{cold}",
        report(&args, &placed, &silence, &conditions, speex.is_some())
    );
    Ok(())
}

/// Hark's first speech after start, alone, through Hark's barge-in stage
/// with each learning hold: how many cold starts the rule stops, and when
/// (seconds into the speech). A table.
fn cold_starts(sentences: &[Vec<f32>], barge_ms: u32) -> anyhow::Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### Echo cancellation: cold starts\n\n{COLD_STARTS} starts per row, each a new canceller and Hark's first {COLD_SECONDS} s of speech alone (from a different sentence each time), through Hark's barge-in stage, silent until AEC3 reports the echo reduction named (0: no hold); a stop is the barge-in rule firing on Hark's own voice. Microphone noise {NOISE_DBFS} dBFS; the echo's level as against a person at {PERSON_DBFS} dBFS.\n"
    );
    let _ = writeln!(
        out,
        "| room | echo | learned at dB | learned after, s: median / last | starts stopped | first stop, s into the speech |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|---|");
    let person_rms = 10f32.powf(PERSON_DBFS / 20.0);
    let mut rng = Lcg(3);
    let noise: Vec<f32> = (0..(COLD_SECONDS * RATE as f64) as usize)
        .map(|_| rng.next() * 10f32.powf(NOISE_DBFS / 20.0) * 3f32.sqrt())
        .collect();
    for (r, room) in ROOMS.iter().enumerate() {
        let h = impulse(room, 11 + r as u64);
        let starts: Vec<(Vec<f32>, Vec<f32>)> = (0..COLD_STARTS)
            .map(|k| {
                let turned: Vec<Vec<f32>> = sentences
                    .iter()
                    .cycle()
                    .skip(k % sentences.len())
                    .take(sentences.len())
                    .cloned()
                    .collect();
                let (render, _) = hark_speech(&turned, COLD_SECONDS);
                let echo = convolve(&speaker(&render), &h);
                (render, echo)
            })
            .collect();
        for &level in &LEVELS {
            for hold in COLD_HOLDS {
                let (mut first, mut learning) = (Vec::new(), Vec::new());
                for (render, echo) in &starts {
                    let g = person_rms * 10f32.powf(level / 20.0) / rms(echo).max(1e-9);
                    let mic: Vec<f32> = (0..render.len()).map(|i| echo[i] * g + noise[i]).collect();
                    let stages = echo::Stages {
                        learned_erle_db: hold,
                        ..echo::Stages::hark()
                    };
                    let mut canceller = echo::Canceller::new(stages)?;
                    let mut clean = echo::Cleaned::default();
                    let mut suppressed = Vec::with_capacity(mic.len());
                    let mut learned = None;
                    for (i, (r, m)) in render
                        .chunks_exact(FRAME)
                        .zip(mic.chunks_exact(FRAME))
                        .enumerate()
                    {
                        canceller.process(r.try_into()?, m.try_into()?, &mut clean)?;
                        suppressed.extend_from_slice(&clean.suppressed);
                        if learned.is_none() && canceller.learned() {
                            learned = Some(i as f64 * FRAME as f64 / RATE as f64);
                        }
                    }
                    learning.push(learned.unwrap_or(f64::INFINITY));
                    if let Some(&at) = barge_ins(&suppressed, barge_ms).first() {
                        first.push(at as f64 / RATE as f64);
                    }
                }
                learning.sort_by(f64::total_cmp);
                first.sort_by(f64::total_cmp);
                let times: Vec<String> = first.iter().map(|t| format!("{t:.1}")).collect();
                let mark = if hold == echo::LEARNED_ERLE_DB {
                    "**"
                } else {
                    ""
                };
                let seconds = |t: f64| {
                    if t.is_finite() {
                        format!("{t:.1}")
                    } else {
                        format!("> {COLD_SECONDS}")
                    }
                };
                let _ = writeln!(
                    out,
                    "| {} | {level:+} dB | {mark}{hold}{mark} | {} / {} | {} of {COLD_STARTS} | {} |",
                    room.name.split(' ').next().unwrap_or(room.name),
                    seconds(learning[learning.len() / 2]),
                    seconds(learning[learning.len() - 1]),
                    first.len(),
                    if times.is_empty() {
                        "—".to_owned()
                    } else {
                        times.join(", ")
                    },
                );
            }
        }
    }
    Ok(out)
}

fn subsets<'a>(placed: &'a [Placed]) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for p in placed {
        if !names.contains(&p.clip.subset.as_str()) {
            names.push(&p.clip.subset);
        }
    }
    names
}

/// WER % of `errors` over the clips `pick` keeps.
fn wer(placed: &[Placed], errors: &[(usize, usize)], pick: impl Fn(&Placed) -> bool) -> String {
    let t = placed.iter().zip(errors).filter(|(p, _)| pick(p)).fold(
        Tally::default(),
        |t, (_, &(e, w))| Tally {
            errors: t.errors + e,
            words: t.words + w,
        },
    );
    if t.words == 0 {
        "–".into()
    } else {
        format!("{:.1}", 100.0 * t.errors as f64 / t.words as f64)
    }
}

fn report(
    args: &EchoArgs,
    placed: &[Placed],
    silence: &[(usize, usize)],
    conditions: &[Condition],
    speex: bool,
) -> String {
    let mut out = String::new();
    let names = subsets(placed);
    let pooled = |p: &Placed| !p.clip.evaluation_only;
    let _ = writeln!(
        out,
        "\n### Echo cancellation: the person's words while Hark speaks\n"
    );
    let _ = writeln!(
        out,
        "{}\n\n{} English clips of the real-speech set (recorded people) at {PERSON_DBFS} dBFS, each after {LEAD} s of Hark speaking, Hark going on through it: its piper voice through a small speaker (high-pass 150 Hz, soft limit) and a simulated room, at the echo levels below against the person; microphone noise {NOISE_DBFS} dBFS. Word error rate (%) of Moonshine tiny-en, the live engine. Pooled leaves out the clips kept for evaluation only (marked).{}\n",
        crate::host::machine(),
        placed.len(),
        if speex {
            ""
        } else {
            " speexdsp was not installed: its rows are missing."
        },
    );
    let header: Vec<String> = names
        .iter()
        .map(|n| {
            if placed
                .iter()
                .any(|p| p.clip.subset == *n && p.clip.evaluation_only)
            {
                format!("{n} (evaluation only)")
            } else {
                (*n).to_owned()
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "| room | echo | canceller | {} | **pooled** | pooled − silence |",
        header.join(" | ")
    );
    let _ = writeln!(out, "|---|--:|---|{}--:|--:|", "--:|".repeat(names.len()));
    let base = wer(placed, silence, pooled);
    let cells = |errors: &[(usize, usize)]| -> String {
        names
            .iter()
            .map(|n| wer(placed, errors, |p| p.clip.subset == *n))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let _ = writeln!(
        out,
        "| silence | – | – | {} | **{base}** | – |",
        cells(silence)
    );
    let base: f64 = base.parse().unwrap_or(0.0);
    for c in conditions {
        let p = wer(placed, &c.errors, pooled);
        let delta = p
            .parse::<f64>()
            .map_or("–".into(), |v| format!("{:+.1}", v - base));
        let _ = writeln!(
            out,
            "| {} | {:+} dB | {} | {} | **{p}** | {delta} |",
            ROOMS[c.room].name,
            c.level,
            c.kind.name(),
            cells(&c.errors),
        );
    }
    let _ = writeln!(
        out,
        "\n### Echo cancellation: echo removed, false barge-ins, reaction\n\nHark speaking alone for {} min per row (its sentences in turn). Echo reduction: the microphone's level against the canceller's output after the first 3 s. A barge-in is the voice detector hearing {} ms of speech; a false one is a sentence of Hark's stopped by its own echo, each sentence watched from its start as one speech. Reaction: from the person's first word to the barge-in, in the audio, over the clips above (missed: the rule did not fire before the clip ended); early: fired in the {LEAD} s of Hark alone before a clip. CPU: ms of one core per second of audio.\n",
        args.alone_minutes, args.barge_ms
    );
    let _ = writeln!(
        out,
        "| room | echo | canceller | echo reduction dB | false barge-ins an hour | reaction median ms | p90 ms | missed | early | CPU ms/s |"
    );
    let _ = writeln!(out, "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|");
    for c in conditions {
        let got: Vec<f64> = c.reactions.iter().flatten().copied().collect();
        let missed = c.reactions.iter().filter(|r| r.is_none()).count();
        let (median, p90) = if got.is_empty() {
            ("–".to_owned(), "–".to_owned())
        } else {
            (
                format!("{:.0}", percentile(&got, 0.5)),
                format!("{:.0}", percentile(&got, 0.9)),
            )
        };
        let _ = writeln!(
            out,
            "| {} | {:+} dB | {} | {:.1} | {:.0} | {median} | {p90} | {missed} of {} | {} | {:.2} |",
            ROOMS[c.room].name,
            c.level,
            c.kind.name(),
            c.erle,
            c.false_per_hour,
            c.reactions.len(),
            c.early,
            c.cpu,
        );
    }
    out
}
