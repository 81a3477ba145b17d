//! Streaming JSONL transcripts: the index pass and the pieces built on it.
//!
//! The **index pass** ([`Index::from_path`], or [`IndexBuilder`] fed line by line) reads a
//! transcript once with a 1 MiB buffered reader, one reused line buffer, and records per line
//! only what decisions need ([`Line`], [`Entry`]: id, parentId, type, role, byte range, a few
//! flags such as "silent reply" or "image blocks at these positions"). Memory is bounded by the
//! largest line plus the small per-entry metadata, never by the file size.
//!
//! Lines that are not JSON objects the tool can fully decode (a torn last line, lone surrogate
//! escapes, garbage, a BOM) are [`LineKind::Unparsable`]: they are never dropped or changed,
//! and their raw bytes are kept so that planners can refuse to remove an entry such a line
//! mentions (the runtime may still parse it).
//!
//! Built on the index:
//! - [`tree`]: parent map, the leaf and the active path, and context reconstruction (what the
//!   runtime sends to the model), tool-call pairing statistics;
//! - [`rewrite`]: edits (removals with re-parenting, content-block replacements) resolved
//!   against the index and applied by a streaming copy that keeps untouched lines byte for byte;
//! - [`validate`]: the checks every rewritten file must pass before it is committed;
//! - [`values`]: the full JSON of selected entries, re-read by their byte ranges (for planners
//!   such as `compact` that need whole messages);
//! - [`append`]: append-only rewrites without a second index of the output (in-place
//!   `compact`);
//! - [`job`]: one file through plan → preview or apply under every safety rule (symlinks,
//!   confinement, OpenClaw's lock, validation, concurrent-append checks, atomic replace).
//!
//! The planners live beside this module: `crate::noreply` (silent-reply runs),
//! `crate::cachettl` (superseded cache-TTL markers, which the index records as it reads them)
//! and `crate::images` (image stripping).
//!
//! Entry points for other commands (`compact`, `inspect`):
//!
//! ```text
//! let index = Index::from_path(path, None)?;            // index pass
//! let tree = tree::Tree::build(&index);                 // parents, leaf, active path
//! let (ctx, pairing) = tree::active_context(&index, &tree);
//! let prune = crate::noreply::plan(&index, &tree, 1);   // what prune-noreply removes
//! let ttl = crate::cachettl::plan(&index, &tree);        // what prune-cache-ttl removes
//! let strip = crate::images::plan(&index, &tree, 3);    // what strip-images replaces
//! let resolved = rewrite::resolve(&index, &tree, &edits)?;   // removals, blocks, appends
//! let applied = rewrite::apply(reader, &index, &resolved, &mut out)?;
//! validate::validate(&index, &applied.index, &expectation)?;
//! job::run_file(&confined, path, Options { mode: Mode::Preview, .. }, &planner)  // exact bytes after
//! job::run_file_at(&confined, path, opts, &planner_at)  // planner reads the file back too
//! let estimate = crate::compact::context_estimate(path, &index, &tree, &estimator)?; // tokens
//! ```

pub mod append;
pub mod estimate;
mod idtable;
pub mod job;
pub mod light;
#[cfg(test)]
pub(crate) mod oddlines;
pub mod probe;
mod relink;
pub mod rewrite;
pub mod span;
pub mod splice;
pub mod tree;
pub mod validate;
pub mod values;
pub mod walk;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::noreply;
use estimate::{Measure, TokenCounter};
use probe::{Content, Lenient, LineProbe};

/// What kind of line this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// Empty or whitespace only.
    Blank,
    /// A JSON object; `Line::entry` indexes [`Index::entries`].
    Entry,
    /// Not decodable; kept byte for byte.
    Unparsable,
}

/// One physical line of the file.
#[derive(Debug, Clone)]
pub struct Line {
    /// Byte offset of the line's first byte.
    pub start: u64,
    /// Length including the terminator (`\n`), if any.
    pub len: u64,
    /// Whether the line ends with `\n` (only the last line may not).
    pub terminated: bool,
    pub kind: LineKind,
    /// Index into [`Index::entries`] when `kind` is `Entry`, else [`NO_ENTRY`] (see
    /// [`Line::entry`]): a bare `u32` keeps a big transcript's line table at 24 bytes a line.
    entry: u32,
}

/// [`Line::entry`] of a line that is not an entry.
const NO_ENTRY: u32 = u32::MAX;

impl Line {
    /// Index into [`Index::entries`] when `kind` is `Entry`.
    pub fn entry(&self) -> Option<usize> {
        (self.entry != NO_ENTRY).then_some(self.entry as usize)
    }
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Line>() == 24);

/// The `type` of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryType {
    Session,
    Message,
    CustomMessage,
    Compaction,
    BranchSummary,
    ModelChange,
    ThinkingLevelChange,
    Label,
    SessionInfo,
    Custom,
    /// `leaf` control records of newer runtimes.
    Leaf,
    /// Any other type (or a non-string `type`), preserved and treated as transparent.
    Other,
}

impl EntryType {
    fn from_probe(kind: &Lenient<'_>) -> EntryType {
        match kind.as_str() {
            Some("session") => EntryType::Session,
            Some("message") => EntryType::Message,
            Some("custom_message") => EntryType::CustomMessage,
            Some("compaction") => EntryType::Compaction,
            Some("branch_summary") => EntryType::BranchSummary,
            Some("model_change") => EntryType::ModelChange,
            Some("thinking_level_change") => EntryType::ThinkingLevelChange,
            Some("label") => EntryType::Label,
            Some("session_info") => EntryType::SessionInfo,
            Some("custom") => EntryType::Custom,
            Some("leaf") => EntryType::Leaf,
            _ => EntryType::Other,
        }
    }

    /// Types the runtime indexes as tree entries (everything else is opaque to it).
    pub fn is_runtime_indexed(&self) -> bool {
        !matches!(
            self,
            EntryType::Session | EntryType::Leaf | EntryType::Other
        )
    }
}

/// `message.role`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    Other,
}

/// The `parentId` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// Field absent.
    Absent,
    Null,
    /// Shared with the id of the entry it names when that is the entry before it in the file
    /// (see `Entry::from_probe`): in a long chain every entry names the one before it, and an
    /// index then holds each id once.
    Id(std::sync::Arc<str>),
    /// Present but neither a string nor null.
    Invalid,
}

