//! `clawkeeper compact --successor`: a new transcript the runtime loads, the store entry
//! pointing at it, the old file untouched; previews write nothing.

use std::path::Path;

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{EXTENDED, STABLE, TestEnv, oracle_of};

const STORE: &str = "agents/main/sessions/sessions.json";

fn setup(env: &TestEnv) -> Vec<u8> {
    let bytes = generate_long(31, 200).bytes;
    env.write("agents/main/sessions/s1.jsonl", &bytes);
    env.write(
        STORE,
        br#"{
  "agent:main:main": {
    "sessionId": "s1",
    "updatedAt": 1772442000000,
    "compactionCount": 2
  },
  "agent:main:other": {
    "sessionId": "missing",
    "updatedAt": 1
  }
}"#,
    );
    bytes
}

/// `compact --successor --enforce` of the main session, keeping 400 tokens: exit code and
/// report.
fn compact_main_successor(env: &TestEnv) -> (i32, Value) {
    compact_main_successor_in(env, "--enforce")
}

/// The successor compaction of `agent:main:main` in `mode` (`--enforce`, `--dry-run`, or `""`
/// for a preview): the exit code and the report.
fn compact_main_successor_in(env: &TestEnv, mode: &str) -> (i32, Value) {
    let mut args = vec![
        "compact",
        "--store",
        STORE,
        "--session",
        "agent:main:main",
        "--successor",
        "--keep-recent-tokens",
        "400",
        "--min-tokens",
        "0",
    ];
    if !mode.is_empty() {
        args.push(mode);
    }
    env.run_json(&args)
}

/// [`compact_main_successor`], which must change the transcript: its report.
#[track_caller]
fn successor_of_main(env: &TestEnv) -> Value {
    let (code, r) = compact_main_successor(env);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["transcripts"][0]["status"], "changed", "{r}");
    r["transcripts"][0].clone()
}

/// Every line of a transcript, parsed.
fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn names(env: &TestEnv) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(env.path("agents/main/sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn successor_is_written_loaded_and_pointed_at() {
    let env = TestEnv::new();
    let old = setup(&env);
    let store_before = std::fs::read(env.path(STORE)).unwrap();
    // Preview and dry-run write nothing.
    for mode in ["", "--dry-run"] {
        let (code, r) = compact_main_successor_in(&env, mode);
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["transcripts"][0]["status"], "would-change", "{r}");
    }
    assert_eq!(std::fs::read(env.path(STORE)).unwrap(), store_before);
    assert_eq!(names(&env), vec!["s1.jsonl", "sessions.json"]);

    let (code, r) = compact_main_successor(&env);
    assert_eq!(code, 0, "{r}");
    let t = &r["transcripts"][0];
    assert_eq!(t["status"], "changed", "{r}");
    let new_id = t["details"]["successorSessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let new_file = t["details"]["successorFile"].as_str().unwrap().to_owned();
    // The old transcript is untouched; the store entry points at the successor.
    assert_eq!(
        std::fs::read(env.path("agents/main/sessions/s1.jsonl")).unwrap(),
        old
    );
    let store: Value = serde_json::from_slice(&std::fs::read(env.path(STORE)).unwrap()).unwrap();
    let entry = &store["agent:main:main"];
    assert_eq!(entry["sessionId"], json!(new_id));
    assert_eq!(entry["sessionFile"], json!(new_file));
    assert_eq!(entry["compactionCount"], 3);
    assert_eq!(entry["updatedAt"], 1772442000000u64);
    assert_eq!(
        store["agent:main:other"],
        json!({"sessionId":"missing","updatedAt":1})
    );
    let name = std::path::Path::new(&new_file)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(name.ends_with(&format!("_{new_id}.jsonl")));
    let text = std::fs::read_to_string(&new_file).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["id"], json!(new_id));
    assert_eq!(header["version"], 3);
    let parent = header["parentSession"].as_str().unwrap();
    assert!(
        parent.ends_with("/agents/main/sessions/s1.jsonl"),
        "{parent}"
    );
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "compaction");
    for release in [STABLE, EXTENDED] {
        let Some(o) = oracle_of(release) else {
            continue;
        };
        let v = release.version;
        let loaded = o.load_all(&[
            std::path::PathBuf::from(&new_file),
            env.path("agents/main/sessions/s1.jsonl"),
        ]);
        assert!(loaded[0].ok, "{v}: {:?}", loaded[0].error);
        assert_eq!(loaded[0].leaf_id, last["id"], "{v}");
        let msgs = loaded[0].messages.as_array().unwrap();
        assert_eq!(msgs[0]["role"], "compactionSummary", "{v}");
        // The kept tail of the old context is the tail of the new one, thinking signatures
        // stripped (they are bound to the old prefix; the runtime strips them too).
        let mut old_msgs = loaded[1].messages.as_array().unwrap().clone();
        for m in &mut old_msgs {
            for b in m["content"].as_array_mut().into_iter().flatten() {
                if let Some(o) = b.as_object_mut() {
                    o.remove("thinkingSignature");
                }
            }
        }
        let k = 5.min(msgs.len() - 1);
        assert!(k >= 1);
        assert_eq!(
            &msgs[msgs.len() - k..],
            &old_msgs[old_msgs.len() - k..],
            "{v}"
        );
    }
    // Once more: the successor's leaf is a compaction, so nothing is left to do.
    let (_, r) = compact_main_successor(&env);
    assert_eq!(r["transcripts"][0]["status"], "unchanged", "{r}");
}

