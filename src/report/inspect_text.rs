//! The human `inspect` report: tables and lines that fit 80 columns wherever the output goes
//! (long keys are shortened in the middle, tables are capped at 80, free text is wrapped).
//! The `--json` documents are in `inspect_json`.

use std::cmp::Ordering;
use std::fmt::Write as _;

use super::cleanup_text::format_time_ago;
use super::text::{middle, right, short_size, signed, size, table, width, wrap, write_wrapped};
use crate::inspect::database::DbFacts;
use crate::inspect::single::TranscriptReport;
use crate::inspect::{Damage, Reclaimable, SessionRow, StoreReport, TranscriptFacts};

/// Sort order of the session table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Bytes,
    Age,
    Tokens,
    Images,
    Key,
}

/// How to present the sessions.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub sort: Sort,
    /// At most this many sessions per store (0 = all).
    pub limit: usize,
    pub now_ms: f64,
}

fn bytes_of(r: &SessionRow) -> u64 {
    r.facts.as_ref().map_or(0, |f| f.counts.bytes)
}

pub(crate) fn sorted<'a>(rows: &'a [SessionRow], view: &View) -> Vec<&'a SessionRow> {
    let mut v: Vec<&SessionRow> = rows.iter().collect();
    let tokens = |r: &SessionRow| r.facts.as_ref().and_then(|f| f.context_tokens).unwrap_or(0);
    let images = |r: &SessionRow| r.facts.as_ref().map_or(0, |f| f.counts.images);
    v.sort_by(|a, b| match view.sort {
        Sort::Bytes => bytes_of(b).cmp(&bytes_of(a)),
        Sort::Tokens => tokens(b).cmp(&tokens(a)),
        Sort::Images => images(b).cmp(&images(a)),
        Sort::Key => a.key.cmp(&b.key),
        Sort::Age => a
            .updated_at
            .unwrap_or(f64::NEG_INFINITY)
            .partial_cmp(&b.updated_at.unwrap_or(f64::NEG_INFINITY))
            .unwrap_or(Ordering::Equal),
    });
    if view.limit > 0 {
        v.truncate(view.limit);
    }
    v
}

fn age(now: f64, t: Option<f64>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| format_time_ago(now - t).replace(" ago", ""),
    )
}

/// A table of sessions: the key column gets what the other columns leave of the width (each
/// column costs its widest cell, two spaces of padding and one border).
fn session_table(header: &[&str], rows: Vec<(String, Vec<String>)>, right_from: usize) -> String {
    let others: usize = (1..header.len())
        .map(|i| {
            rows.iter()
                .map(|(_, r)| r[i - 1].chars().count())
                .chain(header[i].lines().map(|l| l.chars().count()))
                .max()
                .unwrap_or(0)
                + 3
        })
        .sum();
    // A key is cut (in the middle) only when it cannot fit the width at all.
    let key_width = width().saturating_sub(others + 4).max(8);
    let mut t = table(header.to_vec());
    for (key, rest) in rows {
        let mut row = vec![middle(&key, key_width)];
        row.extend(rest);
        t.add_row(row);
    }
    right(&mut t, right_from);
    t.to_string()
}

fn dash_or<T: ToString>(x: Option<T>) -> String {
    x.map_or_else(|| "-".into(), |x| x.to_string())
}