impl Parent {
    pub fn id(&self) -> Option<&str> {
        match self {
            Parent::Id(s) => Some(s),
            _ => None,
        }
    }
}

/// What the index keeps of one JSON-object line.
///
/// Kept small on purpose (64 bytes plus its strings): a big transcript has hundreds of
/// thousands of entries and a rewrite holds two indexes at once. Strings are boxed to their
/// exact length; the id, a `parentId` naming the entry before, and what the content blocks
/// say ([`Blocks`]) are shared with the copy a rewrite's index makes of an unchanged line;
/// fields that few entries have live in [`Rare`].
#[derive(Debug, Clone)]
pub struct Entry {
    /// Index into [`Index::lines`] (see [`Entry::line`]).
    line: u32,
    pub kind: EntryType,
    /// For messages.
    pub role: Option<Role>,
    /// The flags below (see [`Entry::silent`] and the others), one bit each.
    flags: u8,
    /// The `id`, when it is a non-empty string.
    pub id: Option<std::sync::Arc<str>>,
    pub parent: Parent,
    /// For a message with image blocks, tool calls or a tool call it answers.
    blocks: Option<std::sync::Arc<Blocks>>,
    rare: Option<Box<Rare>>,
}

// The size the comment above gives, checked.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// A line or entry position as an index keeps it: a position is of a table held in memory at
/// 24 bytes or more a row, so it fits in 32 bits.
fn position(n: usize) -> u32 {
    u32::try_from(n).expect("a transcript held in memory has fewer than 2^32 lines")
}

/// [`Entry::error_or_aborted`].
const ERROR_OR_ABORTED: u8 = 1;
/// [`Entry::silent`].
const SILENT: u8 = 1 << 1;
/// [`Entry::has_summary`].
const HAS_SUMMARY: u8 = 1 << 2;
/// [`Entry::context`].
const CONTEXT: u8 = 1 << 3;
/// [`Entry::side_append`].
const SIDE_APPEND: u8 = 1 << 4;
/// [`Entry::is_error`].
const IS_ERROR: u8 = 1 << 5;

/// What the content of a message says about its images and tool calls (see
/// [`Entry::image_blocks`], [`Entry::tool_calls`], [`Entry::tool_result_id`]): 40 bytes, so
/// that with its shared counts it fills a 64-byte allocation.
#[derive(Debug, Default)]
struct Blocks {
    image_blocks: Box<[u32]>,
    calls: Calls,
}

/// Tool calls an assistant makes, or the one a tool result answers (a message is one or the
/// other).
#[derive(Debug, Default)]
enum Calls {
    #[default]
    None,
    Made(Box<[Option<Box<str>>]>),
    Answers(Box<str>),
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Blocks>() == 40);

/// Fields only a few entries have.
#[derive(Debug, Clone, Default)]
struct Rare {
    first_kept: Option<Box<str>>,
    target: Option<Box<str>>,
    version: Option<u64>,
    /// Media references in the text of a user or toolResult message (see [`Entry::media_refs`]).
    media: probe::MediaRefs,
    /// The `leaf` control record the runtime reads (see [`Entry::leaf_record`]).
    leaf: Option<LeafRecord>,
}

/// A `leaf` control record as the runtime reads it (`parseOpaqueLeafEntry`): a line of type
/// `leaf` with a non-empty string `id`, a `parentId` that is null or a string, a `targetId`
/// that is null or a string, an `appendParentId` that is absent, null or a string, and an
/// `appendMode` that is absent or `"side"`. Any other `leaf` line is invisible to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRecord {
    /// `targetId` (`None`: null): where the runtime's leaf moves.
    pub target: Option<Box<str>>,
    /// `appendParentId`: absent (`None`), null (`Some(None)`), or an id: what the next
    /// append hangs below (absent: the new leaf).
    pub append_parent: Option<Option<Box<str>>>,
}

impl LeafRecord {
    fn from_probe(p: &LineProbe<'_>) -> Option<LeafRecord> {
        let nullable = |v: &Lenient<'_>| match v {
            Lenient::Null => Some(None),
            Lenient::Str(s) => Some(Some(Box::from(s.as_ref()))),
            _ => None,
        };
        let parent_ok = matches!(p.parent_id, Lenient::Null | Lenient::Str(_));
        let mode_ok = match &p.append_mode {
            Lenient::Absent => true,
            m => m.as_str() == Some("side"),
        };
        let append_parent = match &p.append_parent_id {
            Lenient::Absent => None,
            v => Some(nullable(v)?),
        };
        (parent_ok && mode_ok).then_some(())?;
        Some(LeafRecord {
            target: nullable(&p.target_id)?,
            append_parent,
        })
    }
}

/// Content block types that are tool calls, under every alias the runtime accepts.
pub const TOOL_CALL_TYPES: [&str; 6] = [
    "toolCall",
    "toolUse",
    "functionCall",
    "tool_use",
    "tool_call",
    "function_call",
];

impl Entry {
    /// Index into [`Index::lines`].
    pub fn line(&self) -> usize {
        self.line as usize
    }

    /// Assistant `stopReason` is `error` or `aborted`.
    pub fn error_or_aborted(&self) -> bool {
        self.flags & ERROR_OR_ABORTED != 0
    }

    /// A silent `NO_REPLY` assistant reply (see `crate::noreply::is_silent_content`).
    pub fn silent(&self) -> bool {
        self.flags & SILENT != 0
    }

    /// `branch_summary` / `compaction` with a non-empty string summary.
    pub fn has_summary(&self) -> bool {
        self.flags & HAS_SUMMARY != 0
    }

    /// The runtime puts a message in context for it (a `message` with a `message` member, a
    /// `custom_message`, a `branch_summary` with a truthy summary; compaction windows aside).
    pub fn context(&self) -> bool {
        self.flags & CONTEXT != 0
    }

    /// `appendMode: "side"` (newer runtimes: appended beside the leaf without moving it).
    pub fn side_append(&self) -> bool {
        self.flags & SIDE_APPEND != 0
    }

    /// A message whose `isError` is `true` (a failed tool result).
    pub fn is_error(&self) -> bool {
        self.flags & IS_ERROR != 0
    }

