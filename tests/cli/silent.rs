//! The silent-reply rule against the reference runtime's own functions: generated texts
//! (spellings of the token, glued tokens, whitespace, punctuation and symbols of many Unicode
//! categories, JSON strings and envelopes, reasoning prefixes, reply tags and other
//! directives, other words), generated assistant contents (text blocks joined as the runtime
//! sends them, thinking blocks), and every code point before and after the token, each
//! release evaluating all of them in one Node process. A reply is silent when both 2026.7.1
//! and 2026.7.35 drop it as silent.

use serde_json::{Value, json};

use clawkeeper::noreply::{is_silent_blocks, is_silent_payload_text, is_silent_reply_text};

use crate::generator::Rng;
use crate::util::{EXTENDED, SQLITE_RELEASES, STABLE, oracle_of};

const TOKENS: &[&str] = &[
    "NO_REPLY",
    "NO_REPLY",
    "no_reply",
    "No_Reply",
    "nO_rEpLy",
    "NO_REPLY NO_REPLY",
    "NO_REPLY\nno_reply",
    "NO_REPLYNO_REPLY",
    "NO_REPLYno_reply",
    "NO_REPLYNO_REPLY NO_REPLY",
    "NO_REPLY.NO_REPLY",
    "NO_REPLY*NO_REPLY",
    "NO_REPLY\n*NO_REPLY",
    "NO_REPLY **NO_REPLY",
    "NO_REPLY NO_REPLYx",
    "HEARTBEAT_OK NO_REPLY",
    "NO REPLY",
    "NOREPLY",
    "NO_",
    "_REPLY",
    "NO",
    "REPLY",
    "NO_REPLYx",
    "N\u{200b}O_REPLY",
    "NO_REPLY_",
];
const SPACES: &[&str] = &[
    " ", "  ", "\n", "\r\n", "\t", "\u{b}", "\u{c}", "\u{a0}", "\u{1680}", "\u{2000}", "\u{200a}",
    "\u{2028}", "\u{2029}", "\u{202f}", "\u{205f}", "\u{3000}", "\u{feff}",
    // Not ECMAScript whitespace:
    "\u{85}", "\u{200b}", "\u{180e}", "\u{2060}",
];
/// `\p{P}` of several kinds: Pc, Pd, Ps, Pe, Pi, Pf, Po, and U+10ED0 (new in Unicode 17).
const PUNCT: &[&str] = &[
    ".",
    "!",
    "?",
    ",",
    ";",
    ":",
    "\"",
    "'",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "*",
    "**",
    "_",
    "-",
    "…",
    "«",
    "»",
    "¡",
    "¿",
    "“",
    "”",
    "‘",
    "’",
    "、",
    "。",
    "「",
    "」",
    "‐",
    "—",
    "§",
    "¶",
    "@",
    "#",
    "%",
    "&",
    "/",
    "\\",
    "·",
    "〜",
    "！",
    "＿",
    "‿",
    "⁀",
    "\u{10ed0}",
    "\u{1e95e}",
];
/// Symbols (Sm, Sc, Sk, So) and other characters that are not `\p{P}`.
const SYMBOLS: &[&str] = &[
    "`", "~", "~~", "$", "+", "<", ">", "^", "|", "=", "©", "°", "¬", "±", "€", "™", "😀",
    "\u{301}", "0", "x", "漢", "\u{212a}", "\u{17f}",
];
const JSON_FORMS: &[&str] = &[
    "\"NO_REPLY\"",
    "\" NO_REPLY \"",
    "\"no_reply\"",
    "\"NO_REPLY\\n\"",
    "\"NO_REPLY\\t\\u00a0\"",
    "\"\\u004eO_REPLY\"",
    "\"NO_REPLY\\\"\"",
    "\"NO_REPLY",
    "{\"action\":\"NO_REPLY\"}",
    "{ \"action\" : \" NO_REPLY \" }",
    "{\n  \"action\": \"NO_REPLY\"\n}",
    "{\"action\":\"no_reply\"}",
    "{\"action\":\"NO_REPLY\",\"x\":1}",
    "{\"Action\":\"NO_REPLY\"}",
    "{\"action\":\"x\",\"action\":\"NO_REPLY\"}",
    "{\"action\":\"NO_REPLY\",\"action\":\"x\"}",
    "{\"action\":[\"NO_REPLY\"]}",
    "{\"action\":\"NO_REPLY\"",
    "[\"NO_REPLY\"]",
    "{\"action\":\"NO_REPLY\\u0000\"}",
];
/// Reply directives: the tags the delivery path takes out, malformed ones it leaves, and
/// directives this tool does not read (audio, reactions, media lines).
const DIRECTIVES: &[&str] = &[
    "[[reply_to_current]]",
    "[[reply_to_current]] ",
    "[[ Reply_To_Current ]]",
    "[[reply_to:1234]]",
    "[[reply_to: msg-9 ]]",
    "[[reply_to:NO_REPLY]]",
    "[[reply_to:]]",
    "[[reply_to_current]",
    "[reply_to_current]]",
    "[[reply_to:a\nb]]",
    "[[audio_as_voice]]",
    "[[react:👍]]",
    "MEDIA: ./x.png\n",
    "\t",
    "\t\t",
    "```\n",
];
/// Whether a text holds a directive this tool does not read, or a reply tag beside what may
/// be a code block: the runtime may drop such a reply as silent while this tool keeps it,
/// never the other way round.
fn unread_directive(t: &str) -> bool {
    let l = t.to_lowercase();
    let code = ["```", "~~~", "\n\t", "\n    "]
        .iter()
        .any(|c| l.contains(c))
        || l.starts_with('\t')
        || l.starts_with("    ");
    l.contains("audio_as_voice")
        || l.contains("[[react")
        || l.contains("media:")
        || l.contains("[[") && l.contains("reply_to") && code
}
const REASONING: &[&str] = &[
    "<think>",
    "</think>",
    "<thinking>nothing to add</thinking>",
    "<think>a\nb</think>\n",
    "< antml:thinking x=1 >quiet</thinking>",
    "<thought>",
    "<mm:think>",
    "<antthinking>",
    "<thinker>",
    "thinking:\n",
    "Thinking\n",
    "analysis:\r\n",
    "reasoning \n",
    "thought:",
    "thin\u{212a}:\n",
    "analy\u{17f}is\n",
];
const WORDS: &[&str] = &[
    "Done",
    "ok",
    "hello",
    "I'll stay quiet",
    "I will not reply here.",
    "We have nothing to say",
    "The assistant will remain silent for now",
    "bot won't respond",
    "Here's the answer",
    "please",
    "internal reasoning notes",
    "thoughts",
    "I will \u{17f}tay quiet",
    "x",
    "漢字",
    "HEARTBEAT_OK",
    "NO_REPLY: later",
    "Done. NO_REPLY",
];

