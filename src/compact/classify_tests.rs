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
        (s.should_skip, s.text.as_str(), s.did_strip),
        (false, "All quiet.!", true)
    );
    let s = strip_heartbeat_token("All quiet. HEARTBEAT_OK", true, 300);
    assert!(s.should_skip);
    let s = strip_heartbeat_token("<b>HEARTBEAT_OK</b> ok", false, 300);
    assert_eq!((s.text.as_str(), s.did_strip), ("ok", true));
    let s = strip_heartbeat_token("HEARTBEAT_OK HEARTBEAT_OK done", false, 300);
    assert_eq!((s.text.as_str(), s.did_strip), ("done", true));
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
