//! The checks a rewritten transcript must pass before it replaces the original.
//!
//! [`validate`] compares the index of the original with the index of the rewrite (built while
//! writing) and fails with one clear message on the first problem:
//!
//! - the header is the first line and byte-identical;
//! - entry ids are unique;
//! - every `parentId` names an entry in the file (an id that was already missing from the
//!   original is tolerated: the runtime's walk stops there either way) and no new cycle
//!   appears;
//! - the leaf is the same entry;
//! - the set of entry ids is the old one minus exactly the removed ids;
//! - the active path's context is the old one minus exactly the removed entries, in order;
//! - tool call/result pairing on the active path is no worse than before;
//! - unparsable lines are all still there, byte for byte.

use std::collections::HashSet;

use super::Index;
use super::tree::{self, ContextItem, Tree};

/// What the rewrite is expected to have changed.
#[derive(Debug, Clone, Default)]
pub struct Expectation {
    /// Ids of the entries that were removed.
    pub removed_ids: HashSet<String>,
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
    let old_tree = Tree::build(old);
    let new_tree = Tree::build(new);
    if !new_tree.duplicate_ids.is_empty() {
        return fail(format!("duplicate entry id {}", new_tree.duplicate_ids[0]));
    }
    let id_of = |idx: &Index, i: usize| idx.entries[i].id.clone().unwrap_or_default();
    let old_dangling: HashSet<(String, String)> = old_tree
        .dangling
        .iter()
        .map(|&i| {
            (
                id_of(old, i),
                old.entries[i].parent.id().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for &i in &new_tree.dangling {
        let key = (
            id_of(new, i),
            new.entries[i].parent.id().unwrap_or_default().to_owned(),
        );
        // Re-parenting below a removed entry whose own parent was already missing keeps the
        // child pointing at that same missing id: the runtime stops there in both files.
        let already_missing = !old_tree.by_id.contains_key(&key.1);
        if !old_dangling.contains(&key) && !already_missing {
            return fail(format!(
                "entry {} names a parent {} that is not in the file",
                key.0, key.1
            ));
        }
    }
    let old_unreachable: HashSet<String> = old_tree
        .unreachable(old)
        .into_iter()
        .map(|i| id_of(old, i))
        .collect();
    if let Some(i) = new_tree
        .unreachable(new)
        .into_iter()
        .find(|&i| !old_unreachable.contains(&id_of(new, i)))
    {
        return fail(format!("entry {} is part of a parent cycle", id_of(new, i)));
    }
    if old_tree.leaf_id(old) != new_tree.leaf_id(new) {
        return fail(format!(
            "the leaf changed from {:?} to {:?}",
            old_tree.leaf_id(old),
            new_tree.leaf_id(new)
        ));
    }
    let old_ids: HashSet<String> = old_tree.by_id.keys().cloned().collect();
    let new_ids: HashSet<String> = new_tree.by_id.keys().cloned().collect();
    let expected_ids: HashSet<String> = old_ids.difference(&expect.removed_ids).cloned().collect();
    if new_ids != expected_ids {
        let lost = expected_ids.difference(&new_ids).next();
        let extra = new_ids.difference(&expected_ids).next();
        return fail(format!(
            "entry ids differ from the expected set (missing {lost:?}, unexpected {extra:?})"
        ));
    }
    let (old_ctx, old_pairing) = tree::active_context(old, &old_tree);
    let (new_ctx, new_pairing) = tree::active_context(new, &new_tree);
    let key = |idx: &Index, c: &ContextItem| match *c {
        ContextItem::CompactionSummary(i) => (true, id_of(idx, i)),
        ContextItem::Entry(i) => (false, id_of(idx, i)),
    };
    let expected_ctx: Vec<(bool, String)> = old_ctx
        .iter()
        .map(|c| key(old, c))
        .filter(|(_, id)| !expect.removed_ids.contains(id))
        .collect();
    let got_ctx: Vec<(bool, String)> = new_ctx.iter().map(|c| key(new, c)).collect();
    if got_ctx != expected_ctx {
        return fail(format!(
            "the rebuilt context differs: expected {} messages, got {}",
            expected_ctx.len(),
            got_ctx.len()
        ));
    }
    if !new_pairing.no_worse_than(&old_pairing) {
        return fail(format!(
            "tool call pairing got worse ({old_pairing:?} before, {new_pairing:?} after)"
        ));
    }
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
        Expectation {
            removed_ids: ids.iter().map(|s| s.to_string()).collect(),
        }
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
}
