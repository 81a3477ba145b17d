//! JavaScript's semantics where OpenClaw's behaviour depends on them, in one place: what
//! `String.prototype.trim` and `\s` treat as whitespace, `Math.round`, `Date.now()`, and string
//! length in UTF-16 code units. Number formatting (`Number::toString`) lives with the JSON writer
//! (`jsjson::js_number`), dates with `isotime`.

/// The characters ECMAScript counts as whitespace: `String.prototype.trim` removes them and
/// `\s` matches them (WhiteSpace and LineTerminator).
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// `s.trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `Math.round(x)`: half rounds up, towards +∞.
pub fn js_round(x: f64) -> f64 {
    let f = x.floor();
    if x - f >= 0.5 { f + 1.0 } else { f }
}

/// `Date.now()`: milliseconds since the Unix epoch, a whole number (0 before the epoch).
pub fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64)
}

/// Length of `s` in UTF-16 code units (JavaScript's `String.prototype.length`).
pub fn utf16_len(s: &str) -> u64 {
    // One unit per character (every byte that does not continue a UTF-8 sequence), two for
    // characters outside the BMP (their lead bytes are 0xF0 and above); counted per byte so
    // that the loop vectorises.
    let b = s.as_bytes();
    if b.is_ascii() {
        return b.len() as u64;
    }
    let starts = b.iter().filter(|&&x| (x as i8) >= -0x40).count();
    let astral = b.iter().filter(|&&x| x >= 0xF0).count();
    (starts + astral) as u64
}

/// The longest prefix of `text` of at most `max` UTF-16 units (`text.slice(0, max)` where that
/// does not split a character).
pub fn utf16_prefix(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        if used + c.len_utf16() > max {
            return &text[..i];
        }
        used += c.len_utf16();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utf16_prefix_never_splits_a_character() {
        assert_eq!(utf16_prefix("a😀b", 1), "a");
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_prefix("a😀b", 3), "a😀");
        assert_eq!(utf16_prefix("a😀b", 9), "a😀b");
        assert_eq!(utf16_prefix("", 0), "");
    }

    #[test]
    fn whitespace_and_trim_are_ecmascripts() {
        // Every code point JavaScript's `/\s/` matches, and some it does not.
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', ' ', '\u{a0}', '\u{1680}', '\u{2000}', '\u{200a}',
            '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}', '\u{feff}',
        ] {
            assert!(is_js_space(c), "{:?}", c);
        }
        for c in ['\u{85}', '\u{180e}', '\u{200b}', 'a', '\0'] {
            assert!(!is_js_space(c), "{:?}", c);
        }
        assert_eq!(js_trim("\u{feff}\u{a0} x y \u{3000}\n"), "x y");
        assert_eq!(js_trim("\u{85}x\u{85}"), "\u{85}x\u{85}");
    }

    #[test]
    fn round_is_math_round() {
        for (x, want) in [
            (0.5, 1.0),
            (-0.5, -0.0),
            (1.5, 2.0),
            (-1.5, -1.0),
            (2.4999, 2.0),
            (-2.5, -2.0),
        ] {
            assert_eq!(js_round(x), want, "{x}");
        }
    }

    #[test]
    fn utf16_length() {
        assert_eq!(utf16_len("héllo 😀"), 8);
        assert_eq!(utf16_len("漢字"), 2);
    }
}
