//! The human output of `cleanup`, line for line as `openclaw sessions cleanup` prints it when
//! stdout is not a terminal: the dry-run plan with its action table and label summary, and the
//! applied summaries. clawkeeper prints this plain form on terminals too (OpenClaw adds
//! colours there), so the text is the same wherever it goes.

use serde_json::Value;

use crate::jsjson::Sink;
use crate::json::Json;

use crate::config::Config;
use crate::js::{js_round, js_trim, utf16_len};
use crate::jsjson::js_number;
use crate::maintenance::run::{Preview, Summary};

const ACTION_PAD: usize = 19;

/// `String.prototype.padEnd(n)` (lengths in UTF-16 units).
fn pad_end(s: &str, n: usize) -> String {
    let len = utf16_len(s) as usize;
    if len >= n {
        s.to_string()
    } else {
        format!("{s}{}", " ".repeat(n - len))
    }
}

/// `String(v)` for a JSON value.
pub(crate) fn js_string<T: crate::jsjson::Tree>(v: &T) -> String {
    use crate::jsjson::Node;
    match v.node() {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Number(n) => n.map_or_else(|| "NaN".into(), js_number),
        Node::String(s) => s.to_owned(),
        Node::Array(a) => a
            .iter()
            .map(|x| match x.node() {
                Node::Null => String::new(),
                _ => js_string(x),
            })
            .collect::<Vec<_>>()
            .join(","),
        Node::Object(_) => "[object Object]".into(),
    }
}

pub(crate) fn truthy(v: Option<&Json>) -> Option<&Json> {
    v.filter(|v| crate::config::js_truthy(*v))
}

/// `truncateSessionKey` + padEnd(26).
fn key_cell(key: &str) -> String {
    let units: Vec<u16> = key.encode_utf16().collect();
    let shown = if units.len() <= 26 {
        key.to_string()
    } else {
        format!(
            "{}...{}",
            String::from_utf16_lossy(&units[..16]),
            String::from_utf16_lossy(&units[units.len() - 6..])
        )
    };
    pad_end(&shown, 26)
}

/// `formatTimeAgo(ms)`.
pub fn format_time_ago(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "unknown".into();
    }
    let secs = js_round(ms / 1000.0);
    let mins = js_round(secs / 60.0);
    if mins < 1.0 {
        return "just now".into();
    }
    if mins < 60.0 {
        return format!("{}m ago", js_number(mins));
    }
    let hours = js_round(mins / 60.0);
    if hours < 48.0 {
        return format!("{}h ago", js_number(hours));
    }
    format!("{}d ago", js_number(js_round(hours / 24.0)))
}

pub(crate) fn str_field<'a>(e: &'a Json, k: &str) -> Option<&'a str> {
    e.get(k).and_then(Json::as_str)
}

/// `parseModelRef(raw, provider).model`.
fn model_of_ref(raw: &str) -> String {
    let t = js_trim(raw);
    if t.is_empty() {
        return "gpt-5.5".into();
    }
    match t.find('/') {
        Some(i) if i > 0 && i < t.len() - 1 => {
            let m = js_trim(&t[i + 1..]);
            if m.is_empty() {
                "gpt-5.5".into()
            } else {
                m.to_string()
            }
        }
        _ => t.to_string(),
    }
}

/// `resolvePrimaryStringValue`: a string, or an object's `primary`.
fn primary(v: Option<&Value>) -> Option<String> {
    let s = match v? {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("primary")?.as_str()?,
        _ => return None,
    };
    let t = js_trim(s);
    (!t.is_empty()).then(|| t.to_string())
}

/// The Model column: the entry's override or runtime model, else the agent's or the
/// configured default model, else `gpt-5.5`.
fn display_model(cfg: &Config, key: &str, e: &Json) -> String {
    display_model_or(cfg, key, e, "gpt-5.5")
}

/// [`display_model`] with another built-in default model.
pub(crate) fn display_model_or(cfg: &Config, key: &str, e: &Json, fallback: &str) -> String {
    let agent = key
        .starts_with("agent:")
        .then(|| key.split(':').nth(1).unwrap_or(""));
    let agent_model = agent.and_then(|a| match cfg.get(&["agents", "list"]) {
        Some(Value::Array(list)) => list
            .iter()
            .find(|x| x.get("id").and_then(Value::as_str) == Some(a))
            .and_then(|x| primary(x.get("model"))),
        _ => None,
    });
    let default = agent_model
        .or_else(|| primary(cfg.get(&["agents", "defaults", "model"])))
        .unwrap_or_else(|| fallback.into());
    let provider = str_field(e, "providerOverride")
        .map(js_trim)
        .filter(|s| !s.is_empty());
    if let Some(mo) = str_field(e, "modelOverride")
        .map(js_trim)
        .filter(|s| !s.is_empty())
    {
        let mo = match provider {
            Some(p)
                if mo
                    .to_lowercase()
                    .starts_with(&format!("{}/", p.to_lowercase())) =>
            {
                let rest = js_trim(&mo[p.len() + 1..]);
                if rest.is_empty() { mo } else { rest }
            }
            _ => mo,
        };
        return model_of_ref(mo);
    }
    if let Some(m) = truthy(e.get("model")) {
        return model_of_ref(&js_string(m));
    }
    model_of_ref(&default)
}

