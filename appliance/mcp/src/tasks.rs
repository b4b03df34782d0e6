//! Long waits as tasks: the MCP Tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663, beside the 2026-07-28 revision).
//!
//! A listen can outlast what a client allows one call (Codex CLI and the
//! TypeScript SDK give up after 60 s). When a `tools/call` declares the
//! extension, the waiting tools ([`TASK_TOOLS`]) answer at once with a task
//! handle instead, and the call goes on here; the client asks `tasks/get`
//! until the task is `completed` (the tool's result inside), each answer
//! short, and may `tasks/cancel` it.
//!
//! A task belongs to the agent that started it: another agent is told the
//! task is unknown, as if it did not exist. A task ends like a call does
//! (the wait's own timeout, the token revoked, the daemon stopping, a
//! stream connection closing) except that an HTTP connection closing does
//! not end it: over HTTP the connection is not the client, and a task is
//! for a client whose connection may not last the wait. Finished tasks are
//! kept for the client to collect, then forgotten; each agent may hold
//! [`PER_AGENT`] at once, so an agent cannot fill the appliance with them.

use std::{
    collections::HashMap,
    future::Future,
    hash::{BuildHasher, Hasher},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData,
    model::{CallToolResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus},
    task_manager::current_timestamp,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The tools that become tasks for a client that declares the extension:
/// the ones that wait for the person.
pub const TASK_TOOLS: &[&str] = &[
    "transcribe_voice",
    "wait_for_person",
    "converse",
    "confirm",
    "choose",
];

/// How often a client should ask. Short, because the person's words are
/// late by up to this much: a quarter second is below what a listener
/// notices after the end-of-turn pause, and a `tasks/get` costs Hark
/// microseconds.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A task's life from its start (`ttlMs`). Every wait that becomes a task
/// is bounded by its own timeout (at most 300 s of waiting, plus what is
/// said), so a task still running at this age is stopped.
pub const TTL: Duration = Duration::from_secs(15 * 60);

/// How long a task that ended is kept at least, for a client that started
/// it late in its life.
pub const KEPT_AFTER_END: Duration = Duration::from_secs(60);

/// Tasks one agent may hold, running or ended and not yet forgotten. When
/// full, the oldest ended one is forgotten; when all are running, the call
/// is refused.
pub const PER_AGENT: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error(
        "unknown task `{0}`: it was never started by this agent, or it ended more than a minute ago and its result was collected or expired"
    )]
    Unknown(String),
    #[error(
        "this agent already has {limit} tasks running; wait for one to end or cancel one (tasks/cancel) before starting another"
    )]
    Full { limit: usize },
    #[error("Hark's tasks ask for no input; there is nothing to update")]
    NoInput,
}

impl From<TaskError> for ErrorData {
    fn from(e: TaskError) -> Self {
        ErrorData::invalid_params(e.to_string(), None)
    }
}

/// The tasks of every agent. One per daemon, shared by every transport, so
/// a task started over one connection can be collected over another.
#[derive(Default)]
pub struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    ids: Ids,
}

struct Entry {
    owner: String,
    task: Task,
    /// Set once the call ended.
    end: Option<TaskPayload>,
    ended: Option<Instant>,
    created: Instant,
    /// Ends the call: `tasks/cancel`, the TTL, the daemon's stop (the call's
    /// own ends, such as a stream connection closing, are its own).
    stop: CancellationToken,
    cancel_requested: bool,
}

/// A running task, as its call sees it (put in the call's request context):
/// what it is doing becomes the task's `statusMessage`.
#[derive(Clone)]
pub struct Running {
    id: String,
    tasks: Arc<Tasks>,
}

impl Running {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sets the task's status message (a listen's "speech detected", …).
    pub fn say(&self, message: &str) {
        let mut entries = self.tasks.lock();
        if let Some(entry) = entries.get_mut(&self.id)
            && entry.end.is_none()
        {
            entry.task.status_message = Some(message.to_owned());
            entry.task.last_updated_at = current_timestamp();
        }
    }
}

