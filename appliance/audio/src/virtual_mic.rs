//! The microphone of the virtual sound card.
//!
//! On machines without a sound card (CI, laptops, build servers) Hark still
//! captures through ALSA: the virtual card (`virtual-card.conf`) is ALSA's
//! `file` plugin, whose capture side reads its `infile`. That file is a FIFO
//! fed by this thread in real time — silence, or an utterance someone
//! injected — so capture is paced like a real microphone (the `file` plugin
//! itself is not paced: it would return a whole file at once) and an
//! utterance can be injected into a running daemon.
//!
//! Injection: write raw S16_LE audio in the card's format (rate and channels
//! of `[audio.capture]`) into the inject FIFO, e.g. with `hark inject`, or
//! call [`VirtualMic::inject`]. Injected audio replaces silence, in order, as
//! it is played out in real time.

use std::{
    collections::VecDeque,
    fs::OpenOptions,
    io::{ErrorKind, Read, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::virtual_room::{Room, RoomSpec};

#[derive(Debug, thiserror::Error)]
pub enum VirtualMicError {
    #[error("cannot create FIFO {path}: {source}")]
    Fifo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the virtual microphone thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Creates a FIFO at `path` (replacing a stale regular file; keeping an
/// existing FIFO).
pub fn make_fifo(path: &Path) -> Result<(), VirtualMicError> {
    let err = |source| VirtualMicError::Fifo {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_fifo() => return Ok(()),
        Ok(_) => std::fs::remove_file(path).map_err(err)?,
        Err(_) => {}
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| err(std::io::Error::new(ErrorKind::InvalidInput, e)))?;
    // SAFETY: `c_path` is a valid NUL-terminated string for the duration of
    // the call; mkfifo only reads it.
    let rc = unsafe { mkfifo(c_path.as_ptr(), 0o660) };
    if rc != 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    Ok(())
}

const O_NONBLOCK: i32 = 0o4000;

/// Bytes waiting in a pipe.
fn queued(pipe: &std::fs::File) -> usize {
    let mut n: i32 = 0;
    // SAFETY: FIONREAD on a valid, owned descriptor writes one int.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(pipe),
            libc::FIONREAD,
            &mut n,
        )
    };
    if rc == 0 { n.max(0) as usize } else { 0 }
}
const F_SETPIPE_SZ: i32 = 1031;

unsafe extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    fn fcntl(fd: i32, cmd: i32, ...) -> i32;
}

/// Format of the audio the virtual microphone plays: what the capture side
/// opens the card with.
#[derive(Debug, Clone, Copy)]
pub struct MicFormat {
    pub rate: u32,
    pub channels: u32,
    pub period: Duration,
}

impl MicFormat {
    fn period_bytes(&self) -> usize {
        let frames = (self.rate as u128 * self.period.as_micros() / 1_000_000) as usize;
        frames * self.channels as usize * 2
    }
}

pub struct VirtualMic {
    queue: Arc<Mutex<VecDeque<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl VirtualMic {
    /// Starts feeding `mic_fifo`; reads injections from `inject_fifo` if given.
    pub fn start(
        mic_fifo: &Path,
        inject_fifo: Option<&Path>,
        format: MicFormat,
    ) -> Result<Self, VirtualMicError> {
        Self::start_in_room(mic_fifo, inject_fifo, format, None)
    }

    /// As [`VirtualMic::start`], hearing the virtual speaker in `room`.
    pub fn start_in_room(
        mic_fifo: &Path,
        inject_fifo: Option<&Path>,
        format: MicFormat,
        room: Option<RoomSpec>,
    ) -> Result<Self, VirtualMicError> {
        make_fifo(mic_fifo)?;
        if let Some(inject) = inject_fifo {
            make_fifo(inject)?;
        }
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, stop) = (Arc::clone(&queue), Arc::clone(&stop));
            let mic = mic_fifo.to_path_buf();
            let inject = inject_fifo.map(Path::to_path_buf);
            std::thread::Builder::new()
                .name("hark-virtual-mic".into())
                .spawn(move || {
                    let mut room = room.map(Room::new);
                    feed(
                        &mic,
                        inject.as_deref(),
                        format,
                        &queue,
                        &stop,
                        room.as_mut(),
                    );
                })
                .map_err(VirtualMicError::Thread)?
        };
        Ok(Self {
            queue,
            stop,
            thread: Some(thread),
        })
    }

    /// Queues raw S16_LE audio (card format) to be played after what is
    /// already queued.
    pub fn inject(&self, raw: &[u8]) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(raw.iter().copied());
    }

    /// Bytes of injected audio not yet played.
    pub fn pending(&self) -> usize {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for VirtualMic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn feed(
    mic: &Path,
    inject: Option<&Path>,
    format: MicFormat,
    queue: &Mutex<VecDeque<u8>>,
    stop: &AtomicBool,
    mut room: Option<&mut Room>,
) {
    // O_RDWR: opening a FIFO for writing alone blocks until a reader
    // appears; read-write never blocks, and writes then wait for the reader
    // (the capture side) only when the pipe is full.
    //
    // Non-blocking: when nobody reads (capture not started yet, or
    // reopening), the pipe fills and further audio is dropped, as a real
    // microphone's would be — the feeder never blocks, so it always sees
    // `stop`.
    let mut out = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(mic)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(path = %mic.display(), error = %e, "cannot open the virtual microphone FIFO");
            return;
        }
    };
    // A small pipe keeps the virtual microphone's latency near a real one's:
    // the default 64 KiB would hold two seconds of stale audio.
    // SAFETY: fcntl on a valid, owned descriptor; F_SETPIPE_SZ takes an int.
    unsafe {
        fcntl(std::os::fd::AsRawFd::as_raw_fd(&out), F_SETPIPE_SZ, 4096);
    }
    let mut inject = inject.and_then(|path| {
        OpenOptions::new()
            .read(true)
            .write(true) // keeps the FIFO open between writers: no EOF spin
            .custom_flags(O_NONBLOCK)
            .open(path)
            .map_err(|e| tracing::warn!(path = %path.display(), error = %e, "cannot open the inject FIFO"))
            .ok()
    });
    let period_bytes = format.period_bytes();
    let mut period = vec![0u8; period_bytes];
    let mut incoming = vec![0u8; 64 * 1024];
    let mut unsent = 0usize;
    let mut next = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if let Some(f) = inject.as_mut() {
            match f.read(&mut incoming) {
                Ok(n) if n > 0 => queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(incoming[..n].iter().copied()),
                _ => {}
            }
        }
        // Capture is behind: a microphone's sound in this period is lost,
        // as in an overrun. With a room, the pipe's backlog must not grow
        // either: the echo would come later than the speaker played it, by
        // however far capture fell behind.
        let behind = unsent == 0 && room.is_some() && queued(&out) >= 2 * period_bytes;
        if behind {
            tracing::debug!("capture fell behind the virtual microphone: a period lost");
            if let Some(room) = room.as_deref_mut() {
                room.follow();
                room.skip(period_bytes / (2 * format.channels.max(1) as usize));
            }
        } else if unsent == 0 {
            let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
            let take = q.len().min(period_bytes) & !1;
            for (slot, byte) in period.iter_mut().zip(q.drain(..take)) {
                *slot = byte;
            }
            period[take..].fill(0);
            drop(q);
            if let Some(room) = room.as_deref_mut() {
                room.follow();
                room.mix(&mut period, format.channels as usize);
            }
            unsent = period_bytes;
        }
        // Finish the period (a partial write must not misalign frames), or
        // leave the rest for the next tick if the pipe is full.
        while unsent > 0 {
            match out.write(&period[period_bytes - unsent..]) {
                Ok(n) => unsent -= n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::error!(error = %e, "virtual microphone write failed");
                    return;
                }
            }
        }
        next += format.period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > Duration::from_millis(500) {
            // Fell far behind (machine suspended, debugger): don't burst.
            next = now;
        }
    }
}

