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

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agentdb::{add_lease, contexts, copy_env, database, integrity, sql_i64, sqlite_import};
use crate::agentdb_safety::{Script, kill_after, os};
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, TestEnv, case_count, oracle_path_of, stderr,
};

/// A session id for case `i` (UUID-shaped, as the runtime makes them).
pub(crate) fn sid(i: usize) -> String {
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
pub(crate) fn import(release: Release, env: &TestEnv) -> Option<()> {
    let oracle = oracle_path_of(release, "SQLite-era transcript rows")?;
    sqlite_import(&oracle, &env.state(), Some(&env.config_path()));
    Some(())
}

/// Every session's rows as JSONL, by session id (compressed rows decompressed).
pub(crate) fn rows(env: &TestEnv) -> Vec<(String, String)> {
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
pub(crate) fn runtime_appends(release: Release, env: &TestEnv, key: &str) {
    let oracle = oracle_path_of(release, "append").unwrap();
    let state = env.state();
    let args = [
        os(&state),
        OsStr::new("main"),
        OsStr::new(key),
        OsStr::new("1000"),
    ];
    let writer = Script::spawn(&oracle, "sqlite-append-loop.mjs", &args);
    let ready = writer.next("the first append");
    assert_eq!(ready["ready"], true, "{ready}");
    let done = writer.finish("the writer's count");
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
    // (b) the import, then the command on the rows (below).
    let got = TestEnv::new();
    write_store(&got, n);
    if import(release, &got).is_none() {
        return;
    }
    let db = database(&got);
    // (a) the same transcripts as the import stored them (it leaves out what it cannot parse),
    // as JSON-era files: the JSON-era command on them, then the import.
    let want = TestEnv::new();
    write_store(&want, n);
    for (sid, text) in rows(&got) {
        let file = want.sessions_dir("main").join(format!("{sid}.jsonl"));
        assert!(file.exists(), "{sid}");
        std::fs::write(file, text).unwrap();
    }
    let (code, json_era) = want.run_json(&[command, "--enforce"]);
    assert_eq!(code, 0, "{json_era}");
    import(release, &want).unwrap();
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
}

#[test]
fn prune_noreply_on_rows_matches_the_json_era_on_2026_9_6() {
    parity(SQLITE_LATEST, "prune-noreply", "entriesRemoved");
}

#[test]
fn prune_noreply_on_rows_matches_the_json_era_on_2026_8_2() {
    parity(SQLITE_FIRST, "prune-noreply", "entriesRemoved");
}

#[test]
fn strip_images_on_rows_matches_the_json_era_on_2026_9_6() {
    parity(SQLITE_LATEST, "strip-images", "imagesReplaced");
}

#[test]
fn strip_images_on_rows_matches_the_json_era_on_2026_8_2() {
    parity(SQLITE_FIRST, "strip-images", "imagesReplaced");
}

#[test]
fn prune_cache_ttl_on_rows_matches_the_json_era_on_2026_9_6() {
    parity(SQLITE_LATEST, "prune-cache-ttl", "markersRemoved");
}

#[test]
fn prune_cache_ttl_on_rows_matches_the_json_era_on_2026_8_2() {
    parity(SQLITE_FIRST, "prune-cache-ttl", "markersRemoved");
}

/// A generated store of `n` sessions imported by `release` (`None` when it is not installed).
pub(crate) fn imported_store(release: Release, n: usize) -> Option<TestEnv> {
    let env = TestEnv::new();
    write_store(&env, n);
    import(release, &env)?;
    Some(env)
}

#[test]
fn a_live_lease_on_the_database_stops_the_rewrite_and_nothing_changes() {
    let Some(env) = imported_store(SQLITE_LATEST, 6) else {
        return;
    };
    let db = database(&env);
    let before = rows(&env);
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    add_lease(&env, holder.id());
    for command in [
        "prune-noreply",
        "strip-images",
        "prune-cache-ttl",
        "compact",
    ] {
        let out = env.run(&[command, "--enforce"]);
        assert_eq!(out.status.code(), Some(4), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("process {}", holder.id())),
            "{}",
            stderr(&out)
        );
        assert_eq!(rows(&env), before, "{command} wrote while a lease was held");
        // A preview still reports what it would do.
        let (code, preview) = env.run_json(&[command]);
        assert_eq!(code, 0, "{preview}");
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The holder is gone: its lease is stale, and the rewrite goes ahead.
    let (code, done) = env.run_json(&["strip-images", "--enforce"]);
    assert_eq!(code, 0, "{done}");
    assert!(done["totals"]["changed"].as_u64().unwrap() > 0, "{done}");
    assert_eq!(integrity(&db), "ok");
}

/// The planner of `prune-noreply` with its default `--keep`.
fn noreply(
    index: &clawkeeper::transcript::Index,
    tree: &clawkeeper::transcript::tree::Tree,
) -> Result<clawkeeper::transcript::job::Planned, clawkeeper::transcript::job::PlanError> {
    Ok(clawkeeper::noreply::planned(index, tree, 1))
}

#[test]
fn a_session_that_changes_between_plan_and_write_is_refused_and_the_others_are_written() {
    use clawkeeper::agentdb::transcripts as rows_api;
    use clawkeeper::transcript::job::Status;
    let Some(env) = imported_store(SQLITE_LATEST, 9) else {
        return;
    };
    let db = database(&env);
    let conn = clawkeeper::agentdb::open_read_write(&db).unwrap();
    let cols = rows_api::RowColumns::of(&conn).unwrap();
    let (sessions, _) = rows_api::sessions(&conn, None).unwrap();
    let mut plans = Vec::new();
    for s in &sessions {
        let label = rows_api::label(&db, &s.session_id);
        let (out, plan) =
            rows_api::plan(&conn, &label, &s.session_id, None, &|_, i, t| noreply(i, t));
        if let Some(plan) = plan {
            assert_eq!(out.status, Status::WouldChange);
            plans.push((s.session_id.clone(), out, plan));
        }
    }
    assert!(plans.len() >= 3, "{} sessions to rewrite", plans.len());
    let other = rusqlite::Connection::open(&db).unwrap();
    // 0: a kept row's text changes in place, nothing else (no generation, no time): only the
    // bytes tell. 1: the runtime appends a row. 2: untouched.
    let first = &plans[0].0.clone();
    let changed_row = other
        .execute(
            "UPDATE transcript_events SET event_json = replace(event_json, '\"type\":\"session\"', \
             '\"type\":\"session\" ') WHERE session_id = ?1 AND seq = (SELECT min(seq) FROM \
             transcript_events WHERE session_id = ?1)",
            [first],
        )
        .unwrap();
    assert_eq!(changed_row, 1);
    let second = &plans[1].0.clone();
    other
        .execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) \
             SELECT session_id, max(seq) + 1, '{\"type\":\"custom\",\"id\":\"late\"}', 0 \
             FROM transcript_events WHERE session_id = ?1",
            [second],
        )
        .unwrap();
    drop(other);
    let snapshot =
        |sid: &str| -> String { rows(&env).into_iter().find(|(id, _)| id == sid).unwrap().1 };
    let third = plans[2].0.clone();
    let (first_before, second_before, third_before) =
        (snapshot(first), snapshot(second), snapshot(&third));
    for (i, (sid, out, plan)) in plans.iter_mut().enumerate().take(3) {
        rows_api::write(&conn, cols, plan, out);
        match i {
            0 | 1 => assert!(
                matches!(&out.status, Status::Refused(r) if r.contains("changed since")),
                "{sid}: {:?}",
                out.status
            ),
            _ => assert_eq!(out.status, Status::Changed, "{sid}"),
        }
    }
    assert_eq!(snapshot(first), first_before);
    assert_eq!(snapshot(second), second_before);
    assert_ne!(snapshot(&third), third_before);
    assert!(clawkeeper::agentdb::check(&conn).unwrap().is_ok());
    drop(conn);
    assert_eq!(integrity(&db), "ok");
}

