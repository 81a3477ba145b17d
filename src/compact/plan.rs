//! One transcript's compaction decision, from its active path to the entry to append.
//!
//! Two steps around the summary: [`decide`] takes the active path's figures
//! ([`EntryFacts`], root first), the tool call ids and the size of the runtime's context, and
//! either says why the transcript is left alone or returns the cut and `tokensBefore`; once
//! the caller has summarised the decided range, [`finish`] builds the [`Compaction`] with the
//! ready `compaction` entry (a child of the leaf). [`plan`] runs both on entry values held in
//! memory. Reading files, locking and writing stay with the caller.

use serde_json::Value;

use super::classify;
use super::cut::{self, Cut, Skip};
use super::entry::{CompactionEntry, new_entry_id};
use super::estimate::{self, Estimator};
use super::facts::{CallIds, EntryFacts, ValueCalls};
use super::str_field;
use super::summary::{self, Summary, SummaryInput};

/// Name written into summaries and `details.offline`.
pub const TOOL: &str = "clawkeeper";

/// Run-wide settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub estimator: Estimator,
    /// Keep at least this many tokens of the newest context.
    pub keep_recent_tokens: u64,
    /// Leave transcripts whose context estimate is not above this.
    pub min_tokens: u64,
    /// Version written next to [`TOOL`].
    pub version: &'static str,
}

/// A planned compaction.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub cut: Cut,
    /// The context estimate before compacting (`tokensBefore`).
    pub tokens_before: u64,
    pub summary: Summary,
    pub entry: CompactionEntry,
    /// Path positions of the summarised context entries (what `--summarizer` is sent); `u32`,
    /// as they can be most of a long path.
    pub summarized: Vec<u32>,
    /// The previous compaction's summary, if one is folded in.
    pub previous_summary: Option<String>,
}

/// Why a transcript is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    Skip(Skip),
    BelowMinimum {
        tokens: u64,
        min: u64,
    },
    /// The cut's view of the context disagrees with the context as rebuilt (an unusual tree);
    /// nothing is written rather than guessing.
    ContextMismatch,
}

impl std::fmt::Display for Leave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Leave::Skip(Skip::Empty) => write!(f, "no entries on the active path"),
            Leave::Skip(Skip::LeafIsCompaction) => {
                write!(f, "already compacted: the last entry is a compaction")
            }
            Leave::Skip(Skip::FitsBudget { context_tokens }) => write!(
                f,
                "the whole context (~{context_tokens} tokens) fits in the keep-recent budget"
            ),
            Leave::Skip(Skip::NoTurnStart) => write!(
                f,
                "no user message starts a turn early enough to leave anything to summarise"
            ),
            Leave::ContextMismatch => write!(
                f,
                "the transcript's context could not be mapped onto its entries; not compacting"
            ),
            Leave::BelowMinimum { tokens, min } => {
                write!(
                    f,
                    "context ~{tokens} tokens is not above the minimum of {min}"
                )
            }
        }
    }
}

/// The first step: where to cut, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub cut: Cut,
    /// Path positions of the context entries to summarise, in order (see
    /// [`Compaction::summarized`]).
    pub summarized: Vec<u32>,
    pub tokens_before: u64,
}

/// The runtime's context as [`decide`] needs it: its token estimate and how many messages it
/// has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextSize {
    pub tokens: u64,
    pub messages: usize,
}

/// Decide from the path's figures. `calls` gives the tool call ids of path entries and `id`
/// the id of the entry at a path position.
pub fn decide<'a>(
    facts: &[EntryFacts],
    calls: &dyn CallIds,
    context: ContextSize,
    id: &dyn Fn(usize) -> &'a str,
    settings: &Settings,
) -> Result<Decision, Leave> {
    if facts.last().is_some_and(|f| f.compaction) {
        return Err(Leave::Skip(Skip::LeafIsCompaction));
    }
    let tokens_before = context.tokens;
    if tokens_before <= settings.min_tokens {
        return Err(Leave::BelowMinimum {
            tokens: tokens_before,
            min: settings.min_tokens,
        });
    }
    // The cut works on the path; it must see exactly the context the runtime rebuilds.
    let (prev, start) = cut::window_of(facts, id);
    let on_path = facts[start..].iter().filter(|f| f.context).count();
    if on_path + usize::from(prev.is_some()) != context.messages {
        return Err(Leave::ContextMismatch);
    }
    let cut =
        cut::find_cut_in(facts, calls, id, settings.keep_recent_tokens).map_err(Leave::Skip)?;
    Ok(Decision {
        summarized: cut.summarized_positions(facts).map(|p| p as u32).collect(),
        cut,
        tokens_before,
    })
}

