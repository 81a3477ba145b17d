//! What `cleanup --enforce` would free on a SQLite-era agent, found by running the real apply
//! ([`super::write::apply`]) on a private scratch copy, as `maintenance::predict` does for the
//! JSON era: the prediction is the apply's own result, not a second model of it.
//!
//! The scratch agent (`fsutil::scratch`) holds hard links (or sparse stand-ins) of the files
//! in `sessions/` (with `cold/` and the prompt blobs), and of `agent/` when the sweep works
//! there (2026.8.x with `--store` naming the database), plus a copy of the database made with
//! SQLite's online backup from a read-only connection: a consistent snapshot with the WAL's
//! committed content folded in, page for page, so free pages are reused as in the real file.
//! A `-wal` of the real one's length stands in as a sparse file of zeros (no valid header, so
//! SQLite reads no frame from it), so the disk budget measures what the real run measures.
//!
//! The copy needs temporary space as large as the database: when the temp directory's file
//! system has less free than that (plus a margin), nothing is copied and the reason is
//! returned instead of a figure.
//!
//! The figure compares the files the real run can change (the mirrored files, the database and
//! its `-wal`) before, with what the scratch holds after the apply and the close of its
//! connection (which checkpoints the WAL and removes it, as the real run's close does on a
//! database nobody else has open, which the guard makes sure of). The `-shm` is left out: every
//! reader makes it again, so no run frees it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{Options, Rules, Target};
use crate::agentdb;
use crate::fsutil::scratch::Scratch;

/// Room left on the temp file system besides the copy.
const MARGIN: u64 = 64 << 20;

/// What an apply would do to one agent's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prediction {
    /// Bytes of the files the apply can change, before and after.
    pub disk_before: u64,
    pub disk_after: u64,
    /// Files the mirror could not read (damage: they are measured by size only).
    pub unreadable: Vec<(PathBuf, String)>,
}

/// A prediction, or why none was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Predicted(Prediction),
    /// Not predicted; the reason reads after "not predicted: ".
    Skipped(String),
}

/// Run the apply of `o` (forced to enforce) on a scratch copy of `t`'s database and files.
/// An error of the apply (what the real run would stop on) is an error; a scratch copy that
/// cannot be made (no room, an unusable temp directory) is [`Outcome::Skipped`].
pub fn predict(t: &Target, o: &Options) -> Result<Outcome> {
    let ctx = || t.db.display().to_string();
    let conn = agentdb::open_read_only(&t.db).with_context(ctx)?;
    let schema = agentdb::read_schema(&conn).with_context(ctx)?;
    let layout = super::disk::Layout::new(t, Rules::for_schema(schema.user_version));
    let real = DbFiles::of(&layout.db);
    let (scratch, copy) = match scratch_copy(t, conn, &layout, &real) {
        Ok(made) => made,
        Err(e) => return Ok(Outcome::Skipped(format!("{e:#}"))),
    };
    let scratch_target = Target {
        agent_id: t.agent_id.clone(),
        store_path: scratch_path(t, &layout, &scratch, &copy),
        db: copy.clone(),
    };
    let before = mirrored_bytes(scratch.agent_root(), &copy) + real.total();
    let mut apply = o.clone();
    apply.flags.dry_run = false;
    apply.flags.mode = serde_json::Value::String("enforce".into());
    {
        let planned =
            super::preview(&scratch_target, &apply).map_err(|e| unmirror(e, &scratch, t))?;
        let conn = agentdb::open_read_write(&copy).with_context(|| copy.display().to_string())?;
        // A scratch copy needs no durability: no fsync on each commit and checkpoint.
        conn.pragma_update(None, "synchronous", "OFF")?;
        super::write::apply(&conn, &scratch_target, &apply, &planned)
            .map_err(|e| unmirror(e, &scratch, t))?;
    }
    let after = mirrored_bytes(scratch.agent_root(), &copy) + DbFiles::of(&copy).total();
    Ok(Outcome::Predicted(Prediction {
        disk_before: before,
        disk_after: after,
        unreadable: scratch.unreadable.clone(),
    }))
}

/// The scratch agent with its copy of the database (and the `-wal` stand-in), or why it
/// cannot be made.
fn scratch_copy(
    t: &Target,
    conn: rusqlite::Connection,
    layout: &super::disk::Layout,
    real: &DbFiles,
) -> Result<(Scratch, PathBuf)> {
    let tmp = std::env::temp_dir();
    let needed = real.db + real.wal + MARGIN;
    let free = free_bytes(&tmp)?;
    if free < needed {
        anyhow::bail!(
            "copying the database for the prediction needs {needed} bytes in {}, which has \
             {free} free",
            tmp.display()
        );
    }
    let agent_dir = layout.db.parent().unwrap_or(Path::new("/"));
    let sweeps_agent_dir = layout.sessions_dir == agent_dir;
    let scratch = Scratch::of_database_agent(
        &layout.archive_dir,
        sweeps_agent_dir.then_some(agent_dir),
        &t.agent_id,
    )?;
    let copy = scratch.agent_dir().join(agentdb::FILE_NAME);
    conn.backup(
        rusqlite::MAIN_DB,
        &copy,
        None::<fn(rusqlite::backup::Progress)>,
    )
    .with_context(|| format!("cannot copy {} for the prediction", t.db.display()))?;
    drop(conn);
    if real.wal > 0 {
        let wal = agentdb::wal_path(&copy);
        std::fs::File::create(&wal)
            .and_then(|f| f.set_len(real.wal))
            .with_context(|| format!("cannot create {}", wal.display()))?;
    }
    Ok((scratch, copy))
}

/// The sizes of a database and its WAL.
struct DbFiles {
    db: u64,
    wal: u64,
}

impl DbFiles {
    fn of(db: &Path) -> DbFiles {
        let len = |p: &Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
        DbFiles {
            db: len(db),
            wal: len(&agentdb::wal_path(db)),
        }
    }

    fn total(&self) -> u64 {
        self.db + self.wal
    }
}

/// Where the target's store path lands in the scratch agent.
fn scratch_path(
    t: &Target,
    layout: &super::disk::Layout,
    scratch: &Scratch,
    copy: &Path,
) -> PathBuf {
    let name = layout.store_path.file_name().unwrap_or_default();
    if agentdb::is_database_path(&t.store_path) {
        copy.to_path_buf()
    } else if layout.store_path.parent() == layout.db.parent() {
        scratch.agent_dir().join(name)
    } else {
        scratch.sessions_dir().join(name)
    }
}

/// Bytes of the regular files under the scratch agent, the database's own files left out.
fn mirrored_bytes(root: &Path, copy: &Path) -> u64 {
    let own = [
        copy.to_path_buf(),
        agentdb::wal_path(copy),
        agentdb::shm_path(copy),
    ];
    let mut total = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for ent in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = ent.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(ent.path());
            } else if meta.is_file() && !own.contains(&ent.path()) {
                total += meta.len();
            }
        }
    }
    total
}

/// An error of the scratch run, with the real agent's paths in place of the mirror's.
fn unmirror(e: anyhow::Error, scratch: &Scratch, t: &Target) -> anyhow::Error {
    let real_root =
        t.db.parent()
            .and_then(Path::parent)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
    anyhow::anyhow!(
        "{}",
        format!("{e:#}").replace(&scratch.agent_root().display().to_string(), &real_root)
    )
}

/// Bytes free for an unprivileged user on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .with_context(|| format!("{}: not a valid path", dir.display()))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot read the free space of {}", dir.display()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}
