//! What the runtime's delivery path does to a reply's text before and after its silent-payload
//! check, as far as it decides whether a reply that mentions the token reaches the channel.
//!
//! * **Reply directives** (`parseReplyDirectives`, then `parseInlineDirectives`): the tags
//!   `[[reply_to_current]]` and `[[reply_to:<id>]]` are taken out (a space stays where both
//!   neighbours are non-space) and the whitespace normalised, before `isSilentReplyPayloadText`
//!   looks at the text; so `[[reply_to_current]] NO_REPLY` is not delivered. The stored reply
//!   keeps its tags, and the context replays them as written. Texts with a media line
//!   (`MEDIA:`), an `[[audio_as_voice]]` tag or a `[[react:…]]` directive, and tagged texts
//!   that may hold a code block, are not read here: they are never taken for silent (the
//!   reply stays).
//! * **Glued and trailing tokens** (`normalizeReplyPayload`, run on every payload by the reply
//!   dispatcher): leading tokens glued to what follows (`NO_REPLYNO_REPLY`) are stripped, then
//!   a final token after whitespace or `*` (`NO_REPLY **NO_REPLY`), and the payload is
//!   skipped as silent when nothing is left. 2026.7.1 and 2026.7.35 differ here (2026.7.35
//!   strips a final run of tokens, and also leading tokens followed by a line break); a reply
//!   counts as silent only when both skip it.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use super::{SILENT_TOKEN, js_regex, mentions_token};
use crate::js::{is_js_space, js_trim};

static REPLY_TAG: LazyLock<Regex> =
    LazyLock::new(|| js_regex(r"\[\[\s*(?:reply_to_current|reply_to\s*:\s*(?:[^\]\n]+))\s*\]\]"));
static AUDIO_TAG: LazyLock<Regex> = LazyLock::new(|| js_regex(r"\[\[\s*audio_as_voice\s*\]\]"));
static REACTION: LazyLock<Regex> =
    LazyLock::new(|| js_regex(r"\[\[\s*(?:react|react_to_current)\s*:\s*(?:[^\]\n]+?)\s*\]\]"));
static COLLAPSE_BLANKS: LazyLock<Regex> = LazyLock::new(|| js_regex(r"([^\s])[ \t]{2,}([^\s])"));
static BLANKS_BEFORE_NEWLINE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[ \t]+\n").unwrap());
static NEWLINE_RUNS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\n{3,}").unwrap());
static MAYBE_CODE_BLOCK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"```|~~~|(?:^|\n)(?:    |\t)").unwrap());

/// The text `isSilentReplyPayloadText` sees for a reply whose visible text is `text`: the
/// text with its reply tags taken out and its whitespace normalised (the text itself when it
/// has no tag), or `None` when it carries media, an audio tag or a reaction, or a reply tag
/// beside what may be a code block (not read here: such a reply is kept).
/// `raw` is the text before trimming: a tab or four spaces at its start may open a code block.
pub(super) fn payload_text<'a>(raw: &str, text: &'a str) -> Option<Cow<'a, str>> {
    let has_media_line = text.split('\n').any(|line| {
        line.trim_start_matches(is_js_space)
            .chars()
            .take(6)
            .flat_map(char::to_uppercase)
            .eq("MEDIA:".chars())
    });
    if has_media_line || AUDIO_TAG.is_match(text) || REACTION.is_match(text) {
        return None;
    }
    if !REPLY_TAG.is_match(text) {
        return Some(Cow::Borrowed(text));
    }
    let stripped = REPLY_TAG.replace_all(text, |caps: &regex::Captures<'_>| {
        let m = caps.get(0).expect("the whole match");
        let before = text[..m.start()].chars().next_back();
        let after = text[m.end()..].chars().next();
        match (before, after) {
            (Some(b), Some(a)) if !is_js_space(b) && !is_js_space(a) => " ",
            _ => "",
        }
    });
    // The runtime keeps code blocks (fenced, or indented by a tab or four spaces) out of the
    // normalisation, and the SQLite-era releases read tags beside them otherwise: such a
    // text is not read here.
    if MAYBE_CODE_BLOCK.is_match(raw) || MAYBE_CODE_BLOCK.is_match(&stripped) {
        return None;
    }
    Some(Cow::Owned(normalize_whitespace(&stripped)))
}