fn flags_cell(e: &Json) -> String {
    flags_cell_with(e, |_| {})
}

/// `formatSessionFlagsCell`: the level flags, `system`, `aborted`, what `more` adds (the SQLite
/// era's visibility, owner and participants), then the session id.
pub(crate) fn flags_cell_with(e: &Json, more: impl FnOnce(&mut Vec<String>)) -> String {
    let mut parts = Vec::new();
    for (field, prefix) in [
        ("thinkingLevel", "think:"),
        ("verboseLevel", "verbose:"),
        ("traceLevel", "trace:"),
        ("reasoningLevel", "reasoning:"),
        ("elevatedLevel", "elev:"),
        ("responseUsage", "usage:"),
        ("groupActivation", "activation:"),
    ] {
        if let Some(v) = truthy(e.get(field)) {
            parts.push(format!("{prefix}{}", js_string(v)));
        }
    }
    if truthy(e.get("systemSent")).is_some() {
        parts.push("system".into());
    }
    if truthy(e.get("abortedLastRun")).is_some() {
        parts.push("aborted".into());
    }
    more(&mut parts);
    if let Some(v) = truthy(e.get("sessionId")) {
        parts.push(format!("id:{}", js_string(v)));
    }
    parts.join(" ")
}

/// The label summary of a dry-run plan: per label, the entries kept and pruned.
#[derive(Default)]
pub(crate) struct LabelTally {
    labels: Vec<(String, u64, u64)>,
}

impl LabelTally {
    /// Count one entry under `label` (sanitized and trimmed; empty is `(unlabeled)`).
    pub(crate) fn add(&mut self, label: String, kept: bool) {
        let label = if label.is_empty() {
            "(unlabeled)".to_string()
        } else {
            label
        };
        match self.labels.iter_mut().find(|l| l.0 == label) {
            Some(l) => {
                if kept {
                    l.1 += 1
                } else {
                    l.2 += 1
                }
            }
            None => self.labels.push((label, u64::from(kept), u64::from(!kept))),
        }
    }

    /// The `Summary by Label:` lines, labels in `localeCompare` order padded to the widest as
    /// `width` measures them, then the total.
    pub(crate) fn render(mut self, line: &mut impl FnMut(String), width: fn(&str) -> usize) {
        self.labels.sort_by(|a, b| locale_cmp(&a.0, &b.0));
        let pad = self.labels.iter().map(|l| width(&l.0)).max().unwrap_or(0);
        line(String::new());
        line("Summary by Label:".into());
        for (label, kept, pruned) in &self.labels {
            let fill = pad.saturating_sub(width(label));
            line(format!(
                "{label}{}  {kept} kept, {pruned} pruned",
                " ".repeat(fill)
            ));
        }
        let (k, pr) = self
            .labels
            .iter()
            .fold((0, 0), |acc, l| (acc.0 + l.1, acc.1 + l.2));
        line(format!("Total: {k} kept, {pr} pruned"));
    }
}