/// The second step: the entry to append (a child of `leaf_id`), given the summary of the
/// decided range. `previous` is the previous compaction entry (at the cut's
/// `previous_compaction`), if any; `taken` says whether an id is already used in the file.
pub fn finish(
    decision: Decision,
    summary: Summary,
    previous: Option<&Value>,
    leaf_id: Option<&str>,
    settings: &Settings,
    taken: &dyn Fn(&str) -> bool,
    now: &str,
) -> Compaction {
    let Decision {
        cut,
        summarized,
        tokens_before,
        ..
    } = decision;
    let entry = CompactionEntry {
        id: new_entry_id(taken),
        parent_id: leaf_id.map(str::to_owned),
        timestamp: now.to_owned(),
        summary: summary.text.clone(),
        first_kept_entry_id: cut.first_kept_id.clone(),
        tokens_before,
        details: summary.details(TOOL, settings.version),
    };
    Compaction {
        summarized,
        previous_summary: previous
            .and_then(|p| str_field(p, "summary"))
            .map(str::to_owned),
        cut,
        tokens_before,
        summary,
        entry,
    }
}

/// Decide and summarise a path held as entry values (`context`: the runtime's context
/// messages); what [`decide`], a summary of the range and [`finish`] do for a file.
pub fn plan(
    path: &[Value],
    context: &[Value],
    settings: &Settings,
    taken: &dyn Fn(&str) -> bool,
    now: &str,
) -> Result<Compaction, Leave> {
    let facts = cut::facts_of(path, &settings.estimator);
    let per: Vec<(u64, Option<u64>)> = context
        .iter()
        .map(|m| {
            (
                settings.estimator.message_tokens(m),
                estimate::message_usage(m),
            )
        })
        .collect();
    let id = |p: usize| str_field(&path[p], "id").unwrap_or_default();
    let size = ContextSize {
        tokens: estimate::combine(per.iter().copied()).tokens,
        messages: per.len(),
    };
    let decision = decide(&facts, &ValueCalls(path), size, &id, settings)?;
    let previous = decision.cut.previous_compaction.map(|i| &path[i]);
    let framing_before = first_framing(decision.cut.window_start, |p| {
        Ok::<_, ()>(is_framing_entry(&path[p]))
    })
    .unwrap_or_default();
    let generator = format!("{TOOL} {}", settings.version);
    let summary = summary::build(&SummaryInput {
        entries: decision
            .summarized
            .iter()
            .map(|&i| &path[i as usize])
            .collect(),
        previous,
        framing_before: framing_before.and_then(|p| path[p].get("message")),
        generator: &generator,
        now,
    });
    let leaf_id = path.last().and_then(|e| str_field(e, "id"));
    Ok(finish(
        decision, summary, previous, leaf_id, settings, taken, now,
    ))
}

