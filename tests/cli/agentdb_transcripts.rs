//! `prune-noreply`, `strip-images` and `prune-cache-ttl` on SQLite-era agents (transcript
//! rows), on databases the reference releases' own doctor imports from generated JSON-era
//! stores (NO_REPLY runs, images in old turns, superseded cache-ttl markers).
//!
//! The oracle: the same generated store is (a) rewritten by the JSON-era command on its JSONL
//! files and then imported, and (b) imported and then rewritten by the command on its rows.
//! The JSON-era command is checked against the runtime by its own suites, and the import is
//! the runtime's; so (b) is right when the runtime loads every session of (b) exactly as it
//! loads (a), and every session's rows read back as the same JSONL. After the rewrite the
//! runtime appends a turn to a rewritten session and loads it again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::agentdb::{contexts, database, integrity, sql_i64};
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, TestEnv, case_count, hermetic, oracle_node,
    oracle_path_of, stderr,
};

/// A session id for case `i` (UUID-shaped, as the runtime makes them).
fn sid(i: usize) -> String {
    format!(
        "{:08x}-5a5a-4b4b-8c8c-{:012x}",
        0xc1a0_0000u32 + i as u32,
        i
    )
}

/// Write a JSON-era store of `n` generated sessions into `env`'s state dir: two of three from
/// the general generator (NO_REPLY runs, images, media references, compactions, branches),
/// one of three from the cache-ttl generator.
fn write_store(env: &TestEnv, n: usize) {
    let dir = env.sessions_dir("main");
    let mut store = serde_json::Map::new();
    for i in 0..n {
        let id = sid(i);
        let seed = 7_000 + i as u64;
        let text = if i % 3 == 2 {
            crate::cachettl::generate(seed, 20 + (i * 7) % 30).replacen(
                "\"id\":\"cachettl\"",
                &format!("\"id\":\"{id}\""),
                1,
            )
        } else {
            String::from_utf8(crate::generator::generate(seed).bytes).unwrap()
        };
        std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
        store.insert(
            format!("agent:main:case-{i}"),
            json!({"sessionId": id, "updatedAt": 1_790_000_000_000u64 + i as u64}),
        );
    }
    std::fs::write(
        env.store_path(),
        serde_json::to_string_pretty(&Value::Object(store)).unwrap(),
    )
    .unwrap();
}

