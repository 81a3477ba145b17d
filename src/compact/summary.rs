//! The deterministic summary that replaces the summarised messages, and its file lists.
//!
//! Built only from what is being summarised (plus the previous compaction it folds in), so the
//! same transcript always gives the same text apart from the timestamp in the first line:
//!
//! ```text
//! [Offline compaction by <tool> at <ISO>; no model was used; facts below are extracted mechanically.]
//!
//! ## Framing request          the session's first real user message, quoted (≤ 2000 chars)
//! ## Previous summary         the previous compaction's summary, carried forward (≤ 4000)
//! ## Activity                 message counts by role, time span, boilerplate omitted, images
//! ## Tools called             name ×count (k errors), ≤ 20 rows
//! ## Tool Failures            as the runtime's safeguard writes them (≤ 8 lines, 240 chars)
//! ## User requests            oldest 5 and newest 10, whitespace collapsed, ≤ 200 chars each
//! <read-files> / <modified-files>   ≤ 30 paths and 2000 chars each
//! ```
//!
//! Caps keep the summary a few KB (at most about 16 KB whatever the input): a longer framing
//! request is cut with a `[… shortened: N more characters]` line (an already shortened one
//! carried from an earlier offline summary is not cut again); a longer previous summary keeps
//! its first 1500 and last 2500 characters with a marker between; longer tool tables and file
//! blocks end with `… and N more` (`details` keeps every file). Lengths count UTF-16 units.
//! An earlier offline summary (recognised by its first line) is carried without its first
//! line, its framing section (re-emitted at the top) and its file blocks (merged into the new
//! lists). No closing `</summary>` tag survives, in any letter case or spacing.
//!
//! File lists follow the runtime: `read`/`write`/`edit` tool calls with a string
//! `arguments.path`; modified = edited ∪ written, read = read − modified, both sorted by UTF-16
//! code units, merged with the previous compaction's `details` unless it came from a hook.
//! When the summarised range holds no real conversation (spec § 12) the runtime safeguard's
//! structured fallback takes the place of the sections from `## Previous summary` to
//! `## User requests` (the first line, the framing request and the file blocks stay), so the
//! boundary still stops re-triggering.
//!
//! With an operator's summariser ([`wrap_external`]) the first line says that its command
//! wrote the body (not the runtime's model), the framing request stays quoted under its
//! heading before the command's text, and the file blocks follow it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::classify::{self, Boilerplate, collapse_space, is_js_space, js_trim};
use super::fileops::{file_lists, format_file_operations};
use super::{context_message, str_field};

/// First line marker; also how an earlier offline summary is recognised.
pub const HEADER_PREFIX: &str = "[Offline compaction by ";
const FRAMING_HEADING: &str = "## Framing request";
const MAX_TOOL_FAILURES: usize = 8;
const MAX_TOOL_FAILURE_CHARS: usize = 240;
const MAX_REQUEST_CHARS: usize = 200;
const MAX_REQUESTS_HEAD: usize = 5;
const MAX_REQUESTS_TAIL: usize = 10;
/// The framing request is quoted up to this many UTF-16 units, then marked as shortened.
pub const MAX_FRAMING_CHARS: usize = 2000;
/// A previous summary carried forward keeps this many UTF-16 units of its start and of its
/// end, with a marker for what was left out between them.
pub const MAX_PREVIOUS_HEAD_CHARS: usize = 1500;
pub const MAX_PREVIOUS_TAIL_CHARS: usize = 2500;
/// Rows of the tools table.
pub const MAX_TOOL_ROWS: usize = 20;

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
    let carried = previous_summary
        .map(carried_forward)
        .filter(|p| !p.is_empty())
        .map(|p| cap_previous(&p));
    let framing = framing_request(input, &real_candidates, previous_summary);
    let mut text = header_line(input.generator, input.now);
    if let Some(f) = &framing {
        text.push_str(&format!("\n\n{FRAMING_HEADING}\n{}", quote(f)));
    }
    if boilerplate_only {
        text.push_str("\n\n");
        text.push_str(&fallback_summary(carried.as_deref()));
    } else {
        if let Some(prev) = &carried {
            text.push_str(&format!("\n\n## Previous summary\n{prev}"));
        }
        text.push_str("\n\n## Activity\n");
        text.push_str(&activity(&input.entries, &all, &by_role, boilerplate));
        text.push_str(&tools_section(&all));
        text.push_str(&tool_failures_section(&all));
        text.push_str(&requests_section(&input.entries, &real_candidates));
    }
    text.push_str(&format_file_operations(&read_files, &modified_files));
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

static CLOSING_TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)<\s*/\s*summary\s*>").unwrap());

/// Never let a summary close the runtime's `<summary>` wrapper early: every closing tag, in
/// any letter case and with any whitespace inside it, gets its slash escaped (`<\/summary>`).
pub fn sanitize(text: &str) -> String {
    CLOSING_TAG
        .replace_all(text, |c: &regex::Captures| c[0].replace('/', "\\/"))
        .into_owned()
}

/// The marker that ends a shortened text.
fn shortened(more: usize) -> String {
    format!("[… shortened: {more} more characters]")
}

/// `text` cut to `max` UTF-16 units (never inside a surrogate pair) plus a marker line
/// saying how much was left out; unchanged when it fits.
pub fn cap_text(text: &str, max: usize) -> String {
    let total = text.encode_utf16().count();
    if total <= max {
        return text.to_owned();
    }
    let head = utf16_prefix(text, max);
    let more = total - head.encode_utf16().count();
    format!(
        "{}\n{}",
        head.trim_end_matches(is_js_space),
        shortened(more)
    )
}

/// The longest prefix of `text` of at most `max` UTF-16 units.
fn utf16_prefix(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        if used + c.len_utf16() > max {
            return &text[..i];
        }
        used += c.len_utf16();
    }
    text
}

/// The longest suffix of `text` of at most `max` UTF-16 units.
fn utf16_suffix(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices().rev() {
        if used + c.len_utf16() > max {
            return &text[i + c.len_utf16()..];
        }
        used += c.len_utf16();
    }
    text
}

/// A previous summary as carried forward: its start and its end, with the middle left out
/// (and marked) when it is longer than both together.
fn cap_previous(text: &str) -> String {
    let total = text.encode_utf16().count();
    if total <= MAX_PREVIOUS_HEAD_CHARS + MAX_PREVIOUS_TAIL_CHARS {
        return text.to_owned();
    }
    let head = utf16_prefix(text, MAX_PREVIOUS_HEAD_CHARS);
    let tail = utf16_suffix(text, MAX_PREVIOUS_TAIL_CHARS);
    let more = total - head.encode_utf16().count() - tail.encode_utf16().count();
    format!(
        "{}\n[… {more} characters of the previous summary left out …]\n{}",
        head.trim_end_matches(is_js_space),
        tail.trim_start_matches(is_js_space)
    )
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
        let text = f
            .lines()
            .map(|l| l.strip_prefix("> ").or(l.strip_prefix('>')).unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        // Already shortened when it was first quoted (the marker adds a few characters).
        return Some(if text.encode_utf16().count() <= MAX_FRAMING_CHARS + 64 {
            text
        } else {
            cap_text(&text, MAX_FRAMING_CHARS)
        });
    }
    let first = input.framing_before.or_else(|| {
        real.iter().enumerate().find_map(|(i, m)| {
            (str_field(m, "role") == Some("user") && classify::is_real_conversation(real, i))
                .then_some(*m)
        })
    })?;
    let text = classify::message_text(first);
    (!js_trim(&text).is_empty()).then(|| cap_text(js_trim(&text), MAX_FRAMING_CHARS))
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
