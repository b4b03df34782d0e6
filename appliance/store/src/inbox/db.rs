//! Where the voice inbox keeps its messages: one SQLite database in the
//! state directory (`inbox.sqlite3`), so a message the person spoke survives
//! a restart, `kill -9` and a power cut until an agent takes it or it
//! expires.
//!
//! Every change is one transaction ([`crate::db`]: WAL, `synchronous =
//! FULL`, an unreadable file moved aside). Taking a message is a single
//! `UPDATE … WHERE taken_by IS NULL`, so two agents can never take the
//! same one. A state directory that cannot be written at all leaves the
//! inbox in memory, which the caller reports.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rusqlite::{Connection, OptionalExtension, params};

/// The database file in the state directory.
pub const FILE: &str = "inbox.sqlite3";

pub use crate::db::DbError as StoreError;

/// A message to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub text: String,
    /// When the person began speaking.
    pub spoken_at: SystemTime,
    /// When the transcript was ready.
    pub transcribed_at: SystemTime,
    /// Seconds of speech.
    pub duration: f64,
    pub confidence: Option<f32>,
    /// The agent the message is for, as the person named it (or the
    /// default agent); `None`: whichever agent asks first.
    pub addressed_to: Option<String>,
    /// `addressed_to` in the form agents are compared by.
    pub addressed_key: Option<String>,
    /// How it was addressed: `name`, `default` or `anyone`.
    pub addressed_by: String,
    pub expires_at: SystemTime,
    /// The recording it came from, on the event stream (not kept: a number
    /// of this run of the daemon).
    pub listen: Option<u64>,
}

/// A kept message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: i64,
    pub new: NewMessage,
    pub taken_by: Option<String>,
}

/// The inbox's database, on the inbox's thread.
pub struct InboxDb {
    conn: Connection,
    /// Where it is kept; `None`: in memory.
    pub path: Option<PathBuf>,
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn us(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn from_ms(v: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(v.max(0) as u64)
}

fn from_us(v: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(v.max(0) as u64)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    spoken_at_ms INTEGER NOT NULL,
    transcribed_at_us INTEGER NOT NULL,
    duration REAL NOT NULL,
    confidence REAL,
    addressed_to TEXT,
    addressed_key TEXT,
    addressed_by TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    taken_by TEXT,
    taken_at_ms INTEGER
);
CREATE INDEX IF NOT EXISTS waiting ON messages (taken_by, id);
";

const COLUMNS: &str = "id, text, spoken_at_ms, transcribed_at_us, duration, confidence, \
                       addressed_to, addressed_key, addressed_by, expires_at_ms, taken_by";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: r.get(0)?,
        new: NewMessage {
            text: r.get(1)?,
            spoken_at: from_ms(r.get(2)?),
            transcribed_at: from_us(r.get(3)?),
            duration: r.get(4)?,
            confidence: r.get::<_, Option<f64>>(5)?.map(|c| c as f32),
            addressed_to: r.get(6)?,
            addressed_key: r.get(7)?,
            addressed_by: r.get(8)?,
            expires_at: from_ms(r.get(9)?),
            listen: None,
        },
        taken_by: r.get(10)?,
    })
}

impl InboxDb {
    /// Opens (or creates) the inbox in `dir`. Returns a warning when an
    /// unreadable database had to be moved aside.
    pub fn open(dir: &Path) -> Result<(InboxDb, Option<String>), StoreError> {
        let (conn, path, warning) =
            crate::db::open(dir, FILE, SCHEMA, "SELECT count(*) FROM messages")?;
        Ok((
            InboxDb {
                conn,
                path: Some(path),
            },
            warning,
        ))
    }

    /// An inbox that lasts as long as the process (when the state
    /// directory cannot be used).
    pub fn in_memory() -> Result<InboxDb, StoreError> {
        Ok(InboxDb {
            conn: crate::db::in_memory(SCHEMA)?,
            path: None,
        })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        crate::db::errors(&self.path)(source)
    }