#[test]
fn successor_needs_a_store_and_refuses_unparsable_lines() {
    let env = TestEnv::new();
    setup(&env);
    env.write("t.jsonl", b"{}\n");
    let out = env.run(&["compact", "--transcript", "t.jsonl", "--successor"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a store target"));
    let mut bytes = std::fs::read(env.path("agents/main/sessions/s1.jsonl")).unwrap();
    bytes.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"zz\",\"data\":\"\\ud800\"}\n");
    env.write("agents/main/sessions/s1.jsonl", &bytes);
    let (code, r) = env.run_json(&[
        "compact",
        "--store",
        STORE,
        "--successor",
        "--enforce",
        "--keep-recent-tokens",
        "400",
        "--min-tokens",
        "0",
    ]);
    assert_ne!(code, 0);
    assert_eq!(r["transcripts"][0]["status"], "refused", "{r}");
    assert_eq!(
        std::fs::read(env.path("agents/main/sessions/s1.jsonl")).unwrap(),
        bytes
    );
    assert_eq!(names(&env), vec!["s1.jsonl", "sessions.json"]);
}

#[test]
fn store_targets_compact_in_place_and_never_leave_the_sessions_dir() {
    let env = TestEnv::new();
    let bytes = setup(&env);
    let outside = env.write("outside.jsonl", &bytes);
    env.write(
        STORE,
        format!(
            r#"{{
  "agent:main:main": {{ "sessionId": "s1", "updatedAt": 3 }},
  "agent:main:escape": {{ "sessionId": "x", "sessionFile": "{}", "updatedAt": 2 }}
}}"#,
            outside.display()
        )
        .as_bytes(),
    );
    let store_before = std::fs::read(env.path(STORE)).unwrap();
    let (_, r) = env.run_json(&[
        "compact",
        "--store",
        STORE,
        "--enforce",
        "--keep-recent-tokens",
        "400",
        "--min-tokens",
        "0",
    ]);
    let by_key = |k: &str| {
        r["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["sessionKey"] == k)
            .cloned()
            .unwrap_or_else(|| panic!("{k} missing from {r}"))
    };
    assert_eq!(by_key("agent:main:main")["status"], "changed", "{r}");
    assert_eq!(by_key("agent:main:escape")["status"], "skipped", "{r}");
    assert_eq!(std::fs::read(&outside).unwrap(), bytes);
    assert!(
        std::fs::read(env.path("agents/main/sessions/s1.jsonl"))
            .unwrap()
            .starts_with(&bytes)
    );
    // In place, the store is not touched.
    assert_eq!(std::fs::read(env.path(STORE)).unwrap(), store_before);
}

/// Strip thinking signatures (the successor drops them from kept older turns).
fn unsigned(messages: &Value) -> Vec<Value> {
    let mut out = messages.as_array().unwrap().clone();
    for m in &mut out {
        for b in m["content"].as_array_mut().into_iter().flatten() {
            if let Some(o) = b.as_object_mut() {
                o.remove("thinkingSignature");
            }
        }
    }
    out
}

