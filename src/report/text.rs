//! Shared pieces of the human reports: sizes, 80-column tables, wrapping and shortening.
//! Every human table and line of clawkeeper's own reports fits [`WIDTH`] columns wherever the
//! output goes (a terminal, a pipe, a file); `cleanup`'s text copies OpenClaw's on purpose and
//! does not use these.

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use humansize::{BINARY, format_size};

/// The width human reports fit when stdout is not a terminal.
pub const WIDTH: u16 = 80;

/// The width the human reports fit: the terminal's when stdout is one (at least 40 columns),
/// else [`WIDTH`], so that a pipe, a file or a cron mail always gets 80 columns and a wide
/// terminal shows long session keys whole.
pub fn width() -> usize {
    static WIDTH_NOW: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WIDTH_NOW.get_or_init(|| terminal_columns().map_or(WIDTH as usize, |c| c.max(40)))
}

/// The columns of the terminal on stdout, if stdout is a terminal.
pub(crate) fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ fills a `winsize` we own; a failure leaves it zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// A size in binary units with two decimals (`1.50 MiB`).
pub fn size(n: u64) -> String {
    format_size(n, BINARY)
}

/// A size without decimals, for narrow columns.
pub fn short_size(n: u64) -> String {
    format_size(n, BINARY.decimal_places(0).space_after_value(false))
}

/// A size that may be negative (the files would grow).
pub fn signed(n: i64) -> String {
    if n < 0 {
        format!("{} more", size(n.unsigned_abs()))
    } else {
        size(n as u64)
    }
}

/// A table with this header, at most [`WIDTH`] columns wide (cells wrap to fit).
pub fn table(header: Vec<&str>) -> Table {
    let mut t = table_without_header();
    t.set_header(header);
    t
}

/// A [`table`] without a header row (a later part of a long table).
pub fn table_without_header() -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width()).unwrap_or(u16::MAX));
    t
}

/// Right-align the columns from `from` on.
pub fn right(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Break `text` into lines of at most `width` characters, at spaces where possible;
/// continuation lines are indented by two spaces.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let chunk = width.saturating_sub(2).max(1);
    let mut pieces: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let chars: Vec<char> = word.chars().collect();
        pieces.extend(chars.chunks(chunk).map(|c| c.iter().collect::<String>()));
    }
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for p in pieces {
        let fresh = cur.trim().is_empty();
        if fresh {
            cur.push_str(&p);
        } else if cur.chars().count() + 1 + p.chars().count() <= width {
            cur.push(' ');
            cur.push_str(&p);
        } else {
            lines.push(std::mem::replace(&mut cur, format!("  {p}")));
        }
    }
    if !cur.trim().is_empty() {
        lines.push(cur);
    }
    lines
}

/// Shorten `s` to at most `max` characters, keeping both ends.
pub fn middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    format!("{h}…{t}")
}

/// Write `text` wrapped to [`WIDTH`] (continuation lines indented by two spaces).
pub fn write_wrapped(out: &mut String, text: &str) {
    for line in wrap(text, width()) {
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_shortening_respect_the_width() {
        let long = format!(
            "Note: {} and /a/{}/b end",
            "word ".repeat(30),
            "x".repeat(200)
        );
        let lines = wrap(&long, 80);
        assert!(lines.len() > 3);
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        let joined: String = lines.concat().split_whitespace().collect();
        let original: String = long.split_whitespace().collect();
        assert_eq!(joined, original);
        assert_eq!(middle("abcdefghij", 5), "ab…ij");
        assert_eq!(middle("abc", 5), "abc");
    }
}
