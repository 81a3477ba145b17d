//! Offline compaction without a model: token estimates, the cut point, the deterministic
//! summary, and the entries the runtime reads back (the appended `compaction` entry and the
//! successor transcript).
//!
//! Memory is bounded by the largest line plus a few bytes per entry, whatever the file size:
//! a transcript is never held in memory. The index pass, built measuring with the estimator's
//! counter, records every entry's token estimate and usage; [`facts::scan`] takes the active
//! path's figures from it (token estimate, usage, turn starts, …; tool call ids come from the
//! index too); [`plan::decide`] chooses the cut from them; [`load::compaction`] summarises the
//! decided range in one pass over just those lines, one entry at a time
//! ([`summary::SummaryBuilder`]); [`load::write_request`] streams the `--summarizer` input;
//! the successor is planned per entry index ([`successor_plan::build`]) and written by re-reading
//! its lines one at a time ([`rotate`]). The value-level functions ([`plan::plan`],
//! [`summary::build`], [`cut::find_cut`]) run the same steps on entries already in memory.
//!
//! Locking and writing stay with the command layer, except [`rotate`], which writes the
//! successor file through `fsutil`. [`external`] runs the operator's summariser.
//!
//! For other commands: [`context_estimate`] gives a transcript's context size as the runtime
//! estimates it ([`Estimator`]: the runtime's heuristic, or BPE) from an index measured with
//! the estimator's counter, e.g.
//! `compact::context_estimate(&index, &tree, &estimator)?.tokens` with
//! `index = Index::from_reader_measuring(file, Some(estimator.counter()))?`.

pub mod classify;
pub mod cut;
pub mod entry;
pub mod external;
pub mod facts;
pub mod fileops;
pub mod load;
pub mod plan;
pub mod pruned;
pub mod rotate;
pub mod successor_plan;
pub mod summary;
mod summary_build;
mod summary_text;
pub mod view;

#[cfg(test)]
pub(crate) mod testgen;

pub use crate::transcript::estimate::{self, ContextEstimate, Estimator, TokenCounter};
pub use facts::context_estimate;

use std::borrow::Cow;
use std::collections::HashMap;

use anyhow::Result;
use serde_json::{Value, json};

use crate::transcript::Index;
use crate::transcript::tree::{self, Tree};
use view::View;

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
    tree::context_iter(index, tree, active)
        .filter_map(|item| context_message(&path_values[pos[&item.at()]]).map(|c| c.into_owned()))
        .collect()
}

/// `entry.type`, when it is a string.
pub fn entry_type<N: View>(entry: &N) -> Option<&str> {
    str_field(entry, "type")
}

/// A string field of a JSON object.
pub fn str_field<'a, N: View>(v: &'a N, key: &str) -> Option<&'a str> {
    v.field(key).and_then(View::as_str)
}

/// Whether the runtime puts something in the model context for this entry (ignoring
/// compaction windows): `message`, `custom_message`, or a `branch_summary` with a summary.
pub fn is_context_entry(entry: &Value) -> bool {
    match entry_type(entry) {
        Some("message") => entry.field("message").is_some(),
        Some("custom_message") => true,
        Some("branch_summary") => entry.field("summary").is_some_and(is_truthy_str),
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
        "message" => entry.field("message").map(Cow::Borrowed),
        "custom_message" => Some(Cow::Owned(json!({
            "role": "custom",
            "customType": entry.field("customType"),
            "content": entry.field("content"),
            "display": entry.field("display"),
            "details": entry.field("details"),
            "timestamp": entry.field("timestamp"),
        }))),
        "branch_summary" if is_context_entry(entry) => Some(Cow::Owned(json!({
            "role": "branchSummary",
            "summary": entry.field("summary"),
            "fromId": entry.field("fromId"),
            "timestamp": entry.field("timestamp"),
        }))),
        "compaction" => Some(Cow::Owned(json!({
            "role": "compactionSummary",
            "summary": entry.field("summary"),
            "tokensBefore": entry.field("tokensBefore"),
            "timestamp": entry.field("timestamp"),
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
