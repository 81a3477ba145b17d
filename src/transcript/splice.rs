//! Setting top-level members of a line by splicing its bytes, when that provably writes what
//! parsing and re-serialising it would.
//!
//! A patched line is written as `JSON.stringify` writes the parsed, patched entry
//! (`jsjson::parse`, then `jsjson::to_string_compact`). For a line that already is in that
//! form — [`members`] checks it in one scan of the bytes, building nothing — setting a
//! top-level member changes only that member's value (or appends the member when it is
//! missing, as inserting a new key into a parsed object does), so the new line is the old one
//! with the value's bytes replaced: one copy of the line, instead of a parsed value and a
//! second serialised copy (a 180 MB reply re-parented under `prune-noreply` used to need three).
//!
//! A line is in that form when it is valid UTF-8 and, outside strings, has no whitespace;
//! every string is escaped exactly as `JSON.stringify` escapes (`\"`, `\\`, `\b`, `\f`, `\n`,
//! `\r`, `\t`, other control characters as lowercase `\u00xx`, everything else as itself);
//! every number is written as `String(x)` writes its value; no object repeats a key (the
//! parse keeps the last value at the first position) or has a key that is an array index
//! (JavaScript lists those first); and it nests at most [`MAX_DEPTH`] levels. Anything else
//! — or a top-level value that is not an object — answers `None`, and the caller parses.

use std::collections::HashSet;
use std::ops::Range;

/// Nesting this scan accepts; deeper lines are left to the parser (which refuses beyond
/// `jsjson::MAX_DEPTH`, with its own reason).
const MAX_DEPTH: usize = 100;

/// One top-level member of a line: the byte ranges of its key (without quotes) and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// The changes that set some top-level members of a line: ranges of the line replaced, in
/// order, each with its new bytes.
#[derive(Debug)]
pub struct Splice {
    edits: Vec<(Range<usize>, Vec<u8>)>,
    body_len: usize,
}

impl Splice {
    /// The length of the new line.
    pub fn len(&self) -> usize {
        self.edits
            .iter()
            .fold(self.body_len, |n, (r, new)| n - r.len() + new.len())
    }

    /// Whether the new line is empty (it never is: it is an object).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append the new line, made of `body` (the line this splice was made for), to `out`.
    pub fn write_to(&self, body: &[u8], out: &mut Vec<u8>) {
        assert_eq!(body.len(), self.body_len, "a splice of another line");
        out.reserve(self.len());
        let mut at = 0;
        for (r, new) in &self.edits {
            out.extend_from_slice(&body[at..r.start]);
            out.extend_from_slice(new);
            at = r.end;
        }
        out.extend_from_slice(&body[at..]);
    }

    /// Make `body` (the line this splice was made for) the new line where it lies, when every
    /// new value is as long as the one it replaces (ids of one length: the common case);
    /// `false`, with `body` untouched, otherwise.
    pub fn apply_in_place(&self, body: &mut [u8]) -> bool {
        assert_eq!(body.len(), self.body_len, "a splice of another line");
        if self.edits.iter().any(|(r, new)| r.len() != new.len()) {
            return false;
        }
        for (r, new) in &self.edits {
            body[r.clone()].copy_from_slice(new);
        }
        true
    }
}

/// `body` (one line, without its terminator) with the top-level members `sets` (key, and the
/// new value as JSON text, in the order a parsed object would get them inserted) set, when
/// that is byte for byte what parsing, setting and re-serialising would write (see the module
/// doc); `None` otherwise.
pub fn set_members(body: &[u8], sets: &[(&str, Vec<u8>)]) -> Option<Splice> {
    edit(body, sets, &[])
}

/// [`set_members`], also replacing blocks of `message.content` (position, and the new block
/// as `JSON.stringify` writes it). A line whose `message` is not an object, whose content is
/// not an array or has no block at a position given (or a position given twice) answers
/// `None`: the caller's parse path says what is wrong.
pub fn edit(body: &[u8], sets: &[(&str, Vec<u8>)], blocks: &[(u32, Vec<u8>)]) -> Option<Splice> {
    let members = members(body)?;
    let mut edits: Vec<(Range<usize>, Vec<u8>)> = Vec::new();
    if !blocks.is_empty() {
        edits = block_edits(body, &members, blocks)?;
    }
    let end = body.len() - 1;
    for (key, value) in sets {
        match members
            .iter()
            .find(|m| &body[m.key.clone()] == key.as_bytes())
        {
            Some(m) => edits.push((m.value.clone(), value.clone())),
            None => {
                // Inserted after every member (and after members inserted before it).
                let mut new = String::new();
                if !members.is_empty() || edits.iter().any(|(r, _)| r.start == end) {
                    new.push(',');
                }
                crate::jsjson::write_string(&mut new, key);
                new.push(':');
                let mut new = new.into_bytes();
                new.extend_from_slice(value);
                match edits.iter_mut().find(|(r, _)| r.start == end) {
                    Some((_, tail)) => tail.extend_from_slice(&new),
                    None => edits.push((end..end, new)),
                }
            }
        }
    }
    edits.sort_by_key(|(r, _)| r.start);
    Some(Splice {
        edits,
        body_len: body.len(),
    })
}