impl Tasks {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `call` as a task of `owner`; its stop token is a child of
    /// `parent` (the daemon's stop). `call` gets the task (for its status)
    /// and the token that ends it. Returns the task's seed state for the
    /// `CreateTaskResult`.
    pub fn start<F>(
        self: &Arc<Self>,
        owner: &str,
        parent: &CancellationToken,
        call: impl FnOnce(Running, CancellationToken) -> F,
    ) -> Result<Task, TaskError>
    where
        F: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let now = Instant::now();
        let id = self.ids.next();
        let stamp = current_timestamp();
        let task = Task::new(id.clone(), TaskStatus::Working, stamp.clone(), stamp)
            .with_ttl_ms(TTL.as_millis() as u64)
            .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64)
            .with_status_message("starting");
        let stop = parent.child_token();
        {
            let mut entries = self.lock();
            sweep(&mut entries, now);
            make_room(&mut entries, owner)?;
            entries.insert(
                id.clone(),
                Entry {
                    owner: owner.to_owned(),
                    task: task.clone(),
                    end: None,
                    ended: None,
                    created: now,
                    stop: stop.clone(),
                    cancel_requested: false,
                },
            );
        }
        let running = Running {
            id: id.clone(),
            tasks: self.clone(),
        };
        let call = call(running, stop.clone());
        let tasks = self.clone();
        tokio::spawn(async move {
            tokio::pin!(call);
            let result = tokio::select! {
                result = &mut call => result,
                () = tokio::time::sleep(TTL) => {
                    tracing::info!(task = %id, "a task ran to its time to live; stopping it");
                    stop.cancel();
                    call.await
                }
            };
            tasks.finish(&id, result);
        });
        Ok(task)
    }

    fn finish(&self, id: &str, result: Result<CallToolResult, ErrorData>) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        let end = match result {
            // Stopped by `tasks/cancel`: the tool's own CancelledError is
            // what the task says.
            Ok(result) if entry.cancel_requested && result.is_error == Some(true) => {
                TaskPayload::Cancelled
            }
            Ok(result) => TaskPayload::Completed {
                result: to_object(&result),
            },
            Err(error) => TaskPayload::Failed {
                error: to_object(&error),
            },
        };
        entry.task.status = end.status();
        entry.task.last_updated_at = current_timestamp();
        entry.end = Some(end);
        entry.ended = Some(Instant::now());
    }

    /// `tasks/get`: the task's state, with the result once it ended.
    pub fn get(&self, owner: &str, id: &str) -> Result<DetailedTask, TaskError> {
        let mut entries = self.lock();
        sweep(&mut entries, Instant::now());
        let entry = owned(&mut entries, owner, id)?;
        let payload = entry.end.clone().unwrap_or(TaskPayload::Working);
        Ok(DetailedTask::new(entry.task.clone(), payload))
    }

    /// `tasks/cancel`: ends the call (the microphone is let go within a
    /// poll); the task then says `cancelled`. Cancelling an ended task
    /// changes nothing.
    pub fn cancel(&self, owner: &str, id: &str) -> Result<(), TaskError> {
        let mut entries = self.lock();
        sweep(&mut entries, Instant::now());
        let entry = owned(&mut entries, owner, id)?;
        if entry.end.is_none() {
            entry.cancel_requested = true;
            entry.stop.cancel();
        }
        Ok(())
    }

    /// `tasks/update`: for a task of `owner`, always [`TaskError::NoInput`].
    pub fn update(&self, owner: &str, id: &str) -> Result<(), TaskError> {
        let mut entries = self.lock();
        owned(&mut entries, owner, id)?;
        Err(TaskError::NoInput)
    }

    /// Tasks running now.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.lock().values().filter(|e| e.end.is_none()).count()
    }
}

fn owned<'a>(
    entries: &'a mut HashMap<String, Entry>,
    owner: &str,
    id: &str,
) -> Result<&'a mut Entry, TaskError> {
    entries
        .get_mut(id)
        .filter(|e| e.owner == owner)
        .ok_or_else(|| TaskError::Unknown(id.to_owned()))
}

