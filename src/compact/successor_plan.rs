//! The successor transcript that OpenClaw writes after a compaction when
//! `truncateAfterCompaction` is on (`compaction-successor-transcript.ts`), ported entry for
//! entry so the result is what the runtime itself would have written:
//!
//! - on the active path before the latest compaction C, entries before `C.firstKeptEntryId`
//!   are "summarised"; summarised `message` entries go, except the last summarised assistant
//!   message and its tool results before the first kept entry, and C's `firstKeptEntryId` moves
//!   back to that assistant (unless C is a hardened boundary);
//! - also removed: `custom_message`/`branch_summary` entries of the summarised range after that
//!   assistant, superseded `model_change`/`thinking_level_change`/`session_info` entries before
//!   C (the latest of each stays), repeated long user prompts (≥ 24 characters, within 60 s,
//!   counted separately before and after C), and labels of removed entries;
//! - kept entries are re-parented to their nearest kept ancestor; kept pre-compaction assistant
//!   messages lose their thinking signatures;
//! - lines the rotation's reader sets aside (unknown types, labels of a later entry) are not
//!   carried, and a compaction whose `firstKeptEntryId` names one gets the id the reader
//!   repairs it to (`repairEntryLinks`: the entry that line hangs below, else the first entry
//!   below it on the compaction's branch, else the first below it in the file, else the
//!   compaction's parent), for the latest compaction before its range is decided;
//! - order: depth first from the roots, siblings off the active path first, so the old leaf is
//!   the last line.
//!
//! Differences: the runtime compares duplicate prompts after Unicode NFC normalisation; this
//! port compares them as written. An entry without a `parentId` field hangs, when read, below
//! the entry before it; the runtime's rotation can write such an entry as a root
//! (`"parentId":null`, ordered first; seen with OpenClaw 2026.7.1 on generated trees), which
//! cuts the successor's context there. This port writes the parent it hangs below instead, so
//! the successor's context is the one the compaction kept.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::{entry_type, str_field};
use crate::transcript::tree::{self, Tree};
use crate::transcript::walk::{self, Step, Walk};
use crate::transcript::{Entry, EntryType, Index, Parent, Role as TRole};

const DUPLICATE_WINDOW_MS: f64 = 60_000.0;
const MIN_DUPLICATE_CHARS: usize = 24;

/// The successor's header (`buildSuccessorHeader`).
pub fn header(session_id: &str, timestamp: &str, cwd: &str, parent_session: &str) -> Value {
    json!({"type": "session", "version": 3, "id": session_id, "timestamp": timestamp,
        "cwd": cwd, "parentSession": parent_session})
}

/// The successor's file name (`resolveSuccessorSessionFile`): `<ISO with : and . as ->_<id>.jsonl`.
pub fn file_name(timestamp: &str, session_id: &str) -> String {
    format!("{}_{session_id}.jsonl", timestamp.replace([':', '.'], "-"))
}

/// What the rotation needs of an active-path entry's value beyond the index (read only for
/// the few entries it asks about).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathEntry {
    /// Ids of the `toolCall` blocks of an assistant message.
    pub tool_calls: Box<[Box<str>]>,
    /// A tool result's `toolCallId`.
    pub tool_call_id: Option<Box<str>>,
    /// A user message's repeat key: its numeric timestamp and a digest of the sender and the
    /// normalised text (`None` when it cannot be a repeat: no timestamp, images, short).
    pub repeat_key: Option<RepeatKey>,
}

/// A user message's numeric timestamp and the digest of its sender and normalised text.
pub type RepeatKey = (f64, Box<str>);

impl PathEntry {
    /// The figures of one entry value.
    pub fn of(e: &Value) -> PathEntry {
        if entry_type(e) != Some("message") {
            return PathEntry::default();
        }
        let Some(m) = e.get("message") else {
            return PathEntry::default();
        };
        let role = str_field(m, "role");
        let tool_calls = match role {
            Some("assistant") => m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|b| str_field(*b, "type") == Some("toolCall"))
                .filter_map(|b| str_field(b, "id"))
                .map(Box::from)
                .collect(),
            _ => Box::default(),
        };
        let tool_call_id = (role == Some("toolResult"))
            .then(|| m.get("toolCallId").and_then(Value::as_str).map(Box::from))
            .flatten();
        let repeat_key = (role == Some("user")).then(|| repeat_key(m)).flatten();
        PathEntry {
            tool_calls,
            tool_call_id,
            repeat_key,
        }
    }
}

