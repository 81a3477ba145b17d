//! `clawkeeper compact` end to end: generated long transcripts compacted in place and loaded
//! back with the reference runtime, plus the preview, boilerplate, summariser and refusal paths.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{EXTENDED, Oracle, TestEnv, case_count, oracle, oracle_extended, same_loads};

/// The reference runtime's own per-message token estimates for each list of messages.
fn reference_estimates(o: &Oracle, cases: &[Vec<Value>]) -> Vec<Vec<u64>> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cases.json");
    std::fs::write(&input, serde_json::to_vec(cases).unwrap()).unwrap();
    let v: Vec<Value> =
        serde_json::from_slice(&o.run_script("estimate-tokens.mjs", [&input])).unwrap();
    v.iter()
        .map(|c| {
            c["perMessage"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .collect()
        })
        .collect()
}

fn last_line(bytes: &[u8]) -> Value {
    let text = std::str::from_utf8(bytes).unwrap();
    serde_json::from_str(text.trim_end().rsplit('\n').next().unwrap()).unwrap()
}

/// Paths of `read`/`write`/`edit` calls in runtime context messages.
fn touched_files(messages: &[Value]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in messages.iter().filter(|m| m["role"] == "assistant") {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "toolCall"
                && matches!(b["name"].as_str(), Some("read" | "write" | "edit"))
                && let Some(p) = b["arguments"]["path"].as_str()
            {
                out.insert(p.to_owned());
            }
        }
    }
    out
}

#[test]
fn generated_long_transcripts_compact_and_load_in_the_runtime() {
    let Some(o) = oracle() else { return };
    let env = TestEnv::new();
    let n = case_count(8);
    let mut files: Vec<(PathBuf, Vec<u8>, u64)> = Vec::new();
    for seed in 0..n {
        // One case in four is long (thousands of entries); budgets vary.
        let steps = if seed % 4 == 0 {
            900
        } else {
            150 + (seed as usize * 37) % 200
        };
        let keep = [300u64, 1500, 6000, 20_000][seed as usize % 4];
        let bytes = generate_long(1000 + seed, steps).bytes;
        let p = env.write(&format!("c{seed}.jsonl"), &bytes);
        files.push((p, bytes, keep));
    }
    let compacted = compact_and_verify(&o, &env, &files, false);
    assert!(compacted * 2 >= files.len(), "most generated cases compact");
}

#[test]
fn hostile_generated_transcripts_are_compacted_or_left_untouched() {
    // Torn and unterminated last lines, lone surrogates, CRLF lines, branches, compactions.
    let Some(o) = oracle() else { return };
    let env = TestEnv::new();
    let files: Vec<(PathBuf, Vec<u8>, u64)> = (0..case_count(8) * 2)
        .map(|seed| {
            let bytes = crate::generator::generate(seed).bytes;
            let p = env.write(&format!("h{seed}.jsonl"), &bytes);
            (p, bytes, 20 + seed * 10)
        })
        .collect();
    let compacted = compact_and_verify(&o, &env, &files, true);
    assert!(compacted > 0, "some hostile cases still compact");
}

