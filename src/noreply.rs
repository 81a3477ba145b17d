//! Silent `NO_REPLY` replies: the predicate, and the plan that collapses their runs.
//!
//! **Predicate** ([`is_silent_payload_text`], [`is_silent_blocks`], [`is_silent_content`];
//! the index stores the result as `Entry::silent`, and `compact`'s boilerplate filter and
//! `inspect`'s counts use the same functions): an assistant `message` whose stopReason is not
//! `error`/`aborted`, whose content has no tool-call block and no block other than text and
//! thinking (`thinking`, `redacted_thinking`, `reasoning`), and whose text, as the runtime
//! sends it (a string content, or the non-blank text blocks joined with `\n`, trimmed), is one
//! the runtime does not deliver: OpenClaw's `isSilentReplyPayloadText`. That is
//! `isSilentReplyText` (`^\s*NO_REPLY(\s+NO_REPLY)*\s*$`, ASCII case-insensitive, on the text
//! or on the trimmed text with leading and trailing `\p{P}` removed), the JSON string
//! `"NO_REPLY"`, the envelope `{"action":"NO_REPLY"}` (both in the token's exact case), or a
//! reasoning prefix followed by the token; the runtime checks it once the reply tags
//! (`[[reply_to_current]]`) are out, and its dispatcher also drops a text that is only glued
//! and final tokens (`NO_REPLYNO_REPLY`): see [`delivery`] and [`is_silent_text`]. Symbols
//! (`` ` `` `~` `$` `+` `<` `^` `|` …) are not punctuation: `` `NO_REPLY` `` is delivered, so it
//! is not silent. Text where the token is only part of the reply (`Done. NO_REPLY`) is not
//! silent either. Only assistant messages count: a version-2 `hookMessage` (a `custom`
//! message once the runtime migrates it) never does.
//!
//! **Runs** ([`plan`]): counted along every root-to-leaf path. Other messages,
//! `custom_message`, non-empty `branch_summary` and `compaction` entries break a run;
//! everything else (settings, labels, `session_info`, `custom`, unknown types) is transparent.
//! The first `keep` silent replies of each run stay, later ones are removed. Because an entry's
//! position in its run depends only on its ancestors, one walk from the roots decides every
//! path at once. The leaf and the last line are never removed, nor an entry that an
//! unparsable line mentions, nor one that a compaction keeps across such a line, nor one
//! whose removal would make tool call/result pairing on the active context worse (see
//! `pairing_guard`: in practice a silent reply between a tool call and a result whose call
//! id recurs later).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::js::{is_js_space, js_trim};

mod delivery;

use crate::transcript::job::Planned;
use crate::transcript::probe::Content;
use crate::transcript::tree::Tree;
use crate::transcript::{EntryType, Index, Role};

/// The silent-reply token.
pub const SILENT_TOKEN: &str = "NO_REPLY";

/// Block types that may sit beside the token without making the reply non-silent.
const THINKING_TYPES: [&str; 3] = ["thinking", "redacted_thinking", "reasoning"];

/// ECMAScript `\s` as a regex class.
const JS_S: &str = r"[\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}]";

/// `\p{P}` as the runtime's engine sees it (Unicode 17): the regex crate's tables are
/// Unicode 16, which lacks U+10ED0.
const JS_PUNCT: &str = r"[\p{P}\x{10ED0}]";

/// Compile a pattern written in JavaScript's syntax for a non-`u` regex with the `i` flag:
/// `\s` is ECMAScript whitespace, `\b` an ASCII word boundary, and letters match their ASCII
/// other case only (Unicode case folding would also let `K` match `k` and `ſ` match `s`).
fn js_regex(pattern: &str) -> Regex {
    let mut out = String::with_capacity(pattern.len() * 3);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let e = chars.next().expect("a complete escape");
                match e {
                    's' if in_class => out.push_str(&JS_S[1..JS_S.len() - 1]),
                    's' => out.push_str(JS_S),
                    'S' => {
                        out.push_str("[^");
                        out.push_str(&JS_S[1..JS_S.len() - 1]);
                        out.push(']');
                    }
                    'b' => out.push_str(r"(?-u:\b)"),
                    _ => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            c if c.is_ascii_alphabetic() && !in_class => {
                out.push('[');
                out.push(c.to_ascii_lowercase());
                out.push(c.to_ascii_uppercase());
                out.push(']');
            }
            c => out.push(c),
        }
    }
    Regex::new(&out).unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