/// A user message's key for `collectDuplicateUserMessageEntryIdsForCompaction`.
fn repeat_key(m: &Value) -> Option<RepeatKey> {
    let ts = m.get("timestamp").and_then(Value::as_f64)?;
    let text = m.get("content").and_then(duplicate_text)?;
    if text.encode_utf16().count() < MIN_DUPLICATE_CHARS {
        return None;
    }
    let sender = m
        .get("__openclaw")
        .and_then(|o| str_field(o, "senderId"))
        .unwrap_or("");
    let key = format!("{sender}\u{0}{}", text.to_lowercase());
    Some((ts, crate::store::blobs::sha256_hex(key.as_bytes()).into()))
}

/// How one kept entry is written into the successor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// Entry index (in the index the plan was made from).
    pub original: usize,
    /// An absent `parentId` the runtime reads as this entry: written explicitly, since the
    /// successor's order differs.
    pub fill_parent: Option<String>,
    /// Re-parented to its nearest kept ancestor (`None`: null).
    pub rewire: Option<Option<String>>,
    /// Thinking signatures of a kept pre-compaction assistant message are stripped.
    pub strip_signatures: bool,
    /// The compaction's `firstKeptEntryId` moves back to the preserved assistant.
    pub first_kept: Option<String>,
    /// Its parent is not in the successor: `parentId` becomes null.
    pub null_parent: bool,
}

impl Rewrite {
    /// The line's value in the successor: `v` (the entry as read) with this rewrite applied,
    /// exactly as the runtime's rotation edits it.
    pub fn apply(&self, mut v: Value) -> Value {
        if let Some(p) = &self.fill_parent
            && v.get("parentId").is_none()
            && let Some(obj) = v.as_object_mut()
        {
            obj.insert("parentId".into(), json!(p));
        }
        let mut out = v.clone();
        let mut changed = false;
        if let Some(p) = &self.rewire {
            out["parentId"] = p.as_ref().map_or(Value::Null, |p| json!(p));
            changed = true;
        }
        if self.strip_signatures && strip_signatures(&mut out["message"]) {
            changed = true;
        }
        if let Some(fk) = &self.first_kept {
            out["firstKeptEntryId"] = json!(fk);
            changed = true;
        }
        if self.null_parent {
            out["parentId"] = Value::Null;
            changed = true;
        }
        if changed { out } else { v }
    }
}

/// Plan the successor. `index` holds the file's entries (and the new compaction, appended);
/// `branch` its active path, root first, ending at the leaf. `detail` gives the
/// [`PathEntry`] of a branch position; it is asked only about the last summarised assistant,
/// the tool results after it and the user messages that stay. `Ok(None)` when the path has no
/// compaction. Sets are kept per entry index, so the plan needs a few bytes per entry. An
/// error when removed entries' parents form a cycle: the runtime's rotation never finishes
/// on such a file.
pub fn build(
    index: &Index,
    tree: &Tree,
    branch: &[usize],
    detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
) -> anyhow::Result<Option<Vec<Rewrite>>> {
    let Some(c_at) = branch
        .iter()
        .rposition(|&i| index.entries[i].kind == EntryType::Compaction)
    else {
        return Ok(None);
    };
    let reader = Reader::new(index, tree);
    let plan = Plan::new(&reader, branch, c_at, detail)?;
    let removed = plan.removed(detail)?;
    plan.rewrites(&removed).map(Some)
}

/// What the runtime's rotation reader (`readableSessionState`) makes of the file: the entries
/// it reads, the lines it sets aside, and the parents and `firstKeptEntryId`s it repairs.
struct Reader<'a> {
    index: &'a Index,
    entries: &'a [Entry],
    tree: &'a Tree,
    /// The entries it reads (see [`Reader::accepted_entries`]); every other tree node is a
    /// line it sets aside once it has read it.
    accepted: Vec<bool>,
    /// For a line set aside, where the chain of parents through lines set aside ends (an
    /// entry read, with the largest position on the way), walked once for every line (see
    /// [`Reader::set_aside_chain`]).
    set_aside: Vec<Walk<Option<(usize, usize)>>>,
}

