//! Edits and the streaming rewrite that applies them.
//!
//! An [`Edits`] value says what a planner wants: entries to remove, content blocks to
//! replace, and new entries to append (which `compact` needs). [`resolve`] turns it into per-line actions that keep the tree valid (spec §9.4):
//!
//! - every `label` whose target is removed is removed too;
//! - every kept entry whose parent is removed is re-parented to its nearest kept ancestor
//!   (or `null` when there is none); a kept entry that the runtime would re-link elsewhere in
//!   the result names its nearest kept indexed ancestor instead (see [`super::relink`]);
//! - a compaction whose `firstKeptEntryId` is removed points at the first kept entry that
//!   follows it on the compaction's path, else at the compaction itself (keep nothing, as
//!   before);
//! - the leaf is never removed, nor a `leaf` record or an entry one names (that is an
//!   error, not a silent adjustment).
//!
//! [`apply`] then streams the source once: untouched lines are copied byte for byte, removed
//! lines are skipped, and changed lines are parsed with `jsjson::parse`, patched, and written
//! with `jsjson::to_string_compact` (what `JSON.stringify` writes: key order and unknown
//! fields kept). Every output line is also recorded in an [`IndexBuilder`] (a copied line
//! from the source index, a changed or appended one by probing it), so the result can be
//! validated without reading it back.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{self, Write};
use std::sync::Arc;

use anyhow::{Result, bail};
use serde_json::Value;

use super::tree::{self, Tree};
use super::{EntryType, Index, IndexBuilder, Line, LineKind};

/// What a planner asks for. Positions are entry indices of the [`Index`].
#[derive(Debug, Clone, Default)]
pub struct Edits {
    pub remove: BTreeSet<usize>,
    /// Entry → (content block position → replacement block; shared, as one placeholder
    /// replaces many blocks).
    pub replace_blocks: BTreeMap<usize, Vec<(u32, Arc<Value>)>>,
    /// Entry → how many media references to replace in the text of its `message.content`
    /// (`crate::mediarefs::scrub` on a string content and on the `text` of text blocks; the
    /// patch checks that it replaces exactly that many).
    pub scrub_media: BTreeMap<usize, u32>,
    /// New entries to append after the last line, in order (e.g. a compaction entry; the last
    /// one becomes the leaf). Each must be an object with a string `id` not used in the file.
    pub append: Vec<Value>,
}

impl Edits {
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty()
            && self.replace_blocks.is_empty()
            && self.scrub_media.is_empty()
            && self.append.is_empty()
    }

    /// Nothing but new entries at the end (which an append-only rewrite can do).
    pub fn only_appends(&self) -> bool {
        self.remove.is_empty() && self.replace_blocks.is_empty() && self.scrub_media.is_empty()
    }
}

/// A change to one kept line.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    /// New `parentId` (`None` writes `null`).
    pub parent: Option<Option<String>>,
    /// New `firstKeptEntryId`.
    pub first_kept: Option<String>,
    /// Content blocks of `message.content` to replace.
    pub blocks: Vec<(u32, Arc<Value>)>,
    /// Media references to replace in the text of `message.content` (0: none).
    pub media: u32,
}

/// What happens to each line.
#[derive(Debug, Clone)]
pub enum LineAction {
    Keep,
    Drop,
    /// Boxed: most lines are kept, and a big transcript has one action per line.
    Patch(Box<Patch>),
}

/// Edits resolved against an index: one action per line, plus what the validator should
/// expect.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub actions: Vec<LineAction>,
    /// Ids of every removed entry (planned removals plus dependent labels).
    pub removed_ids: HashSet<String>,
    /// Entries removed (planned plus dependent labels).
    pub removed: usize,
    /// Content blocks replaced.
    pub blocks_replaced: usize,
    /// Media references replaced in text.
    pub media_refs_replaced: usize,
    /// Lines to append (compact JSON, without the newline).
    pub append: Vec<String>,
    /// Ids of the appended entries.
    pub appended_ids: Vec<String>,
}

