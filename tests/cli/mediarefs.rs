//! Media references in old turns (`strip-images`), against the reference runtime's own code:
//!
//! - the text rule (`clawkeeper::mediarefs::prune_text`) against `pruneHistoryMediaReferenceText`
//!   on generated texts, and on every code point in each position where the patterns' character
//!   classes, case folding and word boundary decide;
//! - the whole planner on generated linear transcripts against `pruneProcessedHistoryImages`
//!   on their messages (images and text, same turn boundary);
//! - a stripped file loaded by the runtime's session loader: old turns carry the marker, recent
//!   turns are untouched, the runtime's prune of it is the runtime's prune of the original, and
//!   it still takes an appended message.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use clawkeeper::images;
use clawkeeper::jsjson;
use clawkeeper::mediarefs::{MARKER, Scrub, prune_text, scrub};
use clawkeeper::transcript::Index;
use clawkeeper::transcript::rewrite;
use clawkeeper::transcript::tree::Tree;
use serde_json::{Value, json};

use crate::generator::Rng;
use crate::util::{self, EXTENDED, STABLE, TestEnv, oracle_of};

const FRAGMENTS: &[&str] = &[
    "[media attached",
    "[MEDIA ATTACHED",
    "[Media Attached",
    "[media attached: ",
    "[media attached 2/3: ",
    " ",
    "  ",
    "\t",
    "\n",
    "\u{a0}",
    "\u{85}",
    "\u{feff}",
    "\u{2028}",
    "\u{200b}",
    "\u{3000}",
    "1",
    "12",
    "/",
    " 1/2",
    "3/4",
    "\u{661}",
    ":",
    ": ",
    "]",
    "[",
    "x",
    "é",
    "_",
    "a.png",
    " (image/png)",
    "[Image:",
    "[image:",
    "[IMAGE: ",
    "[Image: source: ",
    "source:",
    "SOURCE: ",
    "ſource:",
    "İmage",
    "ı",
    "media://inbound/",
    "media://inbound/abc.jpg",
    "Media://inbound/",
    "media:/inbound/",
    "\\",
    "🙂",
    "look at this ",
];

fn text(rng: &mut Rng) -> String {
    (0..1 + rng.below(12))
        .map(|_| *rng.pick(FRAGMENTS))
        .collect()
}

/// Templates whose `{c}` sits where a character class, the case folding or the word boundary
/// decides (the runtime answers for every code point); `all` ones are checked over plane 0 and
/// a sample of the rest, the others (a letter of a pattern replaced) over the runtime's answer,
/// every code point of planes 0 and 1 whose case mapping touches ASCII, and a sample.
fn templates() -> Vec<(String, bool)> {
    let mut t: Vec<(String, bool)> = [
        "[media attached{c}1/2: x]",
        "[media attached {c}/2: x]",
        "[media attached 1/2:{c}]",
        "[media attached: {c}]",
        "[Image:{c}source: x]",
        "[Image: source:{c}x]",
        "media://inbound/{c}",
        "{c}media://inbound/x",
        "media://inbound/a{c}",
    ]
    .iter()
    .map(|s| (s.to_string(), true))
    .collect();
    for word in ["[media attached: x]", "[Image: source: x]"] {
        let end = word.rfind(':').unwrap();
        for (i, ch) in word[..end].char_indices() {
            if ch.is_ascii_alphabetic() {
                t.push((format!("{}{{c}}{}", &word[..i], &word[i + 1..]), false));
            }
        }
    }
    t
}

/// Run `tests/oracle/history-prune.mjs` on `input`.
fn run_script(o: &util::Oracle, input: &Value) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("in.json");
    std::fs::write(&path, serde_json::to_vec(input).unwrap()).unwrap();
    serde_json::from_slice(&o.run_script("history-prune.mjs", [&path])).unwrap()
}

#[test]
fn media_reference_rule_matches_the_runtime_on_texts_and_code_points() {
    for release in [STABLE, EXTENDED] {
        if let Some(o) = oracle_of(release) {
            media_reference_rule_matches(&o);
        }
    }
}

