//! The successor transcript that OpenClaw writes after a compaction when
//! `truncateAfterCompaction` is on (`compaction-successor-transcript.ts`), ported entry for
//! entry so the result is what the runtime itself would have written:
//!
//! - on the active path before the latest compaction C, entries before `C.firstKeptEntryId`
//!   are "summarised"; summarised `message` entries go, except the last summarised assistant
//!   message and its tool results before the first kept entry, and C's `firstKeptEntryId` moves
//!   back to that assistant (unless C is a hardened boundary);
//! - also removed: `custom_message`/`branch_summary` entries of the summarised range after that
//!   assistant, superseded `model_change`/`thinking_level_change`/`session_info` entries before
//!   C (the latest of each stays), repeated long user prompts (≥ 24 characters, within 60 s,
//!   counted separately before and after C), and labels of removed entries;
//! - kept entries are re-parented to their nearest kept ancestor; kept pre-compaction assistant
//!   messages lose their thinking signatures;
//! - order: depth first from the roots, siblings off the active path first, so the old leaf is
//!   the last line.
//!
//! Differences: the runtime compares duplicate prompts after Unicode NFC normalisation; this
//! port compares them as written.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::{entry_type, str_field};

const DUPLICATE_WINDOW_MS: f64 = 60_000.0;
const MIN_DUPLICATE_CHARS: usize = 24;

/// One line of the successor, in output order.
#[derive(Debug, Clone, PartialEq)]
pub struct SuccessorEntry {
    /// Index of the entry in the original file's entries.
    pub original: usize,
    /// The rewritten entry, or `None` when the original line is copied as it is.
    pub changed: Option<Value>,
}

/// The successor's header (`buildSuccessorHeader`).
pub fn header(session_id: &str, timestamp: &str, cwd: &str, parent_session: &str) -> Value {
    json!({"type": "session", "version": 3, "id": session_id, "timestamp": timestamp,
        "cwd": cwd, "parentSession": parent_session})
}

/// The successor's file name (`resolveSuccessorSessionFile`): `<ISO with : and . as ->_<id>.jsonl`.
pub fn file_name(timestamp: &str, session_id: &str) -> String {
    format!("{}_{session_id}.jsonl", timestamp.replace([':', '.'], "-"))
}

fn id(e: &Value) -> &str {
    str_field(e, "id").unwrap_or("")
}

fn role(e: &Value) -> Option<&str> {
    (entry_type(e) == Some("message"))
        .then(|| e.get("message").and_then(|m| str_field(m, "role")))?
}

