//! The paired agents' tokens, in `tokens.sqlite3` in the state directory (see
//! [`crate::db`] for how it lasts), written on the store's own thread. Only a token's SHA-256 is kept: a copy
//! of the database (a backup, a lost SD card) lets no one in. A revoked
//! token's row stays, marked, so its holder is told it was revoked rather
//! than that it was never valid; the oldest revoked rows go past
//! [`KEEP_REVOKED`].
//!
//! Every check reads an in-memory copy under a lock never held across a
//! write; only creating, revoking and (at most once a minute per token)
//! recording use touch the file, one at a time on the store's thread.

use std::{
    collections::HashMap,
    io::Read,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use base64::Engine;
use hark_core::scopes::Scopes;
use rusqlite::{Connection, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{db::DbError, worker::Worker};

pub const FILE: &str = "tokens.sqlite3";

/// Every token starts with this, so one found in a log or a paste is
/// recognisable, and a key meant for something else is refused as such.
pub const PREFIX: &str = "hark_";
/// Random bytes in a token: 256 bits.
const RANDOM_BYTES: usize = 32;
/// Characters after the prefix (unpadded base64url of 32 bytes).
pub const TOKEN_CHARS: usize = 43;
/// Revoked rows kept to name a revoked token when it is used.
const KEEP_REVOKED: usize = 200;
/// How often a token's last use is written down at most.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// Longest token name.
pub const MAX_NAME: usize = 64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tokens (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_used_ms INTEGER,
    last_address TEXT,
    revoked_ms INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS tokens_live_name
    ON tokens (name COLLATE NOCASE) WHERE revoked_ms IS NULL;
";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Stopped(#[from] crate::worker::Stopped),
    #[error(
        "a token called `{0}` exists; revoke it first (hark token revoke) or replace it (--replace)"
    )]
    Exists(String),
    #[error("no token called `{0}`; `hark token list` shows them")]
    NoSuchToken(String),
    #[error(
        "a token name is 1–{MAX_NAME} letters, digits, spaces, `-`, `_` or `.`, starting with a letter or digit; got `{0}`"
    )]
    BadName(String),
    #[error("the token store is unavailable: {0}")]
    Unavailable(String),
    #[error("cannot read random bytes for a token: {0}")]
    Random(#[source] std::io::Error),
}

/// Why a presented token is not accepted. The texts never repeat the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error(
        "the token is malformed: a Hark token is `{PREFIX}` followed by {TOKEN_CHARS} letters, digits, `-` and `_` (this one has {0} characters)"
    )]
    Malformed(usize),
    #[error(
        "the token is not one this appliance issued (mistyped, or from another Hark); pair again"
    )]
    Unknown,
    #[error("the token `{name}` was revoked on {when}; pair again for a new one")]
    Revoked { name: String, when: String },
}

/// What is known about one token (never the token itself).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenInfo {
    pub name: String,
    pub scopes: Vec<&'static str>,
    /// RFC 3339, UTC.
    pub created: String,
    /// When it was last used (RFC 3339), and from where; null if never.
    pub last_used: Option<String>,
    pub last_address: Option<String>,
}

#[derive(Debug, Clone)]
struct Entry {
    id: i64,
    name: String,
    scopes: Scopes,
    created: SystemTime,
    last_used: Option<SystemTime>,
    last_address: Option<String>,
    /// When `last_used` was last written to the file.
    written: Option<SystemTime>,
    revoked: Option<SystemTime>,
}

impl Entry {
    fn info(&self) -> TokenInfo {
        TokenInfo {
            name: self.name.clone(),
            scopes: self.scopes.names(),
            created: rfc3339(self.created),
            last_used: self.last_used.map(rfc3339),
            last_address: self.last_address.clone(),
        }
    }
}

/// A token that was accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub name: String,
    pub scopes: Scopes,
}

/// The tokens by hash: what every check reads.
type Entries = Arc<Mutex<HashMap<String, Entry>>>;

fn lock(entries: &Entries) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The database, on the store's thread.
struct Db {
    conn: Connection,
    path: Option<PathBuf>,
    entries: Entries,
}

