//! Silent `NO_REPLY` replies: the predicate, and the plan that collapses their runs.
//!
//! **Predicate** ([`is_silent_text`], [`is_silent_content`]; the index stores the result as
//! `Entry::silent`): an assistant `message` whose stopReason is not `error`/`aborted`, whose
//! content has no tool-call block and no block other than text and thinking
//! (`thinking`, `redacted_thinking`, `reasoning`), and whose text blocks each read `NO_REPLY`
//! (any letter case) after trimming ECMAScript whitespace and removing one leading and one
//! trailing run of `*`, `` ` ``, `~`, `_`; empty text blocks are allowed beside at least one
//! token. A string content is one text block. The JSON envelope `{"action":"NO_REPLY"}` counts
//! too. Text where the token is only part of the reply (`Done. NO_REPLY`) does not.
//!
//! **Runs** ([`plan`]): counted along every root-to-leaf path. Other messages,
//! `custom_message`, non-empty `branch_summary` and `compaction` entries break a run;
//! everything else (settings, labels, `session_info`, `custom`, unknown types) is transparent.
//! The first `keep` silent replies of each run stay, later ones are removed. Because an entry's
//! position in its run depends only on its ancestors, one walk from the roots decides every
//! path at once. The leaf and the last line are never removed, nor an entry that an
//! unparsable line mentions, nor one that a compaction keeps across such a line.

use std::collections::BTreeSet;

use crate::transcript::job::Planned;
use crate::transcript::probe::Content;
use crate::transcript::tree::Tree;
use crate::transcript::{EntryType, Index, Role};

/// The silent-reply token.
pub const SILENT_TOKEN: &str = "NO_REPLY";

/// Block types that may sit beside the token without making the reply non-silent.
const THINKING_TYPES: [&str; 3] = ["thinking", "redacted_thinking", "reasoning"];

/// ECMAScript `\s` (what `String.prototype.trim` removes).
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

fn is_edge_markup(c: char) -> bool {
    matches!(c, '*' | '`' | '~' | '_')
}

/// What one text block reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextVerdict {
    /// The silent token (possibly wrapped), or the `{"action":"NO_REPLY"}` envelope.
    Token,
    /// Nothing but whitespace.
    Empty,
    /// Anything else.
    Other,
}

/// Classify one text block.
pub fn classify_text(text: &str) -> TextVerdict {
    let t = js_trim(text);
    if t.is_empty() {
        return TextVerdict::Empty;
    }
    if t.starts_with('{') && is_silent_envelope(t) {
        return TextVerdict::Token;
    }
    let stripped = js_trim(
        t.trim_start_matches(is_edge_markup)
            .trim_end_matches(is_edge_markup),
    );
    if stripped.eq_ignore_ascii_case(SILENT_TOKEN) {
        TextVerdict::Token
    } else {
        TextVerdict::Other
    }
}

/// `{"action":"NO_REPLY"}`: exactly one key, `action`, whose trimmed string value is the token
/// (case-sensitive).
fn is_silent_envelope(t: &str) -> bool {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(t) else {
        return false;
    };
    map.len() == 1
        && map
            .get("action")
            .and_then(|v| v.as_str())
            .is_some_and(|s| js_trim(s) == SILENT_TOKEN)
}

/// Whether a whole reply text is silent (a string content).
pub fn is_silent_text(text: &str) -> bool {
    classify_text(text) == TextVerdict::Token
}

/// Whether an assistant content is silent (the caller checks role and stopReason).
pub fn is_silent_content(content: &Content<'_>) -> bool {
    match content {
        Content::Text(t) => is_silent_text(t),
        Content::Blocks(blocks) => {
            let mut tokens = 0;
            for b in blocks {
                match b.kind.as_str() {
                    Some("text") => match b.text.as_str().map(classify_text) {
                        Some(TextVerdict::Token) => tokens += 1,
                        Some(TextVerdict::Empty) => {}
                        _ => return false,
                    },
                    Some(t) if THINKING_TYPES.contains(&t) => {}
                    _ => return false,
                }
            }
            tokens > 0
        }
        Content::Absent | Content::Other | Content::Skipped => false,
    }
}

