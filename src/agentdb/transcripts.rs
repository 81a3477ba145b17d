//! Transcript surgery on the rows of an agent database: the JSON era's planners and rewrite
//! (`transcript::rewrite`) on `transcript_events`, one row per JSONL line in `seq` order.
//!
//! [`plan`] reads one session's rows (inside one read transaction, so that the rows and what
//! step 1 below compares are one snapshot), indexes them as a file is indexed, asks the planner
//! (which reads whole entries back row by row through [`Rows`], as `compact` does), resolves
//! the edits and runs the rewrite into nothing to validate it: a preview. [`write`] applies a
//! plan as the runtime's own rewrite paths leave a session, in one `BEGIN IMMEDIATE`:
//!
//! 1. the session must be as planned: same row count, `max(seq)`, rewrite generation,
//!    `transcript_updated_at`, and the same bytes (a SHA-256 of the rows as read for the plan);
//! 2. patched rows are updated in place as plain text (`event_zstd`, `navigation_json` NULL,
//!    `event_utf8_bytes` their length), keeping `seq` and `created_at`;
//! 3. a re-parented row's `transcript_event_identities.parent_id` follows its new parent;
//! 4. removed rows are deleted without renumbering (the foreign keys cascade to their identity
//!    and active-event rows); appended entries (a compaction) are inserted at `max(seq) + 1`
//!    with their identity rows, as the runtime appends;
//! 5. the projection is flagged for the runtime to rebuild (`needs_rebuild = 1`), the rewrite
//!    generation rotated (a pure append only creates one where there is none), and
//!    `transcript_updated_at` moved strictly forward;
//! 6. the rewrite is validated by the same validator as a file before the commit; anything
//!    else rolls the session back untouched. The foreign keys are SQLite's to enforce: the
//!    connection must have `foreign_keys=ON` (checked before each session), so a statement or
//!    commit that would leave a row referring to a missing one fails and rolls back. (A
//!    whole-database `foreign_key_check` per session would read every table once per session:
//!    the command runs it once before and once after the run.)
//!
//! Compressed rows are read (decompressed) but never written: a changed row becomes text.
//! Domain code: the caller holds the write guard (`super::guard`) and reports.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::read;
use crate::keys::SessionSelector;
use crate::transcript::Index;
use crate::transcript::estimate::TokenCounter;
use crate::transcript::job::{self, Outcome, PlannerAt, Status};
use crate::transcript::rewrite::{self, LineAction, Output, Resolved};
use crate::transcript::values::{EntryReader, LineSource, Transcript};

/// A session the transcript commands work on: a `session_nodes` row's current session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub key: String,
    pub session_id: String,
}

/// How a database session is named in reports: the database path and `#<sessionId>`.
pub fn label(db: &Path, session_id: &str) -> PathBuf {
    PathBuf::from(format!("{}#{session_id}", db.display()))
}

/// The sessions of the database's session nodes (narrowed to `selector` when given), one per
/// session id, in key order; and whether `selector` matched a node.
pub fn sessions(
    conn: &Connection,
    selector: Option<&SessionSelector>,
) -> Result<(Vec<Session>, bool)> {
    let mut out: Vec<Session> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut matched = false;
    read::for_each_session_node(conn, |n| {
        if selector.is_some_and(|s| !s.matches(&n.key)) {
            return;
        }
        matched = true;
        if !n.session_id.is_empty() && seen.insert(n.session_id.clone()) {
            out.push(Session {
                key: n.key,
                session_id: n.session_id,
            });
        }
    })?;
    Ok((out, matched))
}

/// Why a session is not edited here, when it has no rows to edit: moved to cold storage (the
/// runtime restores it before it writes), or no rows at all.
pub fn passed_over(conn: &Connection, session_id: &str) -> Result<Option<String>> {
    if read::has_table(conn, "session_transcript_cold_archives")?
        && conn
            .prepare("SELECT 1 FROM session_transcript_cold_archives WHERE session_id = ?1")?
            .exists([session_id])?
    {
        return Ok(Some(
            "the transcript is in cold storage (session_transcript_cold_archives); the runtime \
             restores it before it is written"
                .into(),
        ));
    }
    let any = conn
        .prepare("SELECT 1 FROM transcript_events WHERE session_id = ?1 LIMIT 1")?
        .exists([session_id])?;
    Ok((!any).then(|| "the session has no transcript rows".into()))
}

