//! `inspect` on generated stores: every count against an independent computation, and every
//! `reclaimable` figure against what the command then actually frees on the same files.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::generator::{Rng, generate, generate_long};
use crate::model::Model;
use crate::util::TestEnv;

const DAY_MS: u64 = 86_400_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn set_age(p: &Path, days: u64) {
    let t = SystemTime::now() - Duration::from_secs(days * 86_400);
    fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(t))
        .unwrap();
}

const KEYS: &[&str] = &[
    "agent:main:main",
    "agent:main:telegram:direct:123",
    "agent:main:discord:group:g1",
    "agent:main:slack:channel:c9",
    "agent:main:cron:job1",
    "agent:main:cron:job1:run:r1",
    "agent:main:cron:job1:run:r2",
    "agent:main:subagent:s1",
    "agent:main:hook:gmail:x",
    "agent:main:heartbeat",
    "agent:main:acp:a1",
    "agent:main:whatsapp:direct:+1555",
];

/// A seeded store: entries of many kinds (some old, one with a missing transcript, two
/// sharing one), generated transcripts, and every other file family.
/// Seed `base` of a test, moved by `CLAWKEEPER_INSPECT_SEED_OFFSET` (to run the same checks on
/// stores never generated before).
fn seed(base: u64) -> u64 {
    base + std::env::var("CLAWKEEPER_INSPECT_SEED_OFFSET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn build_store(env: &TestEnv, seed: u64) -> PathBuf {
    let dir = env.sessions_dir("main");
    fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(seed);
    let now = now_ms();
    let mut store = serde_json::Map::new();
    for (i, key) in KEYS.iter().enumerate() {
        let id = format!("s{seed}-{i}");
        let age_days = [0, 1, 3, 10, 45, 90][rng.below(6)];
        store.insert(
            (*key).into(),
            json!({"sessionId": id, "updatedAt": now - age_days * DAY_MS - i as u64, "chatType": "direct"}),
        );
        if i == 3 {
            continue; // missing transcript
        }
        let g = if i % 4 == 0 {
            generate_long(seed * 100 + i as u64, 150)
        } else {
            generate(seed * 100 + i as u64)
        };
        fs::write(dir.join(format!("{id}.jsonl")), &g.bytes).unwrap();
    }
    // Two keys sharing one transcript.
    let shared = store["agent:main:main"].clone();
    store.insert("agent:main:main:thread:t1".into(), shared);
    let text = serde_json::to_string_pretty(&Value::Object(store)).unwrap();
    fs::write(dir.join("sessions.json"), text).unwrap();
    // Other families.
    let old = |name: &str, bytes: &[u8], days: u64| {
        let p = dir.join(name);
        fs::write(&p, bytes).unwrap();
        set_age(&p, days);
    };
    old("orphan-1.jsonl", &generate(seed + 7).bytes, 60);
    old("orphan-2.jsonl", b"{}\n", 0);
    old(
        &format!("s{seed}-0.checkpoint.123e4567-e89b-42d3-a456-426614174000.jsonl"),
        b"{\"type\":\"session\"}\n",
        2,
    );
    old(
        "gone.jsonl.deleted.2025-01-01T00-00-00.000Z",
        &[b'x'; 300],
        200,
    );
    old("gone.jsonl.reset.2026-11-01T00-00-00.000Z", &[b'y'; 200], 5);
    old("sessions.json.bak.1700000000000", b"{}", 300);
    old(
        "sessions.json.123.123e4567-e89b-42d3-a456-426614174000.tmp",
        b"{}",
        1,
    );
    old(&format!("s{seed}-1.trajectory.jsonl"), &[b't'; 77], 1);
    old(
        &format!("s{seed}-1.jsonl.lock"),
        b"{\"pid\": 999999999, \"createdAt\": \"2020-01-01T00:00:00.000Z\"}\n",
        1,
    );
    old("notes.txt", b"hello", 1);
    dir.join("sessions.json")
}

fn inspect(env: &TestEnv, store: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "inspect",
        "--store",
        store.to_str().unwrap(),
        "--limit",
        "0",
    ];
    args.extend_from_slice(extra);
    let (code, v) = env.run_json(&args);
    assert_eq!(code, 0, "{v}");
    v
}

