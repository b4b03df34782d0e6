//! Connection slots, kept apart by trust. Trusted clients (the Unix socket,
//! loopback, open mode) and paired agents share `mcp.max_connections`;
//! connections from anyone else start in a small budget of their own
//! (`[mcp.unpaired]`: a few per address, a few more in total), and move
//! to the agents' slots when they present a token.
//!
//! Nobody is refused for what others opened: a newcomer is always let in
//! long enough to present its credential, and the budget makes room by
//! closing an older connection instead. Within one address (per-address
//! budget) or among everyone (the total), that is the oldest connection
//! that has not yet sent a complete message, else the oldest. So idle,
//! slow or unpaired connections, from any host or from the agent's own
//! address, can delay a paired agent by one eviction, never lock it out:
//! it sends its request at once and the silent ones make way first. The
//! agents' slots make room the same way, but only from trusted
//! connections that have never said anything (a loopback flood when
//! loopback is trusted); connections that spoke are only refused when
//! every slot is held by one that spoke.

use std::{
    collections::VecDeque,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
};

use tokio_util::sync::CancellationToken;

use crate::config::UnpairedConfig;

/// Why a connection was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "Hark is serving its maximum of {limit} connections (mcp.max_connections); try again later"
    )]
    Full { limit: usize },
}

/// Which slots a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    /// `mcp.max_connections`: the trusted and paired agents.
    Agents,
    /// `[mcp.unpaired]`.
    Unpaired,
}

struct Entry {
    id: u64,
    address: Option<IpAddr>,
    /// Sent a complete message or request, or presented a token.
    spoke: bool,
    /// Cancelled to close the connection when it must make way.
    close: CancellationToken,
}

#[derive(Default)]
struct Tables {
    /// Oldest first, each.
    agents: VecDeque<Entry>,
    unpaired: VecDeque<Entry>,
    next: u64,
}

impl Tables {
    fn pool(&mut self, pool: Pool) -> &mut VecDeque<Entry> {
        match pool {
            Pool::Agents => &mut self.agents,
            Pool::Unpaired => &mut self.unpaired,
        }
    }
}

/// Closes the connection in `open` that makes way among those `within`
/// keeps: the oldest silent one, else (`or_oldest`) the oldest. Whether
/// one was found.
fn make_way(open: &mut VecDeque<Entry>, within: impl Fn(&Entry) -> bool, or_oldest: bool) -> bool {
    let victim = open
        .iter()
        .position(|e| within(e) && !e.spoke)
        .or_else(|| or_oldest.then(|| open.iter().position(&within)).flatten());
    match victim.and_then(|i| open.remove(i)) {
        Some(entry) => {
            tracing::info!(
                address = ?entry.address,
                spoke = entry.spoke,
                "closing an older connection to make way for a new one"
            );
            entry.close.cancel();
            true
        }
        None => false,
    }
}

pub struct Budget {
    max_agents: usize,
    limits: UnpairedConfig,
    tables: Mutex<Tables>,
}

/// A connection's slot; freed when dropped.
pub struct Slot {
    budget: Arc<Budget>,
    id: u64,
    pool: Pool,
    /// A copy of its entry's, so marking it takes the lock once.
    spoke: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Gone already if it was made to make way.
        self.budget
            .tables()
            .pool(self.pool)
            .retain(|e| e.id != self.id);
    }
}

impl Slot {
    /// In the unpaired budget (not yet trusted or paired).
    pub fn unpaired(&self) -> bool {
        self.pool == Pool::Unpaired
    }