/// Compact every file in place with its budget and check the result against the runtime:
/// original bytes untouched, the compaction is the leaf, the context is the summary and
/// exactly the newest old messages from a user message on, tool results keep their calls,
/// the summary names the files and the previous summary, the budget is kept. With `hostile`,
/// refused or skipped files are allowed but must be byte-identical. Returns how many changed.
fn compact_and_verify(
    o: &Oracle,
    env: &TestEnv,
    files: &[(PathBuf, Vec<u8>, u64)],
    hostile: bool,
) -> usize {
    let mut compacted = Vec::new();
    for (p, before, keep) in files {
        let name = p.file_name().unwrap().to_str().unwrap();
        let keep_s = keep.to_string();
        let (code, report) = env.run_json(&[
            "compact",
            "--transcript",
            name,
            "--enforce",
            "--keep-recent-tokens",
            &keep_s,
            "--min-tokens",
            "0",
        ]);
        let t = &report["transcripts"][0];
        let status = t["status"].as_str().unwrap();
        assert!(
            code == 0 || hostile && status == "refused",
            "{name}: {report}"
        );
        let after = std::fs::read(p).unwrap();
        match t["status"].as_str().unwrap() {
            "changed" => {
                assert!(
                    after.starts_with(before),
                    "{name}: every original byte stays in place"
                );
                let entry = last_line(&after);
                assert_eq!(entry["type"], "compaction");
                assert_eq!(entry["firstKeptEntryId"], t["details"]["firstKeptEntryId"]);
                assert!(entry.get("fromHook").is_none());
                assert!(entry["tokensBefore"].as_u64().unwrap() > 0);
                assert!(entry["details"]["readFiles"].is_array());
                assert!(!entry["summary"].as_str().unwrap().contains("</summary>"));
                compacted.push((p.clone(), before.clone(), after, entry, *keep));
            }
            "unchanged" => {
                assert_eq!(&after, before, "{name}");
                let note = t["notes"][0].as_str().unwrap();
                assert!(note.starts_with("left alone"), "{name}: {note}");
            }
            "refused" if hostile => assert_eq!(&after, before, "{name}"),
            // A branch running through a line only the runtime can parse is left alone.
            "skipped" => {
                assert_eq!(&after, before, "{name}");
                assert!(
                    t["reason"].as_str().unwrap().contains("cannot parse"),
                    "{t}"
                );
            }
            other => panic!("{name}: unexpected status {other}: {t}"),
        }
    }
    // Load every original and every result with the runtime.
    let scratch = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (i, (_, before, after, _, _)) in compacted.iter().enumerate() {
        let b = scratch.path().join(format!("before{i}.jsonl"));
        std::fs::write(&b, before).unwrap();
        paths.push(b);
        let a = scratch.path().join(format!("after{i}.jsonl"));
        std::fs::write(&a, after).unwrap();
        paths.push(a);
    }
    let loaded = o.load_all(&paths);
    // The extended-stable release of the JSON line loads them into the same contexts.
    if let Some(x) = oracle_extended() {
        same_loads(&loaded, &x.load_all(&paths), &paths, EXTENDED);
    }
    let mut kept_cases = Vec::new();
    for (i, (p, _, _, entry, _)) in compacted.iter().enumerate() {
        let (old, new) = (&loaded[2 * i], &loaded[2 * i + 1]);
        assert!(old.ok && new.ok, "{p:?}: {:?} {:?}", old.error, new.error);
        assert_eq!(
            new.leaf_id, entry["id"],
            "{p:?}: the compaction is the new leaf"
        );
        let old_msgs = old.messages.as_array().unwrap();
        let new_msgs = new.messages.as_array().unwrap();
        assert_eq!(new_msgs[0]["role"], "compactionSummary");
        assert_eq!(new_msgs[0]["summary"], entry["summary"]);
        let kept = &new_msgs[1..];
        assert!(!kept.is_empty());
        assert_eq!(
            kept[0]["role"], "user",
            "{p:?}: the kept part starts at a user message"
        );
        assert_eq!(
            kept,
            &old_msgs[old_msgs.len() - kept.len()..],
            "{p:?}: exactly the newest messages"
        );
        // Every kept tool result is preceded by its call.
        let mut calls = HashSet::new();
        for m in kept {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "toolCall" {
                    calls.insert(b["id"].as_str().unwrap_or_default().to_owned());
                }
            }
            if m["role"] == "toolResult" {
                let id = m["toolCallId"].as_str().unwrap();
                let old_had_call = old_msgs.iter().any(|o| {
                    o["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|b| b["id"] == id)
                });
                assert!(
                    !old_had_call || calls.contains(id),
                    "{p:?}: result {id} kept without its call"
                );
            }
        }
        // The summary names every file touched in the summarised range and keeps the
        // previous summary.
        let summarised = &old_msgs[..old_msgs.len() - kept.len()];
        let summary = entry["summary"].as_str().unwrap();
        for f in touched_files(summarised) {
            assert!(
                summary.contains(&format!("\n{f}\n")),
                "{p:?}: {f} missing from the summary"
            );
            let listed = entry["details"]["readFiles"]
                .as_array()
                .unwrap()
                .iter()
                .chain(entry["details"]["modifiedFiles"].as_array().unwrap())
                .any(|v| v == &json!(f));
            assert!(listed, "{p:?}: {f} missing from details");
        }
        if let Some(prev) = summarised
            .first()
            .filter(|m| m["role"] == "compactionSummary")
        {
            assert!(
                summary.contains(prev["summary"].as_str().unwrap()),
                "{p:?}: previous summary {prev}\nnot in {summary}"
            );
        }
        assert!(summary.starts_with("[Offline compaction by clawkeeper"));
        kept_cases.push(kept.to_vec());
    }
    // At least the requested budget is kept, by the runtime's own estimate.
    let estimates = reference_estimates(o, &kept_cases);
    for ((p, _, _, _, keep), per) in compacted.iter().zip(&estimates) {
        let total: u64 = per.iter().sum();
        assert!(
            total >= *keep,
            "{p:?}: kept {total} tokens, asked for {keep}"
        );
    }
    compacted.len()
}

