use serde_json::{Value, json};

use super::*;
use crate::compact::facts::EntryFacts;
use crate::compact::testgen::{self, Rng};
use crate::transcript::{Index, oddlines};

fn heur() -> Estimator {
    Estimator::new(TokenCounter::Heuristic)
}

#[test]
fn utf16_counts_surrogate_pairs_twice() {
    assert_eq!(utf16_len("héllo 😀"), 8);
    assert_eq!(utf16_len("漢字"), 2);
    // Every width of UTF-8 sequence, mixed, against `str::encode_utf16`.
    let mixed = "a\u{7f}\u{80}é\u{7ff}\u{800}漢\u{ffff}\u{10000}😀\u{10ffff}z";
    for s in [mixed, "", "plain ascii", &mixed.repeat(9)] {
        assert_eq!(utf16_len(s), s.encode_utf16().count() as u64, "{s:?}");
    }
}

#[test]
fn hand_derived_values() {
    let e = heur();
    // 8 UTF-16 units + one image (4800) = 4808 -> 1202
    let user = json!({"role":"user","content":[{"type":"text","text":"héllo 😀"},{"type":"image","data":"x"}]});
    assert_eq!(e.message_tokens(&user), 1202);
    // "read" (4) + {"path":"x","n":1.5} (20) = 24 -> 6
    let asst = json!({"role":"assistant","content":[{"type":"toolCall","id":"a","name":"read","arguments":{"path":"x","n":1.5}}]});
    assert_eq!(e.message_tokens(&asst), 6);
    // arguments missing: "undefined" (9) + "x" (1) = 10 -> 3
    let asst = json!({"role":"assistant","content":[{"type":"toolCall","name":"x"}]});
    assert_eq!(e.message_tokens(&asst), 3);
    assert_eq!(
        e.message_tokens(&json!({"role":"toolResult","content":"abc"})),
        1
    );
    assert_eq!(
        e.message_tokens(&json!({"role":"bashExecution","command":"ab","output":"cde"})),
        2
    );
    assert_eq!(
        e.message_tokens(&json!({"role":"weird","content":"abcdef"})),
        0
    );
    // The string content of an assistant reply is the text block the loader makes of it.
    assert_eq!(
        e.message_tokens(&json!({"role":"assistant","content":"abcdef"})),
        2
    );
    // An object content of a tool result is the one block of the list the loader makes.
    assert_eq!(
        e.message_tokens(&json!({"role":"toolResult","content":{"type":"text","text":"abcde"}})),
        2
    );
    assert_eq!(
        e.message_tokens(&json!({"role":"toolResult","content":{"type":"image","data":"x"}})),
        1200
    );
    // Not for a user or custom message, which the loader leaves alone (the runtime's
    // estimator counts nothing of it, or throws).
    assert_eq!(
        e.message_tokens(&json!({"role":"user","content":{"type":"text","text":"abcde"}})),
        0
    );
}

#[test]
fn context_uses_last_good_usage() {
    let e = heur();
    let msgs = vec![
        json!({"role":"user","content":"aaaa"}),
        json!({"role":"assistant","content":[],"stopReason":"stop","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":0}}),
        json!({"role":"assistant","content":[],"stopReason":"error","usage":{"totalTokens":999}}),
        json!({"role":"toolResult","content":"abcdefgh"}),
    ];
    let c = e.context_tokens(&msgs);
    assert_eq!(c.last_usage_index, Some(1));
    assert_eq!(c.usage_tokens, 10);
    assert_eq!(c.trailing_tokens, 2);
    assert_eq!(c.tokens, 12);
    let none = e.context_tokens(&msgs[..1]);
    assert_eq!((none.tokens, none.last_usage_index), (1, None));
    let avail = vec![
        json!({"role":"assistant","content":[],"usage":{"totalTokens":5,"contextUsage":{"state":"available","totalTokens":77}}}),
    ];
    assert_eq!(e.context_tokens(&avail).tokens, 77);
    let unavail = vec![
        json!({"role":"assistant","content":[{"type":"text","text":"abcd"}],"usage":{"totalTokens":5,"contextUsage":{"state":"unavailable"}}}),
    ];
    assert_eq!(e.context_tokens(&unavail).tokens, 1);
}

