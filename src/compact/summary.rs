//! The deterministic summary that replaces the summarised messages, and its file lists.
//!
//! Built only from what is being summarised (plus the previous compaction it folds in), so the
//! same transcript always gives the same text apart from the timestamp in the first line:
//!
//! ```text
//! [Offline compaction by <tool> at <ISO>; no model was used; facts below are extracted mechanically.]
//!
//! ## Framing request          the session's first real user message, quoted in full
//! ## Previous summary         the previous compaction's summary, carried forward
//! ## Activity                 message counts by role, time span, boilerplate omitted, images
//! ## Tools called             name ×count (k errors)
//! ## Tool Failures            as the runtime's safeguard writes them (≤ 8 lines, 240 chars)
//! ## User requests            oldest first, whitespace collapsed, ≤ 200 characters each
//! <read-files> / <modified-files>
//! ```
//!
//! File lists follow the runtime: `read`/`write`/`edit` tool calls with a string
//! `arguments.path`; modified = edited ∪ written, read = read − modified, both sorted by UTF-16
//! code units, merged with the previous compaction's `details` unless it came from a hook.
//! When the summarised range holds no real conversation (spec § 12) the runtime safeguard's
//! structured fallback is used instead, so the boundary still stops re-triggering.
//!
//! With an operator's summariser ([`wrap_external`]) the first line says that its command
//! wrote the body (not the runtime's model), the framing request stays quoted under its
//! heading before the command's text, and the file blocks follow it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::classify::{self, Boilerplate, collapse_space, js_trim};
use super::fileops::{file_lists, format_file_operations};
use super::{context_message, str_field};

/// First line marker; also how an earlier offline summary is recognised.
pub const HEADER_PREFIX: &str = "[Offline compaction by ";
const FRAMING_HEADING: &str = "## Framing request";
const MAX_TOOL_FAILURES: usize = 8;
const MAX_TOOL_FAILURE_CHARS: usize = 240;
const MAX_REQUEST_CHARS: usize = 200;
const MAX_REQUESTS_HEAD: usize = 10;
const MAX_REQUESTS_TAIL: usize = 20;

/// What to summarise.
pub struct SummaryInput<'a> {
    /// Context entries of the summarised range, in path order (no compaction entries).
    pub entries: Vec<&'a Value>,
    /// The previous compaction entry whose summary is folded in, if any.
    pub previous: Option<&'a Value>,
    /// The session's first real user message when it lies before the summarised range.
    pub framing_before: Option<&'a Value>,
    /// Tool name and version for the first line, e.g. `clawkeeper 0.1.0`.
    pub generator: &'a str,
    /// ISO time of the compaction.
    pub now: &'a str,
}

/// The summary with what was learnt while building it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
    /// No real conversation in the summarised range: the fallback summary was used.
    pub boilerplate_only: bool,
    pub messages: usize,
    pub by_role: BTreeMap<String, usize>,
    pub boilerplate: Boilerplate,
    /// The session's framing request as quoted in the summary (also kept around an
    /// operator's summariser text).
    pub framing: Option<String>,
}

impl Summary {
    /// `details` for the compaction entry: the file lists and a note on who wrote it.
    pub fn details(&self, tool: &str, version: &str) -> Value {
        json!({
            "readFiles": self.read_files,
            "modifiedFiles": self.modified_files,
            "offline": {"tool": tool, "version": version, "boilerplateOnly": self.boilerplate_only},
        })
    }
}

/// The first line of every offline summary.
pub fn header_line(generator: &str, now: &str) -> String {
    format!(
        "{HEADER_PREFIX}{generator} at {now}; no model was used; facts below are extracted mechanically.]"
    )
}

