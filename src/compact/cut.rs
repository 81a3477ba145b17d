//! Where to cut: which entry of the active path becomes `firstKeptEntryId`.
//!
//! The runtime's `findCutPoint` walks the effective context backwards, adds message estimates
//! until `keepRecentTokens` is reached, and may cut at any user, assistant, custom or summary
//! message (splitting a turn). Offline there is no model to summarise a split turn's prefix,
//! so this cut is stricter:
//!
//! - the window is the effective context: from the previous compaction's `firstKeptEntryId`
//!   (when it lies on the path before that compaction) or else right after the compaction, to
//!   the leaf; compaction entries themselves never count;
//! - walking back from the leaf, every context entry's estimate is added (messages,
//!   `custom_message`, non-empty `branch_summary`), and the cut is the **last user message at
//!   or before** the entry where the total first reaches the budget, so at least the budget
//!   is kept;
//! - a cut that would separate an assistant's tool calls (of a turn that did not end in
//!   `error`/`aborted`) from one of their results moves back to the user message before that
//!   assistant;
//! - there must be something new to summarise before the cut, and the leaf must not already
//!   be a compaction (the runtime refuses to compact twice in a row, and so does this).

use serde_json::Value;

use super::estimate::Estimator;
use super::facts::{CallIds, EntryFacts, ValueCalls};
use super::{entry_type, str_field};
use crate::transcript::TOOL_CALL_TYPES;
use crate::transcript::probe::TOOL_RESULT_ID_KEYS;

/// Why no cut was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The path has no entries.
    Empty,
    /// The leaf is already a compaction: nothing was added since the last one.
    LeafIsCompaction,
    /// The whole effective context fits in the keep-recent budget.
    FitsBudget { context_tokens: u64 },
    /// No user message before the budget point leaves anything to summarise.
    NoTurnStart,
}

/// A chosen cut on the active path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Index (on the path) of the first entry of the effective context.
    pub window_start: usize,
    /// Index of the latest compaction on the path, if any.
    pub previous_compaction: Option<usize>,
    /// Index of the first kept entry: a user message.
    pub index: usize,
    /// Its id, the new `firstKeptEntryId`.
    pub first_kept_id: String,
    /// Estimated tokens of the context entries kept verbatim.
    pub kept_tokens: u64,
    /// Estimated tokens of the context entries summarised (previous summary not included).
    pub summarized_tokens: u64,
}

impl Cut {
    /// Path positions of the context entries that get summarised, in path order.
    pub fn summarized_positions<'a>(
        &self,
        facts: &'a [EntryFacts],
    ) -> impl Iterator<Item = usize> + 'a {
        (self.window_start..self.index).filter(move |&i| facts[i].context)
    }
}

/// The figures of a path of entry values (for callers that hold the values).
pub fn facts_of(path: &[Value], estimator: &Estimator) -> Vec<EntryFacts> {
    path.iter().map(|e| EntryFacts::of(e, estimator)).collect()
}

/// Find the latest compaction on `path` and where the effective context starts.
pub fn window(path: &[Value]) -> (Option<usize>, usize) {
    let facts = facts_of(path, &Estimator::default());
    window_of(&facts, &|p| str_field(&path[p], "id").unwrap_or_default())
}

/// [`window`] over figures; `id` gives the id of the entry at a path position.
pub fn window_of<'a>(
    facts: &[EntryFacts],
    id: &dyn Fn(usize) -> &'a str,
) -> (Option<usize>, usize) {
    let prev = facts.iter().rposition(|f| f.compaction);
    let start = match prev {
        None => 0,
        Some(c) => facts[c]
            .first_kept
            .as_deref()
            .and_then(|first_kept| (0..c).find(|&p| id(p) == first_kept))
            .unwrap_or(c + 1),
    };
    (prev, start)
}

/// Choose the cut that keeps at least `keep_recent_tokens` of the newest context.
pub fn find_cut(
    path: &[Value],
    estimator: &Estimator,
    keep_recent_tokens: u64,
) -> Result<Cut, Skip> {
    let facts = facts_of(path, estimator);
    find_cut_in(
        &facts,
        &ValueCalls(path),
        &|p| str_field(&path[p], "id").unwrap_or_default(),
        keep_recent_tokens,
    )
}

