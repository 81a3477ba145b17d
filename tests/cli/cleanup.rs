//! `clawkeeper cleanup`: side-by-side runs against the reference OpenClaw on hand-built
//! stores, and the deliberate safety refusals.

use std::fs;
use std::os::unix::fs::symlink;

use crate::util::*;

/// Run clawkeeper on `env` and the reference on a copy; compare stdout, exit status, the
/// `[sessions/store]` log lines on stderr, the resulting directory listing and the
/// sessions.json bytes. Returns clawkeeper's stdout.
pub(crate) fn compare(env: &TestEnv, args: &[&str]) -> Option<String> {
    let oracle = oracle()?;
    let twin = env.duplicate();
    let store = env.store_path();
    let twin_store = twin.store_path();
    let mut ours_args = vec!["cleanup"];
    ours_args.extend_from_slice(args);
    let mut ref_args = vec!["sessions", "cleanup"];
    ref_args.extend_from_slice(args);
    let ours_args: Vec<String> = ours_args
        .iter()
        .map(|a| a.replace("{STORE}", store.to_str().unwrap()))
        .collect();
    let ref_args: Vec<String> = ref_args
        .iter()
        .map(|a| a.replace("{STORE}", twin_store.to_str().unwrap()))
        .collect();
    let ours = env.run(&ours_args.iter().map(String::as_str).collect::<Vec<_>>());
    let theirs = twin.run_oracle(
        &oracle.wrapper,
        &ref_args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let norm = |s: String, root: &std::path::Path| s.replace(root.to_str().unwrap(), "<ROOT>");
    let ours_out = norm(stdout(&ours), &env.root());
    let theirs_out = norm(stdout(&theirs), &twin.root());
    assert_eq!(
        ours.status.code(),
        theirs.status.code(),
        "exit codes differ; ours stderr: {}",
        stderr(&ours)
    );
    // Text plans may differ in an Age cell by one rounding step (the runs are a second apart).
    assert!(
        crate::textcmp::same_text(&theirs_out, &ours_out),
        "stdout differs for {args:?}:\n{}",
        line_diff(&theirs_out, &ours_out)
    );
    let log = |o: &std::process::Output| -> Vec<String> {
        stderr(o)
            .lines()
            .filter(|l| l.starts_with("[sessions/store]"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(log(&ours), log(&theirs), "log lines differ for {args:?}");
    assert_eq!(
        env.listing(),
        twin.listing(),
        "directory listings differ for {args:?}"
    );
    assert_eq!(
        norm(env.store_text(), &env.root()),
        norm(twin.store_text(), &twin.root()),
        "sessions.json differs for {args:?}"
    );
    Some(ours_out)
}

pub(crate) fn entry(sid: &str, age_ms: i64, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    format!(
        "{{\"sessionId\": \"{sid}\", \"updatedAt\": {}{sep}{extra}}}",
        now_ms() - age_ms
    )
}

/// A store with fresh, stale, protected and synthetic entries plus orphans and archives.
pub(crate) fn mixed_env() -> TestEnv {
    let env = TestEnv::new();
    let store = format!(
        "{{\n  \"agent:main:main\": {},\n  \"agent:main:telegram:direct:12345678901\": {},\n  \"agent:main:slack:channel:c1\": {},\n  \"agent:main:cron:job1\": {},\n  \"agent:main:cron:job1:run:r1\": {},\n  \"agent:main:whatsapp:direct:55\": {}\n}}",
        entry(
            "s-main",
            10 * MIN,
            "\"label\": \"Main\", \"thinkingLevel\": \"high\", \"systemSent\": true"
        ),
        entry("s-old", 40 * DAY, "\"label\": \"Old DM\""),
        entry("s-chan", 40 * DAY, "\"model\": \"anthropic/claude-x\""),
        entry("s-cron", 3 * HOUR, ""),
        entry("s-run", 35 * DAY, ""),
        entry("s-wa", 2 * DAY, "\"chatType\": \"group\"")
    );
    env.write_store(&store);
    for (sid, age) in [
        ("s-main", 10 * MIN),
        ("s-old", 40 * DAY),
        ("s-chan", 40 * DAY),
        ("s-cron", 3 * HOUR),
        ("s-run", 35 * DAY),
        ("s-wa", 2 * DAY),
    ] {
        env.transcript(sid, age);
    }
    env.file("s-old.trajectory.jsonl", "{}\n", 40 * DAY);
    env.file("s-old.trajectory-path.json", "{}", 40 * DAY);
    env.file("orphan.jsonl", "{}\n", 60 * DAY);
    env.file("young-orphan.jsonl", "{}\n", DAY);
    env.file(
        "x.jsonl.deleted.2020-01-01T00-00-00.000Z",
        "old archive",
        10 * DAY,
    );
    env.file(
        "y.jsonl.reset.2020-01-01T00-00-00.000Z",
        "old reset",
        10 * DAY,
    );
    env.file("notes.txt", "keep me", 90 * DAY);
    env
}

#[test]
fn dry_run_json_and_text_match_the_reference() {
    let env = mixed_env();
    let Some(json) = compare(&env, &["--store", "{STORE}", "--dry-run", "--json"]) else {
        return;
    };
    assert!(json.contains("\"pruned\": 2"), "{json}");
    compare(&env, &["--store", "{STORE}", "--dry-run"]);
}

#[test]
fn enforce_matches_the_reference() {
    let env = mixed_env();
    let Some(out) = compare(&env, &["--store", "{STORE}", "--enforce", "--json"]) else {
        return;
    };
    assert!(out.contains("\"applied\": true"));
    let listing = env.listing();
    assert!(
        listing.contains(&"s-old.jsonl.deleted.TS".to_string()),
        "{listing:?}"
    );
    assert!(!listing.contains(&"orphan.jsonl".to_string()));
    assert!(listing.contains(&"notes.txt".to_string()));
}

#[test]
fn cap_model_runs_and_warn_mode_match_the_reference() {
    let env = TestEnv::new();
    env.write_config(r#"{ session: { maintenance: { maxEntries: 3, pruneAfter: "7d" } } }"#);
    let mut members = Vec::new();
    for i in 0..6 {
        members.push(format!(
            "\"agent:main:direct:p{i}\": {}",
            entry(&format!("s{i}"), (i + 1) * HOUR, "")
        ));
        env.transcript(&format!("s{i}"), (i + 1) * HOUR);
    }
    members.push(format!(
        "\"agent:main:explicit:model-run-0123abcd-0000-4000-8000-0123456789ab\": {}",
        entry("probe", 2 * DAY, "")
    ));
    members.push("\"agent:main:nots\": {\"label\": \"no time\"}".to_string());
    env.transcript("probe", 2 * DAY);
    env.write_store(&format!("{{\n  {}\n}}", members.join(",\n  ")));
    if compare(&env, &["--store", "{STORE}", "--dry-run", "--json"]).is_none() {
        return;
    }
    compare(
        &env,
        &[
            "--store",
            "{STORE}",
            "--dry-run",
            "--active-key",
            "agent:main:direct:p5",
        ],
    );
    let warn = env.duplicate();
    warn.write_config(r#"{ session: { maintenance: { maxEntries: 3, mode: "warn" } } }"#);
    compare(&warn, &["--store", "{STORE}", "--json"]);
    compare(&env, &["--store", "{STORE}", "--enforce", "--json"]);
}

#[test]
fn disk_budget_matches_the_reference() {
    let env = TestEnv::new();
    env.write_config(
        r#"{ session: { maintenance: { maxDiskBytes: "3kb", highWaterBytes: "2kb" } } }"#,
    );
    let mut members = Vec::new();
    for i in 0..5 {
        members.push(format!(
            "\"agent:main:direct:p{i}\": {}",
            entry(&format!("b{i}"), (i + 1) * DAY, "")
        ));
        env.file(
            &format!("b{i}.jsonl"),
            &format!("{{\"type\":\"message\"}}\n{}\n", "x".repeat(600)),
            (i + 1) * DAY,
        );
    }
    members.push(format!(
        "\"agent:main:slack:channel:keep\": {}",
        entry("b9", 9 * DAY, "")
    ));
    env.file("b9.jsonl", &"y".repeat(300), 9 * DAY);
    env.file(
        "a.jsonl.deleted.2026-11-01T00-00-00.000Z",
        &"z".repeat(200),
        3 * HOUR,
    );
    env.write_store(&format!("{{\n  {}\n}}", members.join(",\n  ")));
    let Some(plan) = compare(&env, &["--store", "{STORE}", "--dry-run", "--json"]) else {
        return;
    };
    assert!(plan.contains("\"overBudget\": true"), "{plan}");
    assert!(!plan.contains("\"removedEntries\": 0"), "{plan}");
    compare(&env, &["--store", "{STORE}", "--dry-run"]);
    compare(&env, &["--store", "{STORE}", "--enforce", "--json"]);
}

#[test]
fn fix_missing_and_dm_scope_match_the_reference() {
    let env = TestEnv::new();
    let uuid = "0123abcd-0000-4000-8000-0123456789ab";
    let store = format!(
        "{{\n  \"agent:main:main\": {},\n  \"agent:main:gone\": {},\n  \"agent:main:empty\": {},\n  \"agent:main:telegram:direct:42\": {},\n  \"agent:main:direct:bob\": {},\n  \"agent:main:stalefile\": {},\n  \"plain-no-id\": {{\"updatedAt\": {}}}\n}}",
        entry("m1", HOUR, ""),
        entry("gone1", HOUR, ""),
        entry("empty1", HOUR, ""),
        entry("dm1", HOUR, ""),
        entry("dm2", HOUR, ""),
        entry("real1", HOUR, &format!("\"sessionFile\": \"{uuid}.jsonl\"")),
        now_ms() - HOUR
    );
    env.write_store(&store);
    env.transcript("m1", HOUR);
    env.file(
        "empty1.jsonl",
        "{\"type\":\"session\",\"id\":\"empty1\"}\n",
        HOUR,
    );
    env.transcript("dm1", HOUR);
    env.transcript("dm2", HOUR);
    env.transcript("real1", HOUR);
    let args = [
        "--store",
        "{STORE}",
        "--fix-missing",
        "--fix-dm-scope",
        "--active-key",
        "agent:main:direct:bob",
    ];
    let mut dry = args.to_vec();
    dry.extend(["--dry-run", "--json"]);
    let Some(plan) = compare(&env, &dry) else {
        return;
    };
    for want in ["\"repaired\": 1", "\"missing\": 3", "\"dmScopeRetired\": 1"] {
        assert!(plan.contains(want), "{want} in {plan}");
    }
    let mut text = args.to_vec();
    text.push("--dry-run");
    compare(&env, &text);
    let mut apply = args.to_vec();
    apply.extend(["--enforce", "--json"]);
    compare(&env, &apply);
}

/// An entry that `--fix-missing` repairs and a later step prunes: the plan must look at its
/// files as the entry was loaded (the old `sessionFile`), not as repaired, since the plan now
/// works on the loaded store itself instead of a copy. Stale and capped, in both previews and
/// the applied run.
#[test]
fn a_repaired_entry_that_is_then_pruned_is_planned_as_it_was_loaded() {
    let env = TestEnv::new();
    let old = "0123abcd-0000-4000-8000-0123456789ab";
    let other = "4567cdef-0000-4000-8000-0123456789ab";
    let store = format!(
        "{{\n  \"agent:main:main\": {},\n  \"agent:main:stale\": {},\n  \"agent:main:older\": {},\n  \"agent:main:fresh\": {}\n}}",
        entry("m1", HOUR, ""),
        entry(
            "real1",
            40 * DAY,
            &format!("\"sessionFile\": \"{old}.jsonl\"")
        ),
        entry(
            "real2",
            5 * DAY,
            &format!("\"sessionFile\": \"{other}.jsonl\"")
        ),
        entry("f1", 2 * HOUR, ""),
    );
    env.write_store(&store);
    for (sid, age) in [
        ("m1", HOUR),
        ("real1", 40 * DAY),
        ("real2", 5 * DAY),
        ("f1", 2 * HOUR),
    ] {
        env.transcript(sid, age);
    }
    env.transcript(old, 40 * DAY);
    env.transcript(other, 5 * DAY);
    let args = ["--store", "{STORE}", "--fix-missing"];
    // Both repaired entries stay or go: the stale one is pruned, then the other is capped.
    for (config, counts) in [
        (None, ["\"repaired\": 1", "\"pruned\": 1"]),
        (
            Some(r#"{ session: { maintenance: { maxEntries: 2 } } }"#),
            ["\"repaired\": 0", "\"capped\": 1"],
        ),
    ] {
        if let Some(config) = config {
            env.write_config(config);
        }
        let Some(plan) = compare(&env, &[&args[..], &["--dry-run", "--json"]].concat()) else {
            return;
        };
        for count in counts {
            assert!(plan.contains(count), "{count} in {plan}");
        }
        compare(&env, &[&args[..], &["--dry-run"]].concat());
    }
    compare(&env, &[&args[..], &["--enforce", "--json"]].concat());
}

#[test]
fn load_time_normalisation_matches_the_reference() {
    let env = TestEnv::new();
    let t = now_ms() - HOUR;
    env.write_store(&format!(
        r#"{{"b": {{"sessionId": " s1 ", "updatedAt": "soon", "sessionFile": 7, "model": " m "}}, "10": {{"sessionId": "../x"}}, "a": 5, "c": {{"sessionId": "has:colon", "updatedAt": {t}, "provider": "tg", "room": "r"}}, "2": {{"updatedAt": {t}, "skillsSnapshot": {{"x": 1}}}}}}
"#
    ));
    env.transcript("s1", HOUR);
    if compare(&env, &["--store", "{STORE}", "--dry-run", "--json"]).is_none() {
        return;
    }
    compare(&env, &["--store", "{STORE}", "--enforce", "--json"]);
}

#[test]
fn all_agents_and_target_errors_match_the_reference() {
    let env = TestEnv::new();
    env.write_config(r#"{ agents: { list: [ { id: "main", default: true }, { id: "ops" } ] } }"#);
    fs::create_dir_all(env.sessions_dir("ops")).unwrap();
    env.write_store(&format!(
        "{{\"agent:main:main\": {}}}",
        entry("m", HOUR, "")
    ));
    fs::write(
        env.sessions_dir("ops").join("sessions.json"),
        format!("{{\"agent:ops:main\": {}}}", entry("o", 40 * DAY, "")),
    )
    .unwrap();
    if compare(&env, &["--all-agents", "--dry-run", "--json"]).is_none() {
        return;
    }
    compare(&env, &["--all-agents", "--dry-run"]);
    compare(&env, &["--agent", "ops", "--dry-run", "--json"]);
    let o = env.run(&["cleanup", "--agent", "nope", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains(
        "Unknown agent id \"nope\". Use \"openclaw agents list\" to see configured agents."
    ));
    let o = env.run(&["cleanup", "--agent", "ops", "--all-agents", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--agent and --all-agents cannot be used together"));
    let o = env.run(&[
        "cleanup",
        "--store",
        "x.json",
        "--agent",
        "ops",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--store cannot be combined with --agent or --all-agents"));
    // Without --store an apply goes to the gateway in OpenClaw; clawkeeper works offline.
    let o = env.run(&["cleanup", "--all-agents", "--enforce", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("{\n  \"allAgents\": true,\n  \"mode\": \"enforce\",\n  \"dryRun\": false,\n  \"stores\": ["), "{out}");
    assert!(out.contains("\"appliedCount\": 0"), "{out}");
}

/// Snapshot of every file under the temp root: path → bytes (symlinks as their target).
fn snapshot(env: &TestEnv) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walk(&env.root()) {
        let meta = fs::symlink_metadata(&e).unwrap();
        let body = if meta.file_type().is_symlink() {
            fs::read_link(&e)
                .unwrap()
                .to_string_lossy()
                .as_bytes()
                .to_vec()
        } else if meta.is_file() {
            fs::read(&e).unwrap()
        } else {
            Vec::new()
        };
        out.push((e.to_string_lossy().into_owned(), body));
    }
    out.sort();
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        out.push(p.clone());
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walk(&p));
        }
    }
    out
}

#[test]
fn garbage_and_array_stores_are_refused_untouched() {
    for text in [
        "{\"agent:main:main\": {\"sessionId\": \"x\",,}",
        "[1, 2]",
        "",
    ] {
        let env = TestEnv::new();
        env.write_store(text);
        env.file("orphan.jsonl", "{}", 90 * DAY);
        let before = snapshot(&env);
        for mode in ["--enforce", "--dry-run"] {
            let o = env.run(&[
                "cleanup",
                "--store",
                env.store_path().to_str().unwrap(),
                mode,
            ]);
            assert_eq!(o.status.code(), Some(3), "{text:?}: {}", stderr(&o));
            let err = stderr(&o);
            assert!(err.starts_with("clawkeeper: refusing to touch"), "{err}");
            assert!(err.contains("sessions.json"), "{err}");
            assert!(err.contains("line "), "{err}");
        }
        assert_eq!(snapshot(&env), before, "nothing may change for {text:?}");
    }
}

#[test]
fn symlinks_and_escaping_session_files_never_touch_outside() {
    let env = TestEnv::new();
    let outside = env.root().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("victim.jsonl"), "precious").unwrap();
    fs::write(outside.join("esc.jsonl"), "precious too").unwrap();
    let link = env.sessions_dir("main").join("linked.jsonl");
    symlink(outside.join("victim.jsonl"), &link).unwrap();
    symlink(
        outside.join("victim.jsonl"),
        env.sessions_dir("main")
            .join("z.jsonl.deleted.2020-01-01T00-00-00.000Z"),
    )
    .unwrap();
    env.write_store(&format!(
        "{{\"agent:main:a\": {}, \"agent:main:b\": {}, \"agent:main:c\": {}}}",
        entry("linked", 90 * DAY, ""),
        entry(
            "esc",
            90 * DAY,
            "\"sessionFile\": \"../../../../outside/esc.jsonl\""
        ),
        entry(
            "abs",
            90 * DAY,
            &format!(
                "\"sessionFile\": \"{}\"",
                outside.join("victim.jsonl").display()
            )
        )
    ));
    env.write_config(r#"{ session: { maintenance: { maxDiskBytes: 10 } } }"#);
    let o = env.run(&[
        "cleanup",
        "--store",
        env.store_path().to_str().unwrap(),
        "--enforce",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        fs::read_to_string(outside.join("victim.jsonl")).unwrap(),
        "precious"
    );
    assert_eq!(
        fs::read_to_string(outside.join("esc.jsonl")).unwrap(),
        "precious too"
    );
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the symlink stays"
    );
    assert!(
        fs::symlink_metadata(
            env.sessions_dir("main")
                .join("z.jsonl.deleted.2020-01-01T00-00-00.000Z")
        )
        .unwrap()
        .file_type()
        .is_symlink()
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 2);
}

#[test]
fn sqlite_agents_without_a_usable_database_are_refused() {
    let env = TestEnv::new();
    env.write_store(&format!(
        "{{\"agent:main:a\": {}}}",
        entry("a", 90 * DAY, "")
    ));
    env.transcript("a", 90 * DAY);
    let agent_dir = env.state().join("agents/main/agent");
    fs::create_dir_all(&agent_dir).unwrap();
    fs::write(agent_dir.join("openclaw-agent.sqlite"), "").unwrap();
    let before = snapshot(&env);
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("SQLite"));
    assert_eq!(snapshot(&env), before);
    // The database is the live store: one that is not an agent database is not previewed
    // either (the SQLite-era cleanup itself is tested in agentdb_cleanup).
    let o = env.run(&["cleanup", "--dry-run", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("SQLite"));
    assert_eq!(snapshot(&env), before);
}

#[test]
fn max_delete_refuses_large_plans() {
    let env = TestEnv::new();
    let members: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "\"agent:main:k{i}\": {}",
                entry(&format!("m{i}"), 90 * DAY, "")
            )
        })
        .collect();
    env.write_store(&format!("{{{}}}", members.join(", ")));
    for i in 0..4 {
        env.transcript(&format!("m{i}"), 90 * DAY);
    }
    let before = snapshot(&env);
    for limit in ["3", "50%"] {
        let o = env.run(&["cleanup", "--enforce", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
        assert!(stderr(&o).contains("--max-delete"));
        assert_eq!(snapshot(&env), before);
    }
    let o = env.run(&["cleanup", "--enforce", "--max-delete", "4", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"appliedCount\": 0"));
}

#[test]
fn flag_overrides_apply_on_top_of_config() {
    let env = TestEnv::new();
    env.write_config(r#"{ session: { maintenance: { pruneAfter: "90d" } } }"#);
    env.write_store(&format!(
        "{{\"agent:main:a\": {}, \"agent:main:b\": {}}}",
        entry("a", 3 * DAY, ""),
        entry("b", HOUR, "")
    ));
    let o = env.run(&["cleanup", "--dry-run", "--json", "--prune-after", "2d"]);
    assert!(stdout(&o).contains("\"pruned\": 1"), "{}", stdout(&o));
    let o = env.run(&["cleanup", "--dry-run", "--json", "--max-entries", "1"]);
    assert!(stdout(&o).contains("\"capped\": 1"), "{}", stdout(&o));
    let o = env.run(&["cleanup", "--dry-run", "--json", "--max-disk", "lots"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_symlinked_store_is_refused_for_writes() {
    let env = TestEnv::new();
    let real = env.root().join("real-sessions.json");
    fs::write(
        &real,
        format!("{{\"agent:main:a\": {}}}", entry("a", 90 * DAY, "")),
    )
    .unwrap();
    symlink(&real, env.store_path()).unwrap();
    env.transcript("a", 90 * DAY);
    let before = snapshot(&env);
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("symlink"));
    assert_eq!(snapshot(&env), before);
    let o = env.run(&["cleanup", "--dry-run", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"pruned\": 1"));
}

#[test]
fn artifacts_checkpoints_trajectories_and_subdirs_match_the_reference() {
    let env = TestEnv::new();
    let d = env.sessions_dir("main");
    fs::create_dir_all(d.join("sub")).unwrap();
    let u = "0123abcd-0000-4000-8000-0123456789ab";
    let cp = |sid: &str| {
        d.join(format!("{sid}.checkpoint.{u}.jsonl"))
            .display()
            .to_string()
    };
    env.write_store(&format!(
        "{{\n  \"agent:main:a\": {},\n  \"agent:main:b\": {},\n  \"agent:main:c\": {},\n  \"agent:main:d\": {},\n  \"agent:main:e\": {},\n  \"agent:main:f\": {},\n  \"agent:main:g\": {{\"sessionFile\": \"g-nosid.jsonl\", \"updatedAt\": {}}}\n}}",
        entry("shared", 40 * DAY, ""),
        entry("shared", HOUR, "\"sessionFile\": \"shared.jsonl\""),
        entry("c1", 50 * DAY, "\"sessionFile\": \"sub/c1.jsonl\""),
        entry("d1", 50 * DAY, &format!("\"compactionCheckpoints\": [{{\"preCompaction\": {{\"sessionFile\": \"{}\"}}, \"postCompaction\": {{}}}}]", cp("d1"))),
        entry("e1", HOUR, &format!("\"compactionCheckpoints\": [{{\"preCompaction\": {{\"sessionFile\": \"{}\"}}, \"postCompaction\": {{\"sessionFile\": \" \"}}}}]", cp("e1"))),
        entry("f1", 45 * DAY, ""),
        now_ms() - 45 * DAY
    ));
    for sid in ["shared", "sub/c1", "d1", "e1", "f1", "g-nosid"] {
        env.file(
            &format!("{sid}.jsonl"),
            "{\"type\":\"session\"}\n{\"type\":\"message\"}\n",
            HOUR,
        );
    }
    env.file(&format!("d1.checkpoint.{u}.jsonl"), "{}", HOUR);
    env.file(&format!("e1.checkpoint.{u}.jsonl"), "{}", HOUR);
    env.file(
        "f1.trajectory-path.json",
        &format!(
            "{{\"traceSchema\":\"openclaw-trajectory-pointer\",\"schemaVersion\":1,\"sessionId\":\"f1\",\"runtimeFile\":\"{}\"}}",
            d.join("f1-custom.trajectory.jsonl").display()
        ),
        HOUR,
    );
    env.file("f1-custom.trajectory.jsonl", "rt", 40 * DAY);
    env.file("f1.trajectory.jsonl", "rt", HOUR);
    env.file(&format!("sessions.json.12345.{u}.tmp"), "{}", 10 * MIN);
    env.file(&format!("sessions.json.999.{u}.tmp"), "{}", MIN);
    env.file("zz.jsonl.bak.2020-01-01T00-00-00.000Z", "old", HOUR);
    env.file("sessions.json.bak.1700000000000", "bk", HOUR);
    env.file(&format!("orphan.checkpoint.{u}.jsonl"), "orph", 40 * DAY);
    env.file("empty-orphan.jsonl", "", 40 * DAY);
    if compare(&env, &["--store", "{STORE}", "--dry-run", "--json"]).is_none() {
        return;
    }
    compare(&env, &["--store", "{STORE}", "--enforce", "--json"]);
    assert!(env.listing().contains(&"f1.jsonl.deleted.TS".to_string()));
    assert!(d.join("sub").read_dir().unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("c1.jsonl.deleted.")
    }));
}

#[test]
fn table_rendering_matches_the_reference() {
    let env = TestEnv::new();
    env.write_config(
        r#"{ agents: { defaults: { model: { primary: "anthropic/claude-opus-4" } }, list: [ { id: "main", model: "openai/gpt-4.1" }, { id: "ops" } ] } }"#,
    );
    let old = 40 * DAY;
    let members = [
        format!(
            "\"agent:main:discord:channel:123:thread:456\": {}",
            entry("t1", old, "")
        ),
        format!(
            "\"agent:main:telegram:group:-100:topic:5\": {}",
            entry("t2", old, "")
        ),
        format!(
            "\"agent:main:slack:direct:u1:thread:9\": {}",
            entry("t3", old, "")
        ),
        format!(
            "\"Agent:Main:Direct:Bob\": {}",
            entry("t4", old, "\"label\": \"zeta\"")
        ),
        format!(
            "\"agent:ops:main\": {}",
            entry("t5", 5_000, "\"label\": \"Alpha\"")
        ),
        format!(
            "\"agent:main:hook:gmail:x\": {}",
            entry("t6", old, "\"label\": \"alpha\"")
        ),
        format!(
            "\"agent:main:node:abc\": {}",
            entry(
                "t7",
                old,
                "\"modelOverride\": \"openai/o3\", \"providerOverride\": \"openai\""
            )
        ),
        format!(
            "\"agent:main:heartbeat\": {}",
            entry("t8", old, "\"chatType\": \"group\", \"label\": \"_x\"")
        ),
        format!(
            "\"agent:main:matrix:channel:!RoomAbc:ex.org\": {}",
            entry("t9", old, "")
        ),
        format!(
            "\"global\": {}",
            entry("t10", old, "\"label\": \"Ünïcode\"")
        ),
        format!(
            "\"agent:main:wëbchät:dïrect:ünïcödé-user-with-long-name\": {}",
            entry(
                "t11",
                3 * HOUR,
                "\"model\": \"x/y/z\", \"verboseLevel\": \"on\", \"abortedLastRun\": true, \"responseUsage\": \"full\", \"traceLevel\": \"t\""
            )
        ),
        "\"agent:main:nots\": {\"sessionId\": \"t12\", \"label\": \"  \"}".to_string(),
        "\"agent:main:zero\": {\"sessionId\": \"t13\", \"updatedAt\": 0, \"label\": \"b\"}"
            .to_string(),
        format!(
            "\"agent:main:cron:j:run:r\": {}",
            entry("t14", 2 * DAY, "\"label\": \"B\"")
        ),
    ];
    env.write_store(&format!("{{\n  {}\n}}", members.join(",\n  ")));
    let Some(text) = compare(&env, &["--store", "{STORE}", "--dry-run"]) else {
        return;
    };
    assert!(text.contains("Summary by Label:"), "{text}");
    compare(
        &env,
        &[
            "--store",
            "{STORE}",
            "--dry-run",
            "--fix-dm-scope",
            "--active-key",
            "Agent:Main:Direct:Bob",
        ],
    );
    compare(&env, &["--store", "{STORE}", "--enforce", "--json"]);
}
