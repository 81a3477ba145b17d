//! Keeping the runtime's re-linking from moving kept entries when lines are removed.
//!
//! The runtime's loader hangs an indexed entry below its current leaf, whatever its
//! `parentId` says, when that `parentId` names the unknown-type "link" entry just before it
//! (see [`Loader`]). In the original that is usually where the link's own parent is; once
//! entries between are removed, the current leaf at that point can be another entry, and the
//! kept entry would silently move to another branch. [`pin_parents`] replays the loader over
//! the rewritten file and, for every kept indexed entry whose parent would then differ from its
//! nearest kept indexed ancestor in the original, writes that ancestor's id (or `null`) as its
//! `parentId`: an id of an indexed entry (or null) is not re-linked, except in the one case
//! a `leaf` record makes (right after a record whose `appendParentId` is not its leaf, an
//! entry naming that append parent hangs below the leaf); there the validator has the last
//! word, and a rewrite it cannot check is refused.

use std::collections::BTreeSet;

use super::rewrite::{LineAction, Patch};
use super::tree::{Loader, Tree, is_link, is_node};
use super::walk::{Step, Walk, follow};
use super::{EntryType, Index, Parent};

/// Where an entry's context continues above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Above {
    /// At this indexed entry, or nowhere (a root).
    Entry(Option<usize>),
    /// At an id that is not in the tree (it may name a line only the runtime can parse): not
    /// something this tool can check, so such entries are left as they are.
    Unknown,
}

/// Patch the `parentId` of every kept indexed entry that the runtime would otherwise re-link
/// to another parent in the rewritten file. `actions` are the per-line actions so far.
pub fn pin_parents(
    index: &Index,
    tree: &Tree,
    removed: &BTreeSet<usize>,
    actions: &mut [LineAction],
) {
    let entries = &index.entries;
    let n = entries.len();
    let kept = |i: usize| !removed.contains(&i) && is_node(&entries[i]);
    // Without a kept link or `leaf` record the runtime re-links nothing that the rewrite has
    // not already made explicit (entries without a `parentId` below a removed leaf are
    // patched before).
    if !(0..n).any(|i| {
        kept(i) && (is_link(&entries[i].kind, &entries[i].parent) || tree.leaf_effect(i).is_some())
    }) {
        return;
    }
    let kept_indexed = |i: usize| kept(i) && entries[i].kind.is_runtime_indexed();
    // Where the context continues above an entry: the entry's parent's nearest kept indexed
    // entry (at or above it) in the original tree.
    let mut at_or_above = vec![Walk::Unvisited; n];
    let mut resolved = vec![Walk::Unvisited; n];
    let mut loader = Loader::default();
    for i in (0..n).filter(|&i| kept(i)) {
        let e = &entries[i];
        let parent = written(index, actions, i);
        if !e.kind.is_runtime_indexed() {
            // (`leaf` records are never removed, nor what they name: each has its effect.)
            match tree.leaf_effect(i) {
                Some(effect) => loader.take_leaf_record(effect),
                None => loader.read(index, i, &parent),
            }
            continue;
        }
        let want = match tree.parent(i) {
            // (A cycle above it holds no kept indexed entry: the walk would have stopped there.)
            Some(p) => follow(&mut at_or_above, p, Above::Entry(None), |j| {
                match tree.parent(j) {
                    _ if kept_indexed(j) => Step::Answer(Above::Entry(Some(j))),
                    Some(p) => Step::Next(p),
                    None => Step::Answer(end_of(index, tree, j)),
                }
            }),
            None => end_of(index, tree, i),
        };
        if let Above::Entry(want) = want {
            let got = if let Some(leaf) = loader.hangs_below(index, i, &parent) {
                leaf
            } else if let Parent::Id(pid) = &parent {
                // What a written id resolves to: the indexed entry it names, or the one the
                // chain of kept links it names ends at.
                tree.find(index, pid).and_then(|j| {
                    follow(&mut resolved, j, None, |j| {
                        if !kept(j) {
                            Step::Answer(None)
                        } else if entries[j].kind.is_runtime_indexed() {
                            Step::Answer(Some(j))
                        } else if entries[j].kind == EntryType::Leaf {
                            // A record stands for the parent the runtime keeps for it.
                            match tree.parent(j) {
                                Some(k) => Step::Next(k),
                                None => Step::Answer(None),
                            }
                        } else {
                            match written(index, actions, j) {
                                Parent::Id(next) => match tree.find(index, &next) {
                                    Some(k) => Step::Next(k),
                                    None => Step::Answer(None),
                                },
                                _ => Step::Answer(None),
                            }
                        }
                    })
                })
            } else {
                None
            };
            if got != want {
                let id = want.and_then(|w| entries[w].id.as_deref().map(str::to_owned));
                set_parent(&mut actions[e.line()], id);
            }
        }
        loader.read(index, i, &parent);
    }
}

/// The `parentId` entry `i` has in the rewritten file.
fn written(index: &Index, actions: &[LineAction], i: usize) -> Parent {
    let e = &index.entries[i];
    match &actions[e.line()] {
        LineAction::Patch(p) if p.parent.is_some() => match p.parent.clone().flatten() {
            Some(id) => Parent::Id(id.into()),
            None => Parent::Null,
        },
        _ => e.parent.clone(),
    }
}

/// Where a walk up the original tree ends at entry `j`, which has no parent in the tree.
fn end_of(index: &Index, tree: &Tree, j: usize) -> Above {
    match index.entries[j].parent.id() {
        Some(pid) if tree.find(index, pid).is_none() => Above::Unknown,
        _ => Above::Entry(None),
    }
}

fn set_parent(action: &mut LineAction, id: Option<String>) {
    match action {
        LineAction::Patch(p) => p.parent = Some(id),
        _ => {
            *action = LineAction::Patch(Box::new(Patch {
                parent: Some(id),
                ..Patch::default()
            }))
        }
    }
}
