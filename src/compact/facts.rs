//! What compaction needs to know of each entry of the active path, read in one streaming pass.
//!
//! [`scan`] reads the active path's lines one at a time (by the byte ranges of the index, see
//! `transcript::values::EntryReader`), parses each, keeps the few figures the cut and the
//! estimate need ([`EntryFacts`]) and drops the entry before reading the next. Memory is
//! bounded by the largest line plus these per-entry figures, never by the file. A caller that
//! needs more of each entry (the successor rotation) gets every parsed entry through a visitor.
//!
//! [`context_estimate`] gives the runtime's context-token estimate of a transcript the same
//! way, reading only the context messages it needs (from the newest back to the last one with
//! usable provider `usage`).

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use super::estimate::{self, ContextEstimate, Estimator};
use super::{context_message, cut, entry_type, is_context_entry, pruned, str_field};
use crate::transcript::tree::{self, ContextItem, Tree};
use crate::transcript::values::EntryReader;
use crate::transcript::{Index, Role};

/// The figures of one path entry (48 bytes: the pass keeps one per path entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryFacts {
    /// Estimated tokens of its context message (for a compaction: of its summary message);
    /// 0 when it has none.
    pub tokens: u64,
    /// The provider's context size when it is an assistant message with usable `usage`.
    pub usage: Option<u64>,
    /// A compaction's `firstKeptEntryId`, when it is a string.
    pub first_kept: Option<Box<str>>,
    /// It puts a message in context (`message`, `custom_message`, `branch_summary` with a
    /// summary).
    pub context: bool,
    /// A `compaction` entry.
    pub compaction: bool,
    /// A user message with an id: a turn start the cut may choose.
    pub user_turn: bool,
    /// A user message that can frame the session (real, not a heartbeat or exec event).
    pub framing: bool,
}

impl EntryFacts {
    /// The figures of one entry.
    pub fn of(entry: &Value, estimator: &Estimator) -> EntryFacts {
        let message = context_message(entry);
        let message_of_entry = entry
            .get("message")
            .filter(|_| entry_type(entry) == Some("message"));
        let compaction = entry_type(entry) == Some("compaction");
        EntryFacts {
            tokens: message
                .as_deref()
                .map_or(0, |m| estimator.message_tokens(m)),
            usage: message.as_deref().and_then(estimate::message_usage),
            first_kept: compaction
                .then(|| str_field(entry, "firstKeptEntryId").map(Box::from))
                .flatten(),
            context: is_context_entry(entry),
            compaction,
            user_turn: cut::is_user_message(entry),
            framing: message_of_entry.is_some_and(super::plan::is_framing_candidate),
        }
    }
}

/// The tool call ids of path entries, which the cut needs to keep calls with their results.
pub trait CallIds {
    /// The call ids an assistant at path position `p` holds open (not an `error`/`aborted`
    /// turn; blocks of every tool-call type with a string id).
    fn open_calls(&self, p: usize) -> Vec<&str>;
    /// The call id a tool result at `p` answers.
    fn result_call(&self, p: usize) -> Option<&str>;
}

/// [`CallIds`] of entry values.
pub struct ValueCalls<'a>(pub &'a [Value]);

impl CallIds for ValueCalls<'_> {
    fn open_calls(&self, p: usize) -> Vec<&str> {
        cut::open_call_ids(&self.0[p])
    }
    fn result_call(&self, p: usize) -> Option<&str> {
        cut::result_call_id(&self.0[p])
    }
}

/// [`CallIds`] of a file's active path, from its index (which records the same ids).
pub struct IndexCalls<'a> {
    pub index: &'a Index,
    pub active: &'a [usize],
}

impl CallIds for IndexCalls<'_> {
    fn open_calls(&self, p: usize) -> Vec<&str> {
        let e = &self.index.entries[self.active[p]];
        if !e.is_role(&Role::Assistant) || e.error_or_aborted {
            return Vec::new();
        }
        e.tool_calls.iter().filter_map(|c| c.as_deref()).collect()
    }
    fn result_call(&self, p: usize) -> Option<&str> {
        let e = &self.index.entries[self.active[p]];
        e.is_role(&Role::ToolResult)
            .then_some(e.tool_result_id.as_deref())
            .flatten()
    }
}

/// The active path of a transcript with the figures of each entry.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Entry indices of the active path, root first.
    pub active: Vec<usize>,
    /// The figures of each, in the same order.
    pub facts: Vec<EntryFacts>,
    /// The runtime's context-token estimate of the context.
    pub context_tokens: u64,
    /// How many messages that context has.
    pub context_len: usize,
}