#[test]
fn many_sessions_of_one_store_all_get_their_successor() {
    // Sessions run in parallel; the store is written once with every switch.
    let env = TestEnv::new();
    const N: usize = 12;
    let mut store = serde_json::Map::new();
    let mut originals = Vec::new();
    for k in 0..N {
        // (Seeds ≡ 3 mod 5 get a line only the runtime parses; those are refused.)
        let seed = 600 + 5 * k as u64 + k as u64 % 3;
        let bytes = generate_long(seed, 150).bytes;
        let id = format!("sess{k}");
        env.write(&format!("agents/main/sessions/{id}.jsonl"), &bytes);
        store.insert(
            format!("agent:main:s{k}"),
            json!({"sessionId": id, "updatedAt": 1772442000000u64 + k as u64, "compactionCount": k}),
        );
        originals.push(bytes);
    }
    // One entry the run must leave alone.
    store.insert(
        "agent:main:gone".into(),
        json!({"sessionId":"missing","updatedAt":1}),
    );
    env.write(
        STORE,
        serde_json::to_string_pretty(&Value::Object(store))
            .unwrap()
            .as_bytes(),
    );
    // One thread per session: all of them reach the store at about the same time.
    let threads = N.to_string();
    let (code, r) = env.run_json_with_env(
        &[
            "compact",
            "--store",
            STORE,
            "--successor",
            "--enforce",
            "--keep-recent-tokens",
            "300",
            "--min-tokens",
            "0",
        ],
        &[("RAYON_NUM_THREADS", &threads)],
    );
    assert_eq!(code, 0, "{r}");
    let after: Value = serde_json::from_slice(&std::fs::read(env.path(STORE)).unwrap()).unwrap();
    let mut files = Vec::new();
    for (k, original) in originals.iter().enumerate() {
        let key = format!("agent:main:s{k}");
        let t = r["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["sessionKey"] == json!(key))
            .unwrap_or_else(|| panic!("{key} missing from {r}"));
        let entry = &after[&key];
        if t["status"] == "unchanged" {
            // (A generated session may end right after a compaction: nothing to do.)
            assert_eq!(entry["sessionId"], json!(format!("sess{k}")), "{key}");
            assert_eq!(entry["compactionCount"], json!(k), "{key}");
            continue;
        }
        assert_eq!(t["status"], "changed", "{key}: {t}");
        assert_eq!(
            entry["sessionId"], t["details"]["successorSessionId"],
            "{key}"
        );
        assert_eq!(entry["sessionFile"], t["details"]["successorFile"], "{key}");
        assert_eq!(entry["compactionCount"], json!(k + 1), "{key}");
        assert_eq!(entry["updatedAt"], json!(1772442000000u64 + k as u64));
        // The old transcript is untouched.
        assert_eq!(
            std::fs::read(env.path(&format!("agents/main/sessions/sess{k}.jsonl"))).unwrap(),
            *original,
            "{key}"
        );
        files.push(std::path::PathBuf::from(
            entry["sessionFile"].as_str().unwrap(),
        ));
        files.push(env.path(&format!("agents/main/sessions/sess{k}.jsonl")));
    }
    assert_eq!(
        after["agent:main:gone"],
        json!({"sessionId":"missing","updatedAt":1})
    );
    let changed = files.len() / 2;
    assert!(changed >= 8, "only {changed} sessions compacted: {r}");
    assert_eq!(r["totals"]["changed"], json!(changed));
    // Every successor is referenced: sessions dir = old files + successors + the store.
    assert_eq!(names(&env).len(), N + changed + 1, "{:?}", names(&env));
    let mut first = None;
    for release in [STABLE, EXTENDED] {
        let Some(o) = oracle_of(release) else {
            continue;
        };
        let loaded = o.load_all(&files);
        successors_load(&loaded, release.version);
        // Both releases make the same of the successors and of the old files.
        match &first {
            None => first = Some(loaded),
            Some(want) => crate::util::same_loads(want, &loaded, &files, release),
        }
    }
}

/// Each successor (even positions) loads, starts with the summary and keeps the newest
/// messages of the file it succeeds (the next position), as `version` loads them.
fn successors_load(loaded: &[crate::util::Loaded], version: &str) {
    for (k, pair) in loaded.chunks(2).enumerate() {
        let (new, old) = (&pair[0], &pair[1]);
        let k = format!("{version}: successor {k}");
        assert!(new.ok, "{k}: {:?}", new.error);
        let msgs = new.messages.as_array().unwrap();
        assert_eq!(msgs[0]["role"], "compactionSummary", "{k}");
        // After the summary (and the last summarised assistant turn, which the rotation keeps
        // as the runtime does), the kept part starts at the cut, a user message, and is the
        // tail of the old context.
        let (new_msgs, old_msgs) = (unsigned(&new.messages), unsigned(&old.messages));
        let cut = new_msgs
            .iter()
            .position(|m| m["role"] == "user")
            .unwrap_or_else(|| panic!("{k}: no user message kept"));
        let kept = &new_msgs[cut..];
        assert!(
            old_msgs.ends_with(kept),
            "{k}: the newest messages are kept"
        );
    }
}

#[test]
fn successor_keeps_the_old_files_mode_and_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let root = unsafe { libc::geteuid() } == 0;
    for mode in [0o640, 0o444] {
        let env = TestEnv::new();
        setup(&env);
        let old = env.path("agents/main/sessions/s1.jsonl");
        if root {
            std::os::unix::fs::chown(&old, Some(65534), Some(65534)).unwrap();
        }
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(mode)).unwrap();
        let before = std::fs::metadata(&old).unwrap();
        let t = &successor_of_main(&env);
        let m = std::fs::metadata(t["details"]["successorFile"].as_str().unwrap()).unwrap();
        assert_eq!(m.mode() & 0o7777, mode, "{mode:o}");
        assert_eq!((m.uid(), m.gid()), (before.uid(), before.gid()));
        if root {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
    }
}

