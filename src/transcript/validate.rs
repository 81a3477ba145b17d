//! The checks a rewritten transcript must pass before it replaces the original.
//!
//! [`validate`] compares the index of the original with the index of the rewrite (built while
//! writing) and fails with one clear message on the first problem:
//!
//! - the header is the first line and byte-identical;
//! - entry ids are unique;
//! - every `parentId` names an entry in the file (an id that was already missing in the
//!   original is tolerated: it may name a line only the runtime can parse) and no new cycle
//!   appears;
//! - the leaf is the same entry (or the last appended one);
//! - the set of entry ids is the old one minus exactly the removed ids, plus the appended ones;
//! - the active path's context is the old one minus exactly the removed entries, in order
//!   (unless the caller changes the context on purpose and checks it itself);
//! - tool call/result pairing on the active path is no worse than before (likewise);
//! - the cache-TTL marker the runtime reads for every provider and model is the same entry;
//! - unparsable lines are all still there, byte for byte.

use std::collections::HashSet;

use super::Index;
use super::tree::{self, ContextItem, Tree};

/// What the rewrite is expected to have changed.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// Ids of the entries that were removed.
    pub removed_ids: HashSet<String>,
    /// Ids of the entries appended at the end; the last one is the expected new leaf.
    pub appended_ids: Vec<String>,
    /// Compare the active context with the old one minus the removed entries. A caller that
    /// appends a compaction changes the context on purpose and checks it itself, or sets
    /// `compaction_keeps_from`.
    pub check_context: bool,
    /// The last appended entry is a compaction keeping from this entry: the expected context
    /// is its summary followed by the old context from that entry on.
    pub compaction_keeps_from: Option<String>,
}

impl Expectation {
    /// Removals (and in-place replacements) only: the context must be the old one minus the
    /// removed entries.
    pub fn removals(removed_ids: HashSet<String>) -> Expectation {
        Expectation {
            removed_ids,
            appended_ids: Vec::new(),
            check_context: true,
            compaction_keeps_from: None,
        }
    }
}

/// Why a rewrite was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("validation failed: {0}")]
pub struct Invalid(pub String);

fn fail<T>(msg: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(msg.into()))
}

/// Check `new` (the rewrite) against `old` (the original).
pub fn validate(old: &Index, new: &Index, expect: &Expectation) -> Result<(), Invalid> {
    if old.header().is_none() {
        return fail("the original has no session header on its first line");
    }
    if new.header().is_none() || new.header_raw != old.header_raw {
        return fail("the header line changed or is no longer first");
    }
    let old = (old, &Tree::build(old));
    let new = (new, &Tree::build(new));
    links_kept(old, new)?;
    leaf_kept(old, new, expect)?;
    ids_as_expected(old, new, expect)?;
    if expect.check_context {
        context_kept(old, new, expect)?;
        cache_ttl_kept(old.0, new.0)?;
    }
    unparsable_kept(old.0, new.0)
}

/// A transcript with its tree.
type Built<'a> = (&'a Index, &'a Tree);

/// Ids are borrowed from the indexes, never copied: a big transcript has many of them.
fn id_of(idx: &Index, i: usize) -> &str {
    idx.entries[i].id.as_deref().unwrap_or_default()
}

/// Ids are unique; every `parentId` names an entry in the file, unless the original already
/// named that missing id (it may name a line only the runtime can parse); no new cycle.
fn links_kept((old, old_tree): Built<'_>, (new, new_tree): Built<'_>) -> Result<(), Invalid> {
    if !new_tree.duplicate_ids.is_empty() {
        return fail(format!("duplicate entry id {}", new_tree.duplicate_ids[0]));
    }
    fn missing_parent(idx: &Index, i: usize) -> &str {
        idx.entries[i].parent.id().unwrap_or_default()
    }
    let old_missing: HashSet<&str> = old_tree
        .dangling
        .iter()
        .map(|&i| missing_parent(old, i))
        .collect();
    for &i in &new_tree.dangling {
        let parent = missing_parent(new, i);
        if !old_missing.contains(&parent) {
            return fail(format!(
                "entry {} names a parent {parent} that is not in the file",
                id_of(new, i)
            ));
        }
    }
    let old_unreachable: HashSet<&str> = old_tree
        .unreachable(old)
        .into_iter()
        .map(|i| id_of(old, i))
        .collect();
    if let Some(i) = new_tree
        .unreachable(new)
        .into_iter()
        .find(|&i| !old_unreachable.contains(id_of(new, i)))
    {
        return fail(format!("entry {} is part of a parent cycle", id_of(new, i)));
    }
    Ok(())
}

