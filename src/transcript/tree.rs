//! The entry tree of one transcript: parent links, the leaf, the active path, and the context
//! the runtime rebuilds from them (spec §6), plus tool-call pairing statistics (§13).
//!
//! Tree nodes are the parsed non-header entries with a non-empty string `id`. Parents follow
//! the runtime's loader, which reads the file in order keeping the last entry it indexes (the
//! current leaf) and the last entry an append would hang below (that leaf, or an entry of an
//! unknown type that names a parent, a "link"): an indexed entry without a `parentId` field,
//! or whose `parentId` names that link while the leaf is another entry, hangs below the
//! current leaf; every other `parentId` is followed as written (see [`Loader`]). The **leaf**
//! is the last entry in file order whose type the runtime indexes and that is not
//! side-appended (unknown types are opaque to it and never become the leaf), unless a `leaf`
//! control record after it moves the leaf: newer runtimes write one when they rewrite a file
//! whose last entry is not the leaf (after removing the reply of an interrupted turn or of a
//! context overflow). A record the runtime reads sets its leaf and the entry the next append
//! hangs below, and stands for that leaf where a `parentId` names it; one naming an entry
//! not read yet is ignored but keeps its own `parentId` (see [`LeafEffect`]). The **active
//! path** is the chain from the leaf up through `parentId` to a root, reversed; the walk stops
//! at a missing parent (as the runtime does) and at a repeated id (a cycle).
//!
//! The **context** follows `buildSessionContext`: only the last `compaction` on the path
//! counts; it contributes its summary, then the path entries before it starting at its
//! `firstKeptEntryId` (nothing when that id is not found before it; an id naming an entry of a
//! type the runtime does not index stands for that entry's nearest indexed ancestor), then
//! everything after it.
//! Entries contribute when they are `message`, `custom_message`, or `branch_summary` with a
//! non-empty summary.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::idtable::IdTable;
use super::{Entry, EntryType, Index, LeafRecord, Parent, Role};

/// Parent links over the entries of an [`Index`] (all positions are entry indices).
#[derive(Debug, Clone)]
pub struct Tree {
    /// Entry index by id (first occurrence); see [`Tree::find`].
    by_id: IdTable,
    /// Ids that occur more than once.
    pub duplicate_ids: Vec<String>,
    /// Resolved parent of each entry ([`NONE`]: root, missing parent, or not a tree node);
    /// see [`Tree::parent`]. Positions are `u32` to keep a big transcript's tree small.
    parents: Vec<u32>,
    /// The children of every entry, built the first time they are asked for (see
    /// [`Tree::children`]): the validator of a rewrite builds two trees and asks for none.
    children: OnceLock<Children>,
    /// Tree nodes whose `parentId` names an id that is not in the file.
    pub dangling: Vec<usize>,
    /// The leaf entry.
    pub leaf: Option<usize>,
    /// What each `leaf` control record the runtime accepts does to its loader (see
    /// [`LeafEffect`]), by entry index.
    leaf_effects: HashMap<usize, LeafEffect>,
    /// The entries the `leaf` control records depend on (see
    /// [`Tree::named_by_leaf_record`]).
    named_by_leaf_records: HashSet<usize>,
}

/// What an accepted `leaf` control record does as the runtime's loader reads it: the leaf
/// moves to `leaf` (the record's `targetId`, or the indexed entry a chain of opaque entries
/// from it ends at; `None`: no leaf), and the next append hangs below `append` (the record's
/// `appendParentId`, or the new leaf when it has none; `None`: null). The record itself then
/// stands for `leaf` wherever a `parentId` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafEffect {
    pub leaf: Option<usize>,
    pub append: Option<usize>,
}

/// No parent, in [`Tree`]'s compact parent table.
const NONE: u32 = u32::MAX;

/// One element of the rebuilt context (entry positions are `u32`, as in [`Tree`]: a context
/// is as long as the file; see [`ContextItem::at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextItem {
    /// The summary message of the compaction entry at this index.
    CompactionSummary(u32),
    /// The message of the entry at this index.
    Entry(u32),
}

