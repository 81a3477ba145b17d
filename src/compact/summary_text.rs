//! Text helpers of the compaction summary: UTF-16-aware shortening with marked ellipses,
//! quoting, and escaping of the runtime's closing `</summary>` tag.

use std::sync::LazyLock;

use regex::Regex;

use crate::js::{is_js_space, utf16_prefix};

static CLOSING_TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)<\s*/\s*summary\s*>").unwrap());

/// Never let a summary close the runtime's `<summary>` wrapper early: every closing tag, in
/// any letter case and with any whitespace inside it, gets its slash escaped (`<\/summary>`).
pub fn sanitize(text: &str) -> String {
    CLOSING_TAG
        .replace_all(text, |c: &regex::Captures| c[0].replace('/', "\\/"))
        .into_owned()
}

/// The runtime safeguard's `MAX_COMPACTION_SUMMARY_CHARS`: no summary is longer.
pub const MAX_SUMMARY_CHARS: usize = 16_000;
/// The runtime safeguard's `SUMMARY_TRUNCATED_MARKER`.
const TRUNCATED_MARKER: &str = "\n\n[Compaction summary truncated to fit budget]";

/// `body` followed by `suffix` (the file blocks), at most [`MAX_SUMMARY_CHARS`] UTF-16 units:
/// when longer, the body is cut (never inside a surrogate pair) and marked, and the suffix
/// kept whole, as the runtime's `capCompactionSummaryPreservingSuffix` does.
pub fn cap_summary(body: &str, suffix: &str) -> String {
    let units = |s: &str| s.encode_utf16().count();
    if units(body) + units(suffix) <= MAX_SUMMARY_CHARS {
        return format!("{body}{suffix}");
    }
    let budget = MAX_SUMMARY_CHARS
        .saturating_sub(units(suffix))
        .saturating_sub(units(TRUNCATED_MARKER));
    format!("{}{TRUNCATED_MARKER}{suffix}", utf16_prefix(body, budget))
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
pub fn cap_previous(text: &str, head_max: usize, tail_max: usize) -> String {
    let total = text.encode_utf16().count();
    if total <= head_max + tail_max {
        return text.to_owned();
    }
    let head = utf16_prefix(text, head_max);
    let tail = utf16_suffix(text, tail_max);
    let more = total - head.encode_utf16().count() - tail.encode_utf16().count();
    format!(
        "{}\n[… {more} characters of the previous summary left out …]\n{}",
        head.trim_end_matches(is_js_space),
        tail.trim_start_matches(is_js_space)
    )
}

/// Markdown-quote every line (`> `; an empty line becomes `>`).
pub fn quote(text: &str) -> String {
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

/// Cut to `max` UTF-16 units without splitting a surrogate pair, adding `...` when cut.
pub fn truncate_utf16(text: &str, max: usize) -> String {
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