/// `normalizeDirectiveWhitespace`, without its code-block protection (see [`payload_text`]).
fn normalize_whitespace(text: &str) -> String {
    let s = text.replace("\r\n", "\n");
    let s = COLLAPSE_BLANKS.replace_all(&s, "$1 $2");
    let s = s.trim_start_matches('\n');
    let mut chars = s.chars();
    let s = match (chars.next(), chars.next()) {
        (Some(' ' | '\t'), Some(c)) if !is_js_space(c) => &s[1..],
        _ => s,
    };
    let s = BLANKS_BEFORE_NEWLINE.replace_all(s, "\n");
    let s = NEWLINE_RUNS.replace_all(&s, "\n\n");
    s.trim_end_matches(is_js_space).to_owned()
}

/// Whether the token starts at byte `i` of `s` (any ASCII case).
fn token_at(s: &str, i: usize) -> bool {
    s.as_bytes()
        .get(i..i + SILENT_TOKEN.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(SILENT_TOKEN.as_bytes()))
}

/// The end of the run of whitespace starting at byte `i`.
fn skip_space(s: &str, i: usize) -> usize {
    i + s[i..]
        .find(|c: char| !is_js_space(c))
        .unwrap_or(s.len() - i)
}

/// The start of the run of `pred` characters ending at byte `end`.
fn run_start(s: &str, end: usize, pred: impl Fn(char) -> bool) -> usize {
    s[..end]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| pred(c))
        .last()
        .map_or(end, |(i, _)| i)
}

/// `^\s*T(?:\s*T)*(\s*)`: where the leading tokens end, where the whitespace after them ends,
/// and whether that whitespace holds a line break.
fn leading_tokens(s: &str) -> Option<(usize, usize, bool)> {
    let mut i = skip_space(s, 0);
    let mut end = None;
    while token_at(s, i) {
        let after = i + SILENT_TOKEN.len();
        end = Some(after);
        i = skip_space(s, after);
    }
    let end = end?;
    let ws = skip_space(s, end);
    Some((end, ws, s[end..ws].contains(['\r', '\n'])))
}

/// `^\s*(?:T\s+)*T(?=[\p{L}\p{N}])`: leading tokens, the last glued to a letter or digit.
/// (Whether that character is one by Unicode 16 or 17 does not change the outcome: only a
/// glued token is stripped to nothing.)
fn glued_leading_token(s: &str) -> bool {
    let mut i = skip_space(s, 0);
    loop {
        if !token_at(s, i) {
            return false;
        }
        i += SILENT_TOKEN.len();
        match s[i..].chars().next() {
            Some(c) if c.is_alphanumeric() => return true,
            Some(c) if is_js_space(c) => i = skip_space(s, i),
            _ => return false,
        }
    }
}

/// `stripSilentToken`: the text without a final token that follows the start, whitespace or
/// `*` (`(?:^|\s+|\*+)T\s*$`), or, with `run`, a final run of tokens separated by whitespace
/// (2026.7.35: `(?:^|\s+|\*+)T(?:\s+T)*\s*$`); trimmed.
fn strip_final_tokens(s: &str, run: bool) -> &str {
    let end = s.trim_end_matches(is_js_space).len();
    let Some(mut first) = end
        .checked_sub(SILENT_TOKEN.len())
        .filter(|&p| token_at(s, p))
    else {
        return js_trim(s);
    };
    // Earlier tokens of the run, each before whitespace: where the whitespace before the
    // second token starts (a match can start there when the first follows something else).
    let mut second_gap = None;
    loop {
        if !run {
            break;
        }
        let gap = run_start(s, first, is_js_space);
        match gap.checked_sub(SILENT_TOKEN.len()) {
            Some(p) if gap < first && token_at(s, p) => {
                second_gap = Some(gap);
                first = p;
            }
            _ => break,
        }
    }
    let start = match s[..first].chars().next_back() {
        None => Some(0),
        Some(c) if is_js_space(c) => Some(run_start(s, first, is_js_space)),
        Some('*') => Some(run_start(s, first, |c| c == '*')),
        Some(_) => second_gap,
    };
    js_trim(start.map_or(s, |start| &s[..start]))
}