impl ContextItem {
    /// The entry this item comes from.
    pub fn at(self) -> usize {
        match self {
            ContextItem::CompactionSummary(i) | ContextItem::Entry(i) => i as usize,
        }
    }
}

/// Tool call / result pairing problems the runtime would repair at replay time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pairing {
    /// Tool calls without a result before the next assistant message.
    pub missing: usize,
    /// Results that answer no call of the preceding assistant.
    pub orphans: usize,
    /// Results for a call that already had one.
    pub duplicates: usize,
}

impl Pairing {
    /// No kind of problem is more frequent than in `before`.
    pub fn no_worse_than(&self, before: &Pairing) -> bool {
        self.missing <= before.missing
            && self.orphans <= before.orphans
            && self.duplicates <= before.duplicates
    }
}

impl Tree {
    pub fn build(index: &Index) -> Tree {
        let n = index.entries.len();
        let mut by_id = IdTable::with_capacity(n);
        let mut duplicate_ids = Vec::new();
        for (i, e) in index.entries.iter().enumerate() {
            if is_node(e) && !by_id.insert_first(&index.entries, i) {
                duplicate_ids.push(e.id.as_deref().expect("nodes have ids").to_string());
            }
        }
        // Resolved parents as the tree keeps them ([`NONE`]: none), filled in file order.
        let mut parents: Vec<u32> = vec![NONE; n];
        let pack = |p: Option<usize>| p.map_or(NONE, |p| p as u32);
        let mut dangling = Vec::new();
        let mut loader = Loader::default();
        let mut leaf_effects = HashMap::new();
        let mut rejected_leaf_records = HashSet::new();
        for (i, e) in index.entries.iter().enumerate() {
            if !is_node(e) {
                continue;
            }
            if e.kind == EntryType::Leaf {
                // A `leaf` line the runtime does not read is no entry to it: nothing hangs
                // through it. One it reads stands for the leaf it sets, or, when it names an
                // entry not read yet, for its own `parentId` (when that is known by then).
                let Some(record) = e.leaf_record() else {
                    continue;
                };
                let seen = SoFar {
                    index,
                    by_id: &by_id,
                    parents: &parents,
                    rejected: &rejected_leaf_records,
                    before: i,
                };
                match seen.leaf_effect(record) {
                    Some(effect) => {
                        parents[i] = pack(effect.leaf);
                        loader.take_leaf_record(effect);
                        leaf_effects.insert(i, effect);
                    }
                    None => {
                        parents[i] = pack(e.parent.id().and_then(|p| {
                            seen.lookup(p).filter(|&j| seen.known(j) != Known::Unknown)
                        }));
                        rejected_leaf_records.insert(i);
                    }
                }
                continue;
            }
            if let Some(leaf) = loader.hangs_below(index, i, &e.parent) {
                parents[i] = pack(leaf);
            } else if let Parent::Id(pid) = &e.parent {
                match by_id.get(&index.entries, pid) {
                    Some(p) => parents[i] = pack(Some(p)),
                    None => dangling.push(i),
                }
            }
            loader.read(index, i, &e.parent);
        }
        let leaf = loader.leaf;
        let named_by_leaf_records = named_by_leaf_records(index, &by_id, &leaf_effects);
        Tree {
            by_id,
            duplicate_ids,
            parents,
            children: OnceLock::new(),
            dangling,
            leaf,
            leaf_effects,
            named_by_leaf_records,
        }
    }

    /// What the `leaf` control record at entry `i` does to the runtime's loader, when the
    /// runtime accepts it (see [`LeafEffect`]).
    pub fn leaf_effect(&self, i: usize) -> Option<LeafEffect> {
        self.leaf_effects.get(&i).copied()
    }

    /// Whether entry `i` is one the `leaf` control records depend on: one their `parentId`,
    /// `targetId` or `appendParentId` names, or one they resolve to. A rewrite keeps such
    /// entries, so every record still means what it meant (the records themselves are never
    /// removed).
    pub fn named_by_leaf_record(&self, i: usize) -> bool {
        self.named_by_leaf_records.contains(&i)
    }

    /// The resolved parent of entry `i` (`None`: a root, a missing parent, or not a tree node).
    pub fn parent(&self, i: usize) -> Option<usize> {
        let p = self.parents[i];
        (p != NONE).then_some(p as usize)
    }

