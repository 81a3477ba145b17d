//! Offline compaction without a model: token estimates, the cut point, the deterministic
//! summary, and the entries the runtime reads back (the appended `compaction` entry and the
//! successor transcript). The modules work on already-parsed entries and messages
//! (`serde_json::Value`, in the shapes the runtime's session layer uses) and leave locking and
//! writing to the command layer, with two exceptions: [`load_active_context`] reads a
//! transcript's active branch through the transcript engine, and [`rotate`] writes the
//! successor file through `fsutil`. [`external`] runs the operator's summariser.
//!
//! For other commands: [`Estimator`] (the runtime's token estimate, or BPE) with
//! [`load_active_context`] gives a transcript's context size, e.g.
//! `Estimator::new(TokenCounter::Heuristic).context_tokens(&context).tokens`.

pub mod classify;
pub mod cut;
pub mod entry;
pub mod estimate;
pub mod external;
pub mod fileops;
pub mod plan;
pub mod rotate;
pub mod successor;
pub mod summary;

#[cfg(test)]
mod testgen;

pub use estimate::{ContextEstimate, Estimator, TokenCounter};

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::transcript::tree::{self, ContextItem, Tree};
use crate::transcript::{Index, values};

/// Read a transcript's active path (entry values, root first) and the context the runtime
/// would build from it (messages in its shapes), e.g. for
/// `Estimator::context_tokens(&context)`. Fails when the path does not reach a root (its
/// first entry names a parent that is not an entry here: a missing line, or one only the
/// runtime can parse), since the runtime's context may then differ from ours.
pub fn load_active_context(
    path: &Path,
    index: &Index,
    tree: &Tree,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let active = tree.active_path();
    ensure_rooted(index, &active)?;
    let path_values = values::read_entries(path, index, &active)?;
    let context = context_of(index, tree, &active, &path_values);
    Ok((path_values, context))
}

/// The active path must start at a root: a first entry with a `parentId` names a line this
/// tool could not read (or one that is missing).
pub fn ensure_rooted(index: &Index, active: &[usize]) -> Result<()> {
    if let Some(&first) = active.first()
        && let Some(parent) = index.entries[first].parent.id()
    {
        anyhow::bail!(
            "the active branch runs through parent {parent}, which is missing or on a line this tool cannot parse; not compacting"
        );
    }
    Ok(())
}

/// The context messages of `active` (entry indices of `index`, root first), given the values
/// of those entries in the same order.
pub fn context_of(
    index: &Index,
    tree: &Tree,
    active: &[usize],
    path_values: &[Value],
) -> Vec<Value> {
    let pos: HashMap<usize, usize> = active.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    tree::context_of(index, tree, active)
        .into_iter()
        .filter_map(|item| {
            let i = match item {
                ContextItem::CompactionSummary(i) | ContextItem::Entry(i) => i,
            };
            context_message(&path_values[pos[&i]]).map(|c| c.into_owned())
        })
        .collect()
}

/// `entry.type`, when it is a string.
pub fn entry_type(entry: &Value) -> Option<&str> {
    str_field(entry, "type")
}

/// A string field of a JSON object.
pub fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Whether the runtime puts something in the model context for this entry (ignoring
/// compaction windows): `message`, `custom_message`, or a `branch_summary` with a summary.
pub fn is_context_entry(entry: &Value) -> bool {
    match entry_type(entry) {
        Some("message") => entry.get("message").is_some(),
        Some("custom_message") => true,
        Some("branch_summary") => entry.get("summary").is_some_and(is_truthy_str),
        _ => false,
    }
}

fn is_truthy_str(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.is_empty(),
        Value::Null | Value::Bool(false) => false,
        _ => true,
    }
}

/// The context message the runtime makes of one entry, for estimating and classifying:
/// a `message` entry's message; `custom_message` as a `custom` role message; a `branch_summary`
/// as `branchSummary`; a `compaction` as `compactionSummary`. Entry timestamps are passed
/// through as they are (the runtime converts them to milliseconds). `None` for entries that
/// put nothing in context.
pub fn context_message(entry: &Value) -> Option<Cow<'_, Value>> {
    match entry_type(entry)? {
        "message" => entry.get("message").map(Cow::Borrowed),
        "custom_message" => Some(Cow::Owned(json!({
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content"),
            "display": entry.get("display"),
            "details": entry.get("details"),
            "timestamp": entry.get("timestamp"),
        }))),
        "branch_summary" if is_context_entry(entry) => Some(Cow::Owned(json!({
            "role": "branchSummary",
            "summary": entry.get("summary"),
            "fromId": entry.get("fromId"),
            "timestamp": entry.get("timestamp"),
        }))),
        "compaction" => Some(Cow::Owned(json!({
            "role": "compactionSummary",
            "summary": entry.get("summary"),
            "tokensBefore": entry.get("tokensBefore"),
            "timestamp": entry.get("timestamp"),
        }))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#;

    fn index(lines: &[&str]) -> (Index, Tree) {
        let text = std::iter::once(H)
            .chain(lines.iter().copied())
            .collect::<Vec<_>>()
            .join("\n");
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        (index, tree)
    }

    #[test]
    fn a_branch_through_an_unreadable_line_is_not_rooted() {
        let a = r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}"#;
        let bad = r#"{"type":"custom","id":"u","parentId":"a","timestamp":"t","data":"\ud800"}"#;
        let b = r#"{"type":"message","id":"b","parentId":"u","timestamp":"t","message":{"role":"user","content":"y"}}"#;
        let (i, t) = index(&[a, b]);
        ensure_rooted(&i, &t.active_path()).unwrap_err();
        let (i, t) = index(&[a, bad, b]);
        assert!(ensure_rooted(&i, &t.active_path()).is_err());
        let ok = r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"user","content":"y"}}"#;
        let (i, t) = index(&[a, ok]);
        ensure_rooted(&i, &t.active_path()).unwrap();
    }

    #[test]
    fn context_messages_follow_the_rebuilt_context() {
        let a = r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}"#;
        let c = r#"{"type":"compaction","id":"c","parentId":"a","timestamp":"t","summary":"S","firstKeptEntryId":"a","tokensBefore":1}"#;
        let m = r#"{"type":"custom_message","id":"m","parentId":"c","timestamp":"t","customType":"k","content":"note","display":true}"#;
        let (i, t) = index(&[a, c, m]);
        let active = t.active_path();
        let values: Vec<Value> = [a, c, m]
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ctx = context_of(&i, &t, &active, &values);
        let roles: Vec<&str> = ctx.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, vec!["compactionSummary", "user", "custom"]);
    }
}
