//! `prune-cache-ttl` on hostile and operator inputs: markers with missing or odd data beside
//! superseded ones, unparsable lines that mention a marker, a torn last line, duplicate ids,
//! `leaf` control records, a live lock, a preview, and a store narrowed with `--session`.
//! Nothing but superseded readable markers may go; where the file cannot be edited safely it
//! is left byte for byte. With the reference runtime installed, the hostile file also loads
//! and reads the same cache-TTL timestamps after the rewrite.

use std::fs;

use serde_json::Value;

use crate::util::{self, TestEnv};

const HEADER: &str = r#"{"type":"session","version":3,"id":"hostile","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/tmp"}"#;
const TS: &str = "2026-03-01T00:00:00.000Z";

fn marker(id: &str, parent: &str, data: &str) -> String {
    format!(
        r#"{{"type":"custom","customType":"openclaw.cache-ttl","data":{data},"id":"{id}","parentId":"{parent}","timestamp":"{TS}"}}"#
    )
}

fn ok(id: &str, parent: &str, ts: u64, provider: &str) -> String {
    marker(
        id,
        parent,
        &format!(r#"{{"timestamp":{ts},"provider":"{provider}","modelId":"m"}}"#),
    )
}

fn user(id: &str, parent: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"{TS}","message":{{"role":"user","content":"hi {id}","timestamp":1}}}}"#
    )
}

fn file(lines: &[String]) -> String {
    let mut all = vec![HEADER.to_owned()];
    all.extend_from_slice(lines);
    all.join("\n") + "\n"
}

fn ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect()
}

fn status(v: &Value) -> &str {
    v["transcripts"][0]["status"].as_str().unwrap()
}

