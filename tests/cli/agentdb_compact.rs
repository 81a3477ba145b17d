//! `compact` on SQLite-era agents (transcript rows), on databases the reference releases' own
//! doctor imports from generated JSON-era stores (long sessions, and the general generator's
//! hostile ones: torn lines, branches, earlier compactions).
//!
//! The oracle is the one of `agentdb_transcripts`: the same store is (a) compacted as JSONL
//! files and then imported, and (b) imported and then compacted as rows. The rows of (b) must
//! read back as the rows of (a), and the runtime must load every session of (b) as it loads
//! (a), except for what each run makes anew: the compaction's id and its timestamp (also in
//! the summary's first line, and as epoch ms where the runtime loads it), which are replaced
//! by placeholders on both sides before they are compared ([`modulo_made`]), as the JSON-era
//! compact tests compare modulo them.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::agentdb::{contexts, database, integrity, sql_i64};
use crate::agentdb_transcripts::{
    by_session, import, killed_at_any_moment, rows, runtime_appends, sid,
};
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, TestEnv, case_count, oracle_node, oracle_path_of, stderr,
};

/// The budget every run here uses: small enough for the generated sessions, whose provider
/// usage (what the runtime's estimate starts from) is tiny, hence no `--min-tokens`. A
/// compacted session ends with its compaction, which a second run leaves alone.
const BUDGET: [&str; 4] = ["--keep-recent-tokens", "1500", "--min-tokens", "0"];

/// `compact` with [`BUDGET`] and `extra`.
fn compact<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["compact"];
    args.extend(BUDGET);
    args.extend(extra);
    args
}