    /// The entry that entry `i`'s `parentId` names as written, without the runtime's
    /// re-linking (`None`: absent, null, or not in the file). The runtime walks these when it
    /// looks for a stand-in for a compaction's unindexed `firstKeptEntryId`.
    pub fn written_parent(&self, index: &Index, i: usize) -> Option<usize> {
        self.find(index, index.entries[i].parent.id()?)
    }

    /// The entry with this id (the first, when several have it). `index` is the index the
    /// tree was built on.
    pub fn find(&self, index: &Index, id: &str) -> Option<usize> {
        self.by_id.get(&index.entries, id)
    }

    /// Every id of the tree with its entry (the first with it), in no particular order.
    pub fn ids<'a>(&'a self, index: &'a Index) -> impl Iterator<Item = (&'a str, usize)> {
        self.by_id.iter(&index.entries)
    }

    /// The children of entry `i`, in file order.
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let c = self.children.get_or_init(|| Children::of(&self.parents));
        let (a, b) = (c.start[i] as usize, c.start[i + 1] as usize);
        c.list[a..b].iter().map(|&c| c as usize)
    }

    /// Take in the entries of `index` beyond those this tree was built from (lines appended
    /// to the index since), exactly as [`Tree::build`] would place them; earlier entries keep
    /// their positions and links. The compact parent and child tables are rebuilt: appends
    /// are rare (one compaction entry), and the tables are small.
    pub fn extend(&mut self, index: &Index) {
        *self = Tree::build(index);
    }

    /// The id of the leaf entry.
    pub fn leaf_id<'a>(&self, index: &'a Index) -> Option<&'a str> {
        self.leaf.and_then(|l| index.entries[l].id.as_deref())
    }

    /// Entries from a root down to `from`, in path order. Stops at a cycle.
    pub fn path_to(&self, from: usize) -> Vec<usize> {
        let mut seen = vec![false; self.parents.len()];
        let mut path = Vec::new();
        let mut cur = Some(from);
        while let Some(c) = cur {
            if std::mem::replace(&mut seen[c], true) {
                break;
            }
            path.push(c);
            cur = self.parent(c);
        }
        path.reverse();
        path
    }

    /// The active path (root to leaf); empty when there is no leaf.
    pub fn active_path(&self) -> Vec<usize> {
        self.leaf.map(|l| self.path_to(l)).unwrap_or_default()
    }

    /// Roots: nodes with no resolved parent (a null, absent or missing `parentId`).
    pub fn roots(&self, index: &Index) -> Vec<usize> {
        (0..index.entries.len())
            .filter(|&i| is_node(&index.entries[i]) && self.parent(i).is_none())
            .collect()
    }

    /// Nodes that no root reaches: members of a cycle or hanging below one. Found by walking
    /// up the parent links (a node is reached when its walk ends at a root), so that the
    /// children need not be built.
    pub fn unreachable(&self, index: &Index) -> Vec<usize> {
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            Unknown,
            OnWalk,
            Reached,
            Unreached,
        }
        let n = index.entries.len();
        let mut state = vec![State::Unknown; n];
        let mut walk = Vec::new();
        for i in (0..n).filter(|&i| is_node(&index.entries[i])) {
            let mut cur = i;
            let verdict = loop {
                match state[cur] {
                    State::Reached => break State::Reached,
                    // A walk that comes back to itself is a cycle.
                    State::Unreached | State::OnWalk => break State::Unreached,
                    // Parents are nodes: the walk stays on them.
                    State::Unknown => {}
                }
                state[cur] = State::OnWalk;
                walk.push(cur);
                match self.parent(cur) {
                    Some(p) => cur = p,
                    None => break State::Reached,
                }
            };
            for j in walk.drain(..) {
                state[j] = verdict;
            }
        }
        (0..n)
            .filter(|&i| is_node(&index.entries[i]) && state[i] == State::Unreached)
            .collect()
    }
}