/// Forgets ended tasks past their time to live (and at least
/// [`KEPT_AFTER_END`] after their end).
fn sweep(entries: &mut HashMap<String, Entry>, now: Instant) {
    entries.retain(|_, e| match e.ended {
        None => true,
        Some(ended) => now < (e.created + TTL).max(ended + KEPT_AFTER_END),
    });
}

/// Room for one more task of `owner`: forgets its oldest ended task when
/// it holds [`PER_AGENT`]; refuses when all of those are running.
fn make_room(entries: &mut HashMap<String, Entry>, owner: &str) -> Result<(), TaskError> {
    let held = entries.values().filter(|e| e.owner == owner).count();
    if held < PER_AGENT {
        return Ok(());
    }
    let oldest_ended = entries
        .iter()
        .filter(|(_, e)| e.owner == owner)
        .filter_map(|(id, e)| e.ended.map(|at| (at, id.clone())))
        .min();
    match oldest_ended {
        Some((_, id)) => {
            entries.remove(&id);
            Ok(())
        }
        None => Err(TaskError::Full { limit: PER_AGENT }),
    }
}

fn to_object(value: &impl serde::Serialize) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// Task ids nobody can guess: a counter under two keyed hashes (SipHash,
/// a keyed pseudo-random function) with keys the standard library draws
/// from the kernel's random source, without a file read on the runtime.
struct Ids {
    keys: [std::collections::hash_map::RandomState; 2],
    next: AtomicU64,
}

impl Default for Ids {
    fn default() -> Self {
        Self {
            keys: [Default::default(), Default::default()],
            next: AtomicU64::new(0),
        }
    }
}

