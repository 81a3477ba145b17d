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
//!   blocks of assistant messages.

use std::borrow::Cow;
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
use crate::transcript::{EntryType, Index, IndexBuilder, Payload};

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
    /// Silent `NO_REPLY` assistant replies (the index's predicate).
    pub silent_replies: u64,
    pub tool_output_bytes: u64,
    pub thinking_bytes: u64,
    /// Whether a `compaction` entry exists.
    pub compacted: bool,
    /// Lines that do not parse (1-based).
    pub unparsable_lines: Vec<usize>,
}

/// Index a transcript (with every entry's token figures measured with `counter`) and count
/// what `inspect` reports, in one read.
pub fn scan_path(path: &Path, counter: TokenCounter) -> Result<(Index, Counts)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    scan_reader(file, counter).with_context(|| format!("cannot read {}", path.display()))
}

/// [`scan_path`] over any reader.
pub fn scan_reader(r: impl Read, counter: TokenCounter) -> std::io::Result<(Index, Counts)> {
    let mut builder = IndexBuilder::measuring(counter);
    let mut counts = Counts::default();
    crate::transcript::for_each_line(r, |line| {
        builder.push_line(line);
        count_line(
            line,
            builder.last_light(),
            builder.last_payloads(),
            &mut counts,
        );
    })?;
    let index = builder.finish();
    finish_counts(&index, &mut counts);
    Ok((index, counts))
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
    c.silent_replies = index.entries.iter().filter(|e| e.silent).count() as u64;
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
struct LineView<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Lenient<'a>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// [`LineView`] with its message read in the same pass.
#[derive(Deserialize)]
struct MessageLineView<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Lenient<'a>,
    #[serde(borrow, default)]
    message: Option<MessageView<'a>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MessageView<'a> {
    #[serde(borrow, default)]
    role: Lenient<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BlockView<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Lenient<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// Count one line. The base64 payloads the index recorded for it (image blocks of
/// `message.content`) are left out before parsing (`light`: the line as the index builder
/// already cut it, if it did) and their lengths added back to the blocks (and the tool
/// output) holding them, so they are not scanned again.
fn count_line(raw: &[u8], light: Option<&[u8]>, payloads: &[Payload], c: &mut Counts) {
    let body = raw.strip_suffix(b"\n").unwrap_or(raw);
    let refs: Vec<&Payload> = payloads.iter().collect();
    let light = match light {
        Some(l) => Cow::Borrowed(l),
        None => crate::transcript::cut_payloads(body, &refs),
    };
    if !may_count(&light) {
        return;
    }
    // Only the payloads actually cut (those within the body) are added back.
    let cut: Vec<&Payload> = if light.len() == body.len() {
        Vec::new()
    } else {
        refs.into_iter()
            .filter(|p| (p.start as usize + p.len as usize) <= body.len())
            .collect()
    };
    // One pass when `message` is an object (or absent); else the line, then its message.
    let (kind, message, content) =
        match crate::jsjson::deserialize(&light, PhantomData::<MessageLineView>) {
            Ok(l) => (l.kind, l.message.map(Ok), l.content),
            Err(_) => {
                let Ok(line) = crate::jsjson::deserialize(&light, PhantomData::<LineView>) else {
                    return;
                };
                let message = line
                    .message
                    .map(|m| serde_json::from_str::<MessageView>(m.get()).map_err(drop));
                (line.kind, message, line.content)
            }
        };
    match kind.as_str() {
        Some("message") => {
            let Some(Ok(m)) = message else { return };
            let Some(content) = m.content else { return };
            let role = m.role.as_str().map(Cow::Borrowed);
            let cut_bytes: u64 = cut.iter().map(|p| p.len as u64).sum();
            if role.as_deref() == Some("toolResult") {
                c.tool_output_bytes += content.get().len() as u64 + cut_bytes;
            }
            let assistant = role.as_deref() == Some("assistant");
            if may_hold_counted_blocks(content, assistant) {
                count_blocks(content, assistant, &cut, c, 0);
            }
        }
        Some("custom_message") => {
            if let Some(content) = content {
                count_blocks(content, false, &[], c, 0);
            }
        }
        _ => {}
    }
}

/// Whether a message's `content` can hold a block [`count_blocks`] counts: its raw text names
/// an image (or, for an assistant, a thinking type), or has a `\u` escape that could spell one.
fn may_hold_counted_blocks(content: &RawValue, assistant: bool) -> bool {
    let t = content.get().as_bytes();
    let has = |n: &[u8]| memchr::memmem::find(t, n).is_some();
    has(b"\"image\"")
        || has(b"\\u")
        || assistant
            && THINKING_TYPES
                .iter()
                .any(|k| has(format!("\"{k}\"").as_bytes()))
}

/// Count image (and, for assistant content, thinking) blocks of a `content` value; `cut` are
/// the payloads left out of its top-level blocks (by block position).
fn count_blocks(content: &RawValue, assistant: bool, cut: &[&Payload], c: &mut Counts, depth: u32) {
    if !content.get().starts_with('[') || depth > 8 {
        return;
    }
    let Ok(blocks) = serde_json::from_str::<Vec<&RawValue>>(content.get()) else {
        return;
    };
    for (k, raw) in blocks.into_iter().enumerate() {
        if !raw.get().starts_with('{') {
            continue;
        }
        let left_out: u64 = cut
            .iter()
            .filter(|p| p.block as usize == k)
            .map(|p| p.len as u64)
            .sum();
        let Ok(b) = serde_json::from_str::<BlockView>(raw.get()) else {
            continue;
        };
        match b.kind.as_str() {
            Some("image") => {
                c.images += 1;
                c.image_bytes += raw.get().len() as u64 + left_out;
            }
            Some(t) if assistant && depth == 0 && THINKING_TYPES.contains(&t) => {
                c.thinking_bytes += raw.get().len() as u64;
            }
            _ => {
                if let Some(inner) = b.content {
                    count_blocks(inner, false, &[], c, depth + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
