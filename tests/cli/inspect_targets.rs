//! `inspect` beyond the counts: filters (`--larger-than`, `--session`), damage it reports,
//! `--limit` in JSON and tables, `--no-cleanup`, `inspect --transcript FILE`, and the width of
//! the human report with long agent ids.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{TestEnv, now_ms, stderr, stdout};

const H: &str = r#"{"type":"session","version":3,"id":"dmg","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#;

/// A transcript with one orphaned tool result on its active path, one entry whose parent does
/// not exist, and two lines that do not parse (a garbage line and a torn last line).
fn damaged() -> String {
    [
        H,
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-03-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"read","arguments":{}}],"stopReason":"toolUse","timestamp":2}}"#,
        r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-03-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"t1","toolName":"read","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":3}}"#,
        r#"{"type":"message","id":"r2","parentId":"r1","timestamp":"2026-03-01T00:00:04.000Z","message":{"role":"toolResult","toolCallId":"zz","toolName":"read","content":[{"type":"text","text":"late"}],"isError":false,"timestamp":4}}"#,
        r#"{"type":"message","id":"x1","parentId":"ghost","timestamp":"2026-03-01T00:00:05.000Z","message":{"role":"user","content":"lost","timestamp":5}}"#,
        "{not json at all",
        r#"{"type":"message","id":"a2","parentId":"r2","timestamp":"2026-03-01T00:00:06.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","timestamp":6}}"#,
        r#"{"type":"message","id":"a3","par"#,
    ]
    .join("\n")
}

/// Store of agent `agent` with `n` entries: entry i has a generated transcript of growing
/// size, except entry 0, whose transcript is missing.
fn store_with(env: &TestEnv, agent: &str, n: usize) -> PathBuf {
    let dir = env.sessions_dir(agent);
    fs::create_dir_all(&dir).unwrap();
    let mut store = serde_json::Map::new();
    for i in 0..n {
        let id = format!("sess-{i}");
        let key = format!("agent:{agent}:telegram:direct:{}", 1000 + i);
        store.insert(
            key,
            json!({"sessionId": id, "updatedAt": now_ms() - i as i64}),
        );
        if i > 0 {
            let g = generate_long(40 + i as u64, 20 + 10 * i);
            fs::write(dir.join(format!("{id}.jsonl")), &g.bytes).unwrap();
        }
    }
    let p = dir.join("sessions.json");
    fs::write(
        &p,
        serde_json::to_string_pretty(&Value::Object(store)).unwrap(),
    )
    .unwrap();
    p
}

fn inspect_json(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    let (code, v) = env.run_json(&all);
    assert_eq!(code, 0, "{v}");
    v
}

