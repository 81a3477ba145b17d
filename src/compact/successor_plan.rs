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
//! - lines the rotation's reader sets aside (unknown types, labels of a later entry) are not
//!   carried, and a compaction whose `firstKeptEntryId` names one gets the id the reader
//!   repairs it to (`repairEntryLinks`: the entry that line hangs below, else the first entry
//!   below it on the compaction's branch, else the first below it in the file, else the
//!   compaction's parent), for the latest compaction before its range is decided;
//! - order: depth first from the roots, siblings off the active path first, so the old leaf is
//!   the last line.
//!
//! Differences: the runtime compares duplicate prompts after Unicode NFC normalisation; this
//! port compares them as written. An entry without a `parentId` field hangs, when read, below
//! the entry before it; the runtime's rotation can write such an entry as a root
//! (`"parentId":null`, ordered first; seen with OpenClaw 2026.7.1 on generated trees), which
//! cuts the successor's context there. This port writes the parent it hangs below instead, so
//! the successor's context is the one the compaction kept.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::{entry_type, str_field};
use crate::transcript::tree::{self, Tree};
use crate::transcript::{EntryType, Index, Parent, Role as TRole};

const DUPLICATE_WINDOW_MS: f64 = 60_000.0;
const MIN_DUPLICATE_CHARS: usize = 24;

/// The successor's header (`buildSuccessorHeader`).
pub fn header(session_id: &str, timestamp: &str, cwd: &str, parent_session: &str) -> Value {
    json!({"type": "session", "version": 3, "id": session_id, "timestamp": timestamp,
        "cwd": cwd, "parentSession": parent_session})
}

/// The successor's file name (`resolveSuccessorSessionFile`): `<ISO with : and . as ->_<id>.jsonl`.
pub fn file_name(timestamp: &str, session_id: &str) -> String {
    format!("{}_{session_id}.jsonl", timestamp.replace([':', '.'], "-"))
}

/// What the rotation needs of an active-path entry's value beyond the index (read only for
/// the few entries it asks about).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathEntry {
    /// Ids of the `toolCall` blocks of an assistant message.
    pub tool_calls: Box<[Box<str>]>,
    /// A tool result's `toolCallId`.
    pub tool_call_id: Option<Box<str>>,
    /// A user message's repeat key: its numeric timestamp and a digest of the sender and the
    /// normalised text (`None` when it cannot be a repeat: no timestamp, images, short).
    pub repeat_key: Option<RepeatKey>,
}

/// A user message's numeric timestamp and the digest of its sender and normalised text.
pub type RepeatKey = (f64, Box<str>);

impl PathEntry {
    /// The figures of one entry value.
    pub fn of(e: &Value) -> PathEntry {
        if entry_type(e) != Some("message") {
            return PathEntry::default();
        }
        let Some(m) = e.get("message") else {
            return PathEntry::default();
        };
        let role = str_field(m, "role");
        let tool_calls = match role {
            Some("assistant") => m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|b| str_field(b, "type") == Some("toolCall"))
                .filter_map(|b| str_field(b, "id"))
                .map(Box::from)
                .collect(),
            _ => Box::default(),
        };
        let tool_call_id = (role == Some("toolResult"))
            .then(|| m.get("toolCallId").and_then(Value::as_str).map(Box::from))
            .flatten();
        let repeat_key = (role == Some("user")).then(|| repeat_key(m)).flatten();
        PathEntry {
            tool_calls,
            tool_call_id,
            repeat_key,
        }
    }
}

/// A user message's key for `collectDuplicateUserMessageEntryIdsForCompaction`.
fn repeat_key(m: &Value) -> Option<RepeatKey> {
    let ts = m.get("timestamp").and_then(Value::as_f64)?;
    let text = m.get("content").and_then(duplicate_text)?;
    if text.encode_utf16().count() < MIN_DUPLICATE_CHARS {
        return None;
    }
    let sender = m
        .get("__openclaw")
        .and_then(|o| str_field(o, "senderId"))
        .unwrap_or("");
    let key = format!("{sender}\u{0}{}", text.to_lowercase());
    Some((ts, crate::store::blobs::sha256_hex(key.as_bytes()).into()))
}

/// How one kept entry is written into the successor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// Entry index (in the index the plan was made from).
    pub original: usize,
    /// An absent `parentId` the runtime reads as this entry: written explicitly, since the
    /// successor's order differs.
    pub fill_parent: Option<String>,
    /// Re-parented to its nearest kept ancestor (`None`: null).
    pub rewire: Option<Option<String>>,
    /// Thinking signatures of a kept pre-compaction assistant message are stripped.
    pub strip_signatures: bool,
    /// The compaction's `firstKeptEntryId` moves back to the preserved assistant.
    pub first_kept: Option<String>,
    /// Its parent is not in the successor: `parentId` becomes null.
    pub null_parent: bool,
}

