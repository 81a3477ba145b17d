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
//! ## Activity (<first> to <last>)   message counts by role, time span, boilerplate omitted, images
//! ## Tools called             name ×count (k errors), ≤ 20 rows
//! ## Tool Failures            as the runtime's safeguard writes them (≤ 8 lines, 240 chars)
//! ## User requests            oldest 5 and newest 10, whitespace collapsed, ≤ 200 chars each
//! <read-files> / <modified-files>   every file, as the runtime lists them
//! ```
//!
//! Caps keep the summary a few KB: a longer framing
//! request is cut with a `[… shortened: N more characters]` line (an already shortened one
//! carried from an earlier offline summary is not cut again); a longer previous summary keeps
//! its first 1500 and last 2500 characters with a marker between; a longer tool table ends with
//! `… and N more`. The file blocks are never shortened: they name every file touched.
//! Whatever remains too long
//! (an operator's summariser may print anything) is cut as the runtime's safeguard cuts its
//! own summaries: at 16,000 characters in all, the file blocks kept, with its
//! `[Compaction summary truncated to fit budget]` marker. Lengths count UTF-16 units.
//! A carried summary loses its `<read-files>` / `<modified-files>` blocks, whose files are
//! merged into the new lists: the blocks appear once, at the end. An earlier offline summary
//! (recognised by its first line) also loses its first line and its framing section
//! (re-emitted at the top), and is flattened: what its own previous-summary section held comes
//! first, then its own sections one heading level down (`### Activity (<first> to <last>)`,
//! `### Tools called`, …), so after any number of compactions there is one previous-summary
//! section, every activity section names the span it covers (oldest first) and the newest is
//! the only one at the top level. Other summaries (a model's) are carried verbatim otherwise.
//! No closing `</summary>` tag survives, in any letter case or spacing.
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

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::classify::{self, Boilerplate, collapse_space};
use super::fileops::format_file_operations;
use super::str_field;
pub use super::summary_build::SummaryBuilder;
pub use super::summary_text::sanitize;
use super::summary_text::{cap_previous, cap_summary, cap_text, quote, truncate_utf16};
use super::view::View;
use crate::js::js_trim;

/// First line marker; also how an earlier offline summary is recognised.
pub const HEADER_PREFIX: &str = "[Offline compaction by ";
const FRAMING_HEADING: &str = "## Framing request";
const PREVIOUS_HEADING: &str = "## Previous summary";
/// The heading of the activity sections, followed by the time span they cover.
const ACTIVITY_HEADING: &str = "## Activity";
/// The first line of an activity section.
const ACTIVITY_FIRST_LINE: &str = "- Messages summarized: ";
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

/// Build the summary of entry values (a wrapper around [`SummaryBuilder`]).
pub fn build(input: &SummaryInput) -> Summary {
    let mut b = SummaryBuilder::default();
    for e in &input.entries {
        b.push(*e);
    }
    finish(
        b,
        input.previous,
        input.framing_before,
        input.generator,
        input.now,
    )
}

