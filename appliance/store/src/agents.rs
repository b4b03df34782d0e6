//! The agents' settings changed at run time (the status page,
//! `agent_settings`): `agents.sqlite3` in the state directory
//! ([`crate::db`], on its own thread), a row per agent holding its whole
//! settings in place of `hark.toml`'s, so a change outlasts a restart and
//! a reset brings `hark.toml`'s back. The settings are kept as JSON (the
//! shape of `[agents.NAME]`), so a setting added later needs no new column;
//! a row a later version wrote that this one cannot read is left alone and
//! said in the log, never dropped.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::SystemTime,
};

use hark_core::agents::AgentConfig;
use rusqlite::{Connection, params};

use crate::{
    db::{self, DbError},
    worker::Worker,
};

/// The database file in the state directory.
pub const FILE: &str = "agents.sqlite3";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agent_settings (
    name TEXT PRIMARY KEY,
    settings TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
";

struct Db {
    conn: Connection,
    path: Option<PathBuf>,
    kept: String,
}

impl Db {
    fn open(dir: &Path) -> Result<Db, DbError> {
        let db::Kept { conn, path, kept } = db::open_kept(
            dir,
            FILE,
            SCHEMA,
            "SELECT count(*) FROM agent_settings",
            "the agents' settings changed at run time",
            |_, _| Ok(()),
        )?;
        Ok(Db { conn, path, kept })
    }

    fn put(&mut self, name: &str, settings: &str) -> Result<(), DbError> {
        db::on_store_thread();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.conn
            .execute(
                "INSERT INTO agent_settings (name, settings, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET settings = excluded.settings, updated_ms = excluded.updated_ms",
                params![name, settings, now],
            )
            .map(|_| ())
            .map_err(db::errors(&self.path))
    }

    fn remove(&mut self, names: &[String]) -> Result<usize, DbError> {
        db::on_store_thread();
        let mut removed = 0;
        for name in names {
            removed += self
                .conn
                .execute("DELETE FROM agent_settings WHERE name = ?1", params![name])
                .map_err(db::errors(&self.path))?;
        }
        Ok(removed)
    }

    fn all(&mut self) -> Result<Vec<(String, String)>, DbError> {
        db::on_store_thread();
        let err = db::errors(&self.path);
        let mut statement = self
            .conn
            .prepare("SELECT name, settings FROM agent_settings ORDER BY name")
            .map_err(&err)?;
        let rows = statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(&err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }
}

/// Why a change could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum AgentStoreError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Stopped(#[from] crate::worker::Stopped),
    #[error("cannot write the settings as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The store's handle.
pub struct AgentStore {
    worker: Worker<Db>,
    /// Where it is kept, or why only in memory.
    pub kept: String,
}

impl AgentStore {
    /// Opens (or creates) it in `dir` on a thread of its own (blocking:
    /// call it off the async runtime), with the settings kept. A directory
    /// that cannot be used leaves it in memory, logged.
    pub fn open(dir: &Path) -> Result<(AgentStore, BTreeMap<String, AgentConfig>), DbError> {
        let dir = dir.to_path_buf();
        let worker = Worker::open("hark-agents", move || Db::open(&dir))?;
        let (kept, rows) = worker.call_blocking(|db| (db.kept.clone(), db.all()))?;
        let mut settings = BTreeMap::new();
        for (name, json) in rows? {
            match serde_json::from_str::<AgentConfig>(&json) {
                Ok(config) => {
                    settings.insert(name, config);
                }
                Err(e) => {
                    tracing::error!(agent = %name, error = %e, "an agent's kept settings cannot be read; hark.toml's apply (the row is left as it is)");
                }
            }
        }
        Ok((AgentStore { worker, kept }, settings))
    }

    /// Keeps `name`'s settings, replacing any kept under `replaces` (other
    /// spellings of the same name).
    pub async fn put(
        &self,
        name: &str,
        settings: &AgentConfig,
        replaces: Vec<String>,
    ) -> Result<(), AgentStoreError> {
        let json = serde_json::to_string(settings)?;
        let name = name.to_owned();
        self.worker
            .call(move |db| {
                db.remove(&replaces)?;
                db.put(&name, &json)
            })
            .await??;
        Ok(())
    }

    /// Forgets the settings kept under `names`; how many were.
    pub async fn remove(&self, names: Vec<String>) -> Result<usize, AgentStoreError> {
        Ok(self.worker.call(move |db| db.remove(&names)).await??)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_core::agents::Chime;

    async fn open(dir: &Path) -> (AgentStore, BTreeMap<String, AgentConfig>) {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || AgentStore::open(&dir).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn settings_outlast_a_restart_until_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (store, kept) = open(dir.path()).await;
        assert!(kept.is_empty());
        assert!(store.kept.contains(FILE), "{}", store.kept);
        let cook = AgentConfig {
            aliases: vec!["chef".into()],
            voice: Some("en_US-joe-medium".into()),
            rate: Some(1.3),
            earcon: Chime::Low,
            announce: false,
        };
        store.put("cook", &cook, Vec::new()).await.unwrap();
        store
            .put("Claude Code", &AgentConfig::default(), Vec::new())
            .await
            .unwrap();
        // Another spelling replaces the row it names.
        store
            .put(
                "claude-code",
                &AgentConfig::default(),
                vec!["Claude Code".into()],
            )
            .await
            .unwrap();
        drop(store);
        let (store, kept) = open(dir.path()).await;
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept["cook"], cook);
        assert!(kept.contains_key("claude-code"));
        assert_eq!(store.remove(vec!["cook".into()]).await.unwrap(), 1);
        assert_eq!(store.remove(vec!["cook".into()]).await.unwrap(), 0);
        drop(store);
        let (_, kept) = open(dir.path()).await;
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["claude-code"]);
    }

    #[tokio::test]
    async fn a_row_that_cannot_be_read_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = open(dir.path()).await;
        store
            .worker
            .call(|db| db.put("future", r#"{"voice": "x", "a_setting_from_later": 1}"#))
            .await
            .unwrap()
            .unwrap();
        store
            .put("cook", &AgentConfig::default(), Vec::new())
            .await
            .unwrap();
        drop(store);
        let (store, kept) = open(dir.path()).await;
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["cook"]);
        let rows = store.worker.call(Db::all).await.unwrap().unwrap();
        assert_eq!(rows.len(), 2, "the unreadable row is still there");
    }
}
