//! Hostile transcript trees from a stream of numbers, and the properties every edit must keep.
//!
//! Shared by the property tests (`tests/cli/properties.rs`, seeded) and the fuzz targets
//! (`fuzz/fuzz_targets/transcript_rewrite.rs`, driven by the fuzzer's bytes), so both explore
//! the same space: entries of every type, parents that point back, forward, nowhere or at
//! themselves, duplicate ids, tool calls and results that match or not, compactions with any
//! `firstKeptEntryId`, labels, NO_REPLY runs, images, and lines the tool must keep as they
//! are (garbage, lone surrogates, invalid UTF-8, CRLF, blank lines, a torn last line).
//!
//! [`check_edits`] runs removals through resolve → apply → validate and, whenever the
//! validator accepts, re-checks the result independently: the output is indexed from its
//! bytes again, untouched lines are byte-identical, and the context is rebuilt by a separate
//! small implementation over `serde_json` values and compared with the old one minus exactly
//! the removed entries.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap, HashSet};

use clawkeeper::transcript::rewrite::{self, Edits, LineAction};
use clawkeeper::transcript::tree::Tree;
use clawkeeper::transcript::validate::{self, Expectation};
use clawkeeper::transcript::{EntryType, Index, LineKind};
use serde_json::{Value, json};

/// Where the generator's choices come from.
pub trait Source {
    fn next(&mut self) -> u64;
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// splitmix64, for seeded runs.
pub struct Seeded(pub u64);

impl Source for Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Bytes as choices (fuzzing); zeros once they run out.
pub struct Bytes<'a>(pub &'a [u8]);

impl Source for Bytes<'_> {
    fn next(&mut self) -> u64 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                u64::from(b)
            }
            None => 0,
        }
    }
}

const TS: &str = "2026-03-01T00:00:00.000Z";

fn header(src: &mut impl Source) -> String {
    match src.below(20) {
        0 => "{\"type\":\"session\",\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}".into(),
        1 => "\u{feff}{\"type\":\"session\",\"version\":3,\"id\":\"s\"}".into(),
        2 => "{\"type\":\"message\",\"id\":\"h\"}".into(),
        _ => format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"{TS}\",\"cwd\":\"/w\"}}"
        ),
    }
}

/// One entry line (without terminator). `ids` are the ids so far; `calls` the tool call ids.
fn entry(src: &mut impl Source, n: usize, ids: &[String], calls: &mut Vec<String>) -> String {
    let id = if !ids.is_empty() && src.below(300) == 0 {
        ids[src.below(ids.len())].clone()
    } else {
        format!("e{n}")
    };
    let parent = match src.below(20) {
        0 => Value::Null,
        1 => json!("missing"),
        2 => json!(id),
        3 => json!(format!("e{}", n + 1 + src.below(3))),
        4 => json!(7),
        5 if !ids.is_empty() => json!(ids[src.below(ids.len())]),
        _ => ids.last().map_or(Value::Null, |p| json!(p)),
    };
    let mut v = json!({"type": "message", "id": id, "parentId": parent, "timestamp": TS});
    let msg =
        |role: &str, content: Value| json!({"role": role, "content": content, "timestamp": n});
    match src.below(16) {
        0 | 1 => v["message"] = msg("user", json!(format!("ask {n}"))),
        2 => {
            v["message"] = msg(
                "user",
                json!([{"type": "text", "text": "look"}, {"type": "image", "data": "QUFB", "mimeType": "image/png"}]),
            )
        }
        3 | 4 => v["message"] = msg("assistant", json!([{"type": "text", "text": "NO_REPLY"}])),
        5 => {
            v["message"] = msg(
                "assistant",
                json!([{"type": "text", "text": format!("answer {n}")}]),
            )
        }
        6 => {
            let c = format!("t{n}");
            calls.push(c.clone());
            v["message"] = msg(
                "assistant",
                json!([{"type": "toolCall", "id": c, "name": "read", "arguments": {}}]),
            );
            if src.chance(20) {
                v["message"]["stopReason"] = json!("aborted");
            }
        }
        7 | 8 => {
            let call = if !calls.is_empty() && src.chance(85) {
                calls[src.below(calls.len())].clone()
            } else {
                "nope".into()
            };
            let mut m = msg("toolResult", json!([{"type": "text", "text": "out"}]));
            if src.chance(30) {
                m["content"] = json!([{"type": "image", "data": "QkJC", "mimeType": "image/png"}]);
            }
            m["toolCallId"] = json!(call);
            v["message"] = m;
        }
        9 => {
            v["type"] = json!("compaction");
            let fk = if ids.is_empty() {
                "x".into()
            } else {
                ids[src.below(ids.len())].clone()
            };
            v["firstKeptEntryId"] = json!(fk);
            v["summary"] = json!("summary");
            v["tokensBefore"] = json!(100);
        }
        10 => {
            v["type"] = json!("label");
            let t = if ids.is_empty() {
                "x".into()
            } else {
                ids[src.below(ids.len())].clone()
            };
            v["targetId"] = json!(t);
            v["label"] = json!("l");
        }
        11 => {
            v["type"] = json!("branch_summary");
            v["summary"] = json!(if src.chance(50) { "went elsewhere" } else { "" });
            v["fromId"] = json!("x");
        }
        12 => {
            v["type"] = json!("custom_message");
            v["customType"] = json!("note");
            v["content"] = json!("c");
            v["display"] = json!(true);
        }
        13 => {
            v["type"] = json!("mystery");
            v["payload"] = json!({"big": 12345678901234567890u64, "f": 1.5e300});
        }
        14 => {
            v["type"] = json!(if src.chance(10) { "leaf" } else { "custom" });
            v["customType"] = json!("x");
            v["targetId"] = json!(ids.last().cloned().unwrap_or_default());
        }
        _ => {
            v["type"] = json!("model_change");
            v["provider"] = json!("p");
            v["modelId"] = json!("m");
        }
    }
    v.to_string()
}

