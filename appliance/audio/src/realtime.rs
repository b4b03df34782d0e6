//! Real-time scheduling for the audio threads.
//!
//! Capture and playback must come back to ALSA every period (20 ms by
//! default) or the card overruns or underruns. While whisper transcribes on
//! every core, a thread at normal priority can be late; under `SCHED_FIFO`
//! the two audio threads preempt the speech workers and the network. Each
//! one calls [`set_current_thread`] once when it starts, with
//! `[audio] realtime_priority` (1–99; 0 keeps normal scheduling), and never
//! again: nothing here runs on the audio path itself.
//!
//! Permissions: `SCHED_FIFO` needs `CAP_SYS_NICE`, or an `RLIMIT_RTPRIO` at
//! least as high as the priority. The systemd unit gives Hark no capability
//! and `LimitRTPRIO=20`, and leaves `RestrictRealtime=` off. Elsewhere (a
//! shell, a container) the call fails with `EPERM`: the thread logs a
//! warning naming the priority and the error and goes on at normal
//! priority. A failure never stops the audio path.

use std::sync::atomic::{AtomicBool, Ordering};

/// Highest priority `SCHED_FIFO` accepts on Linux.
pub const MAX_PRIORITY: u8 = 99;
/// `[audio] realtime_priority` when the file does not set it: above every
/// normal thread, well below the kernel's threaded interrupts (50).
pub const DEFAULT_PRIORITY: u8 = 10;

/// The calling thread could not be put under `SCHED_FIFO`.
#[derive(Debug, thiserror::Error)]
#[error("cannot run at SCHED_FIFO priority {priority}: {source}")]
pub struct RealtimeError {
    pub priority: u8,
    /// `EPERM`: no `CAP_SYS_NICE` and the priority is above
    /// `RLIMIT_RTPRIO`; `EINVAL`: the priority is above 99.
    #[source]
    pub source: std::io::Error,
}

/// Puts the calling thread under `SCHED_FIFO` at `priority`; 0 leaves its
/// scheduling as it is.
pub fn set_current_thread(priority: u8) -> Result<(), RealtimeError> {
    if priority == 0 {
        return Ok(());
    }
    let param = libc::sched_param {
        sched_priority: libc::c_int::from(priority),
    };
    // SAFETY: `pthread_self()` is always a valid handle for the calling
    // thread, and `param` is a valid `sched_param` for the whole call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        // pthread functions return the error number instead of setting errno.
        return Err(RealtimeError {
            priority,
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

/// Whether a failure was logged as a warning already: the capture and
/// playback threads fail for the same reason, once is enough.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Called once at the start of an audio thread: as [`set_current_thread`],
/// logging the outcome. A failure leaves the thread at normal priority.
pub(crate) fn enter(priority: u8) {
    match set_current_thread(priority) {
        Ok(()) if priority > 0 => {
            tracing::debug!(priority, "audio thread runs under SCHED_FIFO");
        }
        Ok(()) => {}
        Err(e) if !WARNED.swap(true, Ordering::Relaxed) => {
            tracing::warn!(
                priority,
                error = %e.source,
                "cannot give the audio threads real-time priority; running them at normal \
                 priority (raise LimitRTPRIO= or lower audio.realtime_priority)"
            );
        }
        Err(e) => {
            tracing::debug!(priority, error = %e.source, "audio thread stays at normal priority");
        }
    }
}