/// What the runtime changes whenever it writes a session's rows: [`write`] checks it is as
/// planned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    rows: i64,
    max_seq: Option<i64>,
    generation: Option<String>,
    transcript_updated_at: Option<i64>,
}

/// A planned rewrite of one session, ready for [`write`].
#[derive(Debug)]
pub struct Plan {
    session_id: String,
    index: Index,
    resolved: Resolved,
    /// `seq` of each line.
    seqs: Vec<i64>,
    snapshot: Snapshot,
    /// SHA-256 of the rows as JSONL when planned.
    digest: Vec<u8>,
}

/// A [`Read`] that hashes what passes through it.
struct Hashing<'r> {
    inner: &'r mut dyn Read,
    hash: Sha256,
}

impl Read for Hashing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// Run `f` over the session's rows as JSONL and hash every byte; the hash covers the rows
/// that `f` read, then the rest of them.
fn with_hashed_rows<T>(
    conn: &Connection,
    session_id: &str,
    f: impl FnOnce(&mut dyn Read) -> Result<T>,
) -> Result<(T, Vec<u8>)> {
    let mut failed = None;
    let (value, digest) = read::with_transcript(conn, session_id, |r| {
        let mut h = Hashing {
            inner: r,
            hash: Sha256::new(),
        };
        let value = f(&mut h).map_err(|e| {
            failed = Some(e);
            std::io::Error::other("stopped")
        })?;
        std::io::copy(&mut h, &mut std::io::sink())?;
        Ok((value, h.hash.finalize().to_vec()))
    })
    .map_err(|e| failed.take().unwrap_or(e))?;
    Ok((value, digest))
}