/// Resolve `edits` into per-line actions (taking its replacement blocks rather than copying
/// them: a big transcript has thousands).
pub fn resolve(index: &Index, tree: &Tree, mut edits: Edits) -> Result<Resolved> {
    let (removed, removed_ids) = removals(index, tree, &edits.remove)?;
    let mut actions = vec![LineAction::Keep; index.lines.len()];
    let mut blocks_replaced = 0;
    let mut media_refs_replaced = 0;
    for (i, e) in index.entries.iter().enumerate() {
        if removed.contains(&i) {
            actions[e.line()] = LineAction::Drop;
            continue;
        }
        let mut patch = links_patch(index, tree, &removed, i)?;
        if let Some(blocks) = edits.replace_blocks.remove(&i) {
            blocks_replaced += blocks.len();
            patch.blocks = blocks;
        }
        if let Some(&n) = edits.scrub_media.get(&i) {
            media_refs_replaced += n as usize;
            patch.media = n;
        }
        if patch.parent.is_some()
            || patch.first_kept.is_some()
            || !patch.blocks.is_empty()
            || patch.media > 0
        {
            actions[e.line()] = LineAction::Patch(Box::new(patch));
        }
    }
    super::relink::pin_parents(index, tree, &removed, &mut actions);
    for &l in &index.invalid_utf8 {
        if matches!(actions[l], LineAction::Patch(_)) {
            bail!(
                "line {} holds invalid UTF-8 and would have to be rewritten; left as it is",
                l + 1
            );
        }
    }
    let (append, appended_ids) = super::append::lines_of(index, tree, &edits.append)?;
    Ok(Resolved {
        actions,
        removed: removed.len(),
        removed_ids,
        blocks_replaced,
        media_refs_replaced,
        append,
        appended_ids,
    })
}

/// The entries removed (the planned ones plus the labels of removed targets) and their ids,
/// or why the planned removals cannot be made.
fn removals(
    index: &Index,
    tree: &Tree,
    planned: &BTreeSet<usize>,
) -> Result<(BTreeSet<usize>, HashSet<String>)> {
    let entries = &index.entries;
    let mut removed: BTreeSet<usize> = planned.clone();
    if let Some(leaf) = tree.leaf
        && removed.contains(&leaf)
    {
        bail!("refusing to remove the leaf entry");
    }
    if let Some(last) = index.lines.last().and_then(|l| l.entry())
        && removed.contains(&last)
    {
        bail!("refusing to remove the last line");
    }
    for &i in &removed {
        if entries[i].id.is_none()
            || matches!(entries[i].kind, EntryType::Session | EntryType::Leaf)
        {
            bail!("line {} is not a removable entry", entries[i].line + 1);
        }
        if tree.named_by_leaf_record(i) {
            bail!(
                "a `leaf` record names the entry on line {}",
                entries[i].line + 1
            );
        }
    }
    let id_set = |removed: &BTreeSet<usize>| -> HashSet<String> {
        removed
            .iter()
            .filter_map(|&i| entries[i].id.as_deref().map(str::to_owned))
            .collect()
    };
    let planned_ids = id_set(&removed);
    // Labels of removed targets go too (their own removal cannot cascade further: nothing
    // targets a label, and their children are re-parented below).
    let pinned = tree::kept_across_unparsable(index, tree);
    for (i, e) in entries.iter().enumerate() {
        if e.kind == EntryType::Label
            && e.target().is_some_and(|t| planned_ids.contains(t))
            && Some(i) != tree.leaf
            && !pinned.contains(&i)
            && !tree.named_by_leaf_record(i)
            && e.id
                .as_deref()
                .is_some_and(|id| !index.mentioned_by_unparsable(id))
        {
            // (A label that must stay keeps pointing at the removed target; the runtime
            // ignores labels of unknown entries.)
            removed.insert(i);
        }
    }
    let removed_ids = id_set(&removed);
    for id in &removed_ids {
        if index.mentioned_by_unparsable(id) {
            bail!("an unparsable line mentions entry {id}; it cannot be removed safely");
        }
    }
    Ok((removed, removed_ids))
}

/// The `parentId` and `firstKeptEntryId` changes kept entry `i` needs once `removed` are
/// gone.
fn links_patch(index: &Index, tree: &Tree, removed: &BTreeSet<usize>, i: usize) -> Result<Patch> {
    let e = &index.entries[i];
    let mut patch = Patch::default();
    if let Some(p) = tree.parent(i)
        && removed.contains(&p)
    {
        patch.parent = Some(nearest_kept(index, tree, removed, p));
    }
    if e.kind == EntryType::Compaction {
        let literal = e.first_kept().and_then(|fk| tree.find(index, fk));
        let effective = tree::effective_first_kept(index, tree, i);
        let target = match (literal, effective) {
            (Some(l), _) if removed.contains(&l) => Some(l),
            (_, Some(eff)) if removed.contains(&eff) => Some(eff),
            _ => None,
        };
        if let Some(gone) = target {
            patch.first_kept = Some(retarget_first_kept(index, tree, i, gone, removed)?);
        }
    }
    Ok(patch)
}