#[test]
fn dry_run_and_preview_change_nothing() {
    let env = TestEnv::new();
    let bytes = generate_long(7, 120).bytes;
    let p = env.write("t.jsonl", &bytes);
    let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
    for mode in [&["--dry-run"][..], &[][..]] {
        let mut args = vec![
            "compact",
            "--transcript",
            "t.jsonl",
            "--keep-recent-tokens",
            "200",
            "--min-tokens",
            "0",
        ];
        args.extend_from_slice(mode);
        let out = env.run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("would-change"), "{stdout}");
        assert_eq!(
            mode.is_empty(),
            stdout.contains("--enforce to apply"),
            "{stdout}"
        );
    }
    assert_eq!(std::fs::read(&p).unwrap(), bytes);
    assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime);
    let leftovers: Vec<String> = std::fs::read_dir(env.work())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("t.jsonl"))
        .collect();
    assert_eq!(
        leftovers,
        vec!["t.jsonl"],
        "no temp or lock files left behind"
    );
}

#[test]
fn compacting_twice_is_a_no_op_and_small_files_are_left_alone() {
    let env = TestEnv::new();
    env.write("t.jsonl", &generate_long(9, 150).bytes);
    let args = [
        "compact",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--keep-recent-tokens",
        "300",
        "--min-tokens",
        "0",
    ];
    let (_, first) = env.run_json(&args);
    assert_eq!(first["transcripts"][0]["status"], "changed", "{first}");
    let once = std::fs::read(env.path("t.jsonl")).unwrap();
    let (_, second) = env.run_json(&args);
    assert_eq!(second["transcripts"][0]["status"], "unchanged");
    assert!(
        second["transcripts"][0]["notes"][0]
            .as_str()
            .unwrap()
            .contains("already compacted")
    );
    assert_eq!(std::fs::read(env.path("t.jsonl")).unwrap(), once);
    // Default --min-tokens is the keep budget: a small transcript stays as it is.
    env.write("small.jsonl", &generate_long(10, 20).bytes);
    let (_, r) = env.run_json(&["compact", "--transcript", "small.jsonl", "--enforce"]);
    assert_eq!(r["transcripts"][0]["status"], "unchanged");
    assert!(
        r["transcripts"][0]["notes"][0]
            .as_str()
            .unwrap()
            .contains("not above the minimum")
    );
}

fn heartbeat_only() -> Vec<u8> {
    let prompt = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";
    let mut lines = vec![
        json!({"type":"session","version":3,"id":"hb","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}),
    ];
    let mut parent = Value::Null;
    for i in 0..400u64 {
        let (role, content) = if i % 2 == 0 {
            ("user", json!(prompt))
        } else {
            (
                "assistant",
                json!([{"type":"text","text": if i % 4 == 1 { "HEARTBEAT_OK" } else { "NO_REPLY" }}]),
            )
        };
        let id = format!("{i:08x}");
        lines.push(json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-01T00:00:01.000Z",
            "message":{"role":role,"content":content,"stopReason":"stop","timestamp":1_772_400_000_000u64 + i}}));
        parent = json!(id);
    }
    let mut text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    text.shrink_to_fit();
    text.into_bytes()
}