impl Scan {
    /// The id of the entry at path position `p`.
    pub fn id<'a>(&self, index: &'a Index, p: usize) -> &'a str {
        index.entries[self.active[p]]
            .id
            .as_deref()
            .unwrap_or_default()
    }
}

/// Read the active path once. `visit` sees every parsed entry with its path position. Fails
/// when the path does not reach a root (see [`super::ensure_rooted`]) or a line no longer
/// holds the indexed entry.
pub fn scan(
    path: &Path,
    index: &Index,
    tree: &Tree,
    estimator: &Estimator,
    visit: &mut dyn FnMut(usize, &Value),
) -> Result<Scan> {
    scan_with(path, index, tree, estimator, &crate::jsjson::parse, visit)
}

/// [`scan`] without a visitor: each entry is parsed with only the members its figures are
/// computed from (`pruned::FACTS`), the rest of the line skipped without being built.
pub fn scan_facts(path: &Path, index: &Index, tree: &Tree, estimator: &Estimator) -> Result<Scan> {
    scan_with(path, index, tree, estimator, &parse_facts, &mut |_, _| {})
}

fn parse_facts(bytes: &[u8]) -> serde_json::Result<Value> {
    pruned::parse(bytes, &pruned::FACTS)
}

fn scan_with(
    path: &Path,
    index: &Index,
    tree: &Tree,
    estimator: &Estimator,
    parse: &dyn Fn(&[u8]) -> serde_json::Result<Value>,
    visit: &mut dyn FnMut(usize, &Value),
) -> Result<Scan> {
    let active = tree.active_path();
    super::ensure_rooted(index, &active)?;
    let mut reader = EntryReader::open_light(path)?;
    let mut facts = Vec::with_capacity(active.len());
    for (p, &i) in active.iter().enumerate() {
        let v = reader.read_with(index, i, parse)?;
        facts.push(EntryFacts::of(&v, estimator));
        visit(p, &v);
    }
    let mut pos = vec![u32::MAX; index.entries.len()];
    for (p, &i) in active.iter().enumerate() {
        pos[i] = p as u32;
    }
    // The context as the runtime rebuilds it; entries that turn out to hold no message are
    // left out, as the runtime's context has none for them. Its estimate: the last usable
    // usage plus the messages after it, else the sum of all (`estimate::combine`).
    let (mut total, mut usage, mut trailing, mut context_len) = (0u64, None, 0u64, 0usize);
    for item in tree::context_of(index, tree, &active) {
        let f = match item {
            ContextItem::CompactionSummary(i) => &facts[pos[i] as usize],
            ContextItem::Entry(i) => &facts[pos[i] as usize],
        };
        if matches!(item, ContextItem::Entry(_)) && !f.context {
            continue;
        }
        context_len += 1;
        total += f.tokens;
        match f.usage {
            Some(u) => (usage, trailing) = (Some(u), 0),
            None => trailing += f.tokens,
        }
    }
    Ok(Scan {
        active,
        facts,
        context_tokens: usage.map_or(total, |u| u + trailing),
        context_len,
    })
}