impl<'a> Reader<'a> {
    fn new(index: &'a Index, tree: &'a Tree) -> Reader<'a> {
        let mut reader = Reader {
            index,
            entries: &index.entries,
            tree,
            accepted: Reader::accepted_entries(index, tree),
            set_aside: Vec::new(),
        };
        reader.set_aside = reader.set_aside_chains();
        reader
    }

    /// The entries the rotation reads: in file order, the first entry of each id among those
    /// it indexes, except labels of an entry not read before them. Every other line with an
    /// id (unknown types, leaf records, such labels) is set aside: it is not written to the
    /// successor.
    fn accepted_entries(index: &Index, tree: &Tree) -> Vec<bool> {
        let entries = &index.entries;
        let mut accepted = vec![false; entries.len()];
        for (i, e) in entries.iter().enumerate() {
            let Some(id) = e.id.as_deref() else {
                continue;
            };
            if !tree::is_node(e) || !e.kind.is_runtime_indexed() || tree.find(index, id) != Some(i)
            {
                continue;
            }
            accepted[i] = e.kind != EntryType::Label
                || e.target()
                    .and_then(|t| tree.find(index, t))
                    .is_some_and(|t| t < i && accepted[t]);
        }
        accepted
    }

    /// For every line set aside, the entry read that its chain of parents through lines set
    /// aside ends at, and the largest position on that chain (the line's own included), or
    /// `None` when the chain ends at a missing parent or goes round.
    fn set_aside_chains(&self) -> Vec<Walk<Option<(usize, usize)>>> {
        let set_aside = |j: usize| !self.accepted[j];
        let nodes: Vec<usize> = self
            .tree
            .ids(self.index)
            .map(|(_, j)| j)
            .filter(|&j| set_aside(j))
            .collect();
        if nodes.is_empty() {
            return Vec::new();
        }
        let mut memo = vec![Walk::Unvisited; self.entries.len()];
        for j in nodes {
            walk::follow_folded(
                &mut memo,
                j,
                None,
                |c| match self.written_node(c) {
                    None => Step::Answer(None),
                    Some(k) if self.accepted[k] => Step::Answer(Some((k, k.max(c)))),
                    Some(k) => Step::Next(k),
                },
                |c, end| end.map(|(k, top)| (k, top.max(c))),
            );
        }
        memo
    }

    fn id(&self, i: usize) -> &'a str {
        self.entries[i].id.as_deref().unwrap_or("")
    }

    fn node_of(&self, id: &str) -> Option<usize> {
        self.tree.find(self.index, id)
    }

    /// The tree node entry `i`'s `parentId` names as written.
    fn written_node(&self, i: usize) -> Option<usize> {
        self.node_of(self.entries[i].parent.id()?)
    }

    /// A line set aside (by id) that the reader has read before entry `i`.
    fn set_aside_before(&self, j: usize, i: usize) -> bool {
        j < i && !self.accepted[j]
    }

    /// The `parentId` an entry carries once an absent one is filled in.
    fn written_parent(&self, i: usize) -> Option<&'a str> {
        match &self.entries[i].parent {
            Parent::Id(p) => Some(p),
            Parent::Absent => self.tree.parent(i).map(|p| self.id(p)),
            _ => None,
        }
    }

    /// The entry read before `i` that `j`, a line set aside before it, hangs below through
    /// the parents those lines name (`resolveRejectedParent`); `None` when there is none: the
    /// chain ends at a missing parent, goes round, or passes a line not read yet.
    fn resolve_set_aside(&self, j: usize, i: usize) -> Option<usize> {
        match self.set_aside.get(j).and_then(Walk::done).flatten() {
            Some((end, top)) if top < i => Some(end),
            _ => None,
        }
    }

    /// The `parentId` of entry `i` once the reader has pointed one that names a line it set
    /// aside at the nearest entry it read before, through the parents those lines name (null
    /// when there is none).
    fn parent_of(&self, i: usize) -> Option<&'a str> {
        let written = self.written_parent(i)?;
        let Some(j) = self
            .node_of(written)
            .filter(|&j| self.set_aside_before(j, i))
        else {
            return Some(written);
        };
        self.resolve_set_aside(j, i).map(|k| self.id(k))
    }

    /// The tree node entry `i`'s repaired parent names, when the reader has read it before `i`.
    fn read_parent(&self, i: usize, before: usize) -> Option<usize> {
        self.parent_of(i)
            .and_then(|p| self.node_of(p))
            .filter(|&p| self.accepted[p] && p < before)
    }

    /// The `firstKeptEntryId` of compaction `i` as the reader repairs it (`repairEntryLinks`)
    /// when it names a line set aside: the entry read before that the line hangs below; else
    /// the first entry on the compaction's branch, root first, that hangs below the line; else
    /// the first such entry in the file; else the compaction's parent. As written otherwise.
    fn first_kept_of(&self, i: usize) -> Option<&'a str> {
        let fk = self.entries[i].first_kept()?;
        let Some(j) = self.node_of(fk).filter(|&j| self.set_aside_before(j, i)) else {
            return Some(fk);
        };
        if let Some(k) = self.resolve_set_aside(j, i) {
            return Some(self.id(k));
        }
        let mut below = Below::new(self, j);
        let mut candidate = |e: usize| {
            self.accepted[e]
                && e < i
                && self.entries[e].kind != EntryType::Compaction
                && below.hangs(self, e)
        };
        let parent = self.parent_of(i);
        let on_branch = self.branch_of(i).into_iter().find(|&e| candidate(e));
        on_branch
            .or_else(|| (0..i).find(|&e| candidate(e)))
            .map(|e| self.id(e))
            .or(parent)
            .or(Some(fk))
    }

    /// The entries read before `i` on its branch through repaired parents, root first
    /// (stopping where the chain goes round).
    fn branch_of(&self, i: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.read_parent(i, i);
        while let Some(k) = cur.filter(|&k| seen.insert(k)) {
            path.push(k);
            cur = self.read_parent(k, i);
        }
        path.reverse();
        path
    }
}