fn size(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

#[test]
fn larger_than_filters_sessions_and_missing_transcripts() {
    let env = TestEnv::new();
    let store = store_with(&env, "main", 6);
    let s = store.to_str().unwrap();
    let v = inspect_json(&env, &["--store", s, "--no-cleanup"]);
    assert_eq!(
        v["stores"][0]["damage"]["missingTranscripts"],
        json!(["agent:main:telegram:direct:1000"])
    );
    let sizes: Vec<u64> = (1..6)
        .map(|i| size(&env.sessions_dir("main").join(format!("sess-{i}.jsonl"))))
        .collect();
    let mut sorted = sizes.clone();
    sorted.sort();
    let threshold = sorted[2];
    let v = inspect_json(
        &env,
        &[
            "--store",
            s,
            "--no-cleanup",
            "--larger-than",
            &format!("{threshold}b"),
        ],
    );
    let st = &v["stores"][0];
    let rows = st["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), sizes.iter().filter(|&&n| n > threshold).count());
    assert!(
        rows.iter()
            .all(|r| r["transcriptBytes"].as_u64().unwrap() > threshold)
    );
    // A missing transcript has no size: it is neither listed nor reported as damage.
    assert_eq!(st["damage"]["missingTranscripts"], json!([]));
    // The reclaimable figures cover only the selected transcripts.
    let sum: i64 = rows
        .iter()
        .map(|r| r["reclaimable"]["prune-noreply"].as_i64().unwrap())
        .sum();
    assert_eq!(st["reclaimable"]["prune-noreply"], sum);
    let out = env.run(&["inspect", "--store", s, "--larger-than", "lots"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).starts_with("clawkeeper: invalid --larger-than"));
}

#[test]
fn session_keys_match_alike_and_unknown_keys_are_errors_everywhere() {
    let env = TestEnv::new();
    let store = store_with(&env, "main", 3);
    let s = store.to_str().unwrap();
    // Case and surrounding blanks do not matter (the runtime normalises keys), in every command.
    let wanted = " Agent:Main:Telegram:Direct:1002 ";
    let v = inspect_json(&env, &["--store", s, "--no-cleanup", "--session", wanted]);
    let rows = v["stores"][0]["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["key"], "agent:main:telegram:direct:1002");
    for cmd in ["prune-noreply", "strip-images", "compact"] {
        let (code, v) = env.run_json(&[cmd, "--store", s, "--session", wanted]);
        assert_eq!(code, 0, "{cmd}: {v}");
        assert_eq!(v["transcripts"].as_array().unwrap().len(), 1, "{cmd}: {v}");
        assert_eq!(
            v["transcripts"][0]["sessionKey"],
            "agent:main:telegram:direct:1002"
        );
    }
    for cmd in ["inspect", "prune-noreply", "strip-images", "compact"] {
        let out = env.run(&[cmd, "--store", s, "--session", "agent:main:nope"]);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {out:?}");
        assert_eq!(
            stderr(&out),
            "clawkeeper: no session \"agent:main:nope\" in the selected store(s)\n",
            "{cmd}"
        );
        assert!(stdout(&out).is_empty(), "{cmd}");
    }
}

#[test]
fn damage_unparsable_lines_dangling_parents_and_orphaned_tool_results() {
    let env = TestEnv::new();
    let dir = env.sessions_dir("main");
    fs::write(dir.join("dmg.jsonl"), damaged()).unwrap();
    fs::write(
        dir.join("sessions.json"),
        json!({"agent:main:main": {"sessionId": "dmg", "updatedAt": now_ms()}}).to_string(),
    )
    .unwrap();
    let v = inspect_json(&env, &["--agent", "main", "--no-cleanup"]);
    let d = &v["stores"][0]["damage"];
    let path = dir.join("dmg.jsonl").display().to_string();
    assert_eq!(
        d["unparsableLines"],
        json!([{"transcript": path, "lines": [7, 9]}])
    );
    assert_eq!(
        d["danglingParents"],
        json!([{"transcript": path, "count": 1}])
    );
    assert_eq!(
        d["orphanedToolResults"],
        json!([{"transcript": path, "count": 1}])
    );
    let out = env.run(&["inspect", "--agent", "main", "--no-cleanup"]);
    let text = stdout(&out);
    assert!(text.contains("dmg.jsonl: 2 unparsable lines"), "{text}");
    assert!(text.contains("dmg.jsonl: 1 dangling parent"), "{text}");
    assert!(text.contains("dmg.jsonl: 1 orphaned tool result"), "{text}");
    // The same facts for the file on its own.
    let (code, t) = env.run_json(&["inspect", "--transcript", &path]);
    assert_eq!(code, 0, "{t}");
    let t = &t["transcript"];
    assert_eq!(t["unparsableLines"], json!([7, 9]));
    assert_eq!(t["danglingParents"], 1);
    assert_eq!(t["orphanedToolResults"], 1);
}

#[test]
fn json_lists_every_session_unless_limited_and_says_what_was_not_computed() {
    let env = TestEnv::new();
    let store = store_with(&env, "main", 25);
    let s = store.to_str().unwrap();
    let v = inspect_json(&env, &["--store", s, "--no-cleanup"]);
    let st = &v["stores"][0];
    assert_eq!(st["sessions"].as_array().unwrap().len(), 25);
    assert_eq!(st["sessionsMatched"], 25);
    // --no-cleanup: not computed, so null (not 0), in the store and in the totals.
    assert_eq!(st["reclaimable"]["cleanup"], Value::Null);
    assert_eq!(v["totals"]["reclaimable"]["cleanup"], Value::Null);
    let v = inspect_json(&env, &["--store", s, "--no-cleanup", "--limit", "2"]);
    assert_eq!(v["stores"][0]["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(v["stores"][0]["sessionsMatched"], 25);
    let v = inspect_json(&env, &["--store", s]);
    assert!(v["stores"][0]["reclaimable"]["cleanup"].is_i64(), "{v}");
    assert!(v["totals"]["reclaimable"]["cleanup"].is_i64(), "{v}");
    // The tables show 20 by default.
    let out = env.run(&["inspect", "--store", s, "--no-cleanup"]);
    let text = stdout(&out);
    assert!(text.contains("Sessions: 20 shown of 25 matching"), "{text}");
    assert!(text.contains("not computed (--no-cleanup)"), "{text}");
}

/// Every line of `text` fits 80 columns.
fn assert_fits(text: &str, what: &str) {
    for line in text.lines() {
        let n = line.chars().count();
        assert!(n <= 80, "{what}: {n} columns: {line}\n{text}");
    }
}

#[test]
fn human_report_fits_80_columns_with_long_agent_ids() {
    let env = TestEnv::new();
    let long = "operations-support-agent-eu-west-1-blue";
    assert!(long.len() >= 27);
    env.write_config(&format!(
        r#"{{"agents":{{"list":[{{"id":"{long}","default":true}},{{"id":"main"}}]}}}}"#
    ));
    store_with(&env, long, 4);
    store_with(&env, "main", 2);
    let out = env.run(&["inspect", "--agent", long, "--prune-after", "1d"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("Sessions: 4 shown of 4 matching"), "{text}");
    assert!(text.contains(&format!("agent:{long}:")), "{text}");
    assert!(text.contains("image"), "{text}");
    assert!(
        text.contains("thinking") && text.contains("compacted"),
        "{text}"
    );
    assert_fits(&text, "inspect --agent");
    let out = env.run(&["inspect", "--all-agents", "--no-cleanup"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("All agents"), "{text}");
    for col in ["cleanup", "strip-", "prune-", "compact"] {
        assert!(text.contains(col), "summary lacks {col}: {text}");
    }
    assert_fits(&text, "inspect --all-agents");
}

#[test]
fn inspect_transcript_predicts_what_the_commands_do_to_the_file() {
    let mut nonzero = [false; 3];
    for (seed, steps) in [(71u64, 120usize), (72, 200)] {
        let env = TestEnv::new();
        let bytes = generate_long(seed, steps).bytes;
        let file = env.write("one.jsonl", &bytes);
        let f = file.to_str().unwrap();
        let flags = [
            "--keep-turns",
            "1",
            "--keep",
            "1",
            "--keep-recent-tokens",
            "300",
            "--min-tokens",
            "0",
        ];
        let (code, v) = env.run_json(&[&["inspect", "--transcript", f][..], &flags[..]].concat());
        assert_eq!(code, 0, "{v}");
        let t = &v["transcript"];
        assert_eq!(t["path"], f);
        assert_eq!(t["transcriptBytes"], bytes.len());
        assert_eq!(t["reclaimable"]["cleanup"], Value::Null);
        // compact: the dry run's own figure.
        let (_, c) = env.run_json(&[
            "compact",
            "--dry-run",
            "--transcript",
            f,
            "--keep-recent-tokens",
            "300",
            "--min-tokens",
            "0",
        ]);
        let saved = c["transcripts"][0]["details"]["tokensSaved"]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(t["reclaimable"]["compactTokens"], saved, "seed {seed}");
        nonzero[0] |= saved > 0;
        // strip-images, then prune-noreply, each on a fresh copy of the file.
        for (cmd, key, extra) in [
            ("strip-images", "strip-images", ["--keep-turns", "1"]),
            ("prune-noreply", "prune-noreply", ["--keep", "1"]),
        ] {
            fs::write(&file, &bytes).unwrap();
            let out = env.run(&[cmd, "--enforce", "--transcript", f, extra[0], extra[1]]);
            assert_eq!(out.status.code(), Some(0), "{out:?}");
            let freed = bytes.len() as i64 - size(&file) as i64;
            assert_eq!(t["reclaimable"][key], freed, "{cmd} seed {seed}");
            nonzero[if cmd == "strip-images" { 1 } else { 2 }] |= freed != 0;
        }
        fs::write(&file, &bytes).unwrap();
        let out = env.run(&[&["inspect", "--transcript", f][..], &flags[..]].concat());
        let text = stdout(&out);
        assert!(text.contains("not applicable (no store)"), "{text}");
        assert!(text.contains("silent replies"), "{text}");
        assert_fits(&text, "inspect --transcript");
        assert_eq!(fs::read(&file).unwrap(), bytes, "inspect must not write");
    }
    assert_eq!(
        nonzero, [true; 3],
        "compact, strip-images, prune-noreply all had work"
    );
}

#[test]
fn inspect_transcript_refuses_what_it_cannot_report() {
    let env = TestEnv::new();
    let out = env.run(&["inspect", "--transcript", "/nonexistent/x.jsonl"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.starts_with("clawkeeper: cannot read --transcript /nonexistent/x.jsonl: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let f = env.write("t.jsonl", damaged().as_bytes());
    for flag in [
        &["--session", "k"][..],
        &["--prune-after", "1d"],
        &["--kind", "cron"],
    ] {
        let mut args = vec!["inspect", "--transcript", f.to_str().unwrap()];
        args.extend_from_slice(flag);
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {out:?}");
        assert!(stderr(&out).contains("needs a store target"), "{out:?}");
    }
}