pub struct TokenStore {
    entries: Entries,
    worker: Worker<Db>,
    path: Option<PathBuf>,
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn to_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn from_ms(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// The hash a token is kept and looked up by.
fn hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new token: the prefix and 256 bits from the kernel's generator.
/// `N` bytes from the kernel's random source.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes))?;
    Ok(bytes)
}

fn generate() -> Result<String, TokenError> {
    let bytes = random_bytes::<RANDOM_BYTES>().map_err(TokenError::Random)?;
    Ok(format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// Whether `token` has a token's shape; the length of what was given if not.
pub fn well_formed(token: &str) -> Result<(), Rejected> {
    let body = token.strip_prefix(PREFIX);
    match body {
        Some(body)
            if body.len() == TOKEN_CHARS
                && body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Ok(())
        }
        _ => Err(Rejected::Malformed(token.chars().count())),
    }
}

/// Checks a token name (an agent's name on the appliance).
pub fn check_name(name: &str) -> Result<String, TokenError> {
    let name = name.trim();
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name.chars().next().is_some_and(char::is_alphanumeric)
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.'));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(TokenError::BadName(name.chars().take(80).collect()))
    }
}

impl Db {
    fn open(dir: Option<&Path>) -> Result<(Db, Option<String>), TokenError> {
        let (conn, path, warning) = match dir {
            Some(dir) => {
                let (conn, path, warning) =
                    crate::db::open(dir, FILE, SCHEMA, "SELECT count(*) FROM tokens")?;
                (conn, Some(path), warning)
            }
            None => (crate::db::in_memory(SCHEMA)?, None, None),
        };
        let entries = load(&conn, &path)?;
        Ok((
            Db {
                conn,
                path,
                entries: Arc::new(Mutex::new(entries)),
            },
            warning,
        ))
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> DbError + use<> {
        crate::db::errors(&self.path)
    }

    fn create(
        &mut self,
        name: String,
        scopes: Scopes,
        replace: bool,
    ) -> Result<(String, TokenInfo), TokenError> {
        crate::db::on_store_thread();
        let token = generate()?;
        let token_hash = hash(&token);
        let now = SystemTime::now();
        let err = self.err();
        let existing: Vec<String> = lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.revoked.is_none() && e.name.eq_ignore_ascii_case(&name))
            .map(|(h, _)| h.clone())
            .collect();
        if !existing.is_empty() && !replace {
            return Err(TokenError::Exists(name));
        }
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute(
            "UPDATE tokens SET revoked_ms = ?1 WHERE revoked_ms IS NULL AND name = ?2 COLLATE NOCASE",
            params![to_ms(now), name],
        )
        .map_err(&err)?;
        // `RETURNING` through query_row: the row is stepped to its end, so
        // a failed write is an error here, never a token thought kept.
        let id: i64 = tx
            .query_row(
                "INSERT INTO tokens (name, hash, scopes, created_ms) VALUES (?1, ?2, ?3, ?4) RETURNING id",
                params![name, token_hash, scopes.to_string(), to_ms(now)],
                |r| r.get(0),
            )
            .map_err(&err)?;
        tx.commit().map_err(&err)?;
        let entry = Entry {
            id,
            name,
            scopes,
            created: now,
            last_used: None,
            last_address: None,
            written: None,
            revoked: None,
        };
        let info = entry.info();
        {
            let mut entries = lock(&self.entries);
            for old in existing {
                if let Some(entry) = entries.get_mut(&old) {
                    entry.revoked = Some(now);
                }
            }
            entries.insert(token_hash, entry);
        }
        self.prune()?;
        Ok((token, info))
    }