fn snapshot_of(conn: &Connection, session_id: &str) -> Result<Snapshot> {
    let (rows, max_seq): (i64, Option<i64>) = conn.query_row(
        "SELECT count(*), max(seq) FROM transcript_events WHERE session_id = ?1",
        [session_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let generation: Option<String> = conn
        .query_row(
            "SELECT generation FROM transcript_rewrite_watermarks WHERE session_id = ?1",
            [session_id],
            |r| r.get(0),
        )
        .optional()?;
    let transcript_updated_at: Option<i64> = conn
        .query_row(
            "SELECT transcript_updated_at FROM session_windows WHERE session_id = ?1",
            [session_id],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    Ok(Snapshot {
        rows,
        max_seq,
        generation,
        transcript_updated_at,
    })
}

/// `seq` and stored bytes of every row of a session, in `seq` order: a compressed row counts
/// its compressed bytes, a text row its UTF-8 bytes (what the database file holds for it).
fn rows_of(conn: &Connection, session_id: &str) -> Result<Vec<(i64, u64)>> {
    let sql = if read::has_compressed_rows(conn)? {
        "SELECT seq, coalesce(length(event_zstd), length(CAST(event_json AS BLOB)), 0) \
         FROM transcript_events WHERE session_id = ?1 ORDER BY seq"
    } else {
        "SELECT seq, coalesce(length(CAST(event_json AS BLOB)), 0) \
         FROM transcript_events WHERE session_id = ?1 ORDER BY seq"
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_map([session_id], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })?
        .collect::<rusqlite::Result<_>>()?)
}

/// What a preview of `planner` on the session would report, from an index of its rows that
/// the caller already built (`inspect`'s scan): the same checks, plan and resolution as
/// [`plan`], with only the rows the plan patches read back, as `job::predict` does for a file.
/// Sizes are what the rows store, as [`plan`] reports them. The rewrite is not validated (a
/// preview or a run does that).
pub fn predict(
    conn: &Connection,
    path: &Path,
    session_id: &str,
    index: &Index,
    tree: &crate::transcript::tree::Tree,
    planner: &PlannerAt,
) -> Outcome {
    let mut out = Outcome::new(path, Status::Unchanged);
    if let Err(status) = predict_inner(conn, session_id, index, tree, planner, &mut out) {
        out.fail(status);
    }
    out
}

/// Database sessions with `leaf` control records or side-appended entries are passed over:
/// the SQLite-era runtimes read them through another loader than the JSON era's, which this
/// tool follows for files, and no session they wrote with such records has been compared yet.
fn refuse_navigation_records(index: &Index) -> Result<(), Status> {
    let has = index
        .entries
        .iter()
        .any(|e| e.kind == crate::transcript::EntryType::Leaf || e.side_append());
    if has {
        return Err(Status::Skipped(
            "the session has `leaf` control records or side-appended entries, which this tool \
             does not edit in SQLite-era databases yet"
                .into(),
        ));
    }
    Ok(())
}

/// The rows of a session, once indexed, must be one line a row. Sets the bytes of `out` to
/// what the rows store (see `rows_of`), not their JSONL text. The rows' `seq`s.
fn editable_rows(
    index: &Index,
    rows: &[(i64, u64)],
    out: &mut Outcome,
) -> Result<Vec<i64>, Status> {
    if rows.len() != index.lines.len() {
        return Err(Status::Damaged(
            format!(
                "{} rows read as {} lines (a row holds a line break); not editing",
                rows.len(),
                index.lines.len()
            )
            .into(),
        ));
    }
    out.bytes_before = rows.iter().map(|(_, b)| b).sum();
    out.bytes_after = out.bytes_before;
    Ok(rows.iter().map(|(seq, _)| *seq).collect())
}

fn predict_inner(
    conn: &Connection,
    session_id: &str,
    index: &Index,
    tree: &crate::transcript::tree::Tree,
    planner: &PlannerAt,
    out: &mut Outcome,
) -> Result<(), Status> {
    job::check_editable_with(index, tree, out)?;
    refuse_navigation_records(index)?;
    let rows = rows_of(conn, session_id).map_err(job::failed)?;
    let seqs = editable_rows(index, &rows, out)?;
    let rows_read = Rows::new(conn, session_id, &seqs);
    job::predict_sized(planner, &rows_read, index, tree, out, &mut |resolved| {
        stored_after(conn, session_id, index, &rows, resolved)
    })
}

/// What the rows of a session store once `resolved` is applied: kept rows keep their stored
/// bytes; a changed row is stored as text, without the newline. Only patched rows are read.
fn stored_after(
    conn: &Connection,
    session_id: &str,
    index: &Index,
    rows: &[(i64, u64)],
    resolved: &Resolved,
) -> Result<u64, Status> {
    let mut after = 0u64;
    for (n, line) in index.lines.iter().enumerate() {
        after += match &resolved.actions[n] {
            LineAction::Keep => rows[n].1,
            LineAction::Drop => 0,
            LineAction::Patch(patch) => {
                let raw = read::row_line(conn, session_id, rows[n].0).map_err(job::failed)?;
                let len = rewrite::patched_len(n, line, &raw, patch)
                    .map_err(|e| Status::Refused(format!("{e:#}").into()))?;
                (len - usize::from(line.terminated)) as u64
            }
        };
    }
    Ok(after + resolved.append.iter().map(|l| l.len() as u64).sum::<u64>())
}

/// Plan one session and validate the rewrite without writing it. The outcome is what a preview
/// reports (`WouldChange` with the counts and sizes, or why not); the plan is there when there
/// is something to write. `path` names the session in the outcome (see [`label`]).
pub fn plan(
    conn: &Connection,
    path: &Path,
    session_id: &str,
    measure: Option<TokenCounter>,
    planner: &PlannerAt,
) -> (Outcome, Option<Plan>) {
    let mut out = Outcome::new(path, Status::Unchanged);
    match plan_inner(conn, session_id, measure, planner, &mut out) {
        Ok(plan) => (out, plan),
        Err(status) => {
            out.fail(status);
            (out, None)
        }
    }
}

fn plan_inner(
    conn: &Connection,
    session_id: &str,
    measure: Option<TokenCounter>,
    planner: &PlannerAt,
    out: &mut Outcome,
) -> Result<Option<Plan>, Status> {
    // One read transaction: the rows, their seqs and the fence are one snapshot.
    let tx = conn
        .unchecked_transaction()
        .map_err(|e| job::failed(e.into()))?;
    let (index, digest) = with_hashed_rows(conn, session_id, |r| {
        Ok(Index::from_reader_measuring(r, measure)?)
    })
    .map_err(job::failed)?;
    let rows = rows_of(conn, session_id).map_err(job::failed)?;
    let snapshot = snapshot_of(conn, session_id).map_err(job::failed)?;
    let tree = job::check_editable(&index, out)?;
    refuse_navigation_records(&index)?;
    let seqs = editable_rows(&index, &rows, out)?;
    let rows_read = Rows::new(conn, session_id, &seqs);
    let Some(edits) = job::ask(planner, &rows_read, &index, &tree, out)? else {
        return Ok(None);
    };
    let resolved = job::resolve_counted(&index, &tree, edits, out)?;
    // Kept rows keep their stored bytes; a changed row is stored as text.
    let mut stored_after = 0u64;
    let (applied, again) = with_hashed_rows(conn, session_id, |r| {
        rewrite::apply_lines(r, &index, &resolved, &mut |line| {
            stored_after += match line {
                Output::Kept(n, _) => rows[n].1,
                Output::Patched(_, b) | Output::Appended(b) => {
                    b.strip_suffix(b"\n").unwrap_or(b).len() as u64
                }
            };
            Ok(())
        })
    })
    .map_err(job::failed)?;
    drop(tx);
    if again != digest {
        return Err(Status::Refused(
            "the rows changed while they were being read".into(),
        ));
    }
    job::check(&index, &applied.index, &resolved)?;
    out.bytes_after = stored_after;
    out.status = Status::WouldChange;
    Ok(Some(Plan {
        session_id: session_id.to_owned(),
        index,
        resolved,
        seqs,
        snapshot,
        digest,
    }))
}

/// A session's rows as a [`Transcript`] a planner reads back: line `n` of its index is the
/// row at `seqs[n]` (read inside the caller's read transaction, so from the snapshot that was
/// indexed).
pub struct Rows<'c> {
    conn: &'c Connection,
    session_id: &'c str,
    seqs: &'c [i64],
}

impl<'c> Rows<'c> {
    pub fn new(conn: &'c Connection, session_id: &'c str, seqs: &'c [i64]) -> Rows<'c> {
        Rows {
            conn,
            session_id,
            seqs,
        }
    }
}

impl Transcript for Rows<'_> {
    fn reader(&self, light: bool) -> Result<EntryReader<'_>> {
        let name = format!("the rows of session {}", self.session_id);
        Ok(EntryReader::new(name, RowLines(self), light))
    }
}