/// The edits that replace blocks of `message.content` in `body`, a line in `JSON.stringify`'s
/// form whose top-level members are `top`: each block's bytes (found by skipping strings: the
/// line is known to be valid) give way to the new block's.
fn block_edits(
    body: &[u8],
    top: &[Member],
    blocks: &[(u32, Vec<u8>)],
) -> Option<Vec<(Range<usize>, Vec<u8>)>> {
    let message = top
        .iter()
        .find(|m| &body[m.key.clone()] == b"message")?
        .value
        .clone();
    // The line was checked whole: the message's members are found by skipping strings.
    let content = super::span::members(&body[message.clone()])?
        .into_iter()
        .find(|(k, _)| &body[message.start + k.start..message.start + k.end] == b"content")
        .map(|(_, v)| message.start + v.start..message.start + v.end)?;
    let elements = super::span::elements(&body[content.clone()])?;
    let mut edits: Vec<(Range<usize>, Vec<u8>)> = Vec::with_capacity(blocks.len());
    for (pos, new) in blocks {
        let r = elements.get(*pos as usize)?;
        let r = content.start + r.start..content.start + r.end;
        if edits.iter().any(|(e, _)| *e == r) {
            return None;
        }
        edits.push((r, new.clone()));
    }
    Some(edits)
}

/// The top-level members of `body` when it is an object in `JSON.stringify`'s form (see the
/// module doc), in order; `None` when it is not.
pub fn members(body: &[u8]) -> Option<Vec<Member>> {
    std::str::from_utf8(body).ok()?;
    if body.first() != Some(&b'{') {
        return None;
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut top: Vec<Member> = Vec::new();
    // The key of the top-level member whose value is being read, and where that value starts.
    let mut pending: Option<(Range<usize>, usize)> = None;
    let mut i = 0;
    loop {
        // A value starts at `i`.
        match *body.get(i)? {
            b'{' => {
                i += 1;
                if body.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    stack.push(Frame::Object(HashSet::new()));
                    if stack.len() > MAX_DEPTH {
                        return None;
                    }
                    i = key(body, i, &mut stack, &mut pending)?;
                    continue;
                }
            }
            b'[' => {
                i += 1;
                if body.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    stack.push(Frame::Array);
                    if stack.len() > MAX_DEPTH {
                        return None;
                    }
                    continue;
                }
            }
            b'"' => i = string_end(body, i + 1)?,
            b't' => i = literal(body, i, b"true")?,
            b'f' => i = literal(body, i, b"false")?,
            b'n' => i = literal(body, i, b"null")?,
            b'-' | b'0'..=b'9' => i = number_end(body, i)?,
            _ => return None,
        }
        // A value ended at `i`: close what it ends, up to the next value.
        loop {
            if stack.len() == 1
                && let Some((key, start)) = pending.take()
            {
                top.push(Member {
                    key,
                    value: start..i,
                });
            }
            let Some(frame) = stack.last() else {
                return (i == body.len()).then_some(top);
            };
            match (frame, *body.get(i)?) {
                (Frame::Array, b']') | (Frame::Object(_), b'}') => {
                    i += 1;
                    stack.pop();
                }
                (Frame::Array, b',') => {
                    i += 1;
                    break;
                }
                (Frame::Object(_), b',') => {
                    i = key(body, i + 1, &mut stack, &mut pending)?;
                    break;
                }
                _ => return None,
            }
        }
    }
}

/// An open container.
enum Frame<'a> {
    Array,
    /// An object, with the keys seen so far (raw bytes: every key is in the one escaped form
    /// `JSON.stringify` writes, so equal bytes are equal keys).
    Object(HashSet<&'a [u8]>),
}

/// Read the key at `i` of the innermost object and the colon after it; the offset of its value.
fn key<'a>(
    body: &'a [u8],
    i: usize,
    stack: &mut [Frame<'a>],
    pending: &mut Option<(Range<usize>, usize)>,
) -> Option<usize> {
    if body.get(i) != Some(&b'"') {
        return None;
    }
    let end = string_end(body, i + 1)?;
    let k = &body[i + 1..end - 1];
    if body.get(end) != Some(&b':') || is_index(k) {
        return None;
    }
    let depth = stack.len();
    let Some(Frame::Object(keys)) = stack.last_mut() else {
        return None;
    };
    if !keys.insert(k) {
        return None;
    }
    if depth == 1 {
        *pending = Some((i + 1..end - 1, end + 1));
    }
    Some(end + 1)
}

/// Whether a key, as written, is one JavaScript orders as an array index (or might be: any
/// key of digits only).
fn is_index(k: &[u8]) -> bool {
    !k.is_empty() && k.iter().all(u8::is_ascii_digit)
}

fn literal(body: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    body[i..].starts_with(word).then_some(i + word.len())
}

/// The offset past the number at `i`, when it is written as `String(x)` writes its value.
fn number_end(body: &[u8], i: usize) -> Option<usize> {
    let len = body[i..]
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        .unwrap_or(body.len() - i);
    let text = std::str::from_utf8(&body[i..i + len]).ok()?;
    let f: f64 = text.parse().ok()?;
    (f.is_finite() && crate::jsjson::js_number(f) == text).then_some(i + len)
}

/// The offset past the closing quote of the string whose contents start at `i`, when every
/// character in it is written as `JSON.stringify` writes it.
fn string_end(body: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let k = memchr::memchr2(b'"', b'\\', &body[i..])?;
        if body[i..i + k]
            .chunks(256)
            .any(|c| c.iter().fold(false, |any, &b| any | (b < 0x20)))
        {
            return None;
        }
        i += k;
        if body[i] == b'"' {
            return Some(i + 1);
        }
        i += match *body.get(i + 1)? {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
            b'u' => {
                let hex = body.get(i + 2..i + 6)?;
                let lower = hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                let c = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                // Only the control characters without a short escape are written this way.
                if !lower || c >= 0x20 || matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                    return None;
                }
                6
            }
            _ => return None,
        };
    }
}

#[cfg(test)]
#[path = "splice_tests.rs"]
mod tests;
