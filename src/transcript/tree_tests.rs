//! Tests of the tree: paths, context, effective first-kept entries.

use super::*;

fn index(lines: &[&str]) -> Index {
    Index::from_reader(lines.join("\n").as_bytes()).unwrap()
}

#[test]
fn extending_a_tree_matches_building_it_whole() {
    let lines = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
        r#"{"type":"x_unknown","id":"u","parentId":"a"}"#,
        r#"{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"y"}}"#,
        r#"{"type":"custom","id":"c"}"#,
        r#"{"type":"message","id":"d","parentId":"zz","message":{"role":"user","content":"z"}}"#,
        r#"{"type":"message","id":"a","parentId":"b","message":{"role":"user","content":"dup"}}"#,
        r#"{"type":"compaction","id":"e","parentId":"f","summary":"s","firstKeptEntryId":"b"}"#,
        r#"{"type":"label","id":"f","parentId":"b","targetId":"a"}"#,
        r#"{"type":"x_unknown","id":"g","parentId":"e"}"#,
    ];
    for split in 1..lines.len() {
        let whole = index(&lines);
        let mut b = crate::transcript::IndexBuilder::default();
        for l in &lines[..split] {
            b.push_line(format!("{l}\n").as_bytes());
        }
        let head = b.finish();
        let mut tree = Tree::build(&head);
        let mut b = crate::transcript::IndexBuilder::resume(head);
        for l in &lines[split..] {
            b.push_line(format!("{l}\n").as_bytes());
        }
        let grown = b.finish();
        tree.extend(&grown);
        let want = Tree::build(&whole);
        for i in 0..grown.entries.len() {
            assert_eq!(tree.parent(i), want.parent(i), "split {split}");
            let (got, exp): (Vec<_>, Vec<_>) =
                (tree.children(i).collect(), want.children(i).collect());
            assert_eq!(got, exp, "split {split}");
        }
        let ids = |t: &Tree, idx: &Index| {
            t.ids(idx)
                .map(|(id, i)| (id.to_owned(), i))
                .collect::<std::collections::HashMap<_, _>>()
        };
        assert_eq!(ids(&tree, &grown), ids(&want, &whole), "split {split}");
        assert_eq!(tree.dangling, want.dangling, "split {split}");
        assert_eq!(tree.duplicate_ids, want.duplicate_ids, "split {split}");
        assert_eq!(tree.leaf, want.leaf, "split {split}");
    }
}

const H: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;

#[test]
fn context_honours_the_last_compaction_and_first_kept() {
    let idx = index(&[
        H,
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"1"}}"#,
        r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[]}}"#,
        r#"{"type":"compaction","id":"c","parentId":"b","firstKeptEntryId":"b","summary":"s"}"#,
        r#"{"type":"message","id":"x","parentId":"c","message":{"role":"user","content":"abandoned"}}"#,
        r#"{"type":"custom","id":"d","parentId":"c"}"#,
        r#"{"type":"message","id":"e","parentId":"d","message":{"role":"user","content":"2"}}"#,
        r#"{"type":"mystery","id":"f","parentId":"e"}"#,
    ]);
    let tree = Tree::build(&idx);
    assert_eq!(tree.leaf_id(&idx), Some("e"));
    let (ctx, _) = active_context(&idx, &tree);
    let ids: Vec<_> = ctx
        .iter()
        .map(|c| match c {
            ContextItem::CompactionSummary(_) => {
                format!("C{}", idx.entries[c.at()].id.as_ref().unwrap())
            }
            ContextItem::Entry(_) => idx.entries[c.at()].id.as_deref().unwrap().to_owned(),
        })
        .collect();
    assert_eq!(ids, ["Cc", "b", "e"]);
}

#[test]
fn first_kept_on_an_unknown_entry_stands_for_its_indexed_parent() {
    let idx = index(&[
        H,
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"1"}}"#,
        r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[]}}"#,
        r#"{"type":"x_unknown","id":"u","parentId":"b"}"#,
        r#"{"type":"message","id":"d","parentId":"u","message":{"role":"user","content":"2"}}"#,
        r#"{"type":"compaction","id":"c","parentId":"d","firstKeptEntryId":"u","summary":"s"}"#,
    ]);
    let tree = Tree::build(&idx);
    let (ctx, _) = active_context(&idx, &tree);
    let b = tree.find(&idx, "b").unwrap();
    assert_eq!(ctx[1], ContextItem::Entry(b as u32));
    assert_eq!(ctx.len(), 3);
}

