//! Connection slots, kept apart by trust. Trusted clients (the Unix socket,
//! loopback, open mode) and paired agents share `mcp.max_connections`;
//! connections from anyone else start in a small budget of their own
//! (`[mcp.unpaired]`: a few per address, a few more in total), and move
//! to the agents' slots when they present a token. So no number of idle,
//! slow or unpaired connections from one host can take a paired agent's
//! place: that host runs out of its own few first, and when many hosts fill
//! the unpaired budget together the oldest of theirs makes way.

use std::{
    collections::VecDeque,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::UnpairedConfig;

/// Why a connection was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "Hark is serving its maximum of {limit} connections (mcp.max_connections); try again later"
    )]
    Full { limit: usize },
    #[error(
        "Hark already has {limit} unpaired connections from {address} (mcp.unpaired.per_address); close some, or pair (`hark pair`) and present the token"
    )]
    Address { address: IpAddr, limit: usize },
}

struct Unpaired {
    id: u64,
    address: IpAddr,
    /// Cancelled to close the connection when it must make way.
    close: CancellationToken,
}

struct Table {
    /// Oldest first.
    open: VecDeque<Unpaired>,
    next: u64,
}

pub struct Budget {
    agents: Arc<Semaphore>,
    max_agents: usize,
    limits: UnpairedConfig,
    unpaired: Mutex<Table>,
}

/// A connection's slot; freed when dropped.
pub enum Slot {
    Agent(#[allow(dead_code)] OwnedSemaphorePermit),
    Unpaired(UnpairedSlot),
}

pub struct UnpairedSlot {
    budget: Arc<Budget>,
    id: u64,
}

impl Drop for UnpairedSlot {
    fn drop(&mut self) {
        self.budget.table().open.retain(|u| u.id != self.id);
    }
}

/// The slot a connection holds, where its transport and its token checks
/// can both reach it: presenting a token moves it to an agent's slot.
#[derive(Default)]
pub struct Held(Mutex<Option<Slot>>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = match &*self.lock() {
            None => "none",
            Some(Slot::Agent(_)) => "agent",
            Some(Slot::Unpaired(_)) => "unpaired",
        };
        f.debug_tuple("Held").field(&slot).finish()
    }
}

impl Held {
    pub fn new(slot: Slot) -> Self {
        Self(Mutex::new(Some(slot)))
    }

    pub fn set(&self, slot: Slot) {
        *self.lock() = Some(slot);
    }

    /// Frees the slot (the connection ended).
    pub fn release(&self) {
        drop(self.lock().take());
    }

    /// The connection presented a good token: it moves to an agent's slot
    /// (if one is free; otherwise it keeps its unpaired one, and says so).
    pub fn promote(&self) {
        let mut slot = self.lock();
        let Some(Slot::Unpaired(unpaired)) = &*slot else {
            return;
        };
        let budget = Arc::clone(&unpaired.budget);
        match budget.agent() {
            Some(agent) => *slot = Some(agent),
            None => tracing::warn!(
                limit = budget.max_agents,
                "a paired connection keeps its unpaired slot: the agents' connections are full"
            ),
        }
    }