/// The runtime's context-token estimate of a transcript (as `Estimator::context_tokens` of
/// its context), in memory bounded by the largest line: the context messages are read from
/// the newest back to the last one with usable provider `usage`, and no further.
/// `last_usage_index` is that message's position among the rebuilt context's items. Fails
/// like [`scan`].
pub fn context_estimate(
    path: &Path,
    index: &Index,
    tree: &Tree,
    estimator: &Estimator,
) -> Result<ContextEstimate> {
    let active = tree.active_path();
    super::ensure_rooted(index, &active)?;
    let items = tree::context_of(index, tree, &active);
    let mut reader = EntryReader::open_light(path)?;
    let mut trailing = 0;
    for (k, item) in items.iter().enumerate().rev() {
        let i = match *item {
            ContextItem::CompactionSummary(i) | ContextItem::Entry(i) => i,
        };
        let v = reader.read_with(index, i, parse_facts)?;
        let Some(m) = context_message(&v) else {
            continue;
        };
        if let Some(usage_tokens) = estimate::message_usage(&m) {
            return Ok(ContextEstimate {
                tokens: usage_tokens + trailing,
                usage_tokens,
                trailing_tokens: trailing,
                last_usage_index: Some(k),
            });
        }
        trailing += estimator.message_tokens(&m);
    }
    Ok(ContextEstimate {
        tokens: trailing,
        usage_tokens: 0,
        trailing_tokens: trailing,
        last_usage_index: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::compact::TokenCounter;
    use crate::compact::testgen::{PathBuilder, Rng};
    use crate::jsjson;

    /// A transcript file of `entries` (a linear path) and its index and tree.
    fn file(entries: &[Value]) -> (tempfile::TempDir, std::path::PathBuf, Index, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let mut text =
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned();
        for e in entries {
            text.push('\n');
            text.push_str(&jsjson::to_string_compact(e));
        }
        text.push('\n');
        std::fs::write(&p, text).unwrap();
        let index = Index::from_path(&p, None).unwrap();
        let tree = Tree::build(&index);
        (dir, p, index, tree)
    }

    fn odd_entries() -> Vec<Value> {
        let mut b = PathBuilder::default();
        b.user("start");
        b.message(json!({"role":"assistant","content":[
            {"type":"toolCall","id":"c1"},{"type":"tool_use","id":"c2"},{"type":"functionCall"},
            {"type":"toolUse","id":7},{"type":"text","text":"x"}],"stopReason":"toolUse",
            "usage":{"totalTokens":50}}));
        b.message(json!({"role":"assistant","content":[{"type":"toolCall","id":"c3"}],"stopReason":"error"}));
        b.message(json!({"role":"toolResult","toolUseId":"c2","toolCallId":5,"content":"r"}));
        b.message(json!({"role":"toolResult","call_id":"c1","tool_call_id":"c9","content":[]}));
        b.message(json!({"role":"toolResult","content":[]}));
        b.push("message", json!({"message":"not an object"}));
        b.push("custom_message", json!({"customType":"k","content":"note"}));
        b.push("branch_summary", json!({"summary":""}));
        b.message(json!({"role":"assistant","content":"plain","usage":{"input":3,"output":4}}));
        b.user("end");
        b.entries
    }

    #[test]
    fn call_ids_from_the_index_match_the_values() {
        let mut rng = Rng::new(5);
        let mut cases = vec![odd_entries()];
        for _ in 0..20 {
            let turns = 1 + rng.below(20) as usize;
            cases.push(PathBuilder::random(&mut rng, turns).entries);
        }
        for entries in cases {
            let (_d, _p, index, tree) = file(&entries);
            let active = tree.active_path();
            assert_eq!(active.len(), entries.len());
            let by_index = IndexCalls {
                index: &index,
                active: &active,
            };
            let by_value = ValueCalls(&entries);
            for (p, e) in entries.iter().enumerate() {
                assert_eq!(by_index.open_calls(p), by_value.open_calls(p), "{e}");
                assert_eq!(by_index.result_call(p), by_value.result_call(p), "{e}");
            }
        }
    }

    #[test]
    fn the_scan_and_the_estimate_match_the_values() {
        let mut rng = Rng::new(9);
        let mut cases = vec![odd_entries()];
        for _ in 0..20 {
            let turns = 1 + rng.below(20) as usize;
            let mut b = PathBuilder::random(&mut rng, turns);
            if rng.chance(50) {
                let keep = b.entries[b.entries.len() / 2]["id"].clone();
                b.push(
                    "compaction",
                    json!({"summary":"earlier","firstKeptEntryId":keep,"tokensBefore":5}),
                );
                b.user("after");
                b.assistant_text("reply");
            }
            cases.push(b.entries);
        }
        for counter in [TokenCounter::Heuristic, TokenCounter::O200k] {
            let est = Estimator::new(counter);
            for entries in &cases {
                let (_d, p, index, tree) = file(entries);
                let mut seen = 0;
                let scan = scan(&p, &index, &tree, &est, &mut |_, _| seen += 1).unwrap();
                assert_eq!(seen, entries.len());
                let light = scan_facts(&p, &index, &tree, &est).unwrap();
                assert_eq!(light.facts, scan.facts);
                assert_eq!(light.active, scan.active);
                assert_eq!(
                    (light.context_tokens, light.context_len),
                    (scan.context_tokens, scan.context_len)
                );
                assert_eq!(scan.facts, crate::compact::cut::facts_of(entries, &est));
                // The context as Values, the way the runtime rebuilds it.
                let values =
                    crate::transcript::values::read_entries(&p, &index, &scan.active).unwrap();
                let context = crate::compact::context_of(&index, &tree, &scan.active, &values);
                let want = est.context_tokens(&context);
                assert_eq!(scan.context_tokens, want.tokens);
                assert_eq!(scan.context_len, context.len());
                let got = context_estimate(&p, &index, &tree, &est).unwrap();
                assert_eq!(
                    (got.tokens, got.usage_tokens, got.trailing_tokens),
                    (want.tokens, want.usage_tokens, want.trailing_tokens)
                );
            }
        }
    }
}