struct RowLines<'r, 'c>(&'r Rows<'c>);

impl LineSource for RowLines<'_, '_> {
    /// One row by its `seq`; a light read cuts the payloads out of the row's text after it is
    /// read (a row is read whole).
    fn read_line(
        &mut self,
        index: &Index,
        n: usize,
        light: bool,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let rows = self.0;
        let seq = *rows
            .seqs
            .get(n)
            .ok_or_else(|| std::io::Error::other(format!("line {} has no row", n + 1)))?;
        let raw = read::row_line(rows.conn, rows.session_id, seq)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        if (raw.len() as u64) != index.lines[n].len {
            return Err(std::io::Error::other(format!(
                "row {seq} changed since it was indexed"
            )));
        }
        let payloads: Vec<&crate::transcript::Payload> = if light {
            index.payloads_of(n).iter().collect()
        } else {
            Vec::new()
        };
        buf.clear();
        buf.extend_from_slice(&crate::transcript::cut_payloads(&raw, &payloads));
        Ok(())
    }
}

/// What the schema of the database lets a writer set on a text row.
#[derive(Debug, Clone, Copy)]
pub struct RowColumns {
    /// `event_zstd`, `event_utf8_bytes` and `navigation_json` exist (schema 23).
    compressed: bool,
    /// `PRAGMA encoding` is UTF-8 (the runtime stores `event_utf8_bytes` only then).
    utf8: bool,
}