/// A chain u0 → m1 → … where odd markers sit beside superseded readable ones.
fn hostile() -> String {
    let lines = vec![
        user("u0", "x").replace("\"x\"", "null"),
        ok("m1", "u0", 1000, "p"),
        ok("m2", "m1", 2000, "p"),
        marker("o1", "m2", "{}"),
        ok("m3", "o1", 3000, "p"),
        marker(
            "o2",
            "m3",
            r#"{"timestamp":0,"provider":"p","modelId":"m"}"#,
        ),
        marker(
            "o3",
            "o2",
            r#"{"timestamp":"4000","provider":"p","modelId":"m"}"#,
        ),
        marker("o4", "o3", r#"[4000,"p","m"]"#),
        marker(
            "o5",
            "o4",
            r#"{"timestamp":4000,"provider":7,"modelId":"m"}"#,
        ),
        user("u1", "o5"),
        "this is not JSON at all".to_owned(),
        ok("m4", "u1", 5000, "p"),
        // The runtime parses lone surrogates; this line names m4 as its parent.
        format!(
            r#"{{"type":"custom","customType":"openclaw.cache-ttl","data":{{"timestamp":5500,"provider":"\ud800","modelId":"m"}},"id":"s1","parentId":"m4","timestamp":"{TS}"}}"#
        ),
        ok("m5", "m4", 6000, "p"),
        ok("m6", "m5", 7000, "P"),
        user("u2", "m6"),
        ok("q1", "u2", 7500, "q"),
        ok("m7", "q1", 8000, "p"),
        user("u3", "m7"),
        // A compaction that keeps from a superseded marker: it must keep from u2 afterwards.
        format!(
            r#"{{"type":"compaction","id":"k1","parentId":"u3","timestamp":"{TS}","summary":"earlier","firstKeptEntryId":"m6","tokensBefore":900}}"#
        ),
        user("u4", "k1"),
    ];
    file(&lines)
}

#[test]
fn only_superseded_readable_markers_go() {
    let env = TestEnv::new();
    let text = hostile() + r#"{"type":"custom","customType":"openclaw.cache-ttl","da"#;
    let p = env.write("h.jsonl", text.as_bytes());
    let before = env.write("h.before.jsonl", text.as_bytes());
    let (code, v) = env.run_json(&["prune-cache-ttl", "--transcript", "h.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    let after = fs::read_to_string(&p).unwrap();
    // m1 is the first p marker (kept), m7 the newest; m4 is named by an unparsable line.
    let gone: Vec<String> = ids(&text)
        .into_iter()
        .filter(|id| !ids(&after).contains(id))
        .collect();
    assert_eq!(gone, ["m2", "m3", "m5", "m6"], "{after}");
    assert_eq!(v["transcripts"][0]["markersRemoved"], 4);
    let compaction: Value =
        serde_json::from_str(after.lines().find(|l| l.contains(r#""id":"k1""#)).unwrap()).unwrap();
    assert_eq!(compaction["firstKeptEntryId"], "u2");
    let notes = v["transcripts"][0]["notes"].to_string();
    assert!(notes.contains("unparsable line mentions its id"), "{notes}");
    // The odd markers, the unparsable lines and the torn last line are all still there.
    for keep in [
        "this is not JSON at all",
        r#"\ud800"#,
        r#""id":"o1""#,
        r#""id":"o2""#,
        r#""id":"o3""#,
        r#""id":"o4""#,
        r#""id":"o5""#,
    ] {
        assert!(after.contains(keep), "{keep} went");
    }
    assert!(after.ends_with(r#"{"type":"custom","customType":"openclaw.cache-ttl","da"#));
    assert_eq!(
        v["transcripts"][0]["unparsableLines"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // The runtime: same context, same timestamps (file and forks).
    if let Some(o) = util::oracle() {
        let files = [before.clone(), p.clone()];
        let loaded = o.load_all(&files);
        assert!(loaded[0].ok && loaded[1].ok, "{:?}", loaded[1].error);
        assert_eq!(loaded[0].leaf_id, loaded[1].leaf_id);
        assert!(loaded[0].messages == loaded[1].messages);
        let scratch = tempfile::tempdir().unwrap();
        let (a, b) = (
            scratch.path().join("a.jsonl"),
            scratch.path().join("b.jsonl"),
        );
        fs::copy(&before, &a).unwrap();
        fs::copy(&p, &b).unwrap();
        let out = o.run_script(
            "cache-ttl.mjs",
            [
                "compare".as_ref(),
                scratch.path().as_os_str(),
                a.as_os_str(),
                b.as_os_str(),
            ],
        );
        let text = String::from_utf8_lossy(&out);
        let r: Value =
            serde_json::from_str(text.lines().find_map(|l| l.strip_prefix("@@ttl ")).unwrap())
                .unwrap();
        assert_eq!(r["problems"], serde_json::json!([]), "{r}");
        assert!(r["found"].as_u64().unwrap() > 3, "{r}");
    }
}

#[test]
fn files_it_cannot_edit_stay_as_they_are() {
    let env = TestEnv::new();
    // Duplicate ids: damaged, not edited.
    let dup = file(&[
        user("u0", "x").replace("\"x\"", "null"),
        ok("m1", "u0", 1000, "p"),
        ok("m2", "m1", 2000, "p"),
        ok("m2", "m2", 2500, "p"),
        ok("m3", "m2", 3000, "p"),
        user("u1", "m3"),
    ]);
    let p = env.write("dup.jsonl", dup.as_bytes());
    let (code, v) = env.run_json(&["prune-cache-ttl", "--transcript", "dup.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "damaged"), "{v}");
    assert_eq!(fs::read_to_string(&p).unwrap(), dup);
    // A `leaf` control record of newer runtimes names m3: m3 stays (its own leaf too).
    let leaf = file(&[
        user("u0", "x").replace("\"x\"", "null"),
        ok("m1", "u0", 1000, "p"),
        ok("m2", "m1", 2000, "p"),
        ok("m3", "m2", 3000, "p"),
        format!(
            r#"{{"type":"leaf","id":"l1","parentId":"m3","timestamp":"{TS}","targetId":"m3"}}"#
        ),
    ]);
    let p = env.write("leaf.jsonl", leaf.as_bytes());
    let (code, v) = env.run_json(&["prune-cache-ttl", "--transcript", "leaf.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    let after = fs::read_to_string(&p).unwrap();
    let ids: Vec<String> = after
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["u0", "m1", "m3", "l1"], "{after}");
    assert!(after.ends_with(&format!("{}\n", leaf.lines().last().unwrap())));
    // A live lock: exit 4, nothing written; a preview needs no lock and writes nothing.
    let text = hostile();
    let p = env.write("t.jsonl", text.as_bytes());
    let lock = format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
        std::process::id(),
        clawkeeper::isotime::iso_now()
    );
    env.write("t.jsonl.lock", lock.as_bytes());
    let (code, v) = env.run_json(&[
        "prune-cache-ttl",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--wait-lock",
        "300ms",
    ]);
    assert_eq!((code, status(&v)), (4, "locked"), "{v}");
    assert_eq!(fs::read_to_string(&p).unwrap(), text);
    let out = env.run(&["prune-cache-ttl", "--transcript", "t.jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    let shown = util::stdout(&out);
    assert!(
        shown.contains("would-change") || shown.contains("would change"),
        "{shown}"
    );
    assert!(shown.contains("--enforce"), "{shown}");
    assert_eq!(fs::read_to_string(&p).unwrap(), text);
}

#[test]
fn a_store_run_with_session_touches_that_session_only() {
    let env = TestEnv::new();
    let dir = env.sessions_dir("main");
    fs::create_dir_all(&dir).unwrap();
    let text = hostile();
    fs::write(dir.join("s1.jsonl"), &text).unwrap();
    fs::write(dir.join("s2.jsonl"), &text).unwrap();
    let now = util::now_ms();
    env.write_store(&format!(
        r#"{{"agent:main:main":{{"sessionId":"s1","updatedAt":{now}}},"agent:main:other":{{"sessionId":"s2","updatedAt":{now}}}}}"#
    ));
    let (code, ins) = env.run_json(&["inspect", "--no-cleanup"]);
    assert_eq!(code, 0, "{ins}");
    let store = &ins["stores"][0];
    let per_file = store["sessions"][0]["reclaimable"]["prune-cache-ttl"]
        .as_i64()
        .unwrap();
    assert!(per_file > 0, "{ins}");
    assert_eq!(store["reclaimable"]["prune-cache-ttl"], 2 * per_file);
    assert_eq!(
        ins["totals"]["reclaimable"]["prune-cache-ttl"],
        2 * per_file
    );
    assert!(
        store["sessions"][0]["cacheTtlMarkers"].as_u64().unwrap() >= 13,
        "{ins}"
    );
    let (code, v) = env.run_json(&[
        "prune-cache-ttl",
        "--session",
        "agent:main:other",
        "--enforce",
    ]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert_eq!(v["transcripts"].as_array().unwrap().len(), 1);
    assert_eq!(v["transcripts"][0]["sessionKey"], "agent:main:other");
    let freed = v["totals"]["bytesFreed"].as_i64().unwrap();
    assert_eq!(freed, per_file);
    assert_eq!(fs::read_to_string(dir.join("s1.jsonl")).unwrap(), text);
    assert_ne!(fs::read_to_string(dir.join("s2.jsonl")).unwrap(), text);
    // maintain runs it too, after prune-noreply.
    let out = env.run(&["maintain", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", util::stderr(&out));
    let shown = util::stdout(&out);
    let (a, b, c) = (
        shown.find("prune-noreply").unwrap(),
        shown.find("prune-cache-ttl").unwrap(),
        shown.find("strip-images").unwrap(),
    );
    assert!(a < b && b < c, "{shown}");
    assert_ne!(fs::read_to_string(dir.join("s1.jsonl")).unwrap(), text);
}