#[test]
fn boilerplate_only_range_still_gets_a_boundary() {
    let env = TestEnv::new();
    env.write("hb.jsonl", &heartbeat_only());
    let (code, r) = env.run_json(&[
        "compact",
        "--transcript",
        "hb.jsonl",
        "--enforce",
        "--keep-recent-tokens",
        "500",
        "--min-tokens",
        "0",
    ]);
    assert_eq!(code, 0);
    let t = &r["transcripts"][0];
    assert_eq!(t["status"], "changed", "{r}");
    assert_eq!(t["details"]["boilerplateOnly"], true);
    assert!(t["notes"].to_string().contains("boilerplate only"));
    let entry = last_line(&std::fs::read(env.path("hb.jsonl")).unwrap());
    let summary = entry["summary"].as_str().unwrap();
    assert!(summary.starts_with("[Offline compaction by clawkeeper"));
    assert!(summary.contains("## Decisions\nNo prior history.\n\n## Open TODOs\nNone."));
    if let Some(o) = oracle() {
        let loaded = o.load_all(&[env.path("hb.jsonl")]);
        assert!(loaded[0].ok, "{:?}", loaded[0].error);
        assert_eq!(loaded[0].messages[0]["role"], "compactionSummary");
    }
}

#[test]
fn summarizer_output_is_used_and_failures_fall_back() {
    let env = TestEnv::new();
    let bytes = generate_long(21, 150).bytes;
    env.write("a.jsonl", &bytes);
    env.write("b.jsonl", &bytes);
    env.write(
        "sum.sh",
        b"#!/bin/sh\nn=$(grep -o '\"role\"' | wc -l)\necho \"Local model summary of $n messages\"\n",
    );
    let base = [
        "compact",
        "--enforce",
        "--keep-recent-tokens",
        "300",
        "--min-tokens",
        "0",
    ];
    let mut args = base.to_vec();
    args.extend(["--transcript", "a.jsonl", "--summarizer", "sh sum.sh"]);
    let (_, r) = env.run_json(&args);
    assert!(
        r["transcripts"][0]["notes"]
            .to_string()
            .contains("summary written by --summarizer"),
        "{r}"
    );
    assert_eq!(
        r["transcripts"][0]["details"]["summarySource"],
        "summarizer"
    );
    let entry = last_line(&std::fs::read(env.path("a.jsonl")).unwrap());
    let s = entry["summary"].as_str().unwrap();
    // An honest first line: written by the operator's command, not the runtime's model.
    let first = s.lines().next().unwrap();
    assert!(
        first.starts_with("[Offline compaction by clawkeeper"),
        "{first}"
    );
    assert!(
        first.contains("summariser command `sh sum.sh`, not by the runtime's model"),
        "{first}"
    );
    assert!(!s.contains("no model was used"), "{s}");
    assert_eq!(entry["details"]["offline"]["summarizer"], "sh sum.sh");
    assert_eq!(entry["details"]["offline"]["tool"], "clawkeeper");
    // The framing request, quoted under its heading, comes before the summariser's text, and
    // the file blocks after it.
    let framing = s.find("\n\n## Framing request\n> ").expect(s);
    let body = s.find("\n\nLocal model summary of ").expect(s);
    assert!(framing < body, "{s}");
    let files = s
        .find("\n\n<modified-files>\n")
        .or(s.find("\n\n<read-files>\n"));
    assert!(files.expect(s) > body, "{s}");
    assert!(!s.contains("## Activity"));
    if let Some(o) = oracle() {
        let loaded = o.load_all(&[env.path("a.jsonl")]);
        assert!(loaded[0].ok, "{:?}", loaded[0].error);
        assert_eq!(loaded[0].messages[0]["summary"], entry["summary"]);
    }
    // A preview says where the summary would come from, and does not run the command.
    env.write("c.jsonl", &bytes);
    env.write("mark.sh", b"#!/bin/sh\ntouch ran.marker\necho summary\n");
    for mode in [&["--dry-run"][..], &[][..]] {
        let mut args = vec![
            "compact",
            "--transcript",
            "c.jsonl",
            "--keep-recent-tokens",
            "300",
            "--min-tokens",
            "0",
            "--summarizer",
            "sh mark.sh",
        ];
        args.extend_from_slice(mode);
        let (code, r) = env.run_json(&args);
        assert_eq!(code, 0, "{r}");
        let t = &r["transcripts"][0];
        assert_eq!(t["status"], "would-change", "{r}");
        assert_eq!(t["details"]["summarySource"], "summarizer-on-enforce");
        assert!(
            t["notes"]
                .to_string()
                .contains("the summary would come from --summarizer `sh mark.sh`"),
            "{r}"
        );
    }
    assert!(
        !env.path("ran.marker").exists(),
        "a preview ran the summariser"
    );
    assert_eq!(std::fs::read(env.path("c.jsonl")).unwrap(), bytes);
    let mut args = base.to_vec();
    args.extend([
        "--transcript",
        "b.jsonl",
        "--summarizer",
        "sleep 5",
        "--summarizer-timeout",
        "300ms",
    ]);
    let (_, r) = env.run_json(&args);
    assert!(
        r["transcripts"][0]["notes"]
            .to_string()
            .contains("--summarizer failed (no answer within 0.3s); used the built-in summary"),
        "{r}"
    );
    assert_eq!(
        r["transcripts"][0]["details"]["summarySource"],
        "builtin-fallback"
    );
    let entry = last_line(&std::fs::read(env.path("b.jsonl")).unwrap());
    assert!(entry["summary"].as_str().unwrap().contains("## Activity"));
    assert!(entry["details"]["offline"].get("summarizer").is_none());
}