impl Rewrite {
    /// The line's value in the successor: `v` (the entry as read) with this rewrite applied,
    /// exactly as the runtime's rotation edits it.
    pub fn apply(&self, mut v: Value) -> Value {
        if let Some(p) = &self.fill_parent
            && v.get("parentId").is_none()
            && let Some(obj) = v.as_object_mut()
        {
            obj.insert("parentId".into(), json!(p));
        }
        let mut out = v.clone();
        let mut changed = false;
        if let Some(p) = &self.rewire {
            out["parentId"] = p.as_ref().map_or(Value::Null, |p| json!(p));
            changed = true;
        }
        if self.strip_signatures && strip_signatures(&mut out["message"]) {
            changed = true;
        }
        if let Some(fk) = &self.first_kept {
            out["firstKeptEntryId"] = json!(fk);
            changed = true;
        }
        if self.null_parent {
            out["parentId"] = Value::Null;
            changed = true;
        }
        if changed { out } else { v }
    }
}

/// Plan the successor. `index` holds the file's entries (and the new compaction, appended);
/// `branch` its active path, root first, ending at the leaf. `detail` gives the
/// [`PathEntry`] of a branch position; it is asked only about the last summarised assistant,
/// the tool results after it and the user messages that stay. `Ok(None)` when the path has no
/// compaction. Sets are kept per entry index, so the plan needs a few bytes per entry.
pub fn build(
    index: &Index,
    tree: &Tree,
    branch: &[usize],
    detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
) -> anyhow::Result<Option<Vec<Rewrite>>> {
    let entries = &index.entries;
    let id = |i: usize| entries[i].id.as_deref().unwrap_or("");
    let node_of = |id: &str| tree.by_id.get(id).copied();
    let accepted = accepted_entries(index, tree);
    // Lines the reader sets aside, by id, once it has read them (see `accepted_entries`).
    let rejected_before = |j: usize, i: usize| j < i && !accepted[j];
    // The `parentId` an entry carries once an absent one is filled in.
    let written_parent = |i: usize| -> Option<&str> {
        match &entries[i].parent {
            Parent::Id(p) => Some(p),
            Parent::Absent => tree.parent(i).map(id),
            _ => None,
        }
    };
    // The entry read before `i` that a line set aside (`j`) hangs below, through the parents
    // those lines name (`resolveRejectedParent`); `None` when there is none.
    let resolve_set_aside = |mut j: usize, i: usize| -> Option<usize> {
        for _ in 0..entries.len() {
            match node_of(entries[j].parent.id()?) {
                Some(k) if rejected_before(k, i) => j = k,
                Some(k) if accepted[k] && k < i => return Some(k),
                _ => return None,
            }
        }
        None
    };
    // ... and once the reader has pointed one that names a line it set aside at the nearest
    // entry it read before, through the parents those lines name (null when there is none).
    let parent_of = |i: usize| -> Option<&str> {
        let written = written_parent(i)?;
        let Some(j) = node_of(written).filter(|&j| rejected_before(j, i)) else {
            return Some(written);
        };
        resolve_set_aside(j, i).map(id)
    };
    // Whether the lines set aside that `e`'s parent chain crosses before reaching an entry
    // read before it (`rejectedParentChain`) include `target`.
    let hangs_below = |e: usize, target: usize| -> bool {
        let mut p = entries[e].parent.id();
        for _ in 0..entries.len() {
            match p.and_then(node_of) {
                Some(k) if rejected_before(k, e) => {
                    if k == target {
                        return true;
                    }
                    p = entries[k].parent.id();
                }
                _ => return false,
            }
        }
        false
    };
    // The `firstKeptEntryId` of compaction `i` as the reader repairs it (`repairEntryLinks`)
    // when it names a line set aside: the entry read before that the line hangs below; else
    // the first entry on the compaction's branch, root first, that hangs below the line; else
    // the first such entry in the file; else the compaction's parent. As written otherwise.
    let first_kept_of = |i: usize| -> Option<&str> {
        let fk = entries[i].first_kept()?;
        let Some(j) = node_of(fk).filter(|&j| rejected_before(j, i)) else {
            return Some(fk);
        };
        let below = |e: usize| {
            accepted[e] && e < i && entries[e].kind != EntryType::Compaction && hangs_below(e, j)
        };
        let parent = parent_of(i);
        let on_branch = || {
            let mut path = Vec::new();
            let mut cur = parent.and_then(node_of).filter(|&k| accepted[k] && k < i);
            while let Some(k) = cur.filter(|k| !path.contains(k)) {
                path.push(k);
                cur = parent_of(k)
                    .and_then(node_of)
                    .filter(|&p| accepted[p] && p < i);
            }
            path.into_iter().rev().find(|&e| below(e))
        };
        resolve_set_aside(j, i)
            .or_else(on_branch)
            .or_else(|| (0..i).find(|&e| below(e)))
            .map(id)
            .or(parent)
            .or(Some(fk))
    };
    let role = |p: usize| {
        let e = &entries[branch[p]];
        (e.kind == EntryType::Message)
            .then_some(e.role.as_ref())
            .flatten()
    };
    let Some(c_at) = branch
        .iter()
        .rposition(|&i| entries[i].kind == EntryType::Compaction)
    else {
        return Ok(None);
    };
    let compaction = branch[c_at];
    let first_kept = first_kept_of(compaction).filter(|s| !s.is_empty());
    let first_kept_at = first_kept.and_then(|f| branch.iter().position(|&i| id(i) == f));
    // Branch positions before this are summarised; from it to the compaction they stay.
    let kept_from = first_kept_at.filter(|&f| f < c_at).unwrap_or(c_at);
    let mut pos = vec![u32::MAX; entries.len()];
    for (p, &i) in branch.iter().enumerate() {
        pos[i] = p as u32;
    }
    let on_branch = |i: usize| (pos[i] != u32::MAX).then_some(pos[i] as usize);
    let summarized = |i: usize| on_branch(i).is_some_and(|p| p < kept_from);
    let hardened = first_kept == Some(id(compaction));
    let preserved_at = if hardened {
        None
    } else {
        (0..kept_from)
            .rev()
            .find(|&p| role(p) == Some(&TRole::Assistant))
    };
    let mut preserved: HashSet<usize> = HashSet::new();
    if let Some(a) = preserved_at {
        preserved.insert(branch[a]);
        let calls = detail(a)?.tool_calls;
        if let Some(fk) = first_kept_at {
            for (p, &i) in branch.iter().enumerate().take(fk).skip(a + 1) {
                if role(p) == Some(&TRole::ToolResult)
                    && detail(p)?
                        .tool_call_id
                        .as_deref()
                        .is_some_and(|c| calls.iter().any(|k| &**k == c))
                {
                    preserved.insert(i);
                }
            }
        }
    }
    let mut latest_state: HashMap<&EntryType, usize> = HashMap::new();
    for &i in branch[..c_at]
        .iter()
        .filter(|&&i| is_state(&entries[i].kind))
    {
        latest_state.insert(&entries[i].kind, i);
    }
    let stale = |i: usize| {
        on_branch(i).is_some_and(|p| p < c_at)
            && is_state(&entries[i].kind)
            && latest_state.get(&entries[i].kind) != Some(&i)
    };
    let mut repeats = |at: std::ops::Range<usize>| -> anyhow::Result<HashSet<usize>> {
        let users: Vec<usize> = at.filter(|&p| role(p) == Some(&TRole::User)).collect();
        let mut keyed = Vec::with_capacity(users.len());
        for p in users {
            keyed.push((branch[p], detail(p)?.repeat_key));
        }
        Ok(duplicate_user_ids(&keyed))
    };
    let mut duplicates = repeats(kept_from..c_at)?;
    duplicates.extend(repeats(c_at + 1..branch.len())?);

    let nodes = (0..entries.len()).filter(|&i| accepted[i]);
    let preserved_idx = preserved_at.map_or(-1, |a| a as i64);
    let first_kept_idx = first_kept_at.map_or(-1, |f| f as i64);
    let mut removed = vec![false; entries.len()];
    for i in nodes.clone() {
        let bi = on_branch(i).map_or(-1, |p| p as i64);
        let kind = &entries[i].kind;
        let marker = bi > preserved_idx
            && bi < first_kept_idx
            && matches!(kind, EntryType::CustomMessage | EntryType::BranchSummary);
        let s = summarized(i);
        removed[i] = s && *kind == EntryType::Message && !preserved.contains(&i)
            || s && marker
            || stale(i)
            || duplicates.contains(&i);
    }
    for i in nodes.clone() {
        if entries[i].kind == EntryType::Label
            && entries[i]
                .target()
                .and_then(node_of)
                .is_some_and(|t| removed[t])
        {
            removed[i] = true;
        }
    }
    let pre_kept = |i: usize| {
        on_branch(i).is_some_and(|p| p >= kept_from && p < c_at) || preserved.contains(&i)
    };
    let preserved_id = preserved_at.map(|a| id(branch[a]));
    let removed_id = |p: &str| node_of(p).is_some_and(|j| removed[j]);
    let mut kept: Vec<(Rewrite, Option<usize>)> = Vec::new();
    for i in nodes {
        if removed[i] {
            continue;
        }
        let original_parent = written_parent(i);
        let mut parent = parent_of(i);
        while let Some(p) = parent.filter(|p| removed_id(p)) {
            parent = node_of(p).and_then(parent_of);
        }
        let mut r = Rewrite {
            original: i,
            fill_parent: match entries[i].parent {
                Parent::Absent => tree.parent(i).map(|p| id(p).to_owned()),
                _ => None,
            },
            ..Rewrite::default()
        };
        // Is the parentId as written so far set to something other than null?
        let mut set_non_null =
            !matches!(entries[i].parent, Parent::Null | Parent::Absent) || r.fill_parent.is_some();
        if parent != original_parent {
            r.rewire = Some(parent.map(str::to_owned));
            set_non_null = parent.is_some();
        }
        r.strip_signatures = entries[i].kind == EntryType::Message && pre_kept(i);
        if entries[i].kind == EntryType::Compaction {
            let repaired = first_kept_of(i);
            if repaired != entries[i].first_kept() {
                r.first_kept = repaired.map(str::to_owned);
            }
            if i == compaction
                && repaired != Some(id(i))
                && let Some(p) = preserved_id
            {
                r.first_kept = Some(p.to_owned());
            }
        }
        let parent = parent
            .and_then(node_of)
            .filter(|&j| accepted[j] && !removed[j]);
        if parent.is_none() && set_non_null {
            r.null_parent = true;
        }
        kept.push((r, parent));
    }
    Ok(Some(order(kept, &|i| on_branch(i).is_some())))
}