    /// Keeps `message`, already taken by `taken_by` when that agent was
    /// waiting for it.
    pub fn insert(
        &mut self,
        message: &NewMessage,
        taken_by: Option<&str>,
        now: SystemTime,
    ) -> Result<Message, StoreError> {
        crate::db::on_store_thread();
        let n = message;
        // `execute` steps the statement to its end, so a commit that fails
        // (a full disk) is an error here, never a message thought kept.
        self.conn
            .execute(
                "INSERT INTO messages (text, spoken_at_ms, transcribed_at_us, duration, confidence, \
                 addressed_to, addressed_key, addressed_by, expires_at_ms, taken_by, taken_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    n.text,
                    ms(n.spoken_at),
                    us(n.transcribed_at),
                    n.duration,
                    n.confidence.map(f64::from),
                    n.addressed_to,
                    n.addressed_key,
                    n.addressed_by,
                    ms(n.expires_at),
                    taken_by,
                    taken_by.map(|_| ms(now)),
                ],
            )
            .map_err(|e| self.err(e))?;
        let id = self.conn.last_insert_rowid();
        Ok(Message {
            id,
            new: message.clone(),
            taken_by: taken_by.map(str::to_owned),
        })
    }

    /// Takes the oldest message `agent` (its key) may have: addressed to
    /// it or to anyone, untaken, unexpired. Atomic: a message is taken
    /// once.
    pub fn take_oldest(
        &mut self,
        agent: &str,
        key: &str,
        now: SystemTime,
    ) -> Result<Option<Message>, StoreError> {
        self.take_first(
            "(addressed_key IS NULL OR addressed_key = ?3)",
            params![agent, ms(now), key],
        )
    }

    /// Takes the oldest message addressed to `key` by `by` for `agent`,
    /// untaken, unexpired (a continuation of the agent's own turn).
    pub fn take_addressed_by(
        &mut self,
        agent: &str,
        key: &str,
        by: &str,
        now: SystemTime,
    ) -> Result<Option<Message>, StoreError> {
        self.take_first(
            "addressed_key = ?3 AND addressed_by = ?4",
            params![agent, ms(now), key, by],
        )
    }

    /// Takes the oldest untaken, unexpired message that `filter` (SQL on
    /// `params` from ?3 on) admits, for the agent ?1 at time ?2. Atomic: a
    /// message is taken once.
    fn take_first(
        &mut self,
        filter: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<Option<Message>, StoreError> {
        crate::db::on_store_thread();
        let sql = format!(
            "UPDATE messages SET taken_by = ?1, taken_at_ms = ?2 WHERE id = ( \
               SELECT id FROM messages WHERE taken_by IS NULL AND expires_at_ms > ?2 \
               AND {filter} ORDER BY id LIMIT 1) \
             AND taken_by IS NULL RETURNING {COLUMNS}"
        );
        self.in_transaction(|tx| tx.query_row(&sql, params, row).optional())
    }

    /// Runs `work` in a transaction and commits it: `UPDATE … RETURNING`
    /// read through `query_row` would not report a failed commit.
    fn in_transaction<T>(
        &mut self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let err = crate::db::errors(&self.path);
        let tx = self.conn.transaction().map_err(&err)?;
        let value = work(&tx).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(value)
    }

    /// Hands a taken message to another agent.
    pub fn reassign(
        &mut self,
        id: i64,
        agent: &str,
        now: SystemTime,
    ) -> Result<Message, StoreError> {
        crate::db::on_store_thread();
        let sql = format!(
            "UPDATE messages SET taken_by = ?1, taken_at_ms = ?2 WHERE id = ?3 RETURNING {COLUMNS}"
        );
        self.in_transaction(|tx| tx.query_row(&sql, params![agent, ms(now), id], row))
    }

    /// Puts a taken message back (its agent left before receiving it).
    pub fn give_back(&mut self, id: i64) -> Result<(), StoreError> {
        crate::db::on_store_thread();
        self.conn
            .execute(
                "UPDATE messages SET taken_by = NULL, taken_at_ms = NULL WHERE id = ?1",
                params![id],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Untaken, unexpired messages, oldest first; with `key`, those that
    /// agent may take.
    pub fn waiting(&self, key: Option<&str>, now: SystemTime) -> Result<Vec<Message>, StoreError> {
        crate::db::on_store_thread();
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE taken_by IS NULL AND expires_at_ms > ?1 \
             AND (?2 IS NULL OR addressed_key IS NULL OR addressed_key = ?2) ORDER BY id"
        );
        let mut statement = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params![ms(now), key], row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// How many messages wait untaken.
    pub fn count_waiting(&self, now: SystemTime) -> Result<usize, StoreError> {
        crate::db::on_store_thread();
        self.conn
            .query_row(
                "SELECT count(*) FROM messages WHERE taken_by IS NULL AND expires_at_ms > ?1",
                params![ms(now)],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(|e| self.err(e))
    }

    /// Deletes what has expired (taken or not) and, beyond `max` waiting,
    /// the oldest untaken. Returns the untaken ids dropped: those that
    /// expired, and those dropped for room.
    pub fn purge(
        &mut self,
        max: usize,
        now: SystemTime,
    ) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        crate::db::on_store_thread();
        let err = crate::db::errors(&self.path);
        let tx = self.conn.transaction().map_err(&err)?;
        let untaken = |sql: &str, value: i64| -> rusqlite::Result<Vec<i64>> {
            let mut statement = tx.prepare(sql)?;
            let rows = statement.query_map(params![value], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?))
            })?;
            let mut ids = Vec::new();
            for row in rows {
                let (id, untaken) = row?;
                if untaken {
                    ids.push(id);
                }
            }
            Ok(ids)
        };
        let expired = untaken(
            "DELETE FROM messages WHERE expires_at_ms <= ?1 RETURNING id, taken_by IS NULL",
            ms(now),
        )
        .map_err(&err)?;
        let overflow = untaken(
            "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE taken_by IS NULL \
             ORDER BY id DESC LIMIT -1 OFFSET ?1) RETURNING id, 1",
            max as i64,
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok((expired, overflow))
    }

    /// When the next message expires.
    pub fn next_expiry(&self) -> Result<Option<SystemTime>, StoreError> {
        crate::db::on_store_thread();
        self.conn
            .query_row("SELECT min(expires_at_ms) FROM messages", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .map(|v| v.map(from_ms))
            .map_err(|e| self.err(e))
    }
}