/// The leaf is the same entry, or the last appended one.
fn leaf_kept(
    (old, old_tree): Built<'_>,
    (new, new_tree): Built<'_>,
    expect: &Expectation,
) -> Result<(), Invalid> {
    let expected_leaf = match expect.appended_ids.last() {
        Some(id) => Some(id.as_str()),
        None => old_tree.leaf_id(old),
    };
    if expected_leaf != new_tree.leaf_id(new) {
        return fail(format!(
            "the leaf changed from {:?} to {:?}",
            expected_leaf,
            new_tree.leaf_id(new)
        ));
    }
    Ok(())
}

/// New ids = old ids - removed + appended (old and new ids are each unique by now).
fn ids_as_expected(
    (old, old_tree): Built<'_>,
    (new, new_tree): Built<'_>,
    expect: &Expectation,
) -> Result<(), Invalid> {
    let appended: HashSet<&str> = expect.appended_ids.iter().map(|k| &**k).collect();
    let lost = old_tree
        .ids(old)
        .map(|(id, _)| id)
        .find(|id| !expect.removed_ids.contains(*id) && new_tree.find(new, id).is_none())
        .or_else(|| {
            appended
                .iter()
                .copied()
                .find(|id| new_tree.find(new, id).is_none())
        });
    let extra = new_tree.ids(new).map(|(id, _)| id).find(|id| {
        !appended.contains(id)
            && (expect.removed_ids.contains(*id) || old_tree.find(old, id).is_none())
    });
    if lost.is_some() || extra.is_some() {
        return fail(format!(
            "entry ids differ from the expected set (missing {lost:?}, unexpected {extra:?})"
        ));
    }
    Ok(())
}

/// The active context is the old one minus exactly the removed entries (or, for an appended
/// compaction, its summary followed by the old context from its first kept entry on), and
/// tool call/result pairing is no worse.
fn context_kept(
    (old, old_tree): Built<'_>,
    (new, new_tree): Built<'_>,
    expect: &Expectation,
) -> Result<(), Invalid> {
    // Both contexts are walked, never collected: each is as long as its path.
    let (old_path, new_path) = (old_tree.active_path(), new_tree.active_path());
    let old_ctx = tree::context_iter(old, old_tree, &old_path);
    let new_ctx = tree::context_iter(new, new_tree, &new_path);
    let old_pairing = tree::pairing(old, old_ctx.clone());
    let new_pairing = tree::pairing(new, new_ctx.clone());
    fn key(idx: &Index, c: ContextItem) -> (bool, &str) {
        let summary = matches!(c, ContextItem::CompactionSummary(_));
        (summary, id_of(idx, c.at()))
    }
    let kept = || {
        old_ctx
            .clone()
            .map(|c| key(old, c))
            .filter(|(_, id)| !expect.removed_ids.contains(*id))
    };
    let (summary, from) = match (&expect.compaction_keeps_from, expect.appended_ids.last()) {
        (Some(first_kept), Some(id)) => {
            let Some(at) = kept().position(|(summary, e)| !summary && e == first_kept) else {
                return fail(format!(
                    "the appended compaction keeps from {first_kept}, which is not in the context"
                ));
            };
            (Some((true, id.as_str())), at)
        }
        _ => (None, 0),
    };
    let expected = || summary.into_iter().chain(kept().skip(from));
    if !new_ctx.clone().map(|c| key(new, c)).eq(expected()) {
        return fail(format!(
            "the rebuilt context differs: expected {} messages, got {}",
            expected().count(),
            new_ctx.count()
        ));
    }
    if !new_pairing.no_worse_than(&old_pairing) {
        return fail(format!(
            "tool call pairing got worse ({old_pairing:?} before, {new_pairing:?} after)"
        ));
    }
    Ok(())
}