/// The entries the runtime's rotation reads (its transcript reader's `readableSessionState`):
/// in file order, the first entry of each id among those it indexes, except labels of an entry
/// not read before them. Every other line with an id (unknown types, leaf records, such
/// labels) is set aside: it is not written to the successor.
fn accepted_entries(index: &Index, tree: &Tree) -> Vec<bool> {
    let entries = &index.entries;
    let mut accepted = vec![false; entries.len()];
    for (i, e) in entries.iter().enumerate() {
        let Some(id) = e.id.as_deref() else {
            continue;
        };
        if !tree::is_node(e) || !e.kind.is_runtime_indexed() || tree.by_id.get(id) != Some(&i) {
            continue;
        }
        accepted[i] = e.kind != EntryType::Label
            || e.target()
                .and_then(|t| tree.by_id.get(t))
                .is_some_and(|&t| t < i && accepted[t]);
    }
    accepted
}

fn is_state(kind: &EntryType) -> bool {
    matches!(
        kind,
        EntryType::ModelChange | EntryType::ThinkingLevelChange | EntryType::SessionInfo
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

/// `collectDuplicateUserMessageEntryIdsForCompaction` over user messages in path order (entry
/// index and repeat key).
fn duplicate_user_ids(users: &[(usize, Option<RepeatKey>)]) -> HashSet<usize> {
    let mut last_seen: HashMap<&str, f64> = HashMap::new();
    let mut out = HashSet::new();
    for (i, key) in users {
        let Some((ts, key)) = key else {
            continue;
        };
        if let Some(prev) = last_seen.insert(key, *ts)
            && ts - prev <= DUPLICATE_WINDOW_MS
        {
            out.insert(*i);
        }
    }
    out
}

/// `orderSuccessorEntries`: depth first, active-path children last. `kept` pairs each
/// rewrite with its parent's entry index in the successor (`None`: a root).
fn order(kept: Vec<(Rewrite, Option<usize>)>, active: &dyn Fn(usize) -> bool) -> Vec<Rewrite> {
    let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    for (k, (_, parent)) in kept.iter().enumerate() {
        children.entry(*parent).or_default().push(k);
    }
    let sort_key = |k: &usize| {
        let i = kept[*k].0.original;
        (active(i), i)
    };
    for list in children.values_mut() {
        list.sort_by_key(sort_key);
    }
    let mut emitted = vec![false; kept.len()];
    let mut out = Vec::with_capacity(kept.len());
    let mut all_sorted: Vec<usize> = (0..kept.len()).collect();
    all_sorted.sort_by_key(sort_key);
    let roots = children.get(&None).cloned().unwrap_or_default();
    for start in roots.into_iter().chain(all_sorted) {
        let mut stack = vec![start];
        while let Some(k) = stack.pop() {
            if emitted[k] {
                continue;
            }
            emitted[k] = true;
            out.push(k);
            if let Some(kids) = children.get(&Some(kept[k].0.original)) {
                stack.extend(kids.iter().rev());
            }
        }
    }
    let mut kept: Vec<Option<Rewrite>> = kept.into_iter().map(|(r, _)| Some(r)).collect();
    out.into_iter()
        .map(|k| kept[k].take().expect("emitted once"))
        .collect()
}

#[cfg(test)]
#[path = "successor_plan_tests.rs"]
mod tests;