    /// The entry of a probed line; `before` is the id of the entry before it in the file, which
    /// its `parentId` shares when it names it (see [`Parent::Id`]).
    fn from_probe(line: usize, p: &LineProbe<'_>, before: Option<&Arc<str>>) -> Entry {
        let kind = EntryType::from_probe(&p.kind);
        let parent = match &p.parent_id {
            Lenient::Absent => Parent::Absent,
            Lenient::Null => Parent::Null,
            Lenient::Str(s) => Parent::Id(match before {
                Some(id) if **id == **s => id.clone(),
                _ => Arc::from(s.as_ref()),
            }),
            Lenient::Other => Parent::Invalid,
        };
        let first_kept = p.first_kept_entry_id.as_str().map(Box::from);
        let target = p.target_id.as_str().map(Box::from);
        let leaf = (kind == EntryType::Leaf && p.id.as_str().is_some_and(|s| !s.is_empty()))
            .then(|| LeafRecord::from_probe(p))
            .flatten();
        let rare = (first_kept.is_some() || target.is_some() || leaf.is_some()).then(|| {
            Box::new(Rare {
                first_kept,
                target,
                version: None,
                media: (0, 0),
                leaf,
            })
        });
        let mut flags = 0;
        if p.summary.as_str().is_some_and(|s| !s.is_empty()) {
            flags |= HAS_SUMMARY;
        }
        if p.is_context_entry() {
            flags |= CONTEXT;
        }
        if p.append_mode.as_str() == Some("side") {
            flags |= SIDE_APPEND;
        }
        let mut e = Entry {
            line: position(line),
            flags,
            id: p
                .id
                .as_str()
                .filter(|s| !s.is_empty())
                .map(std::sync::Arc::from),
            parent,
            role: None,
            blocks: None,
            rare,
            kind,
        };
        if e.kind == EntryType::Message
            && let Some(m) = &p.message
        {
            let role = match m.role.as_str() {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("toolResult") => Role::ToolResult,
                _ => Role::Other,
            };
            if matches!(m.stop_reason.as_str(), Some("error" | "aborted")) {
                e.flags |= ERROR_OR_ABORTED;
            }
            if m.is_error {
                e.flags |= IS_ERROR;
            }
            let mut found = Blocks::default();
            if let Content::Blocks(blocks) = &m.content {
                let mut images = Vec::new();
                let mut calls = Vec::new();
                for (i, b) in blocks.iter().enumerate() {
                    match b.kind.as_str() {
                        Some("image") if matches!(role, Role::User | Role::ToolResult) => {
                            images.push(i as u32)
                        }
                        Some(t) if role == Role::Assistant && TOOL_CALL_TYPES.contains(&t) => {
                            calls.push(b.id.as_str().map(Box::from))
                        }
                        _ => {}
                    }
                }
                found.image_blocks = images.into();
                if !calls.is_empty() {
                    found.calls = Calls::Made(calls.into());
                }
            }
            if role == Role::Assistant
                && !e.error_or_aborted()
                && noreply::is_silent_content(&m.content)
            {
                e.flags |= SILENT;
            }
            if role == Role::ToolResult
                && let Some(id) = m.tool_result_id.as_deref()
            {
                found.calls = Calls::Answers(Box::from(id));
            }
            if !found.image_blocks.is_empty() || !matches!(found.calls, Calls::None) {
                e.blocks = Some(std::sync::Arc::new(found));
            }
            if matches!(role, Role::User | Role::ToolResult) && m.media != (0, 0) {
                e.rare.get_or_insert_default().media = m.media;
            }
            e.role = Some(role);
        }
        e
    }

    /// Positions of `{"type":"image"}` blocks in an array `content` of a user or toolResult
    /// message.
    pub fn image_blocks(&self) -> &[u32] {
        self.blocks.as_ref().map_or(&[], |b| &b.image_blocks)
    }

    /// Ids of tool-call blocks of an assistant message (blocks without a string id count as
    /// `None`).
    pub fn tool_calls(&self) -> &[Option<Box<str>>] {
        match self.blocks.as_deref() {
            Some(Blocks {
                calls: Calls::Made(calls),
                ..
            }) => calls,
            _ => &[],
        }
    }

    /// The tool call a toolResult answers.
    pub fn tool_result_id(&self) -> Option<&str> {
        match self.blocks.as_deref()? {
            Blocks {
                calls: Calls::Answers(id),
                ..
            } => Some(id),
            _ => None,
        }
    }

    /// `compaction.firstKeptEntryId`.
    pub fn first_kept(&self) -> Option<&str> {
        self.rare.as_ref()?.first_kept.as_deref()
    }

    /// `label.targetId` / `leaf.targetId`.
    pub fn target(&self) -> Option<&str> {
        self.rare.as_ref()?.target.as_deref()
    }

    /// The `leaf` control record the runtime reads in this line, if any.
    pub fn leaf_record(&self) -> Option<&LeafRecord> {
        self.rare.as_ref()?.leaf.as_ref()
    }

    /// Media references in the text of a user or toolResult message (its string content or
    /// the `text` of its text blocks): `(replaced, left)`, what `strip-images` would replace
    /// (`crate::mediarefs::scrub`) and what it would leave because the runtime's replacement
    /// does not settle. Only read on lines that are valid UTF-8.
    pub fn media_refs(&self) -> probe::MediaRefs {
        self.rare.as_ref().map_or((0, 0), |r| r.media)
    }

    /// Header `version` when it is a number (header only).
    pub fn version(&self) -> Option<u64> {
        self.rare.as_ref()?.version
    }

    fn set_version(&mut self, version: Option<u64>) {
        if version.is_some() || self.rare.is_some() {
            self.rare.get_or_insert_default().version = version;
        }
    }

    /// A `message` entry with this role.
    pub fn is_role(&self, role: &Role) -> bool {
        self.kind == EntryType::Message && self.role.as_ref() == Some(role)
    }
}

/// What the index records of an entry held as a value, with its token figures measured with
/// `counter` (`None` for a value that is not an object).
pub fn entry_of_value(
    v: &serde_json::Value,
    counter: TokenCounter,
) -> Option<(Entry, EntryTokens)> {
    let measure = Measure::of(counter);
    let p = probe::probe_value(v, measure)?;
    let (tokens, usage) = p.tokens(measure);
    Some((
        Entry::from_probe(0, &p, None),
        EntryTokens { tokens, usage },
    ))
}