/// Import `env`'s JSON-era store with `release`'s doctor; `None` (with a line) when the
/// release is not installed.
fn import(release: Release, env: &TestEnv) -> Option<()> {
    let oracle = oracle_path_of(release, "SQLite-era transcript rows")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracle/sqlite-import.sh");
    let mut cmd = Command::new(script);
    hermetic(&mut cmd);
    let out = cmd
        .arg(&oracle)
        .arg(env.state())
        .arg(env.config_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "import with {}: {}",
        release.version,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

/// Every session's rows as JSONL, by session id (compressed rows decompressed).
fn rows(env: &TestEnv) -> Vec<(String, String)> {
    let conn = clawkeeper::agentdb::open_read_only(&database(env)).unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT DISTINCT session_id FROM transcript_events ORDER BY session_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    ids.into_iter()
        .map(|id| {
            let text = clawkeeper::agentdb::read::with_transcript(&conn, &id, |r| {
                let mut s = String::new();
                r.read_to_string(&mut s)?;
                Ok(s)
            })
            .unwrap();
            (id, text)
        })
        .collect()
}

/// Append one user turn to `key` with the runtime's own writer and stop it.
fn runtime_appends(release: Release, env: &TestEnv, key: &str) {
    let oracle = oracle_path_of(release, "append").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/sqlite-append-loop.mjs");
    let mut child = Command::new(oracle_node(&oracle))
        .arg(script)
        .arg(oracle.parent().unwrap())
        .arg(env.state())
        .args(["main", key, "1000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["ready"], true, "{ready}");
    drop(child.stdin.take());
    let done: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(done["appended"].as_u64().unwrap() >= 1, "{done}");
    assert_eq!(done["failed"], json!([]), "{done}");
}

/// The totals a command reports, without the byte figures (which differ: a file counts its
/// own formatting, the rows count what the import stored).
fn counts(report: &Value, key: &str) -> (Value, Value) {
    (
        report["totals"][key].clone(),
        report["totals"]["changed"].clone(),
    )
}

fn parity(release: Release, command: &str, count_key: &str) {
    let n = case_count(12) as usize;
    // (a) the JSON-era command on the files, then the import.
    let want = TestEnv::new();
    write_store(&want, n);
    let (code, json_era) = want.run_json(&[command, "--enforce"]);
    assert_eq!(code, 0, "{json_era}");
    if import(release, &want).is_none() {
        return;
    }
    // (b) the import, then the command on the rows.
    let got = TestEnv::new();
    write_store(&got, n);
    import(release, &got).unwrap();
    let db = database(&got);
    let (code, preview) = got.run_json(&[command]);
    assert_eq!(code, 0, "{preview}");
    let (code, done) = got.run_json(&[command, "--enforce"]);
    assert_eq!(code, 0, "{done}");
    let changed = done["totals"]["changed"].as_u64().unwrap_or(0);
    assert!(changed > 0, "{command} changed nothing: {done}");
    assert_eq!(
        counts(&json_era, count_key).0,
        counts(&done, count_key).0,
        "{}: {command} counts otherwise on rows than on files\nfiles: {json_era}\nrows: {done}",
        release.version
    );
    // The preview predicted the run.
    assert_eq!(
        preview["totals"][count_key], done["totals"][count_key],
        "{preview}"
    );
    assert_eq!(preview["totals"]["would-change"], done["totals"]["changed"]);
    for t in done["transcripts"].as_array().unwrap() {
        if t["status"] == "changed" {
            let path = t["path"].as_str().unwrap();
            assert!(path.starts_with(&format!("{}#", db.display())), "{path}");
        }
    }
    assert_eq!(integrity(&db), "ok");
    assert_eq!(
        sql_i64(
            &db,
            "SELECT count(*) FROM session_transcript_index_state WHERE needs_rebuild = 1"
        ) as u64,
        changed,
        "every rewritten session, and only those, is flagged for the runtime to rebuild"
    );
    let (want_rows, got_rows) = (rows(&want), rows(&got));
    assert_eq!(want_rows.len(), got_rows.len());
    for ((wid, wtext), (gid, gtext)) in want_rows.iter().zip(&got_rows) {
        assert_eq!(wid, gid);
        assert!(
            wtext == gtext,
            "{}: {command}: the rows of {gid} differ from the imported JSON-era rewrite:\n{}",
            release.version,
            crate::util::line_diff(wtext, gtext)
        );
    }
    let (want_ctx, got_ctx) = (contexts(release, &want), contexts(release, &got));
    assert_eq!(
        want_ctx, got_ctx,
        "{}: {command}: contexts differ",
        release.version
    );
    // The runtime goes on with a rewritten session: it appends a turn and loads it.
    let key = done["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "changed")
        .and_then(|t| t["sessionKey"].as_str())
        .unwrap()
        .to_owned();
    runtime_appends(release, &got, &key);
    let after = contexts(release, &got);
    assert_eq!(after[&key]["ok"], true, "{}", after[&key]);
    let last = after[&key]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user", "{last}");
    assert!(last.to_string().contains("clawkeeper-writer"), "{last}");
    assert_eq!(integrity(&db), "ok");
    // A second run finds nothing left to do.
    let (code, again) = got.run_json(&[command]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["totals"]["would-change"], Value::Null, "{again}");
    let _ = stderr;
}

#[test]
fn prune_noreply_on_rows_matches_the_json_era_on_2026_9_6() {
    parity(SQLITE_LATEST, "prune-noreply", "entriesRemoved");
}

#[test]
fn prune_noreply_on_rows_matches_the_json_era_on_2026_8_2() {
    parity(SQLITE_FIRST, "prune-noreply", "entriesRemoved");
}
