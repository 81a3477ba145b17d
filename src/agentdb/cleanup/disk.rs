//! The sessions directory of a SQLite-era cleanup: which directory it is (2026.9.x:
//! `agents/<id>/sessions`; 2026.8.x: the directory of the path the user named), the
//! unreferenced-artifact sweep (the JSON era's rules, reused), the disk measurement of the
//! budget (`readSessionPhysicalDiskUsage`) and the dry run's budget inspection.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rusqlite::Connection;
use serde_json::Value;

use super::plan::{self, Rules, Settings};
use super::{Options, Target};
use crate::fsutil::Confined;
use crate::json::Json;
use crate::maintenance::budget::{self, BudgetReport, Dir, SweepReport};
use crate::maintenance::files::{self, PathSet};
use crate::store::Store;

/// Where a database's files are.
pub struct Layout {
    pub db: PathBuf,
    pub store_path: PathBuf,
    /// The directory the sweep and the budget work in.
    pub sessions_dir: PathBuf,
    /// Where published archives go (`agents/<id>/sessions`).
    pub archive_dir: PathBuf,
    pub rules: Rules,
}

impl Layout {
    pub fn new(t: &Target, rules: Rules) -> Layout {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let db = abs(&t.db);
        let store_path = abs(&t.store_path);
        let archive_dir = crate::agentdb::sessions_dir_for(&db)
            .unwrap_or_else(|| db.parent().unwrap_or(Path::new("/")).join("sessions"));
        let sessions_dir = match rules {
            Rules::V9 => archive_dir.clone(),
            Rules::V8 => store_path.parent().unwrap_or(Path::new("/")).to_path_buf(),
        };
        Layout {
            db,
            store_path,
            sessions_dir,
            archive_dir,
            rules,
        }
    }
}

/// A migration archive the runtime leaves out of its scans (`isMigrationArchiveArtifactName`):
/// `*.migrated[.N]` and `*.jsonl.pre-doctor-(branch|openai-codex)-repair-<stamp>.bak`.
fn is_migration_archive(name: &str) -> bool {
    static RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\.migrated(?:\.\d+)?$|\.jsonl\.pre-doctor-(?:branch|openai-codex)-repair-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z\.bak$",
        )
        .expect("a valid pattern")
    });
    RE.is_match(name)
}

/// `isRetainedSessionTranscriptArchiveName`.
pub fn is_retained_archive_name(name: &str) -> bool {
    if regex::Regex::new(r"^sessions\.json\.bak\.\d+$").is_ok_and(|r| r.is_match(name)) {
        return false;
    }
    regex::Regex::new(
        r"\.(deleted|reset|bak)\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(\.\d{3})?Z(\.[0-9a-f]{32})?(\.zst)?$",
    )
    .is_ok_and(|r| r.is_match(name))
}

/// The canonical artifact paths of the entries of `keys` (excluded from a dry run's sweep).
pub fn entry_artifacts<'a>(
    before: &Store,
    keys: impl Iterator<Item = &'a String>,
    dir: &Path,
) -> PathSet {
    let real = crate::store::paths::RealDir::new(dir);
    let mut out = PathSet::default();
    for k in keys {
        if let Some(e) = before.get(k) {
            out.extend(
                files::entry_artifacts_canonical(e, dir, real.as_ref())
                    .into_iter()
                    .map(PathBuf::into_os_string),
            );
        }
    }
    out
}

/// The scan of the sweep's directory without migration archives.
fn scanned(dir: &Path) -> budget::Scanned {
    let (mut files, blobs) = budget::scan(dir);
    files.retain(|f| !is_migration_archive(&f.name));
    (files, blobs)
}

/// The unreferenced-artifact sweep (`pruneUnreferencedSessionArtifacts`) over the entries
/// that remain: simulated without `confined`, for real with it.
pub fn sweep(
    l: &Layout,
    s: &Store,
    prune_after_ms: i64,
    excluded: &PathSet,
    confined: Option<&Confined>,
) -> Result<SweepReport> {
    let older = prune_after_ms.max(0);
    if !l.sessions_dir.is_dir() {
        return Ok(SweepReport {
            older_than_ms: older,
            ..Default::default()
        });
    }
    // Migration archives are out of the scan, of a simulation and of the real sweep alike.
    let d = Dir::new(&l.sessions_dir, &l.store_path, confined).excluding(is_migration_archive);
    budget::sweep(&d, s, older, excluded)
}

fn size(p: &Path) -> i64 {
    std::fs::symlink_metadata(p)
        .ok()
        .filter(|m| m.is_file())
        .map_or(0, |m| m.len() as i64)
}

/// `readSessionPhysicalDiskUsage`: the files of the sessions directory (without migration
/// archives), of `cold/`, the prompt blobs, and the database with its `-wal` (2026.9.x); the
/// directory of the named path only (2026.8.x, where that is `agent/` with the `-shm` too).
pub fn measure(l: &Layout) -> i64 {
    let (files, blobs) = scanned(&l.sessions_dir);
    let mut total: i64 = files.iter().chain(&blobs).map(|f| f.size as i64).sum();
    if l.rules == Rules::V9 {
        let (cold, _) = budget::scan(&l.sessions_dir.join("cold"));
        total += cold.iter().map(|f| f.size as i64).sum::<i64>();
        total += size(&l.db) + size(&crate::agentdb::wal_path(&l.db));
    } else if l.db.parent() != Some(l.sessions_dir.as_path()) {
        total += size(&l.db) + size(&crate::agentdb::wal_path(&l.db));
    }
    total
}

