//! Speech and timers kept to be said later (`speak_text` with
//! `delay_seconds` or `at`): one SQLite database in the state directory
//! (`schedule.sqlite3`, [`crate::db`], on its own thread), so what an
//! agent asked for outlasts a restart. A row is deleted when it is said,
//! rung or cancelled; the room keeps the timers.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rusqlite::{Connection, params};

use crate::{
    db::{self, DbError},
    worker::Worker,
};

/// The database file in the state directory.
pub const FILE: &str = "schedule.sqlite3";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS later (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT,
    text TEXT NOT NULL,
    voice TEXT,
    rate REAL,
    due_ms INTEGER NOT NULL,
    ring_ms INTEGER,
    set_ms INTEGER
);
";

/// One thing kept to be said.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: i64,
    pub agent: Option<String>,
    pub text: String,
    pub voice: Option<String>,
    pub rate: Option<f64>,
    /// When it was asked for (a timer's countdown starts here).
    pub set: SystemTime,
    pub due: SystemTime,
    /// A timer's longest ringing; `None`: said once.
    pub ring: Option<Duration>,
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn time(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

struct Db {
    conn: Connection,
    path: Option<PathBuf>,
    kept: String,
}

impl Db {
    fn open(dir: &Path) -> Result<Db, DbError> {
        // A store from before timers kept their set time gains the column.
        let db::Kept { conn, path, kept } = db::open_kept(
            dir,
            FILE,
            SCHEMA,
            "SELECT count(*) FROM later",
            "speech kept for later",
            |conn, path| db::add_column(conn, path, "later", "set_ms", "INTEGER"),
        )?;
        Ok(Db { conn, path, kept })
    }

    fn add(&mut self, entry: &Entry) -> Result<i64, DbError> {
        db::on_store_thread();
        self.conn
            .execute(
                "INSERT INTO later (agent, text, voice, rate, due_ms, ring_ms, set_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    entry.agent,
                    entry.text,
                    entry.voice,
                    entry.rate,
                    ms(entry.due),
                    entry.ring.map(|r| r.as_millis() as i64),
                    ms(entry.set),
                ],
            )
            .map_err(db::errors(&self.path))?;
        Ok(self.conn.last_insert_rowid())
    }

    fn remove(&mut self, id: i64) -> Result<bool, DbError> {
        db::on_store_thread();
        self.conn
            .execute("DELETE FROM later WHERE id = ?1", params![id])
            .map(|n| n > 0)
            .map_err(db::errors(&self.path))
    }

    fn all(&mut self) -> Result<Vec<Entry>, DbError> {
        db::on_store_thread();
        let err = db::errors(&self.path);
        let mut statement = self
            .conn
            .prepare("SELECT id, agent, text, voice, rate, due_ms, ring_ms, set_ms FROM later ORDER BY due_ms, id")
            .map_err(&err)?;
        let rows = statement
            .query_map([], |r| {
                let due = time(r.get(5)?);
                Ok(Entry {
                    id: r.get(0)?,
                    agent: r.get(1)?,
                    text: r.get(2)?,
                    voice: r.get(3)?,
                    rate: r.get(4)?,
                    // Kept before the set time was: its countdown starts
                    // from when it is read.
                    set: r
                        .get::<_, Option<i64>>(7)?
                        .map_or_else(SystemTime::now, time),
                    due,
                    ring: r
                        .get::<_, Option<i64>>(6)?
                        .map(|ms| Duration::from_millis(ms.max(0) as u64)),
                })
            })
            .map_err(&err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }
}

/// The store's handle.
pub struct ScheduleStore {
    worker: Worker<Db>,
    /// Where it is kept, or why only in memory.
    pub kept: String,
}

impl ScheduleStore {
    /// Opens (or creates) it in `dir` on a thread of its own (blocking:
    /// call it off the async runtime); a directory that cannot be used
    /// leaves it in memory, logged.
    pub fn open(dir: &Path) -> Result<ScheduleStore, DbError> {
        let dir = dir.to_path_buf();
        let worker = Worker::open("hark-schedule", move || Db::open(&dir))?;
        let kept = worker.call_blocking(|db| db.kept.clone())?;
        Ok(ScheduleStore { worker, kept })
    }

    /// Keeps `entry` (its `id` is ignored); the id it got.
    pub async fn add(&self, entry: Entry) -> Result<i64, DbError> {
        self.worker.call(move |db| db.add(&entry)).await?
    }

    /// Forgets `id`; whether it was kept.
    pub async fn remove(&self, id: i64) -> Result<bool, DbError> {
        self.worker.call(move |db| db.remove(id)).await?
    }

    /// Everything kept, the soonest first.
    pub async fn all(&self) -> Result<Vec<Entry>, DbError> {
        self.worker.call(Db::all).await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str, due: SystemTime, ring: Option<Duration>) -> Entry {
        Entry {
            id: 0,
            agent: Some("cook".into()),
            text: text.into(),
            voice: None,
            rate: Some(1.2),
            set: due - Duration::from_secs(30),
            due,
            ring,
        }
    }

    async fn open(dir: &Path) -> ScheduleStore {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || ScheduleStore::open(&dir).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn what_is_kept_outlasts_a_restart_and_goes_when_removed() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let store = open(dir.path()).await;
        let ring = Some(Duration::from_secs(60));
        let pasta = store
            .add(entry("pasta", now + Duration::from_secs(600), ring))
            .await
            .unwrap();
        let tea = store
            .add(entry("tea", now + Duration::from_secs(60), None))
            .await
            .unwrap();
        drop(store);
        let store = open(dir.path()).await;
        let all = store.all().await.unwrap();
        assert_eq!(
            all.iter()
                .map(|e| (e.id, e.text.as_str()))
                .collect::<Vec<_>>(),
            [(tea, "tea"), (pasta, "pasta")],
            "the soonest first, across the restart"
        );
        assert_eq!(all[1].ring, ring);
        assert_eq!(all[1].due, now + Duration::from_secs(600));
        assert_eq!(all[1].set, now + Duration::from_secs(570));
        assert_eq!(all[0].rate, Some(1.2));
        assert!(store.remove(tea).await.unwrap());
        assert!(!store.remove(tea).await.unwrap(), "gone already");
        assert_eq!(store.all().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_store_from_before_the_set_time_gains_it_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let due_ms = 1_900_000_000_000i64;
        {
            // The table as it was made before `set_ms`, with a timer in it.
            let old = Connection::open(dir.path().join(FILE)).unwrap();
            old.execute_batch(
                "CREATE TABLE later (id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT,
                 text TEXT NOT NULL, voice TEXT, rate REAL, due_ms INTEGER NOT NULL,
                 ring_ms INTEGER);",
            )
            .unwrap();
            old.execute(
                "INSERT INTO later (text, due_ms, ring_ms) VALUES ('old', ?1, 60000)",
                params![due_ms],
            )
            .unwrap();
        }
        let before = SystemTime::now();
        let store = open(dir.path()).await;
        assert!(store.kept.starts_with("kept in "), "{}", store.kept);
        let all = store.all().await.unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].text, "old");
        assert_eq!(all[0].due, time(due_ms));
        assert!(
            all[0].set >= before,
            "an old row's countdown starts when it is read"
        );
        // New rows keep theirs.
        let due = time(due_ms) + Duration::from_secs(60);
        let id = store.add(entry("new", due, None)).await.unwrap();
        drop(store);
        let all = open(dir.path()).await.all().await.unwrap();
        let new = all.iter().find(|e| e.id == id).unwrap();
        assert_eq!(new.set, due - Duration::from_secs(30));
    }
}
