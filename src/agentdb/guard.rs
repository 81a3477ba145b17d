//! What a writer of an agent database must hold and check first, as OpenClaw's own
//! maintenance writers do:
//!
//! - the **gateway lifecycle lock**: an open `BEGIN EXCLUSIVE` transaction on
//!   `/tmp/openclaw-state-locks-<uid>/gateway-lifecycle.<h>.lock.sqlite`, where `<h>` is the
//!   first 8 hex digits of the SHA-256 of the canonical path of `<state>/state/openclaw.sqlite`
//!   (`dist/sqlite-source-handle-*.mjs`: `resolveLifecycleCoordinatorBase`). A running gateway
//!   holds it; taking it keeps a gateway from starting while clawkeeper writes.
//! - **leases** in `<state>/state/openclaw.sqlite`: a row of `agent_database_leases` whose
//!   process is alive means that process has the database open; a `state_leases` row of
//!   scope `core:agent-database-maintenance` means a maintenance run is under way.
//! - the **integrity-verification record** of the file in
//!   `<state>/state/openclaw-quarantine.sqlite` (`agent_integrity_verifications`): it lets the
//!   runtime skip a full integrity check on the next open, so it is cleared before a write.
//!
//! Domain code: no terminal, no clap. A held lock or lease is a [`Refusal::Locked`] error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::exit::Refusal;

/// The scope of the `state_leases` row that blocks new opens while maintenance runs.
pub const MAINTENANCE_LEASE_SCOPE: &str = "core:agent-database-maintenance";

/// `<state>/state/openclaw.sqlite`, the shared state database.
pub fn state_database(state_dir: &Path) -> PathBuf {
    state_dir.join("state").join("openclaw.sqlite")
}

/// `<state>/state/openclaw-quarantine.sqlite`.
pub fn quarantine_database(state_dir: &Path) -> PathBuf {
    state_dir.join("state").join("openclaw-quarantine.sqlite")
}

/// The canonical form of a path as the runtime computes it: `realpath` when the path exists,
/// else the canonical path of its nearest existing ancestor with the rest appended.
fn canonical_identity(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Ok(real) = std::fs::canonicalize(&abs) {
        return real;
    }
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cur = abs.as_path();
    loop {
        match std::fs::canonicalize(cur) {
            Ok(real) => {
                let mut out = real;
                for part in rest.iter().rev() {
                    out.push(part);
                }
                return out;
            }
            Err(_) => match (cur.parent(), cur.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name);
                    cur = parent;
                }
                _ => return abs,
            },
        }
    }
}

/// The gateway lifecycle lock file of a state dir.
pub fn lifecycle_lock_path(state_dir: &Path) -> PathBuf {
    let identity = canonical_identity(&state_database(state_dir));
    let digest = Sha256::digest(identity.as_os_str().as_encoded_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    PathBuf::from("/tmp")
        .join(format!("openclaw-state-locks-{uid}"))
        .join(format!("gateway-lifecycle.{hash}.lock.sqlite"))
}

/// The lifecycle lock, held until dropped (the transaction is rolled back and the
/// connection closed, as the runtime releases it).
pub struct LifecycleLock {
    conn: Connection,
    pub path: PathBuf,
}

impl Drop for LifecycleLock {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }
}

/// Take the gateway lifecycle lock of `state_dir`, waiting up to `wait` for its holder.
/// The directory is created private (0700) when missing, as the runtime creates it.
pub fn take_lifecycle_lock(state_dir: &Path, wait: Duration) -> Result<LifecycleLock> {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::fs::MetadataExt;
    let path = lifecycle_lock_path(state_dir);
    let dir = path.parent().unwrap_or(Path::new("/tmp"));
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("{}: cannot create the lock directory", dir.display()))?;
    }
    // The runtime refuses a lock directory that is a symlink or someone else's: in a shared
    // /tmp another user could otherwise hold (or fake) the lock.
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("{}: cannot read the lock directory", dir.display()))?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid {
        return Err(Refusal::Unsafe(format!(
            "{}: the lock directory is not a directory of this user; the runtime would not \
             use it either",
            dir.display()
        ))
        .into());
    }
    let conn = Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("{}: cannot open the lifecycle lock", path.display()))?;
    conn.busy_timeout(Duration::ZERO)?;
    let deadline = Instant::now() + wait;
    loop {
        match conn.execute_batch("PRAGMA journal_mode = MEMORY; BEGIN EXCLUSIVE;") {
            Ok(()) => return Ok(LifecycleLock { conn, path }),
            Err(e) if super::is_busy(&e) => {
                if Instant::now() >= deadline {
                    return Err(Refusal::Locked(format!(
                        "the gateway lifecycle lock ({}) is held: a gateway or an OpenClaw \
                         maintenance command is running on this state dir; stop it, or pass \
                         --wait-lock",
                        path.display()
                    ))
                    .into());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "{}: cannot take the lifecycle lock",
                    path.display()
                )));
            }
        }
    }
}

/// Whether process `pid` is alive (a zombie is not) and, when the lease recorded its start
/// time, is the same process: field 22 of `/proc/<pid>/stat`, in clock ticks since boot, as
/// the runtime records it (`isAgentDatabaseLeaseStale`). A process of another user counts as
/// alive.
fn lease_holder_alive(pid: i64, start_time: Option<i64>) -> bool {
    if pid <= 0 || pid > i64::from(i32::MAX) {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return true;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return false;
    }
    match (
        start_time,
        fields.get(19).and_then(|f| f.parse::<i64>().ok()),
    ) {
        (Some(recorded), Some(current)) => recorded == current,
        _ => true,
    }
}