/// The children of every entry in compressed rows: the children of entry `i` are
/// `list[start[i]..start[i + 1]]`, in file order.
#[derive(Debug, Clone)]
struct Children {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Children {
    /// From the resolved parents: count per parent, then fill in file order.
    fn of(parents: &[u32]) -> Children {
        let n = parents.len();
        let mut start = vec![0u32; n + 1];
        for &p in parents.iter().filter(|&&p| p != NONE) {
            start[p as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill: Vec<u32> = start[..n].to_vec();
        let mut list = vec![0u32; start[n] as usize];
        for (i, &p) in parents.iter().enumerate() {
            if p != NONE {
                let p = p as usize;
                list[fill[p] as usize] = i as u32;
                fill[p] += 1;
            }
        }
        Children { start, list }
    }
}

/// The entries the `leaf` control records of `index` name (`parentId`, `targetId`,
/// `appendParentId`, by `by_id`) or resolve to (`effects`): see [`Tree::named_by_leaf_record`].
fn named_by_leaf_records(
    index: &Index,
    by_id: &IdTable,
    effects: &HashMap<usize, LeafEffect>,
) -> HashSet<usize> {
    let mut named = HashSet::new();
    for (i, e) in index.entries.iter().enumerate() {
        let Some(record) = e.leaf_record() else {
            continue;
        };
        let ids = [
            e.parent.id(),
            record.target.as_deref(),
            record.append_parent.as_ref().and_then(|a| a.as_deref()),
        ];
        named.extend(
            ids.into_iter()
                .flatten()
                .filter_map(|id| by_id.get(&index.entries, id)),
        );
        if let Some(effect) = effects.get(&i) {
            named.extend(effect.leaf.into_iter().chain(effect.append));
        }
    }
    named
}

/// The state the runtime's loader keeps while it reads a transcript's entries in file order:
/// its current leaf (the last indexed entry that is not side-appended) and the entry an append
/// would hang below (the last indexed entry, or a later entry of an unknown type that names a
/// parent, null included: a "link").
#[derive(Debug, Clone, Copy, Default)]
pub struct Loader {
    pub leaf: Option<usize>,
    append_parent: Option<usize>,
}

impl Loader {
    /// Where the loader hangs tree node `i`, an entry it is about to read whose `parentId` is
    /// `parent`, when it ignores that `parentId`: below the current leaf (`Some(leaf)`, which
    /// may be `None`: a root) when the entry is indexed and has no `parentId`, or is not
    /// side-appended and names the link just read while the leaf is another entry. `None`:
    /// the `parentId` counts.
    pub fn hangs_below(&self, index: &Index, i: usize, parent: &Parent) -> Option<Option<usize>> {
        let e = &index.entries[i];
        if !e.kind.is_runtime_indexed() {
            return None;
        }
        let id_of = |i: Option<usize>| i.and_then(|i| index.entries[i].id.as_deref());
        match parent {
            Parent::Absent => Some(self.leaf),
            // Only after a `leaf` record whose `appendParentId` is null: the next append's
            // null `parentId` is the runtime's own, so it hangs below the leaf.
            Parent::Null
                if !e.side_append() && self.append_parent.is_none() && self.leaf.is_some() =>
            {
                Some(self.leaf)
            }
            Parent::Id(pid)
                if !e.side_append()
                    && id_of(self.append_parent) == Some(&**pid)
                    && id_of(self.leaf) != Some(&**pid) =>
            {
                Some(self.leaf)
            }
            _ => None,
        }
    }

    /// Take in an accepted `leaf` control record (see [`Tree::leaf_effect`]).
    pub fn take_leaf_record(&mut self, effect: LeafEffect) {
        self.leaf = effect.leaf;
        self.append_parent = effect.append;
    }

    /// Take in tree node `i`, whose `parentId` is `parent` (a `leaf` control record goes
    /// through [`Loader::take_leaf_record`] instead).
    pub fn read(&mut self, index: &Index, i: usize, parent: &Parent) {
        let e = &index.entries[i];
        if e.kind.is_runtime_indexed() {
            self.append_parent = Some(i);
            if !e.side_append() {
                self.leaf = Some(i);
            }
        } else if is_link(&e.kind, parent) {
            self.append_parent = Some(i);
        }
    }
}

/// What the runtime's loader knows of an entry when it reads a later line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// An entry it indexes.
    Indexed,
    /// An opaque entry it keeps a parent for: a link, or a `leaf` record it accepted.
    Opaque,
    /// A `leaf` record it read but did not accept: it keeps a parent for it, but no later
    /// record may name it.
    Rejected,
    /// Not read yet, or nothing it keeps.
    Unknown,
}

/// The entries the runtime's loader has read before entry `before`, for the `leaf` record
/// there (`resolveOpaqueLeafControl`, `resolveCanonicalParentId`).
struct SoFar<'a> {
    index: &'a Index,
    by_id: &'a IdTable,
    parents: &'a [u32],
    rejected: &'a HashSet<usize>,
    before: usize,
}

impl SoFar<'_> {
    fn lookup(&self, id: &str) -> Option<usize> {
        self.by_id.get(&self.index.entries, id)
    }

