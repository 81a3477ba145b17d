//! `inspect` of a SQLite-era agent (OpenClaw 2026.8.1 and later): the same report as a
//! store's, read from `agents/<id>/agent/openclaw-agent.sqlite` without writing to it.
//!
//! - entries are the `session_nodes` rows (their `entry_json` is the JSON era's entry),
//!   classified by `keys::classify`; `updatedAt` is the entry's, else the row's `updated_at`;
//! - each selected session's transcript is its `transcript_events` rows, streamed as the
//!   JSON era's JSONL through the same [`scan`] a transcript file gets, so every count means
//!   what it means for a file;
//! - where the bytes go ([`DbFacts`]): the database file, its WAL and shared-memory index, free
//!   pages, bytes per table (`dbstat`), trajectory runtime events, transcript archives (rows
//!   and `.zst` files), cold storage, and the JSON-era files still in `sessions/` or in the
//!   import archive; `vacuum` is predicted by its own code.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rayon::prelude::*;
use rusqlite::Connection;
use serde_json::Value;

use crate::json::Json;

use super::{
    FileStat, Filters, Hooks, SessionRow, StoreReport, TranscriptFacts, passes_before_scan, scan,
};
use crate::agentdb::cleanup as dbc;
use crate::agentdb::{self, read, space, transcripts, vacuum};
use crate::keys;
use crate::layout::{self, FileKind};
use crate::transcript::job::{Planner, PlannerAt, Status};
use crate::transcript::tree::{self, Tree};

/// What only a database has: where its bytes go.
#[derive(Debug, Clone)]
pub struct DbFacts {
    pub path: PathBuf,
    pub schema_version: i64,
    pub app_version: Option<String>,
    pub space: space::Space,
    /// Bytes of pages per table (indexes included), largest first.
    pub tables: Vec<(String, u64)>,
    /// Entries archived in place (`archived_at` set).
    pub archived_entries: u64,
    /// Rows of `trajectory_runtime_events`.
    pub trajectory_events: u64,
    /// Rows of `transcript_events`, and the bytes of their event text (compressed rows count
    /// their uncompressed size).
    pub transcript_events: u64,
    pub transcript_event_bytes: u64,
    /// Rows of `session_transcript_archives` and the bytes of their blobs.
    pub archive_rows: FileStat,
    /// Rows of `session_transcript_cold_archives` (transcripts moved to cold storage) and
    /// their archive bytes.
    pub cold_rows: FileStat,
    /// What `vacuum` would leave.
    pub vacuum: vacuum::Prediction,
}

/// File categories of a SQLite-era agent, in report order.
const CATEGORIES: [&str; 10] = [
    "database",
    "wal",
    "shm",
    "archivesCompressed",
    "coldStorage",
    "legacyStore",
    "legacyTranscripts",
    "legacyArchives",
    "legacyOther",
    "importArchive",
];

fn count_of(conn: &Connection, sql: &str) -> Result<(u64, u64)> {
    Ok(conn.query_row(sql, [], |r| {
        Ok((
            r.get::<_, i64>(0)?.max(0) as u64,
            r.get::<_, Option<i64>>(1)?.unwrap_or(0).max(0) as u64,
        ))
    })?)
}

/// Files under a directory, recursively (symlinks not followed), added to `stat`.
fn add_tree(dir: &Path, stat: &mut FileStat) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            add_tree(&e.path(), stat);
        } else if ft.is_file()
            && let Ok(m) = e.metadata()
        {
            stat.count += 1;
            stat.bytes += m.len();
        }
    }
}