/// The dry run's budget (`inspectSqliteSessionHistoryDiskBudget`): a measurement, and whether
/// an enforce run would have something to evict.
pub fn inspect_budget(
    conn: &Connection,
    l: &Layout,
    m: &Settings,
    o: &Options,
    rules: Rules,
) -> Result<(Option<BudgetReport>, bool)> {
    let (Some(max), Some(hw)) = (m.max_disk_bytes, m.high_water_bytes) else {
        return Ok((None, false));
    };
    let total = measure(l);
    let over = total > max;
    let report = BudgetReport {
        total_bytes_before: total,
        total_bytes_after: total,
        removed_files: 0,
        removed_entries: 0,
        freed_bytes: 0,
        max_bytes: max,
        high_water_bytes: hw,
        over_budget: over,
    };
    let mut would = false;
    if over && !o.flags.is_warn() && rules == Rules::V9 {
        would = has_published_archive(conn)?
            || !retained_archive_files(l).is_empty()
            || !historical_windows(conn, o, m)?.is_empty()
            || !evictable_entries(conn, o, m)?.is_empty();
    }
    Ok((Some(report), would))
}

fn has_published_archive(conn: &Connection) -> Result<bool> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM session_transcript_archives WHERE published_at IS NOT NULL",
        [],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// Names of the published canonical archives (never counted as legacy files).
pub fn canonical_names(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT archive_name FROM session_transcript_archives")?;
    let v = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(v)
}

/// Legacy archive files of the sessions directory, oldest mtime first.
pub fn retained_archive_files(l: &Layout) -> Vec<(PathBuf, f64, u64)> {
    let (files, _) = scanned(&l.sessions_dir);
    let mut v: Vec<(PathBuf, f64, u64)> = files
        .into_iter()
        .filter(|f| is_retained_archive_name(&f.name))
        .map(|f| (f.path, f.mtime_ms, f.size))
        .collect();
    v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
    v
}

/// `readHistoricalSessionIds`: `session_windows` that nothing protects, oldest first. Protected
/// are the current session and the entry session ids of every node, the windows of archived
/// or pinned nodes (but not of cap-archived nodes the budget may evict), and with
/// `preserveRecent` the windows of recent entries.
pub fn historical_windows(conn: &Connection, o: &Options, m: &Settings) -> Result<Vec<String>> {
    let keys = active_keys(o);
    let p = preserve(&keys, m);
    let recent = plan::Preserve {
        keys: &std::collections::HashSet::new(),
        ..p
    };
    let mut protected: std::collections::HashSet<String> = std::collections::HashSet::new();
    let nodes: Vec<(String, String, String, bool, bool)> = conn
        .prepare(
            "SELECT session_key, current_session_id, entry_json, archived_at IS NOT NULL, \
             pinned_at IS NOT NULL FROM session_nodes",
        )?
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut retained: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut recent_keys: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (key, current, json, archived, pinned) in &nodes {
        protected.insert(current.clone());
        let entry = Json::from_value(crate::jsjson::parse(json.as_bytes()).unwrap_or(Value::Null));
        protected.extend(super::write::entry_session_ids(&entry));
        if *archived || *pinned {
            let evictable = !*pinned
                && entry.get("archivedAt").is_some()
                && entry.get("archiveReason").and_then(Json::as_str) == Some("active-session-cap")
                && !p.non_archived(key, &entry);
            if !evictable {
                retained.insert(key.clone());
            }
        }
        if m.preserve_recent_ms.is_some() && recent.is_recent(key, &entry) {
            recent_keys.insert(key.clone());
        }
    }
    let windows: Vec<(String, String)> = conn
        .prepare(
            "SELECT session_id, session_key FROM session_windows ORDER BY updated_at, session_id",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(windows
        .into_iter()
        .filter(|(sid, key)| {
            !protected.contains(sid) && !retained.contains(key) && !recent_keys.contains(key)
        })
        .map(|(sid, _)| sid)
        .collect())
}

/// Entries the budget may delete: archived for the cap and not otherwise preserved, in
/// `archived_at, session_key` order.
pub fn evictable_entries(
    conn: &Connection,
    o: &Options,
    m: &Settings,
) -> Result<Vec<(String, Json)>> {
    let mut stmt = conn.prepare(
        "SELECT session_key, entry_json FROM session_nodes WHERE archived_at IS NOT NULL \
         ORDER BY archived_at, session_key",
    )?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let keys = active_keys(o);
    let p = preserve(&keys, m);
    Ok(rows
        .into_iter()
        .filter_map(|(k, j)| {
            Some((
                k,
                Json::from_value(crate::jsjson::parse(j.as_bytes()).ok()?),
            ))
        })
        .filter(|(k, e)| {
            e.get("archivedAt").is_some()
                && e.get("archiveReason").and_then(Json::as_str) == Some("active-session-cap")
                && !p.non_archived(k, e)
        })
        .collect())
}

/// The active key of the run, as the set [`plan::Preserve`] takes.
fn active_keys(o: &Options) -> std::collections::HashSet<String> {
    o.flags.active_key.iter().cloned().collect()
}

/// What 2026.9.x preserves from the disk budget's eviction, now: `keys` and recent entries.
fn preserve<'k>(keys: &'k std::collections::HashSet<String>, m: &Settings) -> plan::Preserve<'k> {
    plan::Preserve {
        rules: Rules::V9,
        keys,
        recent_ms: m.preserve_recent_ms,
        now_ms: crate::maintenance::now_ms(),
    }
}
