//! `clawkeeper compact --successor`: a new transcript the runtime loads, the store entry
//! pointing at it, the old file untouched; previews write nothing.

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{TestEnv, oracle};

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
    let base = [
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
    // Preview and dry-run write nothing.
    for extra in [&[][..], &["--dry-run"][..]] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let (code, r) = env.run_json(&args);
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["transcripts"][0]["status"], "would-change", "{r}");
    }
    assert_eq!(std::fs::read(env.path(STORE)).unwrap(), store_before);
    assert_eq!(names(&env), vec!["s1.jsonl", "sessions.json"]);

    let mut args = base.to_vec();
    args.push("--enforce");
    let (code, r) = env.run_json(&args);
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
    if let Some(o) = oracle() {
        let loaded = o.load_all(&[
            std::path::PathBuf::from(&new_file),
            env.path("agents/main/sessions/s1.jsonl"),
        ]);
        assert!(loaded[0].ok, "{:?}", loaded[0].error);
        assert_eq!(loaded[0].leaf_id, last["id"]);
        let msgs = loaded[0].messages.as_array().unwrap();
        assert_eq!(msgs[0]["role"], "compactionSummary");
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
        assert_eq!(&msgs[msgs.len() - k..], &old_msgs[old_msgs.len() - k..]);
    }
    // Once more: the successor's leaf is a compaction, so nothing is left to do.
    let (_, r) = env.run_json(&args);
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