/// `sanitizeTerminalText`: escape CR/LF/TAB, drop other control characters and ANSI escapes.
pub(crate) fn sanitize(s: &str) -> String {
    let s = strip_ansi(s)
        .replace('\r', "\\r")
        .replace('\n', "\\n")
        .replace('\t', "\\t");
    s.chars()
        .filter(|c| !matches!(*c as u32, 0..=31 | 127..=159))
        .collect()
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' && it.peek() == Some(&'[') {
            it.next();
            while let Some(&n) = it.peek() {
                it.next();
                if ('@'..='~').contains(&n) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// ASCII punctuation and symbols in the order of the Unicode root collation (DUCET).
const PUNCT_ORDER: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// The base letter of common accented Latin letters, and whether it carried an accent.
fn base_letter(c: char) -> (char, bool) {
    const TABLE: [(&str, char); 14] = [
        ("àáâãäåā", 'a'),
        ("çćč", 'c'),
        ("ďđ", 'd'),
        ("èéêëēěę", 'e'),
        ("ìíîïī", 'i'),
        ("ñńň", 'n'),
        ("òóôõöøō", 'o'),
        ("ùúûüūů", 'u'),
        ("ýÿ", 'y'),
        ("śšş", 's'),
        ("źžż", 'z'),
        ("ř", 'r'),
        ("ť", 't'),
        ("ł", 'l'),
    ];
    let lower = c.to_lowercase().next().unwrap_or(c);
    for (set, base) in TABLE {
        if set.contains(lower) {
            return (base, true);
        }
    }
    (lower, false)
}

/// Collation weights of one string: primary (class, base), secondary (accents), tertiary (case).
fn weights(s: &str) -> (Vec<(u8, u32)>, Vec<bool>, Vec<bool>) {
    let mut primary = Vec::new();
    let mut secondary = Vec::new();
    let mut tertiary = Vec::new();
    for c in s.chars() {
        if c.is_whitespace() {
            primary.push((0, c as u32));
        } else if let Some(i) = PUNCT_ORDER.find(c) {
            primary.push((1, i as u32));
        } else if c.is_ascii_digit() {
            primary.push((2, c as u32));
        } else if c.is_alphabetic() {
            let (base, accent) = base_letter(c);
            primary.push((3, base as u32));
            secondary.push(accent);
            tertiary.push(c.is_uppercase());
        } else {
            primary.push((1, 1000 + c as u32));
        }
    }
    (primary, secondary, tertiary)
}

/// An approximation of `String.prototype.localeCompare` (ICU root collation): punctuation
/// before digits before letters, letters compared without accents and case first, then
/// unaccented before accented, then lowercase before uppercase.
pub(crate) fn locale_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (wa, wb) = (weights(a), weights(b));
    wa.0.cmp(&wb.0)
        .then_with(|| wa.1.cmp(&wb.1))
        .then_with(|| wa.2.cmp(&wb.2))
        .then_with(|| a.cmp(b))
}

/// The lines both eras' dry-run plans open with, up to the disk-budget line. `sqlite` holds
/// the SQLite era's archive lines, printed after the model-run line; without it the JSON
/// era's `repaired` line follows the entries line.
pub(crate) fn render_plan_head<S: Sink + ?Sized>(
    out: &mut S,
    s: &Summary,
    show_agent: bool,
    sqlite: Option<&[String]>,
) {
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    if show_agent {
        line(format!("Agent: {}", s.agent_id));
    }
    line(format!("Session store: {}", s.store_path));
    line(format!("Maintenance mode: {}", mode_text(&s.mode)));
    line(format!(
        "Entries: {} -> {} (remove {})",
        s.before_count,
        s.after_count,
        s.before_count as i64 - s.after_count as i64
    ));
    if sqlite.is_none() {
        line(format!("Would repair sessionFile metadata: {}", s.repaired));
    }
    line(format!("Would prune missing transcripts: {}", s.missing));
    line(format!(
        "Would retire stale direct DM sessions: {}",
        s.dm_scope_retired
    ));
    line(format!(
        "Would prune stale model-run probes: {}",
        s.model_run_pruned
    ));
    for l in sqlite.unwrap_or_default() {
        line(l.clone());
    }
    line(format!("Would prune stale: {}", s.pruned));
    line(format!("Would cap overflow: {}", s.capped));
    if s.unreferenced.scanned_files > 0 {
        line(format!(
            "Would prune unreferenced artifacts: {}",
            s.unreferenced.removed_files
        ));
    }
    if let Some(b) = &s.disk_budget {
        line(format!(
            "Would enforce disk budget: {} -> {} bytes (files {}, entries {})",
            b.total_bytes_before, b.total_bytes_after, b.removed_files, b.removed_entries
        ));
    }
}

/// What both eras' dry-run plans print after their head: nothing for an empty store, else a
/// blank line and the actions heading. Returns the entries newest first by `updated`.
pub(crate) fn planned_actions<'a, S: Sink + ?Sized>(
    out: &mut S,
    before: impl Iterator<Item = (&'a String, &'a Json)>,
    updated: impl Fn(&Json) -> Option<f64>,
) -> Vec<(&'a String, &'a Json)> {
    let mut rows: Vec<(&String, &Json)> = before.collect();
    if rows.is_empty() {
        return rows;
    }
    out.push_str("\nPlanned session actions:\n");
    let ts = |e: &Json| updated(e).unwrap_or(0.0);
    rows.sort_by(|a, b| {
        ts(b.1)
            .partial_cmp(&ts(a.1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

/// An entry's label as the plan's label summary counts it (trimmed as JavaScript trims).
pub(crate) fn label_of(e: &Json) -> String {
    match e.get("label") {
        Some(Json::String(l)) => sanitize(js_trim(l)),
        _ => String::new(),
    }
}

/// The dry-run plan for one store.
pub fn render_plan<S: Sink + ?Sized>(out: &mut S, cfg: &Config, p: &Preview, show_agent: bool) {
    let s = &p.summary;
    render_plan_head(out, s, show_agent, None);
    let rows = planned_actions(out, p.before.iter(), crate::store::updated_at);
    if rows.is_empty() {
        return;
    }
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(
        [
            pad_end("Action", ACTION_PAD),
            pad_end("Key", 26),
            pad_end("Age", 9),
            pad_end("Model", 14),
            "Flags".into(),
        ]
        .join(" "),
    );
    let mut labels = LabelTally::default();
    for (key, e) in &rows {
        let action = p.action(key);
        let updated = crate::store::updated_at(e).filter(|u| *u != 0.0 && !u.is_nan());
        let age = updated.map_or_else(
            || "unknown".into(),
            |u| format_time_ago(crate::maintenance::now_ms() - u),
        );
        let cells = [
            pad_end(action, ACTION_PAD),
            key_cell(key),
            pad_end(&age, 9),
            pad_end(&display_model(cfg, key, e), 14),
            flags_cell(e),
        ];
        line(cells.join(" ").trim_end().to_string());
        labels.add(
            label_of(e),
            action == "keep" || action == "repair-session-file",
        );
    }
    labels.render(&mut line, |l| utf16_len(l) as usize);
}

fn mode_text(v: &Value) -> String {
    js_string(v)
}

/// The applied summaries (`renderAppliedSummaries`), of both eras.
pub fn render_applied(out: &mut String, summaries: &[&Summary]) {
    for (i, s) in summaries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if summaries.len() > 1 {
            out.push_str(&format!("Agent: {}\n", s.agent_id));
        }
        out.push_str(&format!("Session store: {}\n", s.store_path));
        out.push_str(&format!(
            "Applied maintenance. Current entries: {}\n",
            s.applied_count.unwrap_or(0)
        ));
        if s.unreferenced.removed_files > 0 {
            out.push_str(&format!(
                "Pruned unreferenced artifacts: {}\n",
                s.unreferenced.removed_files
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ago() {
        assert_eq!(format_time_ago(10_000.0), "just now");
        assert_eq!(format_time_ago(90_000.0), "2m ago");
        assert_eq!(format_time_ago(3_600_000.0 * 3.0), "3h ago");
        assert_eq!(format_time_ago(86_400_000.0 * 40.0), "40d ago");
        assert_eq!(format_time_ago(-5.0), "unknown");
        // Counts print as JavaScript's template literal prints a number.
        assert_eq!(format_time_ago(1e300), "1.1574074074074075e+292d ago");
    }

    #[test]
    fn cells() {
        assert_eq!(
            key_cell("agent:main:main"),
            format!("agent:main:main{}", " ".repeat(11))
        );
        assert_eq!(
            key_cell("agent:main:telegram:direct:123456789"),
            "agent:main:teleg...456789 "
        );
        assert_eq!(
            flags_cell(&Json::from_value(
                serde_json::json!({"thinkingLevel": "high", "systemSent": true, "sessionId": "s1"})
            )),
            "think:high system id:s1"
        );
        assert_eq!(model_of_ref("openai/gpt-4o"), "gpt-4o");
        assert_eq!(sanitize("a\tb\u{7}"), "a\\tb");
        let mut labels = vec![
            "zeta",
            "Ünïcode",
            "B",
            "b",
            "Alpha",
            "alpha",
            "(unlabeled)",
            "_x",
        ];
        labels.sort_by(|a, b| locale_cmp(a, b));
        assert_eq!(
            labels,
            vec![
                "_x",
                "(unlabeled)",
                "alpha",
                "Alpha",
                "b",
                "B",
                "Ünïcode",
                "zeta"
            ]
        );
    }

    #[test]
    fn the_label_summary_counts_per_label_in_locale_order() {
        let mut tally = LabelTally::default();
        for (label, kept) in [("ops", true), ("", false), ("Ana", true), ("ops", false)] {
            tally.add(label.to_string(), kept);
        }
        let mut lines = Vec::new();
        tally.render(&mut |l| lines.push(l), |l| utf16_len(l) as usize);
        assert_eq!(
            lines,
            vec![
                "",
                "Summary by Label:",
                "(unlabeled)  0 kept, 1 pruned",
                "Ana          1 kept, 0 pruned",
                "ops          1 kept, 1 pruned",
                "Total: 2 kept, 2 pruned",
            ]
        );
    }
}