    fn known(&self, j: usize) -> Known {
        let e = &self.index.entries[j];
        if j >= self.before {
            Known::Unknown
        } else if e.kind.is_runtime_indexed() {
            Known::Indexed
        } else if self.rejected.contains(&j) {
            Known::Rejected
        } else if is_link(&e.kind, &e.parent) || e.leaf_record().is_some() {
            Known::Opaque
        } else {
            Known::Unknown
        }
    }

    /// Whether a record may name `id` (null included): an entry indexed or opaque so far.
    fn may_name(&self, id: Option<&str>) -> bool {
        id.is_none_or(|id| {
            self.lookup(id)
                .is_some_and(|j| matches!(self.known(j), Known::Indexed | Known::Opaque))
        })
    }

    /// The indexed entry a chain of opaque entries from `j` ends at, so far.
    fn canonical(&self, j: usize) -> Option<usize> {
        let mut cur = Some(j);
        let mut seen = HashSet::new();
        while let Some(c) = cur {
            match self.known(c) {
                Known::Indexed => return Some(c),
                Known::Opaque | Known::Rejected if seen.insert(c) => {
                    cur = (self.parents[c] != NONE).then_some(self.parents[c] as usize)
                }
                _ => return None,
            }
        }
        None
    }

    /// The effect of a `leaf` record, or `None` when the runtime rejects it because it names
    /// an entry it has not read (or a rejected record).
    fn leaf_effect(&self, record: &LeafRecord) -> Option<LeafEffect> {
        let append_id = record.append_parent.as_ref().map(|a| a.as_deref());
        if !self.may_name(record.target.as_deref()) || !append_id.is_none_or(|a| self.may_name(a)) {
            return None;
        }
        let leaf = record
            .target
            .as_deref()
            .and_then(|t| self.lookup(t))
            .and_then(|t| self.canonical(t));
        let append = match append_id {
            None => leaf,
            Some(a) => a.and_then(|a| self.lookup(a)),
        };
        Some(LeafEffect { leaf, append })
    }
}

/// Whether an entry of this type with this `parentId` is a link (see [`Loader`]).
pub fn is_link(kind: &EntryType, parent: &Parent) -> bool {
    !kind.is_runtime_indexed()
        && *kind != EntryType::Leaf
        && matches!(parent, Parent::Id(_) | Parent::Null)
}

/// Whether an entry is a tree node: parsed, not the header, with a non-empty string id.
pub fn is_node(e: &Entry) -> bool {
    e.id.is_some() && e.kind != EntryType::Session
}

/// Whether an entry contributes a message to the context when it is on the path.
pub fn contributes(e: &Entry) -> bool {
    match e.kind {
        EntryType::Message | EntryType::CustomMessage => true,
        EntryType::BranchSummary => e.has_summary(),
        _ => false,
    }
}