/// A transcript: the header, up to `max` entries, and decorations.
pub fn transcript(src: &mut impl Source, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(header(src).as_bytes());
    out.push(b'\n');
    let n = src.below(max + 1);
    let mut ids: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    for i in 0..n {
        match src.below(40) {
            0 => out.extend_from_slice(b"\n"),
            1 => out.extend_from_slice(b"{\"type\":\"message\",\"id\":\"gar\n"),
            2 if !ids.is_empty() => {
                let id = &ids[src.below(ids.len())];
                out.extend_from_slice(
                    format!("{{\"type\":\"custom\",\"id\":\"u{i}\",\"parentId\":\"{id}\",\"d\":\"\\udc00\"}}\n")
                        .as_bytes(),
                );
            }
            3 => out.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"bad\xff\xfe\"}\n"),
            4 => out.extend_from_slice(
                format!("{{\"type\":\"message\",\"id\":\"r{i}\"}}\n").as_bytes(),
            ),
            _ => {}
        }
        let line = entry(src, i, &ids, &mut calls);
        if let Some(id) = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_owned))
        {
            ids.push(id);
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(if src.chance(5) { b"\r\n" } else { b"\n" });
    }
    match src.below(10) {
        0 => out.extend_from_slice(b"{\"type\":\"message\",\"id\":\"torn\",\"par"),
        1 => {
            out.pop();
        }
        _ => {}
    }
    out
}

/// Removal candidates in `index` (entries with ids, not the header).
pub fn removable(index: &Index) -> Vec<usize> {
    (0..index.entries.len())
        .filter(|&i| {
            let e = &index.entries[i];
            e.id.is_some() && e.kind != EntryType::Session
        })
        .collect()
}

/// What happened to one edit.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The file is not one the tool edits (no header, duplicate ids), or has leaf records.
    NotEditable,
    /// `resolve` refused the edits.
    Refused,
    /// The validator rejected the rewrite.
    Rejected(String),
    /// Accepted and independently re-checked.
    Accepted,
}

/// Whether the tool would edit this file at all (the gate of `transcript::job`), and whether
/// the independent checker below can follow it: it does not model `leaf` records, so files
/// with them are left to `tests/cli/leafrec.rs`, which checks them against the runtime.
pub fn editable(index: &Index, tree: &Tree) -> bool {
    index
        .header()
        .is_some_and(|h| h.version().is_some_and(|v| v >= 2))
        && tree.duplicate_ids.is_empty()
        && !index.entries.iter().any(|e| e.kind == EntryType::Leaf)
}

