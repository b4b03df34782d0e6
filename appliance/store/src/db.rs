//! The SQLite databases in the state directory (the voice inbox, the
//! history): opened the same way, so they last the same way. WAL with
//! `synchronous = FULL` — a commit is on the card before the call returns,
//! and a process killed mid-write (or a power cut) loses at most the
//! transaction in flight, never a completed one. A file that is not a
//! readable database is moved aside (`NAME.corrupt-<unix time>`, its
//! journal with it) with a line in the log, and a new one started: a
//! broken file never stops the appliance.
//!
//! A connection lives on its store's thread ([`crate::worker`]) and is used
//! nowhere else.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rusqlite::Connection;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot create the state directory {dir}: {source}")]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the database {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot move the unreadable database {path} aside: {source}")]
    MoveAside {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Stopped(#[from] crate::worker::Stopped),
    #[error("cannot start the database's thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl From<crate::worker::StartError<DbError>> for DbError {
    fn from(e: crate::worker::StartError<DbError>) -> Self {
        match e {
            crate::worker::StartError::Thread(e) => DbError::Thread(e),
            crate::worker::StartError::Open(e) => e,
        }
    }
}

/// Says, in debug builds, that a statement is about to run off a store's
/// own thread ([`crate::worker`]): SQLite blocks, and the async runtime's
/// threads must never wait for it.
pub(crate) fn on_store_thread() {
    debug_assert!(
        crate::worker::on_store_thread(),
        "a SQLite statement outside a store's thread ({:?})",
        std::thread::current().name()
    );
}

/// Turns SQLite's errors into ones that name the database.
pub fn errors(path: &Option<PathBuf>) -> impl Fn(rusqlite::Error) -> DbError + use<> {
    let path = path
        .as_ref()
        .map_or_else(|| "(in memory)".to_owned(), |p| p.display().to_string());
    move |source| DbError::Sqlite {
        path: path.clone(),
        source,
    }
}

/// Opens (or creates) `file` in `dir` with `schema`; `check` is a query
/// that must succeed on a sound database. Returns the connection, its path,
/// and a warning when an unreadable file had to be moved aside.
pub fn open(
    dir: &Path,
    file: &str,
    schema: &str,
    check: &str,
) -> Result<(Connection, PathBuf, Option<String>), DbError> {
    std::fs::create_dir_all(dir).map_err(|source| DbError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let path = dir.join(file);
    match open_file(&path, schema, check) {
        Ok(conn) => Ok((conn, path, None)),
        Err(DbError::Sqlite { source, .. }) if is_corrupt(&source) => {
            let stamp = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let aside = path.with_file_name(format!("{file}.corrupt-{stamp}"));
            std::fs::rename(&path, &aside).map_err(|source| DbError::MoveAside {
                path: path.clone(),
                source,
            })?;
            // Its journal belongs to the old file.
            for suffix in ["-wal", "-shm"] {
                let side = path.with_file_name(format!("{file}{suffix}"));
                if side.exists() {
                    let _ = std::fs::rename(
                        &side,
                        aside.with_file_name(format!("{file}.corrupt-{stamp}{suffix}")),
                    );
                }
            }
            let conn = open_file(&path, schema, check)?;
            Ok((
                conn,
                path,
                Some(format!(
                    "the database could not be read ({source}); it was moved to {} and a new one started",
                    aside.display()
                )),
            ))
        }
        Err(e) => Err(e),
    }
}

/// A store's database: on disk, or in memory when the state directory
/// cannot be used (said in the log; `kept` says which, for its status).
pub struct Kept {
    pub conn: Connection,
    /// `None`: in memory.
    pub path: Option<PathBuf>,
    /// `kept in PATH`, or `in memory only: WHY`.
    pub kept: String,
}

/// [`open`], then `migrate` (columns added since), or on failure a
/// database in memory: `what` ("the history") names the store in the log,
/// `lasts` what an in-memory store loses ("it lasts until the appliance
/// restarts").
pub fn open_kept(
    dir: &Path,
    file: &str,
    schema: &str,
    check: &str,
    what: &str,
    migrate: impl FnOnce(&Connection, &Path) -> Result<(), DbError>,
) -> Result<Kept, DbError> {
    let opened = open(dir, file, schema, check)
        .and_then(|(conn, path, warning)| migrate(&conn, &path).map(|()| (conn, path, warning)));
    match opened {
        Ok((conn, path, warning)) => {
            if let Some(warning) = warning {
                tracing::error!("{what}: {warning}");
            }
            let kept = format!("kept in {}", path.display());
            Ok(Kept {
                conn,
                path: Some(path),
                kept,
            })
        }
        Err(e) => {
            tracing::error!(error = %e, "{what} cannot be kept on disk; it lasts until the appliance restarts");
            Ok(Kept {
                conn: in_memory(schema)?,
                path: None,
                kept: format!("in memory only: {e}"),
            })
        }
    }
}

/// Adds `column` to `table` in a database made before it existed (SQLite
/// has no `ADD COLUMN IF NOT EXISTS`); rows already there hold NULL.
pub fn add_column(
    conn: &Connection,
    path: &Path,
    table: &str,
    column: &str,
    declaration: &str,
) -> Result<(), DbError> {
    on_store_thread();
    let err = errors(&Some(path.to_path_buf()));
    let mut columns = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .map_err(&err)?;
    let names = columns
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(&err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&err)?;
    if !names.iter().any(|name| name == column) {
        conn.execute_batch(&format!(
            "ALTER TABLE {table} ADD COLUMN {column} {declaration}"
        ))
        .map_err(&err)?;
    }
    Ok(())
}

fn open_file(path: &Path, schema: &str, check: &str) -> Result<Connection, DbError> {
    on_store_thread();
    let err = errors(&Some(path.to_path_buf()));
    let conn = Connection::open(path).map_err(&err)?;
    // A wait for a lock, not a failure, if another handle writes.
    conn.busy_timeout(Duration::from_secs(2)).map_err(&err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(&err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(&err)?;
    conn.execute_batch(schema).map_err(&err)?;
    // Reading proves the file is a database, not just a header.
    conn.query_row(check, [], |_| Ok(())).map_err(&err)?;
    Ok(conn)
}

/// A database that lasts as long as the process (when the state directory
/// cannot be used).
pub fn in_memory(schema: &str) -> Result<Connection, DbError> {
    on_store_thread();
    Connection::open_in_memory()
        .and_then(|conn| conn.execute_batch(schema).map(|()| conn))
        .map_err(errors(&None))
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}