fn media_reference_rule_matches(o: &util::Oracle) {
    let mut rng = Rng::new(1601);
    let texts: Vec<String> = (0..6000).map(|_| text(&mut rng)).collect();
    let templates = templates();
    let want = run_script(
        o,
        &json!({"texts": texts, "sweeps": templates.iter().map(|t| &t.0).collect::<Vec<_>>()}),
    );
    assert_eq!(want["marker"], MARKER);
    let mut wrong = Vec::new();
    let mut changed = 0;
    for (t, w) in texts.iter().zip(want["texts"].as_array().unwrap()) {
        let ours = prune_text(t).0;
        changed += usize::from(ours != t.as_str());
        if ours != w.as_str().unwrap() {
            wrong.push(format!("{t:?}: runtime {w}, ours {ours:?}"));
        }
    }
    let mut checked = 0usize;
    for ((template, all), ranges) in templates.iter().zip(want["sweeps"].as_array().unwrap()) {
        let runtime: BTreeSet<u32> = ranges
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r[0].as_u64().unwrap() as u32..=r[1].as_u64().unwrap() as u32)
            .collect();
        let (pre, post) = template.split_once("{c}").unwrap();
        let candidates: Box<dyn Iterator<Item = u32>> = if *all {
            Box::new((0..0x1_0000u32).chain((0x1_0000..0x11_0000).step_by(97)))
        } else {
            let touches_ascii = |c: char| {
                c.to_lowercase()
                    .chain(c.to_uppercase())
                    .any(|x| x.is_ascii())
            };
            let near: Vec<u32> = (0..0x2_0000u32)
                .filter(|&c| char::from_u32(c).is_some_and(touches_ascii))
                .collect();
            Box::new(
                runtime
                    .iter()
                    .copied()
                    .chain(near)
                    .chain((0..0x11_0000).step_by(1009))
                    .collect::<BTreeSet<u32>>()
                    .into_iter(),
            )
        };
        for c in candidates.filter_map(char::from_u32) {
            let s = format!("{pre}{c}{post}");
            let ours = prune_text(&s).1 > 0;
            checked += 1;
            if ours != runtime.contains(&(c as u32)) {
                wrong.push(format!(
                    "{template} with U+{:04X}: runtime {}, ours {ours}",
                    c as u32,
                    runtime.contains(&(c as u32))
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(30)].join("\n")
    );
    assert!(changed > 800, "generator too tame: {changed}");
    eprintln!(
        "media references: {} texts ({changed} changed) and {checked} code point cases agree with the runtime",
        texts.len()
    );
}

/// A linear transcript of generated messages: user (string or blocks, with images), assistant
/// replies (some with tool calls) and tool results.
fn messages(rng: &mut Rng, ts: &mut u64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stamp = || {
        *ts += 1;
        *ts
    };
    for _ in 0..2 + rng.below(9) {
        let user = if rng.chance(40) {
            json!(text(rng))
        } else {
            let mut blocks = Vec::new();
            for _ in 0..1 + rng.below(3) {
                blocks.push(match rng.below(4) {
                    0 => json!({"type":"image","data":"QUJD","mimeType":"image/png"}),
                    1 => json!({"text": text(rng), "type":"text", "cache": true}),
                    _ => json!({"type":"text","text": text(rng)}),
                });
            }
            Value::Array(blocks)
        };
        out.push(json!({"role":"user","content":user,"timestamp":stamp()}));
        if rng.chance(40) {
            out.push(json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"stopReason":"toolUse","timestamp":stamp()}));
            let content = if rng.chance(30) {
                json!(text(rng))
            } else {
                json!([{"type":"text","text":text(rng)},{"type":"image","data":"QUJD","mimeType":"image/png"}])
            };
            out.push(json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":content,"isError":false,"timestamp":stamp()}));
        }
        if rng.chance(85) {
            out.push(json!({"role":"assistant","content":[{"type":"text","text":text(rng)}],"stopReason":"stop","timestamp":stamp()}));
        }
    }
    out
}

fn jsonl(msgs: &[Value]) -> String {
    let mut lines = vec![
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#
            .to_string(),
    ];
    let mut parent = Value::Null;
    for (i, m) in msgs.iter().enumerate() {
        let id = format!("e{i}");
        lines.push(jsjson::to_string_compact(
            &json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-01T00:00:00.000Z","message":m}),
        ));
        parent = json!(id);
    }
    lines.join("\n") + "\n"
}

/// What `strip-images --keep-turns 3` writes for `text` (through the library: plan, resolve,
/// apply), and the messages of the result.
fn stripped(text: &str) -> (String, Vec<Value>) {
    let index = Index::from_reader(text.as_bytes()).unwrap();
    let tree = Tree::build(&index);
    let planned = images::planned(&index, &tree, 3).unwrap();
    let resolved = rewrite::resolve(&index, &tree, planned.edits.clone()).unwrap();
    let mut out = Vec::new();
    rewrite::apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let msgs = out
        .lines()
        .skip(1)
        .map(|l| jsjson::parse(l.as_bytes()).unwrap()["message"].clone())
        .collect();
    (out, msgs)
}

/// Whether some text of the old messages is one `scrub` leaves because it does not settle.
fn has_unsettled(msgs: &[Value]) -> bool {
    let unsettled = |t: &Value| {
        t.as_str()
            .is_some_and(|s| matches!(scrub(s), Scrub::Unsettled(_)))
    };
    msgs.iter().any(|m| match &m["content"] {
        Value::Array(blocks) => blocks
            .iter()
            .any(|b| b["type"] == "text" && unsettled(&b["text"])),
        c => unsettled(c),
    })
}

#[test]
fn stripped_messages_are_what_the_runtime_prunes_them_to() {
    for release in [STABLE, EXTENDED] {
        if let Some(o) = oracle_of(release) {
            stripped_messages_are_pruned_alike(&o);
        }
    }
}

fn stripped_messages_are_pruned_alike(o: &util::Oracle) {
    let mut rng = Rng::new(1602);
    let mut ts = 0;
    let originals: Vec<Vec<Value>> = (0..600).map(|_| messages(&mut rng, &mut ts)).collect();
    let ours: Vec<Vec<Value>> = originals.iter().map(|m| stripped(&jsonl(m)).1).collect();
    let contexts: Vec<&Vec<Value>> = originals.iter().chain(&ours).collect();
    let want = run_script(o, &json!({ "contexts": contexts }));
    let runtime = want["contexts"].as_array().unwrap();
    let (pruned_orig, pruned_ours) = runtime.split_at(originals.len());
    let (mut same, mut unsettled, mut touched) = (0, 0, 0);
    let compact = |v: &Value| jsjson::to_string_compact(v);
    for (i, orig) in originals.iter().enumerate() {
        touched += usize::from(compact(&json!(orig)) != compact(&json!(ours[i])));
        // What the runtime replays of the stripped file is what it replays of the original.
        assert_eq!(
            compact(&pruned_ours[i]),
            compact(&pruned_orig[i]),
            "case {i}: the runtime prunes the stripped messages differently\n{}",
            jsonl(orig)
        );
        // And the stripped file already holds it, except for texts left unsettled.
        if compact(&json!(ours[i])) == compact(&pruned_orig[i]) {
            same += 1;
        } else {
            assert!(
                has_unsettled(orig),
                "case {i}: stripped differently\n{}",
                jsonl(orig)
            );
            unsettled += 1;
        }
    }
    assert!(touched > 200, "generator too tame: {touched}");
    eprintln!(
        "history prune: {} transcripts ({touched} stripped), {same} exactly as the runtime prunes them, {unsettled} with unsettled text left",
        originals.len()
    );
}

#[test]
fn a_stripped_transcript_loads_replays_and_appends_in_the_runtime() {
    let env = TestEnv::new();
    // Five turns: a string content, a tool round with text blocks and an image, then recent
    // turns with references that must stay.
    let msgs = vec![
        json!({"role":"user","content":"[media attached: /tmp/in/a.png (image/png)] what is this?","timestamp":1}),
        json!({"role":"assistant","content":[{"type":"text","text":"A cat."}],"stopReason":"stop","timestamp":2}),
        json!({"role":"user","content":[{"type":"text","text":"[media attached 1/2: media://inbound/b.jpg]\n[media attached 2/2: media://inbound/c.jpg]"},{"type":"image","data":"QUJD","mimeType":"image/jpeg"}],"timestamp":3}),
        json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"d.png"}}],"stopReason":"toolUse","timestamp":4}),
        json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"[Image: source: /w/d.png]"}],"isError":false,"timestamp":5}),
        json!({"role":"assistant","content":[{"type":"text","text":"Two dogs, media://inbound/b.jpg."}],"stopReason":"stop","timestamp":6}),
        json!({"role":"user","content":"again media://inbound/e.png","timestamp":7}),
        json!({"role":"assistant","content":"ok","stopReason":"stop","timestamp":8}),
        json!({"role":"user","content":"[media attached: /tmp/in/f.png]","timestamp":9}),
        json!({"role":"assistant","content":"ok","stopReason":"stop","timestamp":10}),
        json!({"role":"user","content":[{"type":"text","text":"[Image: source: /w/g.png]"}],"timestamp":11}),
        json!({"role":"assistant","content":"ok","stopReason":"stop","timestamp":12}),
    ];
    let text = jsonl(&msgs);
    let file = env.write("t.jsonl", text.as_bytes());
    let before = env.write("before.jsonl", text.as_bytes());
    let f = file.to_str().unwrap();
    let (_, inspected) = env.run_json(&["inspect", "--transcript", f]);
    let t = &inspected["transcript"];
    assert_eq!(t["mediaReferences"], 7, "{inspected}");
    let (code, report) = env.run_json(&[
        "strip-images",
        "--transcript",
        f,
        "--keep-turns",
        "3",
        "--enforce",
    ]);
    assert_eq!(code, 0, "{report}");
    let r = &report["transcripts"][0];
    assert_eq!(r["imagesReplaced"], 1, "{report}");
    assert_eq!(r["mediaReferencesReplaced"], 4, "{report}");
    assert_eq!(report["totals"]["mediaReferencesReplaced"], 4, "{report}");
    let freed = r["bytesBefore"].as_i64().unwrap() - r["bytesAfter"].as_i64().unwrap();
    assert_eq!(
        t["reclaimable"]["strip-images"].as_i64().unwrap(),
        freed,
        "{inspected}"
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert_eq!(after.matches(MARKER).count(), 4);
    // The recent turns (from the user message of timestamp 7 on) are untouched.
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (text.lines().collect(), after.lines().collect());
    assert_eq!(old_lines[7..], new_lines[7..]);
    let (_, again) = env.run_json(&[
        "strip-images",
        "--transcript",
        f,
        "--keep-turns",
        "3",
        "--enforce",
    ]);
    assert_eq!(again["transcripts"][0]["status"], "unchanged", "{again}");

    for release in [STABLE, EXTENDED] {
        let Some(o) = oracle_of(release) else {
            continue;
        };
        // A copy per release: the runtime appends to it.
        let file = env.write(&format!("t-{}.jsonl", release.version), after.as_bytes());
        replays_and_appends(&o, &before, &file);
    }
}

