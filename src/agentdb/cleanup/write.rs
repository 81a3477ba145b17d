//! The writes of a SQLite-era cleanup, in the reference's transactions and statement order
//! (which also makes the WAL its disk budget measures the reference's): the lifecycle
//! transaction (the entry plan read and planned, the `--fix-*` removals, the entries archived
//! in place), the maintenance's deletions in batches (per transcript: its archive, zstd level
//! 3, into `session_transcript_archives`, then its rows; then the entries), each batch
//! followed by its publish round (the archive files, the results recorded per pass), then the
//! sweep and the disk budget.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::batches;
use super::disk::{self, Layout};
use super::plan::{self, ArchivePhase, Rules};
use super::{Options, Preview, Summary, Target};
use crate::agentdb::read::has_table;
use crate::fsutil::Confined;
use crate::json::Json;
use crate::store::Store;

/// `collectSessionStateIdsForEntry`: `sessionId`, `previousSessionId`, `usageFamilySessionIds`
/// and the ids of a legacy `compactionCheckpoints` history (each checkpoint's `sessionId` and
/// its `preCompaction` / `postCompaction` `sessionId`), each trimmed, once. A malformed history
/// (which makes the runtime throw) gives what it can: the sweep refuses such a store first.
pub fn entry_session_ids(e: &Json) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |v: Option<&Json>| {
        if let Some(s) = v
            .and_then(Json::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            && !out.iter().any(|o| o == s)
        {
            out.push(s.to_string());
        }
    };
    add(e.get("sessionId"));
    add(e.get("previousSessionId"));
    if let Some(Json::Array(ids)) = e.get("usageFamilySessionIds") {
        for id in ids {
            add(Some(id));
        }
    }
    if let Some(Json::Array(checkpoints)) = e.get("compactionCheckpoints") {
        for cp in checkpoints {
            add(cp.get("sessionId"));
            add(cp.pointer("/preCompaction/sessionId"));
            add(cp.pointer("/postCompaction/sessionId"));
        }
    }
    out
}

pub(super) fn now_ms() -> i64 {
    crate::js::now_ms() as i64
}

pub(super) fn begin(conn: &Connection) -> Result<rusqlite::Transaction<'_>> {
    Ok(rusqlite::Transaction::new_unchecked(
        conn,
        rusqlite::TransactionBehavior::Immediate,
    )?)
}

/// `normalizeSessionEntryTimestamp`: a `delivery` of kind `none` when the entry has none and
/// no route fields (those the JSON era's delivery normalization reads).
fn normalize_delivery(e: &mut Value) {
    let Value::Object(m) = e else { return };
    let legacy = crate::store::delivery::FIELDS
        .iter()
        .any(|k| m.contains_key(*k));
    if !m.contains_key("delivery") && !legacy {
        m.insert("delivery".into(), serde_json::json!({"kind": "none"}));
    }
}

/// The `session_nodes` columns the runtime's entry write (`writeSessionEntry`, an upsert of
/// the whole node) sets besides `entry_json`, `archived_at` and the [`ENTRY_PROJECTIONS`],
/// from the entry. An archive in
/// place leaves their values as they are, but sets them as the runtime does: SQLite rewrites
/// the index entries of every column an update sets, and those pages are in the WAL the disk
/// budget measures.
const NODE_WRITE_COLUMNS: [&str; 3] = ["current_session_id", "entry_valid", "updated_at"];

/// The projections of an entry in `session_nodes` (but `archived_at` and the owner columns):
/// set again by an entry write (see [`NODE_WRITE_COLUMNS`]), nulled by [`clear_node`].
const ENTRY_PROJECTIONS: [&str; 19] = [
    "status",
    "created_at",
    "created_via",
    "created_actor_type",
    "created_actor_id",
    "project_id",
    "parent_session_key",
    "spawned_by",
    "fork_source_session_key",
    "fork_source_session_id",
    "fork_source_entry_id",
    "label",
    "display_name",
    "category",
    "icon",
    "pinned_at",
    "last_read_at",
    "last_interaction_at",
    "last_activity_at",
];