/// Which entries hang below one line set aside, `target`: whether the lines set aside that
/// an entry's parent chain crosses before reaching an entry read before it
/// (`rejectedParentChain`) include it. Each line's chain is walked once.
struct Below {
    target: usize,
    /// For a line set aside: the largest position on its chain up to `target`, when the chain
    /// reaches it through lines set aside.
    memo: Vec<Walk<Option<usize>>>,
}

impl Below {
    fn new(reader: &Reader, target: usize) -> Below {
        Below {
            target,
            memo: vec![Walk::Unvisited; reader.entries.len()],
        }
    }

    /// Whether entry `e`'s chain of parents set aside before it reaches `target`.
    fn hangs(&mut self, reader: &Reader, e: usize) -> bool {
        let Some(first) = reader.written_node(e) else {
            return false;
        };
        let target = self.target;
        let top = walk::follow_folded(
            &mut self.memo,
            first,
            None,
            |c| match c {
                _ if c == target => Step::Answer(Some(c)),
                _ if reader.accepted[c] => Step::Answer(None),
                _ => match reader.written_node(c) {
                    Some(k) => Step::Next(k),
                    None => Step::Answer(None),
                },
            },
            |c, top| top.map(|t| t.max(c)),
        );
        top.is_some_and(|t| t < e)
    }
}

/// The rotation's plan over the active path: what is summarised, what stays, what goes.
struct Plan<'r, 'a> {
    reader: &'r Reader<'a>,
    branch: &'r [usize],
    /// Branch position by entry index (`u32::MAX`: not on the branch).
    pos: Vec<u32>,
    /// Branch position of the latest compaction, and its entry.
    c_at: usize,
    compaction: usize,
    /// Branch position of the entry the compaction keeps from (as repaired).
    first_kept_at: Option<usize>,
    /// Branch positions before this are summarised; from it to the compaction they stay.
    kept_from: usize,
    /// Branch position of the last summarised assistant message, which stays.
    preserved_at: Option<usize>,
    /// That assistant and the tool results answering its calls before the first kept entry.
    preserved: HashSet<usize>,
}

