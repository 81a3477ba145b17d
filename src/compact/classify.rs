//! Is there real conversation in a run of messages, or only boilerplate?
//!
//! Ports of the runtime's classifiers (`compaction-real-conversation`, the silent-reply and
//! heartbeat token helpers, the heartbeat prompt matcher), plus the offline filter that spec
//! § 12 asks for because the runtime's own check counts the default heartbeat prompt as real:
//! before classifying, heartbeat prompt + acknowledgement pairs, exec-event injections, silent
//! (`NO_REPLY`) replies and bare `HEARTBEAT_OK` acknowledgements are set aside.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::str_field;
use super::view::View;

/// The runtime's silent-reply token.
pub const SILENT_REPLY_TOKEN: &str = "NO_REPLY";
/// The runtime's heartbeat acknowledgement token.
pub const HEARTBEAT_TOKEN: &str = "HEARTBEAT_OK";
const HEARTBEAT_CONTEXT_PROMPT: &str = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats.";
const HEARTBEAT_TRANSCRIPT_PROMPT: &str = "[OpenClaw heartbeat poll]";
const HEARTBEAT_TASK_PROMPT_PREFIX: &str =
    "Run the following periodic tasks (only those due based on their intervals):";
const HEARTBEAT_TASK_PROMPT_ACK: &str = "After completing all due tasks, reply HEARTBEAT_OK.";
const TOOL_RESULT_LOOKBACK: usize = 20;
const NON_CONVERSATION_BLOCKS: &[&str] = &[
    "toolCall",
    "toolUse",
    "functionCall",
    "thinking",
    "reasoning",
];
const CALL_BLOCKS: &[&str] = &[
    "toolCall",
    "functionCall",
    "toolUse",
    "tool_call",
    "function_call",
    "tool_use",
];

use crate::js::{is_js_space, js_trim};

/// Collapse runs of JavaScript whitespace to one space and trim (`replace(/\s+/g, " ").trim()`).
pub fn collapse_space(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for part in js_trim(s).split(is_js_space).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

/// `isSilentReplyText` (one definition, shared with `prune-noreply` and `inspect`).
pub use crate::noreply::is_silent_reply_text;

/// Result of [`strip_heartbeat_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatStrip<'a> {
    pub should_skip: bool,
    pub text: Cow<'a, str>,
    pub did_strip: bool,
}

static TAGS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<[^>]*>").unwrap());
static NBSP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)&nbsp;").unwrap());
static LEAD_MARKS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[*`~_]+").unwrap());
static TRAIL_MARKS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[*`~_]+$").unwrap());
static TOKEN_AT_END: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"HEARTBEAT_OK[^A-Za-z0-9_]{0,4}$").unwrap());

fn strip_token_at_edges(raw: &str) -> (String, bool) {
    let mut text = js_trim(raw).to_owned();
    if text.is_empty() || !text.contains(HEARTBEAT_TOKEN) {
        return (text, false);
    }
    let mut did = false;
    loop {
        let next = js_trim(&text).to_owned();
        if let Some(rest) = next.strip_prefix(HEARTBEAT_TOKEN) {
            text = rest.trim_start_matches(is_js_space).to_owned();
            did = true;
            continue;
        }
        if TOKEN_AT_END.is_match(&next) {
            let idx = next.rfind(HEARTBEAT_TOKEN).unwrap_or(0);
            let before = next[..idx].trim_end_matches(is_js_space);
            let after = next[idx + HEARTBEAT_TOKEN.len()..].trim_start_matches(is_js_space);
            text = if before.is_empty() {
                String::new()
            } else {
                format!("{before}{after}")
                    .trim_end_matches(is_js_space)
                    .to_owned()
            };
            did = true;
            continue;
        }
        break;
    }
    (collapse_space(&text), did)
}

/// `stripHeartbeatToken(raw, {mode, maxAckChars})`; `ack_max_chars` matters in heartbeat mode.
pub fn strip_heartbeat_token(
    raw: &str,
    heartbeat_mode: bool,
    ack_max_chars: usize,
) -> HeartbeatStrip<'_> {
    let trimmed = js_trim(raw);
    if trimmed.is_empty() {
        return HeartbeatStrip {
            should_skip: true,
            text: Cow::Borrowed(""),
            did_strip: false,
        };
    }
    let keep = HeartbeatStrip {
        should_skip: false,
        text: Cow::Borrowed(trimmed),
        did_strip: false,
    };
    // Normalising only replaces tags and `&nbsp;` with spaces and takes marks off the
    // edges, which cannot make the token appear: without it, nothing is stripped (the
    // common answer, found without the regexes).
    if !trimmed.contains(HEARTBEAT_TOKEN) {
        return keep;
    }
    let normalized = TAGS.replace_all(trimmed, " ");
    let normalized = NBSP.replace_all(&normalized, " ");
    let normalized = LEAD_MARKS.replace(&normalized, "");
    let normalized = TRAIL_MARKS.replace(&normalized, "").into_owned();
    let original = strip_token_at_edges(trimmed);
    let picked = if original.1 && !original.0.is_empty() {
        original
    } else {
        strip_token_at_edges(&normalized)
    };
    if !picked.1 {
        return keep;
    }
    if picked.0.is_empty() {
        return HeartbeatStrip {
            should_skip: true,
            text: Cow::Borrowed(""),
            did_strip: true,
        };
    }
    let rest = js_trim(&picked.0).to_owned();
    if heartbeat_mode && rest.encode_utf16().count() <= ack_max_chars {
        return HeartbeatStrip {
            should_skip: true,
            text: Cow::Borrowed(""),
            did_strip: true,
        };
    }
    HeartbeatStrip {
        should_skip: false,
        text: Cow::Owned(rest),
        did_strip: true,
    }
}