/// The path position of the session's first framing candidate before the window (which
/// starts at `window_start`), given a test of each position (see [`is_framing_entry`]).
pub fn first_framing<E>(
    window_start: usize,
    mut is_framing: impl FnMut(usize) -> Result<bool, E>,
) -> Result<Option<usize>, E> {
    for p in 0..window_start {
        if is_framing(p)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// A `message` entry whose message is a framing candidate.
pub fn is_framing_entry(entry: &Value) -> bool {
    super::entry_type(entry) == Some("message")
        && entry.get("message").is_some_and(is_framing_candidate)
}

/// A user message that can frame the session: real, not a heartbeat or exec event.
pub fn is_framing_candidate(m: &Value) -> bool {
    str_field(m, "role") == Some("user")
        && !classify::is_heartbeat_prompt(m)
        && !classify::is_exec_event(m)
        && classify::has_meaningful_conversation(m)
        && !crate::js::js_trim(&classify::message_text(m)).is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::compact::TokenCounter;
    use crate::compact::testgen::PathBuilder;

    fn settings(keep: u64, min: u64) -> Settings {
        Settings {
            estimator: Estimator::new(TokenCounter::Heuristic),
            keep_recent_tokens: keep,
            min_tokens: min,
            version: "0.0.0",
        }
    }

    /// The runtime's context of a linear path: the latest compaction's summary, then the
    /// context entries from its window on.
    fn context(path: &[Value]) -> Vec<Value> {
        let (prev, start) = cut::window(path);
        prev.iter()
            .map(|&c| &path[c])
            .chain(
                path[start..]
                    .iter()
                    .filter(|e| crate::compact::is_context_entry(e)),
            )
            .filter_map(|e| crate::compact::context_message(e).map(|c| c.into_owned()))
            .collect()
    }

    #[test]
    fn plans_an_entry_under_the_leaf() {
        let mut b = PathBuilder::default();
        b.user("Write the report on sales");
        b.assistant_text(&"a".repeat(400));
        b.user("and the appendix");
        b.assistant_text(&"b".repeat(400));
        let ctx = context(&b.entries);
        let c = plan(
            &b.entries,
            &ctx,
            &settings(50, 0),
            &|_| false,
            "2026-03-03T00:00:00.000Z",
        )
        .unwrap();
        assert_eq!(c.entry.parent_id.as_deref(), Some("e0004"));
        assert_eq!(c.entry.first_kept_entry_id, "e0003");
        assert_eq!(c.tokens_before, 7 + 100 + 4 + 100);
        assert!(c.entry.summary.contains("> Write the report on sales"));
        assert_eq!(c.summarized.len(), 2);
        let line = c.entry.to_line();
        assert!(line.starts_with(r#"{"type":"compaction","id":""#));
        assert!(!line.contains("fromHook"));
    }

    #[test]
    fn leaves_small_or_compacted_transcripts() {
        let mut b = PathBuilder::default();
        b.user("hi");
        b.assistant_text("hello");
        let ctx = context(&b.entries);
        let r = plan(&b.entries, &ctx, &settings(1, 100), &|_| false, "t");
        assert_eq!(
            r.unwrap_err(),
            Leave::BelowMinimum {
                tokens: 3,
                min: 100
            }
        );
        b.push(
            "compaction",
            json!({"summary":"s","firstKeptEntryId":"e0002","tokensBefore":3}),
        );
        let r = plan(&b.entries, &ctx, &settings(1, 0), &|_| false, "t");
        assert_eq!(r.unwrap_err(), Leave::Skip(Skip::LeafIsCompaction));
    }

    #[test]
    fn framing_request_comes_from_before_the_window() {
        let mut b = PathBuilder::default();
        b.user("Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.");
        b.assistant_text("HEARTBEAT_OK");
        b.user("The original task: migrate the DB");
        b.assistant_text("ok");
        let kept = b.user(&"x".repeat(200));
        b.push(
            "compaction",
            json!({"summary":"model summary","firstKeptEntryId":kept,"tokensBefore":9}),
        );
        b.assistant_text(&"y".repeat(400));
        b.user(&"z".repeat(400));
        b.assistant_text(&"w".repeat(400));
        let ctx = context(&b.entries);
        let c = plan(&b.entries, &ctx, &settings(150, 0), &|_| false, "t").unwrap();
        assert!(
            c.summary
                .text
                .contains("## Framing request\n> The original task: migrate the DB")
        );
        assert!(
            c.summary
                .text
                .contains("## Previous summary\nmodel summary")
        );
        assert_eq!(c.previous_summary.as_deref(), Some("model summary"));
    }
}