impl<'r, 'a> Plan<'r, 'a> {
    fn new(
        reader: &'r Reader<'a>,
        branch: &'r [usize],
        c_at: usize,
        detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
    ) -> anyhow::Result<Plan<'r, 'a>> {
        let compaction = branch[c_at];
        let first_kept = reader.first_kept_of(compaction).filter(|s| !s.is_empty());
        let first_kept_at = first_kept.and_then(|f| branch.iter().position(|&i| reader.id(i) == f));
        let mut pos = vec![u32::MAX; reader.entries.len()];
        for (p, &i) in branch.iter().enumerate() {
            pos[i] = p as u32;
        }
        let mut plan = Plan {
            reader,
            branch,
            pos,
            c_at,
            compaction,
            first_kept_at,
            kept_from: first_kept_at.filter(|&f| f < c_at).unwrap_or(c_at),
            preserved_at: None,
            preserved: HashSet::new(),
        };
        let hardened = first_kept == Some(reader.id(compaction));
        if !hardened {
            plan.preserve(detail)?;
        }
        Ok(plan)
    }

    /// Keep the last summarised assistant message and the tool results answering its calls
    /// before the first kept entry.
    fn preserve(
        &mut self,
        detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
    ) -> anyhow::Result<()> {
        let Some(a) = (0..self.kept_from)
            .rev()
            .find(|&p| self.role(p) == Some(&TRole::Assistant))
        else {
            return Ok(());
        };
        self.preserved_at = Some(a);
        self.preserved.insert(self.branch[a]);
        let calls = detail(a)?.tool_calls;
        let Some(fk) = self.first_kept_at else {
            return Ok(());
        };
        for (p, &i) in self.branch.iter().enumerate().take(fk).skip(a + 1) {
            if self.role(p) == Some(&TRole::ToolResult)
                && detail(p)?
                    .tool_call_id
                    .as_deref()
                    .is_some_and(|c| calls.iter().any(|k| &**k == c))
            {
                self.preserved.insert(i);
            }
        }
        Ok(())
    }