/// Build the successor entries. `all` are the file's entries (header excluded) in file order;
/// `branch` holds indices into `all` of the active path, root first, ending at the leaf.
/// `None` when the path has no compaction.
pub fn build(all: &[Value], branch: &[usize]) -> Option<Vec<SuccessorEntry>> {
    let path: Vec<&Value> = branch.iter().map(|&i| &all[i]).collect();
    let c_at = path
        .iter()
        .rposition(|e| entry_type(e) == Some("compaction"))?;
    let compaction = path[c_at];
    let first_kept = str_field(compaction, "firstKeptEntryId").filter(|s| !s.is_empty());
    let mut summarized = HashSet::new();
    let mut pre_kept = HashSet::new();
    let mut found = false;
    for e in &path[..c_at] {
        if first_kept == Some(id(e)) {
            found = true;
        }
        if found {
            pre_kept.insert(id(e))
        } else {
            summarized.insert(id(e))
        };
    }
    let hardened = first_kept == Some(id(compaction));
    let preserved_at: Option<usize> = if hardened {
        None
    } else {
        (0..c_at)
            .rev()
            .find(|&i| summarized.contains(id(path[i])) && role(path[i]) == Some("assistant"))
    };
    let first_kept_at = first_kept.and_then(|f| path.iter().position(|e| id(e) == f));
    let branch_index: HashMap<&str, usize> =
        path.iter().enumerate().map(|(i, e)| (id(e), i)).collect();
    let mut preserved = HashSet::new();
    if let Some(a) = preserved_at {
        preserved.insert(id(path[a]));
        let calls: HashSet<&str> = path[a]["message"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| str_field(b, "type") == Some("toolCall"))
            .filter_map(|b| str_field(b, "id"))
            .collect();
        if let Some(fk) = first_kept_at {
            for e in &path[a + 1..fk.max(a + 1)] {
                if role(e) == Some("toolResult")
                    && e["message"]
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .is_some_and(|c| calls.contains(c))
                {
                    preserved.insert(id(e));
                }
            }
        }
    }
    let before_c = &path[..c_at];
    let mut latest_state: HashMap<&str, &str> = HashMap::new();
    for e in before_c.iter().filter(|e| is_state(e)) {
        latest_state.insert(entry_type(e).unwrap_or(""), id(e));
    }
    let stale: HashSet<&str> = before_c
        .iter()
        .filter(|e| is_state(e) && latest_state.get(entry_type(e).unwrap_or("")) != Some(&id(e)))
        .map(|e| id(e))
        .collect();
    let kept_pre: Vec<&Value> = before_c
        .iter()
        .filter(|e| !summarized.contains(id(e)))
        .copied()
        .collect();
    let post: Vec<&Value> = path[c_at + 1..].to_vec();
    let mut duplicates = duplicate_user_ids(&kept_pre);
    duplicates.extend(duplicate_user_ids(&post));

    let preserved_idx = preserved_at.map_or(-1, |a| a as i64);
    let first_kept_idx = first_kept_at.map_or(-1, |f| f as i64);
    let mut removed: HashSet<&str> = HashSet::new();
    for e in all {
        let bi = branch_index.get(id(e)).map_or(-1, |&i| i as i64);
        let marker = bi > preserved_idx
            && bi < first_kept_idx
            && matches!(entry_type(e), Some("custom_message" | "branch_summary"));
        let s = summarized.contains(id(e));
        if s && entry_type(e) == Some("message") && !preserved.contains(id(e))
            || s && marker
            || stale.contains(id(e))
            || duplicates.contains(id(e))
        {
            removed.insert(id(e));
        }
    }
    pre_kept.extend(preserved.iter().copied());
    for e in all {
        if entry_type(e) == Some("label")
            && str_field(e, "targetId").is_some_and(|t| removed.contains(t))
        {
            removed.insert(id(e));
        }
    }
    let by_id: HashMap<&str, &Value> = all.iter().map(|e| (id(e), e)).collect();
    let preserved_id = preserved_at.map(|a| id(path[a]));
    let mut kept: Vec<(usize, Value, bool)> = Vec::new();
    for (i, e) in all.iter().enumerate() {
        if removed.contains(id(e)) {
            continue;
        }
        let mut parent = e.get("parentId").and_then(Value::as_str);
        while let Some(p) = parent.filter(|p| removed.contains(p)) {
            parent = by_id
                .get(p)
                .and_then(|pe| pe.get("parentId"))
                .and_then(Value::as_str);
        }
        let mut v = e.clone();
        let mut changed = false;
        if parent != e.get("parentId").and_then(Value::as_str) {
            v["parentId"] = parent.map_or(Value::Null, |p| json!(p));
            changed = true;
        }
        if entry_type(e) == Some("message")
            && pre_kept.contains(id(e))
            && strip_signatures(&mut v["message"])
        {
            changed = true;
        }
        if entry_type(e) == Some("compaction")
            && id(e) == id(compaction)
            && str_field(e, "firstKeptEntryId") != Some(id(e))
            && let Some(p) = preserved_id
        {
            v["firstKeptEntryId"] = json!(p);
            changed = true;
        }
        kept.push((i, v, changed));
    }
    let active: HashSet<&str> = path.iter().map(|e| id(e)).collect();
    Some(order(kept, &active))
}

fn is_state(e: &Value) -> bool {
    matches!(
        entry_type(e),
        Some("model_change" | "thinking_level_change" | "session_info")
    )
}