/// Archive the planned entries in place (in the caller's transaction).
fn archive_in_place(
    tx: &Connection,
    after: &Store,
    archived: &[(String, ArchivePhase)],
) -> Result<()> {
    if archived.is_empty() {
        return Ok(());
    }
    let present = columns(tx, "session_nodes")?;
    let window_columns = columns(tx, "session_windows")?;
    let again: String = NODE_WRITE_COLUMNS
        .iter()
        .chain(&ENTRY_PROJECTIONS)
        .filter(|c| present.iter().any(|p| p == *c))
        .map(|c| format!(", {c} = {c}"))
        .collect();
    let update = format!(
        "UPDATE session_nodes SET entry_json = ?1, archived_at = ?2{again} WHERE session_key = ?3"
    );
    let conversations = has_table(tx, "conversations")? && has_table(tx, "session_conversations")?;
    for (key, _) in archived {
        let Some(e) = after.get(key) else { continue };
        let mut e = e.to_value();
        normalize_delivery(&mut e);
        let json = crate::jsjson::to_string_compact(&e);
        let archived_at = e
            .get("archivedAt")
            .and_then(Value::as_f64)
            .map(|v| v as i64);
        let updated = e.get("updatedAt").and_then(Value::as_f64);
        let sid = e.get("sessionId").and_then(Value::as_str);
        // The conversation before the entry and its window (the window names it), linked
        // after them, as the release's entry write does.
        let linking = || format!("cannot write the conversation of the entry {key}");
        let linked = match (conversations, updated, sid) {
            (true, Some(updated), Some(sid)) => {
                super::conversation::prepare(tx, &e, sid, super::window::scope(&e, key))
                    .with_context(linking)?
                    .map(|link| (link, updated, sid))
            }
            _ => None,
        };
        if let Some((link, updated, _)) = &linked {
            super::conversation::upsert(tx, &link.identity, *updated).with_context(linking)?;
        }
        tx.execute(&update, params![json, archived_at, key])?;
        tx.execute(
            "UPDATE session_nodes SET entry_valid = 1 WHERE session_key = ?1",
            [key],
        )?;
        if let Some(updated) = updated {
            let primary = linked.as_ref().and_then(|(link, ..)| link.primary_ref());
            super::window::write(tx, &window_columns, key, &e, updated, primary)?;
        }
        if let Some((link, updated, sid)) = &linked {
            super::conversation::link(tx, sid, link, *updated).with_context(linking)?;
        }
        clear_validation_pending(tx, key)?;
    }
    Ok(())
}

/// Drop the runtime's pending revalidation of `key`'s entry (just written or cleared).
fn clear_validation_pending(tx: &Connection, key: &str) -> Result<()> {
    if has_table(tx, "session_canonical_validation_pending")? {
        tx.execute(
            "DELETE FROM session_canonical_validation_pending WHERE session_key = ?1",
            [key],
        )?;
    }
    Ok(())
}

/// One transcript archive, materialized.
#[derive(Clone)]
pub(super) struct Archive {
    session_id: String,
    session_key: String,
    generation: String,
    /// The zstd bytes; empty once the row holds them (they are read back to publish).
    blob: Vec<u8>,
    sha256: String,
    name: String,
    created_at: i64,
}

/// `<sid>.jsonl.deleted.<stamp>.<generation>.zst` (a sid over 96 bytes: `session-<sha256>`).
fn archive_name(sid: &str, created_at: i64, generation: &str) -> String {
    let base = if sid.len() > 96 {
        format!("session-{}", hex(&Sha256::digest(sid.as_bytes())))
    } else {
        sid.to_string()
    };
    let stamp = crate::isotime::format_iso_ms(created_at as u64).replace(':', "-");
    format!("{base}.jsonl.deleted.{stamp}.{generation}.zst")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The transcript of `sid` as JSONL, zstd level 3 as Node's `createZstdCompress` writes it
/// (no checksum, no content size); `None` when it has no rows or no generation.
pub(super) fn materialize(
    conn: &Connection,
    sid: &str,
    key: &str,
    rules: Rules,
) -> Result<Option<Archive>> {
    let rows: i64 = conn.query_row(
        "SELECT count(*) FROM transcript_events WHERE session_id = ?1",
        [sid],
        |r| r.get(0),
    )?;
    if rows == 0 {
        return Ok(None);
    }
    let generation: Option<String> = conn
        .query_row(
            "SELECT generation FROM transcript_rewrite_watermarks WHERE session_id = ?1",
            [sid],
            |r| r.get(0),
        )
        .optional()?;
    let Some(generation) = generation else {
        return Ok(None);
    };
    let blob = match rules {
        // 2026.9.x streams through `zlib.createZstdCompress()`: no content size in the frame.
        Rules::V9 => {
            let mut enc = zstd::stream::Encoder::new(Vec::new(), 3)?;
            enc.include_checksum(false)?;
            enc.include_contentsize(false)?;
            crate::agentdb::read::with_transcript(conn, sid, |r| {
                std::io::copy(r, &mut enc)?;
                Ok(())
            })?;
            enc.finish()?
        }
        // 2026.8.x compresses the whole transcript at once (`zstdCompressSync`).
        Rules::V8 => {
            let plain = crate::agentdb::read::with_transcript(conn, sid, |r| {
                let mut v = Vec::new();
                r.read_to_end(&mut v)?;
                Ok(v)
            })?;
            zstd::bulk::compress(&plain, 3)?
        }
    };
    let created_at = now_ms();
    Ok(Some(Archive {
        session_id: sid.to_string(),
        session_key: key.to_string(),
        sha256: hex(&Sha256::digest(&blob)),
        name: archive_name(sid, created_at, &generation),
        generation,
        blob,
        created_at,
    }))
}

/// Delete the index rows and the window of `sid` (the window's delete cascades to its
/// events, watermark and the other per-window tables), with the statements of the release
/// whose schema it is (`deleteSessionTranscriptIndexInTransaction`).
///
/// Where the full-text rows have a table of their own (2026.9.6), they are deleted through it
/// by id, in id order (its trigger deletes each full-text row): a delete by session id walks
/// the session's rows in message order, and the full-text tables then free and reuse other
/// pages than the release's. Older schemas delete the full-text rows by session id.
pub(super) fn delete_window(tx: &Connection, sid: &str) -> Result<()> {
    if has_table(tx, "session_transcript_fts_rows")? {
        tx.execute(
            "DELETE FROM session_transcript_fts_rows WHERE id IN \
             (SELECT id FROM session_transcript_fts_rows WHERE session_id = ?1)",
            [sid],
        )?;
    } else if has_table(tx, "session_transcript_fts")? {
        tx.execute(
            "DELETE FROM session_transcript_fts WHERE session_id = ?1",
            [sid],
        )?;
    }
    for t in [
        "session_transcript_active_events",
        "session_transcript_index_state",
    ] {
        if has_table(tx, t)? {
            tx.execute(&format!("DELETE FROM {t} WHERE session_id = ?1"), [sid])?;
        }
    }
    tx.execute("DELETE FROM session_windows WHERE session_id = ?1", [sid])?;
    Ok(())
}

/// Session ids that surviving nodes still reference.
pub(super) fn referenced_ids(
    conn: &Connection,
    removed: &HashSet<&String>,
) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    let entries = super::load_entries(conn)?;
    for (k, e) in &entries {
        if removed.contains(k) {
            continue;
        }
        out.extend(entry_session_ids(e));
    }
    let mut stmt = conn.prepare(
        "SELECT w.session_id, n.session_key, n.current_session_id FROM session_windows w \
         JOIN session_nodes n ON n.session_key = w.session_key \
         WHERE n.archived_at IS NOT NULL OR n.pinned_at IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    for row in rows {
        let (sid, key, current) = row?;
        if !removed.contains(&key) {
            out.insert(sid);
            out.insert(current);
        }
    }
    let mut stmt = conn.prepare("SELECT session_key, current_session_id FROM session_nodes")?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (k, sid) = row?;
        if !removed.contains(&k) {
            out.insert(sid);
        }
    }
    Ok(out)
}