    /// The role of the message at branch position `p`.
    fn role(&self, p: usize) -> Option<&'a TRole> {
        let e = &self.reader.entries[self.branch[p]];
        (e.kind == EntryType::Message)
            .then_some(e.role.as_ref())
            .flatten()
    }

    fn on_branch(&self, i: usize) -> Option<usize> {
        (self.pos[i] != u32::MAX).then_some(self.pos[i] as usize)
    }

    fn summarized(&self, i: usize) -> bool {
        self.on_branch(i).is_some_and(|p| p < self.kept_from)
    }

    /// Kept before the compaction (its thinking signatures go).
    fn pre_kept(&self, i: usize) -> bool {
        self.on_branch(i)
            .is_some_and(|p| p >= self.kept_from && p < self.c_at)
            || self.preserved.contains(&i)
    }

    /// The entries the rotation removes, by entry index.
    fn removed(
        &self,
        detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
    ) -> anyhow::Result<Vec<bool>> {
        let entries = self.reader.entries;
        let mut duplicates = self.repeats(self.kept_from..self.c_at, detail)?;
        duplicates.extend(self.repeats(self.c_at + 1..self.branch.len(), detail)?);
        let stale = self.stale_states();
        let preserved_idx = self.preserved_at.map_or(-1, |a| a as i64);
        let first_kept_idx = self.first_kept_at.map_or(-1, |f| f as i64);
        let mut removed = vec![false; entries.len()];
        for i in self.nodes() {
            let bi = self.on_branch(i).map_or(-1, |p| p as i64);
            let kind = &entries[i].kind;
            let marker = bi > preserved_idx
                && bi < first_kept_idx
                && matches!(kind, EntryType::CustomMessage | EntryType::BranchSummary);
            let s = self.summarized(i);
            removed[i] = s && *kind == EntryType::Message && !self.preserved.contains(&i)
                || s && marker
                || stale.contains(&i)
                || duplicates.contains(&i);
        }
        for i in self.nodes() {
            if entries[i].kind == EntryType::Label
                && entries[i]
                    .target()
                    .and_then(|t| self.reader.node_of(t))
                    .is_some_and(|t| removed[t])
            {
                removed[i] = true;
            }
        }
        Ok(removed)
    }

    /// The entries the rotation reads, in file order.
    fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.reader.entries.len()).filter(|&i| self.reader.accepted[i])
    }

    /// Superseded settings before the compaction: every `model_change`,
    /// `thinking_level_change` and `session_info` but the latest of each.
    fn stale_states(&self) -> HashSet<usize> {
        let entries = self.reader.entries;
        let before = &self.branch[..self.c_at];
        let mut latest: HashMap<&EntryType, usize> = HashMap::new();
        for &i in before.iter().filter(|&&i| is_state(&entries[i].kind)) {
            latest.insert(&entries[i].kind, i);
        }
        before
            .iter()
            .copied()
            .filter(|&i| is_state(&entries[i].kind) && latest.get(&entries[i].kind) != Some(&i))
            .collect()
    }

    /// Repeated user prompts at branch positions `at`.
    fn repeats(
        &self,
        at: std::ops::Range<usize>,
        detail: &mut dyn FnMut(usize) -> anyhow::Result<PathEntry>,
    ) -> anyhow::Result<HashSet<usize>> {
        let users: Vec<usize> = at.filter(|&p| self.role(p) == Some(&TRole::User)).collect();
        let mut keyed = Vec::with_capacity(users.len());
        for p in users {
            keyed.push((self.branch[p], detail(p)?.repeat_key));
        }
        Ok(duplicate_user_ids(&keyed))
    }

    /// The kept entries' rewrites, in the successor's order.
    fn rewrites(&self, removed: &[bool]) -> anyhow::Result<Vec<Rewrite>> {
        let mut above_removed = vec![Walk::Unvisited; removed.len()];
        let mut kept: Vec<(Rewrite, Option<usize>)> = Vec::new();
        for i in self.nodes().filter(|&i| !removed[i]) {
            let parent = self.kept_parent(i, removed, &mut above_removed)?;
            kept.push(self.rewrite(i, parent, removed));
        }
        Ok(order(kept, &|i| self.on_branch(i).is_some()))
    }

    /// Entry `i`'s repaired parent, past removed entries to their nearest kept ancestor (each
    /// removed entry's chain is walked once).
    fn kept_parent(
        &self,
        i: usize,
        removed: &[bool],
        memo: &mut [Walk<Option<usize>>],
    ) -> anyhow::Result<Option<&'a str>> {
        let reader = self.reader;
        let removed_node = |p: &str| reader.node_of(p).filter(|&j| removed[j]);
        let Some(first) = reader.parent_of(i).and_then(removed_node) else {
            return Ok(reader.parent_of(i));
        };
        // The last removed entry on the way up: its parent is the first that is not removed.
        let last = walk::follow(memo, first, None, |k| {
            match reader.parent_of(k).and_then(removed_node) {
                Some(next) => Step::Next(next),
                None => Step::Answer(Some(k)),
            }
        });
        match last {
            Some(k) => Ok(reader.parent_of(k)),
            None => anyhow::bail!(
                "the parents of removed entries above {:?} go round: the runtime's rotation \
                 would never finish",
                reader.id(i)
            ),
        }
    }

    /// How kept entry `i`, whose parent in the successor is `parent`, is written.
    fn rewrite(
        &self,
        i: usize,
        parent: Option<&'a str>,
        removed: &[bool],
    ) -> (Rewrite, Option<usize>) {
        let reader = self.reader;
        let e = &reader.entries[i];
        let mut r = Rewrite {
            original: i,
            fill_parent: match e.parent {
                Parent::Absent => reader.tree.parent(i).map(|p| reader.id(p).to_owned()),
                _ => None,
            },
            ..Rewrite::default()
        };
        // Is the parentId as written so far set to something other than null?
        let mut set_non_null =
            !matches!(e.parent, Parent::Null | Parent::Absent) || r.fill_parent.is_some();
        if parent != reader.written_parent(i) {
            r.rewire = Some(parent.map(str::to_owned));
            set_non_null = parent.is_some();
        }
        r.strip_signatures = e.kind == EntryType::Message && self.pre_kept(i);
        if e.kind == EntryType::Compaction {
            let repaired = reader.first_kept_of(i);
            if repaired != e.first_kept() {
                r.first_kept = repaired.map(str::to_owned);
            }
            if i == self.compaction
                && repaired != Some(reader.id(i))
                && let Some(a) = self.preserved_at
            {
                r.first_kept = Some(reader.id(self.branch[a]).to_owned());
            }
        }
        let parent = parent
            .and_then(|p| reader.node_of(p))
            .filter(|&j| reader.accepted[j] && !removed[j]);
        if parent.is_none() && set_non_null {
            r.null_parent = true;
        }
        (r, parent)
    }
}

