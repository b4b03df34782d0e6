//! The capture ring: one writer (the capture thread), any number of readers,
//! and the writer never waits.
//!
//! The capture thread must never stall on a slow consumer, and the audio just
//! before a listener starts (the pre-roll) must still be there when it does.
//! Both come from one fixed ring of 16 kHz samples with a monotonically
//! increasing write position: a reader keeps its own position, reads what is
//! between it and the writer, and — if it fell more than the ring's length
//! behind — skips the overwritten (oldest) audio and counts it. Starting a
//! reader "300 ms ago" is just starting it at `written - 4800`.
//!
//! Samples are stored as `AtomicU32` bit patterns, so a reader racing the
//! writer reads stale or new values, never undefined behaviour; a read that
//! the writer may have overtaken while it was copying is detected by checking
//! the write position again afterwards, and reported as dropped.
//! Nothing here allocates after [`Ring::new`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

pub struct Ring {
    samples: Box<[AtomicU32]>,
    /// Total samples ever written; the next sample goes to `written % len`.
    written: AtomicU64,
    /// Where the write in progress will end. Raised before the writer
    /// touches any slot, so a reader can tell which slots it may have seen
    /// half-way through being overwritten (a seqlock in all but name).
    reserved: AtomicU64,
}

impl Ring {
    /// A ring holding `capacity` samples (rounded up to at least 1).
    pub fn new(capacity: usize) -> Self {
        let samples = (0..capacity.max(1)).map(|_| AtomicU32::new(0)).collect();
        Self {
            samples,
            written: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
        }
    }

    pub fn capacity(&self) -> usize {
        self.samples.len()
    }

    /// Total samples written since the start.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Appends samples. Only the capture thread calls this.
    pub fn push(&self, data: &[f32]) {
        let len = self.samples.len() as u64;
        let start = self.written.load(Ordering::Relaxed);
        self.reserved
            .store(start + data.len() as u64, Ordering::Relaxed);
        // Orders the reservation before the slot stores below (pairs with
        // the reader's acquire fence).
        fence(Ordering::Release);
        for (i, sample) in data.iter().enumerate() {
            let slot = ((start + i as u64) % len) as usize;
            self.samples[slot].store(sample.to_bits(), Ordering::Relaxed);
        }
        // Publishes the samples: a reader that sees the new position sees them.
        self.written
            .store(start + data.len() as u64, Ordering::Release);
    }

    /// A reader positioned `back` samples before the newest one (clamped to
    /// what the ring still holds).
    pub fn reader(&self, back: usize) -> Reader<'_> {
        let written = self.written();
        let back = (back as u64).min(written).min(self.samples.len() as u64);
        Reader {
            ring: self,
            position: written - back,
            dropped: 0,
        }
    }
}

impl Ring {
    /// A reader at `position` (samples since capture started), clamped to
    /// what the ring still holds and what has been written: a recording
    /// that starts where something was heard (the wake word's end) and
    /// not a pre-roll before it.
    pub fn reader_at(&self, position: u64) -> Reader<'_> {
        let written = self.written();
        let oldest = written.saturating_sub(self.samples.len() as u64);
        Reader {
            ring: self,
            position: position.clamp(oldest, written),
            dropped: 0,
        }
    }
}

pub struct Reader<'a> {
    ring: &'a Ring,
    position: u64,
    dropped: u64,
}