impl RowColumns {
    pub fn of(conn: &Connection) -> Result<RowColumns> {
        let encoding: String = conn.pragma_query_value(None, "encoding", |r| r.get(0))?;
        Ok(RowColumns {
            compressed: read::has_compressed_rows(conn)?,
            utf8: encoding.eq_ignore_ascii_case("UTF-8"),
        })
    }
}

/// A changed row: its `seq`, its new text, and its new parent when it was re-parented.
struct Changed {
    seq: i64,
    text: String,
    parent: Option<Option<String>>,
}

/// Apply `plan` to its session in one `BEGIN IMMEDIATE` (see the module doc). On success the
/// outcome is `Changed`; on any failure the transaction is rolled back and the outcome says
/// why (`Refused` when the session changed since the plan or the rewrite fails validation).
pub fn write(conn: &Connection, cols: RowColumns, plan: &Plan, out: &mut Outcome) {
    let result = (|| -> Result<(), Status> {
        let enforced: i64 = conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .map_err(|e| job::failed(e.into()))?;
        if enforced != 1 {
            return Err(Status::Failed(
                "foreign keys are not enforced on this connection; nothing written".into(),
            ));
        }
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| job::failed(e.into()))?;
        let done = write_in_transaction(conn, cols, plan);
        let done = done.and_then(|()| {
            conn.execute_batch("COMMIT")
                .map_err(|e| job::failed(e.into()))
        });
        if done.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        done
    })();
    match result {
        Ok(()) => out.status = Status::Changed,
        Err(status) => out.fail(status),
    }
}

fn write_in_transaction(conn: &Connection, cols: RowColumns, plan: &Plan) -> Result<(), Status> {
    let sid = plan.session_id.as_str();
    if snapshot_of(conn, sid).map_err(job::failed)? != plan.snapshot {
        return Err(Status::Refused(
            "the session changed since it was planned (a runtime wrote to it); left as it is"
                .into(),
        ));
    }
    let mut changed: Vec<Changed> = Vec::new();
    let mut appended: Vec<String> = Vec::new();
    let (applied, digest) = with_hashed_rows(conn, sid, |r| {
        rewrite::apply_lines(r, &plan.index, &plan.resolved, &mut |line| {
            match line {
                Output::Kept(..) => {}
                Output::Patched(n, bytes) => {
                    let text = std::str::from_utf8(bytes)?;
                    let parent = match &plan.resolved.actions[n] {
                        LineAction::Patch(p) => p.parent.clone(),
                        _ => None,
                    };
                    changed.push(Changed {
                        seq: plan.seqs[n],
                        text: text.strip_suffix('\n').unwrap_or(text).to_owned(),
                        parent,
                    });
                }
                Output::Appended(bytes) => {
                    let text = std::str::from_utf8(bytes)?;
                    appended.push(text.strip_suffix('\n').unwrap_or(text).to_owned());
                }
            }
            Ok(())
        })
    })
    // The same rewrite passed on the rows as planned: failing now, they changed.
    .map_err(|e| {
        Status::Refused(
            format!("a row of the session changed since it was planned ({e:#}); left as it is")
                .into(),
        )
    })?;
    if digest != plan.digest {
        return Err(Status::Refused(
            "a row of the session changed since it was planned; left as it is".into(),
        ));
    }
    job::check(&plan.index, &applied.index, &plan.resolved)?;
    let failed = |e: anyhow::Error| Status::Failed(format!("{e:#}").into());
    apply_rows(conn, cols, plan, &changed).map_err(failed)?;
    append_rows(conn, cols, sid, &appended).map_err(failed)?;
    // A pure append keeps the generation, as the runtime's appends do.
    let rotate = plan
        .resolved
        .actions
        .iter()
        .any(|a| !matches!(a, LineAction::Keep));
    mark_rewritten(conn, sid, rotate).map_err(failed)?;
    Ok(())
}

