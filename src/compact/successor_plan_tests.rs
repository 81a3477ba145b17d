use serde_json::{Value, json};

use super::*;
use crate::compact::testgen::{self, PathBuilder, Rng};
use crate::jsjson;

/// A random tree: a main chain with settings, labels, custom messages, duplicate prompts,
/// signed thinking, one compaction, and side branches spliced in before the leaf.
fn random_tree(rng: &mut Rng) -> Vec<Value> {
    let mut b = PathBuilder::default();
    b.push(
        "model_change",
        json!({"provider":"anthropic","modelId":"a"}),
    );
    let turns = 2 + rng.below(12);
    let compact_after = rng.below(turns);
    let mut users = Vec::new();
    for t in 0..turns {
        match rng.below(6) {
            0 => drop(b.push("thinking_level_change", json!({"thinkingLevel":"low"}))),
            1 => drop(b.push(
                "model_change",
                json!({"provider":"openai","modelId":format!("m{t}")}),
            )),
            2 => drop(b.push("session_info", json!({"name":"s"}))),
            3 => drop(b.push(
                "custom_message",
                json!({"customType":"x","content":"note","display":true}),
            )),
            _ => {}
        }
        let text = format!("please do the long task number {} now", rng.below(3));
        users.push(b.user(&text));
        if rng.chance(30) {
            users.push(b.user(&text)); // a repeated prompt within the minute
        }
        if rng.chance(40) {
            let target = b.entries[rng.below(b.entries.len() as u64) as usize]["id"].clone();
            b.push("label", json!({"targetId": target, "label": "L"}));
        }
        b.message(json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"hm","thinkingSignature":"sig"},
            {"type":"redacted_thinking","data":"opaque"},
            {"type":"toolCall","id":format!("c{t}"),"name":"read","arguments":{"path":"f"}}],"stopReason":"toolUse"}));
        b.message(
            json!({"role":"toolResult","toolCallId":format!("c{t}"),"toolName":"read",
            "content":[{"type":"text","text":"r"}],"isError":false}),
        );
        b.assistant_text("ok");
        if rng.chance(20) {
            b.push(
                "branch_summary",
                json!({"fromId":"root","summary":"went elsewhere"}),
            );
        }
        if t == compact_after {
            let first_kept = match rng.below(4) {
                0 => b.next_id(), // hardened: its own id
                1 => "missing".to_owned(),
                _ => users[rng.below(users.len() as u64) as usize].clone(),
            };
            b.push(
                "compaction",
                json!({"summary":"S","firstKeptEntryId":first_kept,"tokensBefore":100}),
            );
        }
    }
    let mut all = b.entries;
    for k in 0..rng.below(4) {
        let at = 1 + rng.below(all.len() as u64 - 1) as usize;
        let parent = all[at - 1]["id"].clone();
        let side = json!({"type":"message","id":format!("side{k}"),"parentId":parent,
            "timestamp":"2026-03-02T09:00:00.000Z","message":{"role":"user","content":"side","timestamp":1}});
        all.insert(at.min(all.len() - 1), side);
    }
    // Lines the runtime's reader sets aside: entries of an unknown type spliced into the
    // chain (the next entry names them; their own parent is the entry before, or one further
    // up), unknown entries without a parent, and labels of an entry that comes later.
    for k in 0..rng.below(4) {
        let at = 2 + rng.below(all.len() as u64 - 2) as usize;
        let line = match rng.below(4) {
            0 | 1 => {
                let back = 1 + rng.below(3.min(at as u64)) as usize;
                let parent = all[at - back]["id"].clone();
                all[at]["parentId"] = json!(format!("x{k}"));
                json!({"type":"x_future_entry","id":format!("x{k}"),"parentId":parent})
            }
            2 => json!({"type":"x_future_entry","id":format!("x{k}"),"payload":1}),
            _ => {
                let later = all[at + rng.below((all.len() - at) as u64) as usize]["id"].clone();
                json!({"type":"label","id":format!("x{k}"),"parentId":all[at - 1]["id"],
                    "targetId":later,"label":"early","timestamp":"2026-03-02T09:00:00.000Z"})
            }
        };
        all.insert(at, line);
    }
    // A compaction whose `firstKeptEntryId` names a line set aside before it: the reader
    // repairs the id (`repairEntryLinks`).
    for c in 0..all.len() {
        if all[c]["type"] != "compaction" || !rng.chance(60) {
            continue;
        }
        let set_aside: Vec<Value> = all[..c]
            .iter()
            .map(|e| e["id"].clone())
            .filter(|id| id.as_str().is_some_and(|s| s.starts_with('x')))
            .collect();
        if !set_aside.is_empty() {
            all[c]["firstKeptEntryId"] =
                set_aside[rng.below(set_aside.len() as u64) as usize].clone();
        }
    }
    all
}

/// A transcript of `all` (entry k + 1 of its index is all[k]; the header is entry 0) and its tree.
fn indexed(all: &[Value]) -> (crate::transcript::Index, Tree) {
    let mut text =
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned();
    for e in all {
        text.push('\n');
        text.push_str(&jsjson::to_string_compact(e));
    }
    let index = crate::transcript::Index::from_reader(text.as_bytes()).unwrap();
    let tree = Tree::build(&index);
    (index, tree)
}

