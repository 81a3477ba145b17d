//! OpenClaw's duration and byte-size grammars (`parse-duration` and `parse-bytes`).
//!
//! Durations: trimmed and lowercased, either one token `^(\d+(\.\d+)?)(ms|s|m|h|d)?$` (a
//! missing unit takes the caller's default unit) or a gap-free composite such as `1h30m` where
//! every segment has a unit. Sizes: `^(\d+(\.\d+)?)([a-z]+)?$` with binary units
//! (`k`/`kb` = 1024, …, `t`/`tb`). Both round to whole numbers as `Math.round` does.

use crate::js::{js_round, js_trim};

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// Split `text` into the leading decimal number `\d+(\.\d+)?` and the rest.
fn split_number(text: &str) -> Option<(&str, &str)> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == 0 {
        return None;
    }
    if i < b.len() && b[i] == b'.' {
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > i + 1 {
            i = j;
        }
    }
    Some((&text[..i], &text[i..]))
}

fn duration_unit(unit: &str) -> Option<f64> {
    Some(match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 6e4,
        "h" => 36e5,
        "d" => 864e5,
        _ => return None,
    })
}

/// `parseDurationMs(raw, {defaultUnit})`: milliseconds, or `None` where OpenClaw throws.
pub fn parse_duration_ms(raw: &str, default_unit: &str) -> Option<i64> {
    let trimmed = js_trim(raw).to_lowercase();
    if trimmed.is_empty() {
        return None;
    }
    let round = |v: f64| -> Option<i64> {
        let ms = js_round(v);
        (ms.is_finite() && ms.abs() <= MAX_SAFE).then_some(ms as i64)
    };
    // Single token.
    if let Some((num, rest)) = split_number(&trimmed) {
        let unit = if rest.is_empty() {
            Some(default_unit)
        } else {
            duration_unit(rest).map(|_| rest)
        };
        if let Some(unit) = unit {
            let value: f64 = num.parse().ok()?;
            return round(value * duration_unit(unit)?);
        }
    }
    // Composite: every segment `number unit`, no gaps.
    let mut total = 0.0;
    let mut rest = trimmed.as_str();
    while !rest.is_empty() {
        let (num, after) = split_number(rest)?;
        // The regex unit alternation is `ms|s|m|h|d`: `ms` wins over `m` when both fit.
        let unit = if after.starts_with("ms") {
            "ms"
        } else {
            let u = after.get(..1)?;
            duration_unit(u)?;
            u
        };
        let value: f64 = num.parse().ok()?;
        total += value * duration_unit(unit)?;
        rest = &after[unit.len()..];
    }
    round(total)
}

/// `parseByteSize(raw, {defaultUnit: "b"})`: bytes, or `None` where OpenClaw throws.
pub fn parse_byte_size(raw: &str) -> Option<i64> {
    let trimmed = js_trim(raw).to_lowercase();
    if trimmed.is_empty() {
        return None;
    }
    let (num, unit) = split_number(&trimmed)?;
    if !unit.bytes().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    let value: f64 = num.parse().ok()?;
    let unit = if unit.is_empty() { "b" } else { unit };
    let mult: f64 = match unit {
        "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024f64.powi(2),
        "g" | "gb" => 1024f64.powi(3),
        "t" | "tb" => 1024f64.powi(4),
        _ => return None,
    };
    let bytes = js_round(value * mult);
    bytes.is_finite().then_some(bytes as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_single_and_composite() {
        assert_eq!(parse_duration_ms("30d", "d"), Some(30 * 86_400_000));
        assert_eq!(parse_duration_ms(" 7 ", "d"), Some(7 * 86_400_000));
        assert_eq!(parse_duration_ms("1.5h", "d"), Some(5_400_000));
        assert_eq!(parse_duration_ms("500", "ms"), Some(500));
        assert_eq!(parse_duration_ms("1h30m", "d"), Some(5_400_000));
        assert_eq!(parse_duration_ms("2M", "d"), Some(120_000));
        assert_eq!(parse_duration_ms("1m500ms", "d"), Some(60_500));
        assert_eq!(parse_duration_ms("1h30", "d"), None);
        assert_eq!(parse_duration_ms("", "d"), None);
        assert_eq!(parse_duration_ms("-1d", "d"), None);
        assert_eq!(parse_duration_ms("1w", "d"), None);
        assert_eq!(parse_duration_ms("1.d", "d"), None);
        assert_eq!(parse_duration_ms("0.0004s", "d"), Some(0));
        assert_eq!(parse_duration_ms("0.0005s", "d"), Some(1));
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_byte_size("500mb"), Some(524_288_000));
        assert_eq!(parse_byte_size("1K"), Some(1024));
        assert_eq!(parse_byte_size("10"), Some(10));
        assert_eq!(parse_byte_size("1.5kb"), Some(1536));
        assert_eq!(parse_byte_size("2gb"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_byte_size("1 kb"), None);
        assert_eq!(parse_byte_size("1pb"), None);
        assert_eq!(parse_byte_size("abc"), None);
        assert_eq!(parse_byte_size("0"), Some(0));
    }
}
