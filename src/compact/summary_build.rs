//! The facts of a summary, gathered from the summarised entries fed one at a time.
//!
//! [`SummaryBuilder`] keeps only what the summary prints (counts, the file sets, capped lists
//! of failures and requests, the first framing candidate), so a range of any length is
//! summarised in memory bounded by one entry plus those lists. It applies the same rules, in
//! the same order, as a pass over all messages would: the boilerplate filter (a heartbeat
//! prompt takes a directly following acknowledgement or silent reply with it), the
//! real-conversation test (a tool result counts only with a meaningful user, custom,
//! bash or summary message among the 20 kept messages before it), and the section caps.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde_json::json;

use super::classify::{self, Boilerplate, collapse_space};
use super::fileops::FileOps;
use super::summary::{MAX_FRAMING_CHARS, MAX_TOOL_ROWS, tool_calls};
use super::summary_text::{cap_text, truncate_utf16};
use super::view::View;
use super::{context_message, entry_type, str_field};
use crate::js::js_trim;
use crate::transcript::{Entry, EntryType, Role};

const MAX_TOOL_FAILURES: usize = 8;
const MAX_TOOL_FAILURE_CHARS: usize = 240;
const MAX_REQUEST_CHARS: usize = 200;
const MAX_REQUESTS_HEAD: usize = 5;
const MAX_REQUESTS_TAIL: usize = 10;
/// How far back a tool result looks for a message that makes it real conversation.
const TOOL_RESULT_LOOKBACK: usize = 20;

/// Gathers the summary's facts from the summarised context entries, in path order.
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    /// Timestamp of the first and of the last entry (`None` inside: not a string).
    first_ts: Option<Option<String>>,
    last_ts: Option<Option<String>>,
    pub(super) messages: usize,
    pub(super) by_role: BTreeMap<String, usize>,
    images: usize,
    pub(super) boilerplate: Boilerplate,
    /// The previous message was a heartbeat prompt: an acknowledgement goes with it.
    heartbeat_open: bool,
    /// Of the last kept messages (at most 20): could it make a later tool result real?
    anchors: VecDeque<bool>,
    pub(super) real_found: bool,
    /// The first real user message's text (trimmed, capped; `None` when it has no text).
    pub(super) first_real_user: Option<Option<String>>,
    pub(super) files: FileOps,
    tools: BTreeMap<String, (usize, usize)>,
    failure_ids: HashSet<String>,
    failures: Vec<String>,
    failures_more: usize,
    requests_head: Vec<String>,
    requests_tail: VecDeque<String>,
    requests: usize,
}

impl SummaryBuilder {
    /// Feed the next summarised context entry (a `message`, `custom_message` or
    /// `branch_summary` entry).
    pub fn push<N: View>(&mut self, entry: &N) {
        let ts = str_field(entry, "timestamp");
        if self.first_ts.is_none() {
            self.first_ts = Some(ts.map(str::to_owned));
        }
        match &mut self.last_ts {
            Some(Some(last)) if ts.is_some() => {
                last.clear();
                last.push_str(ts.unwrap_or_default());
            }
            last => *last = Some(ts.map(str::to_owned)),
        }
        if entry_type(entry) == Some("message") {
            // The entry's own message (the context message of a `message` entry).
            if let Some(m) = entry.field("message") {
                self.message(m, ts);
            }
            return;
        }
        let entry = entry.as_value();
        if let Some(m) = context_message(&entry) {
            self.message(m.as_ref(), None);
        }
    }

    /// Feed the context message of the next summarised entry; `own_ts`: the entry's
    /// timestamp, when the message is the entry's own `message`.
    fn message<N: View>(&mut self, m: &N, own_ts: Option<&str>) {
        self.all(m);
        if std::mem::take(&mut self.heartbeat_open)
            && (classify::is_heartbeat_ack(m) || classify::is_silent_reply(m))
        {
            return;
        }
        if classify::is_heartbeat_prompt(m) {
            self.boilerplate.heartbeat_exchanges += 1;
            self.heartbeat_open = true;
        } else if classify::is_exec_event(m) {
            self.boilerplate.exec_events += 1;
        } else if classify::is_silent_reply(m) || classify::is_heartbeat_ack(m) {
            self.boilerplate.silent_replies += 1;
        } else {
            self.kept(m, own_ts);
        }
    }

