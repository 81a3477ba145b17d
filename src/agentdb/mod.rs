//! The SQLite-era agent database: `agents/<id>/agent/openclaw-agent.sqlite` (OpenClaw 2026.8.1
//! and later), with its `-wal` and `-shm` files.
//!
//! This module owns finding the database of an agent, opening it (read-only for everything
//! that does not write, with the runtime's connection settings for what does), and its schema
//! version: which versions clawkeeper knows, and the rule that an unknown one is read where
//! the tables are there and never written. `space` measures where its bytes go, `guard` holds
//! the locks and checks a writer needs, `vacuum` gives free space back.

pub mod cleanup;
pub mod guard;
pub mod read;
pub mod space;
pub mod transcripts;
#[cfg(test)]
mod transcripts_write_tests;
pub mod vacuum;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

/// The database's file name in `agents/<id>/agent/`.
pub const FILE_NAME: &str = "openclaw-agent.sqlite";

/// The runtime's busy timeout (`dist/openclaw-agent-db-*.mjs`); clawkeeper never waits less.
pub const BUSY_TIMEOUT_MS: u64 = 5000;

/// Agent schema versions (`PRAGMA user_version`) of the stable releases clawkeeper is tested
/// against, with the first release that wrote each: these are read and written.
pub const KNOWN_VERSIONS: &[(i64, &str)] = &[(19, "2026.8.1"), (21, "2026.9.5"), (23, "2026.9.6")];

/// The highest schema version clawkeeper knows.
pub fn highest_known_version() -> i64 {
    KNOWN_VERSIONS.iter().map(|(v, _)| *v).max().unwrap_or(0)
}

/// The `-wal` and `-shm` companions of a database file.
pub fn wal_path(db: &Path) -> PathBuf {
    suffixed(db, "-wal")
}

pub fn shm_path(db: &Path) -> PathBuf {
    suffixed(db, "-shm")
}

fn suffixed(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Where an agent's database is, for its sessions directory: `<sessions>/../agent/openclaw-agent.sqlite`.
pub fn path_for_sessions_dir(sessions_dir: &Path) -> Option<PathBuf> {
    Some(sessions_dir.parent()?.join("agent").join(FILE_NAME))
}

/// The sessions directory that belongs to a database (`agents/<id>/sessions`), where archives
/// and cold storage live in the SQLite era.
pub fn sessions_dir_for(db: &Path) -> Option<PathBuf> {
    Some(db.parent()?.parent()?.join("sessions"))
}

/// The state dir a database belongs to (`<state>/agents/<id>/agent/openclaw-agent.sqlite`),
/// when it sits in that layout.
pub fn state_dir_for(db: &Path) -> Option<PathBuf> {
    let agent_dir = db.parent()?;
    let agents = agent_dir.parent()?.parent()?;
    (agent_dir.file_name()? == "agent" && agents.file_name()? == "agents")
        .then(|| agents.parent().map(Path::to_path_buf))
        .flatten()
}

/// The database of a store path: the path itself when it names a database (`--store
/// …/openclaw-agent.sqlite`), else `<sessions dir>/../agent/openclaw-agent.sqlite`. It may
/// not exist (a JSON-era agent).
pub fn for_store(store_path: &Path) -> PathBuf {
    if is_database_path(store_path) {
        return store_path.to_path_buf();
    }
    let dir = match store_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    path_for_sessions_dir(dir).unwrap_or_else(|| dir.join(FILE_NAME))
}

/// Whether an agent is in the SQLite era: its database exists (a symlink to one counts).
pub fn exists(db: &Path) -> bool {
    std::fs::symlink_metadata(db).is_ok()
}

/// Whether a `--store` value names a database rather than a `sessions.json`.
pub fn is_database_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "sqlite")
}