/// The active path (positions in `all`) as the rotation gets it from the tree.
fn active_path(all: &[Value]) -> Vec<usize> {
    let (_, tree) = indexed(all);
    tree.active_path().into_iter().map(|i| i - 1).collect()
}

/// The successor's lines (without the header) for entry values in file order, all with ids;
/// `None` without a compaction on `branch` (positions in `all`).
fn build_values(all: &[Value], branch: &[usize]) -> Option<Vec<Value>> {
    let (index, tree) = indexed(all);
    let entries: Vec<usize> = branch.iter().map(|k| k + 1).collect();
    let plan = build(&index, &tree, &entries, &mut |p| {
        Ok(PathEntry::of(&all[branch[p]]))
    })
    .unwrap()?;
    Some(
        plan.iter()
            .map(|r| r.apply(all[r.original - 1].clone()))
            .collect(),
    )
}

#[test]
fn header_and_file_name_follow_the_runtime() {
    let h = header("id-1", "2026-03-02T10:05:00.000Z", "/w", "/s/old.jsonl");
    assert_eq!(
        jsjson::to_string_compact(&h),
        r#"{"type":"session","version":3,"id":"id-1","timestamp":"2026-03-02T10:05:00.000Z","cwd":"/w","parentSession":"/s/old.jsonl"}"#
    );
    assert_eq!(
        file_name("2026-03-02T10:05:00.000Z", "id-1"),
        "2026-03-02T10-05-00-000Z_id-1.jsonl"
    );
}

#[test]
fn keeps_last_summarized_assistant_and_moves_first_kept() {
    let mut b = PathBuilder::default();
    b.user("one");
    let a = b.tool_round("read", json!({"path":"x"}), "r", false);
    let last = b.assistant_text("two");
    let u = b.user("three");
    b.push(
        "compaction",
        json!({"summary":"S","firstKeptEntryId":u,"tokensBefore":9}),
    );
    let path: Vec<usize> = (0..b.entries.len()).collect();
    let lines = build_values(&b.entries, &path).unwrap();
    let ids: Vec<&str> = lines.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![last.as_str(), u.as_str(), "e0006"]);
    assert_eq!(lines[0]["parentId"], Value::Null);
    assert_eq!(lines[2]["firstKeptEntryId"], json!(last));
    assert!(!ids.contains(&a.as_str()));
    assert_eq!(
        lines[1], b.entries[4],
        "untouched entries are copied as they are"
    );
    assert!(
        build_values(&b.entries[..4], &[0, 1, 2, 3]).is_none(),
        "no compaction, no successor"
    );
}

#[test]
fn matches_reference_rotation_on_generated_trees() {
    let Some(dir) =
        testgen::require_oracle("successor::matches_reference_rotation_on_generated_trees")
    else {
        return;
    };
    let mut rng = Rng::new(11);
    let trees: Vec<Vec<Value>> = (0..testgen::case_count(24))
        .map(|_| random_tree(&mut rng))
        .collect();
    // The reference, and the extended-stable 2026.7.35 when it is installed.
    for dir in std::iter::once(dir).chain(testgen::extended_oracle_dir()) {
        rotations_match(&dir, &trees);
    }
}

/// The runtime in `dir` rotates each tree as [`build`] does.
fn rotations_match(dir: &std::path::Path, trees: &[Vec<Value>]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (n, all) in trees.iter().enumerate() {
        let all = all.clone();
        let file = tmp.path().join(format!("case{n}.jsonl"));
        let mut text = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-02T09:00:00.000Z","cwd":"/w"}"#.to_owned();
        for e in &all {
            text.push('\n');
            text.push_str(&jsjson::to_string_compact(e));
        }
        text.push('\n');
        std::fs::write(&file, text).unwrap();
        cases.push((file, all));
    }
    let out = testgen::run_oracle_script(dir, "rotate-successor.mjs", cases.iter().map(|c| &c.0));
    let results: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), cases.len());
    let rotated = results
        .iter()
        .filter(|r| r["rotated"] == json!(true))
        .count();
    assert!(
        rotated * 2 >= cases.len(),
        "only {rotated} of {} rotated",
        cases.len()
    );
    for ((file, all), result) in cases.iter().zip(&results) {
        let mine = build_values(all, &active_path(all));
        if result["rotated"] != json!(true) {
            assert!(
                mine.is_none() || mine.as_ref().is_some_and(|m| m.is_empty()),
                "{file:?}: {result}"
            );
            continue;
        }
        let text = std::fs::read_to_string(result["sessionFile"].as_str().unwrap()).unwrap();
        let want: Vec<Value> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let got = mine.expect("reference rotated, so must we");
        assert_eq!(got, want, "{}: {file:?}", dir.display());
    }
}

