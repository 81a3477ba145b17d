//! Media references in the text of old turns: the runtime's `pruneHistoryMediaReferenceText`.
//!
//! OpenClaw 2026.7.1 (`pruneProcessedHistoryImages`, in the history-image-prune region of its
//! bundled `dist/`) scrubs, on the same turn boundary as old images, the text of `user` and
//! `toolResult` messages (a string `content`, and the `text` of `{"type":"text"}` blocks of an
//! array content): three global regular expressions, applied one after the other to the
//! result of the previous one, each match replaced by [`MARKER`]:
//!
//! ```text
//! /\[media attached(?:\s+\d+\/\d+)?:\s*[^\]]+\]/gi
//! /\[Image:\s*source:\s*[^\]]+\]/gi
//! /\bmedia:\/\/inbound\/[^\]\s/\\]+/g
//! ```
//!
//! The translation keeps their JavaScript meaning exactly (no `u` flag): `\s` is ECMAScript
//! whitespace (with U+FEFF, without U+0085), `\d` is `[0-9]`, `i` folds ASCII letters only (a
//! non-ASCII letter never matches an ASCII one, so `ſ` is not `s`), `\b` is an ASCII word
//! boundary, and `[^\]]` crosses line breaks. The tests compare them with the runtime's own
//! function on generated texts and on every code point in each sensitive position.
//!
//! [`scrub`] is what `strip-images` writes: the runtime's replacement, but only when it is
//! settled, i.e. the runtime, replaying the stored text, would not change it again (a rare
//! text such as `[media attached: media://inbound/x` is only completed into a new match by its
//! own replacement); such a text is left as it is, so the model sees exactly what it would have
//! seen without this tool.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;
use regex::Regex;

/// The runtime's replacement for one media reference.
pub const MARKER: &str = "[media reference removed - already processed by model]";

/// ECMAScript `\s`, as the inside of a character class.
const WS: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// The three patterns, in the order the runtime applies them.
static PATTERNS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    let re = |p: String| Regex::new(&p).expect("valid pattern");
    [
        re(format!(
            r"\[(?i-u:media attached)(?:[{WS}]+[0-9]+/[0-9]+)?:[{WS}]*[^\]]+\]"
        )),
        re(format!(
            r"\[(?i-u:image):[{WS}]*(?i-u:source):[{WS}]*[^\]]+\]"
        )),
        re(format!(r"(?-u:\b)media://inbound/[^\]/\\{WS}]+")),
    ]
});

/// Whether the raw bytes of a JSON line may hold a media reference in some string, given that
/// they have no `\u` escape (which can spell any of it; the caller looks for those): the start
/// of a match as it must appear literally. `[` and space cannot be escaped but as `\u`, and the
/// first two patterns ignore the case of ASCII letters; the third is case-sensitive and its
/// `/` can be `\/`, so it is looked for by `media:`. With the escapes, this is the regex
/// `(?-u)(?i:\[media attached|\[image:)|media:|\\u`, found by `memchr` passes that stop only
/// at `[` bytes and at the literal: a JSON line has a `:` for every member, and a base64
/// payload, most of a big line, has none of them.
pub fn may_name_one(raw: &[u8]) -> bool {
    let at = |i: usize, lit: &[u8]| {
        raw.get(i..i + lit.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(lit))
    };
    memchr::memchr_iter(b'[', raw).any(|i| at(i, b"[media attached") || at(i, b"[image:"))
        || MEDIA_SCHEME.find(raw).is_some()
}

static MEDIA_SCHEME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"media:"));

/// `pattern` replaced by [`MARKER`] everywhere in `text` (leftmost matches, none overlapping,
/// as `String.prototype.replace` with a global pattern), with the number of matches.
fn replace_all<'a>(pattern: &Regex, text: Cow<'a, str>) -> (Cow<'a, str>, u32) {
    let mut out = String::new();
    let mut last = 0;
    let mut n = 0u32;
    for m in pattern.find_iter(&text) {
        out.push_str(&text[last..m.start()]);
        out.push_str(MARKER);
        last = m.end();
        n += 1;
    }
    if n == 0 {
        return (text, 0);
    }
    out.push_str(&text[last..]);
    (Cow::Owned(out), n)
}

/// The runtime's `pruneHistoryMediaReferenceText`, with how many matches its three passes
/// replaced (a reference that a later pass swallows together with an earlier marker counts
/// in both).
pub fn prune_text(text: &str) -> (Cow<'_, str>, u32) {
    let mut cur = Cow::Borrowed(text);
    let mut total = 0;
    for p in PATTERNS.iter() {
        let (next, n) = replace_all(p, cur);
        cur = next;
        total += n;
    }
    (cur, total)
}

/// What `strip-images` does to one text of an old turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scrub {
    /// No media reference.
    None,
    /// Replaced: the new text and how many references were replaced.
    Replaced(String, u32),
    /// References the runtime would replace again in its own replacement: left as they are.
    Unsettled(u32),
}

/// [`prune_text`] when the result is settled (see the module doc).
pub fn scrub(text: &str) -> Scrub {
    let (out, n) = prune_text(text);
    if n == 0 {
        return Scrub::None;
    }
    if prune_text(&out).1 != 0 {
        return Scrub::Unsettled(n);
    }
    Scrub::Replaced(out.into_owned(), n)
}