fn is_state(kind: &EntryType) -> bool {
    matches!(
        kind,
        EntryType::ModelChange | EntryType::ThinkingLevelChange | EntryType::SessionInfo
    )
}

/// `stripThinkingSignaturesFromMessage`, in place; true when something was removed.
fn strip_signatures(message: &mut Value) -> bool {
    if str_field(message, "role") != Some("assistant") {
        return false;
    }
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for b in blocks.iter_mut() {
        let kind = str_field(b, "type");
        if !matches!(kind, Some("thinking" | "redacted_thinking")) {
            continue;
        }
        let redacted = kind == Some("redacted_thinking");
        let Some(map) = b.as_object_mut() else {
            continue;
        };
        let has = |m: &Map<String, Value>, k: &str| m.get(k).is_some_and(|v| !v.is_null());
        if !(has(map, "thinkingSignature")
            || has(map, "signature")
            || has(map, "thought_signature")
            || redacted && has(map, "data"))
        {
            continue;
        }
        let signature = |k: &str| {
            matches!(k, "thinkingSignature" | "signature" | "thought_signature")
                || redacted && k == "data"
        };
        map.retain(|k, _| !signature(k));
        changed = true;
    }
    changed
}

/// Normalised text of a user message for duplicate detection, `None` if it has images or
/// non-object blocks.
fn duplicate_text(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for b in blocks {
                if !b.is_object() || str_field(b, "type") == Some("image") {
                    return None;
                }
                if str_field(b, "type") == Some("text")
                    && let Some(t) = str_field(b, "text")
                {
                    parts.push(t);
                }
            }
            parts.join("\n")
        }
        _ => return None,
    };
    Some(super::classify::collapse_space(&text))
}

/// `collectDuplicateUserMessageEntryIdsForCompaction` over user messages in path order (entry
/// index and repeat key).
fn duplicate_user_ids(users: &[(usize, Option<RepeatKey>)]) -> HashSet<usize> {
    let mut last_seen: HashMap<&str, f64> = HashMap::new();
    let mut out = HashSet::new();
    for (i, key) in users {
        let Some((ts, key)) = key else {
            continue;
        };
        if let Some(prev) = last_seen.insert(key, *ts)
            && ts - prev <= DUPLICATE_WINDOW_MS
        {
            out.insert(*i);
        }
    }
    out
}

/// `orderSuccessorEntries`: depth first, active-path children last. `kept` pairs each
/// rewrite with its parent's entry index in the successor (`None`: a root).
fn order(kept: Vec<(Rewrite, Option<usize>)>, active: &dyn Fn(usize) -> bool) -> Vec<Rewrite> {
    let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    for (k, (_, parent)) in kept.iter().enumerate() {
        children.entry(*parent).or_default().push(k);
    }
    let sort_key = |k: &usize| {
        let i = kept[*k].0.original;
        (active(i), i)
    };
    for list in children.values_mut() {
        list.sort_by_key(sort_key);
    }
    let mut emitted = vec![false; kept.len()];
    let mut out = Vec::with_capacity(kept.len());
    let mut all_sorted: Vec<usize> = (0..kept.len()).collect();
    all_sorted.sort_by_key(sort_key);
    let roots = children.get(&None).cloned().unwrap_or_default();
    for start in roots.into_iter().chain(all_sorted) {
        let mut stack = vec![start];
        while let Some(k) = stack.pop() {
            if emitted[k] {
                continue;
            }
            emitted[k] = true;
            out.push(k);
            if let Some(kids) = children.get(&Some(kept[k].0.original)) {
                stack.extend(kids.iter().rev());
            }
        }
    }
    let mut kept: Vec<Option<Rewrite>> = kept.into_iter().map(|(r, _)| Some(r)).collect();
    out.into_iter()
        .map(|k| kept[k].take().expect("emitted once"))
        .collect()
}

#[cfg(test)]
#[path = "successor_plan_tests.rs"]
mod tests;