impl Ids {
    fn next(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let [a, b] = &self.keys;
        let mut h1 = a.build_hasher();
        h1.write_u64(n);
        let mut h2 = b.build_hasher();
        h2.write_u64(n);
        format!("{:016x}{:016x}", h1.finish(), h2.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(text: &str) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text.to_owned()),
        ]))
    }

    /// A call that ends when its token does, with a CancelledError, as the
    /// tools do.
    async fn until_stopped(stop: CancellationToken) -> Result<CallToolResult, ErrorData> {
        stop.cancelled().await;
        Ok(CallToolResult::error(vec![
            rmcp::model::ContentBlock::text("listening was cancelled".to_owned()),
        ]))
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_task_runs_on_and_its_owner_collects_the_result() {
        let tasks = Arc::new(Tasks::new());
        let shutdown = CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tasks
            .start("claude", &shutdown, |running, _| {
                running.say("listening");
                async move {
                    let _ = rx.await;
                    done("turn the lights off")
                }
            })
            .expect("started");
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.poll_interval_ms, Some(250));
        assert_eq!(task.task_id.len(), 32);
        settle().await;
        let now = tasks.get("claude", &task.task_id).expect("its own task");
        assert_eq!(now.status(), TaskStatus::Working);
        assert_eq!(now.task.status_message.as_deref(), Some("listening"));
        // Another agent cannot see it, nor cancel it.
        assert_eq!(
            tasks.get("codex", &task.task_id).map(|_| ()),
            Err(TaskError::Unknown(task.task_id.clone()))
        );
        assert!(tasks.cancel("codex", &task.task_id).is_err());
        tx.send(()).expect("sent");
        settle().await;
        let ended = tasks.get("claude", &task.task_id).expect("kept");
        assert_eq!(ended.status(), TaskStatus::Completed);
        let TaskPayload::Completed { result } = ended.payload else {
            panic!("completed");
        };
        assert_eq!(
            result["content"][0]["text"],
            serde_json::json!("turn the lights off")
        );
        assert_eq!(tasks.running(), 0);
    }

    #[tokio::test]
    async fn cancel_ends_the_call_and_the_task_says_cancelled() {
        let tasks = Arc::new(Tasks::new());
        let shutdown = CancellationToken::new();
        let task = tasks
            .start("claude", &shutdown, |_, stop| until_stopped(stop))
            .expect("started");
        settle().await;
        assert_eq!(tasks.running(), 1);
        tasks.cancel("claude", &task.task_id).expect("cancelled");
        settle().await;
        let ended = tasks.get("claude", &task.task_id).expect("kept");
        assert_eq!(ended.status(), TaskStatus::Cancelled);
        // Cancelling again, after the end, is harmless.
        tasks.cancel("claude", &task.task_id).expect("again");
        assert_eq!(
            tasks.get("claude", &task.task_id).expect("kept").status(),
            TaskStatus::Cancelled
        );
    }

    #[tokio::test]
    async fn the_daemon_stopping_ends_tasks_as_a_call_would() {
        let tasks = Arc::new(Tasks::new());
        let shutdown = CancellationToken::new();
        let task = tasks
            .start("claude", &shutdown, |_, stop| until_stopped(stop))
            .expect("started");
        shutdown.cancel();
        settle().await;
        let ended = tasks.get("claude", &task.task_id).expect("kept");
        // Not a cancel the client asked for: the tool's result says why.
        assert_eq!(ended.status(), TaskStatus::Completed);
    }

    #[tokio::test]
    async fn a_failed_call_is_a_failed_task_with_the_error() {
        let tasks = Arc::new(Tasks::new());
        let task = tasks
            .start("claude", &CancellationToken::new(), |_, _| async {
                Err(ErrorData::invalid_params("bad", None))
            })
            .expect("started");
        settle().await;
        let ended = tasks.get("claude", &task.task_id).expect("kept");
        let TaskPayload::Failed { error } = ended.payload else {
            panic!("failed");
        };
        assert_eq!(error["message"], serde_json::json!("bad"));
    }

    #[tokio::test]
    async fn an_agent_holds_at_most_its_share() {
        let tasks = Arc::new(Tasks::new());
        let shutdown = CancellationToken::new();
        let mut ids = Vec::new();
        for _ in 0..PER_AGENT {
            let task = tasks
                .start("claude", &shutdown, |_, stop| until_stopped(stop))
                .expect("started");
            ids.push(task.task_id);
        }
        let refused = tasks.start("claude", &shutdown, |_, stop| until_stopped(stop));
        assert_eq!(
            refused.map(|_| ()),
            Err(TaskError::Full { limit: PER_AGENT })
        );
        // Others are not held back by it.
        tasks
            .start("codex", &shutdown, |_, stop| until_stopped(stop))
            .expect("another agent's");
        // One ended: it makes way for a new one, and is forgotten.
        tasks.cancel("claude", &ids[3]).expect("cancelled");
        settle().await;
        tasks
            .start("claude", &shutdown, |_, stop| until_stopped(stop))
            .expect("room made");
        assert!(tasks.get("claude", &ids[3]).is_err());
        assert!(tasks.get("claude", &ids[4]).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn ended_tasks_are_forgotten_after_their_time_and_running_ones_stopped() {
        let tasks = Arc::new(Tasks::new());
        let shutdown = CancellationToken::new();
        let quick = tasks
            .start("claude", &shutdown, |_, _| async { done("yes") })
            .expect("started");
        let long = tasks
            .start("claude", &shutdown, |_, stop| until_stopped(stop))
            .expect("started");
        settle().await;
        tokio::time::sleep(TTL - Duration::from_secs(1)).await;
        assert!(tasks.get("claude", &quick.task_id).is_ok(), "still kept");
        assert_eq!(
            tasks.get("claude", &long.task_id).expect("kept").status(),
            TaskStatus::Working
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        settle().await;
        assert!(tasks.get("claude", &quick.task_id).is_err(), "forgotten");
        // The long one was stopped at its time to live, and is kept a
        // while after.
        assert_eq!(
            tasks.get("claude", &long.task_id).expect("kept").status(),
            TaskStatus::Completed
        );
        tokio::time::sleep(KEPT_AFTER_END).await;
        assert!(tasks.get("claude", &long.task_id).is_err());
    }

    #[test]
    fn ids_differ_and_do_not_count() {
        let ids = Ids::default();
        let a = ids.next();
        let b = ids.next();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        // Another daemon's keys give other ids for the same count.
        assert_ne!(Ids::default().next(), a);
    }
}