fn one(rng: &mut Rng, items: &[&'static str]) -> &'static str {
    items[rng.below(items.len())]
}

fn piece(rng: &mut Rng) -> &'static str {
    let group: &[&str] = match rng.below(11) {
        0..=2 => TOKENS,
        10 => DIRECTIVES,
        3 | 4 => SPACES,
        5 | 6 => PUNCT,
        7 => SYMBOLS,
        8 => JSON_FORMS,
        _ if rng.chance(50) => REASONING,
        _ => WORDS,
    };
    one(rng, group)
}

fn edge(rng: &mut Rng) -> String {
    (0..rng.below(4))
        .map(|_| match rng.below(5) {
            0 | 1 => one(rng, PUNCT),
            2 => one(rng, SYMBOLS),
            _ => one(rng, SPACES),
        })
        .collect()
}

/// A text: either loose pieces, or a token-ish core with edges, an optional reasoning prefix
/// and an optional word before the token (so that a good share of them are silent).
fn text(rng: &mut Rng) -> String {
    if rng.chance(40) {
        return (0..1 + rng.below(6)).map(|_| piece(rng)).collect();
    }
    let mut t = String::new();
    if rng.chance(20) {
        t += one(rng, REASONING);
        if rng.chance(50) {
            t += one(rng, WORDS);
            t += one(rng, &[" ", ". ", "\n", "*", ""]);
        }
    }
    if rng.chance(20) {
        t += one(rng, DIRECTIVES);
    }
    t += &edge(rng);
    t += if rng.chance(10) {
        one(rng, JSON_FORMS)
    } else {
        one(rng, TOKENS)
    };
    t += &edge(rng);
    if rng.chance(10) {
        t += one(rng, DIRECTIVES);
        t += one(rng, TOKENS);
    }
    t
}

/// An assistant content: a string, or text blocks (some blank) and thinking blocks.
fn content(rng: &mut Rng, texts: &[String]) -> Value {
    if rng.chance(15) {
        return json!(rng.pick(texts));
    }
    let blocks: Vec<Value> = (0..1 + rng.below(4))
        .map(|_| match rng.below(6) {
            0 => json!({"type":"thinking","thinking":"quiet","thinkingSignature":"s"}),
            1 => json!({"type":"text","text": one(rng, &["", " ", "\n", "(", ").", "`", "**"])}),
            2 | 3 => json!({"type":"text","text": one(rng, TOKENS)}),
            _ => json!({"type":"text","text": rng.pick(texts)}),
        })
        .collect();
    json!(blocks)
}

fn silent_content(content: &Value) -> bool {
    match content {
        Value::String(s) => clawkeeper::noreply::is_silent_text(s),
        Value::Array(blocks) => is_silent_blocks(
            blocks
                .iter()
                .map(|b| (b["type"].as_str(), b["text"].as_str())),
        ),
        _ => false,
    }
}

/// The runtime's answers: each release's, and `dropped` and `content` as both releases agree
/// (silent only when both drop it).
fn runtime_answers(input: &std::path::Path) -> Option<Value> {
    let mut all = Vec::new();
    for release in [STABLE, EXTENDED] {
        let o = oracle_of(release)?;
        let v: Value = serde_json::from_slice(&o.run_script("silent.mjs", [input])).unwrap();
        all.push(v);
    }
    let mut want = all[0].clone();
    for key in ["dropped", "content"] {
        let both: Vec<bool> = (0..want[key].as_array().unwrap().len())
            .map(|i| all.iter().all(|v| v[key][i] == true))
            .collect();
        want[key] = json!(both);
    }
    for key in ["text", "payload", "before", "after"] {
        assert_eq!(all[0][key], all[1][key], "{key}: the releases differ");
    }
    Some(want)
}

#[test]
fn silent_rule_matches_the_runtime_on_generated_texts() {
    let mut rng = Rng::new(167);
    let texts: Vec<String> = (0..4000).map(|_| text(&mut rng)).collect();
    let contents: Vec<Value> = (0..1500).map(|_| content(&mut rng, &texts)).collect();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.json");
    std::fs::write(
        &input,
        serde_json::to_vec(&json!({"texts": texts, "contents": contents})).unwrap(),
    )
    .unwrap();
    let Some(want) = runtime_answers(&input) else {
        return;
    };

    let mut wrong = Vec::new();
    let mut silent = 0;
    // Texts silent through a reply tag, a glued or a final token (not a payload text).
    let mut silent_beyond_payload = 0;
    for (i, t) in texts.iter().enumerate() {
        let (text, payload) = (want["text"][i] == true, want["payload"][i] == true);
        silent += usize::from(payload);
        if is_silent_reply_text(t) != text {
            wrong.push(format!("isSilentReplyText {t:?}: runtime {text}"));
        }
        if is_silent_payload_text(t) != payload {
            wrong.push(format!("isSilentReplyPayloadText {t:?}: runtime {payload}"));
        }
        let dropped = want["dropped"][i] == true;
        let ours = clawkeeper::noreply::is_silent_text(t);
        if ours != dropped && (ours || !unread_directive(t)) {
            wrong.push(format!("dropped {t:?}: runtime {dropped}"));
        }
        if ours {
            silent_beyond_payload += usize::from(!payload);
        }
    }
    let mut silent_contents = 0;
    for (i, c) in contents.iter().enumerate() {
        let w = want["content"][i] == true;
        silent_contents += usize::from(w);
        let ours = silent_content(c);
        let joined = match c {
            Value::String(t) => t.clone(),
            _ => c
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        if ours != w && (ours || !unread_directive(&joined)) {
            wrong.push(format!("content {c}: runtime {w}"));
        }
    }
    // Every code point right before and right after the token: the runtime's answer for all
    // of them; ours for those it calls silent, all of planes 0 and 1 (where punctuation and
    // whitespace live) and a sample of the rest.
    for (key, at_start) in [("before", true), ("after", false)] {
        let runtime: std::collections::BTreeSet<u32> = want[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let sweep = (0..0x2_0000u32).chain((0x2_0000..0x11_0000).step_by(97));
        for c in runtime
            .iter()
            .copied()
            .chain(sweep)
            .filter_map(char::from_u32)
        {
            let t = if at_start {
                format!("{c}NO_REPLY")
            } else {
                format!("NO_REPLY{c}")
            };
            let ours = is_silent_payload_text(&t);
            if ours != runtime.contains(&u32::from(c)) {
                wrong.push(format!("{key} U+{:04X}: ours {ours}", u32::from(c)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Enough of both answers to mean something.
    assert!(
        silent > 250 && texts.len() - silent > 400,
        "{silent} of {} silent",
        texts.len()
    );
    assert!(
        silent_contents > 100 && contents.len() - silent_contents > 100,
        "{silent_contents}"
    );
    assert!(silent_beyond_payload > 50, "{silent_beyond_payload}");
    // The SQLite-era releases (prune-noreply also edits their agents' transcript rows) drop
    // every reply this rule calls silent.
    for release in SQLITE_RELEASES {
        let Some(o) = oracle_of(release) else {
            continue;
        };
        let theirs: Value = serde_json::from_slice(&o.run_script("silent.mjs", [&input])).unwrap();
        let v = release.version;
        for (i, t) in texts.iter().enumerate() {
            if clawkeeper::noreply::is_silent_text(t) && theirs["dropped"][i] != true {
                wrong.push(format!("{v} delivers {t:?}"));
            }
        }
        for (i, c) in contents.iter().enumerate() {
            if silent_content(c) && theirs["content"][i] != true {
                wrong.push(format!("{v} delivers content {c}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    eprintln!(
        "compared {} texts ({silent} silent payloads, {silent_beyond_payload} more dropped), {} \
         contents ({silent_contents} silent)",
        texts.len(),
        contents.len()
    );
}

/// A version-2 transcript's `hookMessage` (the runtime migrates the role to `custom` on load,
/// `migrateV2ToV3`, and replays it as a message) is never a silent reply, whatever its text,
/// and it ends a run of silent replies; reply tags and glued tokens make replies silent. The
/// runtime's context of the pruned file is its context of the original minus exactly the
/// removed reply, in both releases.
#[test]
fn hook_messages_break_runs_and_tagged_replies_count() {
    use crate::util::{TestEnv, same_loads};
    let env = TestEnv::new();
    let line = |id: &str, parent: Option<&str>, message: Value| {
        json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-01T00:00:01.000Z",
               "message":message})
        .to_string()
    };
    let reply = |text: &str| {
        json!({"role":"assistant","content":[{"type":"text","text":text}],
        "stopReason":"stop","timestamp":1})
    };
    let lines = [
        json!({"type":"session","version":2,"id":"s2","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"})
            .to_string(),
        line("u1", None, json!({"role":"user","content":"hi","timestamp":1})),
        line("a1", Some("u1"), reply("NO_REPLY")),
        line("h1", Some("a1"), json!({"role":"hookMessage","content":"NO_REPLY","timestamp":1})),
        line("a2", Some("h1"), reply("[[reply_to_current]] NO_REPLY")),
        line("a3", Some("a2"), reply("NO_REPLYNO_REPLY")),
        line("h2", Some("a3"), json!({"role":"hookMessage","content":[{"type":"text","text":"NO_REPLY"}],"timestamp":1})),
        line("h3", Some("h2"), json!({"role":"hookMessage","content":"NO_REPLY","timestamp":1})),
        line("u2", Some("h3"), json!({"role":"user","content":"bye","timestamp":1})),
    ];
    let text = lines.join("\n") + "\n";
    let before = env.write("before.jsonl", text.as_bytes());
    let after = env.write("after.jsonl", text.as_bytes());
    let (code, report) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        after.to_str().unwrap(),
        "--keep",
        "1",
        "--enforce",
    ]);
    assert_eq!(code, 0, "{report}");
    // a1 starts a run that h1 ends; a2 starts the next, a3 follows it; the hook messages
    // after a3 are not replies (h3 is also the last line).
    assert_eq!(
        report["transcripts"][0]["entriesRemoved"],
        json!(1),
        "{report}"
    );
    let written = std::fs::read_to_string(&after).unwrap();
    assert!(!written.contains("\"a3\""), "{written}");
    assert_eq!(written.lines().count(), lines.len() - 1);
    for id in ["a1", "h1", "a2", "h2", "h3"] {
        assert!(written.contains(&format!("\"id\":\"{id}\"")), "{id} went");
    }
    let files = [before, after];
    let mut first = None;
    for release in [STABLE, EXTENDED] {
        let Some(o) = oracle_of(release) else { return };
        let loaded = o.load_all(&files);
        let (old, new) = (&loaded[0], &loaded[1]);
        assert!(old.ok && new.ok, "{:?} {:?}", old.error, new.error);
        let roles = |m: &Value| -> Vec<String> {
            m.as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            roles(&old.messages),
            [
                "user",
                "assistant",
                "custom",
                "assistant",
                "assistant",
                "custom",
                "custom",
                "user"
            ],
            "{}: the hook messages are replayed as custom messages",
            release.version
        );
        let mut expect = old.messages.as_array().unwrap().clone();
        expect.remove(4);
        assert_eq!(new.messages, json!(expect), "{}", release.version);
        assert_eq!(new.leaf_id, json!("u2"));
        match &first {
            None => first = Some(loaded),
            Some(want) => same_loads(want, &loaded, &files, release),
        }
    }
}