/// The files of the agent: the database and its companions, then `sessions/` (compressed
/// archives, cold storage, what the JSON era left), then the import archive.
fn scan_files(db: &Path, r: &mut StoreReport) {
    let mut stats: Vec<(&'static str, FileStat)> = CATEGORIES
        .iter()
        .map(|c| (*c, FileStat::default()))
        .collect();
    let mut add = |cat: &str, bytes: u64| {
        if let Some((_, st)) = stats.iter_mut().find(|(c, _)| *c == cat) {
            st.count += 1;
            st.bytes += bytes;
        }
    };
    for (cat, p) in [
        ("database", db.to_path_buf()),
        ("wal", agentdb::wal_path(db)),
        ("shm", agentdb::shm_path(db)),
    ] {
        if let Ok(m) = std::fs::metadata(&p) {
            add(cat, m.len());
        }
    }
    if let Some(sessions) = agentdb::sessions_dir_for(db) {
        for f in crate::maintenance::scan::scan(&sessions) {
            let cat = if f.name.ends_with(".zst") {
                "archivesCompressed"
            } else {
                match layout::classify(&f.name, "sessions.json") {
                    FileKind::Store => {
                        r.notes.push(format!(
                            "{} is still there beside the database (a migration that did not \
                             finish?); the database is the live store",
                            f.path.display()
                        ));
                        "legacyStore"
                    }
                    FileKind::Transcript | FileKind::TopicTranscript => "legacyTranscripts",
                    FileKind::Archive { .. } | FileKind::LegacyStoreBackup => "legacyArchives",
                    _ => "legacyOther",
                }
            };
            add(cat, f.size);
        }
        let mut cold = FileStat::default();
        add_tree(&sessions.join("cold"), &mut cold);
        if let Some((_, st)) = stats.iter_mut().find(|(c, _)| *c == "coldStorage") {
            *st = cold;
        }
    }
    if let Some(agent_dir) = db.parent().and_then(Path::parent) {
        let mut imported = FileStat::default();
        add_tree(
            &agent_dir.join("session-sqlite-import-archive"),
            &mut imported,
        );
        if let Some((_, st)) = stats.iter_mut().find(|(c, _)| *c == "importArchive") {
            *st = imported;
        }
    }
    r.disk_bytes = stats.iter().map(|(_, st)| st.bytes).sum();
    r.files = stats;
}

/// Add the bytes each field of an entry takes in its `entry_json` text (compact JSON: the
/// member and its comma) to `by_field`.
fn add_entry_fields(entry: &Value, by_field: &mut std::collections::HashMap<String, u64>) {
    let Value::Object(m) = entry else { return };
    for (k, v) in m {
        let len = serde_json::to_string(k).map_or(0, |s| s.len())
            + crate::jsjson::to_string_compact(v).len()
            + 2;
        *by_field.entry(k.clone()).or_default() += len as u64;
    }
}

/// Read one session's rows and measure them as a transcript file is measured; the transcript
/// commands' figures are their own predictions on this index (`agentdb::transcripts::predict`,
/// which reads back only the rows a plan patches), in the bytes the rows store.
fn analyse(
    conn: &Connection,
    db: &Path,
    session_id: &str,
    hooks: &Hooks,
) -> Result<TranscriptFacts> {
    // One read snapshot for the scan and the rows the predictions read back.
    let _snapshot = conn.unchecked_transaction()?;
    let (index, counts) =
        read::with_transcript(conn, session_id, |r| scan::scan_reader(r, hooks.counter))?;
    let mut f = TranscriptFacts {
        no_header: index.header().is_none(),
        ..TranscriptFacts::default()
    };
    let tree = Tree::build(&index);
    f.dangling_parents = tree.dangling.len();
    let pairing = tree::pairing(
        &index,
        tree::context_iter(&index, &tree, &tree.active_path()),
    );
    f.orphan_tool_results = pairing.orphans;
    f.context_tokens = (hooks.context_tokens)(&index, &tree).ok();
    let label = transcripts::label(db, session_id);
    let predict = |planner: &PlannerAt| {
        transcripts::predict(conn, &label, session_id, &index, &tree, planner)
    };
    let freed = |planner: &Planner| {
        let o = predict(&|_, index, tree| planner(index, tree));
        match o.status {
            Status::WouldChange => o.bytes_before as i64 - o.bytes_after as i64,
            _ => 0,
        }
    };
    if counts.images > 0 || counts.media_references > 0 {
        f.strip_bytes = freed(hooks.strip);
    }
    if counts.silent_replies > 0 {
        f.prune_bytes = freed(hooks.prune);
    }
    if index.cache_ttl.len() > 1 {
        f.cache_ttl_bytes = freed(hooks.cache_ttl);
    }
    if f.context_tokens
        .is_some_and(|t| t > hooks.compact_min_tokens)
    {
        f.compact_tokens = super::compact_saved(&predict(hooks.compact));
    }
    f.counts = counts;
    Ok(f)
}

/// Inspect one agent database.
pub fn inspect_database(
    target: &dbc::Target,
    filters: &Filters,
    hooks: &Hooks,
    now_ms: f64,
) -> Result<StoreReport> {
    let (agent_id, db) = (target.agent_id.as_str(), target.db.as_path());
    let ctx = || db.display().to_string();
    let conn = agentdb::open_read_only(db).with_context(ctx)?;
    let schema = agentdb::read_schema(&conn).with_context(ctx)?;
    for table in ["session_nodes", "transcript_events"] {
        if !schema.has_table(table) {
            anyhow::bail!(
                "{}: not an OpenClaw agent database (no {table} table; schema version {})",
                db.display(),
                schema.user_version
            );
        }
    }
    let mut r = StoreReport {
        agent_id: agent_id.to_owned(),
        store_path: db.to_owned(),
        sqlite: Some(db.to_owned()),
        ..StoreReport::default()
    };
    if let Some(why) = schema.write_refusal() {
        r.notes.push(format!(
            "{why}; inspect reads it as far as its tables allow"
        ));
    }
    scan_files(db, &mut r);
    let (mut rows, archived_entries) = session_rows(&conn, &mut r).with_context(ctx)?;
    if let Some(sel) = &filters.session {
        r.session_matched = rows.iter().any(|row| sel.matches(&row.key));
    }
    rows.retain(|row| passes_before_scan(row, filters, now_ms));
    let (wanted, missing) = sessions_with_rows(&conn, &rows, filters)?;
    let done = analyse_sessions(db, &wanted, hooks);
    for place in missing {
        rows[place].transcript_missing = true;
    }
    for row in &mut rows {
        row.facts = row
            .session_id
            .as_ref()
            .and_then(|sid| done.get(&**sid))
            .map(|f| Box::new(f.clone()));
    }
    if let Some(min) = filters.larger_than {
        rows.retain(|row| row.facts.as_ref().is_some_and(|f| f.counts.bytes > min));
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for row in &rows {
        let (Some(sid), Some(f)) = (&row.session_id, &row.facts) else {
            continue;
        };
        // Damage is named by the database and the session id.
        if seen.insert(sid) {
            r.add_transcript(&transcripts::label(db, sid), f);
        }
    }
    r.sessions = rows;
    r.database = Some(db_facts(&conn, db, &schema, archived_entries).with_context(ctx)?);
    if let Some(opts) = hooks.cleanup_db {
        r.reclaimable.cleanup = predict_cleanup(target, opts, &mut r);
    }
    Ok(r)
}

/// Every session node as a row, with the per-kind counts and per-field bytes of its entry;
/// also how many entries are archived.
fn session_rows(conn: &Connection, r: &mut StoreReport) -> Result<(Vec<SessionRow>, u64)> {
    let mut rows = Vec::new();
    let mut by_field = std::collections::HashMap::new();
    let mut archived_entries = 0;
    read::for_each_session_node(conn, |n| {
        r.entries += 1;
        r.store_bytes += n.entry_bytes;
        archived_entries += u64::from(n.archived_at.is_some());
        add_entry_fields(&n.entry, &mut by_field);
        let entry = match n.entry {
            e @ Value::Object(_) => Some(Json::from_value(e)),
            _ => None,
        };
        let kind = keys::classify(&n.key, entry.as_ref());
        let updated_at = (entry.as_ref())
            .and_then(crate::store::updated_at)
            .or(Some(n.updated_at as f64));
        r.count_entry(kind, updated_at);
        rows.push(SessionRow {
            key: n.key.into_boxed_str(),
            session_id: Some(n.session_id)
                .filter(|s| !s.is_empty())
                .map(String::into_boxed_str),
            kind,
            updated_at,
            transcript: super::TranscriptName::None,
            facts: None,
            transcript_missing: false,
        });
    })?;
    let mut fields: Vec<(String, u64)> = by_field.into_iter().collect();
    fields.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    r.store_fields = fields;
    Ok((rows, archived_entries))
}

/// The session ids of `rows` that have transcript rows, each once, and the places of the rows
/// whose session has none (damage).
fn sessions_with_rows<'a>(
    conn: &Connection,
    rows: &'a [SessionRow],
    filters: &Filters,
) -> Result<(Vec<&'a str>, Vec<usize>)> {
    let with_rows: HashSet<String> = conn
        .prepare("SELECT DISTINCT session_id FROM transcript_events")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut wanted: Vec<&str> = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();
    let mut missing = Vec::new();
    for (place, row) in rows.iter().enumerate() {
        let Some(sid) = row.session_id.as_deref() else {
            continue;
        };
        if with_rows.contains(sid) {
            if listed.insert(sid) {
                wanted.push(sid);
            }
        } else if filters.larger_than.is_none() {
            missing.push(place);
        }
    }
    Ok((wanted, missing))
}

/// Each session's rows once, sessions in parallel: every worker reads through its own
/// read-only connection (WAL readers do not block each other).
fn analyse_sessions(
    db: &Path,
    wanted: &[&str],
    hooks: &Hooks,
) -> std::collections::HashMap<String, TranscriptFacts> {
    wanted
        .par_iter()
        .map_init(
            || agentdb::open_read_only(db),
            |conn, sid| {
                let facts = match conn {
                    Ok(conn) => analyse(conn, db, sid, hooks),
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                }
                .unwrap_or_else(|e| TranscriptFacts {
                    error: Some(format!("{e:#}")),
                    ..TranscriptFacts::default()
                });
                (hooks.progress)(super::Tick::Done(facts.counts.bytes));
                ((*sid).to_owned(), facts)
            },
        )
        .collect()
}

/// The drop of the agent's disk bytes under `cleanup --enforce`, from the real apply on a
/// scratch copy (`agentdb::cleanup::predict`); `None` with a note when it was not predicted.
fn predict_cleanup(t: &dbc::Target, opts: &dbc::Options, r: &mut StoreReport) -> Option<i64> {
    match dbc::predict::predict(t, opts) {
        Ok(dbc::predict::Outcome::Predicted(p)) => {
            for (path, why) in p.unreadable {
                if !r.damage.unreadable.iter().any(|(q, _)| q == &path) {
                    r.damage.unreadable.push((path, why));
                }
            }
            Some(p.disk_before as i64 - p.disk_after as i64)
        }
        Ok(dbc::predict::Outcome::Skipped(why)) => {
            r.notes
                .push(format!("cleanup --enforce is not predicted: {why}"));
            None
        }
        Err(e) => {
            r.notes.push(format!("cleanup --enforce would stop: {e:#}"));
            Some(0)
        }
    }
}

fn db_facts(
    conn: &Connection,
    db: &Path,
    schema: &agentdb::Schema,
    archived_entries: u64,
) -> Result<DbFacts> {
    let has = |t: &str| schema.has_table(t);
    let (transcript_events, transcript_event_bytes) = if schema.has_table("transcript_events")
        && conn
            .prepare("SELECT 1 FROM pragma_table_info('transcript_events') WHERE name = 'event_utf8_bytes'")?
            .exists([])?
    {
        count_of(
            conn,
            "SELECT count(*), sum(coalesce(event_utf8_bytes, length(CAST(event_json AS BLOB)))) FROM transcript_events",
        )?
    } else {
        count_of(conn, "SELECT count(*), sum(length(CAST(event_json AS BLOB))) FROM transcript_events")?
    };
    let trajectory_events = if has("trajectory_runtime_events") {
        count_of(conn, "SELECT count(*), NULL FROM trajectory_runtime_events")?.0
    } else {
        0
    };
    let archive_rows = if has("session_transcript_archives") {
        let (count, bytes) = count_of(
            conn,
            "SELECT count(*), sum(length(archive_blob)) FROM session_transcript_archives",
        )?;
        FileStat { count, bytes }
    } else {
        FileStat::default()
    };
    let cold_rows = if has("session_transcript_cold_archives") {
        let (count, bytes) = count_of(
            conn,
            "SELECT count(*), sum(archive_bytes) FROM session_transcript_cold_archives",
        )?;
        FileStat { count, bytes }
    } else {
        FileStat::default()
    };
    Ok(DbFacts {
        path: db.to_owned(),
        schema_version: schema.user_version,
        app_version: schema.meta.as_ref().and_then(|m| m.app_version.clone()),
        space: space::measure(conn, db)?,
        tables: space::bytes_per_table(conn)?,
        archived_entries,
        trajectory_events,
        transcript_events,
        transcript_event_bytes,
        archive_rows,
        cold_rows,
        vacuum: vacuum::predict(conn, db, vacuum::Options::default())?,
    })
}