/// Every session's rows, by session id.
pub(crate) fn by_session(env: &TestEnv) -> BTreeMap<String, String> {
    rows(env).into_iter().collect()
}

#[test]
fn strip_images_killed_at_any_moment_leaves_every_session_old_or_new() {
    let Some(template) = imported_store(SQLITE_LATEST, 36) else {
        return;
    };
    killed_at_any_moment(&template, &["strip-images", "--enforce"], 10, &|_, t| {
        t.to_owned()
    });
}

/// Kill `args` (an `--enforce` run on `template`'s agent database) at moments spread over an
/// undisturbed run's span: every session is then as it was or as the undisturbed run left it
/// (compared through `same`, which takes out of a text what differs from run to run, e.g.
/// generated ids, given every session's rows of the env it comes from; also applied to the
/// runtime's contexts as JSON), the database passes
/// `integrity_check`, and a second run finishes the work. The undisturbed run must rewrite
/// `min_rewritten` sessions.
pub(crate) fn killed_at_any_moment(
    template: &TestEnv,
    args: &[&str],
    min_rewritten: usize,
    same: &dyn Fn(&BTreeMap<String, String>, &str) -> String,
) {
    const KILLS: usize = 12;
    let normal = |env: &TestEnv| -> BTreeMap<String, String> {
        let sessions = by_session(env);
        sessions
            .iter()
            .map(|(k, v)| (k.clone(), same(&sessions, v)))
            .collect()
    };
    let contexts_of =
        |env: &TestEnv| same(&by_session(env), &contexts(SQLITE_LATEST, env).to_string());
    let old = normal(template);
    // The undisturbed run: how long it takes, and what every session becomes.
    let whole = copy_env(template);
    let start = Instant::now();
    let out = whole.run(args);
    let span = start.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let new = normal(&whole);
    let rewritten = old.iter().filter(|(k, v)| new[*k] != **v).count();
    assert!(rewritten >= min_rewritten, "{rewritten} sessions rewritten");
    let mut killed_mid_run = 0;
    let mut partly = 0;
    for i in 0..KILLS {
        let env = copy_env(template);
        let delay = span.mul_f64((i as f64 + 0.5) / KILLS as f64);
        let cmd = env.command(args);
        killed_mid_run += usize::from(kill_after(cmd, delay.max(Duration::from_millis(1))));
        let db = database(&env);
        assert_eq!(integrity(&db), "ok", "kill {i} at {delay:?}");
        let now = normal(&env);
        assert_eq!(
            now.keys().collect::<Vec<_>>(),
            old.keys().collect::<Vec<_>>()
        );
        let mut done = 0;
        for (sid, text) in &now {
            assert!(
                *text == old[sid] || *text == new[sid],
                "kill {i} at {delay:?}: session {sid} is neither old nor new"
            );
            done += usize::from(*text != old[sid]);
        }
        partly += usize::from(done > 0 && done < rewritten);
        // A second run finishes the work: the result is the undisturbed run's.
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(normal(&env), new, "kill {i}: the run after the kill");
        if i % 4 == 0 {
            assert_eq!(contexts_of(&env), contexts_of(&whole));
        }
    }
    assert!(
        killed_mid_run >= KILLS / 2,
        "only {killed_mid_run} kills landed mid-run"
    );
    assert!(partly >= 1, "no kill landed between two sessions");
}

