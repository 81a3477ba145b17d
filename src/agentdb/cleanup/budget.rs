//! The disk budget of an applied SQLite-era cleanup (`enforceSqliteSessionHistoryDiskBudget`
//! of 2026.9.x): measured after the entry writes and the sweep; over `maxBytes`, it gives free
//! pages back and removes, oldest first and re-measuring after each, until usage is at the
//! high-water mark: published canonical archives (file and row), legacy archive files of the
//! sessions directory, historical windows (archived first, like a deleted entry's
//! transcript), then canonical archives again, then cap-archived entries (deleted without an
//! archive; 2026.8.x has no cap-archived entries to evict).

use std::collections::HashSet;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};

use super::disk::{self, Layout};
use super::plan::Rules;
use super::write::{self, begin, delete_node, delete_window, entry_session_ids, referenced_ids};
use super::{Options, Settings};
use crate::json::Json;
use crate::maintenance::budget::BudgetReport;

/// `PRAGMA wal_checkpoint(TRUNCATE)`; false when another connection kept it from
/// completing.
fn checkpoint(conn: &Connection) -> Result<bool> {
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    Ok(busy == 0)
}

/// `reclaimSqliteFreePages`: a checkpoint, then incremental vacuum in passes of at most 512
/// pages, each followed by a checkpoint. False when a checkpoint could not complete (another
/// connection, a runtime's, reads or writes the database): as the runtime defers its budget
/// then, the budget stops there, and a later run finishes it.
fn reclaim(conn: &Connection) -> Result<bool> {
    if !checkpoint(conn)? {
        return Ok(false);
    }
    loop {
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        if free <= 0 {
            return Ok(true);
        }
        let tx = begin(conn)?;
        tx.query_row(
            &format!("PRAGMA incremental_vacuum({})", free.min(512)),
            [],
            |_| Ok(()),
        )
        .optional()?;
        tx.commit()?;
        if !checkpoint(conn)? {
            return Ok(false);
        }
        let after: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        if after >= free {
            return Ok(true);
        }
    }
}

fn remove_file(path: &std::path::Path) -> Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// What a budget pass left: files removed, the usage after, and whether it was deferred (a
/// checkpoint that could not complete).
struct Pass {
    removed: u64,
    total: i64,
    deferred: bool,
}

/// `pruneAllSessionTranscriptArchivesToHighWater`: reclaim free pages, then remove published
/// canonical archives (the file, then the row, as the runtime does: a run killed between
/// leaves a row whose file is gone, which the next pass removes) and legacy archive files
/// until usage is at `hw`.
fn prune_archives(conn: &Connection, l: &Layout, hw: i64) -> Result<Pass> {
    let deferred = |removed, total| Pass {
        removed,
        total,
        deferred: true,
    };
    if !reclaim(conn)? {
        return Ok(deferred(0, disk::measure(l)));
    }
    let mut total = disk::measure(l);
    let mut removed = 0;
    while total > hw {
        let row: Option<(String, String, String)> = conn
            .query_row(
                "SELECT session_id, generation, archive_name FROM session_transcript_archives \
                 WHERE published_at IS NOT NULL ORDER BY created_at, session_id, generation LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((sid, generation, name)) = row else {
            break;
        };
        if remove_file(&l.archive_dir.join(&name))? {
            removed += 1;
        }
        let tx = begin(conn)?;
        tx.execute(
            "DELETE FROM session_transcript_archives WHERE session_id = ?1 AND generation = ?2",
            params![sid, generation],
        )?;
        tx.commit()?;
        if !reclaim(conn)? {
            return Ok(deferred(removed, disk::measure(l)));
        }
        total = disk::measure(l);
    }
    if total > hw {
        let canonical: HashSet<String> = disk::canonical_names(conn)?.into_iter().collect();
        for (path, _, _) in disk::retained_archive_files(l) {
            if total <= hw {
                break;
            }
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.as_ref().is_some_and(|n| canonical.contains(n)) {
                continue;
            }
            if remove_file(&path)? {
                removed += 1;
            }
            total = disk::measure(l);
        }
    }
    Ok(Pass {
        removed,
        total,
        deferred: false,
    })
}

