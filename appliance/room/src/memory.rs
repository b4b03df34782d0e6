//! The allocator's settings for a long-running daemon on a small board.
//!
//! glibc's malloc keeps freed memory for reuse, and raises its mmap
//! threshold to the size of every large block freed, so after one
//! transcription (whisper's compute buffers) and one spoken paragraph (ONNX
//! Runtime's tensors) tens of megabytes of freed blocks stay resident; and
//! each thread that allocates may get an arena of its own. The daemon
//! therefore allows two arenas and hands what was freed back to the system
//! ([`release_freed`]) after each transcription, after start-up, and when
//! the voices give their working memory back. Between requests, the
//! engines' work runs at full speed: a fixed low mmap threshold (every
//! large tensor mapped and unmapped) made speech synthesis up to twice as
//! slow. Measured in
//! docs/benchmarks.md ("Text to speech", the daemon).
//!
//! An engine may keep working memory between requests for speed (the
//! voices keep ONNX Runtime's arena while speech goes on) and give it back
//! when idle. It registers how ([`on_make_room`]); before a transcription,
//! whose buffers are the daemon's largest, [`make_room`] asks every such
//! engine to give its memory back now if it is idle, so the two never add
//! up while nothing needs both.

use std::sync::{Mutex, PoisonError};

/// How an engine gives idle working memory back, registered at start-up;
/// it answers whether the engine still exists.
type Releaser = Box<dyn Fn() -> bool + Send>;

static RELEASERS: Mutex<Vec<Releaser>> = Mutex::new(Vec::new());

/// Allows two malloc arenas. Call it first thing in `main`, before any
/// thread exists.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters; it is called
    // before any other thread runs, so no allocation races with it.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns memory freed by the last request to the system (blocking for a
/// few milliseconds: call it on a worker thread, after the request).
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe; it only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Registers how an engine gives its working memory back when it is idle.
/// `release` must return at once when the engine is busy (it runs on the
/// thread that needs the room), and return `false` once the engine is gone
/// (it is then dropped).
pub fn on_make_room(release: impl Fn() -> bool + Send + 'static) {
    RELEASERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Box::new(release));
}

/// Asks the idle engines to give their working memory back (blocking for a
/// few milliseconds: call it on a worker thread, before heavy work).
pub fn make_room() {
    RELEASERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|release| release());
}