/// A JSON-era store of `n` generated sessions: two of three long (hundreds of steps, to be
/// compacted), one of three from the general generator (short and hostile: mostly left alone).
fn write_store(env: &TestEnv, n: usize) {
    let dir = env.sessions_dir("main");
    let mut store = serde_json::Map::new();
    for i in 0..n {
        let id = sid(i);
        let seed = 9_000 + i as u64;
        let g = if i % 3 == 2 {
            crate::generator::generate(seed)
        } else {
            crate::generator::generate_long(seed, 150 + (i * 37) % 150)
        };
        std::fs::write(dir.join(format!("{id}.jsonl")), g.bytes).unwrap();
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

/// [`write_store`] imported by `release` (`None` when it is not installed).
fn imported(release: Release, n: usize) -> Option<TestEnv> {
    let env = TestEnv::new();
    write_store(&env, n);
    import(release, &env)?;
    Some(env)
}

/// A JSON-era twin of `env` before its import: the same store, each transcript file as the
/// import stored its rows (it leaves out what it cannot parse).
fn json_twin(env: &TestEnv, n: usize) -> TestEnv {
    let twin = TestEnv::new();
    write_store(&twin, n);
    for (sid, text) in rows(env) {
        let file = twin.sessions_dir("main").join(format!("{sid}.jsonl"));
        assert!(file.exists(), "{sid}");
        std::fs::write(file, text).unwrap();
    }
    twin
}

/// The compaction clawkeeper appended to a JSONL text (its last line: every run here appends
/// one at most): its id and timestamp.
fn made(text: &str) -> Option<(String, String)> {
    let last = text.lines().last().filter(|l| l.contains("\"offline\""))?;
    let v: Value = serde_json::from_str(last).ok()?;
    if v["type"] != "compaction" || v["details"]["offline"]["tool"] != "clawkeeper" {
        return None;
    }
    Some((
        v["id"].as_str()?.to_owned(),
        v["timestamp"].as_str()?.to_owned(),
    ))
}

/// `text` with the id and the timestamp of the compaction clawkeeper appended to each of
/// `sessions` (an env's rows by session id) replaced by placeholders (the timestamp also as
/// epoch ms, as the runtime loads it).
pub(crate) fn modulo_made(sessions: &BTreeMap<String, String>, text: &str) -> String {
    let mut out = text.to_owned();
    for (id, at) in sessions.values().filter_map(|rows| made(rows)) {
        out = out.replace(&id, "<compaction-id>").replace(&at, "<now>");
        if let Some(ms) = clawkeeper::isotime::parse_iso_ms(&at) {
            out = out.replace(&ms.to_string(), "<now-ms>");
        }
    }
    out
}

/// The context tokens a `compact` report saves: the sum of `details.tokensSaved` of the
/// transcripts it changed (or, previewing, would change).
pub(crate) fn tokens_saved(report: &Value) -> u64 {
    report["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "changed" || t["status"] == "would-change")
        .map(|t| t["details"]["tokensSaved"].as_u64().unwrap())
        .sum()
}

/// The session keys a report changed.
fn changed_keys(report: &Value) -> Vec<String> {
    report["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "changed")
        .map(|t| t["sessionKey"].as_str().unwrap().to_owned())
        .collect()
}

fn parity(release: Release) {
    let n = case_count(9) as usize;
    // (b) the import, then compact on the rows (below).
    let Some(got) = imported(release, n) else {
        return;
    };
    let db = database(&got);
    // (a) the same transcripts as JSON-era files: compact on them, then the import.
    let want = json_twin(&got, n);
    let (code, json_era) = want.run_json(&compact(&["--enforce"]));
    assert_eq!(code, 0, "{json_era}");
    import(release, &want).unwrap();
    let mut inspect = vec!["inspect", "--no-cleanup"];
    inspect.extend(BUDGET);
    let (code, inspected) = got.run_json(&inspect);
    assert_eq!(code, 0, "{inspected}");
    let (code, preview) = got.run_json(&compact(&[]));
    assert_eq!(code, 0, "{preview}");
    let (code, done) = got.run_json(&compact(&["--enforce"]));
    assert_eq!(code, 0, "{done}");
    let changed = done["totals"]["changed"].as_u64().unwrap_or(0);
    assert!(changed >= 2, "compact changed too little: {done}");
    for key in ["messagesSummarized", "changed"] {
        assert_eq!(
            json_era["totals"][key], done["totals"][key],
            "{}: {key} otherwise on rows than on files\nfiles: {json_era}\nrows: {done}",
            release.version
        );
    }
    // The preview predicted the run, and so did inspect.
    assert_eq!(
        preview["totals"]["messagesSummarized"],
        done["totals"]["messagesSummarized"]
    );
    assert_eq!(preview["totals"]["would-change"], done["totals"]["changed"]);
    assert_eq!(tokens_saved(&preview), tokens_saved(&done));
    assert_eq!(
        inspected["stores"][0]["reclaimable"]["compactTokens"].as_u64(),
        Some(tokens_saved(&done)),
        "{}: inspect's compact figure is not what the run saved",
        release.version
    );
    for t in done["transcripts"].as_array().unwrap() {
        let path = t["path"].as_str().unwrap();
        assert!(path.starts_with(&format!("{}#", db.display())), "{path}");
    }
    assert_eq!(integrity(&db), "ok");
    assert_eq!(
        sql_i64(
            &db,
            "SELECT count(*) FROM session_transcript_index_state WHERE needs_rebuild = 1"
        ) as u64,
        changed,
        "every compacted session, and only those, is flagged for the runtime to rebuild"
    );
    // The rows read back as the imported JSON-era compaction, but for what each run makes.
    let (want_rows, got_rows) = (by_session(&want), by_session(&got));
    assert_eq!(want_rows.len(), got_rows.len());
    for ((wid, wtext), (gid, gtext)) in want_rows.iter().zip(&got_rows) {
        assert_eq!(wid, gid);
        let (w, g) = (
            modulo_made(&want_rows, wtext),
            modulo_made(&got_rows, gtext),
        );
        assert!(
            w == g,
            "{}: the rows of {gid} differ from the imported JSON-era compaction:\n{}",
            release.version,
            crate::util::line_diff(&w, &g)
        );
    }
    // The runtime loads every session as it loads the JSON era's, and a compacted one as the
    // summary followed by the kept tail.
    let (want_ctx, got_ctx) = (contexts(release, &want), contexts(release, &got));
    let keys: Vec<&String> = want_ctx.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        got_ctx.as_object().unwrap().keys().collect::<Vec<_>>()
    );
    for key in keys {
        assert_eq!(
            modulo_made(&want_rows, &want_ctx[key].to_string()),
            modulo_made(&got_rows, &got_ctx[key].to_string()),
            "{}: {key} loads otherwise",
            release.version
        );
    }
    for key in changed_keys(&done) {
        let c = &got_ctx[&key];
        assert_eq!(c["ok"], true, "{key}: {c}");
        let messages = c["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "compactionSummary", "{key}");
        assert!(messages.len() > 1, "{key}: no kept tail");
        let t = done["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["sessionKey"] == key.as_str())
            .unwrap();
        let sid = t["path"].as_str().unwrap().rsplit('#').next().unwrap();
        let last: Value = serde_json::from_str(got_rows[sid].lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "compaction", "{key}");
        assert_eq!(c["leafId"], last["id"], "{key}: the compaction is the leaf");
        assert_eq!(last["id"], t["details"]["compactionId"]);
    }
    // A second run finds nothing left to do.
    let (code, again) = got.run_json(&compact(&[]));
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["totals"]["would-change"], Value::Null, "{again}");
    // The runtime goes on after the compaction: it appends a turn and loads it after the
    // summary and the kept tail.
    let key = changed_keys(&done)[0].clone();
    runtime_appends(release, &got, &key);
    let after = contexts(release, &got);
    assert_eq!(after[&key]["ok"], true, "{}", after[&key]);
    let messages = after[&key]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "compactionSummary");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert!(last.to_string().contains("clawkeeper-writer"), "{last}");
    assert_eq!(
        messages.len(),
        got_ctx[&key]["messages"].as_array().unwrap().len() + 1
    );
    assert_eq!(integrity(&db), "ok");
}

#[test]
fn compact_on_rows_matches_the_json_era_on_2026_9_6() {
    parity(SQLITE_LATEST);
}

#[test]
fn compact_on_rows_matches_the_json_era_on_2026_8_2() {
    parity(SQLITE_FIRST);
}

#[test]
fn compact_killed_at_any_moment_leaves_every_session_old_or_new() {
    let Some(template) = imported(SQLITE_LATEST, 24) else {
        return;
    };
    killed_at_any_moment(&template, &compact(&["--enforce"]), 8, &modulo_made);
}

/// A script for `node` that appends one entry to a session's rows with plain SQL (its
/// identity row too), as a writer that does not know of clawkeeper would: after the leaf.
const APPEND_ROW: &str = r#"
const { DatabaseSync } = require("node:sqlite");
const [db, sid, id = "late0001"] = process.argv.slice(2);
const d = new DatabaseSync(db);
d.exec("PRAGMA busy_timeout = 10000");
const seq = d.prepare("SELECT max(seq) AS m FROM transcript_events WHERE session_id = ?").get(sid).m + 1;
const parent = d.prepare("SELECT event_id FROM transcript_event_identities WHERE session_id = ? ORDER BY seq DESC LIMIT 1").get(sid).event_id;
const entry = JSON.stringify({ type: "custom", customType: "clawkeeper-test", data: {}, id, parentId: parent, timestamp: "2026-03-09T00:00:00.000Z" });
d.prepare("INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?, ?, ?, 0)").run(sid, seq, entry);
d.prepare("INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, parent_id, message_idempotency_key, created_at) VALUES (?, ?, ?, 'custom', ?, NULL, 0)").run(sid, id, seq, parent);
d.close();
"#;

/// `--summarizer` on rows: its input is streamed from the rows, byte for byte what the JSON
/// era sends for the same transcript; a session the summariser's time gives a writer to
/// change is refused and left with that writer's row only; a run after it compacts the
/// session with the summariser's text; `--successor` refuses the database.
#[test]
fn the_summarizer_reads_the_rows_and_a_session_written_meanwhile_is_refused() {
    let release = SQLITE_LATEST;
    let n = 3;
    let Some(env) = imported(release, n) else {
        return;
    };
    let db = database(&env);
    let (code, preview) = env.run_json(&compact(&[]));
    assert_eq!(code, 0, "{preview}");
    let t = preview["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "would-change")
        .unwrap_or_else(|| panic!("nothing to compact: {preview}"))
        .clone();
    let key = t["sessionKey"].as_str().unwrap().to_owned();
    let sid = t["path"]
        .as_str()
        .unwrap()
        .rsplit('#')
        .next()
        .unwrap()
        .to_owned();
    let work = env.work();
    let q = |p: &Path| format!("'{}'", p.display());
    // The JSON era's request for the same transcript.
    let twin = json_twin(&env, n);
    let want_request = work.join("want.json");
    let summarizer = format!("cat > {}; echo model summary", q(&want_request));
    let (code, json_era) = twin.run_json(&compact(&[
        "--enforce",
        "--session",
        &key,
        "--summarizer",
        &summarizer,
    ]));
    assert_eq!(code, 0, "{json_era}");
    assert_eq!(
        json_era["transcripts"][0]["details"]["summarySource"],
        "summarizer"
    );
    // The summariser runs between the plan and the write; meanwhile a writer appends a row.
    let oracle = oracle_path_of(release, "a writer").unwrap();
    let script = work.join("append-row.cjs");
    std::fs::write(&script, APPEND_ROW).unwrap();
    let request = work.join("request.json");
    let summarizer = format!(
        "cat > {}; {} {} {} '{sid}'; echo model summary",
        q(&request),
        q(&oracle_node(&oracle)),
        q(&script),
        q(&db)
    );
    let before = by_session(&env);
    let (code, refused) = env.run_json(&compact(&[
        "--enforce",
        "--session",
        &key,
        "--summarizer",
        &summarizer,
    ]));
    assert_eq!(code, 3, "{refused}");
    let t = &refused["transcripts"][0];
    assert_eq!(t["status"], "refused", "{refused}");
    assert!(
        t["reason"].as_str().unwrap().contains("changed since"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read(&request).unwrap(),
        std::fs::read(&want_request).unwrap(),
        "the request from the rows is not the JSON era's"
    );
    let now = by_session(&env);
    let added = now[&sid]
        .strip_prefix(before[&sid].as_str())
        .expect("the session's rows were changed");
    assert_eq!(added.lines().count(), 1, "{added}");
    assert!(added.contains("late0001"), "{added}");
    for (other, text) in &before {
        if *other != sid {
            assert_eq!(&now[other], text, "{other} was written");
        }
    }
    assert_eq!(integrity(&db), "ok");
    // Run again: the session is compacted after the writer's row, with the summariser's text.
    let summarizer = "cat > /dev/null; echo model summary";
    let (code, done) = env.run_json(&compact(&[
        "--enforce",
        "--session",
        &key,
        "--summarizer",
        summarizer,
    ]));
    assert_eq!(code, 0, "{done}");
    let t = &done["transcripts"][0];
    assert_eq!(t["status"], "changed", "{done}");
    assert_eq!(t["details"]["summarySource"], "summarizer");
    let last: Value = serde_json::from_str(by_session(&env)[&sid].lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "compaction");
    assert_eq!(last["parentId"], "late0001");
    assert!(
        last["summary"].as_str().unwrap().contains("model summary"),
        "{last}"
    );
    let ctx = contexts(release, &env);
    assert_eq!(ctx[&key]["ok"], true, "{}", ctx[&key]);
    assert_eq!(ctx[&key]["messages"][0]["role"], "compactionSummary");
    assert_eq!(integrity(&db), "ok");
    // --successor is not built for rows: the database is refused, preview or not.
    let before = by_session(&env);
    for extra in [&[][..], &["--enforce"][..]] {
        let mut args = compact(&["--successor"]);
        args.extend(extra);
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("--successor is not supported yet"), "{err}");
        assert!(err.contains(&db.display().to_string()), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(by_session(&env), before);
}

/// A run over every session where one is refused (a writer appends to it while the summariser
/// runs) writes the others and exits 3: a run left to cron does not end in success while a
/// session it was asked to compact was left as it was.
#[test]
fn a_refused_session_makes_the_run_exit_3_and_the_others_are_written() {
    let release = SQLITE_LATEST;
    let Some(env) = imported(release, 3) else {
        return;
    };
    let db = database(&env);
    let (code, preview) = env.run_json(&compact(&[]));
    assert_eq!(code, 0, "{preview}");
    let would: Vec<String> = preview["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "would-change")
        .map(|t| t["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(would.len() >= 2, "{preview}");
    // The first session the run compacts gets a row from another writer while its summariser
    // runs (each call appends one, with an id of its own).
    let victim = would[0].rsplit('#').next().unwrap().to_owned();
    let script = env.work().join("append-row.cjs");
    std::fs::write(&script, APPEND_ROW).unwrap();
    let oracle = oracle_path_of(release, "a writer").unwrap();
    let summarizer = format!(
        "cat > /dev/null; '{}' '{}' '{}' '{victim}' late$$; echo model summary",
        oracle_node(&oracle).display(),
        script.display(),
        db.display()
    );
    let (code, run) = env.run_json(&compact(&["--enforce", "--summarizer", &summarizer]));
    assert_eq!(code, 3, "{run}");
    let status = |path: &str| {
        run["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"] == path)
            .map(|t| t["status"].clone())
    };
    assert_eq!(status(&would[0]), Some(json!("refused")), "{run}");
    for path in &would[1..] {
        assert_eq!(status(path), Some(json!("changed")), "{run}");
    }
    assert_eq!(integrity(&db), "ok");
    let ctx = contexts(release, &env);
    let loaded = ctx.as_object().unwrap();
    assert!(loaded.values().all(|c| c["ok"] == true), "{ctx}");
}