/// [`find_cut`] over figures; `id` gives the id of the entry at a path position.
pub fn find_cut_in<'a>(
    facts: &[EntryFacts],
    calls: &dyn CallIds,
    id: &dyn Fn(usize) -> &'a str,
    keep_recent_tokens: u64,
) -> Result<Cut, Skip> {
    let Some(last) = facts.last() else {
        return Err(Skip::Empty);
    };
    if last.compaction {
        return Err(Skip::LeafIsCompaction);
    }
    let (prev, start) = window_of(facts, id);
    // The previous compaction's summary is not kept (it is folded into the new one).
    let tokens = |i: usize| {
        if i < start || !facts[i].context {
            0
        } else {
            facts[i].tokens
        }
    };
    let mut acc = 0u64;
    let mut budget_at = None;
    for i in (start..facts.len()).rev() {
        if !facts[i].context {
            continue;
        }
        acc += tokens(i);
        if acc >= keep_recent_tokens {
            budget_at = Some(i);
            break;
        }
    }
    let Some(budget_at) = budget_at else {
        return Err(Skip::FitsBudget {
            context_tokens: acc,
        });
    };
    let mut cut = last_user_at_or_before(facts, start, budget_at).ok_or(Skip::NoTurnStart)?;
    // Never separate tool calls from their results.
    while let Some(call_at) = call_split_by(calls, start, cut, facts.len()) {
        cut = last_user_at_or_before(facts, start, call_at).ok_or(Skip::NoTurnStart)?;
    }
    if !(start..cut).any(|i| facts[i].context) {
        return Err(Skip::NoTurnStart);
    }
    let kept_tokens = (cut..facts.len()).map(tokens).sum();
    let summarized_tokens = (start..cut).map(tokens).sum();
    Ok(Cut {
        window_start: start,
        previous_compaction: prev,
        index: cut,
        first_kept_id: id(cut).to_owned(),
        kept_tokens,
        summarized_tokens,
    })
}

fn last_user_at_or_before(facts: &[EntryFacts], start: usize, at: usize) -> Option<usize> {
    (start..=at).rev().find(|&i| facts[i].user_turn)
}

/// Index of an assistant before `cut` with a tool result at or after `cut` (of `len`), if
/// any.
fn call_split_by(calls: &dyn CallIds, start: usize, cut: usize, len: usize) -> Option<usize> {
    let kept_results: std::collections::HashSet<&str> =
        (cut..len).filter_map(|p| calls.result_call(p)).collect();
    if kept_results.is_empty() {
        return None;
    }
    (start..cut).rev().find(|&i| {
        calls
            .open_calls(i)
            .iter()
            .any(|id| kept_results.contains(id))
    })
}

/// A user message entry with an id: a turn start.
pub fn is_user_message(entry: &Value) -> bool {
    entry_type(entry) == Some("message")
        && entry.get("message").and_then(|m| str_field(m, "role")) == Some("user")
        && str_field(entry, "id").is_some_and(|id| !id.is_empty())
}

/// Call ids of an assistant message entry whose turn holds its results open.
pub fn open_call_ids(entry: &Value) -> Vec<&str> {
    let Some(m) = entry
        .get("message")
        .filter(|_| entry_type(entry) == Some("message"))
    else {
        return Vec::new();
    };
    if str_field(m, "role") != Some("assistant")
        || matches!(str_field(m, "stopReason"), Some("error" | "aborted"))
    {
        return Vec::new();
    }
    m.get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| str_field(*b, "type").is_some_and(|t| TOOL_CALL_TYPES.contains(&t)))
                .filter_map(|b| str_field(b, "id"))
                .collect()
        })
        .unwrap_or_default()
}

/// The call id a tool result message entry answers.
pub fn result_call_id(entry: &Value) -> Option<&str> {
    let m = entry
        .get("message")
        .filter(|_| entry_type(entry) == Some("message"))?;
    if str_field(m, "role") != Some("toolResult") {
        return None;
    }
    TOOL_RESULT_ID_KEYS.iter().find_map(|f| str_field(m, f))
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
