use serde_json::json;

use super::*;

#[test]
fn silent_reply_text_matches_the_runtime() {
    for t in [
        "NO_REPLY",
        " no_reply\n",
        "NO_REPLY NO_REPLY",
        "\"NO_REPLY\".",
        "…NO_REPLY!",
        "**NO_REPLY**",
    ] {
        assert!(is_silent_reply_text(t), "{t:?}");
    }
    for t in [
        "",
        "Done. NO_REPLY",
        "NO_REPLY: later",
        "`NO_REPLY`x",
        "~NO_REPLY~",
    ] {
        assert!(!is_silent_reply_text(t), "{t:?}");
    }
}

#[test]
fn heartbeat_token_stripping() {
    let s = strip_heartbeat_token("HEARTBEAT_OK", true, 300);
    assert_eq!((s.should_skip, s.did_strip), (true, true));
    let s = strip_heartbeat_token("**HEARTBEAT_OK**", true, 300);
    assert!(s.should_skip);
    let s = strip_heartbeat_token("All quiet. HEARTBEAT_OK!", false, 300);
    assert_eq!(
        (s.should_skip, s.text.as_ref(), s.did_strip),
        (false, "All quiet.!", true)
    );
    let s = strip_heartbeat_token("All quiet. HEARTBEAT_OK", true, 300);
    assert!(s.should_skip);
    let s = strip_heartbeat_token("<b>HEARTBEAT_OK</b> ok", false, 300);
    assert_eq!((s.text.as_ref(), s.did_strip), ("ok", true));
    let s = strip_heartbeat_token("HEARTBEAT_OK HEARTBEAT_OK done", false, 300);
    assert_eq!((s.text.as_ref(), s.did_strip), ("done", true));
    let s = strip_heartbeat_token("The HEARTBEAT_OK token is mid-text here", true, 300);
    assert_eq!((s.should_skip, s.did_strip), (false, false));
}

#[test]
fn meaningful_text_follows_the_classifier() {
    assert!(!has_meaningful_text("  "));
    assert!(!has_meaningful_text("NO_REPLY"));
    assert!(!has_meaningful_text("HEARTBEAT_OK"));
    assert!(has_meaningful_text("fix the bug"));
    // the default heartbeat prompt ends in "reply HEARTBEAT_OK." and so counts as meaningful
    let prompt = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";
    assert!(has_meaningful_text(prompt));
    assert!(is_heartbeat_prompt(
        &json!({"role":"user","content":prompt})
    ));
    assert!(is_heartbeat_prompt(
        &json!({"role":"user","content":[{"type":"text","text":format!("{prompt}\nextra")}]})
    ));
    assert!(!is_heartbeat_prompt(
        &json!({"role":"user","content":format!("{prompt} extra")})
    ));
}

