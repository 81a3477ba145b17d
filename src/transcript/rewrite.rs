//! Edits and the streaming rewrite that applies them.
//!
//! An [`Edits`] value says what a planner wants: entries to remove and content blocks to
//! replace. [`resolve`] turns it into per-line actions that keep the tree valid (spec §9.4):
//!
//! - every `label` whose target is removed is removed too;
//! - every kept entry whose parent is removed is re-parented to its nearest kept ancestor
//!   (or `null` when there is none);
//! - a compaction whose `firstKeptEntryId` is removed points at the first kept entry that
//!   follows it on the compaction's path, else at the compaction itself (keep nothing, as
//!   before);
//! - the leaf is never removed (that is an error, not a silent adjustment).
//!
//! [`apply`] then streams the source once: untouched lines are copied byte for byte, removed
//! lines are skipped, and changed lines are parsed with `jsjson::parse`, patched, and written
//! with `jsjson::to_string_compact` (what `JSON.stringify` writes: key order and unknown
//! fields kept). Every output line is also fed to an [`IndexBuilder`], so the result can be
//! validated without reading it back.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{self, BufRead, Write};

use anyhow::{Result, bail};
use serde_json::Value;

use super::tree::Tree;
use super::{EntryType, Index, IndexBuilder, LineKind};

/// What a planner asks for. Positions are entry indices of the [`Index`].
#[derive(Debug, Clone, Default)]
pub struct Edits {
    pub remove: BTreeSet<usize>,
    /// Entry → (content block position → replacement block).
    pub replace_blocks: BTreeMap<usize, Vec<(u32, Value)>>,
}

impl Edits {
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.replace_blocks.is_empty()
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
    pub blocks: Vec<(u32, Value)>,
}

/// What happens to each line.
#[derive(Debug, Clone)]
pub enum LineAction {
    Keep,
    Drop,
    Patch(Patch),
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
}

/// Resolve `edits` into per-line actions.
pub fn resolve(index: &Index, tree: &Tree, edits: &Edits) -> Result<Resolved> {
    let entries = &index.entries;
    let mut removed: BTreeSet<usize> = edits.remove.clone();
    if let Some(leaf) = tree.leaf
        && removed.contains(&leaf)
    {
        bail!("refusing to remove the leaf entry");
    }
    if let Some(last) = index.lines.last().and_then(|l| l.entry)
        && removed.contains(&last)
    {
        bail!("refusing to remove the last line");
    }
    for &i in &removed {
        if entries[i].id.is_none() || entries[i].kind == EntryType::Session {
            bail!("line {} is not a removable entry", entries[i].line + 1);
        }
    }
    let mut removed_ids: HashSet<String> = removed
        .iter()
        .filter_map(|&i| entries[i].id.clone())
        .collect();
    // Labels of removed targets go too (their own removal cannot cascade further: nothing
    // targets a label, and their children are re-parented below).
    for (i, e) in entries.iter().enumerate() {
        if e.kind == EntryType::Label
            && e.target.as_ref().is_some_and(|t| removed_ids.contains(t))
            && Some(i) != tree.leaf
            && e.id.is_some()
        {
            removed.insert(i);
        }
    }
    removed_ids.extend(removed.iter().filter_map(|&i| entries[i].id.clone()));
    for id in &removed_ids {
        if index.mentioned_by_unparsable(id) {
            bail!("an unparsable line mentions entry {id}; it cannot be removed safely");
        }
    }

    let parent_of: HashMap<&str, Option<&str>> = removed
        .iter()
        .filter_map(|&i| Some((entries[i].id.as_deref()?, entries[i].parent.id())))
        .collect();
    let nearest_kept = |start: &str| -> Option<String> {
        let mut cur = Some(start);
        let mut steps = 0;
        while let Some(id) = cur {
            match parent_of.get(id) {
                Some(up) => cur = *up,
                None => return Some(id.to_owned()),
            }
            steps += 1;
            if steps > parent_of.len() {
                return None; // a cycle made only of removed entries
            }
        }
        None
    };

    let mut actions = vec![LineAction::Keep; index.lines.len()];
    let mut blocks_replaced = 0;
    for (i, e) in entries.iter().enumerate() {
        if removed.contains(&i) {
            actions[e.line] = LineAction::Drop;
            continue;
        }
        let mut patch = Patch::default();
        if let Some(pid) = e.parent.id()
            && removed_ids.contains(pid)
        {
            patch.parent = Some(nearest_kept(pid));
        }
        if e.kind == EntryType::Compaction
            && let Some(fk) = e.first_kept.as_deref()
            && removed_ids.contains(fk)
        {
            patch.first_kept = Some(retarget_first_kept(index, tree, i, fk, &removed));
        }
        if let Some(blocks) = edits.replace_blocks.get(&i) {
            blocks_replaced += blocks.len();
            patch.blocks = blocks.clone();
        }
        if patch.parent.is_some() || patch.first_kept.is_some() || !patch.blocks.is_empty() {
            actions[e.line] = LineAction::Patch(patch);
        }
    }
    for &l in &index.invalid_utf8 {
        if matches!(actions[l], LineAction::Patch(_)) {
            bail!(
                "line {} holds invalid UTF-8 and would have to be rewritten; left as it is",
                l + 1
            );
        }
    }
    Ok(Resolved {
        actions,
        removed: removed.len(),
        removed_ids,
        blocks_replaced,
    })
}

