//! One streaming pass over a transcript: the engine's [`Index`] plus the byte and block counts
//! `inspect` reports, from the same read.
//!
//! Every line goes to [`IndexBuilder`] (ids, parents, roles, silent replies, …). A line is
//! looked at a second time only when its raw bytes can hold something counted here (the
//! prefilter: `"image"`, `"thinking"`/`"redacted_thinking"`/`"reasoning"`, or `"toolResult"`);
//! that look borrows blocks as raw JSON slices, so a base64 payload is measured by its length
//! and never decoded or copied.
//!
//! What is counted (all figures are raw bytes of the line as stored):
//! - **image blocks**: every object with `"type":"image"` in a `content` array of a `message`
//!   (any role) or of a `custom_message`, and in the `content` arrays nested in those blocks
//!   (tool results inside user content); their bytes are the block's JSON text;
//! - **tool-output bytes**: the JSON text of `message.content` of `toolResult` messages;
//! - **thinking bytes**: the JSON text of `thinking`, `redacted_thinking` and `reasoning`
//!   blocks of assistant messages;
//! - **media references**: `[media attached: …]`, `[Image: source: …]` and `media://inbound/…`
//!   in the text of user and toolResult messages, as the index counted them per entry (see
//!   `crate::mediarefs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::marker::PhantomData;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::LazyLock;

use anyhow::{Context, Result};
use memchr::memmem::Finder;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::transcript::estimate::TokenCounter;
use crate::transcript::probe::Lenient;
use crate::transcript::values::SNAPSHOT_MAX;
use crate::transcript::{EntryType, Index, IndexBuilder, Payload, ProbedLine, Role};

/// Counts from one pass over one transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub bytes: u64,
    /// JSON-object lines other than the `session` header.
    pub entries: u64,
    /// `message` entries.
    pub messages: u64,
    pub images: u64,
    pub image_bytes: u64,
    /// Media references in the text of user and toolResult messages (the index's count per
    /// entry, see `Entry::media_refs`): what `strip-images` replaces outside the recent turns.
    pub media_references: u64,
    /// Silent `NO_REPLY` assistant replies (the index's predicate).
    pub silent_replies: u64,
    pub tool_output_bytes: u64,
    pub thinking_bytes: u64,
    /// Whether a `compaction` entry exists.
    pub compacted: bool,
    /// `custom` entries of type `openclaw.cache-ttl` (hidden from the model; the runtime reads
    /// only the newest one per provider and model), and the bytes of their lines.
    pub cache_ttl_markers: u64,
    pub cache_ttl_bytes: u64,
    /// Lines that do not parse (1-based).
    pub unparsable_lines: Vec<usize>,
}

/// Index a transcript (with every entry's token figures measured with `counter`) and count
/// what `inspect` reports, in one read. A file of at most [`SNAPSHOT_MAX`] bytes is read into
/// `buf` and its bytes are returned with the index; a longer one is not kept.
pub fn scan_path<'b>(
    path: &Path,
    counter: TokenCounter,
    buf: &'b mut Vec<u8>,
) -> Result<(Index, Counts, Option<&'b [u8]>)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let unreadable = || format!("cannot read {}", path.display());
    let len = file.metadata().with_context(unreadable)?.len();
    buf.clear();
    if len <= SNAPSHOT_MAX {
        buf.reserve(len as usize + 1);
        // (Bounded: the file may have grown since it was measured.)
        crate::fsutil::read_up_to(&file, buf, SNAPSHOT_MAX + 1).with_context(unreadable)?;
        if buf.len() as u64 <= SNAPSHOT_MAX {
            let (index, counts) = scan_lines(counter, |f| {
                crate::transcript::for_each_line_in(buf, f);
                Ok(())
            })
            .with_context(unreadable)?;
            return Ok((index, counts, Some(&buf[..])));
        }
    }
    let (head, rest) = (std::mem::take(buf), file);
    let head = std::io::Cursor::new(head);
    let (index, counts) = scan_reader(head.chain(rest), counter).with_context(unreadable)?;
    Ok((index, counts, None))
}

/// [`scan_path`] over any reader.
pub fn scan_reader(r: impl Read, counter: TokenCounter) -> std::io::Result<(Index, Counts)> {
    scan_lines(counter, |f| crate::transcript::for_each_line(r, f))
}

