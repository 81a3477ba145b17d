//! Superseded `openclaw.cache-ttl` markers: which ones the runtime reads, and the plan that
//! removes the others.
//!
//! **What the runtime reads.** After each attempt with `contextPruning.mode: "cache-ttl"` on an
//! eligible provider, OpenClaw appends `{"type":"custom","customType":"openclaw.cache-ttl",
//! "data":{"timestamp":<ms>,"provider":…,"modelId":…}}`. Its only reader,
//! `readLastCacheTtlTimestamp(sessionManager, {provider, modelId})` (2026.7.1 and 2026.7.35
//! alike), scans `sessionManager.getEntries()` from the end: **every indexed entry of the file,
//! all branches, in file order**, not the active path. An entry counts when its `type` is
//! `custom`, its `customType` is the name, and its `data` matches the context: the provider
//! and the model id, each trimmed and lower-cased, must equal the context's (a context value
//! that is empty matches anything). The first match whose `data.timestamp` is a number, finite
//! and not 0 wins; a match without one is passed over. The runtime indexes an entry only when
//! it is an object with a non-empty string `id`.
//!
//! **Keys** ([`read_marker`]). A marker this module understands has all of that plus a
//! `provider` and a `modelId` that are strings, null or absent; its key is the pair, each
//! trimmed as `String.prototype.trim` does, then lower-cased when it is ASCII and kept as it is
//! otherwise (`None` when empty). Equal keys always mean equal values to the runtime; the
//! converse may fail for non-ASCII text (Unicode case mapping), which only keeps more. Anything
//! else (a non-object `data`, a timestamp the runtime skips, a provider that is a number, a
//! line this tool cannot parse) is not a marker here: it is never removed, and never counts
//! as superseding another one. The line is read as `JSON.parse` reads it (`jsjson`: a
//! duplicate member's last value wins).
//!
//! **Superseded** ([`plan`]). Any context the runtime asks with matches a union of keys, so it
//! reads the newest marker of one of them: keeping the newest marker of every key (in file
//! order) keeps every answer. The runtime also forks (`createBranchedSession`: a new file
//! holding the path from the root to one entry, a branch tip or any earlier entry), and a fork
//! reads the newest marker of that path. So a marker goes only when (a) a later line holds a
//! marker with its key, (b) every path from it down to a branch tip passes another marker with
//! its key below it, and (c) one with its key lies above it on its path. (a) keeps what the
//! file reads, (b) what a fork of every branch tip reads; (c) keeps the first marker of each
//! key on each path, so a fork from inside the history still reads a marker wherever it read
//! one before: the newest kept above the fork point, older than the one it would have read.
//! (The runtime only compares that timestamp with the TTL: with none it skips pruning, with one
//! older than the TTL it prunes; a superseded marker is older than the TTL unless the session
//! was in use minutes before.) On a linear transcript every marker but the first and the newest
//! per key goes. The leaf and the last line are never removed, nor a marker an
//! unparsable line mentions, one a compaction keeps across such a line, or one a `label`
//! names. Removal re-parents children and repairs `firstKeptEntryId` as every removal does
//! (`transcript::rewrite`); markers are never in the model's context, so the context is
//! unchanged.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::Value;

use crate::transcript::job::{PlanError, Planned};
use crate::transcript::tree::Tree;
use crate::transcript::{EntryType, Index};

/// The marker's `customType`.
pub const CUSTOM_TYPE: &str = "openclaw.cache-ttl";

/// A marker's provider and model id, normalised (see the module notes).
pub type Key = (Option<Box<str>>, Option<Box<str>>);

/// One part of a key: a string, null or absent; `Err` for any other value.
fn key_part(v: Option<&Value>) -> Result<Option<Box<str>>, ()> {
    let s = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => return Err(()),
    };
    let t = crate::js::js_trim(s);
    Ok(match t {
        "" => None,
        t if t.is_ascii() => Some(t.to_ascii_lowercase().into()),
        t => Some(t.into()),
    })
}

/// What a line holding the marker's name is to this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Not a marker the runtime reads (or no marker at all).
    No,
    /// A marker the runtime reads, with its key.
    Marker(Key),
    /// The line nests too deep to be parsed (`jsjson::MAX_DEPTH`): the runtime may read it as a
    /// marker, this tool cannot tell.
    TooDeep,
}

/// The key of a line (without its terminator) that is a cache-TTL marker the runtime reads
/// (see the module notes), or `None`. Only lines holding the name are parsed.
pub fn read_marker(body: &[u8]) -> Option<Key> {
    match probe(body) {
        Probe::Marker(k) => Some(k),
        Probe::No | Probe::TooDeep => None,
    }
}

/// [`read_marker`], telling a line too deep to parse apart.
pub fn probe(body: &[u8]) -> Probe {
    static NAME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(CUSTOM_TYPE.as_bytes()));
    if NAME.find(body).is_none() {
        return Probe::No;
    }
    match crate::jsjson::parse(body) {
        Ok(v) => marker_of(&v).map_or(Probe::No, Probe::Marker),
        Err(e) if crate::jsjson::is_too_deep(&e) => Probe::TooDeep,
        Err(_) => Probe::No,
    }
}