    #[cfg(test)]
    fn is_unpaired(&self) -> bool {
        matches!(*self.lock(), Some(Slot::Unpaired(_)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Slot>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Budget {
    pub fn new(max_agents: usize, limits: UnpairedConfig) -> Arc<Self> {
        Arc::new(Self {
            agents: Arc::new(Semaphore::new(max_agents)),
            max_agents,
            limits,
            unpaired: Mutex::new(Table {
                open: VecDeque::new(),
                next: 0,
            }),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.unpaired.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: an agent's when it is trusted, else an
    /// unpaired one from `address`. `close` closes the connection if it
    /// must make way for a newer unpaired one.
    pub fn admit(
        self: &Arc<Self>,
        trusted: bool,
        address: Option<IpAddr>,
        close: &CancellationToken,
    ) -> Result<Slot, Refusal> {
        let address = match address.map(|a| a.to_canonical()) {
            Some(address) if !trusted => address,
            _ => {
                return self.agent().ok_or(Refusal::Full {
                    limit: self.max_agents,
                });
            }
        };
        let mut table = self.table();
        let from_here = table.open.iter().filter(|u| u.address == address).count();
        if from_here >= self.limits.per_address {
            return Err(Refusal::Address {
                address,
                limit: self.limits.per_address,
            });
        }
        if table.open.len() >= self.limits.max_connections
            && let Some(oldest) = table.open.pop_front()
        {
            tracing::info!(address = %oldest.address, "the unpaired connections are full; closing the oldest");
            oldest.close.cancel();
        }
        table.next += 1;
        let id = table.next;
        table.open.push_back(Unpaired {
            id,
            address,
            close: close.clone(),
        });
        Ok(Slot::Unpaired(UnpairedSlot {
            budget: Arc::clone(self),
            id,
        }))
    }

    fn agent(&self) -> Option<Slot> {
        Arc::clone(&self.agents)
            .try_acquire_owned()
            .ok()
            .map(Slot::Agent)
    }

    /// Unpaired connections open now.
    pub fn unpaired_count(&self) -> usize {
        self.table().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per: usize) -> UnpairedConfig {
        UnpairedConfig {
            max_connections: max,
            per_address: per,
            deadline_secs: 10,
        }
    }

    #[test]
    fn one_host_cannot_take_the_agents_slots() {
        let budget = Budget::new(2, limits(3, 2));
        let stranger: IpAddr = "10.0.0.9".parse().unwrap();
        let close = CancellationToken::new();
        let a = budget.admit(false, Some(stranger), &close).unwrap();
        let _b = budget.admit(false, Some(stranger), &close).unwrap();
        assert_eq!(
            budget.admit(false, Some(stranger), &close).err(),
            Some(Refusal::Address {
                address: stranger,
                limit: 2
            })
        );
        // The agents' slots are untouched.
        let _x = budget.admit(true, None, &close).unwrap();
        let _y = budget.admit(true, Some(stranger), &close).unwrap();
        assert_eq!(
            budget.admit(true, None, &close).err(),
            Some(Refusal::Full { limit: 2 })
        );
        drop(a);
        assert_eq!(budget.unpaired_count(), 1);
        assert!(budget.admit(false, Some(stranger), &close).is_ok());
    }

    #[test]
    fn when_many_hosts_fill_the_budget_the_oldest_makes_way() {
        let budget = Budget::new(4, limits(2, 2));
        let (c1, c2, c3) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let oldest = budget
            .admit(false, Some("10.0.0.1".parse().unwrap()), &c1)
            .unwrap();
        let _second = budget
            .admit(false, Some("10.0.0.2".parse().unwrap()), &c2)
            .unwrap();
        let _third = budget
            .admit(false, Some("10.0.0.3".parse().unwrap()), &c3)
            .unwrap();
        assert!(c1.is_cancelled() && !c2.is_cancelled() && !c3.is_cancelled());
        assert_eq!(budget.unpaired_count(), 2);
        drop(oldest);
        assert_eq!(budget.unpaired_count(), 2, "its slot was already given up");
    }

    #[test]
    fn a_token_moves_a_connection_to_an_agents_slot() {
        let budget = Budget::new(1, limits(4, 1));
        let stranger: IpAddr = "10.0.0.9".parse().unwrap();
        let close = CancellationToken::new();
        let held = Held::new(budget.admit(false, Some(stranger), &close).unwrap());
        assert!(held.is_unpaired());
        held.promote();
        assert!(!held.is_unpaired());
        assert_eq!(budget.unpaired_count(), 0);
        // Its address may open another unpaired connection now.
        assert!(budget.admit(false, Some(stranger), &close).is_ok());
        held.release();
        assert!(budget.admit(true, None, &close).is_ok());
    }
}