/// The two session tables: what each session is (kind, age, size, entries, messages, context
/// tokens), then what is in it (silent replies, images and their bytes, media references,
/// tool output, thinking) and whether it was compacted. Same rows, same order.
fn render_sessions(out: &mut String, r: &StoreReport, view: &View) {
    let rows = sorted(&r.sessions, view);
    let prefix = format!("agent:{}:", r.agent_id);
    write_wrapped(
        out,
        &format!(
            "Sessions: {} shown of {} matching",
            rows.len(),
            r.sessions.len()
        ),
    );
    if rows.is_empty() {
        return;
    }
    if rows.iter().any(|s| s.key.starts_with(&prefix)) {
        write_wrapped(out, &format!("(keys shown without \"{prefix}\")"));
    }
    let key = |s: &SessionRow| s.key.strip_prefix(&prefix).unwrap_or(&s.key).to_owned();
    let what: Vec<(String, Vec<String>)> = rows
        .iter()
        .map(|s| {
            let f = s.facts.as_ref();
            let c = f.map(|f| &f.counts);
            let rest = vec![
                s.kind.as_str().to_string(),
                age(view.now_ms, s.updated_at),
                c.map_or_else(|| "missing".into(), |c| short_size(c.bytes)),
                dash_or(c.map(|c| c.entries)),
                dash_or(c.map(|c| c.messages)),
                dash_or(f.and_then(|f| f.context_tokens)),
            ];
            (key(s), rest)
        })
        .collect();
    let header = ["key", "kind", "age", "size", "entries", "msgs", "tokens"];
    let _ = writeln!(out, "{}", session_table(&header, what, 3));
    let bytes: Vec<(String, Vec<String>)> = rows
        .iter()
        .map(|s| {
            let c = s.facts.as_ref().map(|f| &f.counts);
            let rest = vec![
                dash_or(c.map(|c| c.silent_replies)),
                dash_or(c.map(|c| c.images)),
                c.map_or_else(|| "-".into(), |c| short_size(c.image_bytes)),
                dash_or(c.map(|c| c.media_references)),
                c.map_or_else(|| "-".into(), |c| short_size(c.tool_output_bytes)),
                c.map_or_else(|| "-".into(), |c| short_size(c.thinking_bytes)),
                c.map_or_else(|| "-".into(), |c| yes_no(c.compacted)),
            ];
            (key(s), rest)
        })
        .collect();
    let header = [
        "key",
        "silent",
        "images",
        "image\nbytes",
        "media\nrefs",
        "tool\noutput",
        "thinking",
        "compacted",
    ];
    let _ = writeln!(out, "{}", session_table(&header, bytes, 1));
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn render_reclaimable(out: &mut String, rc: &Reclaimable, cleanup_na: Option<&str>) {
    render_reclaimable_of(out, rc, cleanup_na, None);
}

/// The reclaimable table; for a SQLite-era agent (`db`), `vacuum` is added.
fn render_reclaimable_of(
    out: &mut String,
    rc: &Reclaimable,
    cleanup_na: Option<&str>,
    db: Option<&DbFacts>,
) {
    let mut t = table(vec!["if you ran", "it would reclaim"]);
    if let Some(db) = db {
        let cleanup = match rc.cleanup {
            Some(n) => signed(n),
            None => "not predicted yet (see cleanup --dry-run)".to_string(),
        };
        t.add_row(vec!["cleanup --enforce".to_string(), cleanup]);
        for (cmd, n) in [
            ("strip-images", rc.strip_images),
            ("prune-noreply", rc.prune_noreply),
            ("prune-cache-ttl", rc.prune_cache_ttl),
        ] {
            t.add_row(vec![format!("{cmd} --enforce"), signed(n)]);
        }
        t.add_row(vec![
            "compact --enforce".to_string(),
            format!("~{} context tokens", rc.compact_tokens),
        ]);
        t.add_row(vec![
            "vacuum --enforce".to_string(),
            signed(db.vacuum.reclaimed()),
        ]);
        right(&mut t, 1);
        let _ = writeln!(out, "{t}");
        return;
    }
    let cleanup = match (cleanup_na, rc.cleanup) {
        (Some(why), _) => why.to_string(),
        (None, Some(n)) => signed(n),
        (None, None) => "not computed (--no-cleanup)".into(),
    };
    t.add_row(vec!["cleanup --enforce".to_string(), cleanup]);
    t.add_row(vec![
        "strip-images --enforce".into(),
        signed(rc.strip_images),
    ]);
    t.add_row(vec![
        "prune-noreply --enforce".into(),
        signed(rc.prune_noreply),
    ]);
    t.add_row(vec![
        "prune-cache-ttl --enforce".into(),
        signed(rc.prune_cache_ttl),
    ]);
    t.add_row(vec![
        "compact --enforce".into(),
        format!("~{} context tokens", rc.compact_tokens),
    ]);
    right(&mut t, 1);
    let _ = writeln!(out, "{t}");
}

fn render_store(out: &mut String, r: &StoreReport, view: &View) {
    let head = format!("Agent {}: {}", r.agent_id, r.store_path.display());
    let _ = writeln!(out, "{}", middle(&head, width()));
    let entries_text = match &r.database {
        None => format!("sessions.json {}", size(r.store_bytes)),
        Some(db) => format!(
            "{} archived, entry_json {}",
            db.archived_entries,
            size(r.store_bytes)
        ),
    };
    write_wrapped(
        out,
        &format!(
            "{}, {} on disk, {entries_text}",
            super::count(r.entries as usize, "entry", "entries"),
            size(r.disk_bytes),
        ),
    );
    if r.store_bytes > 0 && !r.store_fields.is_empty() {
        let top: Vec<String> = r
            .store_fields
            .iter()
            .take(3)
            .map(|(k, n)| format!("{} {}%", middle(k, 20), n * 100 / r.store_bytes))
            .collect();
        write_wrapped(out, &format!("Largest entry fields: {}", top.join(", ")));
    }
    for n in &r.notes {
        write_wrapped(out, &format!("Note: {n}"));
    }
    let mut t = table(vec!["kind", "entries", "oldest", "newest"]);
    for (k, st) in &r.kinds {
        t.add_row(vec![
            k.as_str().to_string(),
            st.entries.to_string(),
            age(view.now_ms, st.oldest),
            age(view.now_ms, st.newest),
        ]);
    }
    right(&mut t, 1);
    let _ = writeln!(out, "{t}");
    let mut t = table(vec!["files", "count", "size"]);
    for (cat, st) in r.files.iter().filter(|(_, st)| st.count > 0) {
        t.add_row(vec![cat.to_string(), st.count.to_string(), size(st.bytes)]);
    }
    right(&mut t, 1);
    let _ = writeln!(out, "{t}");
    if let Some(db) = &r.database {
        render_database(out, db, &r.sessions);
    }
    render_sessions(out, r, view);
    render_reclaimable_of(out, &r.reclaimable, None, r.database.as_ref());
    render_damage(out, &r.damage, r.missing_transcripts().count());
}

/// Where a database's bytes go: the file, WAL and free pages, the largest tables, and what
/// the transcripts hold that the runtime never sends to the model.
fn render_database(out: &mut String, db: &DbFacts, sessions: &[SessionRow]) {
    let sp = &db.space;
    let release = db
        .app_version
        .as_deref()
        .map(|v| format!(", written by OpenClaw {v}"))
        .unwrap_or_default();
    write_wrapped(
        out,
        &format!(
            "Database: schema {}{release}; file {}, WAL {}, {} free pages ({}); journal {}, \
             auto_vacuum {}",
            db.schema_version,
            size(sp.db_bytes),
            size(sp.wal_bytes),
            sp.freelist_pages,
            size(sp.free_bytes()),
            sp.journal_mode,
            match sp.auto_vacuum {
                0 => "none",
                1 => "full",
                _ => "incremental",
            }
        ),
    );
    let (markers, marker_bytes) = sessions
        .iter()
        .filter_map(|s| s.facts.as_ref())
        .fold((0, 0), |(n, b), f| {
            (n + f.counts.cache_ttl_markers, b + f.counts.cache_ttl_bytes)
        });
    write_wrapped(
        out,
        &format!(
            "Transcripts: {} events ({}), of which {} cache-ttl markers ({}) in the sessions \
             shown; {} trajectory events; {} archived transcripts ({}); {} in cold storage ({})",
            db.transcript_events,
            size(db.transcript_event_bytes),
            markers,
            size(marker_bytes),
            db.trajectory_events,
            db.archive_rows.count,
            size(db.archive_rows.bytes),
            db.cold_rows.count,
            size(db.cold_rows.bytes),
        ),
    );
    let mut t = table(vec!["table (with its indexes)", "size"]);
    let shown = 8;
    for (name, bytes) in db.tables.iter().take(shown) {
        t.add_row(vec![middle(name, 40), size(*bytes)]);
    }
    if db.tables.len() > shown {
        let rest: u64 = db.tables.iter().skip(shown).map(|(_, n)| n).sum();
        t.add_row(vec![
            format!("{} more tables", db.tables.len() - shown),
            size(rest),
        ]);
    }
    right(&mut t, 1);
    let _ = writeln!(out, "{t}");
}

fn render_damage(out: &mut String, d: &Damage, missing_transcripts: usize) {
    let mut lines: Vec<String> = Vec::new();
    if missing_transcripts > 0 {
        let n = missing_transcripts;
        lines.push(format!(
            "{} with a missing transcript",
            super::count(n, "entry", "entries")
        ));
    }
    for (p, l) in &d.unparsable_lines {
        lines.push(format!(
            "{}: {}",
            name(p),
            super::count(l.len(), "unparsable line", "unparsable lines")
        ));
    }
    for (p, n) in &d.dangling_parents {
        lines.push(format!(
            "{}: {}",
            name(p),
            super::count(*n, "dangling parent", "dangling parents")
        ));
    }
    for (p, n) in &d.orphan_tool_results {
        lines.push(format!(
            "{}: {}",
            name(p),
            super::count(*n, "orphaned tool result", "orphaned tool results")
        ));
    }
    for h in &d.locks {
        let state = if h.stale_reasons.is_empty() {
            "held".to_string()
        } else {
            format!("stale ({})", h.stale_reasons.join(", "))
        };
        lines.push(format!("{}: {state}", name(&h.lock_path)));
    }
    for (p, e) in &d.unreadable {
        lines.push(format!("{}: unreadable: {e}", name(p)));
    }
    for p in &d.no_header {
        lines.push(format!(
            "{}: no session header (empty or not a transcript); the commands skip it",
            name(p)
        ));
    }
    if lines.is_empty() {
        let _ = writeln!(out, "Damage: none found");
        return;
    }
    let _ = writeln!(out, "Damage:");
    for l in lines {
        let _ = writeln!(out, "  {}", middle(&l, 76));
    }
}

fn name(p: &std::path::Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The human report of a store run.
pub fn render(out: &mut String, reports: &[StoreReport], view: &View) {
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_store(out, r, view);
    }
    if reports.len() > 1 {
        render_summary(out, reports);
    }
}

/// The `--all-agents` summary: per agent and in total, entries, disk, and what each command
/// would reclaim.
fn render_summary(out: &mut String, reports: &[StoreReport]) {
    let header = vec![
        "agent",
        "entries",
        "on\ndisk",
        "cleanup\nfrees",
        "strip-\nimages",
        "prune-\nnoreply",
        "prune-\ncache-ttl",
        "compact\ntokens",
    ];
    let mut t = table(header);
    let cleanup = |c: Option<i64>| c.map_or_else(|| "-".into(), short_signed);
    let mut row = |agent: String, entries: u64, disk: u64, rc: &Reclaimable| {
        t.add_row(vec![
            agent,
            entries.to_string(),
            short_size(disk),
            cleanup(rc.cleanup),
            short_signed(rc.strip_images),
            short_signed(rc.prune_noreply),
            short_signed(rc.prune_cache_ttl),
            rc.compact_tokens.to_string(),
        ]);
    };
    let mut total = Reclaimable::default();
    let (mut entries, mut disk) = (0, 0);
    for r in reports {
        row(
            middle(&r.agent_id, 16),
            r.entries,
            r.disk_bytes,
            &r.reclaimable,
        );
        let rc = &r.reclaimable;
        entries += r.entries;
        disk += r.disk_bytes;
        total.cleanup = match (total.cleanup, rc.cleanup) {
            (None, c) | (c, None) => c,
            (Some(a), Some(b)) => Some(a + b),
        };
        total.strip_images += rc.strip_images;
        total.prune_noreply += rc.prune_noreply;
        total.prune_cache_ttl += rc.prune_cache_ttl;
        total.compact_tokens += rc.compact_tokens;
    }
    row("all".into(), entries, disk, &total);
    right(&mut t, 1);
    let _ = writeln!(
        out,
        "\nAll agents: {} on disk",
        size(reports.iter().map(|r| r.disk_bytes).sum())
    );
    let _ = writeln!(out, "{t}");
}

/// A short size that may be negative (`-12B`: the files would grow).
fn short_signed(n: i64) -> String {
    if n < 0 {
        format!("-{}", short_size(n.unsigned_abs()))
    } else {
        short_size(n as u64)
    }
}

/// The human report of `inspect --transcript FILE`.
pub fn render_transcript(out: &mut String, t: &TranscriptReport) {
    for line in wrap(&format!("Transcript {}", t.path.display()), width()) {
        let _ = writeln!(out, "{line}");
    }
    let f: &TranscriptFacts = &t.facts;
    let c = &f.counts;
    let mut tb = table(vec!["transcript", ""]);
    let rows: Vec<(&str, String)> = vec![
        (
            "session id",
            t.session_id.clone().unwrap_or_else(|| "-".into()),
        ),
        ("size", size(c.bytes)),
        ("entries", c.entries.to_string()),
        ("messages", c.messages.to_string()),
        ("images", format!("{} ({})", c.images, size(c.image_bytes))),
        ("media references", c.media_references.to_string()),
        ("silent replies", c.silent_replies.to_string()),
        (
            "cache-ttl markers",
            format!("{} ({})", c.cache_ttl_markers, size(c.cache_ttl_bytes)),
        ),
        ("tool output", size(c.tool_output_bytes)),
        ("thinking", size(c.thinking_bytes)),
        ("context tokens (estimate)", dash_or(f.context_tokens)),
        ("compacted", yes_no(c.compacted)),
    ];
    for (k, v) in rows {
        tb.add_row(vec![k.to_string(), middle(&v, 40)]);
    }
    right(&mut tb, 1);
    let _ = writeln!(out, "{tb}");
    let rc = Reclaimable {
        cleanup: None,
        strip_images: f.strip_bytes,
        prune_noreply: f.prune_bytes,
        prune_cache_ttl: f.cache_ttl_bytes,
        compact_tokens: f.compact_tokens,
    };
    render_reclaimable(out, &rc, Some("not applicable (no store)"));
    let p = &t.path;
    let mut d = Damage::default();
    if !c.unparsable_lines.is_empty() {
        d.unparsable_lines
            .push((p.clone(), c.unparsable_lines.clone()));
    }
    if f.dangling_parents > 0 {
        d.dangling_parents.push((p.clone(), f.dangling_parents));
    }
    if f.orphan_tool_results > 0 {
        d.orphan_tool_results
            .push((p.clone(), f.orphan_tool_results));
    }
    d.locks.extend(t.lock.clone());
    render_damage(out, &d, 0);
}