/// Steps 2–4: update the changed rows and their identities, delete the removed rows.
fn apply_rows(conn: &Connection, cols: RowColumns, plan: &Plan, changed: &[Changed]) -> Result<()> {
    let sid = plan.session_id.as_str();
    let mut update = conn.prepare(if cols.compressed {
        "UPDATE transcript_events SET event_json = ?3, event_zstd = NULL, \
         event_utf8_bytes = ?4, navigation_json = NULL WHERE session_id = ?1 AND seq = ?2"
    } else {
        "UPDATE transcript_events SET event_json = ?3 WHERE session_id = ?1 AND seq = ?2"
    })?;
    let mut reparent = conn.prepare(
        "UPDATE transcript_event_identities SET parent_id = ?3 WHERE session_id = ?1 AND seq = ?2",
    )?;
    for c in changed {
        let n = if cols.compressed {
            let bytes = cols.utf8.then_some(c.text.len() as i64);
            update.execute(params![sid, c.seq, c.text, bytes])?
        } else {
            update.execute(params![sid, c.seq, c.text])?
        };
        if n != 1 {
            bail!("row {} of {sid}: {n} rows updated, 1 expected", c.seq);
        }
        if let Some(parent) = &c.parent {
            reparent.execute(params![sid, c.seq, parent])?;
        }
    }
    let mut delete =
        conn.prepare("DELETE FROM transcript_events WHERE session_id = ?1 AND seq = ?2")?;
    for (n, action) in plan.resolved.actions.iter().enumerate() {
        if matches!(action, LineAction::Drop) {
            let seq = plan.seqs[n];
            if delete.execute(params![sid, seq])? != 1 {
                bail!("row {seq} of {sid} was not there to delete");
            }
        }
    }
    Ok(())
}

/// Append new entries (a compaction) as the runtime appends one: at `max(seq) + 1`, as text,
/// `created_at` its timestamp, with its identity row; the session's `updated_at` follows.
fn append_rows(conn: &Connection, cols: RowColumns, sid: &str, texts: &[String]) -> Result<()> {
    for text in texts {
        let v = crate::jsjson::parse(text.as_bytes())
            .map_err(|e| anyhow!("an appended entry does not parse: {e}"))?;
        let created_at = match v.get("timestamp") {
            Some(serde_json::Value::String(t)) => crate::isotime::parse_iso_ms(t).map(|t| t as i64),
            Some(serde_json::Value::Number(n)) => n.as_f64().map(|t| t as i64),
            _ => None,
        }
        .unwrap_or(crate::js::now_ms() as i64);
        let seq: i64 = conn.query_row(
            "SELECT coalesce(max(seq), -1) + 1 FROM transcript_events WHERE session_id = ?1",
            [sid],
            |r| r.get(0),
        )?;
        if cols.compressed {
            let bytes = cols.utf8.then_some(text.len() as i64);
            conn.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at, \
                 event_zstd, event_utf8_bytes, navigation_json) VALUES (?1, ?2, ?3, ?4, NULL, ?5, NULL)",
                params![sid, seq, text, created_at, bytes],
            )?;
        } else {
            conn.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![sid, seq, text, created_at],
            )?;
        }
        let str_of = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        let id = str_of("id")
            .map(crate::js::js_trim)
            .ok_or_else(|| anyhow!("an appended entry has no id"))?;
        conn.execute(
            "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, \
             parent_id, message_idempotency_key, created_at) VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)",
            params![sid, id, seq, str_of("type"), str_of("parentId"), created_at],
        )?;
        conn.execute(
            "UPDATE session_windows SET updated_at = ?2 WHERE session_id = ?1",
            params![sid, created_at],
        )?;
    }
    Ok(())
}