/// Where the base64 `data` of one image block lies in its line: readers that do not need
/// the picture (token estimates, summaries, size predictions of blocks being replaced) leave
/// these bytes out instead of scanning and copying them again. Only long strings without
/// escapes are recorded, so cutting their contents always leaves valid JSON (`"data":""`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    pub line: u32,
    /// Position of the block in `message.content`.
    pub block: u32,
    /// Byte offset of the string's first character within the line.
    pub start: u32,
    pub len: u32,
}

impl Index {
    /// The payloads of line `line`.
    pub fn payloads_of(&self, line: usize) -> &[Payload] {
        let from = self.payloads.partition_point(|p| (p.line as usize) < line);
        let to = self.payloads.partition_point(|p| (p.line as usize) <= line);
        &self.payloads[from..to]
    }
}

/// Positioned reads of a transcript's bytes: from its file, or from the bytes one read of it
/// left in memory (a [`values::Snapshot`]).
pub trait ReadAt {
    /// Fill `buf` from byte `offset` on; an error when the bytes end before it is full.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let from = usize::try_from(offset).unwrap_or(usize::MAX);
        match self.get(from..).and_then(|rest| rest.get(..buf.len())) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// Read line `n` of `index` from `file` into `buf`, leaving out the payloads `cut` selects
/// (those that lie within the line): one positioned read per piece between them, so the
/// payloads are neither copied nor scanned or parsed. Returns how many bytes were left out.
pub fn read_line_without(
    file: &(impl ReadAt + ?Sized),
    index: &Index,
    n: usize,
    buf: &mut Vec<u8>,
    cut: impl Fn(&Payload) -> bool,
) -> std::io::Result<u64> {
    let line = &index.lines[n];
    let len = line.len as usize;
    // The pieces to read: everything but the selected payloads, in line order.
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut at = 0usize;
    for p in index.payloads_of(n).iter().filter(|p| cut(p)) {
        let (start, end) = (p.start as usize, p.start as usize + p.len as usize);
        if end > len || start < at {
            continue;
        }
        pieces.push((at, start));
        at = end;
    }
    pieces.push((at, len));
    let kept: usize = pieces.iter().map(|(a, b)| b - a).sum();
    buf.resize(kept, 0);
    let mut w = 0;
    for (a, b) in pieces {
        file.read_exact_at(&mut buf[w..w + b - a], line.start + a as u64)?;
        w += b - a;
    }
    Ok((len - kept) as u64)
}

/// `raw` without the bytes of `payloads` (of this line, in line order); payloads that do not
/// lie within `raw` are left in.
pub fn cut_payloads<'a>(raw: &'a [u8], payloads: &[&Payload]) -> std::borrow::Cow<'a, [u8]> {
    let cut: Vec<&Payload> = payloads
        .iter()
        .copied()
        .filter(|p| (p.start as usize + p.len as usize) <= raw.len())
        .collect();
    if cut.is_empty() {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len() - cut.iter().map(|p| p.len as usize).sum::<usize>());
    let mut at = 0;
    for p in cut {
        out.extend_from_slice(&raw[at..p.start as usize]);
        at = p.start as usize + p.len as usize;
    }
    out.extend_from_slice(&raw[at..]);
    std::borrow::Cow::Owned(out)
}

/// The index of one transcript file.
#[derive(Debug, Default, Clone)]
pub struct Index {
    pub lines: Vec<Line>,
    pub entries: Vec<Entry>,
    /// Total bytes indexed.
    pub size: u64,
    /// Raw bytes of the first line (the header), terminator excluded.
    pub header_raw: Vec<u8>,
    /// Raw bytes of every unparsable line, by line index.
    pub unparsable: Vec<(usize, Vec<u8>)>,
    /// Base64 payloads of image blocks, in line order (see [`Payload`]).
    pub payloads: Vec<Payload>,
    /// Line indices of entries whose strings hold invalid UTF-8 (JSON parsers that skip a
    /// string do not decode it; the runtime reads such bytes as U+FFFD). They are entries,
    /// kept byte for byte, and reported.
    pub invalid_utf8: Vec<usize>,
    /// The counter the token figures were measured with, when the index was built to measure
    /// them (see [`IndexBuilder::measuring`]).
    pub measured_with: Option<TokenCounter>,
    /// With a counter: each entry's token figures, by entry index.
    pub tokens: Vec<EntryTokens>,
    /// The `openclaw.cache-ttl` markers the runtime can read (see `crate::cachettl`), in
    /// file order: (entry index, index into [`Index::cache_ttl_keys`]).
    pub cache_ttl: Vec<(u32, u32)>,
    /// The distinct provider/model keys of [`Index::cache_ttl`].
    pub cache_ttl_keys: Vec<crate::cachettl::Key>,
    /// The first line (0-based) of a `custom` entry holding the marker's name that nests too
    /// deep to be parsed.
    pub cache_ttl_too_deep: Option<usize>,
}

/// The runtime's token estimate of an entry's context message (0 when it puts none in
/// context) and the provider usage it carries, when the runtime would trust it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryTokens {
    pub tokens: u64,
    pub usage: Option<u64>,
}