/// The cache-TTL marker the runtime reads for every provider and model is the same entry
/// (see `crate::cachettl`).
fn cache_ttl_kept(old: &Index, new: &Index) -> Result<(), Invalid> {
    let before = crate::cachettl::newest_by_key(old);
    let after = crate::cachettl::newest_by_key(new);
    if let Some((key, id)) = before.iter().find(|(k, id)| after.get(*k) != Some(*id)) {
        return fail(format!(
            "the newest cache-ttl marker for provider {:?} and model {:?} is no longer {id}",
            key.0, key.1
        ));
    }
    if let Some((key, id)) = after.iter().find(|(k, _)| !before.contains_key(*k)) {
        return fail(format!(
            "a new cache-ttl marker {id} appeared for provider {:?} and model {:?}",
            key.0, key.1
        ));
    }
    Ok(())
}

fn unparsable_kept(old: &Index, new: &Index) -> Result<(), Invalid> {
    let old_raw: Vec<&Vec<u8>> = old.unparsable.iter().map(|(_, r)| r).collect();
    let new_raw: Vec<&Vec<u8>> = new.unparsable.iter().map(|(_, r)| r).collect();
    if old_raw != new_raw {
        return fail("unparsable lines were not all kept as they were");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;

    fn idx(lines: &[&str]) -> Index {
        let mut all = vec![H];
        all.extend_from_slice(lines);
        Index::from_reader(all.join("\n").as_bytes()).unwrap()
    }

    const A: &str =
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#;
    const B: &str = r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"toolCall","id":"t"}]}}"#;
    const C: &str = r#"{"type":"message","id":"c","parentId":"b","message":{"role":"toolResult","toolCallId":"t","content":[]}}"#;
    const D: &str =
        r#"{"type":"message","id":"d","parentId":"c","message":{"role":"user","content":"y"}}"#;

    fn removed(ids: &[&str]) -> Expectation {
        Expectation::removals(ids.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn pairing_must_not_get_worse_and_identity_passes() {
        let old = idx(&[A, B, C, D]);
        let d2 = D.replace(r#""parentId":"c""#, r#""parentId":"b""#);
        let c_gone = idx(&[A, B, &d2]);
        // Removing a lone tool result makes pairing worse.
        let err = validate(&old, &c_gone, &removed(&["c"])).unwrap_err();
        assert!(err.0.contains("pairing"), "{err}");
        assert!(validate(&old, &old, &removed(&[])).is_ok());
    }

    #[test]
    fn rejects_structural_damage() {
        let old = idx(&[A, B, C, D]);
        let dangling = idx(&[A, B, D]);
        assert!(
            validate(&old, &dangling, &removed(&["c"]))
                .unwrap_err()
                .0
                .contains("parent")
        );
        let leaf_moved = idx(&[A, B, C]);
        assert!(validate(&old, &leaf_moved, &removed(&["d"])).is_err());
        let unexpected = idx(&[A, B, C, D]);
        assert!(
            validate(&old, &unexpected, &removed(&["c"]))
                .unwrap_err()
                .0
                .contains("ids")
        );
        let cyc_a = A.replace(r#""parentId":null"#, r#""parentId":"d""#);
        let cycle = idx(&[&cyc_a, B, C, D]);
        assert!(
            validate(&old, &cycle, &removed(&[]))
                .unwrap_err()
                .0
                .contains("cycle")
        );
        let other_header = Index::from_reader(
            format!("{}\n{A}\n{B}\n{C}\n{D}", H.replace("\"s\"", "\"s2\"")).as_bytes(),
        )
        .unwrap();
        assert!(
            validate(&old, &other_header, &removed(&[]))
                .unwrap_err()
                .0
                .contains("header")
        );
    }

    #[test]
    fn an_appended_compaction_must_keep_exactly_the_tail_it_names() {
        let old = idx(&[A, B, C, D]);
        let n = r#"{"type":"compaction","id":"n","parentId":"d","timestamp":"t","summary":"s","firstKeptEntryId":"d","tokensBefore":1}"#;
        let new = idx(&[A, B, C, D, n]);
        let expect = |keeps: &str| Expectation {
            appended_ids: vec!["n".into()],
            compaction_keeps_from: Some(keeps.into()),
            ..Expectation::removals(Default::default())
        };
        validate(&old, &new, &expect("d")).unwrap();
        let err = validate(&old, &new, &expect("a")).unwrap_err();
        assert!(err.0.contains("context"), "{err}");
        let err = validate(&old, &new, &expect("zz")).unwrap_err();
        assert!(err.0.contains("not in the context"), "{err}");
    }
}