/// Index and count the lines `feed` hands to the function it is given, in file order.
fn scan_lines(
    counter: TokenCounter,
    feed: impl FnOnce(&mut dyn FnMut(&[u8])) -> std::io::Result<()>,
) -> std::io::Result<(Index, Counts)> {
    let mut builder = IndexBuilder::measuring(counter);
    let mut counts = Counts::default();
    feed(&mut |line| {
        builder.push_line(line);
        count_line(line, &builder, &mut counts);
        // An entry of another type is no marker: only `custom` entries and lines the index
        // could not read as an entry are searched.
        let may_be_marker = builder
            .last_entry()
            .is_none_or(|e| e.kind == EntryType::Custom);
        if may_be_marker && is_cache_ttl_marker(line) {
            counts.cache_ttl_markers += 1;
            counts.cache_ttl_bytes += line.len() as u64;
        }
    })?;
    let index = builder.finish();
    finish_counts(&index, &mut counts);
    Ok((index, counts))
}

/// Whether a line is an `openclaw.cache-ttl` marker: `{"type":"custom","customType":
/// "openclaw.cache-ttl",…}`. Only lines holding the name are parsed.
pub fn is_cache_ttl_marker(line: &[u8]) -> bool {
    static NAME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"openclaw.cache-ttl"));
    #[derive(Deserialize)]
    struct Marker<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Lenient<'a>,
        #[serde(rename = "customType", borrow, default)]
        custom_type: Lenient<'a>,
    }
    if NAME.find(line).is_none() {
        return false;
    }
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    serde_json::from_slice::<Marker>(body).is_ok_and(|m| {
        m.kind.as_str() == Some("custom") && m.custom_type.as_str() == Some("openclaw.cache-ttl")
    })
}

/// Read only through `Read` (for tests over byte slices).
pub fn scan_bytes(bytes: &[u8]) -> (Index, Counts) {
    scan_reader(bytes.take(u64::MAX), TokenCounter::Heuristic).expect("reading a slice cannot fail")
}

fn finish_counts(index: &Index, c: &mut Counts) {
    c.bytes = index.size;
    c.entries = index
        .entries
        .iter()
        .filter(|e| e.kind != EntryType::Session)
        .count() as u64;
    c.messages = index
        .entries
        .iter()
        .filter(|e| e.kind == EntryType::Message)
        .count() as u64;
    c.silent_replies = index.entries.iter().filter(|e| e.silent()).count() as u64;
    c.media_references = index
        .entries
        .iter()
        .map(|e| {
            let (n, left) = e.media_refs();
            u64::from(n) + u64::from(left)
        })
        .sum();
    c.compacted = index
        .entries
        .iter()
        .any(|e| e.kind == EntryType::Compaction);
    c.unparsable_lines = index.unparsable_line_numbers();
}

const NEEDLES: [&[u8]; 5] = [
    b"\"image\"",
    b"\"toolResult\"",
    b"\"thinking\"",
    b"\"redacted_thinking\"",
    b"\"reasoning\"",
];
const THINKING_TYPES: [&str; 3] = ["thinking", "redacted_thinking", "reasoning"];

static NEEDLE_FINDERS: LazyLock<Vec<Finder<'static>>> =
    LazyLock::new(|| NEEDLES.iter().map(Finder::new).collect());

fn may_count(line: &[u8]) -> bool {
    NEEDLE_FINDERS.iter().any(|f| f.find(line).is_some())
}

#[derive(Deserialize)]
struct BlockView<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Lenient<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// What a line holds that can be counted.
enum Countable<'a> {
    /// A message's content, with the message's role.
    Message {
        role: Option<&'a str>,
        content: &'a str,
    },
    /// A `custom_message`'s own content.
    Custom { content: &'a str },
}

/// Count one line. The index pass located the content of most lines already (in the line as
/// it read it, without its base64 payloads); the others (unparsable lines, a `content` key
/// spelled with escapes) are parsed here. Payloads left out are added back to the blocks (and
/// the tool output) holding them, so they are never scanned again.
fn count_line(raw: &[u8], builder: &IndexBuilder, c: &mut Counts) {
    if let Some(l) = builder.last_line(raw)
        && let Some(found) = located(&l)
    {
        let payloads: Vec<&Payload> = match l.payloads_cut {
            true => builder.last_payloads().iter().collect(),
            false => Vec::new(),
        };
        let cut = &payloads[..];
        if let Some(found) = found {
            count(found, cut, l.may_hold_image, c);
        }
        return;
    }
    count_parsed(raw, builder, c);
}