impl Index {
    /// Index a file, reading at most `limit` bytes (all when `None`).
    pub fn from_path(path: &Path, limit: Option<u64>) -> Result<Index> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let reader: Box<dyn Read> = match limit {
            Some(n) => Box::new(file.take(n)),
            None => Box::new(file),
        };
        Index::from_reader(reader).with_context(|| format!("cannot read {}", path.display()))
    }

    /// Index everything a reader yields.
    pub fn from_reader(r: impl Read) -> std::io::Result<Index> {
        Index::from_reader_measuring(r, None)
    }

    /// [`Index::from_reader`], also measuring each entry's token figures with `counter`
    /// when one is given (see [`IndexBuilder::measuring`]).
    pub fn from_reader_measuring(
        r: impl Read,
        counter: Option<TokenCounter>,
    ) -> std::io::Result<Index> {
        let mut b = counter.map_or_else(IndexBuilder::default, IndexBuilder::measuring);
        for_each_line(r, |line| b.push_line(line))?;
        Ok(b.finish())
    }

    /// [`Index::from_reader_measuring`] over bytes already in memory.
    pub fn from_bytes_measuring(bytes: &[u8], counter: Option<TokenCounter>) -> Index {
        let mut b = counter.map_or_else(IndexBuilder::default, IndexBuilder::measuring);
        for_each_line_in(bytes, |line| b.push_line(line));
        b.finish()
    }

    /// An entry's token figures, when the index measured them.
    pub fn tokens_of(&self, entry: usize) -> Option<EntryTokens> {
        self.tokens.get(entry).copied()
    }

    /// The header entry, when the first line is a `session` object with a string id.
    pub fn header(&self) -> Option<&Entry> {
        let first = self.lines.first()?;
        let e = &self.entries[first.entry()?];
        (e.kind == EntryType::Session && e.id.is_some()).then_some(e)
    }

    /// 1-based line numbers of the unparsable lines.
    pub fn unparsable_line_numbers(&self) -> Vec<usize> {
        self.unparsable.iter().map(|(i, _)| i + 1).collect()
    }

    /// Whether any unparsable line mentions `id` as a JSON string. Such a line may be an entry
    /// to the runtime (it parses lone surrogates), so the entry must not be removed.
    pub fn mentioned_by_unparsable(&self, id: &str) -> bool {
        if self.unparsable.is_empty() {
            return false;
        }
        let mut needle = String::with_capacity(id.len() + 2);
        crate::jsjson::write_string(&mut needle, id);
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        self.unparsable
            .iter()
            .any(|(_, raw)| finder.find(raw).is_some())
    }

    /// The entry on a line.
    pub fn entry_of_line(&self, line: usize) -> Option<&Entry> {
        self.lines.get(line)?.entry().map(|e| &self.entries[e])
    }
}

/// How much [`for_each_line`] reads at a time: no faster at 1 MiB on a store of thousands of
/// transcripts, and each thread holds its own.
const READ_SIZE: usize = 256 << 10;

/// Feed every line of `bytes` to `f`, in order, each with its terminator (`\n`) if it has one:
/// [`for_each_line`] over bytes already in memory, which are not copied.
pub fn for_each_line_in(bytes: &[u8], mut f: impl FnMut(&[u8])) {
    let mut rest = bytes;
    while let Some(i) = memchr::memchr(b'\n', rest) {
        let (line, after) = rest.split_at(i + 1);
        f(line);
        rest = after;
    }
    if !rest.is_empty() {
        f(rest);
    }
}

/// Feed every line of `r` to `f`, in order, each with its terminator (`\n`) if it has one.
/// Lines are handed out of the read buffer itself; only a line that spans two reads is
/// copied (into a buffer as long as the longest such line, released after a huge one). The
/// read buffer ([`READ_SIZE`]) is the thread's own, reused from file to file.
pub fn for_each_line(r: impl Read, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    for_each_line_mut(r, |line| f(line))
}

/// [`for_each_line`], handing each line out as a mutable slice of the read buffer (a caller
/// may change a line where it lies before it looks at it again; the next read overwrites it).
pub fn for_each_line_mut(r: impl Read, f: impl FnMut(&mut [u8])) -> std::io::Result<()> {
    thread_local! {
        static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut buf = READ_BUF.take();
    buf.resize(READ_SIZE, 0);
    let result = lines_through(r, &mut buf, f);
    READ_BUF.set(buf);
    result
}

fn lines_through(
    mut r: impl Read,
    buf: &mut [u8],
    mut f: impl FnMut(&mut [u8]),
) -> std::io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut chunk = &mut buf[..n];
        if !carry.is_empty() {
            let Some(i) = memchr::memchr(b'\n', chunk) else {
                carry.extend_from_slice(chunk);
                continue;
            };
            carry.extend_from_slice(&chunk[..=i]);
            f(&mut carry);
            carry.clear();
            if carry.capacity() > 1 << 20 {
                carry = Vec::new();
            }
            chunk = &mut chunk[i + 1..];
        }
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            let (line, rest) = chunk.split_at_mut(i + 1);
            f(line);
            chunk = rest;
        }
        carry.extend_from_slice(chunk);
    }
    if !carry.is_empty() {
        f(&mut carry);
    }
    Ok(())
}

/// Builds an [`Index`] from lines pushed in file order (each with its terminator, if any).
///
/// Each line is probed with its long base64 payloads left out ([`light::cut`]); the cut line
/// is kept until the next push for callers that look at the line again ([`Self::last_light`]).
#[derive(Debug, Default)]
pub struct IndexBuilder {
    index: Index,
    /// Measure each entry's token figures with this (see [`Self::measuring`]).
    measure: Option<Measure>,
    /// The last line without its payloads, when it had any (see [`Self::last_light`]).
    light: Vec<u8>,
    cuts: Vec<light::Cut>,
    light_cut: bool,
    /// Of the last line: whether the probe read the cut line, and where the keys of
    /// `message.content` and of the entry's own `content` ended in what it read.
    last_probed_light: bool,
    last_content_keys: [Option<usize>; 2],
    /// Of the last line: whether its probed bytes can hold an image block.
    last_may_hold_image: bool,
    /// Positions of [`Index::cache_ttl_keys`] by key.
    cache_ttl_key_ids: std::collections::HashMap<crate::cachettl::Key, u32>,
}

/// What the probe located in the last line pushed (see [`IndexBuilder::last_line`]).
#[derive(Debug)]
pub struct ProbedLine<'a> {
    /// The bytes the probe read: the line without its terminator, and without its payloads
    /// when `payloads_cut`.
    pub bytes: &'a [u8],
    /// Every payload of the line ([`IndexBuilder::last_payloads`]) is left out of `bytes`;
    /// else none is.
    pub payloads_cut: bool,
    pub entry: &'a Entry,
    /// The range (in `bytes`) of `message.content`, when there is one and the probe located it.
    pub message_content: Option<std::ops::Range<usize>>,
    /// The range of the entry's own `content`, likewise.
    pub content: Option<std::ops::Range<usize>>,
    /// `bytes` can hold an image block (they name `"image"` or have a `\u` escape): without
    /// it, no value in them is one.
    pub may_hold_image: bool,
}

impl IndexBuilder {
    /// A builder that also records each entry's token figures ([`Index::tokens`]) as the
    /// runtime's estimate with `counter` makes them, from the same parse.
    pub fn measuring(counter: TokenCounter) -> IndexBuilder {
        IndexBuilder {
            index: Index {
                measured_with: Some(counter),
                ..Index::default()
            },
            measure: Some(Measure::of(counter)),
            ..IndexBuilder::default()
        }
    }