/// The outcome of planning a prune.
#[derive(Debug, Clone, Default)]
pub struct PrunePlan {
    /// Entry indices to remove.
    pub remove: BTreeSet<usize>,
    /// Silent replies that the rule would remove but that must stay, with the reason.
    pub held_back: Vec<(usize, &'static str)>,
}

/// How a node affects the run counter.
enum Effect {
    Count,
    Break,
    Transparent,
}

fn effect(index: &Index, i: usize) -> Effect {
    let e = &index.entries[i];
    match e.kind {
        EntryType::Message if e.silent && e.is_role(&Role::Assistant) => Effect::Count,
        EntryType::Message | EntryType::CustomMessage | EntryType::Compaction => Effect::Break,
        EntryType::BranchSummary if e.has_summary => Effect::Break,
        _ => Effect::Transparent,
    }
}

/// Plan which silent replies to remove, keeping the first `keep` of each run on every path.
///
/// A silent reply that follows an assistant message with tool calls (nothing but transparent
/// entries and tool results between them) is held back: it ends that message's tool-result
/// span, so removing it would change how later results pair with their calls (spec §13).
pub fn plan(index: &Index, tree: &Tree, keep: usize) -> PrunePlan {
    let mut out = PrunePlan::default();
    let last_line_entry = index.lines.last().and_then(|l| l.entry());
    let pinned = crate::transcript::tree::kept_across_unparsable(index, tree);
    // (entry, run length before it, inside an open tool-call span)
    let mut stack: Vec<(usize, usize, bool)> = tree
        .roots(index)
        .into_iter()
        .map(|r| (r, 0, false))
        .collect();
    while let Some((i, before, span_open)) = stack.pop() {
        let e = &index.entries[i];
        let run = match effect(index, i) {
            Effect::Count => before + 1,
            Effect::Break => 0,
            Effect::Transparent => before,
        };
        if matches!(effect(index, i), Effect::Count) && run > keep {
            let id = e.id.as_deref().unwrap_or_default();
            if Some(i) == tree.leaf || Some(i) == last_line_entry {
                out.held_back.push((i, "it is the leaf (last entry)"));
            } else if index.mentioned_by_unparsable(id) {
                out.held_back
                    .push((i, "an unparsable line mentions its id"));
            } else if pinned.contains(&i) {
                out.held_back.push((
                    i,
                    "a compaction beyond an unparsable line keeps it in context",
                ));
            } else if span_open {
                out.held_back
                    .push((i, "it ends the tool-result span of an earlier tool call"));
            } else {
                out.remove.insert(i);
            }
        }
        let span_after = if e.is_role(&Role::Assistant) {
            !e.tool_calls.is_empty() && !e.error_or_aborted
        } else {
            span_open
        };
        stack.extend(tree.children(i).map(|c| (c, run, span_after)));
    }
    out
}

/// [`plan`] as the transcript job's edits, with a note per held-back reply (what
/// `prune-noreply` runs per file, and what `inspect` previews to predict it).
pub fn planned(index: &Index, tree: &Tree, keep: usize) -> Planned {
    let plan = plan(index, tree, keep);
    let notes = plan
        .held_back
        .iter()
        .map(|(i, why)| {
            format!(
                "kept silent reply on line {}: {why}",
                index.entries[*i].line + 1
            )
        })
        .collect();
    let mut planned = Planned {
        notes,
        ..Planned::default()
    };
    planned.edits.remove = plan.remove;
    planned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        for yes in [
            "NO_REPLY",
            " no_reply\n",
            "**NO_REPLY**",
            "`No_Reply`",
            "~~_NO_REPLY_~~",
            "\u{a0}NO_REPLY\u{3000}",
            "{\"action\":\"NO_REPLY\"}",
            " {\"action\": \" NO_REPLY \"} ",
            "** NO_REPLY **",
        ] {
            assert!(is_silent_text(yes), "{yes:?}");
        }
        for no in [
            "Done. NO_REPLY",
            "NO_REPLY: later",
            "NO REPLY",
            "",
            "{\"action\":\"no_reply\"}",
            "{\"action\":\"NO_REPLY\",\"x\":1}",
            "*NO_REPLY* ok",
            "\u{85}NO_REPLY",
        ] {
            assert!(!is_silent_text(no), "{no:?}");
        }
    }

    fn entry_silent(content: &str) -> bool {
        let line = format!(
            r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"assistant","content":{content},"stopReason":"stop"}}}}"#
        );
        Index::from_reader(line.as_bytes()).unwrap().entries[0].silent
    }

    #[test]
    fn block_rules() {
        assert!(entry_silent(
            r#"[{"type":"thinking","thinking":"x"},{"type":"text","text":"NO_REPLY"}]"#
        ));
        assert!(entry_silent(
            r#"[{"type":"text","text":""},{"type":"text","text":"NO_REPLY"}]"#
        ));
        assert!(entry_silent(r#""NO_REPLY""#));
        assert!(!entry_silent(r#"[{"type":"text","text":""}]"#));
        assert!(!entry_silent(
            r#"[{"type":"text","text":"NO_REPLY"},{"type":"toolCall","id":"t"}]"#
        ));
        assert!(!entry_silent(
            r#"[{"type":"text","text":"NO_REPLY"},{"type":"image","data":""}]"#
        ));
        assert!(!entry_silent(
            r#"[{"type":"text","text":"NO_REPLY"},{"type":"text","text":"hi"}]"#
        ));
        assert!(!entry_silent(r#"[{"type":"text","text":"NO_REPLY"},"x"]"#));
        let aborted = r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":"NO_REPLY","stopReason":"aborted"}}"#;
        assert!(!Index::from_reader(aborted.as_bytes()).unwrap().entries[0].silent);
    }

    #[test]
    fn a_silent_reply_that_ends_a_tool_span_is_held_back() {
        let lines = [
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"t1"}]}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"toolResult","toolCallId":"t1","content":[]}}"#,
            r#"{"type":"message","id":"d","parentId":"c","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"e","parentId":"d","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"f","parentId":"e","message":{"role":"user","content":"x"}}"#,
        ];
        let index = Index::from_reader(lines.join("\n").as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let p = plan(&index, &tree, 0);
        let ids = |set: Vec<usize>| -> Vec<&str> {
            set.iter()
                .map(|&i| index.entries[i].id.as_deref().unwrap())
                .collect()
        };
        // b ends a's span (removing it would pair c with t1); d and e follow a closed span.
        assert_eq!(ids(p.remove.iter().copied().collect()), ["d", "e"]);
        assert_eq!(ids(p.held_back.iter().map(|h| h.0).collect()), ["b"]);
    }
}
