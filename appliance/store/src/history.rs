//! What was said in the room: the utterances heard (an agent listened, or
//! the person spoke a message) and the texts spoken, with who, when, why
//! the recording ended, how long, and whom a message went to. One SQLite
//! database in the state directory (`history.sqlite3`, [`crate::db`], on
//! the history's own thread),
//! kept to `history.max_rows` rows and `history.keep_days` days; the audio
//! is kept only with `history.keep_audio = true`, as WAV files in
//! `history-audio/` next to it, deleted with their rows.
//!
//! The history follows the event stream ([`record`]): nothing on the audio
//! path or in a tool waits for it. A write that fails (a full disk, a
//! read-only state directory) is logged, counted and shown in
//! `get_status`; the tools go on answering.

use std::{
    collections::{HashMap, VecDeque},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use hark_core::events::{self, Bus, Event};
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{
    db::{self, DbError},
    worker::Worker,
};

/// The database file in the state directory.
pub const FILE: &str = "history.sqlite3";
/// The directory of kept audio beside it.
pub const AUDIO_DIR: &str = "history-audio";
/// How many recordings' audio wait for their row (`keep_audio`).
const STASH: usize = 8;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS captures (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT,
    text TEXT NOT NULL,
    end_reason TEXT,
    duration REAL,
    delivered_to TEXT,
    audio TEXT
);
CREATE INDEX IF NOT EXISTS captures_at ON captures (at_ms);
";

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An agent listened (`transcribe_voice`, `converse`, `confirm`,
    /// `choose`) and the person spoke.
    Heard,
    /// The person spoke a message unprompted (the button).
    Message,
    /// Hark spoke an agent's text (or its own words).
    Spoken,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Heard => "heard",
            Kind::Message => "message",
            Kind::Spoken => "spoken",
        }
    }

    fn parse(text: &str) -> Kind {
        match text {
            "message" => Kind::Message,
            "spoken" => Kind::Spoken,
            _ => Kind::Heard,
        }
    }
}

/// One row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capture {
    pub id: i64,
    /// When (RFC 3339, UTC).
    pub at: String,
    pub kind: Kind,
    /// The agent that listened or spoke; `None` for the person's message
    /// and for Hark's own words.
    pub agent: Option<String>,
    pub text: String,
    /// Why the recording ended (`end_of_speech`, `stopped`, …), or how the
    /// speech ended (`spoken`, `stopped`, `failed`).
    pub end_reason: Option<String>,
    /// Seconds of speech.
    pub duration: Option<f64>,
    /// Whom the utterance reached: the listening agent, or the agent that
    /// took the person's message (`None` while it waits).
    pub delivered_to: Option<String>,
    /// The kept audio's file name in `history-audio/` (with
    /// `history.keep_audio`).
    pub audio: Option<String>,
}

/// A row to add.
pub struct New {
    pub at: SystemTime,
    pub kind: Kind,
    pub agent: Option<String>,
    pub text: String,
    pub end_reason: Option<String>,
    pub duration: Option<f64>,
    pub delivered_to: Option<String>,
    /// The recording it came from (its stashed audio is kept with it).
    pub listen: Option<u64>,
}

/// `[history]`'s settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_rows: usize,
    pub keep: Duration,
    pub keep_audio: bool,
}

/// A filter for [`History::list`].
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub limit: usize,
    /// Rows older than this id (paging back).
    pub before: Option<i64>,
    pub agent: Option<String>,
    pub kind: Option<Kind>,
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The database and the kept audio, on the history's thread.
struct Db {
    conn: Connection,
    path: Option<PathBuf>,
    audio_dir: Option<PathBuf>,
    settings: Settings,
    /// Where it is kept, or why only in memory.
    kept: String,
    /// Rows kept, for `get_status` (counted here after each change).
    rows: Arc<AtomicI64>,
}