/// `deleteSessionEntryRows`: the windows of `key` that a surviving node still references
/// (its current session, or a session id of its entry; the first such node in key order)
/// move to that node; then the node goes, and with it (by cascade) its other windows.
pub(super) fn delete_node(tx: &Connection, key: &str) -> Result<usize> {
    let windows: Vec<String> = tx
        .prepare("SELECT session_id FROM session_windows WHERE session_key = ?1")?
        .query_map([key], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !windows.is_empty() {
        let survivors: Vec<(String, String, String)> = tx
            .prepare(
                "SELECT session_key, current_session_id, entry_json FROM session_nodes \
                 WHERE session_key != ?1 ORDER BY session_key",
            )?
            .query_map([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for sid in windows {
            let owner = survivors.iter().find(|(_, current, json)| {
                *current == sid
                    || crate::jsjson::parse(json.as_bytes())
                        .is_ok_and(|e| entry_session_ids(&Json::from_value(e)).contains(&sid))
            });
            if let Some((to, _, _)) = owner {
                tx.execute(
                    "UPDATE session_windows SET session_key = ?1 WHERE session_id = ?2",
                    params![to, sid],
                )?;
            }
        }
    }
    let remaining: Option<(String, i64)> = tx
        .query_row(
            "SELECT session_id, updated_at FROM session_windows WHERE session_key = ?1 \
             ORDER BY updated_at DESC, session_id ASC LIMIT 1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((sid, updated_at)) = remaining {
        clear_node(tx, key, &sid, updated_at)?;
        return Ok(1);
    }
    Ok(tx.execute("DELETE FROM session_nodes WHERE session_key = ?1", [key])?)
}

/// The session ids whose transcript is in cold storage (`session_transcript_cold_archives`):
/// the reference never deletes their windows (the cold archive row and its file stay).
pub(super) fn cold_ids(conn: &Connection) -> Result<HashSet<String>> {
    if !has_table(conn, "session_transcript_cold_archives")? {
        return Ok(HashSet::new());
    }
    let mut stmt = conn.prepare("SELECT session_id FROM session_transcript_cold_archives")?;
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(ids)
}

/// Whether the transcript of `sid` is in cold storage.
pub(super) fn is_cold(conn: &Connection, sid: &str) -> Result<bool> {
    if !has_table(conn, "session_transcript_cold_archives")? {
        return Ok(false);
    }
    Ok(conn
        .query_row(
            "SELECT 1 FROM session_transcript_cold_archives WHERE session_id = ?1",
            [sid],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

pub(super) fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let cols = stmt
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(cols)
}

/// `clearSqliteSessionEntryPreservingWindows`: a removed entry that still owns windows (a
/// cold transcript) keeps its node, cleared (`entry_json` `{}`, `entry_valid` -1, the
/// projections null) so that its windows and their cold archives stay; the node's own
/// artifacts (`deleteSessionNodeArtifacts`) go.
fn clear_node(tx: &Connection, key: &str, sid: &str, updated_at: i64) -> Result<()> {
    let tables = [
        "session_pending_inputs",
        "heartbeat_outcomes",
        "session_participants",
        "session_progress_cards",
        "session_members",
        "session_suggestions",
    ];
    for t in tables {
        if has_table(tx, t)? {
            tx.execute(&format!("DELETE FROM {t} WHERE session_key = ?1"), [key])?;
        }
    }
    if has_table(tx, "board_tabs")? && has_table(tx, "board_widgets")? {
        tx.execute("DELETE FROM board_widgets WHERE session_key = ?1", [key])?;
        tx.execute("DELETE FROM board_tabs WHERE session_key = ?1", [key])?;
    }
    let cols = columns(tx, "session_nodes")?;
    if cols.iter().any(|c| c == "legacy_acp_migration_json") {
        tx.execute(
            "UPDATE session_nodes SET legacy_acp_migration_json = NULL WHERE session_key = ?1 \
             AND legacy_acp_migration_json IS NOT NULL AND json_array_length(legacy_acp_migration_json) > 0",
            [key],
        )?;
    }
    const OWNER: [&str; 6] = [
        "archived_at",
        "owner_actor_type",
        "owner_actor_id",
        "owner_assigned_by_type",
        "owner_assigned_by_id",
        "owner_assigned_at",
    ];
    let nulls: String = ENTRY_PROJECTIONS
        .iter()
        .chain(&OWNER)
        .filter(|c| cols.iter().any(|x| x == *c))
        .map(|c| format!(", {c} = NULL"))
        .collect();
    tx.execute(
        &format!(
            "UPDATE session_nodes SET current_session_id = ?1, entry_json = '{{}}', \
             entry_valid = -1, updated_at = ?2{nulls} WHERE session_key = ?3"
        ),
        params![sid, updated_at, key],
    )?;
    tx.execute(
        "UPDATE session_nodes SET entry_valid = -1 WHERE session_key = ?1",
        [key],
    )?;
    clear_validation_pending(tx, key)
}

/// Insert an archive row (unpublished).
pub(super) fn insert_archive(tx: &Connection, a: &Archive) -> Result<()> {
    tx.execute(
        "INSERT INTO session_transcript_archives (session_id, generation, session_key, reason, \
         encoding, archive_blob, archive_sha256, archive_name, created_at, published_at, \
         publish_attempts) VALUES (?1, ?2, ?3, 'deleted', 'zstd', ?4, ?5, ?6, ?7, NULL, 0) \
         ON CONFLICT DO NOTHING",
        params![
            a.session_id,
            a.generation,
            a.session_key,
            a.blob,
            a.sha256,
            a.name,
            a.created_at
        ],
    )?;
    Ok(())
}

/// Publish the archive of a deletion with a publish round of its own (see [`publish_round`]).
pub(super) fn publish_one(conn: &Connection, l: &Layout, a: &Archive) -> Result<()> {
    publish_round(conn, l, std::slice::from_ref(a))
}

/// Record publish attempts that succeeded, in one transaction, as
/// `recordSessionTranscriptArchivePublishResults` records a publish round's results (which
/// also keeps the WAL, which the disk budget measures, as the runtime's).
fn record_published<'a>(
    conn: &Connection,
    archives: impl IntoIterator<Item = &'a Archive>,
) -> Result<()> {
    let archives: Vec<&Archive> = archives.into_iter().collect();
    if archives.is_empty() {
        return Ok(());
    }
    let t = now_ms();
    let tx = begin(conn)?;
    for a in archives {
        tx.execute(
            "UPDATE session_transcript_archives SET published_at = ?1, publish_attempts = \
             publish_attempts + 1, last_publish_attempt_at = ?1, last_publish_error = NULL \
             WHERE session_id = ?2 AND generation = ?3",
            params![t, a.session_id, a.generation],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// An archive name that stays in the archive directory: one plain file name.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Whether `file` is a temp file [`publish`] left for `name` (`<name>.<pid>.tmp`) when it
/// was killed before it removed it.
fn is_own_temp(file: &str, name: &str) -> bool {
    file.strip_prefix(name)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(".tmp"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Write an archive file into the sessions directory (temp, fsync, link, dir fsync), as
/// `publishEncodedSessionTranscriptArchive` does: a file already there with the archive's
/// bytes is the archive published before (by a run killed before it recorded it); one with
/// other bytes is a collision and stays as it is. The file is read back and compared.
pub(super) fn publish(dir: &Path, a: &Archive) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    anyhow::ensure!(
        plain_name(&a.name),
        "archive name {:?} is not a file name in {}; not published",
        a.name,
        dir.display()
    );
    anyhow::ensure!(
        hex(&Sha256::digest(&a.blob)) == a.sha256,
        "the archive {} does not match its SHA-256; not published",
        a.name
    );
    if !dir.is_dir() {
        std::fs::DirBuilder::new().mode(0o700).create(dir)?;
    }
    let target = dir.join(&a.name);
    let same = |p: &Path| -> Result<bool> {
        match std::fs::symlink_metadata(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
            Ok(m) if !m.is_file() => {
                anyhow::bail!("{} exists and is not a file; not published", p.display())
            }
            Ok(_) => {
                let bytes =
                    std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
                anyhow::ensure!(
                    hex(&Sha256::digest(&bytes)) == a.sha256,
                    "{} exists with other content; not published",
                    p.display()
                );
                Ok(true)
            }
        }
    };
    if !same(&target)? {
        let tmp = dir.join(format!("{}.{}.tmp", a.name, std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(&a.blob)?;
        f.sync_all()?;
        drop(f);
        let linked = std::fs::hard_link(&tmp, &target);
        let _ = std::fs::remove_file(&tmp);
        if let Err(e) = linked
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(e).with_context(|| format!("cannot publish {}", target.display()));
        }
        anyhow::ensure!(same(&target)?, "{} vanished", target.display());
    }
    // Temp files of this archive that a killed run left behind.
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name();
            if is_own_temp(&n.to_string_lossy(), &a.name)
                && e.file_type().is_ok_and(|t| t.is_file())
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// How many pending archives a publish pass takes (`PENDING_ARCHIVE_PUBLISH_BATCH_SIZE`).
const PENDING_PUBLISH_BATCH: usize = 4;

const ARCHIVE_COLUMNS: &str =
    "session_id, generation, session_key, archive_sha256, archive_name, created_at";

fn archive_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Archive> {
    Ok(Archive {
        session_id: r.get(0)?,
        generation: r.get(1)?,
        session_key: r.get(2)?,
        // Without its bytes: [`publish_round`] reads them one archive at a time.
        blob: Vec::new(),
        sha256: r.get(3)?,
        name: r.get(4)?,
        created_at: r.get(5)?,
    })
}

/// The oldest archive rows not published yet (`published_at` null), at most `limit`: the
/// runtime's publish round after a deletion publishes them with its own, and so does a
/// cleanup here, which also finishes the publication of a run killed after its rows
/// committed.
fn pending_archives(conn: &Connection, limit: usize) -> Result<Vec<Archive>> {
    if !has_table(conn, "session_transcript_archives")? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(&format!(
        "SELECT {ARCHIVE_COLUMNS} FROM session_transcript_archives WHERE published_at IS NULL \
         ORDER BY created_at, session_id, generation LIMIT ?1"
    ))?;
    let rows = stmt.query_map([limit as i64], archive_of)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A publish round (`publishSessionStateArchives`): the first pass publishes the `requested`
/// archives (again, when they are published already) with the oldest pending ones, up to
/// [`PENDING_PUBLISH_BATCH`] of them; each further pass the next pending ones, until none is
/// left. Each pass's results are recorded in one transaction, as the runtime records them
/// (which also keeps the WAL the disk budget measures as the runtime's). Every archive's
/// bytes are read from its row, one archive at a time.
fn publish_round(conn: &Connection, l: &Layout, requested: &[Archive]) -> Result<()> {
    let mut first = true;
    loop {
        let mut pass: Vec<Archive> = Vec::new();
        let mut add = |a: &Archive| {
            let known = pass
                .iter()
                .any(|p| p.session_id == a.session_id && p.generation == a.generation);
            if !known {
                pass.push(Archive {
                    blob: Vec::new(),
                    ..a.clone()
                });
            }
        };
        if std::mem::take(&mut first) {
            requested.iter().for_each(&mut add);
        }
        pending_archives(conn, PENDING_PUBLISH_BATCH)?
            .iter()
            .for_each(&mut add);
        if pass.is_empty() {
            return Ok(());
        }
        for a in &mut pass {
            a.blob = conn.query_row(
                "SELECT archive_blob FROM session_transcript_archives WHERE session_id = ?1 \
                 AND generation = ?2",
                params![a.session_id, a.generation],
                |r| r.get(0),
            )?;
            publish(&l.archive_dir, a)?;
            a.blob = Vec::new();
        }
        record_published(conn, &pass)?;
    }
}

/// Delete the planned entries (in the caller's transaction): archive each transcript no
/// survivor references into `session_transcript_archives` (unpublished), delete its index
/// rows and window and the node. The transcripts go in the order of the entries that name
/// them (an entry's own session ids, then its windows; the first entry naming one owns it).
/// Returns the entries deleted and the archives written (without their bytes, which are in
/// the rows).
fn delete_entries(
    tx: &Connection,
    l: &Layout,
    before: &Store,
    deleted: &[&String],
) -> Result<(usize, Vec<Archive>)> {
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for key in deleted {
        let mut ids = before.get(*key).map(entry_session_ids).unwrap_or_default();
        ids.extend(window_ids(tx, &[*key])?);
        for id in ids {
            if seen.insert(id.clone()) {
                order.push(id);
            }
        }
    }
    delete_in_order(tx, l, deleted, &order)
}

/// The session ids of the windows of `keys` (`readSessionGenerationIdsForKeys`), in the
/// order SQLite gives them for the release's own query.
pub(super) fn window_ids(conn: &Connection, keys: &[&String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    // Within SQLite's limit on bound parameters.
    for chunk in keys.chunks(30_000) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let sql = format!(
            "select \"session_id\" from \"session_windows\" where \"session_key\" in ({marks})"
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(chunk.iter()), |r| {
            r.get::<_, String>(0)
        })?;
        for id in rows {
            out.push(id?);
        }
    }
    Ok(out)
}

/// Delete the entries `deleted` (in the caller's transaction) and the transcripts of
/// `sessions` no survivor references, one session after the other in that order
/// (`deleteMaterializedSessionStatePlans`: each transcript archived, then its rows deleted,
/// so an archive takes pages freed by the sessions deleted before it, as the runtime's
/// does), then the nodes.
fn delete_in_order(
    tx: &Connection,
    l: &Layout,
    deleted: &[&String],
    sessions: &[String],
) -> Result<(usize, Vec<Archive>)> {
    if deleted.is_empty() {
        return Ok((0, Vec::new()));
    }
    let removed: HashSet<&String> = deleted.iter().copied().collect();
    let mut keep = referenced_ids(tx, &removed)?;
    keep.extend(cold_ids(tx)?);
    let mut archives = Vec::new();
    for sid in sessions.iter().filter(|s| !keep.contains(*s)) {
        let window_key: Option<String> = tx
            .query_row(
                "SELECT session_key FROM session_windows WHERE session_id = ?1",
                [sid],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(window_key) = window_key
            && let Some(mut a) = materialize(tx, sid, &window_key, l.rules)?
        {
            insert_archive(tx, &a)?;
            // Its bytes are in the row now, where the publication reads them: a run that
            // deletes many transcripts holds one archive in memory at a time.
            a.blob = Vec::new();
            archives.push(a);
        }
        delete_window(tx, sid)?;
    }
    let mut n = 0;
    for key in deleted {
        n += delete_node(tx, key)?;
    }
    Ok((n, archives))
}

/// The maintenance's removals in the order the release deletes them (its `removalReasons`):
/// model-run probes, stale entries, cap victims. 2026.9.x reads its age candidates oldest
/// first (`updated_at`, then key), 2026.8.x in key order, as the plan lists them.
fn maintenance_order<'a>(
    plan: &'a plan::EntryPlan,
    before: &Store,
    rules: Rules,
    owned: &HashSet<&String>,
) -> Vec<&'a String> {
    let updated = |k: &String| {
        before
            .get(k)
            .and_then(|e| e.get("updatedAt"))
            .and_then(Json::as_f64)
            .unwrap_or(f64::NEG_INFINITY)
    };
    let by_age = |keys: &'a [String]| {
        let mut v: Vec<&'a String> = keys.iter().collect();
        if rules == Rules::V9 {
            v.sort_by(|a, b| updated(a).total_cmp(&updated(b)));
        }
        v
    };
    let archived: HashSet<&String> = plan.archived.iter().map(|(k, _)| k).collect();
    by_age(&plan.model_run)
        .into_iter()
        .chain(by_age(&plan.stale))
        .chain(&plan.capped)
        .filter(|k| !archived.contains(k) && !owned.contains(k))
        .collect()
}

/// The maintenance's removals after the lifecycle transaction committed
/// (`finalizeSessionEntryMaintenancePlansAfterWriterReleaseBestEffort`): in the release's
/// batches ([`batches`]: removals sharing a transcript together, at most 64 work items and
/// 64 MiB of transcripts each), each deleted with its transcripts archived as rows in a write
/// transaction of its own, then published in a publish round of its own. An entry another
/// connection changed since the plan is left as it is, as the runtime skips a changed entry.
/// Returns the entries deleted and the keys left, in deletion order.
fn delete_maintenance_removals(
    conn: &Connection,
    l: &Layout,
    before: &Store,
    keys: &[&String],
) -> Result<(usize, Vec<String>)> {
    let mut deleted = 0;
    let mut changed = Vec::new();
    for batch in batches::of_removals(conn, before, keys)? {
        let tx = begin(conn)?;
        let mut current = Vec::with_capacity(batch.keys.len());
        for key in batch.keys {
            if super::load_entry(&tx, key)?.as_ref() == before.get(key) {
                current.push(key);
            } else {
                changed.push(key.clone());
            }
        }
        let (n, archives) = delete_in_order(&tx, l, &current, &batch.sessions)?;
        tx.commit()?;
        deleted += n;
        publish_round(conn, l, &archives)?;
    }
    Ok((deleted, changed))
}

/// A hook for the tests of what another writer does between the lifecycle transaction and
/// the first deletion batch: in debug builds, the SQL in
/// `CLAWKEEPER_TEST_SQL_AFTER_LIFECYCLE` runs there on a connection of its own. Release
/// builds have no hook.
mod test_hook {
    use std::path::Path;

    use anyhow::Result;

    #[cfg(debug_assertions)]
    pub fn after_lifecycle(db: &Path) -> Result<()> {
        if let Some(sql) = std::env::var_os("CLAWKEEPER_TEST_SQL_AFTER_LIFECYCLE") {
            let sql = sql.to_string_lossy();
            rusqlite::Connection::open(db)?.execute_batch(&sql)?;
        }
        Ok(())
    }

    #[cfg(not(debug_assertions))]
    pub fn after_lifecycle(_db: &Path) -> Result<()> {
        Ok(())
    }
}

/// `refreshSqliteSessionPlannerStatisticsBestEffort`: `ANALYZE` once a run deleted at least
/// one maintenance batch of entries (64), else nothing.
pub fn refresh_statistics(conn: &Connection, deleted: usize) -> Result<()> {
    if deleted >= 64 {
        conn.execute_batch("PRAGMA analysis_limit = 1000; ANALYZE main;")?;
    }
    Ok(())
}

/// `readSessionEntryCount`: the entries (a cleared node is none).
fn row_count(conn: &Connection) -> Result<u64> {
    Ok(super::load_entries(conn)?.len() as u64)
}

/// What the lifecycle transaction read, planned and wrote.
struct Lifecycle {
    /// The entries as the transaction read them.
    before: Store,
    entry_plan: plan::EntryPlan,
    /// The entries the `--fix-*` removals deleted, and their transcripts' archives.
    fixed: usize,
    fix_archives: Vec<Archive>,
}

/// The lifecycle transaction (`applySessionEntryLifecycleMutation`): it reads and plans the
/// entries, makes the `--fix-*` removals and archives the maintenance's entries in place;
/// what it writes is what it planned, whatever another connection wrote before it began.
/// The `--fix-*` removals are made in warn mode too; the maintenance is only planned in
/// enforce mode.
fn lifecycle(
    conn: &Connection,
    t: &Target,
    o: &Options,
    settings: &plan::Settings,
    l: &Layout,
) -> Result<Lifecycle> {
    let rules = l.rules;
    let tx = begin(conn)?;
    let before = super::load_entries(&tx)?;
    let mut after = before.clone();
    let (missing, dm_scope) = super::fix_removals(&tx, t, o, rules, &mut after);
    let mut entry_plan = if o.flags.is_warn() {
        plan::EntryPlan::default()
    } else {
        let mut keys = super::active_chain(&tx, rules, &after, o.flags.active_key.as_deref())?;
        if rules == Rules::V9 {
            let removed = missing.iter().chain(&dm_scope);
            keys.extend(super::lifecycle_preserved(
                &tx,
                &after,
                removed.filter_map(|k| before.get_key_value(k)),
            )?);
        }
        let preserve = plan::Preserve {
            rules,
            keys: &keys,
            recent_ms: settings.preserve_recent_ms,
            now_ms: crate::maintenance::now_ms(),
        };
        plan::plan(&mut after, settings, &preserve, crate::maintenance::now_ms)
    };
    entry_plan.missing = missing;
    entry_plan.dm_scope = dm_scope;
    let fixes: Vec<&String> = entry_plan
        .missing
        .iter()
        .chain(&entry_plan.dm_scope)
        .collect();
    let (fixed, fix_archives) = delete_entries(&tx, l, &before, &fixes)?;
    archive_in_place(&tx, &after, &entry_plan.archived)?;
    tx.commit()?;
    Ok(Lifecycle {
        before,
        entry_plan,
        fixed,
        fix_archives,
    })
}

/// The unreferenced-artifact sweep of the sessions directory over the entries left (none in
/// warn mode, or without the directory).
fn sweep_unreferenced(
    conn: &Connection,
    l: &Layout,
    settings: &plan::Settings,
    warn: bool,
) -> Result<crate::maintenance::budget::SweepReport> {
    let nothing = || crate::maintenance::budget::SweepReport {
        older_than_ms: settings.prune_after_ms.max(0),
        ..Default::default()
    };
    if warn {
        return Ok(nothing());
    }
    let post = super::load_entries(conn)?;
    if !l.sessions_dir.is_dir() {
        return Ok(nothing());
    }
    let confined = Confined::new(&l.sessions_dir)?;
    disk::sweep(
        l,
        &post,
        settings.prune_after_ms,
        &Default::default(),
        Some(&confined),
    )
}

/// Apply the cleanup to one database on `conn` (opened to write, guard held, checked).
pub fn apply(conn: &Connection, t: &Target, o: &Options, planned: &Preview) -> Result<Summary> {
    let rules = Rules::for_schema(planned.schema.user_version);
    let settings = &planned.settings;
    let l = Layout::new(t, rules);
    let warn = o.flags.is_warn();
    let Lifecycle {
        before,
        mut entry_plan,
        fixed,
        fix_archives,
    } = lifecycle(conn, t, o, settings, &l)?;
    test_hook::after_lifecycle(&t.db)?;
    let owned: HashSet<&String> = entry_plan
        .missing
        .iter()
        .chain(&entry_plan.dm_scope)
        .collect();
    let removals = maintenance_order(&entry_plan, &before, rules, &owned);
    let (removed, changed) = delete_maintenance_removals(conn, &l, &before, &removals)?;
    // The removals' own publish round (their archives are published already when the
    // maintenance's rounds ran: they were pending then).
    if !warn || fixed > 0 {
        publish_round(conn, &l, &fix_archives)?;
    }
    refresh_statistics(conn, fixed + removed)?;
    for list in [
        &mut entry_plan.model_run,
        &mut entry_plan.stale,
        &mut entry_plan.capped,
    ] {
        list.retain(|k| !changed.contains(k));
    }
    let lifecycle_count = row_count(conn)?;
    let unreferenced = sweep_unreferenced(conn, &l, settings, warn)?;
    let disk_budget = super::budget::enforce(conn, &l, settings, o, rules)?;
    let final_count = row_count(conn)?;
    let after_count = match rules {
        Rules::V9 => final_count,
        Rules::V8 => lifecycle_count,
    };
    let removed = entry_plan.deleted().count();
    let b = disk_budget.as_ref();
    let would_mutate = removed > 0
        || !entry_plan.archived.is_empty()
        || unreferenced.removed_files > 0
        || b.is_some_and(|b| {
            b.removed_entries > 0
                || b.removed_files > 0
                || b.total_bytes_after < b.total_bytes_before
        });
    let mut summary = Summary::of_plan(t, rules, o, before.len(), &entry_plan).measured(
        after_count,
        unreferenced,
        disk_budget,
        would_mutate,
    );
    summary.base.dry_run = false;
    summary.base.applied_count = Some(after_count);
    summary.changed_meanwhile = changed;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(name: &str, blob: &[u8]) -> Archive {
        Archive {
            session_id: "s".into(),
            session_key: "k".into(),
            generation: "g".into(),
            blob: blob.to_vec(),
            sha256: hex(&Sha256::digest(blob)),
            name: name.into(),
            created_at: 0,
        }
    }

    #[test]
    fn a_delivery_of_kind_none_only_without_any_route_field() {
        let mut bare = serde_json::json!({"sessionId": "s"});
        normalize_delivery(&mut bare);
        assert_eq!(bare["delivery"], serde_json::json!({"kind": "none"}));
        for field in crate::store::delivery::FIELDS {
            let mut e = serde_json::json!({"sessionId": "s"});
            e[*field] = "x".into();
            normalize_delivery(&mut e);
            assert!(e.get("delivery").is_none(), "{field}");
        }
        let mut own = serde_json::json!({"delivery": {"kind": "dm"}});
        normalize_delivery(&mut own);
        assert_eq!(own["delivery"], serde_json::json!({"kind": "dm"}));
    }

    #[test]
    fn only_plain_names_and_own_temp_files() {
        for bad in ["", ".", "..", "a/b", "../x.zst", "x\0y"] {
            assert!(!plain_name(bad), "{bad:?}");
        }
        assert!(plain_name(
            "s.jsonl.deleted.2026-11-25T17-19-37.376Z.abc.zst"
        ));
        let name = "s.jsonl.deleted.stamp.g.zst";
        assert!(is_own_temp(&format!("{name}.4242.tmp"), name));
        for other in [
            format!("{name}.tmp"),
            format!("{name}.1f2e-uuid.tmp"),
            format!("{name}.4242.tmp.x"),
            "other.4242.tmp".to_string(),
            name.to_string(),
        ] {
            assert!(!is_own_temp(&other, name), "{other}");
        }
    }

    #[test]
    fn publishing_is_idempotent_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let a = archive("a.zst", b"archive bytes");
        // A temp file a killed run left, and one of another writer (a uuid, not ours).
        std::fs::write(dir.path().join("a.zst.77.tmp"), b"part").unwrap();
        std::fs::write(dir.path().join("a.zst.0f-uuid.tmp"), b"part").unwrap();
        publish(dir.path(), &a).unwrap();
        publish(dir.path(), &a).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("a.zst")).unwrap(),
            b"archive bytes"
        );
        assert!(!dir.path().join("a.zst.77.tmp").exists());
        assert!(dir.path().join("a.zst.0f-uuid.tmp").exists());
        // Other bytes under the name: a collision, the file kept.
        let b = archive("a.zst", b"other bytes");
        let err = publish(dir.path(), &b).unwrap_err().to_string();
        assert!(err.contains("exists with other content"), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join("a.zst")).unwrap(),
            b"archive bytes"
        );
        // A blob that does not match its SHA-256 is never written.
        let mut c = archive("c.zst", b"c");
        c.blob = b"changed".to_vec();
        assert!(publish(dir.path(), &c).is_err());
        assert!(!dir.path().join("c.zst").exists());
    }
}