    /// Feed the next summarised entry when the index alone says what the summary reads of it:
    /// a `toolResult` message that is not an error (`isError` is not `true`). Of such a message
    /// the rules read its role and its image blocks and nothing else (its text, name and
    /// details only make a failure's line), so its line need not be read. Returns `false`,
    /// having fed nothing, for any other entry. Its timestamp is not known: the first and the
    /// last summarised entries must be fed whole, as they give the summary its time span.
    pub fn push_from_index(&mut self, e: &Entry) -> bool {
        if e.kind != EntryType::Message || e.role != Some(Role::ToolResult) || e.is_error() {
            return false;
        }
        let images = vec![json!({ "type": "image" }); e.image_blocks().len()];
        let entry = json!({
            "type": "message",
            "message": { "role": "toolResult", "content": images },
        });
        self.push(&entry);
        true
    }

    /// Every message: counts, images, files, tools and failures.
    fn all<N: View>(&mut self, m: &N) {
        self.messages += 1;
        let role = str_field(m, "role").unwrap_or("unknown");
        match self.by_role.get_mut(role) {
            Some(n) => *n += 1,
            None => {
                self.by_role.insert(role.to_owned(), 1);
            }
        }
        self.images += m
            .field("content")
            .and_then(View::items)
            .into_iter()
            .flatten()
            .filter(|b| str_field(*b, "type") == Some("image"))
            .count();
        self.files.push(m);
        for b in tool_calls(m) {
            self.tool(str_field(b, "name").unwrap_or("?")).0 += 1;
        }
        if str_field(m, "role") == Some("toolResult")
            && m.field("isError").and_then(View::as_bool) == Some(true)
        {
            self.tool(str_field(m, "toolName").unwrap_or("?")).1 += 1;
            self.failure(m);
        }
    }

    fn tool(&mut self, name: &str) -> &mut (usize, usize) {
        if !self.tools.contains_key(name) {
            self.tools.insert(name.to_owned(), (0, 0));
        }
        self.tools.get_mut(name).expect("just inserted")
    }

    /// The safeguard's `collectToolFailures` (deduplicated by call id) and
    /// `formatToolFailuresSection` (at most 8 lines).
    fn failure<N: View>(&mut self, m: &N) {
        let id = str_field(m, "toolCallId").unwrap_or("");
        if id.is_empty() || self.failure_ids.contains(id) {
            return;
        }
        self.failure_ids.insert(id.to_owned());
        if self.failures.len() == MAX_TOOL_FAILURES {
            self.failures_more += 1;
            return;
        }
        let name = str_field(m, "toolName")
            .filter(|n| !js_trim(n).is_empty())
            .unwrap_or("tool");
        let details = m.field("details").filter(|d| d.is_object());
        let mut meta = Vec::new();
        if let Some(s) = details.and_then(|d| str_field(d, "status")) {
            meta.push(format!("status={s}"));
        }
        if let Some(code) = details
            .and_then(|d| d.field("exitCode"))
            .and_then(View::as_f64)
        {
            meta.push(format!("exitCode={}", crate::jsjson::js_number(code)));
        }
        let text = collapse_space(&classify::message_text(m));
        let text = if !text.is_empty() {
            text
        } else if meta.is_empty() {
            "failed (no output)".to_owned()
        } else {
            "failed".to_owned()
        };
        let meta = if meta.is_empty() {
            String::new()
        } else {
            format!(" ({})", meta.join(" "))
        };
        self.failures.push(format!(
            "- {name}{meta}: {}",
            truncate_utf16(&text, MAX_TOOL_FAILURE_CHARS)
        ));
    }