/// Run `edits` on `text` through resolve → apply → validate, and re-check what is accepted.
pub fn check_edits(text: &[u8], index: &Index, tree: &Tree, edits: &Edits) -> Verdict {
    if !editable(index, tree) {
        return Verdict::NotEditable;
    }
    let Ok(resolved) = rewrite::resolve(index, tree, edits.clone()) else {
        return Verdict::Refused;
    };
    let mut out = Vec::new();
    let applied =
        rewrite::apply(text, index, &resolved, &mut out).expect("apply on unchanged bytes");
    assert_eq!(applied.bytes_written, out.len() as u64);
    let expect = Expectation::removals(resolved.removed_ids.clone());
    if let Err(e) = validate::validate(index, &applied.index, &expect) {
        return Verdict::Rejected(e.0);
    }
    // The index built while writing is the index of the bytes written.
    let fresh = Index::from_reader(&out[..]).unwrap();
    assert_eq!(fresh.size, applied.index.size);
    assert_eq!(fresh.lines.len(), applied.index.lines.len());
    // Untouched lines are byte-identical and in order; removed lines are gone.
    let mut kept_raw = Vec::new();
    for (n, line) in index.lines.iter().enumerate() {
        let raw = &text[line.start as usize..(line.start + line.len) as usize];
        match &resolved.actions[n] {
            LineAction::Keep => kept_raw.push(raw.to_vec()),
            LineAction::Drop => {}
            LineAction::Patch(_) => kept_raw.push(Vec::new()),
        }
    }
    assert_eq!(kept_raw.len(), fresh.lines.len());
    for (k, line) in fresh.lines.iter().enumerate() {
        let raw = &out[line.start as usize..(line.start + line.len) as usize];
        if !kept_raw[k].is_empty() {
            assert_eq!(raw, &kept_raw[k][..], "untouched line changed");
        }
    }
    let removed = &resolved.removed_ids;
    let old_ctx: Vec<String> = independent_context(text)
        .into_iter()
        .filter(|id| !removed.contains(id.trim_start_matches("summary:")))
        .collect();
    assert_eq!(
        independent_context(&out),
        old_ctx,
        "context is not the old one minus the removed entries"
    );
    Verdict::Accepted
}

