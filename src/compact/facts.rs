//! What compaction needs to know of each entry of the active path, from the transcript index.
//!
//! The index pass measures every entry's token estimate and provider usage as it parses the
//! line (`transcript::probe`, when the index is built measuring with the estimator's counter);
//! [`scan`] takes the active path's figures from there ([`EntryFacts`]) and rebuilds the
//! context's estimate from them, so no line is read again. Memory is a few words per path
//! entry.
//!
//! [`context_estimate`] gives the runtime's context-token estimate of a transcript the same
//! way; [`EntryFacts::of`] gives the figures of an entry held as a value (the same probe run
//! over the value).

use anyhow::{Result, bail};
use serde_json::Value;

use super::estimate::{ContextEstimate, Estimator, combine};
use crate::transcript::tree::{self, ContextItem, Tree};
use crate::transcript::{Entry, EntryTokens, EntryType, Index, Role};

/// The figures of one path entry (the pass keeps one per path entry: 40 bytes, the rare
/// `first_kept` boxed behind a thin pointer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryFacts {
    /// Estimated tokens of its context message (for a compaction: of its summary message);
    /// 0 when it has none.
    pub tokens: u64,
    /// The provider's context size when it is an assistant message with usable `usage`.
    pub usage: Option<u64>,
    /// A compaction's `firstKeptEntryId`, when it is a string.
    pub first_kept: Option<Box<String>>,
    /// It puts a message in context (`message`, `custom_message`, `branch_summary` with a
    /// summary).
    pub context: bool,
    /// A `compaction` entry.
    pub compaction: bool,
    /// A user message with an id: a turn start the cut may choose.
    pub user_turn: bool,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<EntryFacts>() == 40);

impl EntryFacts {
    /// The figures of an indexed entry and its token figures.
    pub fn from_index(e: &Entry, t: EntryTokens) -> EntryFacts {
        let compaction = e.kind == EntryType::Compaction;
        EntryFacts {
            tokens: t.tokens,
            usage: t.usage,
            first_kept: compaction
                .then(|| e.first_kept().map(|k| Box::new(k.to_owned())))
                .flatten(),
            context: e.context(),
            compaction,
            user_turn: e.is_role(&Role::User) && e.id.is_some(),
        }
    }