/// Give entries of the store skill prompts as OpenClaw keeps them: one inline prompt long
/// enough to move to a blob on the next save (the store shrinks), one `promptRef` to a valid
/// blob, one to a blob that is missing (the entry's snapshot is dropped).
fn add_prompt_blobs(store: &Path) {
    let dir = store.parent().unwrap();
    let mut v: Value = serde_json::from_slice(&fs::read(store).unwrap()).unwrap();
    let long = "Use the skills below when they apply. ".repeat(40);
    v[KEYS[1]]["skillsSnapshot"] = json!({"prompt": long, "skills": ["a"]});
    let text = "Skill prompt kept as a blob. ".repeat(30);
    let hash = clawkeeper::store::blobs::sha256_hex(text.as_bytes());
    let blob = dir.join(format!("skills-prompts/sha256/{}/{hash}.txt", &hash[..2]));
    fs::create_dir_all(blob.parent().unwrap()).unwrap();
    fs::write(&blob, &text).unwrap();
    let reference = |hash: &str| json!({"promptRef": {"version": 1, "algorithm": "sha256", "hash": hash, "bytes": text.len()}});
    v[KEYS[2]]["skillsSnapshot"] = reference(&hash);
    v[KEYS[4]]["skillsSnapshot"] = reference(&"0".repeat(64));
    fs::write(store, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Image blocks (count, JSON bytes) in a content value, nested `content` arrays included.
fn images_in(content: &Value, out: &mut (u64, u64)) {
    let Value::Array(blocks) = content else {
        return;
    };
    for b in blocks {
        if b["type"] == "image" {
            out.0 += 1;
            out.1 += b.to_string().len() as u64;
        } else if let Some(inner) = b.get("content") {
            images_in(inner, out);
        }
    }
}

#[test]
fn counts_match_an_independent_computation() {
    for seed in (1..=3u64).map(seed) {
        let env = TestEnv::new();
        let store = build_store(&env, seed);
        let dir = store.parent().unwrap().to_path_buf();
        let v = inspect(&env, &store, &["--no-cleanup"]);
        let s = &v["stores"][0];
        assert_eq!(s["entries"], KEYS.len() + 1);
        assert_eq!(s["diskBytes"], dir_bytes(&dir));
        let files = s["files"].as_object().unwrap();
        let sum: u64 = files.values().map(|f| f["bytes"].as_u64().unwrap()).sum();
        let count: u64 = files.values().map(|f| f["count"].as_u64().unwrap()).sum();
        assert_eq!(sum, dir_bytes(&dir));
        assert_eq!(count as usize, fs::read_dir(&dir).unwrap().count());
        assert_eq!(files["unreferencedTranscripts"]["count"], 2);
        assert_eq!(files["transcripts"]["count"], KEYS.len() - 1);
        assert_eq!(files["archivesDeleted"]["count"], 1);
        assert_eq!(files["archivesReset"]["count"], 1);
        assert_eq!(files["storeBackups"]["count"], 1);
        assert_eq!(files["checkpoints"]["count"], 1);
        assert_eq!(files["trajectories"]["count"], 1);
        assert_eq!(files["staleTemps"]["count"], 1);
        assert_eq!(files["locks"]["count"], 1);
        assert_eq!(files["other"]["count"], 1);
        assert_eq!(files["store"]["bytes"], fs::metadata(&store).unwrap().len());
        let kinds: u64 = s["kinds"]
            .as_object()
            .unwrap()
            .values()
            .map(|k| k["entries"].as_u64().unwrap())
            .sum();
        assert_eq!(kinds as usize, KEYS.len() + 1);
        assert_eq!(s["kinds"]["cron-run"]["entries"], 2);
        assert_eq!(s["kinds"]["heartbeat"]["entries"], 1);
        assert_eq!(s["kinds"]["subagent"]["entries"], 1);
        assert_eq!(s["damage"]["missingTranscripts"], json!([KEYS[3]]));
        assert_eq!(s["damage"]["locks"][0]["stale"][0], "dead-pid");
        let sessions = s["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), KEYS.len() + 1);
        for row in sessions {
            if row["missing"] == true {
                assert_eq!(row["key"], KEYS[3]);
                continue;
            }
            let path = dir.join(format!("{}.jsonl", row["sessionId"].as_str().unwrap()));
            let bytes = fs::read(&path).unwrap();
            let m = Model::new(&bytes);
            let (mut entries, mut messages, mut silent) = (0u64, 0u64, 0u64);
            let mut img = (0u64, 0u64);
            for (i, val) in m.values.iter().enumerate() {
                let Some(val) = val else { continue };
                if val["type"] != "session" {
                    entries += 1;
                }
                if val["type"] == "message" {
                    messages += 1;
                    images_in(&val["message"]["content"], &mut img);
                    silent += u64::from(m.is_silent(i));
                }
                if val["type"] == "custom_message" {
                    images_in(&val["content"], &mut img);
                }
            }
            let key = row["key"].as_str().unwrap();
            assert_eq!(row["transcriptBytes"], bytes.len(), "{key}");
            assert_eq!(row["entries"], entries, "{key}");
            assert_eq!(row["messages"], messages, "{key}");
            assert_eq!(row["images"], img.0, "{key}");
            assert_eq!(row["imageBytes"], img.1, "{key}");
            assert_eq!(row["silentReplies"], silent, "{key}");
            // (No estimate when the active branch runs through a line only the runtime parses.)
            let unparsable = !row["unparsableLines"].as_array().unwrap().is_empty();
            assert!(
                row["estimatedContextTokens"].as_u64().unwrap() > 0 || unparsable,
                "{key} {row}"
            );
        }
        // Filters.
        let v = inspect(&env, &store, &["--no-cleanup", "--kind", "cron-run"]);
        assert_eq!(v["stores"][0]["sessions"].as_array().unwrap().len(), 2);
        let v = inspect(&env, &store, &["--no-cleanup", "--session", KEYS[1]]);
        assert_eq!(v["stores"][0]["sessions"][0]["key"], KEYS[1]);
        let v = inspect(&env, &store, &["--no-cleanup", "--older-than", "400d"]);
        assert_eq!(v["stores"][0]["sessions"], json!([]));
    }
}

/// Every unique transcript of the store, as the report lists them.
fn transcripts(report: &Value) -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    report["stores"][0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["missing"] == false)
        .map(|r| PathBuf::from(r["transcript"].as_str().unwrap()))
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

#[test]
fn transcript_commands_free_what_inspect_predicts() {
    for seed in (4..=6u64).map(seed) {
        for (cmd, extra, key) in [
            (
                "compact",
                &["--keep-recent-tokens", "300", "--min-tokens", "0"][..],
                "compactTokens",
            ),
            ("strip-images", &["--keep-turns", "1"][..], "strip-images"),
            ("prune-noreply", &["--keep", "1"][..], "prune-noreply"),
        ] {
            // A fresh store per command: each prediction is "if this command ran".
            let env = TestEnv::new();
            let store = build_store(&env, seed);
            let dir = store.parent().unwrap().to_path_buf();
            let v = inspect(&env, &store, &[&["--no-cleanup"][..], extra].concat());
            let r = &v["stores"][0]["reclaimable"];
            let files = transcripts(&v);
            if cmd == "compact" {
                // compact: against the dry run's own figures.
                let mut saved = 0;
                for f in &files {
                    let args = ["compact", "--dry-run", "--transcript", f.to_str().unwrap()];
                    let (_, c) = env.run_json(&[&args[..], extra].concat());
                    for t in c["transcripts"].as_array().unwrap() {
                        if t["status"] == "would-change" {
                            saved += t["details"]["tokensSaved"].as_u64().unwrap();
                        }
                    }
                }
                assert_eq!(r[key], saved, "seed {seed}");
                assert!(saved > 0, "seed {seed}: something to compact");
                continue;
            }
            let before = dir_bytes(&dir) as i64;
            for f in &files {
                let size = fs::metadata(f).unwrap().len() as i64;
                let out = env.run(&[
                    cmd,
                    "--enforce",
                    "--transcript",
                    f.to_str().unwrap(),
                    extra[0],
                    extra[1],
                ]);
                assert!(
                    out.status.success() || out.status.code() == Some(3),
                    "{out:?}"
                );
                let row = v["stores"][0]["sessions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["transcript"].as_str() == f.to_str())
                    .unwrap();
                let freed = size - fs::metadata(f).unwrap().len() as i64;
                let lock = dir.join(format!("{}.lock", f.file_name().unwrap().to_str().unwrap()));
                let lock_freed = if lock.exists() { 0 } else { 60 };
                let has_lock = f.ends_with(format!("s{seed}-1.jsonl"));
                let expected = freed
                    + if has_lock && freed != 0 {
                        lock_freed
                    } else {
                        0
                    };
                assert_eq!(
                    row["reclaimable"][key],
                    expected,
                    "{cmd} seed {seed} {}",
                    f.display()
                );
            }
            let freed = before - dir_bytes(&dir) as i64;
            assert_eq!(r[key], freed, "{cmd} seed {seed}");
            assert_ne!(
                freed, 0,
                "{cmd} seed {seed}: the store should hold something to change"
            );
        }
    }
}

#[test]
fn cleanup_frees_what_inspect_predicts_and_inspect_writes_nothing() {
    // Seed 11's store is padded past 4 MiB: a store that large has its cleanup predicted
    // before the transcript pass, a smaller one beside it.
    for (seed, flags) in [
        (seed(7), vec!["--prune-after", "30d"]),
        (seed(8), vec!["--max-entries", "5"]),
        (seed(9), vec!["--max-disk", "40kb", "--prune-after", "400d"]),
        (10, vec!["--prune-after", "30d"]),
        (11, vec!["--prune-after", "30d"]),
    ] {
        let env = TestEnv::new();
        let store = build_store(&env, seed);
        if seed == 10 {
            add_prompt_blobs(&store);
        }
        if seed == 11 {
            pad_store(&store, 5 << 20);
        }
        let dir = store.parent().unwrap().to_path_buf();
        let snapshot = |d: &Path| -> BTreeMap<String, Vec<u8>> {
            walkdir::WalkDir::new(d)
                .into_iter()
                .map(|e| e.unwrap())
                .filter(|e| e.file_type().is_file())
                .map(|e| {
                    (
                        e.path().strip_prefix(d).unwrap().display().to_string(),
                        fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        };
        let before_files = snapshot(&dir);
        let v = inspect(&env, &store, &flags);
        assert_eq!(snapshot(&dir), before_files, "inspect must not write");
        let predicted = v["stores"][0]["reclaimable"]["cleanup"].as_i64().unwrap();
        let before = dir_bytes(&dir) as i64;
        let mut args = vec!["cleanup", "--enforce", "--store", store.to_str().unwrap()];
        args.extend_from_slice(&flags);
        let out = env.run(&args);
        assert!(out.status.success(), "{out:?}");
        let freed = before - dir_bytes(&dir) as i64;
        assert_eq!(predicted, freed, "seed {seed} {flags:?}");
        if seed == 10 {
            let blobs = walkdir::WalkDir::new(dir.join("skills-prompts"))
                .into_iter()
                .filter(|e| e.as_ref().unwrap().file_type().is_file())
                .count();
            assert_eq!(blobs, 2, "the long inline prompt moved to a blob");
        }
        assert!(freed > 0, "seed {seed}: cleanup should free something");
    }
}

/// Add to the store an entry updated now that holds `bytes` of text in a field nothing reads
/// (cleanup keeps it as it is).
fn pad_store(store: &Path, bytes: usize) {
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(store).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    v.as_object_mut().unwrap().insert(
        "agent:main:padding".into(),
        serde_json::json!({"sessionId": "padding", "updatedAt": now, "padding": "x".repeat(bytes)}),
    );
    fs::write(store, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    assert!(fs::metadata(store).unwrap().len() > 4 << 20);
}

#[test]
fn human_report_fits_80_columns() {
    let env = TestEnv::new();
    let store = build_store(&env, 11);
    let out = env.run(&[
        "inspect",
        "--store",
        store.to_str().unwrap(),
        "--prune-after",
        "30d",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Sessions:"), "{text}");
    assert!(text.contains("cleanup --enforce"), "{text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "too wide ({}): {line}",
            line.chars().count()
        );
    }
}

#[test]
fn a_database_that_is_not_an_agent_database_is_named_and_not_taken_for_the_store() {
    let env = TestEnv::new();
    let store = build_store(&env, 12);
    let agent = store.parent().unwrap().parent().unwrap().join("agent");
    fs::create_dir_all(&agent).unwrap();
    fs::write(agent.join("openclaw-agent.sqlite"), b"").unwrap();
    let out = env.run(&["inspect", "--store", store.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", crate::util::stderr(&out));
    let err = crate::util::stderr(&out);
    assert!(
        err.contains("openclaw-agent.sqlite: not an OpenClaw agent database"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A half-finished migration: `sessions.json` is still there beside the database, which is
/// the live store.
#[test]
fn a_store_left_beside_the_database_is_reported_and_the_database_is_the_store() {
    let Some(env) = crate::agentdb::imported(crate::util::SQLITE_LATEST) else {
        return;
    };
    fs::create_dir_all(env.sessions_dir("main")).unwrap();
    env.write_store("{}");
    let (code, v) = env.run_json(&["inspect"]);
    assert_eq!(code, 0, "{v}");
    let s = &v["stores"][0];
    assert!(
        s["storePath"]
            .as_str()
            .unwrap()
            .ends_with("openclaw-agent.sqlite"),
        "{s}"
    );
    assert_eq!(s["files"]["legacyStore"]["count"], 1);
    assert!(
        s["notes"]
            .to_string()
            .contains("the database is the live store"),
        "{s}"
    );
}

#[test]
fn all_agents_reports_every_store_and_the_totals() {
    let env = TestEnv::new();
    let main_store = build_store(&env, 13);
    env.write_config(r#"{"agents":{"list":[{"id":"main","default":true},{"id":"ops"}]}}"#);
    let ops = env.sessions_dir("ops");
    fs::create_dir_all(&ops).unwrap();
    fs::write(ops.join("o1.jsonl"), &generate(99).bytes).unwrap();
    let store = json!({"agent:ops:main": {"sessionId": "o1", "updatedAt": now_ms()}});
    fs::write(ops.join("sessions.json"), store.to_string()).unwrap();
    let (code, v) = env.run_json(&["inspect", "--all-agents", "--no-cleanup", "--limit", "0"]);
    assert_eq!(code, 0, "{v}");
    let stores = v["stores"].as_array().unwrap();
    assert_eq!(stores.len(), 2);
    assert_eq!(stores[0]["storePath"], main_store.to_str().unwrap());
    assert_eq!(stores[1]["agentId"], "ops");
    assert_eq!(stores[1]["entries"], 1);
    assert_eq!(stores[1]["diskBytes"], dir_bytes(&ops));
    assert_eq!(
        v["totals"]["diskBytes"],
        dir_bytes(&ops) + dir_bytes(main_store.parent().unwrap())
    );
    let out = env.run(&["inspect", "--all-agents"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("All agents"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

/// Checkpoint files named by absolute path (as OpenClaw writes `compactionCheckpoints`) are
/// referenced: the prediction's mirror resolves them as the real run does, so it does not take
/// them for old unreferenced artifacts.
#[test]
fn absolute_checkpoint_paths_are_resolved_as_the_real_run_resolves_them() {
    let env = TestEnv::new();
    let dir = env.sessions_dir("main");
    let u = "0123abcd-0000-4000-8000-0123456789ab";
    let mut store = serde_json::Map::new();
    for i in 0..3 {
        let sid = format!("cp{i}");
        env.transcript(&sid, 0);
        let pre = dir.join(format!("{sid}.checkpoint.{u}.jsonl"));
        let post = dir.join(format!("{sid}-post.checkpoint.{u}.jsonl"));
        for p in [&pre, &post] {
            fs::write(p, "x".repeat(5_000 + i * 100)).unwrap();
            crate::util::set_age(p, 90 * crate::util::DAY);
        }
        store.insert(
            format!("agent:main:k{i}"),
            json!({
                "sessionId": sid,
                "updatedAt": crate::util::now_ms(),
                "compactionCheckpoints": [{
                    "preCompaction": {"sessionFile": pre.display().to_string()},
                    "postCompaction": {"sessionFile": post.display().to_string()},
                }],
            }),
        );
    }
    // One old orphan that cleanup does remove.
    let orphan = dir.join(format!("gone.checkpoint.{u}.jsonl"));
    fs::write(&orphan, "o".repeat(3_000)).unwrap();
    crate::util::set_age(&orphan, 90 * crate::util::DAY);
    let store_path = dir.join("sessions.json");
    fs::write(
        &store_path,
        serde_json::to_string_pretty(&Value::Object(store)).unwrap(),
    )
    .unwrap();
    let v = inspect(&env, &store_path, &[]);
    let predicted = v["stores"][0]["reclaimable"]["cleanup"].as_i64().unwrap();
    let before = dir_bytes(&dir) as i64;
    let out = env.run(&[
        "cleanup",
        "--enforce",
        "--store",
        store_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let freed = before - dir_bytes(&dir) as i64;
    assert_eq!(predicted, freed);
    assert!(
        !orphan.exists() && freed >= 3_000,
        "the orphan went: {freed}"
    );
    assert!(dir.join(format!("cp0.checkpoint.{u}.jsonl")).exists());
}