/// The context ids as the runtime rebuilds it, computed from `serde_json` values only
/// (a compaction's summary appears as `summary:<id>`).
pub fn independent_context(text: &[u8]) -> Vec<String> {
    struct E {
        id: String,
        /// The parent the runtime links the entry to.
        parent: Option<String>,
        /// The `parentId` as written (what its first-kept searches follow).
        written: Option<String>,
        /// Whether the entry has a string or null `parentId`.
        names_parent: bool,
        kind: String,
        first_kept: Option<String>,
        contributes: bool,
    }
    const INDEXED: [&str; 9] = [
        "message",
        "custom_message",
        "compaction",
        "branch_summary",
        "model_change",
        "thinking_level_change",
        "label",
        "session_info",
        "custom",
    ];
    let mut entries: Vec<E> = Vec::new();
    // The runtime hangs an indexed entry below its leaf so far when it has no `parentId` field,
    // or when its `parentId` names the last line an append would hang below (the leaf, or an
    // unknown entry that names a parent) while that is not the leaf.
    let mut last_indexed: Option<String> = None;
    let mut append_parent: Option<String> = None;
    for (n, raw) in text.split(|&b| b == b'\n').enumerate() {
        if n == 0 {
            continue;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if has_lone_surrogate(raw) {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(raw) else {
            continue;
        };
        let Some(id) = v["id"].as_str().filter(|s| !s.is_empty()) else {
            continue;
        };
        let kind = v["type"].as_str().unwrap_or("").to_owned();
        if kind == "session" {
            continue;
        }
        let contributes = match kind.as_str() {
            "message" | "custom_message" => true,
            "branch_summary" => v["summary"].as_str().is_some_and(|s| !s.is_empty()),
            _ => false,
        };
        let indexed = INDEXED.contains(&kind.as_str());
        let parent = match v.get("parentId") {
            None if indexed => last_indexed.clone(),
            Some(Value::String(p))
                if indexed
                    && append_parent.as_ref() == Some(p)
                    && last_indexed.as_ref() != Some(p) =>
            {
                last_indexed.clone()
            }
            p => p.and_then(Value::as_str).map(str::to_owned),
        };
        if indexed {
            last_indexed = Some(id.to_owned());
            append_parent = Some(id.to_owned());
        } else if kind != "leaf"
            && v.get("parentId")
                .is_some_and(|p| p.is_null() || p.is_string())
        {
            append_parent = Some(id.to_owned());
        }
        entries.push(E {
            id: id.to_owned(),
            parent,
            written: v["parentId"].as_str().map(str::to_owned),
            names_parent: v
                .get("parentId")
                .is_some_and(|p| p.is_null() || p.is_string()),
            first_kept: v["firstKeptEntryId"].as_str().map(str::to_owned),
            kind,
            contributes,
        });
    }
    let by_id: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .rev()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let Some(leaf) = entries
        .iter()
        .rposition(|e| INDEXED.contains(&e.kind.as_str()))
    else {
        return Vec::new();
    };
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = Some(leaf);
    while let Some(c) = cur {
        if !seen.insert(c) {
            break;
        }
        path.push(c);
        cur = entries[c]
            .parent
            .as_deref()
            .and_then(|p| by_id.get(p).copied());
    }
    path.reverse();
    let mut out = Vec::new();
    match path.iter().rposition(|&i| entries[i].kind == "compaction") {
        None => out.extend(
            path.iter()
                .filter(|&&i| entries[i].contributes)
                .map(|&i| entries[i].id.clone()),
        ),
        Some(cpos) => {
            let c = &entries[path[cpos]];
            out.push(format!("summary:{}", c.id));
            // A first-kept id naming an entry the runtime does not index stands for its
            // nearest indexed ancestor (`SessionManager.resolveCanonicalParentId`).
            let mut first_kept = c
                .first_kept
                .as_deref()
                .and_then(|id| by_id.get(id).copied());
            let mut seen = HashSet::new();
            while let Some(k) = first_kept.filter(|&k| !INDEXED.contains(&entries[k].kind.as_str()))
            {
                first_kept = if seen.insert(k) {
                    entries[k]
                        .parent
                        .as_deref()
                        .and_then(|p| by_id.get(p).copied())
                } else {
                    None
                };
            }
            // Without an indexed ancestor, an unknown entry stands for the indexed entry just
            // below it on the compaction's branch, else the first indexed entry of the file
            // below it through unindexed entries, else the compaction's parent
            // (`SessionManager.normalizeEntryParent`); the searches below it follow the
            // `parentId`s as written. An unknown entry that names no parent is not substituted:
            // its id then names nothing on the path.
            let start = c
                .first_kept
                .as_deref()
                .and_then(|id| by_id.get(id).copied());
            if let Some(start) = start.filter(|&s| {
                first_kept.is_none() && entries[s].kind != "leaf" && entries[s].names_parent
            }) {
                let linked = |i: usize| {
                    entries[i]
                        .parent
                        .as_deref()
                        .and_then(|p| by_id.get(p).copied())
                };
                let parent_of = |i: usize| {
                    entries[i]
                        .written
                        .as_deref()
                        .and_then(|p| by_id.get(p).copied())
                };
                let indexed = |i: usize| INDEXED.contains(&entries[i].kind.as_str());
                let on_branch = || {
                    let (mut below, mut seen) = (None, HashSet::new());
                    let mut cur = linked(path[cpos]);
                    while let Some(i) = cur.filter(|&i| seen.insert(i)) {
                        if i == start {
                            return below;
                        }
                        below = if indexed(i) { Some(i) } else { below };
                        cur = parent_of(i);
                    }
                    None
                };
                let anywhere = || {
                    (0..entries.len()).filter(|&i| indexed(i)).find(|&i| {
                        let mut seen = HashSet::new();
                        let mut p = parent_of(i);
                        while let Some(q) = p.filter(|&q| !indexed(q) && seen.insert(q)) {
                            if q == start {
                                return true;
                            }
                            p = parent_of(q);
                        }
                        false
                    })
                };
                let own_parent = || {
                    let mut seen = HashSet::new();
                    let mut p = linked(path[cpos]);
                    while let Some(q) = p.filter(|&q| !indexed(q) && seen.insert(q)) {
                        p = parent_of(q);
                    }
                    p.filter(|&q| indexed(q))
                };
                first_kept = on_branch().or_else(anywhere).or_else(own_parent);
            }
            let mut found = false;
            for &i in &path[..cpos] {
                if Some(i) == first_kept {
                    found = true;
                }
                if found && entries[i].contributes {
                    out.push(entries[i].id.clone());
                }
            }
            out.extend(
                path[cpos + 1..]
                    .iter()
                    .filter(|&&i| entries[i].contributes)
                    .map(|&i| entries[i].id.clone()),
            );
        }
    }
    out
}

fn has_lone_surrogate(raw: &[u8]) -> bool {
    raw.windows(4).any(|w| w == b"\\udc" || w == b"\\ud8")
}

/// Random removals drawn from the candidates.
pub fn random_removals(src: &mut impl Source, index: &Index) -> BTreeSet<usize> {
    let cands = removable(index);
    let mut set = BTreeSet::new();
    let k = src.below(4) + 1;
    for _ in 0..k {
        if !cands.is_empty() {
            set.insert(cands[src.below(cands.len())]);
        }
    }
    set
}

/// The line kinds are consistent with the bytes (index invariants).
pub fn check_index(text: &[u8], index: &Index) {
    assert_eq!(index.size, text.len() as u64);
    let mut pos = 0u64;
    for (n, line) in index.lines.iter().enumerate() {
        assert_eq!(line.start, pos);
        let raw = &text[line.start as usize..(line.start + line.len) as usize];
        assert_eq!(line.terminated, raw.last() == Some(&b'\n'));
        if n + 1 < index.lines.len() {
            assert!(line.terminated, "only the last line may lack a newline");
        }
        if line.kind == LineKind::Entry {
            assert_eq!(index.entries[line.entry().unwrap()].line(), n);
        }
        pos += line.len;
    }
    assert_eq!(pos, index.size);
}