/// A JSON-era store of `sessions` sessions of `turns` turns each, every user message with an
/// image of `image_bytes` random base64 (which compresses as little as real image data).
fn write_image_store(env: &TestEnv, sessions: usize, turns: usize, image_bytes: usize) {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut image = || -> String {
        (0..image_bytes)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                B64[(state % 64) as usize] as char
            })
            .collect()
    };
    let dir = env.sessions_dir("main");
    let mut store = serde_json::Map::new();
    for s in 0..sessions {
        let id = sid(100 + s);
        let mut lines = vec![json!({"type":"session","version":3,"id":id,
            "timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"})];
        let mut parent = Value::Null;
        for t in 0..turns {
            let ts = |k: usize| format!("2026-03-01T{:02}:{:02}:{:02}.000Z", t / 60, t % 60, k);
            let u = format!("u{s}-{t}");
            let a = format!("a{s}-{t}");
            lines.push(
                json!({"type":"message","id":u,"parentId":parent,"timestamp":ts(1),
                "message":{"role":"user","content":[{"type":"text","text":format!("look {t}")},
                {"type":"image","data":image(),"mimeType":"image/png"}],"timestamp":1}}),
            );
            lines.push(
                json!({"type":"message","id":a,"parentId":u,"timestamp":ts(2),
                "message":{"role":"assistant","content":[{"type":"text","text":"seen"}],
                "stopReason":"stop","timestamp":2}}),
            );
            parent = json!(a);
        }
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
        store.insert(
            format!("agent:main:images-{s}"),
            json!({"sessionId": id, "updatedAt": 1_790_000_000_000u64 + s as u64}),
        );
    }
    std::fs::write(
        env.store_path(),
        serde_json::to_string_pretty(&Value::Object(store)).unwrap(),
    )
    .unwrap();
}

