//! The `inspect` report: the JSON document (`--json`) and the human tables, which fit an
//! 80-column terminal (long keys are shortened in the middle, tables are capped at 80).

use std::cmp::Ordering;
use std::fmt::Write as _;

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use humansize::{BINARY, format_size};
use serde_json::{Map, Value, json};

use super::cleanup_text::format_time_ago;
use crate::inspect::{SessionRow, StoreReport};

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

const WIDTH: u16 = 80;

/// Columns of the session table.
const HEADER: [&str; 8] = [
    "key", "kind", "age", "size", "msgs", "imgs", "silent", "tokens",
];

fn bytes_of(r: &SessionRow) -> u64 {
    r.facts.as_ref().map_or(0, |f| f.counts.bytes)
}

fn sorted<'a>(rows: &'a [SessionRow], view: &View) -> Vec<&'a SessionRow> {
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

fn opt_num(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    })
}

fn session_json(r: &SessionRow) -> Value {
    let f = r.facts.clone().unwrap_or_default();
    let c = &f.counts;
    json!({
        "key": r.key,
        "sessionId": r.session_id,
        "kind": r.kind.as_str(),
        "updatedAt": opt_num(r.updated_at),
        "transcript": r.transcript.as_ref().map(|p| p.display().to_string()),
        "missing": r.facts.is_none(),
        "transcriptBytes": c.bytes,
        "entries": c.entries,
        "messages": c.messages,
        "images": c.images,
        "imageBytes": c.image_bytes,
        "silentReplies": c.silent_replies,
        "toolOutputBytes": c.tool_output_bytes,
        "thinkingBytes": c.thinking_bytes,
        "estimatedContextTokens": f.context_tokens.unwrap_or(0),
        "compacted": c.compacted,
        "unparsableLines": c.unparsable_lines,
        "reclaimable": {
            "strip-images": f.strip_bytes,
            "prune-noreply": f.prune_bytes,
            "compactTokens": f.compact_tokens,
        },
    })
}

fn store_json(r: &StoreReport, view: &View) -> Value {
    let mut files = Map::new();
    for (cat, st) in &r.files {
        files.insert((*cat).into(), json!({"count": st.count, "bytes": st.bytes}));
    }
    let mut kinds = Map::new();
    for (k, st) in &r.kinds {
        kinds.insert(
            k.as_str().into(),
            json!({"entries": st.entries, "oldest": opt_num(st.oldest), "newest": opt_num(st.newest)}),
        );
    }
    let mut fields = Map::new();
    for (k, n) in &r.store_fields {
        fields.insert(k.clone(), json!(n));
    }
    let d = &r.damage;
    let path_list = |v: &[(std::path::PathBuf, usize)]| -> Value {
        v.iter()
            .map(|(p, n)| json!({"transcript": p.display().to_string(), "count": n}))
            .collect()
    };
    json!({
        "agentId": r.agent_id,
        "storePath": r.store_path.display().to_string(),
        "sqlite": r.sqlite.as_ref().map(|p| p.display().to_string()),
        "entries": r.entries,
        "diskBytes": r.disk_bytes,
        "storeBytes": r.store_bytes,
        "storeFields": fields,
        "files": files,
        "kinds": kinds,
        "sessionsMatched": r.sessions.len(),
        "sessions": sorted(&r.sessions, view).into_iter().map(session_json).collect::<Vec<_>>(),
        "reclaimable": {
            "cleanup": r.reclaimable.cleanup,
            "strip-images": r.reclaimable.strip_images,
            "prune-noreply": r.reclaimable.prune_noreply,
            "compactTokens": r.reclaimable.compact_tokens,
        },
        "damage": {
            "missingTranscripts": d.missing_transcripts,
            "unparsableLines": d.unparsable_lines.iter()
                .map(|(p, l)| json!({"transcript": p.display().to_string(), "lines": l}))
                .collect::<Vec<_>>(),
            "danglingParents": path_list(&d.dangling_parents),
            "orphanedToolResults": path_list(&d.orphan_tool_results),
            "locks": d.locks.iter().map(|h| json!({
                "path": h.lock_path.display().to_string(),
                "pid": h.pid,
                "alive": h.alive,
                "stale": h.stale_reasons,
            })).collect::<Vec<_>>(),
            "unreadable": d.unreadable.iter()
                .map(|(p, e)| json!({"transcript": p.display().to_string(), "error": e}))
                .collect::<Vec<_>>(),
        },
        "notes": r.notes,
    })
}

