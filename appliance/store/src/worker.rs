//! A store's own thread: the one place its SQLite connection is used.
//!
//! SQLite blocks (a `synchronous = FULL` commit waits for the card), so no
//! statement may run on the async runtime's threads, where it would hold up
//! every other connection. Each store hands its work to a [`Worker`]: a
//! thread that owns the store's state (the connection, and whatever must
//! change with it atomically) and runs jobs one at a time, in order, from
//! a bounded queue. Callers await the answer; a full queue makes them wait
//! for room rather than grow it.
//!
//! Because one thread runs every job, the jobs of one store never race:
//! taking a message and handing it to a waiting agent is one job, so it is
//! atomic without a lock held across a write.

use std::{
    sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    thread::JoinHandle,
};

use tokio::sync::oneshot;

/// How many jobs may wait for a store's thread.
pub const QUEUE: usize = 64;

type Job<T> = Box<dyn FnOnce(&mut T) + Send>;

/// The store's thread has stopped (it panicked, or the daemon is going).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the store's thread has stopped")]
pub struct Stopped;

/// A thread that owns `T` and runs jobs on it. Dropping the last handle
/// lets the thread finish the queued jobs and end.
pub struct Worker<T> {
    tx: SyncSender<Job<T>>,
    thread: Option<JoinHandle<()>>,
}

/// Why a store's thread could not start with its state.
#[derive(Debug, thiserror::Error)]
pub enum StartError<E> {
    #[error("cannot start the store's thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    Open(E),
}

impl<T: Send + 'static> Worker<T> {
    /// Starts the thread `name` with `state`.
    pub fn start(name: &str, state: T) -> std::io::Result<Self> {
        Self::open(name, move || Ok::<_, std::convert::Infallible>(state)).map_err(|e| match e {
            StartError::Thread(e) => e,
            StartError::Open(never) => match never {},
        })
    }

    /// Starts the thread `name` and makes its state there with `make`
    /// (opening a database is already a statement), waiting until it is
    /// made: call it from a thread that may block.
    pub fn open<E: Send + 'static>(
        name: &str,
        make: impl FnOnce() -> Result<T, E> + Send + 'static,
    ) -> Result<Self, StartError<E>> {
        let (tx, rx) = sync_channel::<Job<T>>(QUEUE);
        let (made, outcome) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                STORE_THREAD.with(|on| on.set(true));
                match make() {
                    Ok(state) => {
                        let _ = made.send(Ok(()));
                        run(state, &rx);
                    }
                    Err(e) => {
                        let _ = made.send(Err(e));
                    }
                }
            })
            .map_err(StartError::Thread)?;
        match outcome.recv() {
            Ok(Ok(())) => Ok(Self {
                tx,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(StartError::Open(e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(StartError::Thread(std::io::Error::other(
                    "the store's thread ended while opening",
                )))
            }
        }
    }

    /// Runs `job` on the thread and returns what it returned.
    pub async fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut T) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (reply, answer) = oneshot::channel();
        let mut job: Job<T> = Box::new(move |state| {
            let _ = reply.send(job(state));
        });
        // The queue is bounded: when it is full, wait for room (a short
        // sleep between tries, never a blocked runtime thread).
        loop {
            match self.tx.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    job = back;
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                Err(TrySendError::Disconnected(_)) => return Err(Stopped),
            }
        }
        answer.await.map_err(|_| Stopped)
    }

    /// Runs `job` on the thread and waits for it, from a thread that may
    /// block (start-up, the command line, a blocking task).
    pub fn call_blocking<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut T) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.tx
            .send(Box::new(move |state| {
                let _ = reply.send(job(state));
            }))
            .map_err(|_| Stopped)?;
        answer.recv().map_err(|_| Stopped)
    }

    /// Queues `job` without waiting for it (from a `Drop`, where nothing
    /// can be awaited). With the queue full, a task of the runtime (or,
    /// outside one, this thread) waits for room: the job is never dropped.
    pub fn send(&self, job: impl FnOnce(&mut T) + Send + 'static) {
        match self.tx.try_send(Box::new(job)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(job)) => {
                let tx = self.tx.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn_blocking(move || {
                            let _ = tx.send(job);
                        });
                    }
                    Err(_) => {
                        let _ = tx.send(job);
                    }
                }
            }
        }
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        // The thread ends once the queue is empty and no sender is left.
        // Joining waits for the queued writes, which must reach the card
        // before the daemon exits (at most QUEUE short jobs), and lets a
        // store reopened at once find its file closed.
        if let Some(thread) = self.thread.take() {
            let (tx, _) = sync_channel(0);
            drop(std::mem::replace(&mut self.tx, tx));
            // A job that let go of the last handle cannot wait for itself.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn run<T>(mut state: T, jobs: &Receiver<Job<T>>) {
    while let Ok(job) = jobs.recv() {
        job(&mut state);
    }
}