/// The summary of what `b` was fed. `previous` is the previous compaction entry folded in;
/// `framing_before` the session's first framing candidate when it lies before the range.
pub fn finish(
    b: SummaryBuilder,
    previous: Option<&Value>,
    framing_before: Option<&Value>,
    generator: &str,
    now: &str,
) -> Summary {
    let boilerplate_only = !b.real_found;
    let previous_summary = previous.and_then(|p| str_field(p, "summary"));
    let carried = previous_summary.map(carried_forward).unwrap_or_default();
    let carried_files = (carried.read_files, carried.modified_files);
    let carried = Some(carried.text)
        .filter(|p| !p.is_empty())
        .map(|p| cap_previous(&p, MAX_PREVIOUS_HEAD_CHARS, MAX_PREVIOUS_TAIL_CHARS));
    let framing = framing_request(previous_summary, framing_before, &b);
    let mut text = header_line(generator, now);
    if let Some(f) = &framing {
        text.push_str(&format!("\n\n{FRAMING_HEADING}\n{}", quote(f)));
    }
    if boilerplate_only {
        text.push_str("\n\n");
        text.push_str(&fallback_summary(carried.as_deref()));
    } else {
        if let Some(prev) = &carried {
            text.push_str(&format!("\n\n{PREVIOUS_HEADING}\n{prev}"));
        }
        text.push_str(&format!("\n\n{ACTIVITY_HEADING} ({})\n", b.span()));
        text.push_str(&b.activity());
        text.push_str(&b.tools_section());
        text.push_str(&b.failures_section());
        text.push_str(&b.requests_section());
    }
    let mut files = b.files.clone();
    files.add(carried_files.0, carried_files.1);
    let (read_files, modified_files) = files.finish(previous);
    let files = format_file_operations(&read_files, &modified_files);
    Summary {
        text: cap_summary(&sanitize(&text), &sanitize(&files)),
        read_files,
        modified_files,
        boilerplate_only,
        messages: b.messages,
        by_role: b.by_role,
        boilerplate: b.boilerplate,
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
    let files = format_file_operations(&summary.read_files, &summary.modified_files);
    cap_summary(&sanitize(&out), &sanitize(&files))
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
    previous: Option<&str>,
    framing_before: Option<&Value>,
    b: &SummaryBuilder,
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
    match framing_before {
        Some(first) => {
            let text = classify::message_text(first);
            (!js_trim(&text).is_empty()).then(|| cap_text(js_trim(&text), MAX_FRAMING_CHARS))
        }
        None => b.first_real_user.clone().flatten(),
    }
}

/// An earlier summary as carried forward, and the files its own file blocks named.
#[derive(Debug, Default)]
struct Carried {
    text: String,
    read_files: Vec<String>,
    modified_files: Vec<String>,
}

/// An earlier summary as carried forward. Any summary loses its `<read-files>` /
/// `<modified-files>` blocks (their files are merged into the new lists, whose blocks end the
/// new summary). An offline one also loses its first line and its framing section
/// (re-emitted at the top), and is flattened ([`flatten_offline`]): its own previous summary
/// is not nested in a second previous-summary section, and its sections are kept one level
/// down under the new one's. Any other summary is kept verbatim.
fn carried_forward(previous: &str) -> Carried {
    let mut carried = Carried::default();
    let offline = previous.starts_with(HEADER_PREFIX);
    let lines: Vec<&str> = previous.lines().skip(usize::from(offline)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if offline && line == FRAMING_HEADING {
            i += 1;
            while lines.get(i).is_some_and(|l| l.starts_with('>')) {
                i += 1;
            }
            continue;
        }
        let tag = match js_trim(line) {
            "<read-files>" => Some(("</read-files>", &mut carried.read_files)),
            "<modified-files>" => Some(("</modified-files>", &mut carried.modified_files)),
            _ => None,
        };
        // A block is dropped only when it is closed (an unclosed tag is text like any other).
        if let Some((close, files)) = tag
            && let Some(len) = lines[i + 1..].iter().position(|l| js_trim(l) == close)
        {
            files.extend(
                lines[i + 1..i + 1 + len]
                    .iter()
                    .map(|l| js_trim(l))
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
            i += len + 2;
            continue;
        }
        out.push(line);
        i += 1;
    }
    carried.text = if offline {
        flatten_offline(&out)
    } else {
        js_trim(&out.join("\n")).to_owned()
    };
    carried
}

/// Whether line `i` opens an offline summary's activity section (its heading, with or
/// without the time span, followed by the messages line).
fn is_activity_heading(lines: &[&str], i: usize) -> bool {
    let heading = lines[i];
    (heading == ACTIVITY_HEADING || heading.starts_with(&format!("{ACTIVITY_HEADING} (")))
        && lines
            .get(i + 1)
            .is_some_and(|l| l.starts_with(ACTIVITY_FIRST_LINE))
}

/// The body of an earlier offline summary (without its first line, framing section and file
/// blocks) as the content of the new summary's one previous-summary section: what its own
/// previous-summary section held (flattened the same way, for summaries written before
/// sections were flattened), then its own sections from its last activity section on, each
/// heading one level down (`### Activity (<span>)`, `### Tools called`, …) and the activity
/// heading labelled with the span it covers. A body without an activity section (the
/// fallback sections of a boilerplate-only range, an operator's summariser text) is kept as
/// it is.
fn flatten_offline(lines: &[&str]) -> String {
    let Some(own) = (0..lines.len())
        .rev()
        .find(|&i| is_activity_heading(lines, i))
    else {
        return js_trim(&lines.join("\n")).to_owned();
    };
    let before = &lines[..own];
    let start = before.iter().position(|l| !js_trim(l).is_empty());
    let earlier = match start {
        Some(s) if before[s] == PREVIOUS_HEADING => flatten_offline(&before[s + 1..]),
        _ => js_trim(&before.join("\n")).to_owned(),
    };
    let mut out: Vec<String> = Vec::new();
    if !earlier.is_empty() {
        out.push(earlier);
        out.push(String::new());
    }
    for (k, line) in lines[own..].iter().enumerate() {
        if k == 0 && *line == ACTIVITY_HEADING {
            // Written before activity headings named their span: take it from the first line.
            let span = lines[own + 1]
                .rsplit_once("; ")
                .map_or("?", |(_, span)| span);
            out.push(format!("#{ACTIVITY_HEADING} ({span})"));
        } else if line.starts_with("## ") {
            out.push(format!("#{line}"));
        } else {
            out.push((*line).to_owned());
        }
    }
    js_trim(&out.join("\n")).to_owned()
}

pub(super) fn tool_calls<N: View>(m: &N) -> impl Iterator<Item = &N> {
    m.field("content")
        .and_then(View::items)
        .filter(|_| str_field(m, "role") == Some("assistant"))
        .into_iter()
        .flatten()
        .filter(|b| {
            matches!(
                str_field(*b, "type"),
                Some("toolCall" | "toolUse" | "functionCall")
            )
        })
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