/// Whether `text` contains the token (which has a `_`) in any ASCII case: every form below
/// needs it, so this cheap scan answers most texts.
fn mentions_token(text: &str) -> bool {
    let at = SILENT_TOKEN.find('_').expect("the token has an underscore");
    let t = text.as_bytes();
    memchr::memchr_iter(b'_', t).any(|i| {
        i >= at
            && t.get(i - at..i - at + SILENT_TOKEN.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(SILENT_TOKEN.as_bytes()))
    })
}

/// `^\s*NO_REPLY(?:\s+NO_REPLY)*\s*$` with the `i` flag.
fn is_token_run(s: &str) -> bool {
    let mut parts = s.split(is_js_space).filter(|p| !p.is_empty()).peekable();
    parts.peek().is_some() && parts.all(|p| p.eq_ignore_ascii_case(SILENT_TOKEN))
}

static EDGE_PUNCT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{JS_PUNCT}+|{JS_PUNCT}+$")).unwrap());

/// The runtime's `isSilentReplyText`: the text is the token, repeated or not, in any ASCII
/// case, with whitespace around, as is or after trimming and taking Unicode punctuation
/// (`\p{P}`: `.` `!` `"` `*` `_` `(` `«` …, but not symbols such as `` ` `` `~` `$` `+` `<`
/// `^` `|`) off both ends.
pub fn is_silent_reply_text(text: &str) -> bool {
    // Taking punctuation off the edges cannot make the token appear.
    mentions_token(text)
        && (is_token_run(text) || is_token_run(&EDGE_PUNCT.replace_all(js_trim(text), "")))
}

/// `isSilentReplyJsonStringText`: a JSON string whose trimmed value is the token (exact case).
fn is_silent_json_string(text: &str) -> bool {
    let t = js_trim(text);
    t.len() >= 2
        && t.starts_with('"')
        && t.ends_with('"')
        && t.contains(SILENT_TOKEN)
        && matches!(serde_json::from_str::<serde_json::Value>(t),
            Ok(serde_json::Value::String(s)) if js_trim(&s) == SILENT_TOKEN)
}

/// `isSilentReplyEnvelopeText`: `{"action":"NO_REPLY"}`, exactly one key, `action`, whose
/// trimmed string value is the token (exact case).
fn is_silent_envelope(text: &str) -> bool {
    let t = js_trim(text);
    if !(t.starts_with('{') && t.ends_with('}') && t.contains(SILENT_TOKEN)) {
        return false;
    }
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(t) else {
        return false;
    };
    map.len() == 1
        && map
            .get("action")
            .and_then(|v| v.as_str())
            .is_some_and(|s| js_trim(s) == SILENT_TOKEN)
}

const REASONING_TAG: &str = r"<\s*(?:(?:antml:|mm:)?(?:think(?:ing)?|thought)|antthinking)";
static TAGGED_REASONING_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    js_regex(&format!(
        r"^\s*{REASONING_TAG}\b[^<>]*>[\s\S]*?<\s*\/\s*(?:(?:antml:|mm:)?(?:think(?:ing)?|thought)|antthinking)\s*>\s*"
    ))
});
static OPEN_REASONING_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| js_regex(&format!(r"^\s*{REASONING_TAG}\b[^<>]*>")));
static PLAIN_REASONING_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| js_regex(r"^\s*(?:think(?:ing)?|thought|analysis|reasoning)\s*:?\s*\r?\n"));
static FINAL_TOKEN: LazyLock<Regex> =
    LazyLock::new(|| js_regex(&format!(r"(?:^|[\s*.]){SILENT_TOKEN}\s*$")));