/// The two releases whose dispatchers are mirrored.
#[derive(Clone, Copy)]
enum Dispatcher {
    /// 2026.7.1.
    Stable,
    /// 2026.7.35.
    Extended,
}

/// Whether `normalizeReplyPayload` of `release` skips a text-only payload as silent; `text`
/// is trimmed and not a silent payload text.
fn skipped_by(text: &str, release: Dispatcher) -> bool {
    let lead = leading_tokens(text);
    let leading = glued_leading_token(text)
        || matches!(release, Dispatcher::Extended)
            && lead.is_some_and(|(_, ws, newline)| {
                newline && !text[ws..].trim_start_matches(is_js_space).is_empty()
            });
    let rest = match lead {
        Some((_, ws, _)) if leading => js_trim(&text[ws..]),
        _ => text,
    };
    (leading || mentions_token(rest))
        && strip_final_tokens(rest, matches!(release, Dispatcher::Extended)).is_empty()
}

/// Whether the reply dispatcher drops a reply with this payload text as silent, in 2026.7.1
/// and in 2026.7.35.
pub(super) fn dispatcher_drops(text: &str) -> bool {
    let text = js_trim(text);
    !text.is_empty()
        && skipped_by(text, Dispatcher::Stable)
        && skipped_by(text, Dispatcher::Extended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_tokens() {
        assert_eq!(strip_final_tokens("Done NO_REPLY", false), "Done");
        assert_eq!(strip_final_tokens("Done **NO_REPLY ", false), "Done");
        assert_eq!(strip_final_tokens("xNO_REPLY", false), "xNO_REPLY");
        assert_eq!(strip_final_tokens("NO_REPLY", false), "");
        assert_eq!(
            strip_final_tokens("a NO_REPLY no_reply", false),
            "a NO_REPLY"
        );
        assert_eq!(strip_final_tokens("a NO_REPLY no_reply", true), "a");
        assert_eq!(strip_final_tokens("xNO_REPLY NO_REPLY", true), "xNO_REPLY");
        assert_eq!(strip_final_tokens("*NO_REPLY NO_REPLY", true), "");
    }

    #[test]
    fn glued() {
        assert!(dispatcher_drops("NO_REPLYNO_REPLY"));
        assert!(dispatcher_drops("no_replyNO_REPLY\nNO_REPLY"));
        assert!(dispatcher_drops("NO_REPLYNO_REPLY*NO_REPLY"));
        assert!(!dispatcher_drops("NO_REPLY.NO_REPLY"));
        assert!(!dispatcher_drops("NO_REPLYx"));
        assert!(!dispatcher_drops("Done. NO_REPLY"));
        assert!(!dispatcher_drops("HEARTBEAT_OK NO_REPLY"));
        // 2026.7.35 strips `NO_REPLY\n` and then `*NO_REPLY`; 2026.7.1 delivers `NO_REPLY`.
        assert!(skipped_by("NO_REPLY\n*NO_REPLY", Dispatcher::Extended));
        assert!(!dispatcher_drops("NO_REPLY\n*NO_REPLY"));
    }

    #[test]
    fn reply_tags() {
        let texts = |t| payload_text(t, js_trim(t)).map(|t| vec![t.into_owned()]);
        assert_eq!(
            texts("[[reply_to_current]] NO_REPLY").unwrap(),
            ["NO_REPLY"]
        );
        assert_eq!(
            texts("NO_REPLY[[ reply_to : 12 ]]NO_REPLY").unwrap(),
            ["NO_REPLY NO_REPLY"]
        );
        assert_eq!(
            texts("[[reply_to:]] NO_REPLY").unwrap(),
            ["[[reply_to:]] NO_REPLY"]
        );
        assert!(texts("[[audio_as_voice]] NO_REPLY").is_none());
        assert!(texts("MEDIA: x.png\nNO_REPLY").is_none());
        assert!(texts("[[reply_to_current]]\n\tNO_REPLY").is_none());
        assert!(texts("\t@NO_REPLY[[reply_to_current]]").is_none());
        assert_eq!(texts("\tNO_REPLY").unwrap(), ["NO_REPLY"]);
    }
}