#[test]
#[cfg(not(feature = "tiktoken"))]
fn bpe_tokenizers_are_refused_without_the_tiktoken_feature() {
    let env = TestEnv::new();
    env.write("t.jsonl", &generate_long(4, 120).bytes);
    for tok in ["o200k", "cl100k"] {
        let out = env.run(&["compact", "--transcript", "t.jsonl", "--tokenizer", tok]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("built without the tiktoken feature"), "{err}");
    }
}

#[test]
#[cfg(feature = "tiktoken")]
fn bpe_tokenizer_counts_differently() {
    let env = TestEnv::new();
    // Code-heavy turns: BPE counts differ clearly from characters / 4.
    let mut lines = vec![
        json!({"type":"session","version":3,"id":"b","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}),
    ];
    let mut parent = Value::Null;
    for i in 0..120u64 {
        let (role, content) = if i % 2 == 0 {
            (
                "user",
                json!(format!(
                    "fix fn f{i}(x: &[u8]) -> Option<Vec<u16>> {{ x.iter().map(|b| *b as u16).collect() }}"
                )),
            )
        } else {
            (
                "assistant",
                json!([{"type":"text","text":format!("Done: `f{i}` now returns {{ Some(v) }} for every input; see src/f{i}.rs:{i}.")}]),
            )
        };
        let id = format!("{i:08x}");
        lines.push(json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-01T00:00:01.000Z",
            "message":{"role":role,"content":content,"stopReason":"stop","timestamp":1_772_400_000_000u64 + i}}));
        parent = json!(id);
    }
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    env.write("t.jsonl", text.as_bytes());
    let run = |tok: &str| {
        let (_, r) = env.run_json(&[
            "compact",
            "--transcript",
            "t.jsonl",
            "--keep-recent-tokens",
            "1000",
            "--min-tokens",
            "0",
            "--tokenizer",
            tok,
        ]);
        assert_eq!(r["transcripts"][0]["status"], "would-change", "{r}");
        r["transcripts"][0]["details"].clone()
    };
    let (h, o, c) = (run("heuristic"), run("o200k"), run("cl100k"));
    for d in [&h, &o, &c] {
        assert!(d["keptTokens"].as_u64().unwrap() >= 1000, "{d}");
    }
    assert_ne!(h["summarizedTokens"], o["summarizedTokens"]);
    assert_ne!(h["firstKeptEntryId"], o["firstKeptEntryId"]);
}