/// Whether an error is SQLite's "database is busy/locked": another connection held a lock
/// past the busy timeout.
pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// What the schema says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// `PRAGMA user_version`.
    pub user_version: i64,
    /// The `schema_meta` row `primary`: role, schema version, agent id, app version.
    pub meta: Option<SchemaMeta>,
    /// Tables present, sorted.
    pub tables: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMeta {
    pub role: String,
    pub schema_version: i64,
    pub agent_id: Option<String>,
    pub app_version: Option<String>,
}

impl Schema {
    pub fn has_table(&self, name: &str) -> bool {
        self.tables
            .binary_search_by(|t| t.as_str().cmp(name))
            .is_ok()
    }

    /// Whether clawkeeper knows this version (and so may write the database).
    pub fn is_known(&self) -> bool {
        KNOWN_VERSIONS.iter().any(|(v, _)| *v == self.user_version)
    }

    /// Why clawkeeper will not write this database, or `None` when it may.
    pub fn write_refusal(&self) -> Option<String> {
        if self.is_known() {
            return None;
        }
        let release = self
            .meta
            .as_ref()
            .and_then(|m| m.app_version.as_deref())
            .map(|v| format!(", written by OpenClaw {v}"))
            .unwrap_or_default();
        Some(format!(
            "agent schema version {}{release} is not one clawkeeper knows (it knows {}, the \
             highest {}); the database is read, never written",
            self.user_version,
            KNOWN_VERSIONS
                .iter()
                .map(|(v, r)| format!("{v} ({r})"))
                .collect::<Vec<_>>()
                .join(", "),
            highest_known_version()
        ))
    }
}

/// Read the schema version, the `schema_meta` row and the table names.
pub fn read_schema(conn: &Connection) -> Result<Schema> {
    let user_version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tables.sort();
    let meta = if tables.binary_search(&"schema_meta".to_string()).is_ok() {
        conn.query_row(
            "SELECT role, schema_version, agent_id, app_version FROM schema_meta \
             WHERE meta_key = 'primary'",
            [],
            |r| {
                Ok(SchemaMeta {
                    role: r.get(0)?,
                    schema_version: r.get(1)?,
                    agent_id: r.get(2)?,
                    app_version: r.get(3)?,
                })
            },
        )
        .optional()?
    } else {
        None
    };
    Ok(Schema {
        user_version,
        meta,
        tables,
    })
}

/// Open a database read-only: no write, no checkpoint on close, no `-wal` created where none
/// is (SQLite may still create the `-shm` index beside an existing `-wal`, as any reader does).
pub fn open_read_only(db: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("{}: cannot open the database read-only", db.display()))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
    Ok(conn)
}

/// Open a database to write it, with the runtime's settings (`busy_timeout` 5 s,
/// `foreign_keys=ON`, `synchronous=NORMAL`, `trusted_schema=OFF`; the journal mode is left as
/// the runtime set it). Never creates a database: a path that does not exist is an error.
///
/// Fails before anything is written when this user cannot write the file, its directory (where
/// SQLite creates the `-wal`, `-shm` and journal files) or an existing `-wal`/`-shm`: SQLite
/// itself would open such a file read-only without a word and fail only at the first write,
/// after the caller may have written elsewhere (the integrity record) for a run that cannot
/// happen.
pub fn open_read_write(db: &Path) -> Result<Connection> {
    let what = || format!("{}: cannot open the database to write it", db.display());
    if let Some(problem) = not_writable(db) {
        return Err(anyhow::anyhow!("{problem}").context(what()));
    }
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(what)?;
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        anyhow::bail!("{}: SQLite opened it read-only", what());
    }
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.execute_batch(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA trusted_schema = OFF;",
    )?;
    Ok(conn)
}