/// [`count_line`] for a line the index pass did not locate the content of: parse it.
fn count_parsed(raw: &[u8], builder: &IndexBuilder, c: &mut Counts) {
    let payloads: Vec<&Payload> = builder.last_payloads().iter().collect();
    let body = raw.strip_suffix(b"\n").unwrap_or(raw);
    let light = match builder.last_light() {
        Some(l) => Cow::Borrowed(l),
        None => crate::transcript::cut_payloads(body, &payloads),
    };
    if !may_count(&light) {
        return;
    }
    // Only the payloads actually cut (those within the body) are added back.
    let cut: Vec<&Payload> = if light.len() == body.len() {
        Vec::new()
    } else {
        payloads
            .into_iter()
            .filter(|p| (p.start as usize + p.len as usize) <= body.len())
            .collect()
    };
    // Members by name, the last of a repeated one winning (as the runtime reads them).
    type Members<'a> = HashMap<Cow<'a, str>, &'a RawValue>;
    let Ok(line) = crate::jsjson::deserialize(&light, PhantomData::<Members>) else {
        return;
    };
    fn text<'a>(m: &Members<'a>, k: &str) -> Option<Lenient<'a>> {
        m.get(k)
            .and_then(|v| serde_json::from_str::<Lenient>(v.get()).ok())
    }
    match text(&line, "type").as_ref().and_then(Lenient::as_str) {
        Some("message") => {
            let Some(Ok(m)) = line
                .get("message")
                .map(|m| serde_json::from_str::<Members>(m.get()))
            else {
                return;
            };
            let Some(content) = m.get("content") else {
                return;
            };
            let role = text(&m, "role");
            let found = Countable::Message {
                role: role.as_ref().and_then(Lenient::as_str),
                content: content.get(),
            };
            count(found, &cut, true, c);
        }
        Some("custom_message") => {
            if let Some(content) = line.get("content") {
                count(
                    Countable::Custom {
                        content: content.get(),
                    },
                    &cut,
                    true,
                    c,
                );
            }
        }
        _ => {}
    }
}

/// What the index pass located of a parsed entry: `Some(None)` when it holds nothing to
/// count, `None` when the line must be parsed again to tell.
fn located<'a>(l: &ProbedLine<'a>) -> Option<Option<Countable<'a>>> {
    let text = |r: &Option<std::ops::Range<usize>>| {
        r.clone()
            .and_then(|r| std::str::from_utf8(&l.bytes[r]).ok())
    };
    Some(match l.entry.kind {
        EntryType::Message => {
            let role = match l.entry.role.as_ref() {
                None => return Some(None),
                Some(Role::ToolResult) => Some("toolResult"),
                Some(Role::Assistant) => Some("assistant"),
                Some(_) => None,
            };
            Some(Countable::Message {
                role,
                content: text(&l.message_content)?,
            })
        }
        EntryType::CustomMessage => Some(Countable::Custom {
            content: text(&l.content)?,
        }),
        _ => None,
    })
}

/// Count what a line holds; `cut` are its payloads left out of the text (of the blocks of a
/// message's content, by block position). Without `images_possible` (the line as read names
/// no `"image"` and has no `\u` escape), only an assistant's thinking blocks can count.
fn count(found: Countable, cut: &[&Payload], images_possible: bool, c: &mut Counts) {
    match found {
        Countable::Message { role, content } => {
            if role == Some("toolResult") {
                let cut_bytes: u64 = cut.iter().map(|p| p.len as u64).sum();
                c.tool_output_bytes += content.len() as u64 + cut_bytes;
            }
            let assistant = role == Some("assistant");
            if (images_possible || assistant) && may_hold_counted_blocks(content, assistant) {
                count_blocks(content, assistant, cut, c, 0);
            }
        }
        Countable::Custom { content } if images_possible => count_blocks(content, false, &[], c, 0),
        Countable::Custom { .. } => {}
    }
}