impl Db {
    fn open(dir: &Path, settings: Settings, rows: Arc<AtomicI64>) -> Result<Db, DbError> {
        let db::Kept { conn, path, kept } = db::open_kept(
            dir,
            FILE,
            SCHEMA,
            "SELECT count(*) FROM captures",
            "the history",
            |_, _| Ok(()),
        )?;
        let audio_dir = path
            .as_ref()
            .and_then(|p| p.parent())
            .map(|d| d.join(AUDIO_DIR));
        Ok(Db {
            conn,
            path,
            audio_dir,
            settings,
            kept,
            rows,
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> DbError + use<> {
        db::errors(&self.path)
    }

    fn count(&mut self) {
        db::on_store_thread();
        let rows = self
            .conn
            .query_row("SELECT count(*) FROM captures", [], |r| r.get::<_, i64>(0))
            .unwrap_or(-1);
        self.rows.store(rows, Ordering::Relaxed);
    }

    /// Adds a row, with its recording's audio as a file when given.
    fn add(&mut self, row: New, samples: Option<Vec<f32>>) -> Result<i64, DbError> {
        db::on_store_thread();
        let audio = match (row.listen, &self.audio_dir, samples) {
            (Some(listen), Some(dir), Some(samples)) => write_audio(dir, listen, row.at, &samples),
            _ => None,
        };
        // `execute`, not `INSERT … RETURNING` through `query_row`: a commit
        // that fails (a full disk) must be an error, and `query_row` does not
        // report what stepping the statement to its end says.
        self.conn
            .execute(
                "INSERT INTO captures (at_ms, kind, agent, text, end_reason, duration, delivered_to, audio) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    ms(row.at),
                    row.kind.as_str(),
                    row.agent,
                    row.text,
                    row.end_reason,
                    row.duration,
                    row.delivered_to,
                    audio,
                ],
            )
            .map_err(self.err())?;
        let id = self.conn.last_insert_rowid();
        let trimmed = self.trim(SystemTime::now());
        self.count();
        trimmed.map(|()| id)
    }

    fn delivered(&mut self, row: i64, agent: &str) -> Result<(), DbError> {
        db::on_store_thread();
        self.conn
            .execute(
                "UPDATE captures SET delivered_to = ?1 WHERE id = ?2",
                params![agent, row],
            )
            .map(|_| ())
            .map_err(self.err())
    }

    /// Drops rows beyond `max_rows` and older than `keep`, with their audio.
    fn trim(&mut self, now: SystemTime) -> Result<(), DbError> {
        db::on_store_thread();
        let oldest = ms(now
            .checked_sub(self.settings.keep)
            .unwrap_or(SystemTime::UNIX_EPOCH));
        let err = self.err();
        let max_rows = self.settings.max_rows as i64;
        let tx = self.conn.transaction().map_err(&err)?;
        let files = {
            let mut statement = tx
                .prepare(
                    "DELETE FROM captures WHERE at_ms < ?1 OR id IN \
                     (SELECT id FROM captures ORDER BY id DESC LIMIT -1 OFFSET ?2) RETURNING audio",
                )
                .map_err(&err)?;
            statement
                .query_map(params![oldest, max_rows], |r| r.get::<_, Option<String>>(0))
                .map_err(&err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(&err)?
        };
        tx.commit().map_err(&err)?;
        if let Some(dir) = &self.audio_dir {
            for file in files.into_iter().flatten() {
                let _ = std::fs::remove_file(dir.join(file));
            }
        }
        Ok(())
    }

    fn list(&mut self, query: &Query) -> Result<(Vec<Capture>, bool), DbError> {
        db::on_store_thread();
        let mut statement = self
            .conn
            .prepare(
                "SELECT id, at_ms, kind, agent, text, end_reason, duration, delivered_to, audio \
                 FROM captures WHERE (?1 IS NULL OR id < ?1) AND (?2 IS NULL OR agent = ?2) \
                 AND (?3 IS NULL OR kind = ?3) ORDER BY id DESC LIMIT ?4",
            )
            .map_err(self.err())?;
        let rows = statement
            .query_map(
                params![
                    query.before,
                    query.agent,
                    query.kind.map(Kind::as_str),
                    query.limit as i64 + 1
                ],
                |r| {
                    let at_ms: i64 = r.get(1)?;
                    Ok(Capture {
                        id: r.get(0)?,
                        at: humantime::format_rfc3339_millis(
                            SystemTime::UNIX_EPOCH + Duration::from_millis(at_ms.max(0) as u64),
                        )
                        .to_string(),
                        kind: Kind::parse(&r.get::<_, String>(2)?),
                        agent: r.get(3)?,
                        text: r.get(4)?,
                        end_reason: r.get(5)?,
                        duration: r.get(6)?,
                        delivered_to: r.get(7)?,
                        audio: r.get(8)?,
                    })
                },
            )
            .map_err(self.err())?;
        let mut captures = rows.collect::<Result<Vec<_>, _>>().map_err(self.err())?;
        let more = captures.len() > query.limit;
        captures.truncate(query.limit);
        Ok((captures, more))
    }
}

/// The audio as a 16 kHz WAV file; its name, or `None` if it could not be
/// written (logged).
fn write_audio(dir: &Path, listen: u64, at: SystemTime, samples: &[f32]) -> Option<String> {
    let name = format!("{}-{listen}.wav", ms(at));
    let write = || -> Result<(), Box<dyn std::error::Error>> {
        std::fs::create_dir_all(dir)?;
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut wav = hound::WavWriter::create(dir.join(&name), spec)?;
        for s in samples {
            wav.write_sample((s.clamp(-1.0, 1.0) * 32767.0) as i16)?;
        }
        wav.finalize()?;
        Ok(())
    };
    match write() {
        Ok(()) => Some(name),
        Err(e) => {
            tracing::warn!(error = %e, "history: cannot keep the audio");
            None
        }
    }
}

pub struct History {
    worker: Worker<Db>,
    settings: Settings,
    /// Where it is kept, or why only in memory.
    kept: String,
    rows: Arc<AtomicI64>,
    /// Writes that failed, and the last failure.
    failures: AtomicU64,
    last_failure: Mutex<Option<String>>,
    /// Recordings' audio waiting for their row (`keep_audio`), newest last.
    stash: Mutex<VecDeque<(u64, Vec<f32>)>>,
}

impl History {
    /// Opens (or creates) the history in `dir` on a thread of its own
    /// (blocking until it is open: call it off the async runtime); a
    /// directory that cannot be used leaves it in memory, logged and
    /// reported.
    pub fn open(dir: &Path, settings: Settings) -> Result<History, DbError> {
        let rows = Arc::new(AtomicI64::new(0));
        let (dir, db_settings, db_rows) = (dir.to_path_buf(), settings.clone(), Arc::clone(&rows));
        let worker = Worker::open("hark-history", move || Db::open(&dir, db_settings, db_rows))?;
        let (kept, trimmed) = worker.call_blocking(|db| {
            let trimmed = db.trim(SystemTime::now());
            db.count();
            (db.kept.clone(), trimmed)
        })?;
        let history = History {
            worker,
            settings,
            kept,
            rows,
            failures: AtomicU64::new(0),
            last_failure: Mutex::new(None),
            stash: Mutex::new(VecDeque::new()),
        };
        if let Err(e) = trimmed {
            history.failed(&e);
        }
        Ok(history)
    }

    fn failed(&self, e: &DbError) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        // Once, then quietly: a full disk would otherwise log every row.
        if n == 1 || n.is_power_of_two() {
            tracing::error!(error = %e, failures = n, "history: cannot write");
        }
        *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
    }

    /// One line for `get_status` (from memory: it never waits for the
    /// database).
    pub fn status(&self) -> String {
        let rows = self.rows.load(Ordering::Relaxed);
        let failures = self.failures.load(Ordering::Relaxed);
        let failing = match failures {
            0 => String::new(),
            n => format!(
                "; {n} write(s) failed, last: {}",
                self.last_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_deref()
                    .unwrap_or("?")
            ),
        };
        format!("{rows} rows; {}{failing}", self.kept)
    }

    /// Keeps a recording's audio for its row (`history.keep_audio`).
    pub fn stash_audio(&self, listen: u64, samples: &[f32]) {
        if !self.settings.keep_audio {
            return;
        }
        let mut stash = self.stash.lock().unwrap_or_else(PoisonError::into_inner);
        if stash.len() >= STASH {
            stash.pop_front();
        }
        stash.push_back((listen, samples.to_vec()));
    }

    fn take_audio(&self, listen: u64) -> Option<Vec<f32>> {
        let mut stash = self.stash.lock().unwrap_or_else(PoisonError::into_inner);
        let at = stash.iter().position(|(id, _)| *id == listen)?;
        stash.remove(at).map(|(_, samples)| samples)
    }

    /// Adds a row (what the event stream's consumer does for each
    /// utterance and speech); returns its id.
    pub async fn add(&self, row: New) -> Result<i64, DbError> {
        let samples = row.listen.and_then(|listen| self.take_audio(listen));
        self.worker.call(move |db| db.add(row, samples)).await?
    }

    async fn delivered(&self, row: i64, agent: String) -> Result<(), DbError> {
        self.worker
            .call(move |db| db.delivered(row, &agent))
            .await?
    }

    /// The rows `query` asks for, newest first, and whether older ones
    /// match too.
    pub async fn list(&self, query: Query) -> Result<(Vec<Capture>, bool), DbError> {
        self.worker.call(move |db| db.list(&query)).await?
    }
}

/// Writes the history from the event stream until `stop` is cancelled,
/// then writes what the stream still holds and returns. The daemon stops it
/// last, once the speech and listening that shutdown cut off have said how
/// they ended, so those are kept too. The writes run on the history's
/// thread; a slow disk only delays this consumer (which then skips,
/// counted, what it fell behind by).
pub async fn record(history: Arc<History>, bus: Bus, stop: CancellationToken) {
    let mut events = bus.subscribe();
    let mut stopping = false;
    // The person's messages: their recording's row, by recording and by
    // inbox id, until an agent takes them.
    let mut by_listen: HashMap<u64, i64> = HashMap::new();
    let mut by_message: HashMap<i64, i64> = HashMap::new();
    loop {
        let event = if stopping {
            match events.try_recv() {
                Ok(event) => Some(event),
                Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => return,
            }
        } else {
            tokio::select! {
                () = stop.cancelled() => {
                    stopping = true;
                    continue;
                }
                event = events::next(&mut events, "history") => event,
            }
        };
        let Some(stamped) = event else { return };
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(stamped.at_ms);
        let row = match &stamped.event {
            Event::UtteranceTranscribed {
                listen,
                agent,
                text,
                duration,
                end_reason,
                ..
            } => Some(New {
                at,
                kind: if agent.is_some() {
                    Kind::Heard
                } else {
                    Kind::Message
                },
                agent: agent.clone(),
                text: text.clone(),
                end_reason: Some(end_reason.to_string()),
                duration: Some(*duration),
                delivered_to: agent.clone(),
                listen: Some(*listen),
            }),
            Event::SpeakingEnded {
                agent,
                text,
                outcome,
                seconds,
                ..
            } => Some(New {
                at,
                kind: Kind::Spoken,
                agent: agent.clone(),
                text: text.clone(),
                end_reason: Some(outcome.as_str().to_owned()),
                duration: Some(*seconds),
                delivered_to: None,
                listen: None,
            }),
            Event::InboxArrived {
                id,
                listen: Some(listen),
                ..
            } => {
                if let Some(row) = by_listen.remove(listen) {
                    by_message.insert(*id, row);
                }
                None
            }
            Event::InboxTaken { id, agent, .. } => {
                if let Some(row) = by_message.remove(id)
                    && let Err(e) = history.delivered(row, agent.clone()).await
                {
                    history.failed(&e);
                }
                None
            }
            _ => None,
        };
        let Some(row) = row else { continue };
        let person = row.kind == Kind::Message;
        let listen = row.listen;
        match history.add(row).await {
            Ok(id) => {
                if let (true, Some(listen)) = (person, listen) {
                    by_listen.insert(listen, id);
                }
            }
            Err(e) => history.failed(&e),
        }
        // Links to messages no agent will take stay bounded.
        if by_message.len() > 1000 {
            by_message.clear();
        }
        if by_listen.len() > 100 {
            by_listen.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(max_rows: usize) -> Settings {
        Settings {
            max_rows,
            keep: Duration::from_secs(3600),
            keep_audio: true,
        }
    }

    fn row(kind: Kind, agent: Option<&str>, text: &str, listen: Option<u64>) -> New {
        New {
            at: SystemTime::now(),
            kind,
            agent: agent.map(str::to_owned),
            text: text.into(),
            end_reason: Some("end_of_speech".into()),
            duration: Some(1.5),
            delivered_to: agent.map(str::to_owned),
            listen,
        }
    }

    #[tokio::test]
    async fn rows_are_listed_newest_first_filtered_and_paged() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::open(dir.path(), settings(100)).unwrap();
        for i in 0..5 {
            history
                .add(row(
                    Kind::Heard,
                    Some("claude"),
                    &format!("heard {i}"),
                    None,
                ))
                .await
                .unwrap();
        }
        history
            .add(row(Kind::Spoken, Some("cursor"), "spoken", None))
            .await
            .unwrap();
        let all = async |q: Query| history.list(q).await.unwrap();
        let (page, more) = all(Query {
            limit: 2,
            ..Query::default()
        })
        .await;
        assert_eq!(
            page.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
            ["spoken", "heard 4"]
        );
        assert!(more);
        let (page, more) = all(Query {
            limit: 10,
            before: Some(page[1].id),
            ..Query::default()
        })
        .await;
        assert_eq!(page.len(), 4);
        assert!(!more);
        let (cursor, _) = all(Query {
            limit: 10,
            agent: Some("cursor".into()),
            ..Query::default()
        })
        .await;
        assert_eq!(cursor.len(), 1);
        let (spoken, _) = all(Query {
            limit: 10,
            kind: Some(Kind::Spoken),
            ..Query::default()
        })
        .await;
        assert_eq!(spoken[0].kind, Kind::Spoken);
    }

    #[tokio::test]
    async fn retention_drops_the_oldest_rows_with_their_audio() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::open(dir.path(), settings(3)).unwrap();
        for listen in 0..5u64 {
            history.stash_audio(listen, &[0.1; 1600]);
            history
                .add(row(
                    Kind::Message,
                    None,
                    &format!("m{listen}"),
                    Some(listen),
                ))
                .await
                .unwrap();
        }
        let (rows, _) = history
            .list(Query {
                limit: 10,
                ..Query::default()
            })
            .await
            .unwrap();
        assert_eq!(
            rows.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
            ["m4", "m3", "m2"]
        );
        let files = std::fs::read_dir(dir.path().join(AUDIO_DIR))
            .unwrap()
            .count();
        assert_eq!(files, 3, "the dropped rows' audio went with them");
        assert!(rows.iter().all(|c| c.audio.is_some()));
        // Old rows go too.
        let old = New {
            at: SystemTime::now() - Duration::from_secs(7200),
            ..row(Kind::Heard, Some("a"), "old", None)
        };
        history.add(old).await.unwrap();
        let (rows, _) = history
            .list(Query {
                limit: 10,
                ..Query::default()
            })
            .await
            .unwrap();
        assert!(rows.iter().all(|c| c.text != "old"), "older than keep_days");
    }

    #[tokio::test]
    async fn a_state_directory_that_cannot_be_made_leaves_the_history_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let history = History::open(&file.join("state"), settings(10)).unwrap();
        assert!(
            history.status().contains("in memory only"),
            "{}",
            history.status()
        );
        history
            .add(row(Kind::Heard, Some("a"), "still kept", None))
            .await
            .unwrap();
        let (rows, _) = history
            .list(Query {
                limit: 5,
                ..Query::default()
            })
            .await
            .unwrap();
        assert_eq!(rows[0].text, "still kept");
        assert_eq!(rows[0].audio, None, "no directory for audio");
    }

    #[tokio::test]
    async fn rows_survive_reopening_and_a_corrupt_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        {
            let history = History::open(dir.path(), settings(10)).unwrap();
            history
                .add(row(Kind::Heard, Some("a"), "kept", None))
                .await
                .unwrap();
        }
        let history = History::open(dir.path(), settings(10)).unwrap();
        assert!(
            history.status().starts_with("1 rows; kept in "),
            "{}",
            history.status()
        );
        drop(history);
        std::fs::write(dir.path().join(FILE), vec![7u8; 4096]).unwrap();
        let _ = std::fs::remove_file(dir.path().join(format!("{FILE}-wal")));
        let history = History::open(dir.path(), settings(10)).unwrap();
        assert!(
            history.status().starts_with("0 rows"),
            "{}",
            history.status()
        );
        let aside = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("history.sqlite3.corrupt-")
            })
            .count();
        assert!(aside >= 1);
    }
}
