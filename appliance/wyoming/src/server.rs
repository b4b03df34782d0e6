//! The Wyoming listener: who may connect (`wyoming.allow`), how many at
//! once, and one task per connection.
//!
//! Admission is the MCP side's rule (docs/security.md): a newcomer from an
//! allowed address is never refused for what others opened. When its
//! address, or everyone together, is at the limit, an older connection
//! makes way: the oldest that has not sent a whole event yet, else the
//! oldest. Idle or half-open connections, however many, delay Home
//! Assistant by one eviction and never lock it out.

use std::{
    collections::VecDeque,
    net::{IpAddr, SocketAddr},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_core::room::PcmSpeech;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};
use tokio_util::sync::CancellationToken;

use crate::{
    config::WyomingConfig,
    event::{Event, write_event},
    session::{Settings, serve},
};

struct Entry {
    id: u64,
    address: IpAddr,
    spoke: Arc<AtomicBool>,
    close: CancellationToken,
}

#[derive(Default)]
struct Open {
    /// Oldest first.
    entries: VecDeque<Entry>,
    next: u64,
}

/// The connections open, and who makes way for a newcomer.
pub struct Admission {
    max: usize,
    per_address: usize,
    open: Mutex<Open>,
}

/// A connection's place; given up when dropped.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    /// Set by the session once a whole event has come.
    pub spoke: Arc<AtomicBool>,
    /// Cancelled when this connection must make way.
    pub close: CancellationToken,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.open().entries.retain(|e| e.id != self.id);
    }
}

impl Admission {
    pub fn new(max: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            per_address: per_address.max(1),
            open: Mutex::default(),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets a connection from `address` in, closing an older one if its
    /// address or everyone together is at the limit.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Ticket {
        let mut open = self.open();
        let same = |e: &Entry| e.address == address;
        if open.entries.iter().filter(|e| same(e)).count() >= self.per_address {
            make_way(&mut open.entries, same);
        }
        if open.entries.len() >= self.max {
            make_way(&mut open.entries, |_| true);
        }
        open.next += 1;
        let (id, spoke, close) = (
            open.next,
            Arc::new(AtomicBool::new(false)),
            CancellationToken::new(),
        );
        open.entries.push_back(Entry {
            id,
            address,
            spoke: Arc::clone(&spoke),
            close: close.clone(),
        });
        Ticket {
            admission: Arc::clone(self),
            id,
            spoke,
            close,
        }
    }

    /// Connections open now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.open().entries.len()
    }
}

/// Closes the oldest connection `within` that has sent nothing, else the
/// oldest `within`.
fn make_way(entries: &mut VecDeque<Entry>, within: impl Fn(&Entry) -> bool) {
    let silent = entries
        .iter()
        .position(|e| within(e) && !e.spoke.load(Ordering::Relaxed));
    let victim = silent.or_else(|| entries.iter().position(&within));
    if let Some(entry) = victim.and_then(|i| entries.remove(i)) {
        tracing::info!(
            address = %entry.address,
            spoke = entry.spoke.load(Ordering::Relaxed),
            "closing an older Wyoming connection to make way for a new one"
        );
        entry.close.cancel();
    }
}

/// Binds `wyoming.listen`.
pub async fn bind(config: &WyomingConfig) -> std::io::Result<TcpListener> {
    TcpListener::bind(config.listen).await
}

/// Serves Wyoming on `listener` until `shutdown`.
pub async fn run(
    listener: TcpListener,
    services: Arc<dyn PcmSpeech>,
    config: WyomingConfig,
    shutdown: CancellationToken,
) {
    let admission = Admission::new(config.max_connections, config.per_address);
    let settings = Settings {
        max_seconds: config.max_audio_seconds,
        idle: Duration::from_secs(config.idle_secs),
        ..Settings::default()
    };
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to close.
                    tracing::warn!(error = %e, "cannot accept a Wyoming connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        if !config.allows(peer.ip()) {
            tokio::spawn(refuse(stream, peer));
            continue;
        }
        let ticket = admission.admit(peer.ip());
        tokio::spawn(connection(
            stream,
            peer,
            ticket,
            Arc::clone(&services),
            settings,
            shutdown.clone(),
        ));
    }
}

/// Tells a client outside `wyoming.allow` why, then closes.
async fn refuse(mut stream: TcpStream, peer: SocketAddr) {
    tracing::info!(%peer, "refused a Wyoming connection: not in wyoming.allow");
    let text = format!(
        "{} may not use Hark's Wyoming services: it is not in wyoming.allow",
        peer.ip()
    );
    let event = Event::new("error").with_data(json!({"text": text, "code": "NotAllowed"}));
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        write_event(&mut stream, &event).await?;
        stream.shutdown().await?;
        // What the client sent meanwhile is read and dropped: closing with
        // it unread would reset the connection, and the client would lose
        // the answer that says why.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    services: Arc<dyn PcmSpeech>,
    settings: Settings,
    shutdown: CancellationToken,
) {
    let (reader, writer) = stream.into_split();
    tokio::select! {
        served = serve(BufReader::new(reader), writer, services, settings, &ticket.spoke) => {
            if let Err(e) = served {
                tracing::info!(%peer, error = %e, "Wyoming connection ended");
            }
        }
        () = ticket.close.cancelled() => {}
        () = shutdown.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newcomer_is_let_in_and_the_oldest_silent_one_makes_way() {
        let admission = Admission::new(3, 2);
        let (a, b): (IpAddr, IpAddr) = (
            "192.168.1.2".parse().expect("an address"),
            "192.168.1.3".parse().expect("an address"),
        );
        let first = admission.admit(a);
        first.spoke.store(true, Ordering::Relaxed);
        let second = admission.admit(a);
        // The address is full: the silent second makes way, not the first
        // that is in use.
        let third = admission.admit(a);
        assert!(second.close.is_cancelled());
        assert!(!first.close.is_cancelled() && !third.close.is_cancelled());
        drop(second);
        assert_eq!(admission.count(), 2);
        // Everyone together is full: the oldest silent one anywhere goes.
        let other = admission.admit(b);
        assert_eq!(admission.count(), 3);
        let more = admission.admit(b);
        assert!(third.close.is_cancelled(), "the oldest silent one");
        assert!(!other.close.is_cancelled() && !more.close.is_cancelled());
        drop(third);
        // All in use: the oldest of them makes way.
        other.spoke.store(true, Ordering::Relaxed);
        more.spoke.store(true, Ordering::Relaxed);
        let last = admission.admit("10.0.0.1".parse().expect("an address"));
        assert!(first.close.is_cancelled());
        assert!(!last.close.is_cancelled());
    }
}