/// A transcript whose earlier compaction keeps from a line of an unknown type (which the
/// runtime's rotation reader sets aside and repairs the id of, `repairEntryLinks`): through
/// that line's parent when it has one (`a1`), else the first entry below it on the
/// compaction's branch (`u2`). `compact --successor` writes what the runtime's own rotation
/// writes for the same file with the same new compaction appended, in both releases.
#[test]
fn successor_repairs_first_kept_ids_that_name_unknown_lines() {
    let words = |n: usize, w: &str| vec![w; n].join(" ");
    let msg = |id: &str, parent: &str, role: &str, text: &str| {
        let content = if role == "user" {
            json!(text)
        } else {
            json!([{"type":"text","text":text}])
        };
        json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-03-02T09:00:00.000Z",
            "message":{"role":role,"content":content,"timestamp":1772442000000u64,
            "stopReason":"stop"}})
    };
    // (With a later compaction c2, c1 is carried with its id repaired; without one, c1 is the
    // compaction the context hangs on, and the cut follows the id the runtime repairs.)
    for (x_parent, want_first_kept, later) in [
        (json!("a1"), "a1", true),
        (Value::Null, "u2", true),
        (json!("a1"), "a1", false),
        (Value::Null, "u2", false),
    ] {
        let mut x = json!({"type":"x_future_entry","id":"x1","payload":1});
        if !x_parent.is_null() {
            x["parentId"] = x_parent.clone();
        }
        let mut lines = vec![
            json!({"type":"session","version":3,"id":"s1","timestamp":"2026-03-02T09:00:00.000Z","cwd":"/w"}),
            json!({"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-02T09:00:00.000Z",
                "message":{"role":"user","content":"please start the first long task","timestamp":1}}),
            msg("a1", "u1", "assistant", &words(300, "first")),
            x,
            msg("u2", "x1", "user", "please go on with the second long task"),
            msg("a2", "u2", "assistant", &words(300, "second")),
            json!({"type":"compaction","id":"c1","parentId":"a2","timestamp":"2026-03-02T09:00:00.000Z",
                "summary":"earlier work","firstKeptEntryId":"x1","tokensBefore":900}),
        ];
        let mut parent = "c1".to_owned();
        for t in 3..9 {
            let (u, a) = (format!("u{t}"), format!("a{t}"));
            lines.push(msg(
                &u,
                &parent,
                "user",
                &format!("please do long task number {t}"),
            ));
            lines.push(msg(&a, &u, "assistant", &words(300, &format!("reply{t}"))));
            parent = a;
            if t == 4 && later {
                // A later compaction decides the context.
                lines.push(json!({"type":"compaction","id":"c2","parentId":parent,
                    "timestamp":"2026-03-02T09:00:00.000Z","summary":"more work",
                    "firstKeptEntryId":"u4","tokensBefore":900}));
                parent = "c2".to_owned();
            }
        }
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let env = TestEnv::new();
        let old = env.write("agents/main/sessions/s1.jsonl", text.as_bytes());
        env.write(
            STORE,
            br#"{"agent:main:main":{"sessionId":"s1","updatedAt":1772442000000}}"#,
        );
        let d = &successor_of_main(&env)["details"];
        let ours = lines_of(Path::new(d["successorFile"].as_str().unwrap()));
        if let Some(c1) = ours.iter().find(|e| e["id"] == "c1") {
            assert_eq!(c1["firstKeptEntryId"], want_first_kept, "{x_parent}");
        } else {
            assert!(!later, "c1 is carried when c2 decides the context");
        }
        assert!(
            ours.iter().all(|e| e["id"] != "x1"),
            "the unknown line is not carried"
        );
        // The same file with the same compaction appended, as the runtime compacts, rotated by
        // the runtime itself.
        let mut appended = ours.last().unwrap().clone();
        assert_eq!(appended["id"], d["compactionId"]);
        appended["firstKeptEntryId"] = d["firstKeptEntryId"].clone();
        appended["parentId"] = json!(parent);
        for release in [STABLE, EXTENDED] {
            let Some(o) = oracle_of(release) else { return };
            let dir = tempfile::tempdir().unwrap();
            let theirs_in = dir.path().join("s1.jsonl");
            std::fs::write(&theirs_in, format!("{text}{appended}\n")).unwrap();
            let out: Value =
                serde_json::from_slice(&o.run_script("rotate-successor.mjs", [&theirs_in]))
                    .unwrap();
            assert_eq!(out["rotated"], true, "{}: {out}", release.version);
            let theirs = lines_of(Path::new(out["sessionFile"].as_str().unwrap()));
            assert_eq!(
                ours[1..],
                theirs[1..],
                "{}: {x_parent}: the successor differs from the runtime's",
                release.version
            );
        }
        assert_eq!(std::fs::read(&old).unwrap(), text.as_bytes());
    }
}