#[test]
fn strip_images_then_vacuum_gives_back_what_inspect_predicted() {
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        let env = TestEnv::new();
        write_image_store(&env, 6, 12, 48 << 10);
        if import(release, &env).is_none() {
            return;
        }
        let db = database(&env);
        let before_ctx = contexts(release, &env);
        // The baseline: the WAL in the file, free pages given back.
        let (code, v) = env.run_json(&["vacuum", "--enforce"]);
        assert_eq!(code, 0, "{v}");
        let size = || std::fs::metadata(&db).unwrap().len();
        let start = size();
        let (code, doc) = env.run_json(&["inspect", "--no-cleanup"]);
        assert_eq!(code, 0, "{doc}");
        let predicted = doc["stores"][0]["reclaimable"]["strip-images"]
            .as_i64()
            .unwrap();
        // 6 sessions × 12 turns, the last 3 turns of each protected by default.
        assert!(
            predicted > 6 * 8 * (40 << 10),
            "{}: predicted {predicted}",
            release.version
        );
        // 2026.9.6 stores most image rows compressed; a rewritten row becomes text.
        let compressed = "SELECT count(*) FROM transcript_events WHERE event_zstd IS NOT NULL";
        let compressed_before = if release.version == SQLITE_LATEST.version {
            let n = sql_i64(&db, compressed);
            assert!(n >= 6 * 12, "{n} compressed rows");
            n
        } else {
            0
        };
        let (code, done) = env.run_json(&["strip-images", "--enforce"]);
        assert_eq!(code, 0, "{done}");
        assert_eq!(done["totals"]["bytesFreed"], predicted, "{done}");
        if compressed_before > 0 {
            let replaced = done["totals"]["imagesReplaced"].as_i64().unwrap();
            assert_eq!(sql_i64(&db, compressed), compressed_before - replaced);
        }
        let (code, v) = env.run_json(&["vacuum", "--enforce"]);
        assert_eq!(code, 0, "{v}");
        let shrunk = start as i64 - size() as i64;
        assert!(
            shrunk as f64 >= 0.9 * predicted as f64,
            "{}: the file shrank by {shrunk} bytes of {predicted} predicted",
            release.version
        );
        // The runtime loads every session, the old images replaced.
        let after = contexts(release, &env);
        for (key, was) in before_ctx.as_object().unwrap() {
            let now = &after[key];
            assert_eq!(now["ok"], true, "{key}: {now}");
            assert_eq!(
                now["messages"].as_array().unwrap().len(),
                was["messages"].as_array().unwrap().len()
            );
            assert!(now.to_string().len() < was.to_string().len() / 2, "{key}");
        }
        assert_eq!(integrity(&db), "ok");
    }
}