/// Why this process (its effective user) cannot write `db` and the files SQLite writes beside
/// it, or `None` when it can.
fn not_writable(db: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let writable = |p: &Path| -> std::io::Result<()> {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `c` is a valid NUL-terminated path; faccessat only reads it.
        let r =
            unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let abs = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
    if let Err(e) = writable(&abs) {
        return Some(format!("the file is not writable by this user ({e})"));
    }
    let dir = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut others = vec![(dir, "its directory")];
    for side in [wal_path(&abs), shm_path(&abs)] {
        if side.exists() {
            others.push((side, "its side file"));
        }
    }
    others.into_iter().find_map(|(p, role)| {
        writable(&p)
            .err()
            .map(|e| format!("{role} {} is not writable by this user ({e})", p.display()))
    })
}

/// What [`check`] found wrong in a database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    /// `PRAGMA quick_check`'s first (up to three) problems.
    #[error("quick_check: {}", .0.join("; "))]
    QuickCheck(Vec<String>),
    /// `PRAGMA foreign_key_check`'s first problem (see [`foreign_key_problem`]).
    #[error("foreign_key_check: {0}")]
    ForeignKey(String),
}

/// `PRAGMA quick_check` and `PRAGMA foreign_key_check`: `Ok(())` when both are clean, else
/// the first problems they name. Every b-tree page, index and the free list are checked; the
/// FTS5 index's agreement with its content is the runtime's to keep (see below). The outer
/// error is a failure to run the checks.
pub fn check(conn: &Connection) -> Result<std::result::Result<(), Damage>> {
    let quick: Vec<String> = conn
        .prepare("PRAGMA quick_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?
        .into_iter()
        // The FTS5 index's own consistency with its content (`fts5: checksum mismatch`) is a
        // projection the runtime rebuilds itself (`needs_rebuild`), and it is transiently off
        // while a runtime writer is between its row and its index: not damage of the file.
        .filter(|line| !line.starts_with("fts5:"))
        .collect();
    if !quick.is_empty() && quick != ["ok"] {
        let first = quick.into_iter().take(3).collect();
        return Ok(Err(Damage::QuickCheck(first)));
    }
    match foreign_key_problem(conn)? {
        Some(problem) => Ok(Err(Damage::ForeignKey(problem))),
        None => Ok(Ok(())),
    }
}

/// `PRAGMA foreign_key_check`: the first row that refers to a missing row, or `None`.
pub fn foreign_key_problem(conn: &Connection) -> Result<Option<String>> {
    let mut stmt = conn.prepare("PRAGMA foreign_key_check")?;
    let mut rows = stmt.query([])?;
    if let Some(row) = rows.next()? {
        let table: String = row.get(0)?;
        let parent: String = row.get(2)?;
        return Ok(Some(format!(
            "a row of {table} refers to a missing row of {parent}"
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod check_tests {
    use super::*;

    /// The bundled SQLite is of the releases' line (Node 26's 3.53): another line writes other
    /// pages for the same statements, and `cleanup` reports the WAL's size (see Cargo.toml).
    #[test]
    fn the_bundled_sqlite_is_the_releases_line() {
        assert!(
            rusqlite::version().starts_with("3.53."),
            "SQLite {}",
            rusqlite::version()
        );
    }

    #[test]
    fn damage_is_typed_and_worded_as_before() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (pid INTEGER REFERENCES parent(id));",
        )
        .unwrap();
        assert_eq!(check(&conn).unwrap(), Ok(()));
        // With foreign keys off on this connection, the dangling row goes in.
        conn.execute_batch("PRAGMA foreign_keys = OFF; INSERT INTO child VALUES (7);")
            .unwrap();
        let damage = check(&conn).unwrap().unwrap_err();
        assert_eq!(
            damage,
            Damage::ForeignKey("a row of child refers to a missing row of parent".into())
        );
        assert_eq!(
            damage.to_string(),
            "foreign_key_check: a row of child refers to a missing row of parent"
        );
        let pages = Damage::QuickCheck(vec!["page 3: bad".into(), "page 4: bad".into()]);
        assert_eq!(pages.to_string(), "quick_check: page 3: bad; page 4: bad");
    }
}