/// A long chain of lines of an unknown type, `x1` (its parent is not in the file) to `xN`,
/// each followed by a user message that names it as its parent, then a compaction below the
/// first message that keeps from `xN`. The rotation's reader resolves every message's parent
/// through the chain (it ends nowhere: null), and repairs the compaction's `firstKeptEntryId`
/// to the one entry that hangs below `xN`, found by a scan of the file that asks of every
/// message whether its chain crosses `xN`.
fn unknown_chain(n: usize) -> Vec<Value> {
    let mut all = Vec::with_capacity(2 * n + 1);
    for k in 1..=n {
        let parent = if k == 1 {
            json!("gone")
        } else {
            json!(format!("x{}", k - 1))
        };
        all.push(json!({"type":"x_future_entry","id":format!("x{k}"),"parentId":parent}));
        all.push(
            json!({"type":"message","id":format!("m{k}"),"parentId":format!("x{k}"),
            "timestamp":"2026-03-02T09:00:00.000Z",
            "message":{"role":"user","content":format!("m{k}"),"timestamp":k}}),
        );
    }
    all.push(json!({"type":"compaction","id":"c","parentId":"m1",
        "timestamp":"2026-03-02T09:00:00.000Z","summary":"S",
        "firstKeptEntryId":format!("x{n}"),"tokensBefore":9}));
    all
}

/// What the rotation writes for [`unknown_chain`]: the messages after the first, each a root
/// (the chain above it ends nowhere), then the compaction (its parent, the first message, was
/// summarised), keeping from the last message.
fn unknown_chain_successor(n: usize) -> Vec<Value> {
    let all = unknown_chain(n);
    let mut want: Vec<Value> = (2..=n)
        .map(|k| {
            let mut m = all[2 * k - 1].clone();
            m["parentId"] = Value::Null;
            m
        })
        .collect();
    let mut c = all[2 * n].clone();
    c["parentId"] = Value::Null;
    c["firstKeptEntryId"] = json!(format!("m{n}"));
    want.push(c);
    want
}

#[test]
fn a_long_chain_of_unknown_lines_is_resolved_in_one_walk() {
    // 20,000 links: walking each message's chain from its own link, and each candidate's
    // chain in the first-kept scan, would take some 4 * 10^8 steps.
    let n = 20_000;
    let all = unknown_chain(n);
    let got = build_values(&all, &active_path(&all)).expect("a compaction on the path");
    let want = unknown_chain_successor(n);
    assert_eq!(got.len(), want.len());
    for (k, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "line {k}");
    }
}

#[test]
fn a_chain_of_unknown_lines_is_rotated_as_the_runtime_does() {
    let Some(dir) = testgen::require_oracle(
        "successor::a_chain_of_unknown_lines_is_rotated_as_the_runtime_does",
    ) else {
        return;
    };
    let trees = [unknown_chain(30)];
    assert_eq!(
        build_values(&trees[0], &active_path(&trees[0])),
        Some(unknown_chain_successor(30))
    );
    for dir in std::iter::once(dir).chain(testgen::extended_oracle_dir()) {
        rotations_match(&dir, &trees);
    }
}

#[test]
fn removed_entries_whose_parents_go_round_are_refused() {
    // Two labels of a summarised message name each other as parent, and a kept entry hangs
    // below one of them: the runtime's rotation climbs from one to the other for ever.
    let mut b = PathBuilder::default();
    let u1 = b.user("one");
    let a2 = b.assistant_text("two");
    let mut all = b.entries;
    all.push(
        json!({"type":"label","id":"l1","parentId":"l2","targetId":u1,"label":"a",
        "timestamp":"2026-03-02T09:00:00.000Z"}),
    );
    all.push(
        json!({"type":"label","id":"l2","parentId":"l1","targetId":u1,"label":"b",
        "timestamp":"2026-03-02T09:00:00.000Z"}),
    );
    all.push(
        json!({"type":"custom","id":"k","parentId":"l1","customType":"x","data":{},
        "timestamp":"2026-03-02T09:00:00.000Z"}),
    );
    all.push(
        json!({"type":"message","id":"u3","parentId":a2,"timestamp":"2026-03-02T09:00:00.000Z",
        "message":{"role":"user","content":"three","timestamp":3}}),
    );
    all.push(
        json!({"type":"compaction","id":"c","parentId":"u3","summary":"S",
        "firstKeptEntryId":"u3","tokensBefore":9,"timestamp":"2026-03-02T09:00:00.000Z"}),
    );
    let (index, tree) = indexed(&all);
    let branch = tree.active_path();
    assert_eq!(
        branch.iter().map(|&i| i - 1).collect::<Vec<_>>(),
        [0, 1, 5, 6]
    );
    let err = build(&index, &tree, &branch, &mut |p| {
        Ok(PathEntry::of(&all[branch[p] - 1]))
    })
    .unwrap_err();
    assert!(format!("{err:#}").contains("go round"), "{err:#}");
    // Without the kept entry below them, the labels simply go.
    all.remove(4);
    let lines = build_values(&all, &active_path(&all)).unwrap();
    let ids: Vec<&str> = lines.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a2.as_str(), "u3", "c"]);
}