    /// The figures of one entry held as a value.
    pub fn of(entry: &Value, estimator: &Estimator) -> EntryFacts {
        crate::transcript::entry_of_value(entry, estimator.counter())
            .map(|(e, t)| EntryFacts::from_index(&e, t))
            .unwrap_or_default()
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
        super::cut::open_call_ids(&self.0[p])
    }
    fn result_call(&self, p: usize) -> Option<&str> {
        super::cut::result_call_id(&self.0[p])
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
        if !e.is_role(&Role::Assistant) || e.error_or_aborted() {
            return Vec::new();
        }
        e.tool_calls().iter().filter_map(|c| c.as_deref()).collect()
    }
    fn result_call(&self, p: usize) -> Option<&str> {
        let e = &self.index.entries[self.active[p]];
        e.is_role(&Role::ToolResult)
            .then_some(e.tool_result_id())
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

/// The token figures of entry `i`; an error when the index was not measured with the
/// estimator's counter.
fn tokens(index: &Index, estimator: &Estimator, i: usize) -> Result<EntryTokens> {
    match (index.measured_with, index.tokens_of(i)) {
        (Some(c), Some(t)) if c == estimator.counter() => Ok(t),
        (c, _) => bail!(
            "the transcript index carries no token figures measured with {} (it has {:?})",
            estimator.counter().name(),
            c.map(|c| c.name())
        ),
    }
}

/// The active path's figures from a measured index. Fails when the path does not reach a
/// root (see [`super::ensure_rooted`]) or the index was not measured with the estimator's
/// counter.
pub fn scan(index: &Index, tree: &Tree, estimator: &Estimator) -> Result<Scan> {
    let active = tree.active_path();
    super::ensure_rooted(index, &active)?;
    let facts = active
        .iter()
        .map(|&i| {
            let mut f = EntryFacts::from_index(&index.entries[i], tokens(index, estimator, i)?);
            // A compaction keeps from the entry its `firstKeptEntryId` effectively names (an
            // id of a line the runtime does not index stands for an indexed entry).
            if f.compaction {
                f.first_kept = tree::effective_first_kept(index, tree, i)
                    .and_then(|k| index.entries[k].id.as_deref())
                    .map(|k| Box::new(k.to_owned()));
            }
            Ok(f)
        })
        .collect::<Result<Vec<_>>>()?;
    // The context as the runtime rebuilds it; entries that turn out to hold no message are
    // left out, as the runtime's context has none for them. Its estimate: the last usable
    // usage plus the messages after it, else the sum of all (`estimate::combine`).
    let (estimate, context_len) = context_figures(index, tree, &active, estimator)?;
    Ok(Scan {
        context_tokens: estimate.tokens,
        context_len,
        active,
        facts,
    })
}

/// The estimate of the context's messages (each one's estimate and usage, in context order,
/// combined as they come), and how many there are.
fn context_figures(
    index: &Index,
    tree: &Tree,
    active: &[usize],
    estimator: &Estimator,
) -> Result<(ContextEstimate, usize)> {
    let mut failed = None;
    let mut count = 0;
    let figures = tree::context_iter(index, tree, active)
        .filter_map(|item| match item {
            ContextItem::CompactionSummary(_) => Some(item.at()),
            ContextItem::Entry(_) if index.entries[item.at()].context() => Some(item.at()),
            ContextItem::Entry(_) => None,
        })
        .map_while(|i| match tokens(index, estimator, i) {
            Ok(t) => {
                count += 1;
                Some((t.tokens, t.usage))
            }
            Err(e) => {
                failed = Some(e);
                None
            }
        });
    let estimate = combine(figures);
    match failed {
        Some(e) => Err(e),
        None => Ok((estimate, count)),
    }
}

/// The runtime's context-token estimate of a transcript (as `Estimator::context_tokens` of
/// its context), from a measured index. `last_usage_index` is the position, among the rebuilt
/// context's messages, of the one whose usage was taken. Fails like [`scan`].
pub fn context_estimate(
    index: &Index,
    tree: &Tree,
    estimator: &Estimator,
) -> Result<ContextEstimate> {
    let active = tree.active_path();
    super::ensure_rooted(index, &active)?;
    Ok(context_figures(index, tree, &active, estimator)?.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::compact::TokenCounter;
    use crate::compact::testgen::{PathBuilder, Rng};
    use crate::jsjson;

    /// A transcript file of `entries` (a linear path) and its index (measured with
    /// `counter`) and tree.
    fn file(
        entries: &[Value],
        counter: TokenCounter,
    ) -> (tempfile::TempDir, std::path::PathBuf, Index, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let mut text =
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned();
        for e in entries {
            text.push('\n');
            text.push_str(&jsjson::to_string_compact(e));
        }
        text.push('\n');
        std::fs::write(&p, &text).unwrap();
        let index = Index::from_reader_measuring(text.as_bytes(), Some(counter)).unwrap();
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
            let (_d, _p, index, tree) = file(&entries, TokenCounter::Heuristic);
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
        for counter in [TokenCounter::Heuristic, TokenCounter::O200k]
            .into_iter()
            .filter(|c| c.is_available())
        {
            let est = Estimator::new(counter);
            for entries in &cases {
                let (_d, p, index, tree) = file(entries, counter);
                let scan = scan(&index, &tree, &est).unwrap();
                assert_eq!(scan.active.len(), entries.len());
                assert_eq!(scan.facts, crate::compact::cut::facts_of(entries, &est));
                // The context as Values, the way the runtime rebuilds it.
                let values =
                    crate::transcript::values::read_entries(&p, &index, &scan.active).unwrap();
                let context = crate::compact::context_of(&index, &tree, &scan.active, &values);
                let want = est.context_tokens(&context);
                assert_eq!(scan.context_tokens, want.tokens);
                assert_eq!(scan.context_len, context.len());
                let got = context_estimate(&index, &tree, &est).unwrap();
                assert_eq!(got, want);
                // An index measured with another counter, or not at all, is refused.
                let other = Index::from_reader(std::fs::read(&p).unwrap().as_slice()).unwrap();
                assert!(super::scan(&other, &tree, &est).is_err());
            }
        }
    }
}