/// Why `hark inject` could not play a file into the virtual microphone.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error(transparent)]
    Clip(#[from] crate::clip::ClipError),
    #[error(
        "nothing reads the virtual microphone's inject FIFO {path}: is `hark run` running with `[audio.virtual_card] enabled = true`?"
    )]
    NoDaemon { path: String },
    #[error("cannot write to {path}: {source}")]
    Inject {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `hark inject FILE`: plays a WAV file into the running daemon's virtual
/// microphone, converted to the capture format.
pub fn inject(config: &crate::AudioConfig, wav: &Path) -> Result<f64, InjectError> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let clip = crate::clip::Clip::read_wav(wav)?.resampled(config.capture.rate)?;
    let raw = clip.to_s16_le(config.capture.channels);
    let path = &config.virtual_card.inject_fifo;
    let display = path.display().to_string();
    // Non-blocking open fails with ENXIO when no process has the FIFO open
    // for reading: the daemon is not running.
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO | libc::ENOENT) => InjectError::NoDaemon {
                path: display.clone(),
            },
            _ => InjectError::Inject {
                path: display.clone(),
                source: e,
            },
        })?;
    // The daemon drains the FIFO every period; wait when it is full.
    let mut sent = 0;
    while sent < raw.len() {
        match fifo.write(&raw[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => {
                return Err(InjectError::Inject {
                    path: display,
                    source: e,
                });
            }
        }
    }
    fifo.flush().map_err(|source| InjectError::Inject {
        path: display,
        source,
    })?;
    Ok(clip.duration_secs())
}
