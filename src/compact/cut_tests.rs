use serde_json::json;

use super::*;
use crate::compact::TokenCounter;
use crate::compact::testgen::{PathBuilder, Rng};

fn est() -> Estimator {
    Estimator::new(TokenCounter::Heuristic)
}

fn role(e: &Value) -> Option<&str> {
    e.get("message").and_then(|m| str_field(m, "role"))
}

#[test]
fn empty_and_compaction_leaf_are_skipped() {
    assert_eq!(find_cut(&[], &est(), 10), Err(Skip::Empty));
    let mut b = PathBuilder::default();
    b.user("hello there");
    b.push(
        "compaction",
        json!({"summary":"s","firstKeptEntryId":"e0001","tokensBefore":5}),
    );
    assert_eq!(find_cut(&b.entries, &est(), 1), Err(Skip::LeafIsCompaction));
}

#[test]
fn small_context_fits_budget() {
    let mut b = PathBuilder::default();
    b.user("abcd");
    b.assistant_text("efgh");
    assert_eq!(
        find_cut(&b.entries, &est(), 100),
        Err(Skip::FitsBudget { context_tokens: 2 })
    );
}

#[test]
fn cuts_at_user_message_keeping_at_least_the_budget() {
    let mut b = PathBuilder::default();
    for i in 0..10 {
        b.user(&"u".repeat(40)); // 10 tokens
        b.tool_round(
            "read",
            json!({"path": format!("f{i}")}),
            &"r".repeat(80),
            false,
        );
        b.assistant_text(&"a".repeat(40)); // 10 tokens
    }
    let cut = find_cut(&b.entries, &est(), 70).unwrap();
    assert_eq!(role(&b.entries[cut.index]), Some("user"));
    assert!(cut.kept_tokens >= 70, "{cut:?}");
    // one turn fewer would not have been enough
    let next_user = (cut.index + 1..b.entries.len())
        .find(|&i| role(&b.entries[i]) == Some("user"))
        .unwrap();
    let later: u64 = b.entries[next_user..]
        .iter()
        .map(|e| est().message_tokens(&crate::compact::context_message(e).unwrap()))
        .sum();
    assert!(later < 70);
    assert_eq!(cut.first_kept_id, b.entries[cut.index]["id"]);
    assert_eq!(cut.window_start, 0);
}

#[test]
fn never_splits_a_tool_call_from_a_late_result() {
    let mut b = PathBuilder::default();
    b.user("first request");
    b.assistant_text(&"a".repeat(400));
    b.user("second request");
    b.message(json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"exec","arguments":{}}],"stopReason":"toolUse"}));
    // a user message sneaks in between the call and its result
    b.user("interjection");
    b.message(json!({"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[{"type":"text","text":"x".repeat(400)}],"isError":false}));
    b.assistant_text("done");
    let cut = find_cut(&b.entries, &est(), 10).unwrap();
    assert_eq!(
        b.entries[cut.index]["id"], "e0003",
        "moved back to the turn holding the call"
    );
    // an errored call does not hold its range open
    b.entries[3]["message"]["stopReason"] = json!("error");
    let cut = find_cut(&b.entries, &est(), 10).unwrap();
    assert_eq!(b.entries[cut.index]["id"], "e0005");
}

#[test]
fn window_starts_at_previous_first_kept_entry() {
    let mut b = PathBuilder::default();
    b.user(&"x".repeat(400));
    b.assistant_text(&"y".repeat(400));
    let kept = b.user(&"k".repeat(400));
    b.assistant_text(&"z".repeat(400));
    b.push(
        "compaction",
        json!({"summary":"old","firstKeptEntryId":kept,"tokensBefore":400}),
    );
    b.user(&"n".repeat(400));
    b.assistant_text(&"m".repeat(400));
    let (prev, start) = window(&b.entries);
    assert_eq!((prev, start), (Some(4), 2));
    let cut = find_cut(&b.entries, &est(), 150).unwrap();
    assert_eq!(cut.index, 5);
    assert_eq!(
        cut.kept_tokens, 200,
        "the previous summary is not counted as kept"
    );
    assert_eq!(
        cut.summarized_positions(&facts_of(&b.entries, &est()))
            .collect::<Vec<_>>(),
        vec![2, 3]
    );
    // nothing new to summarise when the cut would be the window start
    assert_eq!(find_cut(&b.entries, &est(), 350), Err(Skip::NoTurnStart));
    // a cut before the previous compaction: its summary is dropped, not kept
    let mut wide = b.entries.clone();
    wide[4]["firstKeptEntryId"] = json!("e0001");
    let cut = find_cut(&wide, &est(), 350).unwrap();
    assert_eq!(
        (cut.index, cut.kept_tokens, cut.summarized_tokens),
        (2, 400, 200)
    );
    // a hardened boundary (firstKeptEntryId = the compaction itself) keeps nothing before it
    b.entries[4]["firstKeptEntryId"] = json!("e0005");
    assert_eq!(window(&b.entries), (Some(4), 5));
    assert_eq!(find_cut(&b.entries, &est(), 150), Err(Skip::NoTurnStart));
}

#[test]
fn generated_paths_respect_all_constraints() {
    let mut rng = Rng::new(42);
    for case in 0..200 {
        let turns = 1 + rng.below(60) as usize;
        let b = PathBuilder::random(&mut rng, turns);
        let keep = rng.below(6000);
        let path = &b.entries;
        match find_cut(path, &est(), keep) {
            Ok(cut) => {
                assert_eq!(role(&path[cut.index]), Some("user"), "case {case}");
                assert!(cut.kept_tokens >= keep, "case {case}");
                let kept_results: Vec<&str> = path[cut.index..]
                    .iter()
                    .filter_map(result_call_id)
                    .collect();
                for e in &path[..cut.index] {
                    for id in open_call_ids(e) {
                        assert!(!kept_results.contains(&id), "case {case}: call {id} split");
                    }
                }
                assert!(cut.summarized_positions(&facts_of(path, &est())).count() > 0);
            }
            Err(Skip::FitsBudget { context_tokens }) => assert!(context_tokens < keep),
            // the budget is only reached inside the first turn: nothing before it to summarise
            Err(Skip::NoTurnStart) => {
                let second_user = path
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| role(e) == Some("user"))
                    .nth(1)
                    .map_or(path.len(), |(i, _)| i);
                let tail: u64 = path[second_user..]
                    .iter()
                    .filter_map(crate::compact::context_message)
                    .map(|m| est().message_tokens(&m))
                    .sum();
                assert!(tail < keep, "case {case}");
            }
            Err(other) => panic!("case {case}: unexpected {other:?}"),
        }
    }
}