/// Hostile databases: an unknown schema version, the gateway lifecycle lock held by the
/// runtime's own code, a session in cold storage, a row holding a line break, a session with a
/// `leaf` control record.
#[test]
fn hostile_databases_are_refused_or_passed_over_and_nothing_else_changes() {
    let Some(env) = imported_store(SQLITE_LATEST, 6) else {
        return;
    };
    let db = database(&env);
    let before = by_session(&env);
    let sql = |q: &str| {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(q).unwrap();
    };
    // An unknown schema version: refused (exit 3), nothing written; a preview says so.
    let version = sql_i64(&db, "PRAGMA user_version");
    sql("PRAGMA user_version = 99");
    let out = env.run(&["prune-noreply", "--enforce"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("schema version 99"),
        "{}",
        stderr(&out)
    );
    assert_eq!(by_session(&env), before);
    let out = env.run(&["compact", "--enforce", "--min-tokens", "0"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(by_session(&env), before);
    let (code, preview) = env.run_json(&["prune-noreply"]);
    assert_eq!(code, 0, "{preview}");
    assert!(
        preview.to_string().contains("--enforce would refuse"),
        "{preview}"
    );
    sql(&format!("PRAGMA user_version = {version}"));

    // The gateway lifecycle lock, held by the runtime's own code: exit 4, nothing written.
    let oracle = oracle_path_of(SQLITE_LATEST, "lifecycle lock").unwrap();
    let state = env.state();
    let holder = Script::spawn(&oracle, "hold-lifecycle-lock.mjs", &[os(&state)]);
    let held = holder.next("the lock");
    assert_eq!(held["held"], true, "{held}");
    let out = env.run(&["strip-images", "--enforce"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("lifecycle lock"), "{}", stderr(&out));
    assert_eq!(by_session(&env), before);
    holder.finish("the release");

    // A session in cold storage is skipped and says so; a row holding a line break makes its
    // session damaged (not edited); the others are written.
    let (cold, broken) = (sid(0), sid(1));
    sql(&format!(
        "INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, \
         archive_sha256, event_count, raw_bytes, archive_bytes, last_seq, archived_at, storage) \
         VALUES ('{cold}', 'g', 'cold.zst', '{}', 1, 1, 1, 0, 0, 'file')",
        "0".repeat(64)
    ));
    sql(&format!(
        "UPDATE transcript_events SET event_json = replace(event_json, '{{\"type\":', \
         '{{\"x\":\"a' || char(10) || 'b\",\"type\":'), event_zstd = NULL, \
         event_utf8_bytes = NULL, navigation_json = NULL WHERE session_id = '{broken}' AND \
         seq = (SELECT max(seq) FROM transcript_events WHERE session_id = '{broken}' \
         AND event_json IS NOT NULL)"
    ));
    // A session whose last row is a `leaf` control record: passed over (the SQLite-era
    // loader is not the one this tool follows for files).
    let leafy = sid(2);
    sql(&format!(
        "UPDATE transcript_events SET event_json = json_set(event_json, '$.type', 'leaf', \
         '$.targetId', json_extract(event_json, '$.parentId')), event_zstd = NULL, \
         event_utf8_bytes = NULL, navigation_json = NULL WHERE session_id = '{leafy}' AND \
         seq = (SELECT max(seq) FROM transcript_events WHERE session_id = '{leafy}')"
    ));
    let hostile = by_session(&env);
    assert_ne!(hostile[&broken], before[&broken]);
    assert!(hostile[&leafy].contains(r#""type":"leaf""#));
    let (code, done) = env.run_json(&["strip-images", "--enforce"]);
    assert_eq!(code, 0, "{done}");
    let status = |id: &str| -> Value {
        done["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"].as_str().unwrap().ends_with(&format!("#{id}")))
            .unwrap()
            .clone()
    };
    assert_eq!(status(&cold)["status"], "skipped", "{done}");
    assert!(
        status(&cold)["reason"]
            .as_str()
            .unwrap()
            .contains("cold storage")
    );
    assert_eq!(status(&broken)["status"], "damaged", "{done}");
    assert_eq!(status(&leafy)["status"], "skipped", "{done}");
    assert!(
        status(&leafy)["reason"]
            .as_str()
            .unwrap()
            .contains("`leaf` control records")
    );
    assert!(done["totals"]["changed"].as_u64().unwrap() > 0, "{done}");
    let after = by_session(&env);
    assert_eq!(after[&cold], hostile[&cold]);
    assert_eq!(after[&broken], hostile[&broken]);
    assert_eq!(after[&leafy], hostile[&leafy]);
    assert_eq!(integrity(&db), "ok");
    // compact reads the rows back to summarise them: the same sessions are passed over.
    let compact = [
        "compact",
        "--enforce",
        "--keep-recent-tokens",
        "300",
        "--min-tokens",
        "0",
    ];
    let (code, done) = env.run_json(&compact);
    assert_eq!(code, 0, "{done}");
    let status = |id: &str| -> Value {
        done["transcripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"].as_str().unwrap().ends_with(&format!("#{id}")))
            .unwrap()
            .clone()
    };
    assert_eq!(status(&cold)["status"], "skipped", "{done}");
    assert_eq!(status(&broken)["status"], "damaged", "{done}");
    let compacted = by_session(&env);
    assert_eq!(compacted[&cold], hostile[&cold]);
    assert_eq!(compacted[&broken], hostile[&broken]);
    assert_eq!(compacted[&leafy], hostile[&leafy]);
    for (sid, text) in &compacted {
        // Every other session is as it was, or as it was with one compaction row more.
        let added = text.strip_prefix(after[sid].as_str()).unwrap();
        assert!(
            added.is_empty() || (added.lines().count() == 1 && added.contains("\"compaction\"")),
            "{sid}: {added}"
        );
    }
    assert_eq!(integrity(&db), "ok");
}

/// The row writer appends a compaction as the runtime would load it: the summary, then the
/// old context from its first kept entry on; the runtime appends after it.
#[test]
fn an_appended_compaction_row_is_loaded_as_the_summary_and_the_kept_tail() {
    use clawkeeper::agentdb::transcripts as rows_api;
    use clawkeeper::transcript::job::{Planned, Status};
    use clawkeeper::transcript::tree::ContextItem;
    use clawkeeper::transcript::{EntryType, Role};
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        let Some(env) = imported_store(release, 3) else {
            return;
        };
        let db = database(&env);
        let before = contexts(release, &env);
        let key = "agent:main:case-0";
        let sid0 = sid(0);
        let planner = |index: &clawkeeper::transcript::Index,
                       tree: &clawkeeper::transcript::tree::Tree|
         -> Result<Planned, clawkeeper::transcript::job::PlanError> {
            let leaf = tree
                .leaf
                .ok_or_else(|| clawkeeper::transcript::job::PlanError::Skip("no leaf".into()))?;
            let (context, _) = clawkeeper::transcript::tree::active_context(index, tree);
            let user = |i: &usize| {
                let e = &index.entries[*i];
                e.kind == EntryType::Message && e.role == Some(Role::User)
            };
            // Keep from the last user message but one of the context (or its only one).
            let users: Vec<usize> = context
                .iter()
                .filter_map(|c| match c {
                    ContextItem::Entry(_) => Some(c.at()),
                    ContextItem::CompactionSummary(_) => None,
                })
                .filter(|i| user(i))
                .collect();
            let kept = users[users.len().saturating_sub(2)];
            let compaction = json!({
                "type": "compaction",
                "id": "c0mpac7e",
                "parentId": index.entries[leaf].id.as_deref(),
                "timestamp": "2026-03-05T00:00:00.000Z",
                "summary": "clawkeeper test summary",
                "firstKeptEntryId": index.entries[kept].id.as_deref(),
                "tokensBefore": 1234,
            });
            let mut planned = Planned::default();
            planned.edits.append.push(compaction);
            Ok(planned)
        };
        let conn = clawkeeper::agentdb::open_read_write(&db).unwrap();
        let cols = rows_api::RowColumns::of(&conn).unwrap();
        let label = rows_api::label(&db, &sid0);
        let max_seq = sql_i64(
            &db,
            &format!("SELECT max(seq) FROM transcript_events WHERE session_id = '{sid0}'"),
        );
        let (mut out, plan) = rows_api::plan(&conn, &label, &sid0, None, &|_, i, t| planner(i, t));
        assert_eq!(out.status, Status::WouldChange, "{:?}", out.status);
        rows_api::write(&conn, cols, &plan.unwrap(), &mut out);
        assert_eq!(out.status, Status::Changed, "{:?}", out.status);
        drop(conn);
        let row = |q: &str| sql_i64(&db, &format!("{q} WHERE session_id = '{sid0}'"));
        assert_eq!(row("SELECT max(seq) FROM transcript_events"), max_seq + 1);
        assert_eq!(
            sql_i64(
                &db,
                &format!(
                    "SELECT seq FROM transcript_event_identities WHERE session_id = '{sid0}' \
                     AND event_id = 'c0mpac7e' AND parent_id IS NOT NULL"
                )
            ),
            max_seq + 1
        );
        assert_eq!(integrity(&db), "ok");
        let after = contexts(release, &env);
        let (was, now) = (
            before[key]["messages"].as_array().unwrap(),
            after[key]["messages"].as_array().unwrap(),
        );
        assert_eq!(now[0]["role"], "compactionSummary", "{}", now[0]);
        assert_eq!(now[0]["summary"], "clawkeeper test summary");
        let tail = &now[1..];
        assert!(
            !tail.is_empty() && tail.len() <= was.len(),
            "{} of {}",
            tail.len(),
            was.len()
        );
        assert_eq!(tail, &was[was.len() - tail.len()..], "{}", release.version);
        // The other sessions load as before.
        for (k, v) in before.as_object().unwrap() {
            if k != key {
                assert_eq!(after[k], *v, "{k}");
            }
        }
        runtime_appends(release, &env, key);
        let again = contexts(release, &env);
        let msgs = again[key]["messages"].as_array().unwrap();
        assert_eq!(msgs[0]["role"], "compactionSummary");
        assert!(
            msgs.last()
                .unwrap()
                .to_string()
                .contains("clawkeeper-writer")
        );
        assert_eq!(integrity(&db), "ok");
    }
}