#[test]
fn unsafe_inputs_are_refused_untouched() {
    let env = TestEnv::new();
    let bytes = generate_long(4, 120).bytes;
    // A torn last line (a writer may be mid-append): never append after it.
    let mut torn = bytes.clone();
    torn.extend_from_slice(br#"{"type":"message","id":"torn","parentId":"#);
    env.write("torn.jsonl", &torn);
    let args = |f: &'static str| {
        [
            "compact",
            "--transcript",
            f,
            "--enforce",
            "--keep-recent-tokens",
            "200",
            "--min-tokens",
            "0",
        ]
    };
    let out = env.run(&[&args("torn.jsonl")[..], &["--json"]].concat());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["transcripts"][0]["status"], "refused", "{r}");
    // Nothing else was written, so the run is refused; the count claims nothing.
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(r["totals"]["messagesSummarized"], 0, "{r}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("torn.jsonl: refused"));
    assert_eq!(std::fs::read(env.path("torn.jsonl")).unwrap(), torn);
    // A symlink is never followed.
    env.write("real.jsonl", &bytes);
    std::os::unix::fs::symlink(env.path("real.jsonl"), env.path("link.jsonl")).unwrap();
    let (_, r) = env.run_json(&args("link.jsonl"));
    assert_eq!(r["transcripts"][0]["status"], "damaged");
    assert_eq!(std::fs::read(env.path("real.jsonl")).unwrap(), bytes);
    // A last line without its newline may still be being written: nothing is appended.
    let mut open_end = bytes.clone();
    open_end.pop();
    env.write("open.jsonl", &open_end);
    let (_, r) = env.run_json(&args("open.jsonl"));
    assert_eq!(r["transcripts"][0]["status"], "refused", "{r}");
    assert_eq!(std::fs::read(env.path("open.jsonl")).unwrap(), open_end);
    // --successor needs a store.
    let out = env.run(&["compact", "--transcript", "real.jsonl", "--successor"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("store target"));
}

/// Four turns whose replies are plain strings (no `usage`): 4 × 101 tokens of user text and
/// 4 × 1000 of replies, 4404 in all once the loader has made each reply a text block.
fn string_replies() -> Vec<u8> {
    let mut lines = vec![
        json!({"type":"session","version":3,"id":"sr","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}),
    ];
    let mut parent = Value::Null;
    for i in 0..8u64 {
        let (role, content) = if i % 2 == 0 {
            ("user", "u".repeat(404))
        } else {
            ("assistant", "r".repeat(4000))
        };
        let id = format!("{i:08x}");
        lines.push(json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-01T00:00:01.000Z",
            "message":{"role":role,"content":content,"stopReason":"stop","timestamp":1_772_400_000_000u64 + i}}));
        parent = json!(id);
    }
    lines
        .iter()
        .map(|l| l.to_string() + "\n")
        .collect::<String>()
        .into_bytes()
}

#[test]
fn string_replies_are_estimated_as_the_runtime_loads_them() {
    let env = TestEnv::new();
    let p = env.write("sr.jsonl", &string_replies());
    let (code, v) = env.run_json(&["inspect", "--transcript", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["transcript"]["estimatedContextTokens"], 4404, "{v}");
    let (code, r) = env.run_json(&[
        "compact",
        "--transcript",
        "sr.jsonl",
        "--keep-recent-tokens",
        "1500",
    ]);
    assert_eq!(code, 0, "{r}");
    let t = &r["transcripts"][0];
    assert_eq!(t["status"], "would-change", "{r}");
    assert_eq!(t["details"]["tokensBefore"], 4404, "{r}");
    // The runtime's own figure, from what its loader makes of the file.
    if let Some(o) = oracle() {
        let loaded = o.load_all(std::slice::from_ref(&p));
        assert!(loaded[0].ok, "{:?}", loaded[0].error);
        let msgs = loaded[0].messages.as_array().unwrap().clone();
        assert_eq!(msgs[1]["content"][0]["type"], "text");
        let per = &reference_estimates(&o, &[msgs])[0];
        assert_eq!(per.iter().sum::<u64>(), 4404, "{per:?}");
    }
}

/// `turns` more turns (a request, an `edit` call and its result, a reply) appended after the
/// last line of `bytes` (the leaf), dated in month `month` of 2027, after anything generated.
fn append_turns(bytes: &mut Vec<u8>, turns: u64, month: u64) {
    let mut parent = last_line(bytes)["id"].clone();
    let mut line = |n: u64, fields: Value| {
        let id = format!("m{month:02}{n:06}");
        let mut e = json!({"type":"message","id":id,"parentId":parent,
            "timestamp":format!("2027-{month:02}-01T00:{:02}:{:02}.000Z", n / 60, n % 60)});
        e["message"] = fields;
        e["message"]["timestamp"] = json!(1_800_000_000_000u64 + month * 10_000_000 + n);
        bytes.extend_from_slice(format!("{e}\n").as_bytes());
        parent = json!(id);
    };
    for t in 0..turns {
        let n = t * 4;
        let call = format!("call_{month}_{t}");
        line(
            n,
            json!({"role":"user","content":format!("round {month} turn {t}: {}", "please go on ".repeat(20))}),
        );
        line(
            n + 1,
            json!({"role":"assistant","content":[{"type":"toolCall","id":call,"name":"edit",
            "arguments":{"path":format!("src/m{month}_{t}.rs"),"oldText":"a","newText":"b"}}],"stopReason":"toolUse"}),
        );
        line(
            n + 2,
            json!({"role":"toolResult","toolCallId":call,"toolName":"edit",
            "content":[{"type":"text","text":"edited ".repeat(30)}],"isError":false}),
        );
        line(
            n + 3,
            json!({"role":"assistant","content":[{"type":"text","text":"done ".repeat(40)}],"stopReason":"stop"}),
        );
    }
}

/// The span an activity heading names: (first, last) timestamps.
fn activity_span(heading: &str) -> (String, String) {
    let inner = heading
        .split_once(" (")
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no span in {heading:?}"));
    let (a, b) = inner.split_once(" to ").unwrap();
    (a.to_owned(), b.to_owned())
}

#[test]
fn compacting_three_times_keeps_one_previous_summary_dated_activity_and_one_file_list() {
    let env = TestEnv::new();
    let mut checked = 0;
    for seed in [3u64, 11, 40] {
        let name = format!("s{seed}.jsonl");
        let mut bytes = generate_long(seed, 200).bytes;
        env.write(&name, &bytes);
        let mut results = Vec::new();
        for round in 0..3u64 {
            if round > 0 {
                append_turns(&mut bytes, 6, round);
                env.write(&name, &bytes);
            }
            let (code, r) = env.run_json(&[
                "compact",
                "--transcript",
                &name,
                "--enforce",
                "--keep-recent-tokens",
                "300",
                "--min-tokens",
                "0",
            ]);
            let t = &r["transcripts"][0];
            if round == 0 && t["status"] != "changed" {
                break; // (a generated case that does not compact at all)
            }
            assert_eq!((code, t["status"].as_str()), (0, Some("changed")), "{r}");
            bytes = std::fs::read(env.path(&name)).unwrap();
            let entry = last_line(&bytes);
            let s = entry["summary"].as_str().unwrap().to_owned();
            // Exactly one previous-summary section once an offline one is carried.
            let prev = s.matches("## Previous summary").count();
            assert!(prev <= 1, "{s}");
            if round > 0 {
                assert_eq!(prev, 1, "{s}");
            }
            // One activity section per offline compaction so far: the newest at the top
            // level, the earlier ones inside the previous summary, all dated, oldest first.
            let headings: Vec<&str> = s
                .lines()
                .filter(|l| l.starts_with("## Activity") || l.starts_with("### Activity"))
                .collect();
            assert_eq!(headings.len() as u64, round + 1, "{s}");
            assert!(headings[round as usize].starts_with("## Activity ("), "{s}");
            for h in &headings[..round as usize] {
                assert!(h.starts_with("### Activity ("), "{s}");
            }
            let spans: Vec<_> = headings.iter().map(|h| activity_span(h)).collect();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "{spans:?}");
            }
            assert!(spans[round as usize].0.starts_with("20"), "{spans:?}");
            if round > 0 {
                assert!(
                    spans[round as usize]
                        .1
                        .starts_with(&format!("2027-{round:02}")),
                    "{spans:?}"
                );
            }
            // The file blocks once, at the end, naming what the details list.
            assert!(s.matches("<read-files>").count() <= 1, "{s}");
            assert_eq!(s.matches("<modified-files>").count(), 1, "{s}");
            let list = |k: &str| {
                entry["details"][k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            };
            let (read, modified) = (list("readFiles"), list("modifiedFiles"));
            let mut blocks = String::new();
            if !read.is_empty() {
                blocks.push_str(&format!(
                    "\n\n<read-files>\n{}\n</read-files>",
                    read.join("\n")
                ));
            }
            blocks.push_str(&format!(
                "\n\n<modified-files>\n{}\n</modified-files>",
                modified.join("\n")
            ));
            assert!(s.ends_with(&blocks), "{s}");
            for r in 1..=round {
                assert!(modified.contains(&format!("src/m{r}_0.rs")), "{modified:?}");
            }
            results.push(bytes.clone());
        }
        // The runtime loads every result, with the summary first in its context.
        if let Some(o) = oracle() {
            let scratch = tempfile::tempdir().unwrap();
            let paths: Vec<PathBuf> = results
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let p = scratch.path().join(format!("{i}.jsonl"));
                    std::fs::write(&p, b).unwrap();
                    p
                })
                .collect();
            for (l, b) in o.load_all(&paths).iter().zip(&results) {
                assert!(l.ok, "{:?}", l.error);
                assert_eq!(l.leaf_id, last_line(b)["id"]);
                assert_eq!(l.messages[0]["role"], "compactionSummary");
                assert_eq!(l.messages[0]["summary"], last_line(b)["summary"]);
            }
        }
        checked += usize::from(results.len() == 3);
    }
    assert!(checked >= 2, "only {checked} cases compacted three times");
}