/// Archive a historical window's transcript and delete the window; false when it had
/// nothing to archive and was left alone.
fn evict_window(conn: &Connection, l: &Layout, sid: &str) -> Result<bool> {
    let key: Option<String> = conn
        .query_row(
            "SELECT session_key FROM session_windows WHERE session_id = ?1",
            [sid],
            |r| r.get(0),
        )
        .optional()?;
    let Some(key) = key else { return Ok(false) };
    // A cold transcript's window holds its cold archive: never deleted (as the reference's
    // delete plans skip cold sessions).
    if write::cold_ids(conn)?.contains(sid) {
        return Ok(false);
    }
    let archive = write::materialize(conn, sid, &key, l.rules)?;
    let tx = begin(conn)?;
    if let Some(a) = &archive {
        write::insert_archive(&tx, a)?;
    }
    delete_window(&tx, sid)?;
    tx.commit()?;
    if let Some(a) = &archive {
        write::publish_one(conn, l, a)?;
    }
    Ok(true)
}

/// Delete a cap-archived entry with its unreferenced windows, without an archive.
fn evict_entry(conn: &Connection, key: &str, entry: &Json) -> Result<()> {
    let tx = begin(conn)?;
    let mut ids = entry_session_ids(entry);
    let others: Vec<String> = tx
        .prepare("SELECT session_id FROM session_windows WHERE session_key = ?1")?
        .query_map([key], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in others {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let owned = key.to_string();
    let removed: HashSet<&String> = std::iter::once(&owned).collect();
    let mut keep = referenced_ids(&tx, &removed)?;
    keep.extend(write::cold_ids(&tx)?);
    for id in ids.iter().filter(|id| !keep.contains(*id)) {
        delete_window(&tx, id)?;
    }
    delete_node(&tx, key)?;
    tx.commit()?;
    Ok(())
}

/// Enforce the budget on an applied run; `None` when the budget is off.
pub fn enforce(
    conn: &Connection,
    l: &Layout,
    m: &Settings,
    o: &Options,
    rules: Rules,
) -> Result<Option<BudgetReport>> {
    let (Some(max), Some(hw)) = (m.max_disk_bytes, m.high_water_bytes) else {
        return Ok(None);
    };
    let before = disk::measure(l);
    let mut report = BudgetReport {
        total_bytes_before: before,
        total_bytes_after: before,
        removed_files: 0,
        removed_entries: 0,
        freed_bytes: 0,
        max_bytes: max,
        high_water_bytes: hw,
        over_budget: before > max,
    };
    if before <= max || o.flags.is_warn() {
        return Ok(Some(report));
    }
    let mut total = before;
    let pass = |report: &mut BudgetReport, total: &mut i64| -> Result<bool> {
        let p = prune_archives(conn, l, hw)?;
        report.removed_files += p.removed;
        *total = p.total;
        Ok(!p.deferred)
    };
    let mut going = pass(&mut report, &mut total)?;
    if going && total > hw {
        for sid in disk::historical_windows(conn, o, m)? {
            if total <= hw {
                break;
            }
            if !evict_window(conn, l, &sid)? {
                total = disk::measure(l);
                continue;
            }
            report.removed_entries += 1;
            total = disk::measure(l);
            if total > hw {
                going = pass(&mut report, &mut total)?;
                if !going {
                    break;
                }
            }
        }
    }
    if going && total > hw {
        going = pass(&mut report, &mut total)?;
    }
    if going && rules == Rules::V9 && total > hw {
        for (key, entry) in disk::evictable_entries(conn, o, m)? {
            if total <= hw {
                break;
            }
            evict_entry(conn, &key, &entry)?;
            report.removed_entries += 1;
            let complete = reclaim(conn)?;
            total = disk::measure(l);
            if !complete {
                break;
            }
        }
    }
    if report.removed_entries > 0 {
        write::refresh_statistics(conn, report.removed_entries as usize)?;
        total = disk::measure(l);
    }
    report.total_bytes_after = total;
    report.freed_bytes = (before - total).max(0);
    Ok(Some(report))
}
