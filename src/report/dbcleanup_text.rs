//! The human output of `cleanup` on a SQLite-era agent database, line for line as
//! `openclaw sessions cleanup` of 2026.9.x (and 2026.8.x) prints it when stdout is not a
//! terminal: the dry-run plan (summary lines, the boxed action table of terminal-core's
//! `renderTable` as wide as the terminal, 120 columns when stdout is not one, the label summary).
//! The summary lines, the label summary and the applied lines are the JSON era's
//! (`cleanup_text`).

use crate::jsjson::Sink;
use crate::json::Json;

use super::cleanup_text::{
    LabelTally, flags_cell_with, format_time_ago, js_string, sanitize, truthy,
};
use crate::agentdb::cleanup::{Preview, Rules};
use crate::config::Config;
use crate::js::utf16_len;

/// `getTerminalTableWidth()`: `max(60, process.stdout.columns ?? 120)`, where Node sets
/// `columns` only when stdout is a terminal.
fn table_width() -> usize {
    table_width_for(super::text::terminal_columns())
}

fn table_width_for(columns: Option<usize>) -> usize {
    columns.map_or(120, |c| c.max(60))
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// terminal-core's `wrapLine` for plain text.
fn wrap_line(text: &str, w: usize) -> Vec<String> {
    if w == 0 {
        return vec![text.to_string()];
    }
    let printable = !text.is_empty()
        && text.bytes().all(|b| (b' '..=b'~').contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ');
    if utf16_len(text) as usize <= w && printable {
        return vec![text.to_string()];
    }
    let is_break = |c: &str| matches!(c, " " | "/" | "-" | "_" | ".");
    let mut wrap = Wrap::default();
    let mut has_char = false;
    let mut skip_lf = false;
    for ch in text.chars() {
        has_char = true;
        let ch = if ch == '\t' { ' ' } else { ch };
        if skip_lf && ch == '\n' {
            skip_lf = false;
            continue;
        }
        if ch == '\n' || ch == '\r' {
            skip_lf = ch == '\r';
            wrap.flush(Some(wrap.buf.len()));
            wrap.line_has_output = false;
            continue;
        }
        let cw = 1;
        if wrap.visible + cw > w && wrap.visible > 0 {
            wrap.flush(wrap.last_break);
            if wrap.visible + cw > w && wrap.visible > 0 {
                wrap.flush(None);
            }
        }
        if wrap.visible == 0 && ch == ' ' {
            continue;
        }
        let s = ch.to_string();
        let brk = is_break(&s);
        wrap.buf.push(s);
        wrap.visible += cw;
        skip_lf = false;
        if brk {
            wrap.last_break = Some(wrap.buf.len());
        }
    }
    if !has_char {
        return vec![text.to_string()];
    }
    if wrap.visible > 0 {
        wrap.flush(Some(wrap.buf.len()));
    }
    if wrap.lines.is_empty() {
        vec![String::new()]
    } else {
        wrap.lines
    }
}

/// The state of [`wrap_line`]: the lines so far, and the characters of the current one.
#[derive(Default)]
struct Wrap {
    lines: Vec<String>,
    buf: Vec<String>,
    visible: usize,
    last_break: Option<usize>,
    line_has_output: bool,
}

impl Wrap {
    /// `flushAt`: emit the buffer up to `at` (all of it for `None`).
    fn flush(&mut self, at: Option<usize>) {
        let whole = at.is_none_or(|a| a == 0);
        let left: Vec<String> = if whole {
            std::mem::take(&mut self.buf)
        } else {
            self.buf.drain(..at.unwrap_or(0)).collect()
        };
        if self.visible > 0 || !self.line_has_output {
            self.lines.push(left.concat().trim_end().to_string());
            self.line_has_output = true;
        }
        self.visible = if whole {
            0
        } else {
            self.buf.iter().map(|c| width(c)).sum()
        };
        self.last_break = None;
    }
}

/// terminal-core's `renderTable` (unicode border, padding 1, no colours), `flex` columns
/// marked.
fn render_table(headers: &[(&str, bool)], rows: &[Vec<String>], max_width: usize) -> String {
    let n = headers.len();
    let mut widths: Vec<usize> = (0..n)
        .map(|i| {
            let cell = rows.iter().map(|r| width(&r[i])).max().unwrap_or(0);
            (width(headers[i].0).max(cell) + 2).max(3)
        })
        .collect();
    let min_w: Vec<usize> = headers.iter().map(|h| (width(h.0) + 2).max(3)).collect();
    let total: usize = widths.iter().sum::<usize>() + n + 1;
    if total > max_width {
        let mut over = total - max_width;
        let mut shrink = |idx: &[usize], widths: &mut Vec<usize>| {
            while over > 0 {
                let mut widest: Option<usize> = None;
                for &i in idx {
                    if widths[i] <= min_w[i] {
                        continue;
                    }
                    if widest.is_none_or(|w| widths[i] > widths[w]) {
                        widest = Some(i);
                    }
                }
                let Some(i) = widest else { break };
                widths[i] -= 1;
                over -= 1;
            }
        };
        let flex: Vec<usize> = (0..n).filter(|i| headers[*i].1).collect();
        let rigid: Vec<usize> = (0..n).filter(|i| !headers[*i].1).collect();
        shrink(&flex, &mut widths);
        shrink(&rigid, &mut widths);
    }
    let sum: usize = widths.iter().sum::<usize>() + n + 1;
    if sum < max_width {
        let mut extra = max_width - sum;
        let flex: Vec<usize> = (0..n).filter(|i| headers[*i].1).collect();
        if !flex.is_empty() {
            while extra > 0 {
                let rounds = (extra / flex.len()).max(1);
                for &i in &flex {
                    let amount = rounds.min(extra);
                    widths[i] += amount;
                    extra -= amount;
                    if extra == 0 {
                        break;
                    }
                }
            }
        }
    }
    let hline = |l: &str, m: &str, r: &str| {
        format!(
            "{l}{}{r}",
            widths
                .iter()
                .map(|w| "─".repeat(*w))
                .collect::<Vec<_>>()
                .join(m)
        )
    };
    let mut lines = vec![hline("┌", "┬", "┐")];
    let render_row = |cells: Vec<String>, lines: &mut Vec<String>| {
        let wrapped: Vec<Vec<String>> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| wrap_line(c, widths[i].saturating_sub(2).max(1)))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        for li in 0..height {
            let parts: Vec<String> = wrapped
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let cw = widths[i].saturating_sub(2).max(1);
                    let t = w.get(li).cloned().unwrap_or_default();
                    let t: String = if width(&t) > cw {
                        t.chars().take(cw).collect()
                    } else {
                        t
                    };
                    let pad = cw.saturating_sub(width(&t));
                    format!(" {t}{} ", " ".repeat(pad))
                })
                .collect();
            lines.push(format!("│{}│", parts.join("│")));
        }
    };
    render_row(
        headers.iter().map(|h| h.0.to_string()).collect(),
        &mut lines,
    );
    lines.push(hline("├", "┼", "┤"));
    for r in rows {
        render_row(r.clone(), &mut lines);
    }
    lines.push(hline("└", "┴", "┘"));
    lines.join("\n")
}