/// Step 5: flag the projection for a rebuild, rotate the generation (or, for a pure append,
/// create one when there is none), move the mutation time forward, as the runtime's rewrites
/// do.
fn mark_rewritten(conn: &Connection, sid: &str, rotate: bool) -> Result<()> {
    let now = crate::js::now_ms() as i64;
    conn.execute(
        "INSERT INTO session_transcript_index_state (session_id, indexed_seq, leaf_event_id, \
         needs_rebuild, active_event_count, active_message_count, updated_at) \
         VALUES (?1, -1, NULL, 1, 0, 0, ?2) \
         ON CONFLICT(session_id) DO UPDATE SET needs_rebuild = 1, updated_at = ?2",
        params![sid, now.max(1)],
    )?;
    conn.execute(
        if rotate {
            "INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) \
             VALUES (?1, ?2, ?3) ON CONFLICT(session_id) DO UPDATE SET \
             generation = excluded.generation, updated_at = excluded.updated_at"
        } else {
            "INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) \
             VALUES (?1, ?2, ?3) ON CONFLICT(session_id) DO NOTHING"
        },
        params![sid, new_generation()?, now],
    )?;
    let n = conn.execute(
        "UPDATE session_windows SET transcript_updated_at = max(?2, \
         coalesce(transcript_updated_at, -1) + 1, coalesce(transcript_observed_at, -1) + 1) \
         WHERE session_id = ?1",
        params![sid, now],
    )?;
    if n != 1 {
        return Err(anyhow!("session {sid} has no session_windows row"));
    }
    Ok(())
}

/// A new rewrite generation as the runtime makes one: 32 lowercase hex digits (a random UUID
/// without its dashes).
fn new_generation() -> Result<String> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the pointer and length name the unfilled part of `bytes`.
        let r = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("cannot read random bytes");
            }
        } else {
            filled += r as usize;
        }
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_as_their_file_reads_light_or_not_and_a_changed_row_is_an_error() {
        let b64 = "QUJD".repeat(500);
        let lines = [
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned(),
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","content":[{{"type":"text","text":"hé"}},{{"type":"image","data":"{b64}","mimeType":"image/png"}}]}}}}"#
            ),
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}"#.to_owned(),
        ];
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, \
             created_at INTEGER)",
        )
        .unwrap();
        let seqs = [10i64, 20, 35];
        for (seq, line) in seqs.iter().zip(&lines) {
            conn.execute(
                "INSERT INTO transcript_events VALUES ('sid', ?1, ?2, 0)",
                params![seq, line],
            )
            .unwrap();
        }
        let text = lines.join("\n") + "\n";
        let index = Index::from_reader(text.as_bytes()).unwrap();
        assert!(!index.payloads.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.jsonl");
        std::fs::write(&file, &text).unwrap();
        let rows = Rows::new(&conn, "sid", &seqs);
        let path = file.as_path();
        for light in [false, true] {
            let mut from_file = (&path).reader(light).unwrap();
            let mut from_rows = rows.reader(light).unwrap();
            for i in (1..index.entries.len()).rev() {
                let want = from_file.read(&index, i).unwrap();
                assert_eq!(from_rows.read(&index, i).unwrap(), want, "{i} {light}");
            }
        }
        let light = rows.reader(true).unwrap().read(&index, 1).unwrap();
        assert_eq!(light["message"]["content"][1]["data"], "");
        // A row that no longer holds the indexed entry is an error, never another value.
        conn.execute(
            "UPDATE transcript_events SET event_json = replace(event_json, '\"id\":\"b\"', \
             '\"id\":\"c\"') WHERE seq = 35",
            [],
        )
        .unwrap();
        let err = rows.reader(false).unwrap().read(&index, 2).unwrap_err();
        assert!(format!("{err:#}").contains("changed"), "{err:#}");
    }

    #[test]
    fn generations_are_32_lowercase_hex_digits_and_differ() {
        let a = new_generation().unwrap();
        let b = new_generation().unwrap();
        assert_eq!(a.len(), 32);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