#[test]
fn pairing_counts_missing_orphans_and_duplicates() {
    let idx = index(&[
        H,
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"t1"},{"type":"toolCall","id":"t2"}]}}"#,
        r#"{"type":"message","id":"b","parentId":"a","message":{"role":"toolResult","toolCallId":"t1","content":[]}}"#,
        r#"{"type":"message","id":"c","parentId":"b","message":{"role":"toolResult","toolCallId":"t1","content":[]}}"#,
        r#"{"type":"message","id":"d","parentId":"c","message":{"role":"toolResult","toolCallId":"zz","content":[]}}"#,
    ]);
    let tree = Tree::build(&idx);
    let (_, p) = active_context(&idx, &tree);
    assert_eq!(
        p,
        Pairing {
            missing: 1,
            orphans: 1,
            duplicates: 1
        }
    );
}

/// The active context as ids (`C<id>` for a compaction summary).
fn context_ids(lines: &[&str]) -> Vec<String> {
    let idx = index(lines);
    let tree = Tree::build(&idx);
    let (ctx, _) = active_context(&idx, &tree);
    ctx.iter()
        .map(|c| match c {
            ContextItem::CompactionSummary(_) => {
                format!("C{}", idx.entries[c.at()].id.as_ref().unwrap())
            }
            ContextItem::Entry(_) => idx.entries[c.at()].id.as_deref().unwrap().to_owned(),
        })
        .collect()
}