    /// A message the boilerplate filter kept: real conversation, framing, requests.
    fn kept<N: View>(&mut self, m: &N, own_ts: Option<&str>) {
        let role = str_field(m, "role");
        let meaningful = || classify::has_meaningful_conversation(m);
        let real = match role {
            Some("user" | "assistant" | "custom" | "bashExecution" | "branchSummary") => {
                meaningful()
            }
            Some("toolResult") => self.anchors.iter().any(|&a| a),
            _ => false,
        };
        self.real_found |= real;
        let anchor = real
            && matches!(
                role,
                Some("user" | "custom" | "bashExecution" | "branchSummary")
            );
        if self.anchors.len() == TOOL_RESULT_LOOKBACK {
            self.anchors.pop_front();
        }
        self.anchors.push_back(anchor);
        if role != Some("user") {
            return;
        }
        let text = classify::message_text(m);
        if self.first_real_user.is_none() && real {
            let t = js_trim(&text);
            self.first_real_user = Some((!t.is_empty()).then(|| cap_text(t, MAX_FRAMING_CHARS)));
        }
        let text = collapse_space(&text);
        if text.is_empty() {
            return;
        }
        let ts = own_ts.unwrap_or("?");
        let line = format!("- {ts}: \"{}\"", truncate_utf16(&text, MAX_REQUEST_CHARS));
        self.requests += 1;
        if self.requests_head.len() < MAX_REQUESTS_HEAD {
            self.requests_head.push(line);
        } else {
            if self.requests_tail.len() == MAX_REQUESTS_TAIL {
                self.requests_tail.pop_front();
            }
            self.requests_tail.push_back(line);
        }
    }

    /// The time span of the summarised entries: `<first timestamp> to <last timestamp>`
    /// (`?` for one that is not a string).
    pub(super) fn span(&self) -> String {
        let stamp = |t: &Option<Option<String>>| t.clone().flatten().unwrap_or_else(|| "?".into());
        format!("{} to {}", stamp(&self.first_ts), stamp(&self.last_ts))
    }

    /// `## Activity`'s lines.
    pub(super) fn activity(&self) -> String {
        let roles: Vec<String> = self
            .by_role
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        let mut out = format!(
            "- Messages summarized: {} ({}); {}",
            self.messages,
            roles.join(", "),
            self.span()
        );
        let b = self.boilerplate;
        if b != Boilerplate::default() {
            out.push_str(&format!(
                "\n- Boilerplate omitted: {} heartbeat exchanges, {} silent replies, {} exec events",
                b.heartbeat_exchanges, b.silent_replies, b.exec_events
            ));
        }
        if self.images > 0 {
            out.push_str(&format!("\n- Images: {}", self.images));
        }
        out
    }

    /// `## Tools called` (empty without calls).
    pub(super) fn tools_section(&self) -> String {
        if self.tools.is_empty() {
            return String::new();
        }
        let mut rows: Vec<(&String, &(usize, usize))> = self.tools.iter().collect();
        rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
        let mut lines: Vec<String> = rows
            .iter()
            .take(MAX_TOOL_ROWS)
            .map(|(name, (n, err))| {
                let name = truncate_utf16(name, 80);
                match err {
                    0 => format!("- {name} ×{n}"),
                    1 => format!("- {name} ×{n} (1 error)"),
                    e => format!("- {name} ×{n} ({e} errors)"),
                }
            })
            .collect();
        if rows.len() > MAX_TOOL_ROWS {
            let rest = &rows[MAX_TOOL_ROWS..];
            let n: usize = rest.iter().map(|(_, (n, _))| n).sum();
            lines.push(format!("- … and {} more tools ({n} calls)", rest.len()));
        }
        format!("\n\n## Tools called\n{}", lines.join("\n"))
    }

    /// `## Tool Failures` (empty without failures).
    pub(super) fn failures_section(&self) -> String {
        if self.failures.is_empty() {
            return String::new();
        }
        let mut lines = self.failures.clone();
        if self.failures_more > 0 {
            lines.push(format!("- ...and {} more", self.failures_more));
        }
        format!("\n\n## Tool Failures\n{}", lines.join("\n"))
    }

    /// `## User requests` (empty without requests): the oldest 5 and the newest 10.
    pub(super) fn requests_section(&self) -> String {
        if self.requests == 0 {
            return String::new();
        }
        let mut lines = self.requests_head.clone();
        let shown = self.requests_head.len() + self.requests_tail.len();
        if self.requests > shown {
            lines.push(format!("- ...{} more requests...", self.requests - shown));
        }
        lines.extend(self.requests_tail.iter().cloned());
        format!(
            "\n\n## User requests (oldest first, shortened)\n{}",
            lines.join("\n")
        )
    }
}
