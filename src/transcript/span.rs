//! Byte ranges of JSON values in a line that has already parsed.
//!
//! A serde visitor sees values, not where they lie. It does see where a key lies when the key
//! is borrowed from the line (it has no escapes): [`value_after_key`] takes the offset just
//! past such a key's closing quote and finds the range of its value, skipping strings with a
//! vectorised search for their closing quote. Only for lines that are known to be valid JSON
//! (the probe parsed them), so the skipper needs no error handling: on anything unexpected it
//! gives up (`None`).

use std::ops::Range;

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// The offset just past the closing quote of the string whose contents start at `i`.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let k = memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[i + k] == b'"' {
            return Some(i + k + 1);
        }
        i += k + 2;
    }
}

/// The offset just past the JSON value starting at `start`.
pub fn value_end(b: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    loop {
        match *b.get(i)? {
            b'"' => {
                i = string_end(b, i + 1)?;
                if depth == 0 {
                    return Some(i);
                }
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' if depth == 0 => return Some(i),
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
        if i == b.len() {
            return (depth == 0).then_some(i);
        }
    }
}

/// The range of the value of the member whose key's closing quote ends at `key_end`.
pub fn value_after_key(b: &[u8], key_end: usize) -> Option<Range<usize>> {
    let colon = skip_space(b, key_end);
    if b.get(colon) != Some(&b':') {
        return None;
    }
    let start = skip_space(b, colon + 1);
    Some(start..value_end(b, start)?)
}

/// The ranges of the elements of the JSON array `b` (the whole of `b`, surrounding space
/// allowed), found with the same skipper.
pub fn elements(b: &[u8]) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::new();
    items(b, b'[', b']', |i| {
        let end = value_end(b, i)?;
        out.push(i..end);
        Some(end)
    })?;
    Some(out)
}

/// The members of the JSON object `b` (the whole of `b`, surrounding space allowed): the range
/// of each key (without its quotes) and of its value, in order.
pub fn members(b: &[u8]) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let mut out = Vec::new();
    items(b, b'{', b'}', |i| {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i + 1)?;
        let value = value_after_key(b, key_end)?;
        let end = value.end;
        out.push((i + 1..key_end - 1, value));
        Some(end)
    })?;
    Some(out)
}

/// Walk the items of the container `b` that opens with `open` and closes with `close`: `item`
/// reads the one starting at its argument and returns where it ends.
fn items(
    b: &[u8],
    open: u8,
    close: u8,
    mut item: impl FnMut(usize) -> Option<usize>,
) -> Option<()> {
    let mut i = skip_space(b, 0);
    if b.get(i) != Some(&open) {
        return None;
    }
    i = skip_space(b, i + 1);
    if b.get(i) == Some(&close) {
        return Some(());
    }
    loop {
        i = skip_space(b, item(i)?);
        match *b.get(i)? {
            b',' => i = skip_space(b, i + 1),
            c if c == close => return Some(()),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_every_kind_are_found_whole() {
        let values = [
            r#""plain""#,
            r#""with \"quotes\" and \\ and \n""#,
            r#""\\""#,
            "12.5e3",
            "-0",
            "true",
            "null",
            "[]",
            "{}",
            r#"[1,"a]",{"b":"}"},[[]]]"#,
            r#"{"x":[{"y":"\\\"}"}],"z":{}}"#,
        ];
        for v in values {
            for (sep, after) in [(":", ","), (" : ", " }"), (":\n\t", "]"), (":", "")] {
                let line = format!(r#"{{"k"{sep}{v}{after}"#);
                let key_end = 4;
                let r = value_after_key(line.as_bytes(), key_end).unwrap();
                assert_eq!(&line[r], v, "{line}");
            }
        }
        assert_eq!(value_after_key(br#"{"k" "v"}"#, 4), None);
    }

    #[test]
    fn elements_are_the_values_serde_reads() {
        let arrays = [
            "[]",
            " [ ] ",
            r#"[1,"a]",{"b":"}"},[[]],null,true,-2.5e3]"#,
            "[ \"x\" ,\n\t{\"y\":[1, 2]} ]",
            r#"["\\",{"z":"\"]"}]"#,
        ];
        for a in arrays {
            let want: Vec<&serde_json::value::RawValue> = serde_json::from_str(a).unwrap();
            let got: Vec<&str> = elements(a.as_bytes())
                .unwrap()
                .into_iter()
                .map(|r| &a[r])
                .collect();
            let want: Vec<&str> = want.iter().map(|v| v.get()).collect();
            assert_eq!(got, want, "{a}");
        }
        for not_array in ["{}", "1", "\"[\"", "[1 2]", "[1,"] {
            assert_eq!(elements(not_array.as_bytes()), None, "{not_array}");
        }
    }

    #[test]
    fn members_are_the_keys_and_values_serde_reads() {
        let objects = [
            "{}",
            " { } ",
            r#"{"a":1,"b":"x]}","c":{"d":[1,{"e":"}"}]},"f\"g":null}"#,
            "{ \"k\" : [ 1 ] ,\n\t\"l\":\"\\\\\"}",
        ];
        for o in objects {
            let want: Vec<(String, String)> =
                serde_json::from_str::<indexmap::IndexMap<String, &serde_json::value::RawValue>>(o)
                    .unwrap()
                    .into_iter()
                    .map(|(k, v)| (k, v.get().to_owned()))
                    .collect();
            let got: Vec<(String, String)> = members(o.as_bytes())
                .unwrap()
                .into_iter()
                .map(|(k, v)| {
                    let key: String = serde_json::from_str(&format!("\"{}\"", &o[k])).unwrap();
                    (key, o[v].to_owned())
                })
                .collect();
            assert_eq!(got, want, "{o}");
        }
        for not_object in [
            "[]",
            "1",
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":1,"#,
            r#"{1:2}"#,
        ] {
            assert_eq!(members(not_object.as_bytes()), None, "{not_object}");
        }
    }
}