/// The id of the nearest kept ancestor of `start`, through the tree's resolved parents. A
/// removed entry whose `parentId` names an id that is not in the tree passes it on unchanged
/// (it may name a line only the runtime can parse); a cycle made only of removed entries
/// ends at null.
fn nearest_kept(
    index: &Index,
    tree: &Tree,
    removed: &BTreeSet<usize>,
    start: usize,
) -> Option<String> {
    let entries = &index.entries;
    let mut i = start;
    for _ in 0..=removed.len() {
        if !removed.contains(&i) {
            return entries[i].id.as_deref().map(str::to_owned);
        }
        match tree.parent(i) {
            Some(p) => i = p,
            None => {
                return entries[i]
                    .parent
                    .id()
                    .filter(|pid| tree.find(index, pid).is_none())
                    .map(str::to_owned);
            }
        }
    }
    None
}

/// The first kept entry the runtime indexes after `gone` on compaction `c`'s path, else `c`'s
/// own id (keep nothing, which is what a first-kept id off the path already meant).
fn retarget_first_kept(
    index: &Index,
    tree: &Tree,
    c: usize,
    gone: usize,
    removed: &BTreeSet<usize>,
) -> Result<String> {
    let path = tree.path_to(c);
    let own = || {
        index.entries[c]
            .id
            .as_deref()
            .unwrap_or_default()
            .to_owned()
    };
    let Some(pos) = path.iter().position(|&i| i == gone) else {
        if tree::is_truncated(index, tree, &path) {
            // The runtime may see the rest of this path (through a line we cannot parse).
            bail!(
                "compaction on line {} keeps entries beyond a line this tool cannot parse",
                index.entries[c].line + 1
            );
        }
        return Ok(own());
    };
    Ok(path[pos + 1..path.len() - 1]
        .iter()
        .find(|&&i| !removed.contains(&i) && index.entries[i].kind.is_runtime_indexed())
        .and_then(|&i| index.entries[i].id.as_deref().map(str::to_owned))
        .unwrap_or_else(own))
}

/// What [`apply`] wrote.
#[derive(Debug)]
pub struct Applied {
    pub bytes_written: u64,
    /// The index of the written bytes.
    pub index: Index,
}

/// One output line of [`apply_lines`], terminator included.
#[derive(Debug)]
pub enum Output<'a> {
    /// Source line `n`, copied as it is.
    Kept(usize, &'a [u8]),
    /// Source line `n`, patched.
    Patched(usize, &'a [u8]),
    /// A new line after the last one.
    Appended(&'a [u8]),
}

impl Output<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Output::Kept(_, b) | Output::Patched(_, b) | Output::Appended(b) => b,
        }
    }
}

/// Stream `src` (the indexed file, read from its start) through `resolved` into `out`.
/// Reads exactly `index.size` bytes; a source that is shorter is an error.
pub fn apply(
    src: impl io::Read,
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn Write,
) -> Result<Applied> {
    apply_lines(src, index, resolved, &mut |line| {
        out.write_all(line.bytes())?;
        Ok(())
    })
}

/// [`apply`] from the indexed file's bytes held in memory: kept lines are written from where
/// they lie, without a copy.
pub fn apply_bytes(
    bytes: &[u8],
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn Write,
) -> Result<Applied> {
    let bytes = &bytes[..bytes
        .len()
        .min(usize::try_from(index.size).unwrap_or(usize::MAX))];
    apply_fed(
        &mut |f| {
            super::for_each_line_in(bytes, |raw| f(Raw::Shared(raw)));
            Ok(())
        },
        index,
        resolved,
        &mut |line| {
            out.write_all(line.bytes())?;
            Ok(())
        },
    )
}

/// [`apply`] line by line: every line of the result goes to `out` in order (removed lines
/// are not visited), for writers that store lines apart (the rows of an agent database).
pub fn apply_lines(
    src: impl io::Read,
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn FnMut(Output) -> Result<()>,
) -> Result<Applied> {
    // Lines are handed out of the read buffer itself (see `for_each_line_mut`), and a line
    // whose patch keeps its length is patched there.
    let mut src = Some(src.take(index.size));
    apply_fed(
        &mut |f| {
            let src = src.take().expect("fed once");
            super::for_each_line_mut(src, |raw| f(Raw::Mut(raw)))
        },
        index,
        resolved,
        out,
    )
}