/// `file` (the stripped `before`) loads in the runtime of `o` with the context the runtime
/// replays of `before`, and the runtime appends to it.
fn replays_and_appends(o: &util::Oracle, before: &Path, file: &Path) {
    let Some(loader) = util::session_context_script(
        "a_stripped_transcript_loads_replays_and_appends_in_the_runtime",
    ) else {
        return;
    };
    let load = |p: &Path| -> Value {
        let out = Command::new(&o.node)
            .arg(&loader)
            .arg(&o.dir)
            .arg(p)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (old, new) = (load(before), load(file));
    assert_eq!(old["leafId"], new["leafId"]);
    let want = run_script(o, &json!({"contexts": [old["messages"], new["messages"]]}));
    let c = want["contexts"].as_array().unwrap();
    // The stored history is what the runtime replays: the runtime's prune of the original,
    // and its prune of the stripped file changes nothing.
    assert_eq!(
        jsjson::to_string_compact(&new["messages"]),
        jsjson::to_string_compact(&c[0])
    );
    assert_eq!(
        jsjson::to_string_compact(&c[1]),
        jsjson::to_string_compact(&c[0])
    );
    assert_eq!(
        new["messages"][0]["content"],
        format!("{MARKER} what is this?")
    );
    assert_eq!(new["messages"][6]["content"], "again media://inbound/e.png");
    // The runtime appends to it and reads the result back.
    o.run_script("append-message.mjs", [file]);
    let appended = load(file);
    let n = new["messages"].as_array().unwrap().len();
    assert_eq!(appended["messages"].as_array().unwrap().len(), n + 1);
    assert_eq!(
        appended["messages"][n]["content"],
        "next [media attached: /tmp/in/h.png]"
    );
    let kept = Value::Array(appended["messages"].as_array().unwrap()[..n].to_vec());
    assert_eq!(
        jsjson::to_string_compact(&kept),
        jsjson::to_string_compact(&new["messages"])
    );
}