#[test]
fn successor_refuses_removed_entries_whose_parents_go_round() {
    // Two labels of a message the compaction summarises name each other as parent, and an
    // entry that stays hangs below one of them: the runtime's rotation climbs from one label
    // to the other for ever. The tool reports it and writes nothing.
    let words = |n: usize, w: &str| vec![w; n].join(" ");
    let at = "2026-03-02T09:00:00.000Z";
    let mut lines = vec![
        json!({"type":"session","version":3,"id":"s1","timestamp":at,"cwd":"/w"}),
        json!({"type":"message","id":"u1","parentId":null,"timestamp":at,
            "message":{"role":"user","content":"please start the first long task","timestamp":1}}),
        json!({"type":"label","id":"l1","parentId":"l2","targetId":"u1","label":"a","timestamp":at}),
        json!({"type":"label","id":"l2","parentId":"l1","targetId":"u1","label":"b","timestamp":at}),
        json!({"type":"custom","id":"k","parentId":"l1","customType":"x","data":{},"timestamp":at}),
    ];
    let mut parent = "u1".to_owned();
    for t in 1..8 {
        let (a, u) = (format!("a{t}"), format!("u{}", t + 1));
        lines.push(
            json!({"type":"message","id":a,"parentId":parent,"timestamp":at,
            "message":{"role":"assistant","content":[{"type":"text","text":words(300, "reply")}],
            "timestamp":1772442000000u64,"stopReason":"stop"}}),
        );
        lines.push(json!({"type":"message","id":u,"parentId":a,"timestamp":at,
            "message":{"role":"user","content":format!("please do long task number {t}"),
            "timestamp":1772442000000u64}}));
        parent = u;
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let env = TestEnv::new();
    let old = env.write("agents/main/sessions/s1.jsonl", text.as_bytes());
    let store = br#"{"agent:main:main":{"sessionId":"s1","updatedAt":1772442000000}}"#;
    env.write(STORE, store);
    let (code, r) = compact_main_successor(&env);
    assert_ne!(code, 0, "{r}");
    let t = &r["transcripts"][0];
    assert_eq!(t["status"], "failed", "{r}");
    assert!(t.to_string().contains("go round"), "{r}");
    assert_eq!(std::fs::read(&old).unwrap(), text.as_bytes());
    assert_eq!(std::fs::read(env.path(STORE)).unwrap(), store);
    assert_eq!(names(&env), vec!["s1.jsonl", "sessions.json"]);
}