static SILENT_INTENT: LazyLock<Regex> = LazyLock::new(|| {
    js_regex(
        r"^\s*(?:i|i'll|i\s+will|i'm|i\s+am|we|we'll|we\s+will|the\s+assistant|assistant|the\s+bot|bot|openclaw)\s+(?:(?:will\s+)?(?:stay|remain|keep|be)\s+(?:quiet|silent)(?:\s+(?:here|for\s+now|on\s+this|in\s+this\s+(?:chat|thread|channel|conversation)))?|(?:do\s+not|don't|dont|will\s+not|won't|would\s+not|should\s+not)\s+(?:reply|respond)(?:\s+(?:here|for\s+now|on\s+this|in\s+this\s+(?:chat|thread|channel|conversation)))?|(?:have|has)\s+nothing\s+(?:to|for)\s+(?:say|add|reply|respond))(?:[.!?]+)?\s*$",
    )
});
static SUBSTANTIVE_ANSWER_CUE: LazyLock<Regex> = LazyLock::new(|| {
    js_regex(
        r"\b(?:answer|here(?:'s|\s+is)|tell\s+them|you\s+(?:should|can|could|need|must)|please|try|use|send|service\s+is|resolved|retry|yes|no,|sure)\b",
    )
});
static BARE_REASONING_PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    js_regex(
        r"^\s*(?:(?:internal|private)\s+)?(?:reasoning|thinking|thoughts?|analysis)(?:\s+notes?)?\s*$",
    )
});

/// `stripFinalSilentToken`: the text without a final token (at the start, or after whitespace,
/// `*` or `.`), trimmed; `None` when there is none.
fn strip_final_token(text: &str) -> Option<String> {
    let stripped = js_trim(&FINAL_TOKEN.replace(text, "")).to_owned();
    (stripped != js_trim(text)).then_some(stripped)
}

/// `hasSilentIntentFinalSilentToken`.
fn silent_intent_then_token(text: &str) -> bool {
    strip_final_token(text).is_some_and(|w| w.is_empty() || SILENT_INTENT.is_match(&w))
}

/// `hasPlainReasoningFinalSilentToken`.
fn plain_reasoning_then_token(text: &str) -> bool {
    let Some(w) = strip_final_token(text) else {
        return false;
    };
    if w.is_empty() || SILENT_INTENT.is_match(&w) {
        return true;
    }
    let lines: Vec<&str> = w
        .split('\n')
        .map(|l| js_trim(l.strip_suffix('\r').unwrap_or(l)))
        .filter(|l| !l.is_empty())
        .collect();
    let intent_last = lines.split_last().is_some_and(|(last, before)| {
        let previous = before.join("\n");
        SILENT_INTENT.is_match(last)
            && !previous.is_empty()
            && !SUBSTANTIVE_ANSWER_CUE.is_match(&previous)
    });
    intent_last || BARE_REASONING_PLACEHOLDER.is_match(&w)
}

/// `isReasoningPrefixedSilentReplyText`: a reasoning block or label, then the token (or a
/// short "I'll stay quiet" line and the token).
fn is_reasoning_prefixed(text: &str) -> bool {
    let trimmed = js_trim(text);
    if trimmed.is_empty() {
        return false;
    }
    let mut rest = trimmed;
    while let Some(m) = TAGGED_REASONING_PREFIX.find(rest) {
        if m.is_empty() {
            break;
        }
        rest = &rest[m.end()..];
    }
    if rest.len() != trimmed.len() {
        return is_silent_reply_text(rest) || silent_intent_then_token(rest);
    }
    let prefix = OPEN_REASONING_PREFIX
        .find(trimmed)
        .map(|m| (m, true))
        .or_else(|| PLAIN_REASONING_PREFIX.find(trimmed).map(|m| (m, false)));
    let Some((m, _)) = prefix else {
        return false;
    };
    let rest = &trimmed[m.end()..];
    is_silent_reply_text(rest) || plain_reasoning_then_token(rest)
}

/// The runtime's `isSilentReplyPayloadText`, what decides that a reply's text is not
/// delivered: [`is_silent_reply_text`], a JSON string of the token (`"NO_REPLY"`), the
/// envelope `{"action":"NO_REPLY"}`, or a reasoning prefix followed by the token.
pub fn is_silent_payload_text(text: &str) -> bool {
    mentions_token(text)
        && (is_silent_reply_text(text)
            || is_silent_json_string(text)
            || is_silent_envelope(text)
            || is_reasoning_prefixed(text))
}