#[test]
fn real_conversation_rules() {
    let user = json!({"role":"user","content":"please fix"});
    let img = json!({"role":"user","content":[{"type":"image","data":"x"}]});
    let think = json!({"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"toolCall","id":"a","name":"x","arguments":{}}]});
    let result =
        json!({"role":"toolResult","toolCallId":"a","content":[{"type":"text","text":"out"}]});
    let hidden = json!({"role":"custom","content":"note","display":false});
    let bash_hidden =
        json!({"role":"bashExecution","command":"ls","output":"x","excludeFromContext":true});
    assert!(is_real_conversation(&[&user], 0));
    assert!(
        is_real_conversation(&[&img], 0),
        "images count as non-text content"
    );
    assert!(!is_real_conversation(&[&think], 0));
    assert!(
        !is_real_conversation(&[&think, &result], 1),
        "no anchor before the result"
    );
    assert!(is_real_conversation(&[&user, &think, &result], 2));
    assert!(!is_real_conversation(&[&hidden], 0));
    assert!(!is_real_conversation(&[&bash_hidden], 0));
    let far: Vec<&Value> = std::iter::once(&user)
        .chain(std::iter::repeat_n(&think, 20))
        .chain([&result])
        .collect();
    assert!(
        !is_real_conversation(&far, 21),
        "anchor more than 20 messages back"
    );
}

#[test]
fn boilerplate_filter_and_detection() {
    let prompt = json!({"role":"user","content":"Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK."});
    let ack = json!({"role":"assistant","content":[{"type":"text","text":"HEARTBEAT_OK"}],"stopReason":"stop"});
    let silent = json!({"role":"assistant","content":[{"type":"thinking","thinking":"quiet"},{"type":"text","text":"NO_REPLY"}],"stopReason":"stop"});
    let exec = json!({"role":"user","content":"System (untrusted): [2026-03-02 10:00] Exec completed (abc, code 0)"});
    let real = json!({"role":"user","content":"deploy it"});
    let msgs = [&prompt, &ack, &prompt, &silent, &exec, &silent];
    let (kept, stats) = filter_boilerplate(&msgs);
    assert!(kept.is_empty());
    assert_eq!(
        stats,
        Boilerplate {
            heartbeat_exchanges: 2,
            silent_replies: 1,
            exec_events: 1
        }
    );
    assert!(!contains_real_conversation(&kept));
    let msgs = [&prompt, &ack, &real];
    let (kept, _) = filter_boilerplate(&msgs);
    assert!(contains_real_conversation(&kept));
    // a silent reply with a tool call or an error stop is not silent
    let call = json!({"role":"assistant","content":[{"type":"text","text":"NO_REPLY"},{"type":"toolCall","id":"a","name":"x","arguments":{}}]});
    assert!(!is_silent_reply(&call));
    let err = json!({"role":"assistant","content":[{"type":"text","text":"NO_REPLY"}],"stopReason":"error"});
    assert!(!is_silent_reply(&err));
}

#[test]
fn js_whitespace_helpers() {
    assert_eq!(js_trim("\u{feff}\u{a0} x \u{3000}"), "x");
    assert_eq!(collapse_space("a \n\t b  c"), "a b c");
}

/// Texts around the tokens: spacing, case, markup, punctuation, mixed content.
fn generated_texts(rng: &mut crate::compact::testgen::Rng) -> Vec<String> {
    const PARTS: &[&str] = &[
        "NO_REPLY",
        "no_reply",
        "No_RePlY",
        "NO",
        "_REPLY",
        "HEARTBEAT_OK",
        "heartbeat_ok",
        "HEARTBEAT",
        "_OK",
        " ",
        "\n",
        "\u{a0}",
        "\u{3000}",
        "**",
        "`",
        "~",
        "_",
        ".",
        "!",
        "…",
        "<b>",
        "</b>",
        "&nbsp;",
        "All quiet",
        "done",
        "x",
        "{\"action\":\"NO_REPLY\"}",
        "\"",
        "漢",
        "😀",
        "-",
        ":",
    ];
    (0..400)
        .map(|_| {
            let n = 1 + rng.below(6);
            (0..n)
                .map(|_| PARTS[rng.below(PARTS.len() as u64) as usize])
                .collect()
        })
        .collect()
}

#[test]
fn matches_reference_classifiers_on_generated_inputs() {
    use crate::compact::testgen::{self, Rng};
    let Some(dir) = testgen::require_oracle("classify::matches_reference_classifiers") else {
        return;
    };
    let mut rng = Rng::new(5);
    let texts = generated_texts(&mut rng);
    let conversations: Vec<Vec<Value>> = (0..testgen::case_count(40))
        .map(|_| {
            (0..1 + rng.below(30))
                .map(|i| {
                    let mut m = testgen::message(&mut rng, i);
                    // Sprinkle token texts into string contents and text blocks.
                    if rng.chance(40) {
                        let t = texts[rng.below(texts.len() as u64) as usize].clone();
                        if m["content"].is_string() {
                            m["content"] = json!(t);
                        } else if let Some(b) =
                            m["content"].as_array_mut().and_then(|a| a.first_mut())
                            && b["type"] == "text"
                        {
                            b["text"] = json!(t);
                        }
                    }
                    m
                })
                .collect()
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.json");
    std::fs::write(
        &input,
        serde_json::to_string(&json!({"texts": texts, "conversations": conversations})).unwrap(),
    )
    .unwrap();
    let out = testgen::run_oracle_script(&dir, "classify.mjs", [&input]);
    let want: Value = serde_json::from_slice(&out).unwrap();
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(
            json!(is_silent_reply_text(t)),
            want["silent"][i],
            "silent {t:?}"
        );
        for (mode, heartbeat) in [("heartbeat", true), ("message", false)] {
            let got = strip_heartbeat_token(t, heartbeat, 300);
            let w = &want[mode][i];
            assert_eq!(
                (
                    json!(got.should_skip),
                    json!(got.text),
                    json!(got.did_strip)
                ),
                (
                    w["shouldSkip"].clone(),
                    w["text"].clone(),
                    w["didStrip"].clone()
                ),
                "{mode} {t:?}"
            );
        }
    }
    for (c, msgs) in conversations.iter().enumerate() {
        let refs: Vec<&Value> = msgs.iter().collect();
        for i in 0..msgs.len() {
            assert_eq!(
                json!(is_real_conversation(&refs, i)),
                want["real"][c][i],
                "{}",
                msgs[i]
            );
        }
    }
}
