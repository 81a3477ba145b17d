//! Base64 payloads left out of a line before it is parsed.
//!
//! Most of a transcript's bytes are the base64 `data` of image blocks, in a few lines. A JSON
//! parser has to scan every byte of a string to find its end; [`cut`] instead finds each
//! `"data":"<run>"` whose run is at least [`PAYLOAD_MIN`] characters of printable ASCII
//! without a backslash (base64 is) and ends the string, and hands the parser the line with
//! those runs left out (`"data":""`), each found with one vectorised search and one check.
//!
//! Why the parse of the cut line tells the truth about the line: the second and third quote
//! of `"data":"` and the quote ending the run follow a letter, a colon and a character that is
//! not a backslash, so none is escaped: all three are real string delimiters. In a valid line the third one
//! therefore opens a string value (the second closed the key `data`, or the line is invalid
//! before the run: `data` outside a string is no JSON token) and the fourth closes it: the cut
//! empties exactly one string value, whose characters need no decoding (no `\`, no control
//! character, ASCII). A valid line stays valid with the same structure, and an invalid one
//! fails before the run (same prefix) or after it (same suffix, same parser state). Callers
//! still check that every cut was a payload they recognise, and otherwise parse the line as
//! it is (see `IndexBuilder::push_line`).

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// `data` strings shorter than this are not worth recording as payloads.
pub const PAYLOAD_MIN: usize = 1024;

static DATA_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"data\":\""));

/// One run left out of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Offset of the emptied string's contents in the cut line.
    pub at: usize,
    /// Offset of the run in the original line.
    pub start: usize,
    pub len: usize,
}

/// Whether `b` can stand in a JSON string as itself and ends no string: printable ASCII
/// other than the backslash (the run already stops at the first quote). Without branches, so
/// that [`all_plain`] vectorises.
#[inline]
fn is_plain(b: u8) -> bool {
    (b.wrapping_sub(0x20) < 0x5f) & (b != b'\\')
}

fn all_plain(s: &[u8]) -> bool {
    s.chunks(256)
        .all(|c| c.iter().fold(true, |ok, &b| ok & is_plain(b)))
}

/// Length of the run at the start of `s` when it is at least [`PAYLOAD_MIN`] long, plain
/// (see [`is_plain`]) and ends at a `"`.
fn run_len(s: &[u8]) -> Option<usize> {
    let end = memchr::memchr(b'"', s)?;
    (end >= PAYLOAD_MIN && all_plain(&s[..end])).then_some(end)
}

/// `line` with its long plain `data` runs left out, written into `buf`, and where they were
/// (in `cuts`, in line order). Returns `line` itself (and no cuts) when it has none.
pub fn cut<'a>(line: &'a [u8], buf: &'a mut Vec<u8>, cuts: &mut Vec<Cut>) -> &'a [u8] {
    cuts.clear();
    let mut from = 0;
    while let Some(k) = DATA_KEY.find(&line[from..]) {
        let open = from + k + DATA_KEY.needle().len();
        match run_len(&line[open..]) {
            Some(len) => {
                cuts.push(Cut {
                    at: 0,
                    start: open,
                    len,
                });
                from = open + len;
            }
            None => from = open,
        }
    }
    if cuts.is_empty() {
        return line;
    }
    buf.clear();
    let mut at = 0;
    for c in cuts.iter_mut() {
        buf.extend_from_slice(&line[at..c.start]);
        c.at = buf.len();
        at = c.start + c.len;
    }
    buf.extend_from_slice(&line[at..]);
    buf
}

/// The offset in the original line of offset `at` of the cut line (for a position that is
/// not inside a cut run).
pub fn original_offset(cuts: &[Cut], at: usize) -> usize {
    at + cuts
        .iter()
        .take_while(|c| c.at < at)
        .map(|c| c.len)
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_long_plain_runs_of_data_strings_only() {
        let b64 = "QUJD+/==".repeat(200);
        let short = "QUJD".repeat(10);
        let spaced = "QU JDé".repeat(300);
        let line = format!(
            r#"{{"a":{{"data":"{b64}"}},"b":{{"data":"{short}"}},"c":{{"data":"{spaced}"}},"d":{{"data":"{b64}\n"}},"e":{{"data":"{b64}"}},"f":"x\"data\":\"{b64}\""}}"#
        );
        let (mut buf, mut cuts) = (Vec::new(), Vec::new());
        let light = cut(line.as_bytes(), &mut buf, &mut cuts).to_vec();
        assert_eq!(cuts.len(), 2, "{cuts:?}");
        for c in &cuts {
            assert_eq!(&line[c.start..c.start + c.len], b64);
            assert_eq!(original_offset(&cuts, c.at), c.start);
        }
        let want = line.replacen(&format!("\"{b64}\""), "\"\"", 1);
        let want = want.replacen(
            &format!("\"e\":{{\"data\":\"{b64}\""),
            "\"e\":{\"data\":\"\"",
            1,
        );
        assert_eq!(String::from_utf8(light.clone()).unwrap(), want);
        // The same structure, with the two strings emptied.
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        v["a"]["data"] = "".into();
        v["e"]["data"] = "".into();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&light).unwrap(),
            v
        );
        // Offsets outside the runs map back.
        let after = cuts[1].at + 2;
        assert_eq!(line.as_bytes()[original_offset(&cuts, after)], light[after]);
        // Nothing to cut: the line itself.
        let (mut buf, mut cuts) = (Vec::new(), Vec::new());
        let plain = br#"{"data":"abc"}"#;
        assert!(std::ptr::eq(cut(plain, &mut buf, &mut cuts), &plain[..]));
        assert!(cuts.is_empty());
    }

    #[test]
    fn invalid_lines_stay_invalid() {
        let b64 = "A".repeat(2000);
        for bad in [
            format!(r#"{{data":"{b64}"}}"#),
            format!(r#"{{"x":1 "data":"{b64}"}}"#),
            format!(r#"{{"data":"{b64}" "y"}}"#),
            format!(r#"["data":"{b64}"]"#),
            format!(r#"{{"data":"{b64}""#),
        ] {
            assert!(serde_json::from_str::<serde_json::Value>(&bad).is_err());
            let (mut buf, mut cuts) = (Vec::new(), Vec::new());
            let light = cut(bad.as_bytes(), &mut buf, &mut cuts);
            assert!(
                serde_json::from_slice::<serde_json::Value>(light).is_err(),
                "{bad:.40}"
            );
        }
    }
}