/// A first-kept id on an unindexed entry without an indexed ancestor: the runtime (compared with
/// the reference runtime's loader on these very files) falls back to the indexed entry just
/// below it on the compaction's branch, then to the first indexed entry below it anywhere,
/// then to the compaction's own parent.
#[test]
fn first_kept_on_a_rootless_unknown_entry_falls_back_as_the_runtime_does() {
    let o1 = r#"{"type":"weird","id":"o1","parentId":null}"#;
    let m = msg;
    let c = r#"{"type":"compaction","id":"c","parentId":"u2","firstKeptEntryId":"o1","summary":"«c»","timestamp":"2026-03-02T09:00:00.000Z"}"#;
    let (u1_below, u1_root) = (m("u1", r#""o1""#, "user"), m("u1", "null", "user"));
    let a1 = m("a1", r#""u1""#, "assistant");
    let u2 = m("u2", r#""a1""#, "user");
    let u3 = m("u3", r#""c""#, "user");
    let u9 = m("u9", r#""o1""#, "user");
    // Below it on the branch: u1.
    let on_branch = [H, o1, &u1_below, &a1, &u2, c, &u3];
    assert_eq!(context_ids(&on_branch), ["Cc", "u1", "a1", "u2", "u3"]);
    // Below it only on another branch: u9, which is not on the path, so nothing before c.
    let elsewhere = [H, o1, &u1_root, &a1, &u9, &u2, c, &u3];
    assert_eq!(context_ids(&elsewhere), ["Cc", "u3"]);
    // Nothing below it: the compaction's parent u2.
    let nothing = [H, o1, &u1_root, &a1, &u2, c, &u3];
    assert_eq!(context_ids(&nothing), ["Cc", "u2", "u3"]);
    runtime_agrees(
        "first_kept_on_a_rootless_unknown_entry_falls_back_as_the_runtime_does",
        &[&on_branch, &elsewhere, &nothing],
    );
}

/// A message line whose content is its id as a marker (`«id»`), which is how
/// [`runtime_agrees`] names it in the runtime's context.
fn msg(id: &str, parent: &str, role: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"{role}","content":"«{id}»"}}}}"#
    )
}

/// The reference runtime's loader (`SessionManager`, 2026.7.1 and, when it is installed,
/// 2026.7.35) builds from each file the context [`context_ids`] gives: messages named by their
/// `«id»` marker, a compaction's summary by its `«id»` marker as `C<id>`. Skipped (SKIPPED on
/// stderr) without a reference, unless `CLAWKEEPER_REQUIRE_ORACLE=1`.
fn runtime_agrees(test: &str, files: &[&[&str]]) {
    use crate::compact::testgen;
    let Some(stable) = testgen::require_oracle(test) else {
        return;
    };
    let texts: Vec<String> = files
        .iter()
        .map(|l| format!("{}\n", l.join("\n")))
        .collect();
    for dir in std::iter::once(stable).chain(testgen::extended_oracle_dir()) {
        let contexts = testgen::loader_contexts(&dir, &texts);
        for (lines, theirs) in files.iter().zip(contexts) {
            let theirs: Vec<String> = theirs
                .iter()
                .map(|k| {
                    k.strip_prefix("summary:")
                        .map_or_else(|| k.clone(), |c| format!("C{c}"))
                })
                .collect();
            assert_eq!(context_ids(lines), theirs, "{}: {lines:?}", dir.display());
        }
    }
}

/// An entry whose `parentId` names the unknown entry just before it hangs, in the runtime,
/// below the current leaf instead (the reference runtime's
/// loader is run on these files): here `u2` below `a1`, not below `o1`'s parent `u1`.
#[test]
fn a_parent_id_naming_the_link_just_before_is_relinked_to_the_leaf() {
    let (u1, a1) = (msg("u1", "null", "user"), msg("a1", r#""u1""#, "assistant"));
    let o1 = r#"{"type":"weird","id":"o1","parentId":"u1"}"#;
    let u2 = msg("u2", r#""o1""#, "user");
    let relinked = [H, &u1, &a1, o1, &u2];
    assert_eq!(context_ids(&relinked), ["u1", "a1", "u2"]);
    // With anything indexed in between, `o1` is no longer the append parent: followed.
    let b1 = msg("b1", r#""a1""#, "user");
    let followed = [H, &u1, &a1, o1, &b1, &u2];
    assert_eq!(context_ids(&followed), ["u1", "u2"]);
    // An unknown entry without a parentId is no link; its id resolves to nothing.
    let o2 = r#"{"type":"weird","id":"o1"}"#;
    let no_link = [H, &u1, &a1, o2, &u2];
    assert_eq!(context_ids(&no_link), ["u2"]);
    runtime_agrees(
        "a_parent_id_naming_the_link_just_before_is_relinked_to_the_leaf",
        &[&relinked, &followed, &no_link],
    );
}

/// A first-kept id on an unknown entry: the runtime's search below it follows parent ids as
/// written (`u1` names `o1`, though it is re-linked below `u0`), and an unknown entry without
/// a parentId is not resolved at all (the reference runtime's loader
/// is run on these files).
#[test]
fn first_kept_on_an_unknown_entry_follows_written_parents() {
    let c = r#"{"type":"compaction","id":"c","parentId":"u2","firstKeptEntryId":"o1","summary":"«c»","timestamp":"2026-03-02T09:00:00.000Z"}"#;
    let (u0, u1) = (msg("u0", "null", "user"), msg("u1", r#""o1""#, "user"));
    let (a1, u2) = (
        msg("a1", r#""u1""#, "assistant"),
        msg("u2", r#""a1""#, "user"),
    );
    let u3 = msg("u3", r#""c""#, "user");
    let link = r#"{"type":"weird","id":"o1","parentId":null}"#;
    let relinked = [H, &u0, link, &u1, &a1, &u2, c, &u3];
    assert_eq!(context_ids(&relinked), ["Cc", "u1", "a1", "u2", "u3"]);
    let no_link = r#"{"type":"weird","id":"o1"}"#;
    let unresolved = [H, no_link, &u1, &a1, &u2, c, &u3];
    assert_eq!(context_ids(&unresolved), ["Cc", "u3"]);
    runtime_agrees(
        "first_kept_on_an_unknown_entry_follows_written_parents",
        &[&relinked, &unresolved],
    );
}

/// The nodes no root reaches, found from the roots down through the children.
fn unreachable_from_roots(index: &Index, tree: &Tree) -> Vec<usize> {
    let mut reached = vec![false; index.entries.len()];
    let mut stack = tree.roots(index);
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut reached[i], true) {
            stack.extend(tree.children(i));
        }
    }
    (0..index.entries.len())
        .filter(|&i| is_node(&index.entries[i]) && !reached[i])
        .collect()
}

#[test]
fn unreachable_nodes_walked_up_are_those_no_root_reaches_down() {
    // Parent links drawn at random: before or after the entry (so cycles, long ones and
    // self-loops), null, absent, missing, or on a line that is no node.
    let mut seed = 0x2545_f491_u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut found_some = 0;
    for case in 0..300 {
        let n = 1 + next(40);
        let mut lines = vec![
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_string(),
        ];
        for i in 0..n {
            let parent = match next(8) {
                0 => r#","parentId":null"#.to_string(),
                1 => String::new(),
                2 => r#","parentId":"missing""#.to_string(),
                _ => format!(r#","parentId":"e{}""#, next(n)),
            };
            lines.push(match next(10) {
                0 => format!(r#"{{"type":"custom","customType":"x","id":"e{i}"{parent}}}"#),
                _ => format!(
                    r#"{{"type":"message","id":"e{i}"{parent},"message":{{"role":"user","content":"x"}}}}"#
                ),
            });
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let idx = index(&refs);
        let tree = Tree::build(&idx);
        let want = unreachable_from_roots(&idx, &tree);
        found_some += usize::from(!want.is_empty());
        assert_eq!(
            tree.unreachable(&idx),
            want,
            "case {case}:\n{}",
            lines.join("\n")
        );
    }
    assert!(
        found_some > 50,
        "the cases must have unreachable nodes: {found_some}"
    );
}