    /// Continue an index with more lines (appended after its last line), measured as it was.
    pub fn resume(index: Index) -> IndexBuilder {
        IndexBuilder {
            measure: index.measured_with.map(Measure::of),
            index,
            ..IndexBuilder::default()
        }
    }

    /// Index the next line (`raw` includes its `\n`, if any).
    pub fn push_line(&mut self, raw: &[u8]) {
        let line_no = self.index.lines.len();
        let terminated = raw.last() == Some(&b'\n');
        let body = if terminated {
            &raw[..raw.len() - 1]
        } else {
            raw
        };
        if line_no == 0 {
            self.index.header_raw = body.to_vec();
        }
        let mut line = Line {
            start: self.index.size,
            len: raw.len() as u64,
            terminated,
            kind: LineKind::Blank,
            entry: NO_ENTRY,
        };
        self.index.size += raw.len() as u64;
        self.light_cut = false;
        self.last_probed_light = false;
        self.last_content_keys = [None, None];
        self.last_may_hold_image = true;
        if body.iter().all(u8::is_ascii_whitespace) {
            self.index.lines.push(line);
            return;
        }
        let mut light = std::mem::take(&mut self.light);
        let mut cuts = std::mem::take(&mut self.cuts);
        let cut_body = light::cut(body, &mut light, &mut cuts);
        let mut probed = self.probe(line_no, cut_body, &cuts);
        if probed.is_none() && !cuts.is_empty() {
            // A cut that is not an image payload: parse the line as it is.
            cuts.clear();
            probed = self.probe(line_no, body, &cuts);
        }
        match probed {
            Some(e) => {
                line.kind = LineKind::Entry;
                let at = position(self.index.entries.len());
                line.entry = at;
                if e.kind == EntryType::Custom {
                    match crate::cachettl::probe(body) {
                        crate::cachettl::Probe::Marker(key) => self.push_cache_ttl(at, key),
                        crate::cachettl::Probe::TooDeep => {
                            self.index.cache_ttl_too_deep.get_or_insert(line_no);
                        }
                        crate::cachettl::Probe::No => {}
                    }
                }
                self.index.entries.push(e);
            }
            None => {
                line.kind = LineKind::Unparsable;
                self.index.unparsable.push((line_no, body.to_vec()));
            }
        }
        self.index.lines.push(line);
        // The cut line stands for the line without its payloads only when every payload was
        // one of the cuts (a long `data` string that is not plain ASCII is a payload too).
        self.light_cut = !cuts.is_empty() && self.last_payloads().len() == cuts.len();
        self.last_probed_light = !cuts.is_empty();
        self.light = light;
        self.cuts = cuts;
    }

    /// What the probe located in the last line pushed (`raw`, as it was pushed), when it is an
    /// entry that was read either whole or without every one of its payloads.
    pub fn last_line<'a>(&'a self, raw: &'a [u8]) -> Option<ProbedLine<'a>> {
        let entry = self.last_entry()?;
        let bytes = match (self.last_probed_light, self.light_cut) {
            (false, _) => raw.strip_suffix(b"\n").unwrap_or(raw),
            (true, true) => &self.light[..],
            (true, false) => return None,
        };
        let range = |key_end: Option<usize>| key_end.and_then(|k| span::value_after_key(bytes, k));
        Some(ProbedLine {
            bytes,
            payloads_cut: self.last_probed_light,
            entry,
            message_content: range(self.last_content_keys[0]),
            content: range(self.last_content_keys[1]),
            may_hold_image: self.last_may_hold_image,
        })
    }

    /// Index the next line as a byte-for-byte copy of line `n` of `from` (`raw` must be
    /// exactly those bytes): what probing it would record, taken from `from` instead of
    /// parsed again (a rewrite copies most lines unchanged).
    pub fn push_copied(&mut self, raw: &[u8], from: &Index, n: usize) {
        let line_no = self.index.lines.len();
        let src = &from.lines[n];
        debug_assert_eq!(raw.len() as u64, src.len);
        if line_no == 0 {
            self.index.header_raw = raw.strip_suffix(b"\n").unwrap_or(raw).to_vec();
        }
        self.light_cut = false;
        self.last_probed_light = false;
        self.last_content_keys = [None, None];
        self.last_may_hold_image = true;
        let mut line = Line {
            start: self.index.size,
            ..src.clone()
        };
        self.index.size += raw.len() as u64;
        match (src.kind, src.entry()) {
            (LineKind::Entry, Some(i)) => {
                line.entry = position(self.index.entries.len());
                let mut e = from.entries[i].clone();
                e.line = position(line_no);
                self.index.entries.push(e);
                if self.measure.is_some() {
                    self.index
                        .tokens
                        .push(from.tokens_of(i).unwrap_or_default());
                }
                self.index
                    .payloads
                    .extend(from.payloads_of(n).iter().map(|p| Payload {
                        line: line_no as u32,
                        ..*p
                    }));
                if from.invalid_utf8.binary_search(&n).is_ok() {
                    self.index.invalid_utf8.push(line_no);
                }
                if let Ok(k) = from.cache_ttl.binary_search_by_key(&(i as u32), |m| m.0) {
                    let key = from.cache_ttl_keys[from.cache_ttl[k].1 as usize].clone();
                    let at = self.index.entries.len() as u32 - 1;
                    self.push_cache_ttl(at, key);
                }
            }
            (LineKind::Unparsable, _) => {
                let body = raw.strip_suffix(b"\n").unwrap_or(raw);
                self.index.unparsable.push((line_no, body.to_vec()));
            }
            _ => {}
        }
        self.index.lines.push(line);
    }