    fn revoke(&mut self, name: String) -> Result<TokenInfo, TokenError> {
        crate::db::on_store_thread();
        let now = SystemTime::now();
        let found = lock(&self.entries)
            .iter()
            .find(|(_, e)| e.revoked.is_none() && e.name.eq_ignore_ascii_case(&name))
            .map(|(h, e)| (h.clone(), e.id));
        let Some((hash, id)) = found else {
            return Err(TokenError::NoSuchToken(name));
        };
        let changed = self
            .conn
            .execute(
                "UPDATE tokens SET revoked_ms = ?1 WHERE id = ?2",
                params![to_ms(now), id],
            )
            .map_err(self.err())?;
        if changed != 1 {
            return Err(TokenError::NoSuchToken(name));
        }
        let info = {
            let mut entries = lock(&self.entries);
            let entry = entries
                .get_mut(&hash)
                .ok_or_else(|| TokenError::NoSuchToken(name.clone()))?;
            entry.revoked = Some(now);
            entry.info()
        };
        self.prune()?;
        Ok(info)
    }

    /// Writes `name`'s last use, as the checks left it in memory.
    fn write_last_used(&mut self, name: &str) -> Result<(), TokenError> {
        crate::db::on_store_thread();
        let found = lock(&self.entries)
            .values()
            .find(|e| e.revoked.is_none() && e.name == name)
            .map(|e| (e.id, e.last_used, e.last_address.clone()));
        let Some((id, last_used, last_address)) = found else {
            return Ok(());
        };
        self.conn
            .execute(
                "UPDATE tokens SET last_used_ms = ?1, last_address = ?2 WHERE id = ?3",
                params![last_used.map(to_ms), last_address, id],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Drops the oldest revoked rows past [`KEEP_REVOKED`].
    fn prune(&mut self) -> Result<(), TokenError> {
        let mut revoked: Vec<(SystemTime, i64, String)> = lock(&self.entries)
            .iter()
            .filter_map(|(h, e)| e.revoked.map(|r| (r, e.id, h.clone())))
            .collect();
        if revoked.len() <= KEEP_REVOKED {
            return Ok(());
        }
        revoked.sort();
        let drop = revoked.len() - KEEP_REVOKED;
        for (_, id, hash) in revoked.into_iter().take(drop) {
            self.conn
                .execute("DELETE FROM tokens WHERE id = ?1", params![id])
                .map_err(self.err())?;
            lock(&self.entries).remove(&hash);
        }
        Ok(())
    }
}

fn load(conn: &Connection, path: &Option<PathBuf>) -> Result<HashMap<String, Entry>, TokenError> {
    crate::db::on_store_thread();
    let err = crate::db::errors(path);
    let mut entries = HashMap::new();
    let mut statement = conn
        .prepare(
            "SELECT id, name, hash, scopes, created_ms, last_used_ms, last_address, revoked_ms FROM tokens",
        )
        .map_err(&err)?;
    let rows = statement
        .query_map([], |r| {
            let scopes: String = r.get(3)?;
            let last_used = r.get::<_, Option<i64>>(5)?.map(from_ms);
            Ok((
                r.get::<_, String>(2)?,
                Entry {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    scopes: Scopes::from_names(scopes.split(',')),
                    created: from_ms(r.get(4)?),
                    last_used,
                    last_address: r.get(6)?,
                    written: last_used,
                    revoked: r.get::<_, Option<i64>>(7)?.map(from_ms),
                },
            ))
        })
        .map_err(&err)?;
    for row in rows {
        let (hash, entry) = row.map_err(&err)?;
        entries.insert(hash, entry);
    }
    Ok(entries)
}

impl TokenStore {
    /// Opens (or creates) the store in `dir` on a thread of its own
    /// (blocking until it is open). Returns a warning when an unreadable
    /// database had to be moved aside (its agents pair again).
    pub fn open(dir: &Path) -> Result<(Self, Option<String>), TokenError> {
        Self::start(Some(dir.to_path_buf()))
    }

    /// A store that lasts as long as the process (tests).
    pub fn in_memory() -> Result<Self, TokenError> {
        Self::start(None).map(|(store, _)| store)
    }

    fn start(dir: Option<PathBuf>) -> Result<(Self, Option<String>), TokenError> {
        let (made, opened) = std::sync::mpsc::sync_channel(1);
        let worker = Worker::open("hark-tokens", move || {
            let (db, warning) = Db::open(dir.as_deref())?;
            let _ = made.send((Arc::clone(&db.entries), db.path.clone(), warning));
            Ok::<_, TokenError>(db)
        })
        .map_err(|e| match e {
            crate::worker::StartError::Thread(e) => TokenError::Db(DbError::Thread(e)),
            crate::worker::StartError::Open(e) => e,
        })?;
        let (entries, path, warning) = opened
            .recv()
            .map_err(|_| TokenError::Stopped(crate::worker::Stopped))?;
        Ok((
            Self {
                entries,
                worker,
                path,
            },
            warning,
        ))
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Makes a token for `name`; returns it (the only time it exists in
    /// full) with its record. With `replace`, a live token of that name is
    /// revoked in the same transaction.
    pub async fn create(
        &self,
        name: &str,
        scopes: Scopes,
        replace: bool,
    ) -> Result<(String, TokenInfo), TokenError> {
        let name = check_name(name)?;
        self.worker
            .call(move |db| db.create(name, scopes, replace))
            .await?
    }

    /// The live tokens, oldest first.
    pub fn list(&self) -> Vec<TokenInfo> {
        let entries = lock(&self.entries);
        let mut live: Vec<&Entry> = entries.values().filter(|e| e.revoked.is_none()).collect();
        live.sort_by_key(|e| e.id);
        live.into_iter().map(Entry::info).collect()
    }

    pub fn live_count(&self) -> usize {
        lock(&self.entries)
            .values()
            .filter(|e| e.revoked.is_none())
            .count()
    }

    /// Revokes the live token called `name` (any case).
    pub async fn revoke(&self, name: &str) -> Result<TokenInfo, TokenError> {
        let name = name.trim().to_owned();
        self.worker.call(move |db| db.revoke(name)).await?
    }

    /// Checks a presented token. On success notes its use, in memory, and
    /// (at most once a minute per token) on the store's thread.
    pub fn check(&self, token: &str, address: Option<&str>) -> Result<Accepted, Rejected> {
        well_formed(token)?;
        let now = SystemTime::now();
        let (accepted, due) = {
            let mut entries = lock(&self.entries);
            let entry = entries.get_mut(&hash(token)).ok_or(Rejected::Unknown)?;
            if let Some(when) = entry.revoked {
                return Err(Rejected::Revoked {
                    name: entry.name.clone(),
                    when: rfc3339(when),
                });
            }
            entry.last_used = Some(now);
            if let Some(address) = address {
                entry.last_address = Some(address.to_owned());
            }
            let due = entry
                .written
                .is_none_or(|w| now.duration_since(w).unwrap_or_default() >= TOUCH_EVERY);
            if due {
                entry.written = Some(now);
            }
            (
                Accepted {
                    name: entry.name.clone(),
                    scopes: entry.scopes,
                },
                due,
            )
        };
        if due {
            let name = accepted.name.clone();
            self.worker.send(move |db| {
                if let Err(e) = db.write_last_used(&name) {
                    tracing::warn!(error = %e, "cannot record a token's last use");
                }
            });
        }
        Ok(accepted)
    }

    /// Waits until what was asked of the store so far is written.
    pub async fn flush(&self) -> Result<(), TokenError> {
        Ok(self.worker.call(|_| ()).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tokens_are_random_well_formed_and_kept_only_as_hashes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, warning) = TokenStore::open(dir.path()).expect("opens");
        assert!(warning.is_none());
        let (a, info) = store
            .create("claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        let (b, _) = store
            .create("cursor", Scopes::ALL, false)
            .await
            .expect("made");
        assert_ne!(a, b);
        assert_eq!(well_formed(&a), Ok(()));
        assert_eq!(a.len(), PREFIX.len() + TOKEN_CHARS);
        assert_eq!(info.scopes, ["listen", "speak"]);
        drop(store);
        let bytes = std::fs::read(dir.path().join(FILE)).expect("file");
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&a[PREFIX.len()..]), "token stored in clear");
        // Reopened: both still work, with their scopes.
        let (store, _) = TokenStore::open(dir.path()).expect("reopens");
        assert_eq!(
            store.check(&a, Some("10.0.0.2")),
            Ok(Accepted {
                name: "claude".into(),
                scopes: Scopes::DEFAULT
            })
        );
        assert_eq!(store.check(&b, None).map(|a| a.scopes), Ok(Scopes::ALL));
    }

    #[tokio::test]
    async fn bad_tokens_are_told_apart() {
        let store = TokenStore::in_memory().expect("store");
        let (token, _) = store
            .create("claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        assert_eq!(store.check("", None), Err(Rejected::Malformed(0)));
        assert_eq!(store.check("Bearer x", None), Err(Rejected::Malformed(8)));
        let mut wrong = token.clone();
        wrong.pop();
        wrong.push(if token.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(store.check(&wrong, None), Err(Rejected::Unknown));
        let mut bad_char = token.clone();
        bad_char.pop();
        bad_char.push('=');
        assert!(matches!(
            store.check(&bad_char, None),
            Err(Rejected::Malformed(_))
        ));
        store.revoke("CLAUDE").await.expect("revoked");
        assert!(matches!(
            store.check(&token, None),
            Err(Rejected::Revoked { name, .. }) if name == "claude"
        ));
        assert!(matches!(
            store.revoke("claude").await,
            Err(TokenError::NoSuchToken(_))
        ));
    }

    #[tokio::test]
    async fn names_are_unique_until_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = TokenStore::open(dir.path()).expect("opens");
        let (first, _) = store
            .create("Claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        assert!(matches!(
            store.create("claude", Scopes::DEFAULT, false).await,
            Err(TokenError::Exists(_))
        ));
        let (second, _) = store
            .create("claude", Scopes::ALL, true)
            .await
            .expect("replaced");
        assert!(matches!(
            store.check(&first, None),
            Err(Rejected::Revoked { .. })
        ));
        assert_eq!(
            store.check(&second, None).map(|a| a.scopes),
            Ok(Scopes::ALL)
        );
        assert_eq!(store.list().len(), 1);
        drop(store);
        // The replacement lasted: the old token stays revoked.
        let (store, _) = TokenStore::open(dir.path()).expect("reopens");
        assert!(matches!(
            store.check(&first, None),
            Err(Rejected::Revoked { .. })
        ));
        assert_eq!(
            store.list()[0].scopes,
            ["listen", "speak", "files", "admin"]
        );
        for bad in ["", " ", "-lead", "a/b", &"x".repeat(65), "new\nline"] {
            assert!(
                matches!(
                    store.create(bad, Scopes::DEFAULT, false).await,
                    Err(TokenError::BadName(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn last_use_is_written_at_most_once_a_minute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = TokenStore::open(dir.path()).expect("opens");
        let (token, _) = store
            .create("claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        assert_eq!(store.list()[0].last_used, None);
        store.check(&token, Some("10.0.0.2")).expect("valid");
        store.flush().await.expect("written");
        // Used again from elsewhere within the minute: not written again.
        store.check(&token, Some("10.0.0.3")).expect("valid");
        store.flush().await.expect("written");
        drop(store);
        let (store, _) = TokenStore::open(dir.path()).expect("reopens");
        let listed = &store.list()[0];
        assert!(listed.last_used.is_some());
        assert_eq!(listed.last_address.as_deref(), Some("10.0.0.2"));
    }

    #[tokio::test]
    async fn revoked_rows_are_pruned_oldest_first() {
        let store = TokenStore::in_memory().expect("store");
        let (first, _) = store
            .create("a0", Scopes::DEFAULT, false)
            .await
            .expect("made");
        store.revoke("a0").await.expect("revoked");
        for i in 1..=KEEP_REVOKED {
            store
                .create(&format!("a{i}"), Scopes::DEFAULT, false)
                .await
                .expect("made");
            store.revoke(&format!("a{i}")).await.expect("revoked");
        }
        // The first revoked row went: its token is now simply unknown.
        assert_eq!(store.check(&first, None), Err(Rejected::Unknown));
        assert_eq!(lock(&store.entries).len(), KEEP_REVOKED);
    }
}