#[test]
fn a_model_summary_with_its_own_file_blocks_is_carried_with_one_file_list() {
    let env = TestEnv::new();
    let mut bytes = generate_long(5, 60).bytes;
    let parent = last_line(&bytes)["id"].clone();
    let model = "## Goal\nMigrate the DB.\n\n## Progress\n- schema done\n\n<read-files>\nnotes/plan.md\n</read-files>\n\n<modified-files>\ndb/schema.sql\n</modified-files>";
    let c = json!({"type":"compaction","id":"model-c","parentId":parent,"timestamp":"2026-12-01T00:00:00.000Z",
        "summary":model,"firstKeptEntryId":"model-c","tokensBefore":5000,
        "details":{"readFiles":["notes/plan.md"],"modifiedFiles":["db/schema.sql"]}});
    bytes.extend_from_slice(format!("{c}\n").as_bytes());
    append_turns(&mut bytes, 6, 1);
    env.write("m.jsonl", &bytes);
    let (code, r) = env.run_json(&[
        "compact",
        "--transcript",
        "m.jsonl",
        "--enforce",
        "--keep-recent-tokens",
        "300",
        "--min-tokens",
        "0",
    ]);
    assert_eq!(
        (code, &r["transcripts"][0]["status"]),
        (0, &json!("changed")),
        "{r}"
    );
    let after = std::fs::read(env.path("m.jsonl")).unwrap();
    let entry = last_line(&after);
    let s = entry["summary"].as_str().unwrap();
    assert_eq!(s.matches("## Previous summary").count(), 1, "{s}");
    assert!(
        s.contains("## Previous summary\n## Goal\nMigrate the DB.\n\n## Progress\n- schema done\n\n## Activity (2027-01-01T"),
        "{s}"
    );
    assert_eq!(s.matches("<read-files>").count(), 1, "{s}");
    assert_eq!(s.matches("<modified-files>").count(), 1, "{s}");
    assert!(
        s.contains("<read-files>\nnotes/plan.md\n</read-files>"),
        "{s}"
    );
    // (The newest turns are kept, not summarised.)
    assert!(s.ends_with("\n</modified-files>"), "{s}");
    assert!(
        s.contains("<modified-files>\ndb/schema.sql\nsrc/m1_0.rs\n"),
        "{s}"
    );
    if let Some(o) = oracle() {
        let loaded = o.load_all(&[env.path("m.jsonl")]);
        assert!(loaded[0].ok, "{:?}", loaded[0].error);
        assert_eq!(loaded[0].leaf_id, entry["id"]);
        assert_eq!(loaded[0].messages[0]["summary"], entry["summary"]);
    }
}