impl Reader<'_> {
    /// Absolute position (in samples since capture started) of the next
    /// sample this reader returns.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Samples skipped because this reader fell behind the writer.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Samples ready to read.
    pub fn available(&self) -> usize {
        (self.ring.written().saturating_sub(self.position)) as usize
    }

    /// Copies up to `out.len()` samples; returns how many. When the reader
    /// has fallen behind, the oldest audio is skipped and counted first.
    pub fn read(&mut self, out: &mut [f32]) -> usize {
        let len = self.ring.samples.len() as u64;
        let written = self.ring.written();
        if written.saturating_sub(self.position) > len {
            let skip = written - len - self.position;
            self.dropped += skip;
            self.position += skip;
        }
        let n = (written - self.position).min(out.len() as u64) as usize;
        for (i, slot) in out[..n].iter_mut().enumerate() {
            let index = ((self.position + i as u64) % len) as usize;
            *slot = f32::from_bits(self.ring.samples[index].load(Ordering::Relaxed));
        }
        // If the writer lapped us while we copied, the first samples may be
        // newer audio than their position says: count them as dropped. Any
        // slot we read from a write in progress makes that write's
        // reservation visible after this fence.
        fence(Ordering::Acquire);
        let after = self.ring.reserved.load(Ordering::Relaxed);
        let overwritten = after.saturating_sub(len).saturating_sub(self.position);
        let overwritten = overwritten.min(n as u64) as usize;
        if overwritten > 0 {
            self.dropped += overwritten as u64;
            out.copy_within(overwritten..n, 0);
            self.position += n as u64;
            return n - overwritten;
        }
        self.position += n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_order_across_the_wrap() {
        let ring = Ring::new(8);
        let mut reader = ring.reader(0);
        let mut out = [0.0; 8];
        ring.push(&[1.0, 2.0, 3.0]);
        assert_eq!(reader.read(&mut out), 3);
        assert_eq!(&out[..3], &[1.0, 2.0, 3.0]);
        ring.push(&[4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(reader.read(&mut out), 7);
        assert_eq!(&out[..7], &[4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(reader.dropped(), 0);
        assert_eq!(reader.read(&mut out), 0);
    }

    #[test]
    fn slow_reader_loses_the_oldest_and_counts_it() {
        let ring = Ring::new(4);
        let mut reader = ring.reader(0);
        ring.push(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut out = [0.0; 8];
        assert_eq!(reader.read(&mut out), 4);
        assert_eq!(&out[..4], &[3.0, 4.0, 5.0, 6.0]);
        assert_eq!(reader.dropped(), 2);
        assert_eq!(reader.position(), 6);
    }

    #[test]
    fn pre_roll_starts_in_the_past() {
        let ring = Ring::new(100);
        let samples: Vec<f32> = (0..50).map(|i| i as f32).collect();
        ring.push(&samples);
        let mut reader = ring.reader(10);
        let mut out = [0.0; 20];
        assert_eq!(reader.read(&mut out), 10);
        assert_eq!(out[0], 40.0);
        assert_eq!(out[9], 49.0);
        // Asking for more history than exists starts at the beginning.
        let reader = ring.reader(1000);
        assert_eq!(reader.position(), 0);
    }

    #[test]
    fn a_reader_at_a_position_is_clamped_to_what_the_ring_holds() {
        let ring = Ring::new(100);
        let samples: Vec<f32> = (0..150).map(|i| i as f32).collect();
        ring.push(&samples);
        let mut reader = ring.reader_at(120);
        let mut out = [0.0; 50];
        assert_eq!(reader.read(&mut out), 30);
        assert_eq!(out[0], 120.0);
        // Overwritten audio and the future are out of reach.
        assert_eq!(ring.reader_at(10).position(), 50);
        assert_eq!(ring.reader_at(900).position(), 150);
    }

    #[test]
    fn concurrent_writer_never_yields_out_of_order_samples() {
        use std::sync::Arc;
        let ring = Arc::new(Ring::new(64));
        // Positioned before the writer starts, so every sample it writes is
        // either seen or counted as dropped.
        let mut reader = ring.reader(0);
        let writer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let mut next = 0.0f32;
                let mut chunk = [0.0f32; 16];
                for _ in 0..20_000 {
                    for s in chunk.iter_mut() {
                        *s = next;
                        next += 1.0;
                    }
                    ring.push(&chunk);
                }
            })
        };
        let mut out = [0.0f32; 32];
        let mut last = -1.0f32;
        let mut seen = 0u64;
        while !writer.is_finished() || reader.available() > 0 {
            let n = reader.read(&mut out);
            for &s in &out[..n] {
                // Every sample is newer than the previous one, and a sample's
                // value is its absolute position (sample values stay exact in
                // f32 up to 2^24).
                assert!(s > last, "{s} after {last}");
                last = s;
            }
            seen += n as u64;
        }
        writer.join().expect("writer");
        assert_eq!(seen + reader.dropped(), 320_000);
    }
}
