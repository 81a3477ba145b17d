//! The silent-reply rule against the reference runtime's own functions: generated texts
//! (spellings of the token, whitespace, punctuation and symbols of many Unicode categories,
//! JSON strings and envelopes, reasoning prefixes, other words), generated assistant contents
//! (text blocks joined as the runtime sends them, thinking blocks), and every code point
//! before and after the token, all evaluated in one Node process.

use serde_json::{Value, json};

use clawkeeper::noreply::{is_silent_blocks, is_silent_payload_text, is_silent_reply_text};

use crate::generator::Rng;
use crate::util::oracle;

const TOKENS: &[&str] = &[
    "NO_REPLY",
    "NO_REPLY",
    "no_reply",
    "No_Reply",
    "nO_rEpLy",
    "NO_REPLY NO_REPLY",
    "NO_REPLY\nno_reply",
    "NO_REPLYNO_REPLY",
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
    let group: &[&str] = match rng.below(10) {
        0..=2 => TOKENS,
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
    t += &edge(rng);
    t += if rng.chance(10) {
        one(rng, JSON_FORMS)
    } else {
        one(rng, TOKENS)
    };
    t += &edge(rng);
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

#[test]
fn silent_rule_matches_the_runtime_on_generated_texts() {
    let Some(o) = oracle() else { return };
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
    let want: Value = serde_json::from_slice(&o.run_script("silent.mjs", [&input])).unwrap();

    let mut wrong = Vec::new();
    let mut silent = 0;
    for (i, t) in texts.iter().enumerate() {
        let (text, payload) = (want["text"][i] == true, want["payload"][i] == true);
        silent += usize::from(payload);
        if is_silent_reply_text(t) != text {
            wrong.push(format!("isSilentReplyText {t:?}: runtime {text}"));
        }
        if is_silent_payload_text(t) != payload {
            wrong.push(format!("isSilentReplyPayloadText {t:?}: runtime {payload}"));
        }
    }
    let mut silent_contents = 0;
    for (i, c) in contents.iter().enumerate() {
        let w = want["content"][i] == true;
        silent_contents += usize::from(w);
        if silent_content(c) != w {
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
        silent > 400 && texts.len() - silent > 400,
        "{silent} of {} silent",
        texts.len()
    );
    assert!(
        silent_contents > 100 && contents.len() - silent_contents > 100,
        "{silent_contents}"
    );
    eprintln!(
        "compared {} texts ({silent} silent), {} contents ({silent_contents} silent)",
        texts.len(),
        contents.len()
    );
}