    /// Probe `bytes` (line `line_no`, which is the line with `cuts` left out) into an entry
    /// and record its payloads. `None` when it does not parse, or when a cut is not the
    /// payload of an image block (nothing is recorded then).
    fn probe(&mut self, line_no: usize, bytes: &[u8], cuts: &[light::Cut]) -> Option<Entry> {
        // The cut runs are ASCII: the cut line is valid UTF-8 exactly when the line is.
        let text = std::str::from_utf8(bytes).ok();
        let utf8 = text.is_some();
        // A line with invalid UTF-8 is read as the index always reads it (a string it skips
        // need not be valid) and measured as the runtime reads it, the bad bytes as U+FFFD.
        let p = probe::probe_checked(bytes, text, self.measure.filter(|_| utf8)).ok()?;
        let mut payloads = Vec::new();
        let mut used = 0;
        if let Some(m) = &p.message
            && let Content::Blocks(blocks) = &m.content
        {
            for (k, b) in blocks.iter().enumerate() {
                let Some((at, len)) = b.data else { continue };
                let (start, len) = if len >= light::PAYLOAD_MIN {
                    (light::original_offset(cuts, at), len)
                } else if let Some(c) = cuts.iter().find(|c| c.at == at && len == 0) {
                    used += 1;
                    (c.start, c.len)
                } else {
                    continue;
                };
                if start + len <= u32::MAX as usize {
                    payloads.push(Payload {
                        line: line_no as u32,
                        block: k as u32,
                        start: start as u32,
                        len: len as u32,
                    });
                }
            }
        }
        if used != cuts.len() {
            return None;
        }
        if !utf8 {
            self.index.invalid_utf8.push(line_no);
        }
        self.index.payloads.extend(payloads);
        if let Some(m) = self.measure {
            let (tokens, usage) = if utf8 {
                p.tokens(m)
            } else {
                let lossy = String::from_utf8_lossy(bytes);
                probe::probe_line(lossy.as_bytes(), Some(m)).map_or((0, None), |p| p.tokens(m))
            };
            self.index.tokens.push(EntryTokens { tokens, usage });
        }
        self.last_content_keys = [
            p.message.as_ref().and_then(|m| m.content_key_end),
            p.content_key_end,
        ];
        self.last_may_hold_image = p.may_hold_image;
        let before = self.index.entries.last().and_then(|b| b.id.as_ref());
        let mut e = Entry::from_probe(line_no, &p, before);
        if e.kind == EntryType::Session {
            e.set_version(header_version(bytes));
        }
        Some(e)
    }

    /// Record a readable cache-TTL marker (entry `at`) under its key.
    fn push_cache_ttl(&mut self, at: u32, key: crate::cachettl::Key) {
        let keys = &mut self.index.cache_ttl_keys;
        if self.cache_ttl_key_ids.len() != keys.len() {
            // A resumed index: its keys are not in the map yet.
            self.cache_ttl_key_ids = keys
                .iter()
                .enumerate()
                .map(|(n, k)| (k.clone(), n as u32))
                .collect();
        }
        let id = *self.cache_ttl_key_ids.entry(key).or_insert_with_key(|k| {
            keys.push(k.clone());
            keys.len() as u32 - 1
        });
        self.index.cache_ttl.push((at, id));
    }

    /// The last line pushed without its terminator and with every payload of
    /// [`Self::last_payloads`] left out, when the probe had it so; else `None`.
    /// The entry the last line pushed holds, if it is one.
    pub fn last_entry(&self) -> Option<&Entry> {
        let line = self.index.lines.last()?;
        Some(&self.index.entries[line.entry()?])
    }

    pub fn last_light(&self) -> Option<&[u8]> {
        self.light_cut.then_some(&self.light[..])
    }

    /// The payloads of the last line pushed.
    pub fn last_payloads(&self) -> &[Payload] {
        let idx = &self.index;
        let last = idx.lines.len().saturating_sub(1) as u32;
        let from = idx.payloads.partition_point(|p| p.line < last);
        &idx.payloads[from..]
    }

    pub fn finish(self) -> Index {
        self.index
    }
}

