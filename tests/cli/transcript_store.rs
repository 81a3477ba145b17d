//! Transcript commands over a store: every live transcript its entries reference, once;
//! `--session` narrows to one entry; missing, outside and SQLite cases are reported.

use std::fs;

use serde_json::{Value, json};

use crate::util::TestEnv;

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#;

fn prunable() -> String {
    let silent = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"assistant","content":"NO_REPLY","stopReason":"stop","timestamp":1}}}}"#
        )
    };
    [
        HEADER.to_owned(),
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#.to_owned(),
        silent("n1", "u1"),
        silent("n2", "n1"),
        r#"{"type":"message","id":"u2","parentId":"n2","timestamp":"2026-03-01T00:00:02.000Z","message":{"role":"user","content":"again","timestamp":2}}"#.to_owned(),
    ]
    .join("\n")
        + "\n"
}

/// state/agents/main/sessions with: a (live), b (same file as a), c (missing file),
/// d (sessionFile escaping the dir: falls back to d.jsonl, which exists).
fn store_env() -> TestEnv {
    let env = TestEnv::new();
    let dir = "state/agents/main/sessions";
    env.write(&format!("{dir}/a.jsonl"), prunable().as_bytes());
    env.write(&format!("{dir}/d.jsonl"), prunable().as_bytes());
    env.write("state/agents/main/outside.jsonl", prunable().as_bytes());
    let store = json!({
        "agent:main:main": {"sessionId": "a", "updatedAt": 1},
        "agent:main:dup": {"sessionId": "a", "updatedAt": 2},
        "agent:main:gone": {"sessionId": "c", "updatedAt": 3},
        "agent:main:escape": {"sessionId": "d", "sessionFile": "../outside.jsonl", "updatedAt": 4}
    });
    env.write(
        &format!("{dir}/sessions.json"),
        serde_json::to_string_pretty(&store).unwrap().as_bytes(),
    );
    env
}

fn by_key(v: &Value, key: &str) -> Value {
    v["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["sessionKey"] == key)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_store_run_covers_every_live_transcript_once() {
    let env = store_env();
    let store = "state/agents/main/sessions/sessions.json";
    let (code, v) = env.run_json(&["prune-noreply", "--store", store, "--enforce"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["totals"]["transcripts"], 3, "{v}");
    assert_eq!(by_key(&v, "agent:main:main")["status"], "changed");
    assert_eq!(
        by_key(&v, "agent:main:dup"),
        Value::Null,
        "deduplicated: {v}"
    );
    assert_eq!(by_key(&v, "agent:main:gone")["status"], "skipped");
    assert_eq!(by_key(&v, "agent:main:escape")["status"], "changed");
    assert_eq!(
        fs::read_to_string(env.path("state/agents/main/outside.jsonl")).unwrap(),
        prunable(),
        "nothing outside the sessions dir is touched"
    );
}

#[test]
fn session_narrows_and_agent_resolves_under_the_state_dir() {
    let env = store_env();
    let state = env.path("state");
    let vars = [("OPENCLAW_STATE_DIR", state.to_str().unwrap())];
    let (code, v) = env.run_json_with_env(
        &[
            "prune-noreply",
            "--agent",
            "main",
            "--session",
            "agent:main:escape",
            "--dry-run",
        ],
        &vars,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["totals"]["transcripts"], 1, "{v}");
    assert_eq!(by_key(&v, "agent:main:escape")["status"], "would-change");
    let out = env.run_with_env(
        &[
            "prune-noreply",
            "--agent",
            "main",
            "--session",
            "agent:main:nope",
        ],
        &vars,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session"));
}

#[test]
fn agents_moved_to_sqlite_are_refused() {
    let env = store_env();
    env.write("state/agents/main/agent/openclaw-agent.sqlite", b"");
    let store = "state/agents/main/sessions/sessions.json";
    let (code, v) = env.run_json(&["prune-noreply", "--store", store, "--enforce"]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(by_key(&v, "agent:main:main")["status"], "refused");
    assert_eq!(
        fs::read_to_string(env.path("state/agents/main/sessions/a.jsonl")).unwrap(),
        prunable()
    );
}

#[test]
fn an_unparsable_store_is_refused() {
    let env = TestEnv::new();
    env.write("s/sessions.json", b"{ not json");
    let out = env.run(&["strip-images", "--store", "s/sessions.json", "--enforce"]);
    assert_eq!(out.status.code(), Some(3));
}