fn marker_of(v: &Value) -> Option<Key> {
    let o = v.as_object()?;
    if o.get("type")?.as_str()? != "custom"
        || o.get("customType")?.as_str()? != CUSTOM_TYPE
        || o.get("id")?.as_str()?.is_empty()
    {
        return None;
    }
    let data = o.get("data")?.as_object()?;
    let ts = data.get("timestamp")?.as_f64()?;
    if !ts.is_finite() || ts == 0.0 {
        return None;
    }
    let provider = key_part(data.get("provider")).ok()?;
    let model = key_part(data.get("modelId")).ok()?;
    Some((provider, model))
}

/// For every key, the id of its newest marker in file order: what the runtime reads.
pub fn newest_by_key(index: &Index) -> HashMap<&Key, &str> {
    let mut out = HashMap::new();
    for &(e, k) in &index.cache_ttl {
        if let Some(id) = index.entries[e as usize].id.as_deref() {
            out.insert(&index.cache_ttl_keys[k as usize], id);
        }
    }
    out
}

/// The outcome of planning.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Entry indices to remove.
    pub remove: BTreeSet<usize>,
    /// Superseded markers that must stay, with the reason.
    pub held_back: Vec<(usize, &'static str)>,
    /// Markers superseded in file order that stay as the newest of their key on a branch or
    /// the first on a path (what a fork reads).
    pub read_by_a_fork: usize,
}

/// Plan which markers to remove: those superseded in file order, on every branch below them,
/// and not the first of their key on their path.
pub fn plan(index: &Index, tree: &Tree) -> Plan {
    let mut out = Plan::default();
    let n = index.entries.len();
    // Superseded in file order: a later marker has the key.
    let mut seen = vec![false; index.cache_ttl_keys.len()];
    let mut candidates: Vec<(usize, u32)> = Vec::new();
    for &(e, k) in index.cache_ttl.iter().rev() {
        if std::mem::replace(&mut seen[k as usize], true) {
            candidates.push((e as usize, k));
        }
    }
    if candidates.is_empty() {
        return out;
    }
    let mut key_of = vec![u32::MAX; n];
    for &(e, k) in &index.cache_ttl {
        key_of[e as usize] = k;
    }
    // Nodes in preorder from the roots (a node in a cycle is never reached, so never removed).
    let mut order = Vec::with_capacity(n);
    let mut reached = vec![false; n];
    let mut stack = tree.roots(index);
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut reached[i], true) {
            continue;
        }
        order.push(i);
        stack.extend(tree.children(i));
    }
    // Superseded on every branch and not the first of its key on its path: per 64 keys of
    // candidates, one pass from the roots down with a bit per key, "a marker with this key is
    // above", and one from the leaves up, "every path from here down holds one".
    let mut keys: Vec<u32> = candidates.iter().map(|c| c.1).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut removable: HashSet<usize> = HashSet::new();
    let mut cover = vec![0u64; n];
    let mut above = vec![0u64; n];
    for chunk in keys.chunks(64) {
        let bit: HashMap<u32, u64> = chunk
            .iter()
            .enumerate()
            .map(|(b, &k)| (k, 1u64 << b))
            .collect();
        // From the roots down: the keys of the markers above each node on its path.
        for &i in &order {
            let mask = above[i] | bit.get(&key_of[i]).copied().unwrap_or(0);
            for c in tree.children(i) {
                above[c] = mask;
            }
        }
        for &i in order.iter().rev() {
            let mut children = tree.children(i).peekable();
            let below = if children.peek().is_some() {
                children.fold(u64::MAX, |acc, c| acc & cover[c])
            } else {
                0
            };
            let own = bit.get(&key_of[i]).copied().unwrap_or(0);
            if own & below & above[i] != 0 {
                removable.insert(i);
            }
            cover[i] = own | below;
        }
    }
    let held = crate::transcript::tree::Held::new(index, tree);
    let labelled: HashSet<&str> = index
        .entries
        .iter()
        .filter(|e| e.kind == EntryType::Label)
        .filter_map(|e| e.target())
        .collect();
    candidates.reverse();
    for (i, _) in candidates {
        let id = index.entries[i].id.as_deref().unwrap_or_default();
        if !removable.contains(&i) {
            out.read_by_a_fork += 1;
        } else if let Some(why) = held.reason(index, tree, i) {
            out.held_back.push((i, why));
        } else if labelled.contains(id) {
            out.held_back.push((i, "a label names it"));
        } else {
            out.remove.insert(i);
        }
    }
    out
}

/// [`plan`] as the transcript job's edits, with a note per held-back marker (what
/// `prune-cache-ttl` runs per file, and what `inspect` previews to predict it). A file with a
/// marker line too deep to parse is not edited (the `jsjson::TooDeep` reason: the job reports
/// it as refused), since that marker may be the one the runtime reads.
pub fn planned(index: &Index, tree: &Tree) -> Result<Planned, PlanError> {
    if let Some(line) = index.cache_ttl_too_deep {
        return Err(crate::jsjson::TooDeep { line: line + 1 }.into());
    }
    let plan = plan(index, tree);
    Ok(Planned::removals(
        index,
        plan.remove,
        &plan.held_back,
        "superseded cache-ttl marker",
    ))
}

#[cfg(test)]
#[path = "cachettl_tests.rs"]
mod tests;
