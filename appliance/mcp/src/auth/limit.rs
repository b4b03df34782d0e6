//! Failed token attempts, counted per address: past `auth.max_failures` in
//! a minute an address is refused outright (even with a good token) until
//! its minute is over, so guessing a 256-bit token is hopeless and a
//! flood of bad ones costs little. The table is bounded; the oldest
//! windows go first when a flood comes from many addresses.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 4096;

pub struct Failures {
    max: u32,
    window: Duration,
    table: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Failures {
    pub fn new(max: u32) -> Self {
        Self::with_window(max, WINDOW)
    }

    /// At most `max` in each `window` (pairing requests: ten minutes).
    pub fn with_window(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(wait)` while `address` is refused.
    pub fn blocked(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let (start, count) = table.get(&address)?;
        let end = *start + self.window;
        (*count >= self.max && now < end).then(|| end - now)
    }

    /// Counts one failure from `address`.
    pub fn record(&self, address: IpAddr, now: Instant) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if !table.contains_key(&address) && table.len() >= MAX_ADDRESSES {
            table.retain(|_, (start, _)| now.duration_since(*start) < self.window);
            if table.len() >= MAX_ADDRESSES
                && let Some(oldest) = table.iter().min_by_key(|(_, (s, _))| *s).map(|(a, _)| *a)
            {
                table.remove(&oldest);
            }
        }
        let entry = table.entry(address).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_for_the_rest_of_its_minute() {
        let f = Failures::new(3);
        let a: IpAddr = "10.0.0.2".parse().expect("ip");
        let b: IpAddr = "10.0.0.3".parse().expect("ip");
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(f.blocked(a, t0), None, "after {i}");
            f.record(a, t0 + Duration::from_secs(i));
        }
        let wait = f.blocked(a, t0 + Duration::from_secs(10)).expect("blocked");
        assert_eq!(wait, Duration::from_secs(50));
        assert_eq!(f.blocked(b, t0), None, "another address is not");
        assert_eq!(f.blocked(a, t0 + WINDOW), None, "a new minute");
        f.record(a, t0 + WINDOW);
        assert_eq!(f.blocked(a, t0 + WINDOW), None, "counting starts again");
    }

    #[test]
    fn the_table_stays_bounded() {
        let f = Failures::new(1);
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 100) {
            f.record(
                IpAddr::from(i.to_be_bytes()),
                t0 + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(f.len(), MAX_ADDRESSES);
        // The newest is still counted.
        let last = IpAddr::from((MAX_ADDRESSES as u32 + 99).to_be_bytes());
        assert!(f.blocked(last, t0 + Duration::from_secs(5)).is_some());
    }
}