/// Build the summary.
pub fn build(input: &SummaryInput) -> Summary {
    let projected: Vec<Cow<Value>> = input
        .entries
        .iter()
        .filter_map(|e| context_message(e))
        .collect();
    let all: Vec<&Value> = projected.iter().map(|c| c.as_ref()).collect();
    let (real_candidates, boilerplate) = classify::filter_boilerplate(&all);
    let boilerplate_only = !classify::contains_real_conversation(&real_candidates);
    let (read_files, modified_files) = file_lists(&all, input.previous);
    let mut by_role = BTreeMap::new();
    for m in &all {
        *by_role
            .entry(str_field(m, "role").unwrap_or("unknown").to_owned())
            .or_insert(0) += 1;
    }
    let previous_summary = input.previous.and_then(|p| str_field(p, "summary"));
    let header = header_line(input.generator, input.now);
    let framing = framing_request(input, &real_candidates, previous_summary);
    let text = if boilerplate_only {
        format!("{header}\n\n{}", fallback_summary(previous_summary))
    } else {
        let mut out = header;
        if let Some(f) = &framing {
            out.push_str(&format!("\n\n{FRAMING_HEADING}\n{}", quote(f)));
        }
        if let Some(prev) = previous_summary
            .map(carried_forward)
            .filter(|p| !p.is_empty())
        {
            out.push_str(&format!("\n\n## Previous summary\n{prev}"));
        }
        out.push_str("\n\n## Activity\n");
        out.push_str(&activity(&input.entries, &all, &by_role, boilerplate));
        out.push_str(&tools_section(&all));
        out.push_str(&tool_failures_section(&all));
        out.push_str(&requests_section(&input.entries, &real_candidates));
        out.push_str(&format_file_operations(&read_files, &modified_files));
        out
    };
    Summary {
        text: sanitize(&text),
        read_files,
        modified_files,
        boilerplate_only,
        messages: all.len(),
        by_role,
        boilerplate,
        framing,
    }
}

/// The first line of a summary whose body an operator's summariser command wrote: it says
/// so, names the command (whitespace collapsed, at most 60 characters) and that it was not
/// the runtime's model.
pub fn external_header_line(generator: &str, now: &str, command: &str) -> String {
    let command = truncate_utf16(&collapse_space(command).replace('`', "'"), 60);
    format!(
        "{HEADER_PREFIX}{generator} at {now}; summary written offline by the operator's summariser command `{command}`, not by the runtime's model; file lists extracted mechanically.]"
    )
}

/// The summary to use around an operator's summariser output: its own first line, the
/// framing request under its heading, their text, and the same file blocks as the built-in
/// summary.
pub fn wrap_external(
    text: &str,
    summary: &Summary,
    generator: &str,
    now: &str,
    command: &str,
) -> String {
    let mut out = external_header_line(generator, now, command);
    if let Some(f) = &summary.framing {
        out.push_str(&format!("\n\n{FRAMING_HEADING}\n{}", quote(f)));
    }
    out.push_str("\n\n");
    out.push_str(js_trim(text));
    out.push_str(&format_file_operations(
        &summary.read_files,
        &summary.modified_files,
    ));
    sanitize(&out)
}

/// Never let a summary close the runtime's `<summary>` wrapper early.
fn sanitize(text: &str) -> String {
    text.replace("</summary>", "<\\/summary>")
}

/// The runtime safeguard's `buildStructuredFallbackSummary`.
pub fn fallback_summary(previous: Option<&str>) -> String {
    const SECTIONS: [&str; 5] = [
        "## Decisions",
        "## Open TODOs",
        "## Constraints/Rules",
        "## Pending user asks",
        "## Exact identifiers",
    ];
    let prev = previous.map(js_trim).unwrap_or("");
    if !prev.is_empty() {
        let lines: Vec<&str> = prev
            .lines()
            .map(js_trim)
            .filter(|l| !l.is_empty())
            .collect();
        let mut cursor = 0;
        let has_all = SECTIONS
            .iter()
            .all(|h| match lines[cursor..].iter().position(|l| l == h) {
                Some(i) => {
                    cursor += i + 1;
                    true
                }
                None => false,
            });
        if has_all {
            return prev.to_owned();
        }
    }
    let decisions = if prev.is_empty() {
        "No prior history."
    } else {
        prev
    };
    format!(
        "## Decisions\n{decisions}\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured."
    )
}

