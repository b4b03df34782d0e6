//! The speech queue: requests in three lanes by priority (`urgent`,
//! `normal`, `low`), first come first served within a lane, bounded in
//! all (`tts.queue`). The speech thread takes the first request it may
//! speak now — the floor decides whose that is ([`crate::floor`]) — from
//! the highest lane that has one; a request it paused between sentences
//! (for an urgent one, or because the floor went to another agent) goes
//! back to the front of its lane and carries on from where it stopped.

use std::collections::VecDeque;

pub use hark_core::room::Priority;

/// The lane a priority's requests wait in, first served first.
fn lane(priority: Priority) -> usize {
    match priority {
        Priority::Urgent => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

/// What the queue needs to know of a request.
pub trait Prioritised {
    fn priority(&self) -> Priority;
}

pub struct Queue<J> {
    lanes: [VecDeque<J>; 3],
    capacity: usize,
}

impl<J: Prioritised> Queue<J> {
    pub fn new(capacity: usize) -> Self {
        Self {
            lanes: Default::default(),
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a new request at the back of its lane; a full queue gives it
    /// back.
    pub fn push(&mut self, job: J) -> Result<(), J> {
        if self.len() >= self.capacity {
            return Err(job);
        }
        self.lanes[lane(job.priority())].push_back(job);
        Ok(())
    }

    /// Puts a paused request back at the front of its lane (it was taken
    /// from the queue, so it has its place whatever the bound).
    pub fn resume_later(&mut self, job: J) {
        self.lanes[lane(job.priority())].push_front(job);
    }

    /// Takes the first request `may` allows, highest lane first.
    pub fn take(&mut self, may: impl Fn(&J) -> bool) -> Option<J> {
        for lane in &mut self.lanes {
            if let Some(at) = lane.iter().position(&may) {
                return lane.remove(at);
            }
        }
        None
    }

    /// Whether a request `may` allows waits with a priority above `than`.
    pub fn waiting_above(&self, than: Priority, may: impl Fn(&J) -> bool) -> bool {
        self.lanes[..lane(than)]
            .iter()
            .any(|lane| lane.iter().any(&may))
    }

    /// Takes every request `drop` selects (stopped ones), in no order.
    pub fn remove(&mut self, drop: impl Fn(&J) -> bool) -> Vec<J> {
        let mut removed = Vec::new();
        for lane in &mut self.lanes {
            let mut kept = VecDeque::with_capacity(lane.len());
            for job in lane.drain(..) {
                if drop(&job) {
                    removed.push(job);
                } else {
                    kept.push_back(job);
                }
            }
            *lane = kept;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Job(&'static str, Priority, &'static str);

    impl Prioritised for Job {
        fn priority(&self) -> Priority {
            self.1
        }
    }

    #[test]
    fn urgent_first_then_in_order_and_low_last() {
        let mut q = Queue::new(8);
        for job in [
            Job("a", Priority::Normal, "x"),
            Job("b", Priority::Low, "x"),
            Job("c", Priority::Normal, "y"),
            Job("d", Priority::Urgent, "y"),
        ] {
            q.push(job).unwrap();
        }
        let order: Vec<_> = std::iter::from_fn(|| q.take(|_| true))
            .map(|j| j.0)
            .collect();
        assert_eq!(order, ["d", "a", "c", "b"]);
    }

    #[test]
    fn only_what_may_speak_is_taken_and_a_paused_one_comes_back_first() {
        let mut q = Queue::new(8);
        q.push(Job("a1", Priority::Normal, "a")).unwrap();
        q.push(Job("b1", Priority::Normal, "b")).unwrap();
        q.push(Job("b2", Priority::Urgent, "b")).unwrap();
        // The floor is a's: b's urgent request waits, a's goes.
        assert_eq!(q.take(|j| j.2 == "a").unwrap().0, "a1");
        assert!(!q.waiting_above(Priority::Normal, |j| j.2 == "a"));
        assert!(q.waiting_above(Priority::Normal, |_| true));
        assert!(
            !q.waiting_above(Priority::Urgent, |_| true),
            "nothing above urgent"
        );
        q.resume_later(Job("a1", Priority::Normal, "a"));
        assert_eq!(q.take(|_| true).unwrap().0, "b2");
        assert_eq!(
            q.take(|_| true).unwrap().0,
            "a1",
            "the paused one before b1"
        );
        assert_eq!(q.take(|_| true).unwrap().0, "b1");
        assert!(q.take(|_| true).is_none());
    }

    #[test]
    fn bounded_and_stoppable() {
        let mut q = Queue::new(2);
        q.push(Job("a", Priority::Low, "x")).unwrap();
        q.push(Job("b", Priority::Urgent, "x")).unwrap();
        assert_eq!(q.push(Job("c", Priority::Normal, "x")).unwrap_err().0, "c");
        let removed = q.remove(|j| j.0 == "a");
        assert_eq!(removed.len(), 1);
        assert_eq!(q.len(), 1);
    }
}