/// Processes that hold a lease on `db` or on all agent databases, as lines that name them;
/// empty when none is alive. A state dir without `state/openclaw.sqlite` has no leases.
///
/// - `agent_database_leases`: every runtime process that opens an agent database adds a row
///   (pid, process start time, absolute path); a row whose process is gone is stale.
/// - `state_leases` `core:agent-database-maintenance`: held while Doctor imports, recovers or
///   migrates; it expires 60 s after its last heartbeat (`expires_at`), so only an unexpired
///   row is live.
pub fn live_leases(state_dir: &Path, db: &Path) -> Result<Vec<String>> {
    let state_db = state_database(state_dir);
    if !state_db.exists() {
        return Ok(Vec::new());
    }
    let conn = super::open_read_only(&state_db)?;
    let tables = super::read_schema(&conn)
        .with_context(|| format!("{}: cannot read the leases", state_db.display()))?;
    let mut out = Vec::new();
    if tables.has_table("state_leases") {
        let row: Option<(String, Option<i64>)> = conn
            .query_row(
                "SELECT owner, expires_at FROM state_leases WHERE scope = ?1",
                [MAINTENANCE_LEASE_SCOPE],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let now = crate::js::now_ms() as i64;
        // A row past its expiry (or without one) is stale, as the runtime judges it: the
        // holder renews it every 20 s while it works.
        if let Some((owner, expires)) = row
            && expires.is_some_and(|e| e > now)
        {
            out.push(format!(
                "OpenClaw agent-database maintenance is in progress (lease held by {owner} in {})",
                state_db.display()
            ));
        }
    }
    if tables.has_table("agent_database_leases") {
        let want = canonical_identity(db);
        let mut stmt =
            conn.prepare("SELECT path, owner_pid, owner_start_time FROM agent_database_leases")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })?;
        for row in rows {
            let (path, pid, start_time) = row?;
            let lease_path = Path::new(&path);
            let lease_path = if lease_path.is_absolute() {
                lease_path.to_path_buf()
            } else {
                state_dir.join(lease_path)
            };
            if canonical_identity(&lease_path) == want && lease_holder_alive(pid, start_time) {
                out.push(format!(
                    "process {pid} has the database open (a lease in {})",
                    state_db.display()
                ));
            }
        }
    }
    Ok(out)
}

/// Remove the runtime's integrity-verification record of `db` (OpenClaw 2026.9.5 and later),
/// so that its next open checks the file in full, as its own raw maintenance writers do before
/// they mutate (`clearOpenClawAgentIntegrityVerification`): the row of the canonical path, and
/// any row for the same file by device and inode (the stored ones and the current ones).
/// Nothing to do when the quarantine database or its table is absent (2026.8.x).
pub fn clear_integrity_record(state_dir: &Path, db: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let quarantine = quarantine_database(state_dir);
    if !quarantine.exists() {
        return Ok(());
    }
    let conn = super::open_read_write(&quarantine)?;
    if !super::read_schema(&conn)?.has_table("agent_integrity_verifications") {
        return Ok(());
    }
    let path = canonical_identity(db).to_string_lossy().into_owned();
    let (dev, ino) = std::fs::metadata(db)
        .map(|m| (m.dev().to_string(), m.ino().to_string()))
        .unwrap_or_default();
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let cleared = conn.execute(
        "DELETE FROM agent_integrity_verifications WHERE path = ?1 \
         OR (dev, ino) IN (SELECT dev, ino FROM agent_integrity_verifications WHERE path = ?1) \
         OR (dev = ?2 AND ino = ?3)",
        [&path, &dev, &ino],
    );
    match cleared {
        Ok(_) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(anyhow::Error::new(e).context(format!(
                "{}: cannot clear the integrity record",
                quarantine.display()
            )));
        }
    }
    Ok(())
}

/// Why the runtime holds `db` in quarantine (`quarantined_databases` of the quarantine
/// database), if it does: such a file is left to `openclaw doctor`.
pub fn quarantined(state_dir: &Path, db: &Path) -> Result<Option<String>> {
    let quarantine = quarantine_database(state_dir);
    if !quarantine.exists() {
        return Ok(None);
    }
    let conn = super::open_read_only(&quarantine)?;
    if !super::read_schema(&conn)?.has_table("quarantined_databases") {
        return Ok(None);
    }
    let path = canonical_identity(db).to_string_lossy().into_owned();
    Ok(conn
        .query_row(
            "SELECT coalesce(reason, kind, 'quarantined') FROM quarantined_databases WHERE path = ?1",
            [&path],
            |r| r.get::<_, String>(0),
        )
        .optional()?)
}

/// Everything a writer holds while it writes `db`: the lifecycle lock. Taken by [`acquire`]
/// after the checks pass.
pub struct WriteGuard {
    pub state_dir: PathBuf,
    _lock: LifecycleLock,
}

/// Take the lifecycle lock and check the leases, waiting up to `wait` for both; the lock is
/// held until the guard is dropped.
pub fn acquire(state_dir: &Path, db: &Path, wait: Duration) -> Result<WriteGuard> {
    let deadline = Instant::now() + wait;
    let lock = take_lifecycle_lock(state_dir, wait)?;
    if let Some(why) = quarantined(state_dir, db)? {
        return Err(Refusal::Unsafe(format!(
            "{}: the runtime holds this database in quarantine ({why}); run openclaw doctor",
            db.display()
        ))
        .into());
    }
    loop {
        let live = live_leases(state_dir, db)?;
        if live.is_empty() {
            return Ok(WriteGuard {
                state_dir: state_dir.to_path_buf(),
                _lock: lock,
            });
        }
        if Instant::now() >= deadline {
            // The caller names the database.
            return Err(Refusal::Locked(live.join("; ")).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