fn quote(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_owned()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The framing section of an earlier offline summary, already quoted.
fn previous_framing(previous: &str) -> Option<String> {
    if !previous.starts_with(HEADER_PREFIX) {
        return None;
    }
    let start = previous.find(&format!("\n{FRAMING_HEADING}\n"))? + FRAMING_HEADING.len() + 2;
    let quoted: Vec<&str> = previous[start..]
        .lines()
        .take_while(|l| l.starts_with('>'))
        .collect();
    (!quoted.is_empty()).then(|| quoted.join("\n"))
}

fn framing_request(
    input: &SummaryInput,
    real: &[&Value],
    previous: Option<&str>,
) -> Option<String> {
    if let Some(f) = previous.and_then(previous_framing) {
        return Some(
            f.lines()
                .map(|l| l.strip_prefix("> ").or(l.strip_prefix('>')).unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    let first = input.framing_before.or_else(|| {
        real.iter().enumerate().find_map(|(i, m)| {
            (str_field(m, "role") == Some("user") && classify::is_real_conversation(real, i))
                .then_some(*m)
        })
    })?;
    let text = classify::message_text(first);
    (!js_trim(&text).is_empty()).then(|| js_trim(&text).to_owned())
}

/// An earlier summary as carried forward: an offline one loses its first line, its framing
/// section (re-emitted at the top) and its file blocks (merged into the new lists); any other
/// summary is kept verbatim.
fn carried_forward(previous: &str) -> String {
    if !previous.starts_with(HEADER_PREFIX) {
        return js_trim(previous).to_owned();
    }
    let mut out = Vec::new();
    let mut lines = previous.lines().skip(1).peekable();
    let mut in_block = false;
    while let Some(line) = lines.next() {
        if line == FRAMING_HEADING {
            while lines.peek().is_some_and(|l| l.starts_with('>')) {
                lines.next();
            }
            continue;
        }
        if line == "<read-files>" || line == "<modified-files>" {
            in_block = true;
            continue;
        }
        if in_block {
            in_block = !(line == "</read-files>" || line == "</modified-files>");
            continue;
        }
        out.push(line);
    }
    js_trim(&out.join("\n")).to_owned()
}

fn activity(
    entries: &[&Value],
    all: &[&Value],
    by_role: &BTreeMap<String, usize>,
    b: Boilerplate,
) -> String {
    let roles: Vec<String> = by_role.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let first = entries
        .first()
        .and_then(|e| str_field(e, "timestamp"))
        .unwrap_or("?");
    let last = entries
        .last()
        .and_then(|e| str_field(e, "timestamp"))
        .unwrap_or("?");
    let mut out = format!(
        "- Messages summarized: {} ({}); {first} to {last}",
        all.len(),
        roles.join(", ")
    );
    if b != Boilerplate::default() {
        out.push_str(&format!(
            "\n- Boilerplate omitted: {} heartbeat exchanges, {} silent replies, {} exec events",
            b.heartbeat_exchanges, b.silent_replies, b.exec_events
        ));
    }
    let images: usize = all
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|b| str_field(b, "type") == Some("image"))
        .count();
    if images > 0 {
        out.push_str(&format!("\n- Images: {images}"));
    }
    out
}

pub(super) fn tool_calls<'a>(m: &'a Value) -> impl Iterator<Item = &'a Value> + 'a {
    m.get("content")
        .and_then(Value::as_array)
        .filter(|_| str_field(m, "role") == Some("assistant"))
        .into_iter()
        .flatten()
        .filter(|b| {
            matches!(
                str_field(b, "type"),
                Some("toolCall" | "toolUse" | "functionCall")
            )
        })
}

fn tools_section(all: &[&Value]) -> String {
    let mut calls: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for m in all {
        for b in tool_calls(m) {
            calls
                .entry(str_field(b, "name").unwrap_or("?"))
                .or_default()
                .0 += 1;
        }
        if str_field(m, "role") == Some("toolResult")
            && m.get("isError") == Some(&Value::Bool(true))
        {
            calls
                .entry(str_field(m, "toolName").unwrap_or("?"))
                .or_default()
                .1 += 1;
        }
    }
    if calls.is_empty() {
        return String::new();
    }
    let mut rows: Vec<_> = calls.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    let lines: Vec<String> = rows
        .iter()
        .map(|(name, (n, err))| match err {
            0 => format!("- {name} ×{n}"),
            1 => format!("- {name} ×{n} (1 error)"),
            e => format!("- {name} ×{n} ({e} errors)"),
        })
        .collect();
    format!("\n\n## Tools called\n{}", lines.join("\n"))
}

/// Cut to `max` UTF-16 units without splitting a surrogate pair, adding `...` when cut.
fn truncate_utf16(text: &str, max: usize) -> String {
    if text.encode_utf16().count() <= max {
        return text.to_owned();
    }
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        if used + c.len_utf16() > max.saturating_sub(3) {
            break;
        }
        used += c.len_utf16();
        out.push(c);
    }
    out + "..."
}

/// The safeguard's `collectToolFailures` + `formatToolFailuresSection`.
fn tool_failures_section(all: &[&Value]) -> String {
    let mut seen = BTreeSet::new();
    let mut lines = Vec::new();
    for m in all
        .iter()
        .filter(|m| str_field(m, "role") == Some("toolResult"))
    {
        if m.get("isError") != Some(&Value::Bool(true)) {
            continue;
        }
        let id = str_field(m, "toolCallId").unwrap_or("");
        if id.is_empty() || !seen.insert(id) {
            continue;
        }
        let name = str_field(m, "toolName")
            .filter(|n| !js_trim(n).is_empty())
            .unwrap_or("tool");
        let details = m.get("details").filter(|d| d.is_object());
        let mut meta = Vec::new();
        if let Some(s) = details.and_then(|d| str_field(d, "status")) {
            meta.push(format!("status={s}"));
        }
        if let Some(code) = details
            .and_then(|d| d.get("exitCode"))
            .and_then(Value::as_f64)
        {
            meta.push(format!("exitCode={}", crate::jsjson::js_number(code)));
        }
        let text = collapse_space(&classify::message_text(
            &json!({"content": m.get("content")}),
        ));
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
        lines.push(format!(
            "- {name}{meta}: {}",
            truncate_utf16(&text, MAX_TOOL_FAILURE_CHARS)
        ));
    }
    if lines.is_empty() {
        return String::new();
    }
    let more = lines.len().saturating_sub(MAX_TOOL_FAILURES);
    lines.truncate(MAX_TOOL_FAILURES);
    if more > 0 {
        lines.push(format!("- ...and {more} more"));
    }
    format!("\n\n## Tool Failures\n{}", lines.join("\n"))
}

fn requests_section(entries: &[&Value], real: &[&Value]) -> String {
    // Message (by address inside its entry) → the entry's timestamp.
    let stamps: std::collections::HashMap<*const Value, &str> = entries
        .iter()
        .filter_map(|e| {
            let m = e.get("message")?;
            Some((m as *const Value, str_field(e, "timestamp")?))
        })
        .collect();
    let mut lines = Vec::new();
    for m in real.iter().filter(|m| str_field(m, "role") == Some("user")) {
        let text = collapse_space(&classify::message_text(m));
        if text.is_empty() {
            continue;
        }
        let ts = stamps.get(&(*m as *const Value)).copied().unwrap_or("?");
        lines.push(format!(
            "- {ts}: \"{}\"",
            truncate_utf16(&text, MAX_REQUEST_CHARS)
        ));
    }
    if lines.is_empty() {
        return String::new();
    }
    if lines.len() > MAX_REQUESTS_HEAD + MAX_REQUESTS_TAIL {
        let skipped = lines.len() - MAX_REQUESTS_HEAD - MAX_REQUESTS_TAIL;
        let tail = lines.split_off(lines.len() - MAX_REQUESTS_TAIL);
        lines.truncate(MAX_REQUESTS_HEAD);
        lines.push(format!("- ...{skipped} more requests..."));
        lines.extend(tail);
    }
    format!(
        "\n\n## User requests (oldest first, shortened)\n{}",
        lines.join("\n")
    )
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