/// `truncateSessionKey(sanitizeTerminalText(key))`.
fn key_cell(key: &str) -> String {
    let k = sanitize(key);
    let g: Vec<char> = k.chars().collect();
    if g.len() <= 26 {
        return k;
    }
    let head: String = g[..16].iter().collect();
    let tail: String = g[g.len() - 6..].iter().collect();
    format!("{head}...{tail}")
}

fn actor(a: &Json) -> Option<String> {
    let t = |k: &str| {
        a.get(k)
            .and_then(Json::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    t("label")
        .or_else(|| t("id"))
        .or_else(|| a.get("type").map(js_string))
}

/// `formatSessionFlagsCell` of the SQLite-era releases: the JSON era's flags with the
/// visibility, owner and participants before the id, sanitized.
fn flags_cell(e: &Json) -> String {
    sanitize(&flags_cell_with(e, |parts| session_flags(e, parts)))
}

/// The flags the SQLite-era releases add: visibility (`shared` when unset), owner, and up to
/// four participants.
fn session_flags(e: &Json, parts: &mut Vec<String>) {
    let visibility = match e.get("visibility") {
        None | Some(Json::Null) => Some(Json::from("shared")),
        v => v.cloned(),
    };
    if let Some(v) = truthy(visibility.as_ref()) {
        parts.push(format!("visibility:{}", js_string(v)));
    }
    let owner = e
        .pointer("/owner/actor")
        .filter(|v| !v.is_null())
        .or_else(|| e.get("createdActor").filter(|v| !v.is_null()));
    if let Some(o) = owner.and_then(actor) {
        parts.push(format!("owner:{o}"));
    }
    if let Some(Json::Array(ps)) = e.get("participants") {
        let shown: Vec<String> = ps
            .iter()
            .take(4)
            .map(|p| {
                p.get("label")
                    .and_then(Json::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!(
                            "{}:{}",
                            p.pointer("/identity/type")
                                .map(js_string)
                                .unwrap_or_default(),
                            p.pointer("/identity/id").map(js_string).unwrap_or_default()
                        )
                    })
            })
            .collect();
        if !shown.is_empty() {
            let count = e
                .get("participantCount")
                .and_then(Json::as_f64)
                .unwrap_or(shown.len() as f64);
            let more = (count - shown.len() as f64).max(0.0);
            let tail = if more > 0.0 {
                format!(",+{}", crate::jsjson::js_number(more))
            } else {
                String::new()
            };
            parts.push(format!("participants:{}{tail}", shown.join(",")));
        }
    }
}

/// The dry-run plan for one database.
pub fn render_plan<S: Sink + ?Sized>(out: &mut S, cfg: &Config, p: &Preview, show_agent: bool) {
    let s = &p.summary;
    let archives = match s.rules {
        Rules::V9 => vec![
            format!("Would archive inactive sessions: {}", s.archived),
            format!("Would archive cap overflow: {}", s.cap_archived),
        ],
        Rules::V8 => vec![format!(
            "Would archive inactive dashboard sessions: {}",
            s.archived
        )],
    };
    super::cleanup_text::render_plan_head(out, s, show_agent, Some(&archives));
    let updated = |e: &Json| e.get("updatedAt").and_then(Json::as_f64);
    let rows = super::cleanup_text::planned_actions(out, p.before.iter(), updated);
    if rows.is_empty() {
        return;
    }
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let fallback = match s.rules {
        Rules::V9 => "gpt-6-astra",
        Rules::V8 => "gpt-5.6-sol",
    };
    let now = crate::maintenance::now_ms();
    let mut cells = Vec::new();
    let mut labels = LabelTally::default();
    for (key, e) in &rows {
        let action = p.plan.action(key);
        let age = match updated(e).filter(|u| *u != 0.0 && !u.is_nan()) {
            Some(u) => format_time_ago(now - u),
            None => "unknown".into(),
        };
        let model = super::cleanup_text::display_model_or(cfg, key, e, fallback);
        cells.push(vec![
            action.to_string(),
            key_cell(key),
            age,
            sanitize(&model),
            flags_cell(e),
        ]);
        labels.add(
            super::cleanup_text::label_of(e),
            action == "keep" || action.starts_with("archive-"),
        );
    }
    let table = render_table(
        &[
            ("Action", false),
            ("Key", false),
            ("Age", false),
            ("Model", false),
            ("Flags", true),
        ],
        &cells,
        table_width(),
    );
    line(table.trim_end().to_string());
    labels.render(&mut line, width);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_as_wide_as_the_terminal_and_at_least_60_columns() {
        // `getTerminalTableWidth()`: `max(60, process.stdout.columns ?? 120)`.
        assert_eq!(table_width_for(None), 120);
        assert_eq!(table_width_for(Some(200)), 200);
        assert_eq!(table_width_for(Some(84)), 84);
        assert_eq!(table_width_for(Some(40)), 60);
    }

    #[test]
    fn flags_add_visibility_owner_and_participants_before_the_id() {
        let e = serde_json::json!({
            "thinkingLevel": "high",
            "systemSent": true,
            "owner": {"actor": {"label": " Ana "}},
            "participants": [{"label": "Bob"}, {"identity": {"type": "user", "id": 7}}],
            "participantCount": 5,
            "sessionId": "s1\tx",
        });
        assert_eq!(
            flags_cell(&Json::from_value(e)),
            "think:high system visibility:shared owner:Ana participants:Bob,user:7,+3 id:s1\\tx"
        );
        assert_eq!(
            flags_cell(&Json::from_value(
                serde_json::json!({"visibility": "", "sessionId": "s"})
            )),
            "id:s"
        );
    }

    #[test]
    fn wraps_at_break_characters() {
        assert_eq!(
            wrap_line(
                "visibility:shared id:7b1d8e3f-0a2b-4c4d-9e6f-8a9b0c1d2e3f",
                38
            ),
            vec![
                "visibility:shared id:7b1d8e3f-0a2b-",
                "4c4d-9e6f-8a9b0c1d2e3f"
            ]
        );
        assert_eq!(wrap_line("keep", 10), vec!["keep"]);
    }
}