/// The entry a compaction's `firstKeptEntryId` effectively names. When it names an opaque
/// entry the runtime keeps a parent for (a link, null included, or a `leaf` record it read),
/// the runtime substitutes, in this order: that entry's nearest indexed ancestor; the indexed
/// entry just below it on the compaction's own branch; the first indexed entry in the file
/// that hangs below it through unindexed entries only; the compaction's nearest indexed
/// ancestor. The two searches below it follow indexed entries' `parentId`s as written (see
/// [`Tree::written_parent`]) and opaque entries' parents as the runtime keeps them. So do
/// we. `None` when the id is not in the file, names another unindexed entry (the runtime
/// leaves it as it is, naming nothing on the path), or nothing qualifies.
pub fn effective_first_kept(index: &Index, tree: &Tree, compaction: usize) -> Option<usize> {
    let id = index.entries[compaction].first_kept()?;
    let start = tree.find(index, id)?;
    let indexed = |i: usize| index.entries[i].kind.is_runtime_indexed();
    let ancestor = nearest_indexed(index, tree, Some(start));
    let s = &index.entries[start];
    if ancestor.is_some() || !(is_link(&s.kind, &s.parent) || s.leaf_record().is_some()) {
        return ancestor;
    }
    // Below it on the compaction's branch: the last indexed entry met walking up to it.
    let mut seen = HashSet::new();
    let mut below = None;
    let mut cur = tree.parent(compaction);
    while let Some(i) = cur {
        if i == start {
            if below.is_some() {
                return below;
            }
            break;
        }
        if !seen.insert(i) {
            break;
        }
        // (Past an indexed entry as its `parentId` is written; past an opaque one as the
        // runtime keeps its parent.)
        cur = if indexed(i) {
            below = Some(i);
            tree.written_parent(index, i)
        } else {
            tree.parent(i)
        };
    }
    // Anywhere in the file: the first indexed entry whose unindexed ancestors reach it.
    for i in (0..index.entries.len()).filter(|&i| indexed(i)) {
        let mut seen = HashSet::new();
        let mut p = tree.written_parent(index, i);
        while let Some(q) = p.filter(|&q| !indexed(q)) {
            if q == start {
                return Some(i);
            }
            if !seen.insert(q) {
                break;
            }
            p = tree.parent(q);
        }
    }
    nearest_indexed(index, tree, tree.parent(compaction))
}

/// `from` itself when the runtime indexes it, else its nearest indexed ancestor.
fn nearest_indexed(index: &Index, tree: &Tree, from: Option<usize>) -> Option<usize> {
    let mut cur = from;
    let mut seen = HashSet::new();
    while let Some(i) = cur {
        if index.entries[i].kind.is_runtime_indexed() {
            return Some(i);
        }
        if !seen.insert(i) {
            return None;
        }
        cur = tree.parent(i);
    }
    None
}

/// Whether a path stops at a `parentId` that is not in the tree: the runtime would stop there
/// too, unless the id names a line only the runtime can parse, in which case it sees more.
pub fn is_truncated(index: &Index, tree: &Tree, path: &[usize]) -> bool {
    path.first().is_some_and(|&root| {
        index.entries[root].parent.id().is_some_and(|pid| {
            tree.find(index, pid).is_none() && index.mentioned_by_unparsable(pid)
        })
    })
}

/// Entries that a compaction keeps from beyond a line this tool cannot parse: the compaction's
/// visible path is truncated there and does not contain its first-kept entry, but the runtime
/// may see the rest. Such entries must not be removed (their removal could not be followed
/// up by retargeting the compaction).
pub fn kept_across_unparsable(index: &Index, tree: &Tree) -> HashSet<usize> {
    let mut pinned = HashSet::new();
    for (c, e) in index.entries.iter().enumerate() {
        if e.kind != EntryType::Compaction || e.id.is_none() {
            continue;
        }
        let path = tree.path_to(c);
        if !is_truncated(index, tree, &path) {
            continue;
        }
        let literal = e.first_kept().and_then(|id| tree.find(index, id));
        let effective = effective_first_kept(index, tree, c);
        for k in literal.into_iter().chain(effective) {
            if !path.contains(&k) {
                pinned.insert(k);
            }
        }
    }
    pinned
}

/// The entries a planner must keep whatever its rule says, and why (see [`Held::reason`]).
pub struct Held {
    last_line: Option<usize>,
    across_unparsable: HashSet<usize>,
}

impl Held {
    pub fn new(index: &Index, tree: &Tree) -> Held {
        Held {
            last_line: index.lines.last().and_then(|l| l.entry()),
            across_unparsable: kept_across_unparsable(index, tree),
        }
    }

