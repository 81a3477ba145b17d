//! Transcripts whose lines nest arrays or objects thousands of levels deep (issue 21.2): every
//! command, previewing and with `--enforce`, leaves such a file exactly as it is and refuses
//! it with the reason (exit 3, as for any file the run was asked to fix and left), never
//! crashes or overflows its stack, and still edits the other transcripts of the store.

use std::fs;

use crate::hostile::{SESSIONS, STORE, writers};
use crate::util::{TestEnv, stderr};

/// `n` levels of arrays, or of objects.
fn deep(n: usize, objects: bool) -> String {
    if objects {
        format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n))
    } else {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }
}

/// `input` with a deeply nested member added to entry lines (every one of a short input, about
/// a dozen spread over a long one; never the header).
fn nested(input: &[u8], value: &str) -> Vec<u8> {
    let text = String::from_utf8(input.to_vec()).unwrap();
    let step = (text.lines().count() / 12).max(1);
    nested_every(&text, value, step)
}

/// `text` with a deeply nested member added to every `step`-th entry line.
fn nested_every(text: &str, value: &str, step: usize) -> Vec<u8> {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 || i % step != 0 || !line.ends_with('}') {
            out.push_str(line);
        } else {
            out.push_str(&line[..line.len() - 1]);
            out.push_str(",\"meta\":");
            out.push_str(value);
            out.push('}');
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// A store with two sessions: `deep` (every entry nested `value`) and `plain`.
fn setup(env: &TestEnv, input: &[u8], value: &str) {
    env.write(&format!("{SESSIONS}/deep.jsonl"), &nested(input, value));
    env.write(&format!("{SESSIONS}/plain.jsonl"), input);
    env.write(
        STORE,
        br#"{
  "agent:main:deep": { "sessionId": "deep", "updatedAt": 1772442000000 },
  "agent:main:plain": { "sessionId": "plain", "updatedAt": 1772442000000 }
}"#,
    );
}

#[test]
fn deeply_nested_lines_are_refused_files_left_as_they_are() {
    for w in writers() {
        for (depth, objects) in [(10_000, false), (10_000, true), (100_000, false)] {
            let value = deep(depth, objects);
            for enforce in [false, true] {
                let env = TestEnv::new();
                setup(&env, &w.input, &value);
                let deep_path = env.path(&format!("{SESSIONS}/deep.jsonl"));
                let before = fs::read(&deep_path).unwrap();
                let mut args = w.args.clone();
                args.extend(["--store", STORE]);
                if enforce {
                    args.push("--enforce");
                }
                let what = format!(
                    "{} depth {depth} objects {objects} enforce {enforce}",
                    w.name
                );
                let mut all = args.clone();
                all.push("--json");
                let out = env.run(&all);
                let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{what}: {e}; stderr {}", stderr(&out)));
                let files = v["transcripts"].as_array().unwrap();
                let row = |name: &str| {
                    files
                        .iter()
                        .find(|f| f["path"].as_str().unwrap().ends_with(name))
                        .unwrap_or_else(|| panic!("{what}: no {name} in {v}"))
                };
                let d = row("deep.jsonl");
                let want = if enforce { "changed" } else { "would-change" };
                assert_eq!(row("plain.jsonl")["status"], want, "{what}: {v}");
                let after = fs::read(&deep_path).unwrap();
                if d["status"] != "refused" {
                    // `compact` reads only some members of the lines it summarises, and
                    // appends: it may compact such a file without reading the deep member,
                    // and then every old byte stays where it was.
                    assert!(w.name.starts_with("compact"), "{what}: {d}");
                    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
                    assert_eq!(d["status"], want, "{what}: {d}");
                    assert!(after.starts_with(&before), "{what}: an old line changed");
                    continue;
                }
                let reason = d["reason"].as_str().unwrap();
                assert!(
                    reason.contains("deeper than 128 levels"),
                    "{what}: {reason}"
                );
                assert_eq!(after, before, "{what}: rewritten");
                assert_eq!(out.status.code(), Some(3), "{what}: {}", stderr(&out));
                assert!(
                    stderr(&out).contains("deep.jsonl: refused, left as it is:"),
                    "{what}: {}",
                    stderr(&out)
                );
            }
        }
    }
}

#[test]
fn inspect_reads_deeply_nested_transcripts_without_crashing() {
    let w = &writers()[0];
    let env = TestEnv::new();
    setup(&env, &w.input, &deep(100_000, true));
    let out = env.run(&["inspect", "--store", STORE]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["inspect", "--transcript", &format!("{SESSIONS}/deep.jsonl")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["inspect", "--store", STORE, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
}