/// The `--json` document.
pub fn json(reports: &[StoreReport], view: &View) -> Value {
    let sum = |f: &dyn Fn(&StoreReport) -> u64| reports.iter().map(f).sum::<u64>();
    json!({
        "stores": reports.iter().map(|r| store_json(r, view)).collect::<Vec<_>>(),
        "totals": {
            "stores": reports.len(),
            "entries": sum(&|r| r.entries),
            "diskBytes": sum(&|r| r.disk_bytes),
            "reclaimable": {
                "cleanup": reports.iter().filter_map(|r| r.reclaimable.cleanup).sum::<i64>(),
                "strip-images": reports.iter().map(|r| r.reclaimable.strip_images).sum::<i64>(),
                "prune-noreply": reports.iter().map(|r| r.reclaimable.prune_noreply).sum::<i64>(),
                "compactTokens": sum(&|r| r.reclaimable.compact_tokens),
            },
        },
    })
}

fn size(n: u64) -> String {
    format_size(n, BINARY)
}

/// A size without decimals, for narrow columns.
fn short_size(n: u64) -> String {
    format_size(n, BINARY.decimal_places(0).space_after_value(false))
}

/// A size that may be negative (the files would grow).
fn signed(n: i64) -> String {
    if n < 0 {
        format!("{} more", size(n.unsigned_abs()))
    } else {
        size(n as u64)
    }
}

fn table(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH)
        .set_header(header);
    t
}

fn right(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Break `text` into lines of at most `width` characters, at spaces where possible;
/// continuation lines are indented by two spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let chunk = width.saturating_sub(2).max(1);
    let mut pieces: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let chars: Vec<char> = word.chars().collect();
        pieces.extend(chars.chunks(chunk).map(|c| c.iter().collect::<String>()));
    }
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for p in pieces {
        let fresh = cur.trim().is_empty();
        if fresh {
            cur.push_str(&p);
        } else if cur.chars().count() + 1 + p.chars().count() <= width {
            cur.push(' ');
            cur.push_str(&p);
        } else {
            lines.push(std::mem::replace(&mut cur, format!("  {p}")));
        }
    }
    if !cur.trim().is_empty() {
        lines.push(cur);
    }
    lines
}

/// Shorten `s` to at most `max` characters, keeping both ends.
fn middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    format!("{h}…{t}")
}

fn age(now: f64, t: Option<f64>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| format_time_ago(now - t).replace(" ago", ""),
    )
}