    /// Why entry `i` must stay: it is the leaf or the last line, an unparsable line mentions
    /// its id, a compaction beyond an unparsable line keeps it, or a `leaf` record depends on
    /// it. `None`: a planner may remove it.
    pub fn reason(&self, index: &Index, tree: &Tree, i: usize) -> Option<&'static str> {
        let id = index.entries[i].id.as_deref().unwrap_or_default();
        if Some(i) == tree.leaf {
            Some("it is the leaf")
        } else if Some(i) == self.last_line {
            Some("it is the last line")
        } else if index.mentioned_by_unparsable(id) {
            Some("an unparsable line mentions its id")
        } else if self.across_unparsable.contains(&i) {
            Some("a compaction beyond an unparsable line keeps it in context")
        } else if tree.named_by_leaf_record(i) {
            Some("a `leaf` record names it")
        } else {
            None
        }
    }
}

/// The context of a path, as the runtime rebuilds it.
pub fn context_of(index: &Index, tree: &Tree, path: &[usize]) -> Vec<ContextItem> {
    context_iter(index, tree, path).collect()
}

/// [`context_of`] item by item, never collected (a context is as long as its path): the
/// summary of the last compaction on the path, if any, then the contributing entries from
/// its effective first kept entry to it and after it.
pub fn context_iter<'a>(
    index: &'a Index,
    tree: &Tree,
    path: &'a [usize],
) -> impl Iterator<Item = ContextItem> + Clone + 'a {
    let entries = &index.entries;
    let last_compaction = path
        .iter()
        .rposition(|&i| entries[i].kind == EntryType::Compaction);
    let (summary, before, after) = match last_compaction {
        None => (None, &path[..0], path),
        Some(cpos) => {
            let c = path[cpos];
            let first_kept = effective_first_kept(index, tree, c);
            // Nothing before the compaction when its first kept entry is not on the path.
            let from = path[..cpos]
                .iter()
                .position(|&i| Some(i) == first_kept)
                .unwrap_or(cpos);
            let summary = ContextItem::CompactionSummary(c as u32);
            (Some(summary), &path[from..cpos], &path[cpos + 1..])
        }
    };
    summary.into_iter().chain(
        before
            .iter()
            .chain(after)
            .filter(move |&&i| contributes(&entries[i]))
            .map(|&i| ContextItem::Entry(i as u32)),
    )
}

/// Pairing statistics over a context.
pub fn pairing(index: &Index, context: impl IntoIterator<Item = ContextItem>) -> Pairing {
    let mut p = Pairing::default();
    let mut open: Option<&[Option<Box<str>>]> = None;
    let mut answered: HashSet<&str> = HashSet::new();
    let mut seen_results: HashSet<&str> = HashSet::new();
    let close =
        |open: &mut Option<&[Option<Box<str>>]>, answered: &HashSet<&str>, p: &mut Pairing| {
            if let Some(calls) = open.take() {
                p.missing += calls
                    .iter()
                    .filter(|c| c.as_deref().is_none_or(|id| !answered.contains(id)))
                    .count();
            }
        };
    for item in context {
        let ContextItem::Entry(i) = item else {
            continue;
        };
        let e = &index.entries[i as usize];
        if e.is_role(&Role::Assistant) {
            close(&mut open, &answered, &mut p);
            answered.clear();
            if !e.tool_calls().is_empty() && !e.error_or_aborted() {
                open = Some(e.tool_calls());
            }
        } else if e.is_role(&Role::ToolResult) {
            let Some(id) = e.tool_result_id() else {
                p.orphans += 1;
                continue;
            };
            if seen_results.contains(id) {
                p.duplicates += 1;
            } else if open
                .as_ref()
                .is_some_and(|calls| calls.iter().any(|c| c.as_deref() == Some(id)))
            {
                seen_results.insert(id);
                answered.insert(id);
            } else {
                p.orphans += 1;
            }
        }
    }
    close(&mut open, &answered, &mut p);
    p
}

/// The active path's context and its pairing statistics, in one call.
pub fn active_context(index: &Index, tree: &Tree) -> (Vec<ContextItem>, Pairing) {
    let ctx = context_of(index, tree, &tree.active_path());
    let pairing = pairing(index, ctx.iter().copied());
    (ctx, pairing)
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