/// `stripThinkingSignaturesFromMessage`, in place; true when something was removed.
fn strip_signatures(message: &mut Value) -> bool {
    if str_field(message, "role") != Some("assistant") {
        return false;
    }
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for b in blocks.iter_mut() {
        let kind = str_field(b, "type");
        if !matches!(kind, Some("thinking" | "redacted_thinking")) {
            continue;
        }
        let redacted = kind == Some("redacted_thinking");
        let Some(map) = b.as_object_mut() else {
            continue;
        };
        let has = |m: &Map<String, Value>, k: &str| m.get(k).is_some_and(|v| !v.is_null());
        if !(has(map, "thinkingSignature")
            || has(map, "signature")
            || has(map, "thought_signature")
            || redacted && has(map, "data"))
        {
            continue;
        }
        let signature = |k: &str| {
            matches!(k, "thinkingSignature" | "signature" | "thought_signature")
                || redacted && k == "data"
        };
        map.retain(|k, _| !signature(k));
        changed = true;
    }
    changed
}

/// Normalised text of a user message for duplicate detection, `None` if it has images or
/// non-object blocks.
fn duplicate_text(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for b in blocks {
                if !b.is_object() || str_field(b, "type") == Some("image") {
                    return None;
                }
                if str_field(b, "type") == Some("text")
                    && let Some(t) = str_field(b, "text")
                {
                    parts.push(t);
                }
            }
            parts.join("\n")
        }
        _ => return None,
    };
    Some(super::classify::collapse_space(&text))
}

/// `collectDuplicateUserMessageEntryIdsForCompaction`.
fn duplicate_user_ids<'a>(entries: &[&'a Value]) -> HashSet<&'a str> {
    let mut last_seen: HashMap<String, f64> = HashMap::new();
    let mut out = HashSet::new();
    for e in entries {
        if entry_type(e) != Some("message") {
            continue;
        }
        let m = &e["message"];
        if str_field(m, "role") != Some("user") {
            continue;
        }
        let Some(ts) = m.get("timestamp").and_then(Value::as_f64) else {
            continue;
        };
        let Some(text) = m.get("content").and_then(duplicate_text) else {
            continue;
        };
        if text.encode_utf16().count() < MIN_DUPLICATE_CHARS {
            continue;
        }
        let sender = m
            .get("__openclaw")
            .and_then(|o| str_field(o, "senderId"))
            .unwrap_or("");
        let key = format!("{sender}\u{0}{}", text.to_lowercase());
        if let Some(prev) = last_seen.insert(key, ts)
            && ts - prev <= DUPLICATE_WINDOW_MS
        {
            out.insert(id(e));
        }
    }
    out
}

/// `orderSuccessorEntries`: depth first, active-path children last.
fn order(kept: Vec<(usize, Value, bool)>, active: &HashSet<&str>) -> Vec<SuccessorEntry> {
    let ids: HashSet<String> = kept.iter().map(|(_, v, _)| id(v).to_owned()).collect();
    let mut children: HashMap<Option<String>, Vec<usize>> = HashMap::new();
    let mut entries: Vec<(usize, Value, bool)> = Vec::with_capacity(kept.len());
    for (orig, mut v, mut changed) in kept {
        let parent = v.get("parentId").and_then(Value::as_str).map(str::to_owned);
        let parent = parent.filter(|p| ids.contains(p));
        if parent.is_none() && !v.get("parentId").is_none_or(Value::is_null) {
            v["parentId"] = Value::Null;
            changed = true;
        }
        children.entry(parent).or_default().push(entries.len());
        entries.push((orig, v, changed));
    }
    let sort_key = |k: &usize| (active.contains(id(&entries[*k].1)), entries[*k].0);
    for list in children.values_mut() {
        list.sort_by_key(sort_key);
    }
    let mut emitted = vec![false; entries.len()];
    let mut out = Vec::with_capacity(entries.len());
    let mut all_sorted: Vec<usize> = (0..entries.len()).collect();
    all_sorted.sort_by_key(sort_key);
    let roots = children.get(&None).cloned().unwrap_or_default();
    for start in roots.into_iter().chain(all_sorted) {
        let mut stack = vec![start];
        while let Some(k) = stack.pop() {
            if emitted[k] {
                continue;
            }
            emitted[k] = true;
            let (orig, v, changed) = &entries[k];
            out.push(SuccessorEntry {
                original: *orig,
                changed: changed.then(|| v.clone()),
            });
            if let Some(kids) = children.get(&Some(id(v).to_owned())) {
                stack.extend(kids.iter().rev());
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "successor_tests.rs"]
mod tests;