    fn mark_spoke(&mut self) {
        if self.spoke {
            return;
        }
        self.spoke = true;
        let mut tables = self.budget.tables();
        if let Some(entry) = tables.pool(self.pool).iter_mut().find(|e| e.id == self.id) {
            entry.spoke = true;
        }
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
            Some(slot) if slot.pool == Pool::Agents => "agent",
            Some(_) => "unpaired",
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

    /// The connection sent a complete message or request: it is no longer
    /// among the first to make way.
    pub fn spoke(&self) {
        if let Some(slot) = &mut *self.lock() {
            slot.mark_spoke();
        }
    }

    /// The connection presented a good token: it moves to an agent's slot
    /// (if one is free or a silent trusted connection makes way; otherwise
    /// it keeps its unpaired one, and says so).
    pub fn promote(&self) {
        let mut held = self.lock();
        let Some(slot) = &mut *held else {
            return;
        };
        if slot.pool == Pool::Agents {
            return;
        }
        let budget = Arc::clone(&slot.budget);
        let mut tables = budget.tables();
        if tables.agents.len() >= budget.max_agents
            && !make_way(&mut tables.agents, |_| true, false)
        {
            tracing::warn!(
                limit = budget.max_agents,
                "a paired connection keeps its unpaired slot: the agents' connections are full"
            );
            return;
        }
        let Some(i) = tables.unpaired.iter().position(|e| e.id == slot.id) else {
            // It was made to make way as it presented the token: its
            // connection is closing.
            return;
        };
        if let Some(mut entry) = tables.unpaired.remove(i) {
            entry.spoke = true;
            tables.agents.push_back(entry);
            slot.pool = Pool::Agents;
            slot.spoke = true;
        }
    }

    #[cfg(test)]
    fn is_unpaired(&self) -> bool {
        matches!(&*self.lock(), Some(slot) if slot.pool == Pool::Unpaired)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Slot>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Budget {
    pub fn new(max_agents: usize, limits: UnpairedConfig) -> Arc<Self> {
        Arc::new(Self {
            max_agents,
            limits,
            tables: Mutex::new(Tables::default()),
        })
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: an agent's when it is trusted (or
    /// `spoke`: it came with a good token), else an unpaired one from
    /// `address`. `close` closes the connection if it must make way for a
    /// newer one later.
    pub fn admit(
        self: &Arc<Self>,
        trusted: bool,
        spoke: bool,
        address: Option<IpAddr>,
        close: &CancellationToken,
    ) -> Result<Slot, Refusal> {
        let address = address.map(|a| a.to_canonical());
        let mut tables = self.tables();
        let pool = match address {
            Some(here) if !trusted => {
                let open = &mut tables.unpaired;
                if open.iter().filter(|e| e.address == Some(here)).count()
                    >= self.limits.per_address
                {
                    make_way(open, |e| e.address == Some(here), true);
                }
                if open.len() >= self.limits.max_connections {
                    make_way(open, |_| true, true);
                }
                Pool::Unpaired
            }
            _ => {
                if tables.agents.len() >= self.max_agents
                    && !make_way(&mut tables.agents, |_| true, false)
                {
                    return Err(Refusal::Full {
                        limit: self.max_agents,
                    });
                }
                Pool::Agents
            }
        };
        tables.next += 1;
        let id = tables.next;
        tables.pool(pool).push_back(Entry {
            id,
            address,
            spoke,
            close: close.clone(),
        });
        Ok(Slot {
            budget: Arc::clone(self),
            id,
            pool,
            spoke,
        })
    }

    /// Unpaired connections open now.
    pub fn unpaired_count(&self) -> usize {
        self.tables().unpaired.len()
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
        let close: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
        let _a = budget
            .admit(false, false, Some(stranger), &close[0])
            .unwrap();
        let _b = budget
            .admit(false, false, Some(stranger), &close[1])
            .unwrap();
        // A third from the same address: the oldest makes way.
        let _c = budget
            .admit(false, false, Some(stranger), &close[2])
            .unwrap();
        assert!(close[0].is_cancelled() && !close[1].is_cancelled());
        assert_eq!(budget.unpaired_count(), 2);
        // The agents' slots are untouched.
        let _x = budget
            .admit(true, true, None, &CancellationToken::new())
            .unwrap();
        let _y = budget
            .admit(true, true, Some(stranger), &CancellationToken::new())
            .unwrap();
        assert_eq!(
            budget
                .admit(true, true, None, &CancellationToken::new())
                .err(),
            Some(Refusal::Full { limit: 2 })
        );
    }

    #[test]
    fn the_silent_make_way_before_those_that_spoke() {
        let budget = Budget::new(4, limits(8, 3));
        let here: IpAddr = "127.0.0.1".parse().unwrap();
        let close: Vec<CancellationToken> = (0..5).map(|_| CancellationToken::new()).collect();
        let agent = Held::new(budget.admit(false, false, Some(here), &close[0]).unwrap());
        agent.spoke();
        let _idle1 = budget.admit(false, false, Some(here), &close[1]).unwrap();
        let _idle2 = budget.admit(false, false, Some(here), &close[2]).unwrap();
        let _idle3 = budget.admit(false, false, Some(here), &close[3]).unwrap();
        // The oldest is the one that spoke: a silent one goes instead.
        assert!(!close[0].is_cancelled() && close[1].is_cancelled());
        let _idle4 = budget.admit(false, false, Some(here), &close[4]).unwrap();
        assert!(!close[0].is_cancelled() && close[2].is_cancelled());
        // Its token takes it out of the unpaired budget altogether.
        agent.promote();
        assert!(!agent.is_unpaired());
        assert_eq!(budget.unpaired_count(), 2);
    }

    #[test]
    fn silent_trusted_connections_make_way_in_the_agents_slots() {
        let budget = Budget::new(2, limits(4, 4));
        let close: Vec<CancellationToken> = (0..4).map(|_| CancellationToken::new()).collect();
        let talker = Held::new(budget.admit(true, false, None, &close[0]).unwrap());
        talker.spoke();
        let _silent = budget.admit(true, false, None, &close[1]).unwrap();
        let _new = budget.admit(true, false, None, &close[2]).unwrap();
        assert!(!close[0].is_cancelled() && close[1].is_cancelled());
        let newest = Held::new(budget.admit(true, false, None, &close[3]).unwrap());
        assert!(close[2].is_cancelled());
        newest.spoke();
        // Every slot is held by one that spoke: now a newcomer is refused.
        assert_eq!(
            budget
                .admit(true, false, None, &CancellationToken::new())
                .err(),
            Some(Refusal::Full { limit: 2 })
        );
        drop(talker);
        assert!(
            budget
                .admit(true, false, None, &CancellationToken::new())
                .is_ok()
        );
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
            .admit(false, false, Some("10.0.0.1".parse().unwrap()), &c1)
            .unwrap();
        let _second = budget
            .admit(false, false, Some("10.0.0.2".parse().unwrap()), &c2)
            .unwrap();
        let _third = budget
            .admit(false, false, Some("10.0.0.3".parse().unwrap()), &c3)
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
        let held = Held::new(budget.admit(false, false, Some(stranger), &close).unwrap());
        assert!(held.is_unpaired());
        held.promote();
        assert!(!held.is_unpaired());
        assert_eq!(budget.unpaired_count(), 0);
        // Its address may open another unpaired connection now.
        assert!(budget.admit(false, false, Some(stranger), &close).is_ok());
        held.release();
        assert!(budget.admit(true, false, None, &close).is_ok());
    }
}
