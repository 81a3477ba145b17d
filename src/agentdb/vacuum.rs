//! Give a database's free space back: `wal_checkpoint(TRUNCATE)` (what operators run by hand
//! when the WAL has grown to gigabytes), then `incremental_vacuum` (the runtime's databases are
//! `auto_vacuum=INCREMENTAL`) or, with `full`, a `VACUUM`, then a second checkpoint so the
//! pages moved go back into the file and the WAL ends empty.
//!
//! Everything is done in place on the database file: SQLite's own journal makes each step
//! atomic, the file keeps its inode (the runtime watches for a replaced file), and nothing is
//! renamed. The caller holds the write guard (`guard`) for the whole run.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::Connection;

use super::space::{self, Space};
use crate::exit::Refusal;

/// What to run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// A full `VACUUM` (rebuilds the file; needs free disk space of about the database's
    /// size) instead of `incremental_vacuum`.
    pub full: bool,
}

/// What a vacuum would leave, from the database as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub before: Space,
    /// The database file's length afterwards (for a full `VACUUM`: at most this; rebuilding
    /// also packs half-empty pages).
    pub db_bytes_after: u64,
    /// Always 0: the last step truncates the WAL.
    pub wal_bytes_after: u64,
    /// Free pages that stay because `incremental_vacuum` cannot release them (a database
    /// without `auto_vacuum`); `--full` releases them.
    pub free_pages_kept: u64,
}

impl Prediction {
    /// Bytes the run gives back (database and WAL).
    pub fn reclaimed(&self) -> i64 {
        (self.before.db_bytes + self.before.wal_bytes) as i64
            - (self.db_bytes_after + self.wal_bytes_after) as i64
    }

    /// Whether there is anything to do.
    pub fn is_noop(&self) -> bool {
        self.before.wal_bytes == 0 && self.db_bytes_after >= self.before.db_bytes
    }
}

/// Predict a vacuum from a (read-only) connection.
pub fn predict(conn: &Connection, db: &Path, opts: Options) -> Result<Prediction> {
    let before = space::measure(conn, db)?;
    let releases_free = opts.full || before.auto_vacuum != 0;
    let free_pages_kept = if releases_free {
        0
    } else {
        before.freelist_pages
    };
    let pages_after = if releases_free && before.freelist_pages > 0 {
        let usable = before.page_size - u64::from(reserved_bytes(db));
        final_db_size(
            before.page_count,
            before.freelist_pages,
            before.page_size,
            usable,
        )
    } else {
        before.page_count
    };
    Ok(Prediction {
        db_bytes_after: pages_after * before.page_size,
        wal_bytes_after: 0,
        free_pages_kept,
        before,
    })
}

/// Bytes reserved at the end of each page (byte 20 of the database header; 0 unless an
/// extension asked for them).
fn reserved_bytes(db: &Path) -> u8 {
    use std::io::Read;
    let mut header = [0u8; 21];
    std::fs::File::open(db)
        .and_then(|mut f| f.read_exact(&mut header))
        .map_or(0, |()| header[20])
}

/// SQLite's `finalDbSize` (btree.c): the page count an auto-vacuum database ends with once
/// its `n_free` free pages are released: pointer-map pages that are no longer needed go too,
/// and the result never ends on a pointer-map page or the lock-byte page.
fn final_db_size(n_orig: u64, n_free: u64, page_size: u64, usable: u64) -> u64 {
    let pending = 0x4000_0000 / page_size + 1;
    let per_map = usable / 5 + 1;
    let ptrmap_pageno = |pgno: u64| -> u64 {
        if pgno < 2 {
            return 0;
        }
        let r = (pgno - 2) / per_map * per_map + 2;
        if r == pending { r + 1 } else { r }
    };
    let n_entry = usable / 5;
    let n_ptrmap = (n_free + ptrmap_pageno(n_orig) + n_entry - n_orig) / n_entry;
    let mut n_fin = n_orig - n_free - n_ptrmap;
    if n_orig > pending && n_fin < pending {
        n_fin -= 1;
    }
    while ptrmap_pageno(n_fin) == n_fin || n_fin == pending {
        n_fin -= 1;
    }
    n_fin
}

/// What a vacuum did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub before: Space,
    pub after: Space,
}

/// `PRAGMA wal_checkpoint(TRUNCATE)`. When another connection kept it from copying or
/// truncating the WAL (a reader on an old snapshot, or a writer), it fails with
/// [`Refusal::Locked`]: the database is intact, the WAL is not emptied. A database not in WAL
/// mode has nothing to checkpoint.
fn checkpoint_truncate(conn: &Connection) -> Result<()> {
    let (busy, log, done): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    if busy != 0 || (log >= 0 && done < log) {
        return Err(Refusal::Locked(format!(
            "another connection is using the database: the WAL could not be emptied \
             ({done} of {log} frames copied)"
        ))
        .into());
    }
    Ok(())
}

/// Bytes free on the file system that holds `dir`.
fn free_disk_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0)
        .then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Run the vacuum on a read-write connection (see `super::open_read_write`), under the
/// caller's write guard.
///
/// A step that another connection kept waiting past the busy timeout (the runtime writing, a
/// reader holding an old snapshot) ends the run as [`Refusal::Locked`]: what was done is
/// committed and sound, the rest is left for the next run.
pub fn apply(conn: &Connection, db: &Path, opts: Options) -> Result<Applied> {
    apply_steps(conn, db, opts).map_err(|e| {
        let busy = e.chain().any(|c| {
            c.downcast_ref::<rusqlite::Error>()
                .is_some_and(super::is_busy)
        });
        if busy {
            anyhow::Error::new(Refusal::Locked(format!(
                "another connection is using the database and kept the vacuum waiting past \
                 the {} s busy timeout ({e:#}); what was done is committed, the rest is left \
                 for the next run",
                super::BUSY_TIMEOUT_MS / 1000
            )))
        } else {
            e
        }
    })
}

fn apply_steps(conn: &Connection, db: &Path, opts: Options) -> Result<Applied> {
    let before = space::measure(conn, db)?;
    checkpoint_truncate(conn).context("checkpoint before the vacuum")?;
    if opts.full {
        // VACUUM writes the rebuilt database through the WAL and a temporary copy: it needs
        // about twice the used size free; refuse early rather than fail half-way.
        let used = (before.page_count - before.freelist_pages) * before.page_size;
        let dir = db.parent().unwrap_or(Path::new("."));
        if let Some(free) = free_disk_bytes(dir)
            && free < used.saturating_mul(2)
        {
            anyhow::bail!(
                "a full VACUUM needs about {} bytes free beside the database, and {} has {free}",
                used.saturating_mul(2),
                dir.display()
            );
        }
        conn.execute_batch("VACUUM").context("VACUUM")?;
    } else if before.auto_vacuum != 0 {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let run = conn.prepare("PRAGMA incremental_vacuum").and_then(|mut s| {
            s.query_map([], |_| Ok(()))?
                .collect::<rusqlite::Result<()>>()
        });
        match run {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e).context("incremental_vacuum");
            }
        }
    }
    checkpoint_truncate(conn).context("checkpoint after the vacuum")?;
    let after = space::measure(conn, db)?;
    Ok(Applied { before, after })
}