/// Whether a whole reply text is silent (a string content): the runtime does not deliver it
/// because it is silent. Its reply tags (`[[reply_to_current]]`, `[[reply_to:<id>]]`) are
/// taken out first, then the text must be a silent payload text
/// ([`is_silent_payload_text`]), or one the reply dispatcher skips as silent once it has
/// stripped glued leading tokens and a final token (`NO_REPLYNO_REPLY`,
/// `NO_REPLYNO_REPLY *NO_REPLY`); see [`delivery`].
pub fn is_silent_text(raw: &str) -> bool {
    let text = js_trim(raw);
    mentions_token(text)
        && delivery::payload_text(raw, text).is_some_and(|t| {
            mentions_token(&t) && (is_silent_payload_text(&t) || delivery::dispatcher_drops(&t))
        })
}

/// Whether an assistant content is silent (the caller checks role and stopReason), given its
/// blocks as (type, text) pairs, or `None` for a block that is not an object: only text and
/// thinking blocks, each text block with a string text, and the text the runtime would send,
/// the non-blank text blocks joined with a line break and trimmed, is silent.
pub fn is_silent_blocks<'a>(
    blocks: impl IntoIterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> bool {
    let mut texts: Vec<&str> = Vec::new();
    for (kind, text) in blocks {
        match kind {
            Some("text") => match text {
                Some(t) => texts.push(t),
                None => return false,
            },
            Some(t) if THINKING_TYPES.contains(&t) => {}
            _ => return false,
        }
    }
    match texts.as_slice() {
        [] => false,
        [one] => is_silent_text(one),
        _ if !texts.iter().any(|t| mentions_token(t)) => false,
        _ => {
            let joined = texts
                .iter()
                .filter(|t| !js_trim(t).is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
            is_silent_text(&joined)
        }
    }
}

/// Whether an assistant content is silent (the caller checks role and stopReason).
pub fn is_silent_content(content: &Content<'_>) -> bool {
    match content {
        Content::Text(t) => is_silent_text(t),
        Content::Blocks(blocks) => {
            is_silent_blocks(blocks.iter().map(|b| (b.kind.as_str(), b.text.as_str())))
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
        EntryType::Message if e.silent() && e.is_role(&Role::Assistant) => Effect::Count,
        EntryType::Message | EntryType::CustomMessage | EntryType::Compaction => Effect::Break,
        EntryType::BranchSummary if e.has_summary() => Effect::Break,
        _ => Effect::Transparent,
    }
}

/// Plan which silent replies to remove, keeping the first `keep` of each run on every path.
///
/// The only other reason to keep one (beyond the leaf, the last line and unparsable lines) is
/// tool pairing: see [`pairing_guard`].
pub fn plan(index: &Index, tree: &Tree, keep: usize) -> PrunePlan {
    let mut out = PrunePlan::default();
    let held = crate::transcript::tree::Held::new(index, tree);
    // (entry, run length before it)
    let mut stack: Vec<(usize, usize)> = tree.roots(index).into_iter().map(|r| (r, 0)).collect();
    while let Some((i, before)) = stack.pop() {
        let run = match effect(index, i) {
            Effect::Count => before + 1,
            Effect::Break => 0,
            Effect::Transparent => before,
        };
        if matches!(effect(index, i), Effect::Count) && run > keep {
            match held.reason(index, tree, i) {
                Some(why) => out.held_back.push((i, why)),
                None => {
                    out.remove.insert(i);
                }
            }
        }
        stack.extend(tree.children(i).map(|c| (c, run)));
    }
    pairing_guard(index, tree, &mut out);
    out
}

/// Keep tool call/result pairing on the active context no worse than before (spec §13, the
/// validator's check), with the narrowest rule that does it.
///
/// A silent reply is an assistant message, so it closes the tool-result span of the assistant
/// before it: results that follow it answer nothing and count as orphans. Removing it merges
/// its span into the one before. That changes nothing unless the nearest kept assistant before
/// it has open tool calls (not an `error`/`aborted` turn) and a tool result follows it before
/// the next assistant message; then the result may pair with that call instead (fewer
/// orphans and missing results), or, when its call id recurs in a later result, make that
/// later one a duplicate. Only a removal that makes some count grow is taken back. Removals
/// are decided in context order, each against the ones already accepted; silent replies that
/// are not in the active context (other branches, entries hidden by a compaction) do not
/// affect it and are always removed.
fn pairing_guard(index: &Index, tree: &Tree, plan: &mut PrunePlan) {
    use crate::transcript::tree::{self, ContextItem};
    if plan.remove.is_empty() {
        return;
    }
    let context: Vec<usize> = tree::context_iter(index, tree, &tree.active_path())
        .filter_map(|c| match c {
            ContextItem::Entry(i) => Some(i as usize),
            ContextItem::CompactionSummary(_) => None,
        })
        .collect();
    let items = |removed: &[bool]| -> Vec<ContextItem> {
        context
            .iter()
            .zip(removed)
            .filter(|(_, r)| !**r)
            .map(|(&i, _)| ContextItem::Entry(i as u32))
            .collect()
    };
    let mut removed = vec![false; context.len()];
    let base = tree::pairing(index, items(&removed));
    let assistant = |i: usize| index.entries[i].is_role(&Role::Assistant);
    // The nearest kept assistant before the position being decided.
    let mut previous: Option<usize> = None;
    for (pos, &i) in context.iter().enumerate() {
        if !plan.remove.contains(&i) {
            if assistant(i) {
                previous = Some(i);
            }
            continue;
        }
        let open = previous.is_some_and(|p| {
            let e = &index.entries[p];
            !e.tool_calls().is_empty() && !e.error_or_aborted()
        });
        let result_follows = context[pos + 1..]
            .iter()
            .take_while(|&&j| !assistant(j))
            .any(|&j| index.entries[j].is_role(&Role::ToolResult));
        removed[pos] = true;
        if open && result_follows && !tree::pairing(index, items(&removed)).no_worse_than(&base) {
            removed[pos] = false;
            plan.remove.remove(&i);
            plan.held_back.push((
                i,
                "removing it would pair a later tool result with an earlier call and make the tool pairing worse",
            ));
            previous = Some(i);
        }
    }
}

/// [`plan`] as the transcript job's edits, with a note per held-back reply (what
/// `prune-noreply` runs per file, and what `inspect` previews to predict it).
pub fn planned(index: &Index, tree: &Tree, keep: usize) -> Planned {
    let plan = plan(index, tree, keep);
    Planned::removals(index, plan.remove, &plan.held_back, "silent reply")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        for yes in [
            "NO_REPLY",
            " no_reply\n",
            "No_RePlY",
            "NO_REPLY NO_REPLY",
            "NO_REPLY\n\nno_reply\tNO_REPLY",
            "NO_REPLY.",
            "NO_REPLY!",
            "NO_REPLY?!…",
            "(NO_REPLY)",
            "«NO_REPLY»",
            "“NO_REPLY”",
            "\"NO_REPLY\"",
            "\"no_reply\"",
            "\" NO_REPLY \"",
            "\"NO_REPLY\\n\"",
            "**NO_REPLY**",
            "** NO_REPLY **",
            "_NO_REPLY_",
            "\u{a0}NO_REPLY\u{3000}",
            "\u{feff}NO_REPLY",
            "{\"action\":\"NO_REPLY\"}",
            " { \"action\" : \" NO_REPLY \" } ",
            "{\"action\":\"x\",\"action\":\"NO_REPLY\"}",
            "<think>nothing to add</think>NO_REPLY",
            "<thinking>\nquiet\n</thinking>\nno_reply",
            "thinking:\nNO_REPLY",
            "Analysis\r\nI'll stay quiet here. NO_REPLY",
            "<think>hm</think>I will not reply. NO_REPLY",
            "\u{10ed0}NO_REPLY",
            "[\"NO_REPLY\"]",
            "NO_REPLYNO_REPLY",
            "NO_REPLYno_reply NO_REPLY",
            "NO_REPLYNO_REPLY **NO_REPLY",
            "[[reply_to_current]] NO_REPLY",
            "[[reply_to_current]]NO_REPLY",
            "[[ Reply_To : 1234 ]]\n**NO_REPLY**",
            "NO_REPLY[[reply_to_current]]NO_REPLY",
            "[[reply_to_current]] {\"action\":\"NO_REPLY\"}",
        ] {
            assert!(is_silent_text(yes), "{yes:?}");
        }
        for no in [
            "`NO_REPLY`",
            "~~NO_REPLY~~",
            "~NO_REPLY~",
            "$NO_REPLY$",
            "+NO_REPLY",
            "<NO_REPLY>",
            "^NO_REPLY|",
            "Done. NO_REPLY",
            "NO_REPLY: later",
            "NO_REPLY and more",
            "NO REPLY",
            "NO_REPLY.NO_REPLY",
            "NO_REPLY\n*NO_REPLY",
            "HEARTBEAT_OK NO_REPLY",
            "[[reply_to:NO_REPLY]]",
            "[[audio_as_voice]] NO_REPLY",
            "[[reply_to_current]] `NO_REPLY`",
            "",
            "   ",
            "{\"action\":\"no_reply\"}",
            "{\"action\":\"NO_REPLY\",\"x\":1}",
            "{\"Action\":\"NO_REPLY\"}",
            "\"\\u004eO_REPLY\"",
            "*NO_REPLY* ok",
            "\u{85}NO_REPLY",
            "\u{200b}NO_REPLY",
            "thin\u{212a}:\nNO_REPLY",
            "<think>x</think>Here is the answer. NO_REPLY",
        ] {
            assert!(!is_silent_text(no), "{no:?}");
        }
        // The JSON string and envelope forms take the token in its exact case only; the
        // lower-case JSON string above is silent as a quoted token.
        assert!(!is_silent_text("\"no_reply\\n\""));
        assert!(is_silent_reply_text("\"NO_REPLY\""));
        assert!(!is_silent_reply_text("{\"action\":\"NO_REPLY\"}"));
    }

    fn entry_silent(content: &str) -> bool {
        let line = format!(
            r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"assistant","content":{content},"stopReason":"stop"}}}}"#
        );
        Index::from_reader(line.as_bytes()).unwrap().entries[0].silent()
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
        // The runtime sends the non-blank text blocks joined with a line break.
        assert!(entry_silent(
            r#"[{"type":"text","text":"NO_REPLY"},{"type":"text","text":" no_reply "}]"#
        ));
        assert!(entry_silent(
            r#"[{"type":"text","text":"("},{"type":"text","text":"NO_REPLY"},{"type":"text","text":")."}]"#
        ));
        assert!(entry_silent(
            r#"[{"type":"text","text":"<think>x</think>"},{"type":"text","text":"NO_REPLY"}]"#
        ));
        assert!(!entry_silent(
            r#"[{"type":"text","text":"`"},{"type":"text","text":"NO_REPLY"},{"type":"text","text":"`"}]"#
        ));
        assert!(!entry_silent(r#""`NO_REPLY`""#));
        assert!(!entry_silent(r#"[{"type":"text","text":"NO_REPLY"},"x"]"#));
        let aborted = r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":"NO_REPLY","stopReason":"aborted"}}"#;
        assert!(!Index::from_reader(aborted.as_bytes()).unwrap().entries[0].silent());
    }

    fn ids_of(index: &Index, set: impl IntoIterator<Item = usize>) -> Vec<&str> {
        set.into_iter()
            .map(|i| index.entries[i].id.as_deref().unwrap())
            .collect()
    }

    fn transcript(lines: &[&str]) -> Index {
        let mut all = vec![r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#];
        all.extend_from_slice(lines);
        Index::from_reader(all.join("\n").as_bytes()).unwrap()
    }

    const CALL: &str = r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"t1"}]}}"#;

    fn msg(id: &str, parent: &str, message: &str) -> String {
        format!(r#"{{"type":"message","id":"{id}","parentId":"{parent}","message":{message}}}"#)
    }

    const SILENT: &str = r#"{"role":"assistant","content":"NO_REPLY"}"#;
    const RESULT: &str = r#"{"role":"toolResult","toolCallId":"t1","content":[]}"#;
    const USER: &str = r#"{"role":"user","content":"x"}"#;

    #[test]
    fn silent_replies_after_tool_calls_go_unless_pairing_gets_worse() {
        // b sits between a's call and its result: removing it pairs c with t1, which is
        // better (no orphan, no missing result); d follows a user message, e a result.
        let lines = [
            CALL.to_owned(),
            msg("b", "a", SILENT),
            msg("c", "b", RESULT),
            msg("u", "c", USER),
            msg("d", "u", SILENT),
            msg("r", "d", &RESULT.replace("t1", "t2")),
            msg("e", "r", SILENT),
            msg("f", "e", USER),
        ];
        let index = transcript(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let tree = Tree::build(&index);
        let p = plan(&index, &tree, 0);
        assert_eq!(ids_of(&index, p.remove.iter().copied()), ["b", "d", "e"]);
        assert!(p.held_back.is_empty());
        // With a second result for t1 after b, removing b would turn it into a duplicate: b
        // stays, and nothing else does.
        let lines = [
            CALL.to_owned(),
            msg("b", "a", SILENT),
            msg("c", "b", RESULT),
            msg("c2", "c", RESULT),
            msg("d", "c2", SILENT),
            msg("f", "d", USER),
        ];
        let index = transcript(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let tree = Tree::build(&index);
        let p = plan(&index, &tree, 0);
        assert_eq!(ids_of(&index, p.remove.iter().copied()), ["d"]);
        assert_eq!(ids_of(&index, p.held_back.iter().map(|h| h.0)), ["b"]);
        // On a branch that is not active, pairing does not constrain it.
        let lines = [
            CALL.to_owned(),
            msg("b", "a", SILENT),
            msg("c", "b", RESULT),
            msg("c2", "c", RESULT),
            msg("g", "a", USER),
            msg("h", "g", SILENT),
            msg("i", "h", USER),
        ];
        let index = transcript(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let tree = Tree::build(&index);
        let p = plan(&index, &tree, 0);
        assert_eq!(ids_of(&index, p.remove.iter().copied()), ["b", "h"]);
    }

    #[test]
    fn every_planned_removal_passes_the_validator() {
        use crate::transcript::{rewrite, validate};
        // Calls, silent replies and results in every order, some results repeated.
        let kinds = [CALL, SILENT, RESULT, USER];
        let mut held = 0;
        for seed in 0..400u64 {
            let mut x = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut lines = Vec::new();
            let mut parent = "null".to_owned();
            for n in 0..12 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = kinds[(x >> 33) as usize % kinds.len()];
                let m: serde_json::Value = serde_json::from_str(k).unwrap();
                let message = if k == CALL { m["message"].clone() } else { m };
                let id = format!("e{n}");
                lines.push(format!(
                    r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{message}}}"#
                ));
                parent = format!("\"{id}\"");
            }
            lines.push(format!(
                r#"{{"type":"message","id":"last","parentId":{parent},"message":{USER}}}"#
            ));
            let text = std::iter::once(
                r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned(),
            )
            .chain(lines)
            .collect::<Vec<_>>()
            .join("\n");
            let index = Index::from_reader(text.as_bytes()).unwrap();
            let tree = Tree::build(&index);
            let p = plan(&index, &tree, 0);
            let silent = index.entries.iter().filter(|e| e.silent()).count();
            held += p.held_back.len();
            assert_eq!(p.remove.len() + p.held_back.len(), silent, "seed {seed}");
            let edits = rewrite::Edits {
                remove: p.remove.clone(),
                ..Default::default()
            };
            let resolved = rewrite::resolve(&index, &tree, edits.clone()).unwrap();
            let mut out = Vec::new();
            let applied = rewrite::apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
            let expect = validate::Expectation::removals(resolved.removed_ids.clone());
            validate::validate(&index, &applied.index, &expect)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
            // Each held-back reply is needed: removing it too would fail the validator.
            for &(h, _) in &p.held_back {
                let mut more = edits.clone();
                more.remove.insert(h);
                let resolved = rewrite::resolve(&index, &tree, more.clone()).unwrap();
                let mut out = Vec::new();
                let applied = rewrite::apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
                let expect = validate::Expectation::removals(resolved.removed_ids.clone());
                assert!(
                    validate::validate(&index, &applied.index, &expect).is_err(),
                    "seed {seed}: {h} was held back needlessly"
                );
            }
        }
        assert!(held >= 10, "held back only {held} times");
    }
}