/// `hasMeaningfulText` of the real-conversation classifier.
pub fn has_meaningful_text(text: &str) -> bool {
    let trimmed = js_trim(text);
    if trimmed.is_empty() || is_silent_reply_text(trimmed) {
        return false;
    }
    let hb = strip_heartbeat_token(trimmed, false, 300);
    if hb.did_strip {
        return !js_trim(&hb.text).is_empty();
    }
    true
}

fn has_meaningful_content<N: View>(content: Option<&N>) -> bool {
    let Some(content) = content else {
        return false;
    };
    if let Some(s) = content.as_str() {
        return has_meaningful_text(s);
    }
    let Some(blocks) = content.items() else {
        return false;
    };
    let mut non_text = false;
    for block in blocks.iter().filter(|b| b.is_object()) {
        match str_field(block, "type") {
            Some("text") => {
                if str_field(block, "text").is_some_and(has_meaningful_text) {
                    return true;
                }
            }
            Some(t) if NON_CONVERSATION_BLOCKS.contains(&t) => {}
            _ => non_text = true,
        }
    }
    non_text
}

/// `hasMeaningfulConversationContent`.
pub fn has_meaningful_conversation<N: View>(message: &N) -> bool {
    match str_field(message, "role") {
        Some("custom") => {
            message.field("display").and_then(View::as_bool) != Some(false)
                && has_meaningful_content(message.field("content"))
        }
        Some("bashExecution") => {
            if message.field("excludeFromContext").and_then(View::as_bool) == Some(true) {
                return false;
            }
            let cmd = str_field(message, "command").unwrap_or("");
            let out = str_field(message, "output").unwrap_or("");
            has_meaningful_text(&format!("{cmd}\n{out}"))
        }
        Some("branchSummary") => str_field(message, "summary").is_some_and(has_meaningful_text),
        _ => has_meaningful_content(message.field("content")),
    }
}

/// `isRealConversationMessage(message, messages, index)`.
pub fn is_real_conversation(messages: &[&Value], index: usize) -> bool {
    let message = messages[index];
    match str_field(message, "role") {
        Some("user" | "assistant" | "custom" | "bashExecution" | "branchSummary") => {
            has_meaningful_conversation(message)
        }
        Some("toolResult") => {
            let start = index.saturating_sub(TOOL_RESULT_LOOKBACK);
            messages[start..index].iter().rev().any(|m| {
                matches!(
                    str_field(*m, "role"),
                    Some("user" | "custom" | "bashExecution" | "branchSummary")
                ) && has_meaningful_conversation(*m)
            })
        }
        _ => false,
    }
}

/// Concatenated text blocks of a message's content (a string content as is).
pub fn message_text<N: View>(message: &N) -> Cow<'_, str> {
    let Some(content) = message.field("content") else {
        return Cow::Borrowed("");
    };
    if let Some(s) = content.as_str() {
        return Cow::Borrowed(s);
    }
    concat(
        (content.items().into_iter().flatten())
            .filter(|b| str_field(*b, "type") == Some("text"))
            .filter_map(|b| str_field(b, "text")),
    )
}

/// The pieces one after the other (borrowed when there is at most one).
fn concat<'a>(mut pieces: impl Iterator<Item = &'a str>) -> Cow<'a, str> {
    let Some(first) = pieces.next() else {
        return Cow::Borrowed("");
    };
    match pieces.next() {
        None => Cow::Borrowed(first),
        Some(second) => {
            let mut out = String::from(first);
            out.push_str(second);
            pieces.for_each(|p| out.push_str(p));
            Cow::Owned(out)
        }
    }
}

fn matches_prompt(text: &str, prompt: &str) -> bool {
    text == prompt
        || text
            .strip_prefix(prompt)
            .is_some_and(|r| r.starts_with('\n'))
}