/// A line of the indexed file as [`apply_fed`] gets it: in a buffer it may patch, or where
/// it lies.
enum Raw<'a> {
    Mut(&'a mut [u8]),
    Shared(&'a [u8]),
}

/// Hands the indexed file's lines, in order, to the function it is given.
type Feed<'a> = dyn FnMut(&mut dyn FnMut(Raw)) -> io::Result<()> + 'a;

/// The apply, fed the indexed file's lines in order by `feed`.
fn apply_fed(
    feed: &mut Feed<'_>,
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn FnMut(Output) -> Result<()>,
) -> Result<Applied> {
    let mut builder = IndexBuilder::default();
    let mut written = 0u64;
    let mut n = 0usize;
    let mut failed: Option<anyhow::Error> = None;
    let changed =
        |n: usize| anyhow::anyhow!("the file changed while it was being read (line {})", n + 1);
    feed(&mut |raw| {
        if failed.is_some() {
            return;
        }
        let step = || -> Result<()> {
            let line = index.lines.get(n).ok_or_else(|| changed(n))?;
            let len = match &raw {
                Raw::Mut(raw) => raw.len(),
                Raw::Shared(raw) => raw.len(),
            };
            if len as u64 != line.len {
                return Err(changed(n));
            }
            let raw: &[u8] = match raw {
                Raw::Mut(raw) => {
                    if let LineAction::Patch(patch) = &resolved.actions[n]
                        && patch_in_place(n, line, raw, patch)?
                    {
                        out(Output::Patched(n, raw))?;
                        written += raw.len() as u64;
                        builder.push_line(raw);
                        return Ok(());
                    }
                    raw
                }
                Raw::Shared(raw) => raw,
            };
            match &resolved.actions[n] {
                LineAction::Keep => {
                    out(Output::Kept(n, raw))?;
                    written += raw.len() as u64;
                    builder.push_copied(raw, index, n);
                }
                LineAction::Drop => {}
                LineAction::Patch(patch) => {
                    let text = patch_line(n, line, raw, patch)?;
                    out(Output::Patched(n, &text))?;
                    written += text.len() as u64;
                    builder.push_line(&text);
                }
            }
            Ok(())
        };
        failed = step().err();
        n += 1;
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if n != index.lines.len() {
        return Err(changed(n));
    }
    for line in &resolved.append {
        let mut text = line.clone().into_bytes();
        text.push(b'\n');
        out(Output::Appended(&text))?;
        written += text.len() as u64;
        builder.push_line(&text);
    }
    Ok(Applied {
        bytes_written: written,
        index: builder.finish(),
    })
}

/// The bytes [`apply`] writes for line `n` (`raw`, terminator included) under `patch`: the
/// entry parsed, patched, and written as `JSON.stringify` would, with the line's `\n` kept
/// (a `\r` before it is dropped with the rest of the old formatting).
///
/// A patch that only sets top-level ids of a line already in `JSON.stringify`'s form is
/// spliced into the line's bytes instead (the same bytes, one copy; see [`super::splice`]).
fn patch_line(n: usize, line: &Line, raw: &[u8], patch: &Patch) -> Result<Vec<u8>> {
    let body = patch_body(n, line, raw)?;
    let mut text = match spliced(body, patch) {
        Some(s) => {
            let mut text = Vec::with_capacity(s.len() + 1);
            s.write_to(body, &mut text);
            text
        }
        None => crate::jsjson::to_string_compact(&patched_value(n, body, patch)?).into_bytes(),
    };
    if line.terminated {
        text.push(b'\n');
    }
    Ok(text)
}

/// Patch line `n` (`raw`, terminator included) where it lies, when [`patch_line`] would write
/// a line of the same length by splicing; `false`, with `raw` untouched, otherwise.
fn patch_in_place(n: usize, line: &Line, raw: &mut [u8], patch: &Patch) -> Result<bool> {
    let body = patch_body(n, line, raw)?;
    let len = body.len();
    // (A `\r` before the terminator is dropped: not the same length.)
    if len + usize::from(line.terminated) != raw.len() {
        return Ok(false);
    }
    Ok(spliced(body, patch).is_some_and(|s| s.apply_in_place(&mut raw[..len])))
}

/// The length of what [`patch_line`] writes, without building it.
pub fn patched_len(n: usize, line: &Line, raw: &[u8], patch: &Patch) -> Result<usize> {
    let body = patch_body(n, line, raw)?;
    let len = match spliced(body, patch) {
        Some(s) => s.len(),
        None => {
            let mut len = crate::jsjson::Len(0);
            crate::jsjson::write_value(&mut len, &patched_value(n, body, patch)?, None, 0);
            len.0
        }
    };
    Ok(len + usize::from(line.terminated))
}

/// The JSON text of line `n` (`raw`), without its terminator (nor a `\r` before it), when it
/// can be patched (it is an entry).
fn patch_body<'a>(n: usize, line: &Line, raw: &'a [u8]) -> Result<&'a [u8]> {
    if line.kind != LineKind::Entry {
        bail!("line {} cannot be patched: it is not an entry", n + 1);
    }
    let body = if line.terminated {
        &raw[..raw.len() - 1]
    } else {
        raw
    };
    Ok(body.strip_suffix(b"\r").unwrap_or(body))
}

/// `body` with `patch` spliced in, when splicing writes what [`patched_value`] serialised
/// would: the patch sets top-level ids and replaces content blocks, but scrubs no text.
fn spliced(body: &[u8], patch: &Patch) -> Option<super::splice::Splice> {
    if patch.media > 0 {
        return None;
    }
    let json = |s: &str| {
        let mut t = String::new();
        crate::jsjson::write_string(&mut t, s);
        t.into_bytes()
    };
    let mut sets = Vec::new();
    if let Some(parent) = &patch.parent {
        sets.push(("parentId", parent.as_deref().map_or(b"null".to_vec(), json)));
    }
    if let Some(fk) = &patch.first_kept {
        sets.push(("firstKeptEntryId", json(fk)));
    }
    let blocks: Vec<(u32, Vec<u8>)> = patch
        .blocks
        .iter()
        .map(|(pos, block)| {
            (
                *pos,
                crate::jsjson::to_string_compact(&**block).into_bytes(),
            )
        })
        .collect();
    super::splice::edit(body, &sets, &blocks)
}

/// The entry of line `n` (its JSON text `body`) with `patch` applied.
fn patched_value(n: usize, body: &[u8], patch: &Patch) -> Result<Value> {
    let mut v = crate::jsjson::parse(body).map_err(|e| {
        if crate::jsjson::is_too_deep(&e) {
            anyhow::Error::new(crate::jsjson::TooDeep { line: n + 1 })
        } else {
            anyhow::anyhow!("line {} does not parse: {e}", n + 1)
        }
    })?;
    patch_value(&mut v, patch).map_err(|e| anyhow::anyhow!("line {}: {e}", n + 1))?;
    Ok(v)
}

/// The size of the file [`apply`] would write, without writing it: kept lines count their
/// length, removed lines nothing, and only the patched lines are read back (by their byte
/// ranges, through `file`) and patched exactly as `apply` patches them. Used to predict what
/// a command frees without streaming the whole file a second time.
pub fn predicted_size(
    file: &(impl super::ReadAt + ?Sized),
    index: &Index,
    resolved: &Resolved,
) -> Result<u64> {
    let mut size = 0u64;
    let mut buf = Vec::new();
    for (n, line) in index.lines.iter().enumerate() {
        match &resolved.actions[n] {
            LineAction::Keep => size += line.len,
            LineAction::Drop => {}
            LineAction::Patch(patch) => {
                // No payload is read: the data of blocks the patch replaces cannot reach the
                // output, and a kept one is written as it is stored (an escape-free string
                // is its own JSON text), so it counts its length.
                let skipped = super::read_line_without(file, index, n, &mut buf, |_| true)?;
                if line.terminated && buf.last() != Some(&b'\n') {
                    bail!("the file changed while it was being read (line {})", n + 1);
                }
                let replaced: u64 = index
                    .payloads_of(n)
                    .iter()
                    .filter(|p| p.start as u64 + p.len as u64 <= line.len)
                    .filter(|p| patch.blocks.iter().any(|(b, _)| *b == p.block))
                    .map(|p| p.len as u64)
                    .sum();
                size += patched_len(n, line, &buf, patch)? as u64 + skipped - replaced;
            }
        }
    }
    Ok(size
        + resolved
            .append
            .iter()
            .map(|l| l.len() as u64 + 1)
            .sum::<u64>())
}

fn patch_value(v: &mut Value, patch: &Patch) -> io::Result<()> {
    let obj = v
        .as_object_mut()
        .ok_or_else(|| io::Error::other("not an object"))?;
    if let Some(parent) = &patch.parent {
        let new = parent.clone().map_or(Value::Null, Value::String);
        // Keep the key's position: insert on an existing key replaces in place.
        obj.insert("parentId".into(), new);
    }
    if let Some(fk) = &patch.first_kept {
        obj.insert("firstKeptEntryId".into(), Value::String(fk.clone()));
    }
    if !patch.blocks.is_empty() {
        let content = obj
            .get_mut("message")
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
            .ok_or_else(|| io::Error::other("message has no content array"))?;
        for (pos, block) in &patch.blocks {
            let slot = content
                .get_mut(*pos as usize)
                .ok_or_else(|| io::Error::other("content block out of range"))?;
            *slot = Value::clone(block);
        }
    }
    if patch.media > 0 {
        let content = obj
            .get_mut("message")
            .and_then(|m| m.get_mut("content"))
            .ok_or_else(|| io::Error::other("message has no content"))?;
        let done = scrub_media(content);
        if done != patch.media {
            return Err(io::Error::other(format!(
                "{done} media reference(s) found to replace, {} planned",
                patch.media
            )));
        }
    }
    Ok(())
}

/// Replace the media references of a message content as `strip-images` does (a string
/// content, and the `text` of `{"type":"text"}` blocks, each by `mediarefs::scrub`); returns
/// how many were replaced.
fn scrub_media(content: &mut Value) -> u32 {
    use crate::mediarefs::{Scrub, scrub};
    let one = |s: &mut String| match scrub(s) {
        Scrub::Replaced(t, n) => {
            *s = t;
            n
        }
        _ => 0,
    };
    match content {
        Value::String(s) => one(s),
        Value::Array(blocks) => blocks
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| match b.get_mut("text") {
                Some(Value::String(s)) => Some(one(s)),
                _ => None,
            })
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::validate::{Expectation, validate};

    fn run(text: &str, remove: &[&str]) -> (String, Resolved) {
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let edits = Edits {
            remove: remove
                .iter()
                .map(|id| tree.find(&index, id).unwrap())
                .collect(),
            ..Edits::default()
        };
        let resolved = resolve(&index, &tree, edits.clone()).unwrap();
        let mut out = Vec::new();
        let applied = apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        let expect = Expectation::removals(resolved.removed_ids.clone());
        validate(&index, &applied.index, &expect).unwrap();
        assert_eq!(predicted(text, &index, &resolved), out.len() as u64);
        (String::from_utf8(out).unwrap(), resolved)
    }

    /// [`predicted_size`] of `text` (written to a file) under `resolved`, which reading the
    /// same bytes from memory must give too.
    fn predicted(text: &str, index: &Index, resolved: &Resolved) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        let n = predicted_size(&std::fs::File::open(&p).unwrap(), index, resolved).unwrap();
        let in_memory = predicted_size(text.as_bytes(), index, resolved).unwrap();
        assert_eq!(n, in_memory, "{text}");
        n
    }

    #[test]
    fn the_index_of_a_rewrite_is_the_index_of_what_it_wrote() {
        // Kept lines are recorded from the source index, not parsed again: over odd files
        // and random removals, that index is the one a fresh read of the output makes.
        let mut rng = crate::compact::testgen::Rng::new(31);
        let mut applied_n = 0;
        for _ in 0..300 {
            let text = crate::transcript::oddlines::transcript(&mut rng, 30);
            let index = Index::from_reader(text.as_bytes()).unwrap();
            let tree = Tree::build(&index);
            let remove = (1..index.entries.len())
                .filter(|_| rng.chance(20))
                .collect();
            let edits = Edits {
                remove,
                ..Edits::default()
            };
            let Ok(resolved) = resolve(&index, &tree, edits.clone()) else {
                continue;
            };
            let mut out = Vec::new();
            let Ok(applied) = apply(text.as_bytes(), &index, &resolved, &mut out) else {
                continue;
            };
            // From the bytes in memory: the same output and index; and bytes that end early
            // are refused, as a file that does.
            let mut from_bytes = Vec::new();
            let held = apply_bytes(text.as_bytes(), &index, &resolved, &mut from_bytes).unwrap();
            assert!(from_bytes == out, "{text}");
            assert_eq!(format!("{:?}", held.index), format!("{:?}", applied.index));
            let short = &text.as_bytes()[..text.len() - 1];
            assert!(apply_bytes(short, &index, &resolved, &mut Vec::new()).is_err());
            assert!(apply(short, &index, &resolved, &mut Vec::new()).is_err());
            let fresh = Index::from_reader(&out[..]).unwrap();
            assert_eq!(
                format!("{:?}", applied.index),
                format!("{fresh:?}"),
                "{text}"
            );
            applied_n += 1;
        }
        assert!(applied_n > 100, "{applied_n}");
    }

    #[test]
    fn predicted_size_is_what_apply_writes_for_odd_lines_too() {
        // Spaces, escapes that JSON.stringify writes differently, CRLF and a torn tail.
        let text = [
            H,
            "{ \"type\" : \"message\", \"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"data\":\"QUJD\"},{\"type\":\"text\",\"text\":\"caf\\u00e9 \\/x\"}]}}\r",
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":"NO_REPLY"},"n":1.0e2}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"message","id":"d","par"#,
        ]
        .join("\n");
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let placeholder =
            Arc::new(serde_json::json!({"type": "text", "text": "[image data removed]"}));
        let edits = Edits {
            remove: [tree.find(&index, "b").unwrap()].into(),
            replace_blocks: [(tree.find(&index, "a").unwrap(), vec![(0, placeholder)])].into(),
            ..Edits::default()
        };
        let resolved = resolve(&index, &tree, edits.clone()).unwrap();
        let mut out = Vec::new();
        apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        assert_ne!(out.len(), text.len());
        assert_eq!(predicted(&text, &index, &resolved), out.len() as u64);
    }

    #[test]
    fn predicted_size_counts_kept_payloads_without_reading_them() {
        let b64 = "QUJD+/==".repeat(300);
        let img = format!(r#"{{"type":"image","data":"{b64}","mimeType":"image/png"}}"#);
        let text = [
            H.to_string(),
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","content":[{img},{{"type":"text","text":"caf\u00e9"}},{img}]}}}}"#
            ),
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":"NO_REPLY"}}"#.to_string(),
            // Re-parented: patched with its payload kept.
            format!(
                r#"{{"type":"message","id":"c","parentId":"b","message":{{"role":"toolResult","toolCallId":"x","content":[{img}]}}}}"#
            ),
            String::new(),
        ]
        .join("\n");
        let index = Index::from_reader(text.as_bytes()).unwrap();
        assert_eq!(index.payloads.len(), 3);
        let tree = Tree::build(&index);
        let placeholder =
            Arc::new(serde_json::json!({"type": "text", "text": "[image data removed]"}));
        let edits = Edits {
            remove: [tree.find(&index, "b").unwrap()].into(),
            replace_blocks: [(tree.find(&index, "a").unwrap(), vec![(2, placeholder)])].into(),
            ..Edits::default()
        };
        let resolved = resolve(&index, &tree, edits.clone()).unwrap();
        let mut out = Vec::new();
        apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        assert_eq!(predicted(&text, &index, &resolved), out.len() as u64);
    }

    const H: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;

    #[test]
    fn an_entry_without_parent_id_is_reparented_explicitly() {
        let text = [
            H,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"c","message":{"role":"user","content":"y"}}"#,
            "",
        ]
        .join("\n");
        let (out, r) = run(&text, &["b"]);
        assert_eq!(r.removed, 1);
        assert!(out.ends_with(
            "{\"type\":\"message\",\"id\":\"c\",\"message\":{\"role\":\"user\",\"content\":\"y\"},\"parentId\":\"a\"}\n"
        ));
    }

    /// A re-parented line is written as the parse path writes it, whether it is spliced where
    /// it lies (stringify's form, an id of the same length), spliced into a new line (another
    /// length, or no `parentId` yet) or parsed (any other form, or a `\r` to drop).
    #[test]
    fn re_parented_lines_are_written_as_the_parse_path_writes_them() {
        let children = [
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"café \" \n"}}"#,
            r#"{"type":"message","id":"c","parentId":"bb","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"message","id":"c","message":{"role":"user","content":"y"},"n":[1.5,-2,1e+21]}"#,
            r#"{"type":"message", "id":"c","parentId":"b","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"a\/b"},"n":1.0}"#,
            "{\"type\":\"message\",\"id\":\"c\",\"parentId\":\"b\",\"message\":{\"role\":\"user\",\"content\":\"y\"}}\r",
        ];
        for child in children {
            let silent = if child.contains("\"bb\"") { "bb" } else { "b" };
            let text = [
                H.to_string(),
                r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#.to_string(),
                format!(r#"{{"type":"message","id":"{silent}","parentId":"a","message":{{"role":"assistant","content":"NO_REPLY"}}}}"#),
                child.to_string(),
                String::new(),
            ]
            .join("\n");
            let (out, r) = run(&text, &[silent]);
            assert_eq!(r.removed, 1, "{child}");
            let body = child.strip_suffix('\r').unwrap_or(child);
            let mut v = crate::jsjson::parse(body.as_bytes()).unwrap();
            v.as_object_mut()
                .unwrap()
                .insert("parentId".into(), Value::String("a".into()));
            let want = format!("{}\n", crate::jsjson::to_string_compact(&v));
            assert!(out.ends_with(&want), "{child}:\n{out}");
            assert_eq!(out.lines().count(), 3, "{out}");
        }
    }

    /// Removing `s1` would leave `e1`'s parentId naming the unknown entry just before it while
    /// the runtime's leaf there is `a1`: the runtime would hang `e1` below `a1` (its loader,
    /// 2026.7.1 and 2026.7.35, is run on these files). `e1` names `u1`, where it was, instead.
    #[test]
    fn an_entry_the_runtime_would_re_link_names_its_parent_explicitly() {
        let text = [
            H,
            r#"{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":"ok"}}"#,
            r#"{"type":"weird","id":"o1","parentId":"u1"}"#,
            r#"{"type":"message","id":"s1","parentId":"a1","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"e1","parentId":"o1","message":{"role":"user","content":"y"}}"#,
            "",
        ]
        .join("\n");
        let (out, r) = run(&text, &["s1"]);
        assert_eq!(r.removed, 1);
        assert!(
            out.ends_with(
                "{\"type\":\"weird\",\"id\":\"o1\",\"parentId\":\"u1\"}\n{\"type\":\"message\",\"id\":\"e1\",\"parentId\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"y\"}}\n"
            ),
            "{out}"
        );
        // The runtime's context: the same after the rewrite as before it, and another one
        // had `s1` only been dropped.
        let dropped = text.replace(&format!("{}\n", text.lines().nth(4).unwrap()), "");
        let test = "an_entry_the_runtime_would_re_link_names_its_parent_explicitly";
        if let Some(stable) = crate::compact::testgen::require_oracle(test) {
            let extended = crate::compact::testgen::extended_oracle_dir();
            for dir in std::iter::once(stable).chain(extended) {
                let texts = [text.clone(), out.clone(), dropped.clone()];
                let c = crate::compact::testgen::loader_contexts(&dir, &texts);
                assert_eq!(c[0].len(), 2, "{}: {c:?}", dir.display());
                assert_eq!(c[0], c[1], "{}", dir.display());
                assert_ne!(c[0], c[2], "{}", dir.display());
            }
        }
        // Nothing to remove next to a link: nothing re-linked, nothing patched.
        let (out, _) = run(&text, &[]);
        assert_eq!(out, text);
    }

    #[test]
    fn first_kept_moves_to_the_next_kept_entry_or_the_compaction() {
        let text = [
            H,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"y"}}"#,
            r#"{"type":"compaction","id":"k","parentId":"c","summary":"s","firstKeptEntryId":"b","tokensBefore":1}"#,
            r#"{"type":"message","id":"d","parentId":"k","message":{"role":"assistant","content":"NO_REPLY"}}"#,
            r#"{"type":"compaction","id":"k2","parentId":"d","summary":"s","firstKeptEntryId":"d","tokensBefore":1}"#,
            r#"{"type":"message","id":"e","parentId":"k2","message":{"role":"user","content":"z"}}"#,
            "",
        ]
        .join("\n");
        let (out, _) = run(&text, &["b", "d"]);
        assert!(out.contains(r#""firstKeptEntryId":"c""#), "{out}");
        assert!(out.contains(r#"{"type":"compaction","id":"k2","parentId":"k","summary":"s","firstKeptEntryId":"k2","tokensBefore":1}"#), "{out}");
    }
}

#[cfg(test)]
mod append_tests {
    use super::*;
    use crate::transcript::validate::{Expectation, validate};

    #[test]
    fn appended_entries_become_the_leaf_and_are_validated() {
        let text = concat!(
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
            "\n",
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
            "\n"
        );
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let c: Value = serde_json::from_str(
            r#"{"type":"compaction","id":"c","parentId":"a","summary":"s","firstKeptEntryId":"a","tokensBefore":1}"#,
        )
        .unwrap();
        let edits = Edits {
            append: vec![c.clone()],
            ..Edits::default()
        };
        let resolved = resolve(&index, &tree, edits.clone()).unwrap();
        let mut out = Vec::new();
        let applied = apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{text}{}\n", crate::jsjson::to_string_compact(&c))
        );
        let expect = Expectation {
            appended_ids: resolved.appended_ids.clone(),
            check_context: false,
            ..Expectation::removals(Default::default())
        };
        validate(&index, &applied.index, &expect).unwrap();
        // Without declaring the append, the moved leaf is caught.
        assert!(
            validate(
                &index,
                &applied.index,
                &Expectation::removals(Default::default())
            )
            .is_err()
        );
        // Reused ids and torn last lines are refused.
        let dup = Edits {
            append: vec![serde_json::json!({"type":"custom","id":"a"})],
            ..Edits::default()
        };
        assert!(resolve(&index, &tree, dup.clone()).is_err());
        let torn = format!("{text}{{\"type\"");
        let ti = Index::from_reader(torn.as_bytes()).unwrap();
        assert!(resolve(&ti, &Tree::build(&ti), edits.clone()).is_err());
    }
}