/// Whether a message's `content` can hold a block [`count_blocks`] counts: its raw text names
/// an image (or, for an assistant, a thinking type), or has a `\u` escape that could spell one.
fn may_hold_counted_blocks(content: &str, assistant: bool) -> bool {
    static ANY: LazyLock<[Finder<'static>; 2]> =
        LazyLock::new(|| [Finder::new(b"\"image\""), Finder::new(b"\\u")]);
    static THINKING: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
        THINKING_TYPES
            .iter()
            .map(|k| Finder::new(format!("\"{k}\"").as_bytes()).into_owned())
            .collect()
    });
    let t = content.as_bytes();
    ANY.iter().any(|f| f.find(t).is_some())
        || assistant && THINKING.iter().any(|f| f.find(t).is_some())
}

/// Count image (and, for assistant content, thinking) blocks of a `content` value; `cut` are
/// the payloads left out of its top-level blocks (by block position). The content is valid
/// JSON (it was parsed): its blocks are found by skipping strings, and only a block whose text
/// can name a counted type (see [`may_hold_counted_blocks`]) is parsed.
fn count_blocks(content: &str, assistant: bool, cut: &[&Payload], c: &mut Counts, depth: u32) {
    if !content.starts_with('[') || depth > 8 {
        return;
    }
    let Some(blocks) = crate::transcript::span::elements(content.as_bytes()) else {
        return;
    };
    let thinking_counts = assistant && depth == 0;
    for (k, range) in blocks.into_iter().enumerate() {
        let raw = &content[range];
        if !raw.starts_with('{') || !may_hold_counted_blocks(raw, thinking_counts) {
            continue;
        }
        let left_out: u64 = cut
            .iter()
            .filter(|p| p.block as usize == k)
            .map(|p| p.len as u64)
            .sum();
        let Ok(b) = serde_json::from_str::<BlockView>(raw) else {
            continue;
        };
        match b.kind.as_str() {
            Some("image") => {
                c.images += 1;
                c.image_bytes += raw.len() as u64 + left_out;
            }
            Some(t) if thinking_counts && THINKING_TYPES.contains(&t) => {
                c.thinking_bytes += raw.len() as u64;
            }
            _ => {
                if let Some(inner) = b.content {
                    count_blocks(inner.get(), false, &[], c, depth + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_file_is_kept_and_a_long_one_streamed_to_the_same_index() {
        let dir = tempfile::tempdir().unwrap();
        let line = |i: usize, pad: usize| {
            format!(
                r#"{{"type":"message","id":"e{i}","parentId":{},"message":{{"role":"user","content":[{{"type":"text","text":"{}"}},{{"type":"image","data":"{}"}}]}}}}"#,
                if i == 0 {
                    "null".into()
                } else {
                    format!("\"e{}\"", i - 1)
                },
                "x".repeat(pad),
                "QUJD".repeat(300),
            )
        };
        let header = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
        for (n, pad, kept) in [(40, 10, true), (60, 80_000, false)] {
            let mut text = format!("{header}\n");
            for i in 0..n {
                text.push_str(&line(i, pad));
                text.push('\n');
            }
            text.push_str(r#"{"type":"custom","id":"z","parentId":"e0"}"#); // no terminator
            assert_eq!((text.len() as u64) <= SNAPSHOT_MAX, kept);
            let p = dir.path().join(format!("{n}.jsonl"));
            std::fs::write(&p, &text).unwrap();
            let mut buf = Vec::new();
            let (index, counts, bytes) = scan_path(&p, TokenCounter::Heuristic, &mut buf).unwrap();
            assert_eq!(bytes, kept.then_some(text.as_bytes()));
            let (want_index, want_counts) = scan_bytes(text.as_bytes());
            assert_eq!(format!("{index:?}"), format!("{want_index:?}"));
            assert_eq!(format!("{counts:?}"), format!("{want_counts:?}"));
            assert_eq!(index.entries.len(), n + 2);
            assert_eq!(counts.images, n as u64);
        }
    }

    #[test]
    fn counts_blocks_bytes_and_entries() {
        let img = r#"{"type":"image","data":"QUJD","mimeType":"image/png"}"#;
        let think = r#"{"type":"thinking","thinking":"hmm"}"#;
        let tool_content = format!(r#"[{{"type":"text","text":"out"}},{img}]"#);
        let lines = [
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_string(),
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","content":[{img},{{"type":"tool_result","content":[{img}]}}]}}}}"#
            ),
            format!(
                r#"{{"type":"message","id":"b","parentId":"a","message":{{"role":"assistant","content":[{think},{{"type":"text","text":"NO_REPLY"}}],"stopReason":"stop"}}}}"#
            ),
            format!(
                r#"{{"type":"message","id":"c","parentId":"b","message":{{"role":"toolResult","toolCallId":"x","content":{tool_content}}}}}"#
            ),
            format!(r#"{{"type":"custom_message","id":"d","parentId":"c","content":[{img}]}}"#),
            r#"{"type":"compaction","id":"e","parentId":"d","summary":"s","firstKeptEntryId":"d"}"#
                .to_string(),
            r#"{"type":"message","id":"f","par"#.to_string(),
        ];
        let text = lines.join("\n");
        let (index, c) = scan_bytes(text.as_bytes());
        assert_eq!(c.bytes, text.len() as u64);
        assert_eq!(index.size, c.bytes);
        assert_eq!(c.entries, 5);
        assert_eq!(c.messages, 3);
        assert_eq!(c.images, 4);
        assert_eq!(c.image_bytes, 4 * img.len() as u64);
        assert_eq!(c.thinking_bytes, think.len() as u64);
        assert_eq!(c.tool_output_bytes, tool_content.len() as u64);
        assert_eq!(c.silent_replies, 1);
        assert!(c.compacted);
        assert_eq!(c.unparsable_lines, vec![7]);
    }

    #[test]
    fn located_and_parsed_lines_count_alike() {
        let mut rng = crate::compact::testgen::Rng::new(21);
        let mut compared = 0;
        for _ in 0..300 {
            let text = crate::transcript::oddlines::transcript(&mut rng, 30);
            let (_, located) = scan_bytes(text.as_bytes());
            let mut builder = IndexBuilder::measuring(TokenCounter::Heuristic);
            let mut parsed = Counts::default();
            for raw in text.as_bytes().split_inclusive(|&b| b == b'\n') {
                builder.push_line(raw);
                count_parsed(raw, &builder, &mut parsed);
                compared += usize::from(builder.last_line(raw).is_some());
            }
            assert_eq!(
                (located.images, located.image_bytes),
                (parsed.images, parsed.image_bytes),
                "{text}"
            );
            assert_eq!(
                located.tool_output_bytes, parsed.tool_output_bytes,
                "{text}"
            );
            assert_eq!(located.thinking_bytes, parsed.thinking_bytes, "{text}");
        }
        assert!(compared > 5000, "{compared}");
    }

    #[test]
    fn payloads_left_out_of_the_parse_still_count_in_full() {
        let b64 = "QUJD".repeat(600);
        let img = format!(r#"{{"type":"image","data":"{b64}","mimeType":"image/png"}}"#);
        let nested = format!(r#"{{"type":"tool_result","content":[{img}]}}"#);
        let tool_content = format!(r#"[{{"type":"text","text":"out"}},{img},{img}]"#);
        let lines = [
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_string(),
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","content":[{img},"x",{nested}]}}}}"#
            ),
            format!(
                r#"{{"type":"message","id":"c","parentId":"a","message":{{"role":"toolResult","toolCallId":"x","content":{tool_content}}}}}"#
            ),
            format!(r#"{{"type":"custom_message","id":"d","parentId":"c","content":[{img}]}}"#),
            // A non-object message: the line is read in two steps.
            format!(
                r#"{{"type":"custom_message","id":"e","parentId":"d","message":"odd","content":[{img}]}}"#
            ),
            // An escaped type is still an image.
            r#"{"type":"message","id":"f","parentId":"e","message":{"role":"toolResult","toolCallId":"y","content":[{"type":"im\u0061ge","data":"QQ=="}]}}"#.to_string(),
        ];
        let text = lines.join("\n") + "\n";
        let (index, c) = scan_bytes(text.as_bytes());
        assert_eq!(index.payloads.len(), 3, "top-level message blocks only");
        let escaped = r#"{"type":"im\u0061ge","data":"QQ=="}"#;
        assert_eq!(c.images, 7);
        assert_eq!(c.image_bytes, 6 * img.len() as u64 + escaped.len() as u64);
        assert_eq!(
            c.tool_output_bytes,
            (tool_content.len() + escaped.len() + 2) as u64
        );
    }
}
