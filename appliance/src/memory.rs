//! The allocator's settings for a long-running daemon on a small board.
//!
//! glibc's malloc keeps freed memory for reuse, and raises its mmap
//! threshold to the size of every large block freed, so after one
//! transcription (whisper's compute buffers) and one spoken paragraph (ONNX
//! Runtime's tensors) tens of megabytes of freed blocks stay resident; and
//! each thread that allocates may get an arena of its own. The daemon
//! therefore allows two arenas and, after each transcription and each
//! speech request, hands what was freed back to the system
//! ([`release_freed`]). Between requests, the engines' work runs at full
//! speed: a fixed low mmap threshold (every large tensor mapped and
//! unmapped) made speech synthesis up to twice as slow. Measured in
//! docs/benchmarks.md ("Text to speech", the daemon).

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