/// References [`scrub`] replaces in `text`, and references it leaves (unsettled).
pub fn count(text: &str) -> (u32, u32) {
    match scrub(text) {
        Scrub::None => (0, 0),
        Scrub::Replaced(_, n) => (n, 0),
        Scrub::Unsettled(n) => (0, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pruned(t: &str) -> String {
        prune_text(t).0.into_owned()
    }

    const M: &str = MARKER;

    #[test]
    fn the_three_patterns_as_the_runtime_applies_them() {
        // Strings and results as OpenClaw 2026.7.1's pruneHistoryMediaReferenceText gives them.
        let cases: &[(&str, String)] = &[
            (
                "[media attached: /tmp/a.png (image/png)] look",
                format!("{M} look"),
            ),
            ("[media attached 2/3: x.jpg]", M.into()),
            ("[MEDIA Attached 10/200:\n\ty\n]", M.into()),
            ("[media attached:]", "[media attached:]".into()),
            ("[media attached: ]", M.into()),
            ("[media attached 1/x: y]", "[media attached 1/x: y]".into()),
            ("[media attached\u{a0}1/2: y]", M.into()),
            (
                "[media attached\u{85}1/2: y]",
                "[media attached\u{85}1/2: y]".into(),
            ),
            ("[media attached\u{feff}1/2: y]", M.into()),
            (
                "[media attached \u{661}/2: y]",
                "[media attached \u{661}/2: y]".into(),
            ),
            (
                "[media attached: a] and [media attached: b]",
                format!("{M} and {M}"),
            ),
            ("[Image: source: /x/y.png]", M.into()),
            ("[image:source:z]", M.into()),
            ("[IMAGE:  SOURCE:\u{3000}z]", M.into()),
            ("[Image: ſource: z]", "[Image: ſource: z]".into()),
            ("[İmage: source: z]", "[İmage: source: z]".into()),
            ("[Image source: z]", "[Image source: z]".into()),
            ("see media://inbound/abc.jpg now", format!("see {M} now")),
            ("media://inbound/a/b", format!("{M}/b")),
            ("media://inbound/a\\b", format!("{M}\\b")),
            ("(media://inbound/a]x", format!("({M}]x")),
            ("xmedia://inbound/a", "xmedia://inbound/a".into()),
            ("_media://inbound/a", "_media://inbound/a".into()),
            ("émedia://inbound/a", format!("é{M}")),
            ("Media://inbound/a", "Media://inbound/a".into()),
            ("media://inbound/", "media://inbound/".into()),
            ("media://inbound/a\u{2028}b", format!("{M}\u{2028}b")),
            ("media://inbound/a\u{85}b", M.into()),
            // Later passes see the earlier markers.
            ("[Image: source: [media attached: x]", M.into()),
            (
                "[media attached: media://inbound/x] media://inbound/y",
                format!("{M} {M}"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(&pruned(input), want, "{input:?}");
        }
        assert_eq!(prune_text("[Image: source: [media attached: x]").1, 2);
        assert_eq!(prune_text("nothing here").1, 0);
        assert!(matches!(prune_text("nothing here").0, Cow::Borrowed(_)));
    }

    #[test]
    fn unsettled_texts_are_left_alone() {
        // Its own replacement completes a new `[media attached: …]`.
        let t = "[media attached: media://inbound/x";
        assert_eq!(pruned(t), format!("[media attached: {M}"));
        assert_eq!(scrub(t), Scrub::Unsettled(1));
        assert_eq!(count(t), (0, 1));
        assert_eq!(
            scrub("a [media attached: b] c"),
            Scrub::Replaced(format!("a {M} c"), 1)
        );
        // The marker itself is no reference: scrubbing is idempotent.
        assert_eq!(scrub(M), Scrub::None);
        assert_eq!(scrub(""), Scrub::None);
    }

    /// The hint with the `\u` escapes the probe looks for itself.
    fn may_hold(raw: &[u8]) -> bool {
        may_name_one(raw) || raw.windows(2).any(|w| w == b"\\u")
    }

    #[test]
    fn the_hint_sees_every_reference_as_json_writes_it() {
        for text in [
            "[media attached: x]",
            "[Media Attached 1/2: x]",
            "[image: source: x]",
            "media://inbound/x",
        ] {
            let json = crate::jsjson::to_string_compact(&serde_json::Value::String(text.into()));
            assert!(may_hold(json.as_bytes()), "{json}");
        }
        assert!(may_hold(br#""media:\/\/inbound\/x""#));
        assert!(may_hold(br#""\u005bmedia attached: x]""#));
        assert!(!may_hold(br#"{"type":"image","text":"media attached"}"#));
    }

    /// The hint is the regex it stands for, on lines built from its pieces in every case.
    #[test]
    fn the_hint_is_the_regex_it_stands_for() {
        let re =
            regex::bytes::Regex::new(r"(?-u)(?i:\[media attached|\[image:)|media:|\\u").unwrap();
        let pieces: &[&[u8]] = &[
            b"[",
            b"\\",
            b":",
            b"u",
            b"U",
            b"media",
            b"MeDiA",
            b"[media attached",
            b"[Media Attached",
            b"[image",
            b"[IMAGE:",
            b"image:",
            b" ",
            b"AAAA",
            b"\"",
            b"{",
            b"]",
            b"attached",
            b"e",
        ];
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            let mut line = Vec::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for k in 0..(x % 9) {
                line.extend_from_slice(pieces[((x >> (k * 5)) % pieces.len() as u64) as usize]);
            }
            assert_eq!(
                may_hold(&line),
                re.is_match(&line),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }
}