fn render_store(out: &mut String, r: &StoreReport, view: &View) {
    let head = format!("Agent {}: {}", r.agent_id, r.store_path.display());
    let _ = writeln!(out, "{}", middle(&head, WIDTH as usize));
    let _ = writeln!(
        out,
        "{} entries, {} on disk, sessions.json {}",
        r.entries,
        size(r.disk_bytes),
        size(r.store_bytes)
    );
    if r.store_bytes > 0 {
        let top: Vec<String> = r
            .store_fields
            .iter()
            .take(3)
            .map(|(k, n)| format!("{k} {}%", n * 100 / r.store_bytes))
            .collect();
        let _ = writeln!(out, "Largest entry fields: {}", top.join(", "));
    }
    for n in &r.notes {
        for line in wrap(&format!("Note: {n}"), WIDTH as usize) {
            let _ = writeln!(out, "{line}");
        }
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
    let rows = sorted(&r.sessions, view);
    let _ = writeln!(
        out,
        "Sessions: {} shown of {} matching (keys without \"agent:{}:\")",
        rows.len(),
        r.sessions.len(),
        r.agent_id
    );
    if !rows.is_empty() {
        let mut t = table(HEADER.to_vec());
        let prefix = format!("agent:{}:", r.agent_id);
        let cells: Vec<(String, Vec<String>)> = rows
            .iter()
            .map(|s| {
                let f = s.facts.as_ref();
                let c = f.map(|f| &f.counts);
                let n = |x: Option<u64>| x.map_or_else(|| "-".into(), |x| x.to_string());
                let key = s.key.strip_prefix(&prefix).unwrap_or(&s.key).to_owned();
                let rest = vec![
                    s.kind.as_str().to_string(),
                    age(view.now_ms, s.updated_at),
                    c.map_or_else(|| "missing".into(), |c| short_size(c.bytes)),
                    n(c.map(|c| c.messages)),
                    n(c.map(|c| c.images)),
                    n(c.map(|c| c.silent_replies)),
                    n(f.and_then(|f| f.context_tokens)),
                ];
                (key, rest)
            })
            .collect();
        // The key column gets what the other columns leave of the width (each column costs
        // its widest cell, two spaces of padding and one border).
        let others: usize = (0..7)
            .map(|i| {
                cells
                    .iter()
                    .map(|(_, r)| r[i].chars().count())
                    .chain([HEADER[i + 1].len()])
                    .max()
                    .unwrap_or(0)
                    + 3
            })
            .sum();
        let key_width = (WIDTH as usize).saturating_sub(others + 4).clamp(8, 40);
        for (key, rest) in cells {
            let mut row = vec![middle(&key, key_width)];
            row.extend(rest);
            t.add_row(row);
        }
        right(&mut t, 3);
        let _ = writeln!(out, "{t}");
    }
    let mut t = table(vec!["if you ran", "it would reclaim"]);
    let rc = &r.reclaimable;
    t.add_row(vec![
        "cleanup --enforce".to_string(),
        rc.cleanup.map_or_else(|| "not predicted".into(), signed),
    ]);
    t.add_row(vec![
        "strip-images --enforce".into(),
        signed(rc.strip_images),
    ]);
    t.add_row(vec![
        "prune-noreply --enforce".into(),
        signed(rc.prune_noreply),
    ]);
    t.add_row(vec![
        "compact --enforce".into(),
        format!("~{} context tokens", rc.compact_tokens),
    ]);
    right(&mut t, 1);
    let _ = writeln!(out, "{t}");
    render_damage(out, r);
}

fn render_damage(out: &mut String, r: &StoreReport) {
    let d = &r.damage;
    let mut lines: Vec<String> = Vec::new();
    if !d.missing_transcripts.is_empty() {
        let n = d.missing_transcripts.len();
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

/// The human report.
pub fn render(out: &mut String, reports: &[StoreReport], view: &View) {
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_store(out, r, view);
    }
    if reports.len() > 1 {
        let total: u64 = reports.iter().map(|r| r.disk_bytes).sum();
        let mut t = table(vec!["agent", "entries", "on disk", "cleanup frees"]);
        for r in reports {
            t.add_row(vec![
                middle(&r.agent_id, 20),
                r.entries.to_string(),
                size(r.disk_bytes),
                r.reclaimable
                    .cleanup
                    .map_or_else(|| "-".into(), |n| size(n.max(0) as u64)),
            ]);
        }
        right(&mut t, 1);
        let _ = writeln!(out, "\nAll agents: {} on disk", size(total));
        let _ = writeln!(out, "{t}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_shortening_respect_the_width() {
        let long = format!(
            "Note: {} and /a/{}/b end",
            "word ".repeat(30),
            "x".repeat(200)
        );
        let lines = wrap(&long, 80);
        assert!(lines.len() > 3);
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        let joined: String = lines.concat().split_whitespace().collect();
        let original: String = long.split_whitespace().collect();
        assert_eq!(joined, original);
        assert_eq!(middle("abcdefghij", 5), "ab…ij");
        assert_eq!(middle("abc", 5), "abc");
    }
}