/// The first kept entry after `fk` on compaction `c`'s path, else `c`'s own id.
fn retarget_first_kept(
    index: &Index,
    tree: &Tree,
    c: usize,
    fk: &str,
    removed: &BTreeSet<usize>,
) -> String {
    let path = tree.path_to(c);
    let own = || index.entries[c].id.clone().unwrap_or_default();
    let Some(pos) = path
        .iter()
        .position(|&i| index.entries[i].id.as_deref() == Some(fk))
    else {
        return own();
    };
    path[pos + 1..path.len() - 1]
        .iter()
        .find(|i| !removed.contains(i))
        .and_then(|&i| index.entries[i].id.clone())
        .unwrap_or_else(own)
}

/// What [`apply`] wrote.
#[derive(Debug)]
pub struct Applied {
    pub bytes_written: u64,
    /// The index of the written bytes.
    pub index: Index,
}

/// Stream `src` (the indexed file, read from its start) through `resolved` into `out`.
/// Reads exactly `index.size` bytes; a source that is shorter is an error.
pub fn apply(
    src: impl BufRead,
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn Write,
) -> Result<Applied> {
    let mut src = src.take(index.size);
    let mut builder = IndexBuilder::default();
    let mut buf = Vec::new();
    let mut written = 0u64;
    for (n, line) in index.lines.iter().enumerate() {
        buf.clear();
        let got = src.read_until(b'\n', &mut buf)?;
        if got as u64 != line.len {
            bail!("the file changed while it was being read (line {})", n + 1);
        }
        match &resolved.actions[n] {
            LineAction::Keep => {
                out.write_all(&buf)?;
                written += buf.len() as u64;
                builder.push_line(&buf);
            }
            LineAction::Drop => {}
            LineAction::Patch(patch) => {
                if line.kind != LineKind::Entry {
                    bail!("line {} cannot be patched: it is not an entry", n + 1);
                }
                let body = if line.terminated {
                    &buf[..buf.len() - 1]
                } else {
                    &buf[..]
                };
                let body = body.strip_suffix(b"\r").unwrap_or(body);
                let mut v = crate::jsjson::parse(body)
                    .map_err(|e| anyhow::anyhow!("line {} does not parse: {e}", n + 1))?;
                patch_value(&mut v, patch).map_err(|e| anyhow::anyhow!("line {}: {e}", n + 1))?;
                let mut text = crate::jsjson::to_string_compact(&v).into_bytes();
                if line.terminated {
                    text.push(b'\n');
                }
                out.write_all(&text)?;
                written += text.len() as u64;
                builder.push_line(&text);
            }
        }
    }
    Ok(Applied {
        bytes_written: written,
        index: builder.finish(),
    })
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
            *slot = block.clone();
        }
    }
    Ok(())
}