thread_local! {
    static STORE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is a store's own. Every statement checks it in
/// debug builds (`crate::db::on_store_thread`), so a statement anywhere
/// else, a runtime thread above all, fails the tests (the end-to-end tests
/// run the debug binary).
pub fn on_store_thread() -> bool {
    STORE_THREAD.with(std::cell::Cell::get)
}

/// Whether this thread is one of the async runtime's.
#[cfg(test)]
fn on_runtime_thread() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_in_order_on_the_workers_own_thread() {
        let worker = Worker::start("test-store", Vec::new()).unwrap();
        for i in 0..10 {
            worker.send(move |v: &mut Vec<i32>| v.push(i));
        }
        let (seen, name, on_runtime, on_store) = worker
            .call(|v: &mut Vec<i32>| {
                (
                    v.clone(),
                    std::thread::current().name().map(str::to_owned),
                    on_runtime_thread(),
                    on_store_thread(),
                )
            })
            .await
            .unwrap();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(name.as_deref(), Some("test-store"));
        assert!(!on_runtime && on_store, "the job ran on a runtime thread");
        assert!(on_runtime_thread() && !on_store_thread());
    }

    #[tokio::test]
    async fn a_full_queue_makes_callers_wait_and_loses_nothing() {
        let worker = std::sync::Arc::new(Worker::start("test-store", 0u64).unwrap());
        // Hold the thread so the queue fills.
        let (release, held) = std::sync::mpsc::channel::<()>();
        worker.send(move |_| {
            let _ = held.recv();
        });
        let callers: Vec<_> = (0..(QUEUE as u64 * 2))
            .map(|_| {
                let worker = std::sync::Arc::clone(&worker);
                tokio::spawn(async move { worker.call(|n| *n += 1).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        release.send(()).unwrap();
        for caller in callers {
            caller.await.unwrap().unwrap();
        }
        assert_eq!(worker.call(|n| *n).await.unwrap(), QUEUE as u64 * 2);
    }

    #[test]
    fn dropping_the_worker_finishes_its_queue() {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let worker = Worker::start("test-store", ()).unwrap();
        for _ in 0..20 {
            let done = std::sync::Arc::clone(&done);
            worker.send(move |_| {
                std::thread::sleep(std::time::Duration::from_millis(1));
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
        }
        drop(worker);
        assert_eq!(done.load(std::sync::atomic::Ordering::Relaxed), 20);
    }

    #[test]
    fn a_state_that_cannot_be_made_is_the_error() {
        let opened = Worker::<()>::open("test-store", || Err::<(), _>("no such file"));
        assert!(matches!(opened, Err(StartError::Open("no such file"))));
    }

    #[test]
    fn a_stopped_thread_is_an_error_not_a_hang() {
        let worker = Worker::start("test-store", ()).unwrap();
        let _ = worker.call_blocking(|_| panic!("a job failed"));
        assert_eq!(worker.call_blocking(|_| 1), Err(Stopped));
    }
}