#[test]
#[cfg(feature = "tiktoken")]
fn bpe_counts_real_tokens() {
    let o = Estimator::new(TokenCounter::O200k);
    let c = Estimator::new(TokenCounter::Cl100k);
    let m = json!({"role":"user","content":"hello world"});
    assert_eq!(o.message_tokens(&m), 2);
    assert_eq!(c.message_tokens(&m), 2);
    let img = json!({"role":"toolResult","content":[{"type":"image","data":"x"}]});
    assert_eq!(o.message_tokens(&img), 1200);
    // code is denser in tokens than chars/4 suggests
    let code = json!({"role":"user","content":"fn main() { let x: Vec<u8> = vec![1, 2, 3]; println!(\"{x:?}\"); }"});
    assert!(o.message_tokens(&code) > 0);
    assert_ne!(o.message_tokens(&code), heur().message_tokens(&code));
}

#[test]
fn matches_reference_on_generated_messages() {
    let Some(dir) = testgen::require_oracle("estimate::matches_reference_on_generated_messages")
    else {
        return;
    };
    let mut rng = Rng::new(7);
    let mut cases: Vec<Vec<Value>> = (0..testgen::case_count(40))
        .map(|_| {
            let n = 1 + rng.below(25);
            (0..n)
                .map(|i| testgen::message(&mut rng, 1_772_442_000_000 + i))
                .collect()
        })
        .collect();
    // Messages of odd shapes (every JSON type in every member); the runtime throws on some,
    // which are not compared.
    for _ in 0..testgen::case_count(40) {
        let n = 1 + rng.below(25);
        cases.push(
            (0..n)
                .filter_map(|_| crate::jsjson::parse(oddlines::message(&mut rng).as_bytes()).ok())
                .collect(),
        );
    }
    // Contents that are not lists of blocks (plain strings, objects), for every role, with and
    // without a provider usage.
    for i in 0..testgen::case_count(60) {
        let n = 1 + rng.below(12);
        let with_usage = i % 2 == 1;
        cases.push(
            (0..n)
                .map(|k| {
                    let role = testgen::ROLES[rng.below(testgen::ROLES.len() as u64) as usize];
                    testgen::shaped_message(&mut rng, role, with_usage, 1_772_442_000_000 + k)
                })
                .collect(),
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("cases.json");
    std::fs::write(&input, serde_json::to_string(&cases).unwrap()).unwrap();
    // Estimated as the runtime estimates a message read from a transcript: after its loader.
    let input = input.to_str().unwrap();
    let out = testgen::run_oracle_script(&dir, "estimate-tokens.mjs", ["--loaded", input]);
    let got: Vec<Value> = serde_json::from_slice(&out).unwrap();
    let e = heur();
    let mut compared = 0;
    // (role, string content, usage) -> messages compared
    let mut shapes: std::collections::BTreeMap<(String, bool, bool), usize> = Default::default();
    for (msgs, reference) in cases.iter().zip(&got) {
        let want = reference["perMessage"].as_array().unwrap();
        for (m, want) in msgs.iter().zip(want) {
            if let Some(want) = want.as_u64() {
                assert_eq!(e.message_tokens(m), want, "message: {m}");
                compared += 1;
                if let Some(role) = m
                    .get("role")
                    .and_then(Value::as_str)
                    .filter(|r| testgen::ROLES.contains(r))
                {
                    let key = (
                        role.to_owned(),
                        m["content"].is_string(),
                        m.get("usage").is_some(),
                    );
                    *shapes.entry(key).or_default() += 1;
                }
            }
        }
        // Odd usage (strings among its counts) makes the runtime's context figure a string;
        // only numeric ones are compared.
        let Some(want) = reference["context"]["tokens"].as_u64() else {
            continue;
        };
        let ctx = e.context_tokens(msgs);
        assert_eq!(ctx.tokens, want, "{}", serde_json::to_string(msgs).unwrap());
        assert_eq!(
            ctx.last_usage_index,
            reference["context"]["lastUsageIndex"]
                .as_u64()
                .map(|i| i as usize)
        );
    }
    assert!(compared > 500, "only {compared} messages compared");
    // Every role was compared with a string content, with and without usage.
    if testgen::case_count(60) >= 60 {
        for role in testgen::ROLES {
            for usage in [false, true] {
                let n = shapes
                    .get(&(role.to_owned(), true, usage))
                    .copied()
                    .unwrap_or(0);
                assert!(
                    n > 0,
                    "no {role} message with a string content (usage: {usage})"
                );
            }
        }
    }
}

/// The estimate rules applied to a message value directly (what the runtime's
/// `estimateTokens` does), to check the probe's reading of them.
fn reference_tokens(message: &Value, measure: Measure) -> u64 {
    // The loader's normalisation first: a reply's or a result's string content becomes a text
    // block, a result's object content a list of it.
    let mut message = message.clone();
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(c) = message.get_mut("content") {
        match (role.as_deref(), &*c) {
            (Some("assistant" | "toolResult"), Value::String(t)) => {
                *c = json!([{"type":"text","text":t}]);
            }
            (Some("toolResult"), Value::Object(_)) => *c = json!([c.clone()]),
            _ => {}
        }
    }
    let message = &message;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut m = Measured::default();
    let mut text = |t: Option<String>| m.amount += t.map_or(0, |t| measure.text(&t));
    let mut images = 0;
    let blocks = message.get("content").and_then(Value::as_array);
    match s(message, "role").as_deref() {
        Some("user" | "custom" | "toolResult") => match message.get("content") {
            Some(Value::String(t)) => text(Some(t.clone())),
            _ => {
                for b in blocks.into_iter().flatten() {
                    match s(b, "type").as_deref() {
                        Some("image") => images += 1,
                        Some("text") => text(s(b, "text")),
                        Some("toolResult" | "tool_result") => {
                            text(s(b, "text").filter(|t| !t.is_empty()).or(s(b, "content")))
                        }
                        _ => {}
                    }
                }
            }
        },
        Some("assistant") => {
            for b in blocks.into_iter().flatten() {
                match s(b, "type").as_deref() {
                    Some("text") => text(s(b, "text")),
                    Some("thinking") => text(s(b, "thinking")),
                    Some("toolCall") => {
                        text(s(b, "name"));
                        text(Some(b.get("arguments").map_or("undefined".into(), |a| {
                            let mut a = a.clone();
                            crate::jsjson::normalize_key_order(&mut a);
                            crate::jsjson::to_string_compact(&a)
                        })));
                    }
                    _ => {}
                }
            }
        }
        Some("bashExecution") => {
            text(s(message, "command"));
            text(s(message, "output"));
        }
        Some("branchSummary" | "compactionSummary") => text(s(message, "summary")),
        _ => {}
    }
    m.images = images;
    measure.tokens(m)
}

#[test]
fn the_probe_reads_odd_messages_as_the_rules_say() {
    let mut rng = Rng::new(11);
    let mut checked = 0;
    for _ in 0..4000 {
        let Ok(m) = crate::jsjson::parse(oddlines::message(&mut rng).as_bytes()) else {
            continue;
        };
        for counter in [TokenCounter::Heuristic, TokenCounter::O200k]
            .into_iter()
            .filter(|c| c.is_available())
        {
            let e = Estimator::new(counter);
            assert_eq!(
                e.message_tokens(&m),
                reference_tokens(&m, Measure::of(counter)),
                "{counter:?}: {m}"
            );
        }
        checked += 1;
    }
    assert!(checked > 3000);
}

#[test]
fn the_index_measures_lines_as_their_values_measure() {
    // The text of a line (duplicate keys, escapes, big numbers) and the value `JSON.parse`
    // makes of it give the same figures.
    let mut rng = Rng::new(12);
    let mut compared = 0;
    for _ in 0..150 {
        let text = oddlines::transcript(&mut rng, 30);
        for counter in [TokenCounter::Heuristic, TokenCounter::O200k]
            .into_iter()
            .filter(|c| c.is_available())
        {
            let est = Estimator::new(counter);
            let index = Index::from_reader_measuring(text.as_bytes(), Some(counter)).unwrap();
            assert_eq!(index.tokens.len(), index.entries.len());
            for (n, raw) in text.lines().enumerate() {
                let Some(i) = index.lines[n].entry() else {
                    continue;
                };
                let v = crate::jsjson::parse(raw.as_bytes()).unwrap();
                let from_index =
                    EntryFacts::from_index(&index.entries[i], index.tokens_of(i).unwrap());
                assert_eq!(from_index, EntryFacts::of(&v, &est), "{raw}");
                compared += 1;
            }
        }
    }
    // Over 2500 lines per counter (the BPE one only with the tiktoken feature).
    let counters = if cfg!(feature = "tiktoken") { 2 } else { 1 };
    assert!(compared > 2500 * counters, "{compared}");
}

#[test]
fn invalid_utf8_is_read_alike_measured_or_not_and_measured_as_the_runtime_reads_it() {
    let mut text = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n".to_vec();
    // Invalid bytes in a tool result's text (which only a measuring probe reads), and in an
    // assistant reply's text (which every probe reads: the line does not parse).
    text.extend_from_slice(b"{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"toolResult\",\"content\":[{\"type\":\"text\",\"text\":\"ok \xff\xfe done\"}]}}\n");
    text.extend_from_slice(b"{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\"}]}}\n");
    let plain = Index::from_reader(&text[..]).unwrap();
    let measured = Index::from_reader_measuring(&text[..], Some(TokenCounter::Heuristic)).unwrap();
    assert_eq!(plain.invalid_utf8, vec![1]);
    assert_eq!(plain.unparsable_line_numbers(), vec![3]);
    assert_eq!(measured.invalid_utf8, plain.invalid_utf8);
    assert_eq!(
        measured.unparsable_line_numbers(),
        plain.unparsable_line_numbers()
    );
    assert_eq!(measured.entries.len(), plain.entries.len());
    // "ok \u{fffd}\u{fffd} done": 10 UTF-16 units.
    assert_eq!(measured.tokens_of(1).unwrap().tokens, 3);
}

/// A generated session with contents of every shape the loader meets: replies, results and
/// other messages whose content is a plain string or an object, with and without usage, and
/// `custom_message` entries with string and block contents.
fn shaped_session(rng: &mut Rng) -> Vec<Value> {
    let turns = 1 + rng.below(6) as usize;
    let mut b = testgen::PathBuilder::random(rng, turns);
    for k in 0..1 + rng.below(10) {
        let role = testgen::ROLES[rng.below(testgen::ROLES.len() as u64) as usize];
        let with_usage = rng.chance(40);
        let mut m = testgen::shaped_message(rng, role, with_usage, k);
        // The runtime's estimator throws on an object content of a reply or a custom message
        // (the loader leaves it alone), which would leave the whole context uncompared.
        if matches!(role, "assistant" | "custom") && m["content"].is_object() {
            m["content"] = json!(rng.text(100));
        }
        b.message(m);
        if rng.chance(25) {
            let content = match rng.below(3) {
                0 => json!(rng.text(200)),
                1 => json!([{"type":"text","text":rng.text(200)},{"type":"image","data":"AAAA"}]),
                _ => json!([]),
            };
            b.push(
                "custom_message",
                json!({"customType":"note","content":content,"display":true}),
            );
        }
        if rng.chance(10) {
            let summary = rng.text(120);
            b.push(
                "branch_summary",
                json!({"summary":summary,"fromId":"e0001"}),
            );
        }
    }
    b.user("last");
    b.entries
}

#[test]
fn the_index_matches_the_runtime_on_generated_transcripts() {
    // The streaming path (each line measured while it is indexed) against the context the
    // runtime's SessionManager rebuilds from the same file, estimated by the runtime.
    let Some(dir) =
        testgen::require_oracle("estimate::the_index_matches_the_runtime_on_generated_transcripts")
    else {
        return;
    };
    let mut rng = Rng::new(21);
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..testgen::case_count(60) {
        let mut text =
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-02T09:00:00.000Z","cwd":"/"}"#
                .to_owned();
        for e in shaped_session(&mut rng) {
            text.push('\n');
            text.push_str(&crate::jsjson::to_string_compact(&e));
        }
        text.push('\n');
        let p = tmp.path().join(format!("t{i}.jsonl"));
        std::fs::write(&p, &text).unwrap();
        files.push((p, text));
    }
    let args: Vec<&std::path::Path> = files.iter().map(|(p, _)| p.as_path()).collect();
    let out = testgen::run_oracle_script(
        &dir,
        "estimate-tokens.mjs",
        std::iter::once(std::path::Path::new("--files")).chain(args),
    );
    let got: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(got.len(), files.len());
    let e = heur();
    let mut compared = 0;
    for ((_, text), reference) in files.iter().zip(&got) {
        let Some(want) = reference["context"]["tokens"].as_u64() else {
            continue;
        };
        let index = Index::from_reader_measuring(text.as_bytes(), Some(e.counter())).unwrap();
        let tree = crate::transcript::tree::Tree::build(&index);
        let ours = crate::compact::facts::context_estimate(&index, &tree, &e).unwrap();
        assert_eq!(ours.tokens, want, "{text}\n{reference}");
        assert_eq!(
            ours.last_usage_index,
            reference["context"]["lastUsageIndex"]
                .as_u64()
                .map(|i| i as usize),
            "{text}"
        );
        compared += 1;
    }
    assert!(
        compared * 10 >= files.len() * 9,
        "only {compared} of {} transcripts compared",
        files.len()
    );
}