/// A heartbeat poll the runtime sends as a user message (default prompts only).
pub fn is_heartbeat_prompt<N: View>(message: &N) -> bool {
    if str_field(message, "role") != Some("user") {
        return false;
    }
    let text = message_text(message);
    let t = js_trim(&text);
    if t.is_empty() {
        return false;
    }
    static DEFAULT: LazyLock<String> = LazyLock::new(|| {
        format!("{HEARTBEAT_CONTEXT_PROMPT} If nothing needs attention, reply HEARTBEAT_OK.")
    });
    static TOOL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "{HEARTBEAT_CONTEXT_PROMPT} Use heartbeat_respond to report the wake outcome. Set notify=false when nothing needs the user's attention. Set notify=true with notificationText only when the user should be interrupted."
        )
    });
    // The runtime also accepts the poll marker after its delivery hints; any prefix is taken.
    t.ends_with(HEARTBEAT_TRANSCRIPT_PROMPT)
        || matches_prompt(t, &DEFAULT)
        || matches_prompt(t, &TOOL)
        || t.starts_with(HEARTBEAT_TASK_PROMPT_PREFIX) && t.contains(HEARTBEAT_TASK_PROMPT_ACK)
}

static EXEC_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^System \(untrusted\): \[[^\]]*\] Exec (completed|failed|finished)").unwrap()
});

/// An exec-event injection (`System (untrusted): [...] Exec completed ...`).
pub fn is_exec_event<N: View>(message: &N) -> bool {
    str_field(message, "role") == Some("user")
        && EXEC_EVENT.is_match(js_trim(&message_text(message)))
}

fn has_call<N: View>(message: &N) -> bool {
    message
        .field("content")
        .and_then(View::items)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| str_field(b, "type").is_some_and(|t| CALL_BLOCKS.contains(&t)))
        })
}

fn text_blocks_only<N: View>(message: &N) -> Option<Vec<&str>> {
    let content = message.field("content")?;
    if let Some(s) = content.as_str() {
        return Some(vec![s]);
    }
    content
        .items()?
        .iter()
        .map(|b| {
            (str_field(b, "type") == Some("text"))
                .then(|| str_field(b, "text"))
                .flatten()
        })
        .collect()
}

/// An assistant reply that only acknowledges a heartbeat (`HEARTBEAT_OK`, ≤ 300 chars left).
pub fn is_heartbeat_ack<N: View>(message: &N) -> bool {
    if str_field(message, "role") != Some("assistant") || has_call(message) {
        return false;
    }
    text_blocks_only(message)
        .is_some_and(|t| strip_heartbeat_token(&concat(t.into_iter()), true, 300).should_skip)
}

/// An assistant reply that the runtime would not deliver, by the rule `prune-noreply` uses
/// (`crate::noreply::is_silent_blocks`; thinking blocks ignored, no tool calls, not an error
/// or aborted turn).
pub fn is_silent_reply<N: View>(message: &N) -> bool {
    if str_field(message, "role") != Some("assistant")
        || matches!(str_field(message, "stopReason"), Some("error" | "aborted"))
        || has_call(message)
    {
        return false;
    }
    let Some(content) = message.field("content") else {
        return false;
    };
    if let Some(s) = content.as_str() {
        return crate::noreply::is_silent_text(s);
    }
    content.items().is_some_and(|blocks| {
        crate::noreply::is_silent_blocks(
            blocks
                .iter()
                .map(|b| (str_field(b, "type"), str_field(b, "text"))),
        )
    })
}

/// What the boilerplate filter set aside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Boilerplate {
    /// Heartbeat prompts (each dropped together with a directly following acknowledgement or
    /// silent reply).
    pub heartbeat_exchanges: usize,
    /// Silent replies and bare acknowledgements outside heartbeat pairs.
    pub silent_replies: usize,
    /// Exec-event injections.
    pub exec_events: usize,
}

/// Split `messages` into those that carry conversation and what was boilerplate.
pub fn filter_boilerplate<'a>(messages: &[&'a Value]) -> (Vec<&'a Value>, Boilerplate) {
    let mut kept = Vec::with_capacity(messages.len());
    let mut stats = Boilerplate::default();
    let mut i = 0;
    while i < messages.len() {
        let m = messages[i];
        if is_heartbeat_prompt(m) {
            // The prompt is boilerplate whatever follows; a bare acknowledgement goes with it.
            let ack = messages
                .get(i + 1)
                .is_some_and(|n| is_heartbeat_ack(*n) || is_silent_reply(*n));
            stats.heartbeat_exchanges += 1;
            i += if ack { 2 } else { 1 };
            continue;
        }
        if is_exec_event(m) {
            stats.exec_events += 1;
        } else if is_silent_reply(m) || is_heartbeat_ack(m) {
            stats.silent_replies += 1;
        } else {
            kept.push(m);
        }
        i += 1;
    }
    (kept, stats)
}

/// Whether any message left after [`filter_boilerplate`] is real conversation.
pub fn contains_real_conversation(messages: &[&Value]) -> bool {
    (0..messages.len()).any(|i| is_real_conversation(messages, i))
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