/// The header's numeric `version`, read with the full parser (one line per file).
fn header_version(body: &[u8]) -> Option<u64> {
    let v = crate::jsjson::parse(body).ok()?;
    let n = v.get("version")?.as_f64()?;
    (n >= 0.0 && n.fract() == 0.0).then_some(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_payloads_are_recorded_and_can_be_left_out() {
        let b64 = "QUJD".repeat(400);
        let line = format!(
            "{{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}},{{\"data\":\"{b64}\",\"type\":\"image\"}},{{\"type\":\"image\",\"data\":\"short\"}},{{\"type\":\"image\",\"data\":\"{b64}\\n\"}}]}}}}\n"
        );
        let text = format!("{{\"type\":\"session\",\"version\":3,\"id\":\"s\"}}\n{line}");
        let idx = Index::from_reader(text.as_bytes()).unwrap();
        // Only the long, escape-free string of an image block is a payload.
        assert_eq!(idx.payloads.len(), 1);
        let p = idx.payloads[0];
        assert_eq!((p.line, p.block, p.len as usize), (1, 1, b64.len()));
        assert_eq!(&line[p.start as usize..][..b64.len()], b64);
        let all: Vec<&Payload> = idx.payloads_of(1).iter().collect();
        let light = cut_payloads(line.as_bytes(), &all);
        let v: serde_json::Value = serde_json::from_slice(&light).unwrap();
        assert_eq!(
            v["message"]["content"][1],
            serde_json::json!({"data": "", "type": "image"})
        );
        assert_eq!(v["message"]["content"][3]["data"], format!("{b64}\n"));
        assert_eq!(&*cut_payloads(line.as_bytes(), &[]), line.as_bytes());
        assert!(idx.payloads_of(0).is_empty());
    }

    /// The index of `text` as `push_line` builds it (payloads cut before the parse) and as a
    /// plain parse of every whole line builds it.
    fn index_both_ways(text: &str, counter: Option<TokenCounter>) -> (Index, Index) {
        let cut = Index::from_reader_measuring(text.as_bytes(), counter).unwrap();
        let mut b = counter.map_or_else(IndexBuilder::default, IndexBuilder::measuring);
        for (n, raw) in text.as_bytes().split_inclusive(|&c| c == b'\n').enumerate() {
            let body = raw.strip_suffix(b"\n").unwrap_or(raw);
            let kind = if body.iter().all(u8::is_ascii_whitespace) {
                LineKind::Blank
            } else if let Some(e) = b.probe(n, body, &[]) {
                b.index.entries.push(e);
                LineKind::Entry
            } else {
                b.index.unparsable.push((n, body.to_vec()));
                LineKind::Unparsable
            };
            let entry = match kind {
                LineKind::Entry => b.index.entries.len() as u32 - 1,
                _ => NO_ENTRY,
            };
            b.index.lines.push(Line {
                start: b.index.size,
                len: raw.len() as u64,
                terminated: raw.ends_with(b"\n"),
                kind,
                entry,
            });
            b.index.size += raw.len() as u64;
        }
        b.index.header_raw = cut.header_raw.clone();
        (cut, b.finish())
    }

    #[test]
    fn cutting_payloads_before_the_parse_changes_nothing() {
        let b64 = "iVBORw0KGgo+/=".repeat(100);
        let odd = "QUJD".repeat(300) + "é";
        let lines = [
            r#"{"type":"session","version":3,"id":"s"}"#.to_string(),
            // An image payload, twice in one line, and a text block before it.
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","content":[{{"type":"text","text":"x"}},{{"type":"image","data":"{b64}"}},{{"data":"{b64}","type":"image","mimeType":"image/png"}}]}}}}"#
            ),
            // Base64 `data` that is no image payload: a custom entry, a text block, a nested
            // block, a duplicate key (the runtime reads the last one).
            format!(r#"{{"type":"custom","id":"b","parentId":"a","data":"{b64}"}}"#),
            format!(
                r#"{{"type":"message","id":"c","parentId":"b","message":{{"role":"toolResult","content":[{{"type":"text","data":"{b64}"}},{{"type":"tool_result","content":[{{"type":"image","data":"{b64}"}}]}}]}}}}"#
            ),
            format!(
                r#"{{"type":"message","id":"d","parentId":"c","message":{{"role":"user","content":[{{"type":"image","data":"{b64}","data":"short"}}]}}}}"#
            ),
            // A long payload that is not plain ASCII is still a payload, not cut.
            format!(
                r#"{{"type":"message","id":"e","parentId":"d","message":{{"role":"user","content":[{{"type":"image","data":"{odd}"}},{{"type":"image","data":"{b64}"}}]}}}}"#
            ),
            // Broken lines stay broken.
            format!(r#"{{"type":"message","id":"f","data":"{b64}" "#),
            format!(r#"{{"type":"message","id":"g",data":"{b64}"}}"#),
            format!(
                r#"{{"type":"message","id":"h","parentId":"e","message":{{"role":"user","content":[{{"type":"image","data":"{b64}"}}],"x":"\ud800"}}}}"#
            ),
        ];
        let text = lines.join("\n") + "\n";
        let (cut, plain) = index_both_ways(&text, None);
        assert_eq!(format!("{cut:?}"), format!("{plain:?}"));
        assert_eq!(cut.payloads.len(), 4, "{:?}", cut.payloads);
        assert_eq!(cut.unparsable_line_numbers(), vec![7, 8, 9]);
        // The light line is the line without exactly its payloads.
        let mut b = IndexBuilder::default();
        let mut lights = 0;
        for raw in text.as_bytes().split_inclusive(|&c| c == b'\n') {
            b.push_line(raw);
            let body = raw.strip_suffix(b"\n").unwrap();
            let payloads: Vec<&Payload> = b.last_payloads().iter().collect();
            if let Some(light) = b.last_light() {
                assert_eq!(light, &*cut_payloads(body, &payloads));
                lights += 1;
            }
        }
        assert_eq!(lights, 1, "only line 2 has every payload cut");
        // Odd lines of every shape, measured or not.
        let mut rng = crate::compact::testgen::Rng::new(3);
        for _ in 0..200 {
            let text = oddlines::transcript(&mut rng, 30);
            for counter in [None, Some(TokenCounter::Heuristic)] {
                let (cut, plain) = index_both_ways(&text, counter);
                assert_eq!(format!("{cut:?}"), format!("{plain:?}"), "{text}");
            }
        }
    }

    #[test]
    fn lines_are_split_across_reads_of_any_size() {
        /// Yields at most `n` bytes per read.
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let long = "y".repeat(3 << 20);
        let text = format!("a\n\nbc\r\n{long}\nlast");
        for n in [1, 2, 3, 7, 1 << 20, usize::MAX] {
            let mut got: Vec<Vec<u8>> = Vec::new();
            for_each_line(Trickle(text.as_bytes(), n), |l| got.push(l.to_vec())).unwrap();
            let want: Vec<&[u8]> = text.as_bytes().split_inclusive(|&b| b == b'\n').collect();
            assert_eq!(got, want, "reads of {n}");
        }
    }

    #[test]
    fn a_parent_id_naming_the_entry_before_shares_its_id() {
        let text = concat!(
            r#"{"type":"session","version":3,"id":"s"}"#,
            "\n",
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
            "\n",
            "\n",
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"y"}}"#,
            "\n",
            r#"{"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"z"}}"#,
            "\n",
        );
        let idx = Index::from_reader(text.as_bytes()).unwrap();
        let id = |i: usize| idx.entries[i].id.clone().unwrap();
        let parent = |i: usize| match &idx.entries[i].parent {
            Parent::Id(p) => p.clone(),
            other => panic!("{other:?}"),
        };
        // Across a blank line, the entry before is still `a`.
        assert!(Arc::ptr_eq(&parent(2), &id(1)));
        // `c` names `a`, not the entry before it: an id of its own, equal in value.
        assert!(!Arc::ptr_eq(&parent(3), &id(1)));
        assert_eq!(parent(3), id(1));
    }

    #[test]
    fn index_records_lines_entries_and_unparsable_bytes() {
        let text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n\
{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"image\",\"data\":\"AA\"}]}}\n\
\n\
{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\" **no_reply** \"}],\"stopReason\":\"stop\"}}\n\
{\"type\":\"message\",\"id\":\"c\",\"par";
        let idx = Index::from_reader(&text[..]).unwrap();
        assert_eq!(idx.lines.len(), 5);
        assert_eq!(idx.size, text.len() as u64);
        assert_eq!(idx.header().unwrap().version(), Some(3));
        assert_eq!(idx.lines[2].kind, LineKind::Blank);
        assert_eq!(idx.unparsable_line_numbers(), vec![5]);
        assert!(!idx.lines[4].terminated);
        let a = idx.entry_of_line(1).unwrap();
        assert_eq!(a.image_blocks(), &[1]);
        assert_eq!(a.parent, Parent::Null);
        let b = idx.entry_of_line(3).unwrap();
        assert!(b.silent());
        assert_eq!(b.parent.id(), Some("a"));
        assert!(idx.mentioned_by_unparsable("c"));
        assert!(!idx.mentioned_by_unparsable("b"));
    }
}
