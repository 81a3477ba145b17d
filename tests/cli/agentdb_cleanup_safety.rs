//! `cleanup --enforce` on SQLite-era agent databases where data gets lost elsewhere: a run
//! killed at any moment (2026.9.6 and 2026.8.2 databases), and a runtime writing to the
//! database (holding its lease, or starting while the cleanup runs), as `agentdb_safety.rs`
//! does for `vacuum`, with its harness.
//!
//! The workload is the demo imported by the release with the parity suite's demo config and
//! three historical windows: the plan archives entries in place (2026.9.6), deletes synthetic
//! entries with their transcripts archived (rows and published `.zst` files), and the disk
//! budget (far over: 60 kB) reclaims free pages, removes every published archive (file, then
//! row, as the runtime does), evicts the historical windows (archived first) and, in 2026.9.6,
//! the cap-archived entries. A killed run leaves a sequence of committed steps; what "old or
//! new" means per table after a kill (`O`: before, `E`: after an uninterrupted run without the
//! budget, i.e. the entry writes alone, `N`: after an uninterrupted run):
//!
//! - `session_nodes`: each row is a row of `O` or `E` (the entries archived in place are
//!   written in one transaction, the deleted ones in batches after it, as the runtime
//!   finalizes them), or `E` less some of what `N` lacks (the budget evicted them); every key
//!   of `N` is there.
//! - every other table but the archives: each row is a row of `O`, `E` or `N` (changes are
//!   deletions and the entry writes' projections), and every row `O` and `N` share is there.
//! - `session_transcript_archives`: each new row holds exactly the old transcript of its
//!   session (zstd of its rows as JSONL, its SHA-256 right); published or still pending.
//! - `sessions/`: a file `O` had is gone only when `N` lacks it too; a new file is a row's
//!   archive with the row's bytes, or the temp file of a row being published.
//! - no transcript is lost that `N` keeps: a session of `O` whose window is gone has an
//!   archive row, or `N` lacks its window too; a window that is there has all its rows.
//!
//! `PRAGMA integrity_check` is ok, the reference runtime loads every remaining session as
//! before, and a rerun of `cleanup --enforce` ends at exactly `N` (timestamps of the run
//! normalised, as the parity suite does).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use crate::agentdb::{
    contexts, copy_demo, copy_env, database, imported, integrity, loads_as_before, read_only,
    sql_i64, sqlite_import,
};
use crate::agentdb_cleanup::{DEMO, add_historical_windows, dump, same_lines};
use crate::agentdb_safety::{
    KEY, Kills, Setup, WriterDuring, appended_in_order, kill_after, kill_delay,
    loads_with_appended, one_line, refused_for_lease, setup, writer, writer_starts_during,
};
use crate::storegen::{Rng, sha256_hex, transcript};
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, TestEnv, now_ms, oracle_path_of, stderr, stdout,
};

/// The crash workload's config: stale entries archived (2026.9.x) or deleted, a cap of 5
/// unarchived entries, stale dashboards archived, and a disk budget far over.
const WORKLOAD: &str = r#"{session:{maintenance:{mode:"enforce",pruneAfter:"30d",maxEntries:5,archiveDashboardAfter:"1d",maxDiskBytes:"60kb",highWaterBytes:"40kb"}}}"#;
/// [`WORKLOAD`] without the disk budget: the same entry plan, the entry writes alone.
const WORKLOAD_ENTRIES_ONLY: &str = r#"{session:{maintenance:{mode:"enforce",pruneAfter:"30d",maxEntries:5,archiveDashboardAfter:"1d",maxDiskBytes:false}}}"#;
/// [`DEMO`] without the disk budget.
const DEMO_ENTRIES_ONLY: &str = r#"{session:{dmScope:"main",maintenance:{mode:"enforce",pruneAfter:"3650d",resetArchiveRetention:"3650d",maxEntries:12,maxDiskBytes:false}}}"#;

/// A dump normalises nothing (no value is at or after this).
const NEVER: i64 = i64::MAX / 2;

/// Kills per release (`CLAWKEEPER_DBCLEANUP_KILLS`, default 6).
fn kills() -> usize {
    std::env::var("CLAWKEEPER_DBCLEANUP_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// The demo imported by `release`, with [`DEMO`] and three historical windows.
fn demo_workload(release: Release) -> Option<TestEnv> {
    let env = imported(release)?;
    env.write_config(DEMO);
    add_historical_windows(&database(&env), 3);
    Some(env)
}

/// The crash workload: the demo with six more entries (durable ones, stale and recent, and
/// dashboards, each with a generated transcript), imported by `release`'s doctor, with
/// [`WORKLOAD`] and three historical windows.
fn workload(release: Release) -> Option<TestEnv> {
    const DAY: i64 = 86_400_000;
    let oracle = oracle_path_of(release, "SQLite-era cleanup crash workload")?;
    let env = TestEnv::new();
    std::fs::remove_dir_all(env.state()).unwrap();
    copy_demo(&env.state());
    let state = env.state();
    let sessions = state.join("agents/main/sessions");
    let store_path = sessions.join("sessions.json");
    let mut store: serde_json::Map<String, Value> =
        serde_json::from_slice(&std::fs::read(&store_path).unwrap()).unwrap();
    let mut rng = Rng::new(SEED);
    let now = now_ms();
    for (key, days) in [
        ("explicit:e1", 400),
        ("explicit:e2", 90),
        ("explicit:e3", 3),
        ("explicit:e4", 2),
        ("dashboard:d1", 5),
        ("dashboard:d2", 4),
    ] {
        let sid = rng.uuid();
        let updated = now - days * DAY;
        let shape = transcript::Shape::random(&mut rng);
        let text = transcript::transcript(&mut rng, &sid, updated - 3_600_000, shape);
        std::fs::write(sessions.join(format!("{sid}.jsonl")), text).unwrap();
        store.insert(
            format!("agent:main:{key}"),
            serde_json::json!({"sessionId": sid, "updatedAt": updated}),
        );
    }
    std::fs::write(&store_path, serde_json::to_vec_pretty(&store).unwrap()).unwrap();
    sqlite_import(&oracle, &state, None);
    env.write_config(WORKLOAD);
    add_historical_windows(&database(&env), 3);
    Some(env)
}

/// Seed of the workload's generated transcripts.
const SEED: u64 = 41;

/// `cleanup --enforce` to its end: the dump of the result with the times of the run as `NOW`,
/// when the run started (what [`dump`] takes), and how long it took.
#[track_caller]
fn cleaned(env: &TestEnv) -> (Vec<String>, i64, Duration) {
    let since = now_ms();
    let start = Instant::now();
    let out = env.run(&["cleanup", "--enforce"]);
    let took = start.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    (dump(env, since), since, took)
}

/// A dump's lines by table (`file` for the files of `sessions/`).
fn by_table(lines: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in lines {
        let table = if l.starts_with("file ") {
            "file"
        } else {
            l.split_once(": ").map_or("?", |(t, _)| t)
        };
        out.entry(table.to_string()).or_default().insert(l.clone());
    }
    out
}

/// Every transcript of `db` as the archive holds it: its rows as JSONL, in `seq` order.
fn transcripts(db: &Path) -> HashMap<String, Vec<u8>> {
    let conn = read_only(db);
    let compressed = conn
        .prepare("SELECT 1 FROM pragma_table_info('transcript_events') WHERE name = 'event_zstd'")
        .unwrap()
        .exists([])
        .unwrap();
    let sql = if compressed {
        "SELECT session_id, event_json, event_zstd FROM transcript_events ORDER BY session_id, seq"
    } else {
        "SELECT session_id, event_json, NULL FROM transcript_events ORDER BY session_id, seq"
    };
    let mut out: HashMap<String, Vec<u8>> = HashMap::new();
    let mut stmt = conn.prepare(sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let sid: String = r.get(0).unwrap();
        let line = match r.get::<_, Option<String>>(1).unwrap() {
            Some(json) => json.into_bytes(),
            None => zstd::stream::decode_all(&r.get::<_, Vec<u8>>(2).unwrap()[..]).unwrap(),
        };
        let t = out.entry(sid).or_default();
        t.extend_from_slice(&line);
        t.push(b'\n');
    }
    out
}

/// The archive rows of `db`: session id → (name, sha256, blob, published).
fn archive_rows(db: &Path) -> HashMap<String, (String, String, Vec<u8>, bool)> {
    let conn = read_only(db);
    // The table comes with the first archive in some releases.
    let exists = conn
        .prepare("SELECT 1 FROM sqlite_schema WHERE name = 'session_transcript_archives'")
        .unwrap()
        .exists([])
        .unwrap();
    if !exists {
        return HashMap::new();
    }
    let mut stmt = conn
        .prepare(
            "SELECT session_id, archive_name, archive_sha256, archive_blob, published_at IS NOT NULL \
             FROM session_transcript_archives",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn windows(db: &Path) -> BTreeSet<String> {
    let conn = read_only(db);
    conn.prepare("SELECT session_id FROM session_windows")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What the checks of a killed run compare against.
struct Expected {
    release: Release,
    /// Before, after the entry writes alone, after the whole run (dumps by table).
    old: BTreeMap<String, BTreeSet<String>>,
    entries: BTreeMap<String, BTreeSet<String>>,
    new: BTreeMap<String, BTreeSet<String>>,
    new_lines: Vec<String>,
    /// The old transcripts by session id, and the windows the whole run keeps.
    transcripts: HashMap<String, Vec<u8>>,
    new_windows: BTreeSet<String>,
    contexts: Value,
}

fn table<'a>(d: &'a BTreeMap<String, BTreeSet<String>>, t: &str) -> BTreeSet<&'a String> {
    d.get(t).map(|s| s.iter().collect()).unwrap_or_default()
}

impl Expected {
    /// The state a killed run left in `env` (see the module doc).
    #[track_caller]
    fn check_killed(&self, env: &TestEnv, since: i64, line: &str, load: bool) {
        let db = database(env);
        assert_eq!(integrity(&db), "ok", "{line}");
        let got = by_table(&dump(env, since));
        // session_nodes: each row old or as the entry writes left it (the budget evicts some
        // of what the new run lacks), and every row of the new run there.
        let nodes = table(&got, "session_nodes");
        let (o, e, n) = (
            table(&self.old, "session_nodes"),
            table(&self.entries, "session_nodes"),
            table(&self.new, "session_nodes"),
        );
        let stray: Vec<&&String> = nodes
            .iter()
            .filter(|r| !o.contains(*r) && !e.contains(*r))
            .collect();
        let key = |r: &&String| r.split(" | ").next().map(str::to_string);
        let keys: BTreeSet<Option<String>> = nodes.iter().map(key).collect();
        let missing: Vec<&&String> = n.iter().filter(|r| !keys.contains(&key(r))).collect();
        assert!(
            stray.is_empty() && missing.is_empty(),
            "{line}: session_nodes rows of no run: {stray:#?}, or keys of the new run \
             missing: {missing:#?}"
        );
        for (t, rows) in &got {
            if [
                "session_nodes",
                "session_transcript_archives",
                "file",
                "fts rows",
            ]
            .contains(&t.as_str())
            {
                continue;
            }
            let (o, e, n) = (
                table(&self.old, t),
                table(&self.entries, t),
                table(&self.new, t),
            );
            let stray: Vec<&String> = rows
                .iter()
                .filter(|r| !o.contains(r) && !e.contains(r) && !n.contains(r))
                .take(5)
                .collect();
            assert!(
                stray.is_empty(),
                "{line}: {t} has rows of no run: {stray:#?}"
            );
            let lost: Vec<&&String> = o
                .intersection(&n)
                .filter(|r| !rows.contains(**r))
                .take(5)
                .collect();
            assert!(
                lost.is_empty(),
                "{line}: {t} lost rows both runs keep: {lost:#?}"
            );
        }
        for t in self.old.keys().chain(self.new.keys()) {
            if !got.contains_key(t) && !["file", "fts rows"].contains(&t.as_str()) {
                let kept = table(&self.old, t)
                    .intersection(&table(&self.new, t))
                    .count();
                assert_eq!(kept, 0, "{line}: every row of {t} is gone");
            }
        }
        // Archive rows: each the old transcript, exactly.
        let archives = archive_rows(&db);
        for (sid, (name, sha, blob, _)) in &archives {
            assert_eq!(&sha256_hex(blob), sha, "{line}: archive of {sid}");
            let plain = zstd::stream::decode_all(&blob[..]).unwrap();
            assert!(
                Some(&plain) == self.transcripts.get(sid),
                "{line}: the archive {name} does not hold the old transcript of {sid}"
            );
        }
        // Files: gone only when the whole run removes them too; new ones are archives.
        let sessions = env.state().join("agents/main/sessions");
        let old_files = table(&self.old, "file");
        let new_files = table(&self.new, "file");
        let files = table(&got, "file");
        for f in old_files.difference(&files) {
            assert!(!new_files.contains(f), "{line}: {f} is gone");
        }
        let names: HashMap<&str, &str> = archives
            .values()
            .map(|(name, sha, _, _)| (name.as_str(), sha.as_str()))
            .collect();
        for e in std::fs::read_dir(&sessions).unwrap().flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if old_files
                .iter()
                .any(|l| l.starts_with(&format!("file {file} ")))
            {
                continue;
            }
            if let Some(sha) = names.get(file.as_str()) {
                let bytes = std::fs::read(e.path()).unwrap();
                assert_eq!(
                    &sha256_hex(&bytes),
                    sha,
                    "{line}: {file} is not its row's archive"
                );
                continue;
            }
            let temp = names.keys().any(|n| {
                file.strip_prefix(n)
                    .and_then(|r| r.strip_prefix('.'))
                    .and_then(|r| r.strip_suffix(".tmp"))
                    .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            });
            assert!(temp, "{line}: {file} in sessions/ is no archive row's");
        }
        // No transcript lost that the whole run keeps.
        let now = windows(&db);
        for (sid, text) in &self.transcripts {
            if now.contains(sid) {
                let rows = sql_i64(
                    &db,
                    &format!("SELECT count(*) FROM transcript_events WHERE session_id = '{sid}'"),
                );
                let lines = text.iter().filter(|b| **b == b'\n').count() as i64;
                assert_eq!(rows, lines, "{line}: {sid} lost rows");
            } else {
                assert!(
                    archives.contains_key(sid) || !self.new_windows.contains(sid),
                    "{line}: the transcript of {sid} is gone without an archive"
                );
            }
        }
        if load {
            loads_as_before(line, &self.contexts, &contexts(self.release, env), None);
        }
    }
}

fn killed_cleanup(release: Release) {
    let Some(template) = workload(release) else {
        return;
    };
    let entries_env = copy_env(&template);
    entries_env.write_config(WORKLOAD_ENTRIES_ONLY);
    let (entries, _, _) = cleaned(&entries_env);
    let new_env = copy_env(&template);
    let (new_lines, _, span) = cleaned(&new_env);
    let expected = Expected {
        release,
        old: by_table(&dump(&template, NEVER)),
        entries: by_table(&entries),
        new: by_table(&new_lines),
        new_lines,
        transcripts: transcripts(&database(&template)),
        new_windows: windows(&database(&new_env)),
        contexts: contexts(release, &template),
    };
    // The workload has every kind of write: entries archived in place (2026.9.x), entries
    // deleted with their archives, and the budget's evictions.
    let (code, plan) = template.run_json(&["cleanup", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{plan}");
    let count = |k: &str| plan[k].as_u64().unwrap_or(0);
    let in_place = count("archived") + count("capArchived");
    let deleted =
        count("modelRunPruned") + count("pruned") + count("capped") - count("capArchived");
    eprintln!(
        "{} plan: {in_place} archived in place, {deleted} deleted",
        release.version
    );
    assert!(deleted > 0, "{plan}");
    assert!(
        table(&expected.entries, "session_transcript_archives").len()
            > table(&expected.old, "session_transcript_archives").len(),
        "archives"
    );
    if release.version == SQLITE_LATEST.version {
        assert!(in_place > 0 && count("capArchived") > 0, "{plan}");
        assert!(
            table(&expected.new, "session_nodes") != table(&expected.entries, "session_nodes"),
            "the budget evicts cap-archived entries"
        );
        assert!(
            expected.new_windows.len() < windows(&database(&entries_env)).len(),
            "the budget evicts windows"
        );
    }
    assert!(
        table(&expected.new, "session_transcript_archives").len()
            < table(&expected.entries, "session_transcript_archives").len(),
        "the budget removes archives"
    );

    let n = kills();
    let mut kills = Kills::default();
    for i in 0..n {
        let (delay, frac) = kill_delay(i, n, span);
        let env = copy_env(&template);
        let since = now_ms();
        let running = kill_after(env.command(&["cleanup", "--enforce"]), delay);
        let db = database(&env);
        let rows = archive_rows(&db);
        let pending = rows.values().filter(|r| !r.3).count();
        let line = kills.record(running, |outcome| {
            format!(
                "{} kill {i:2} at {delay:>8.1?} ({:3.0} %): {outcome}, {} archive rows \
                 ({pending} pending), {} windows",
                release.version,
                frac * 100.0,
                rows.len(),
                windows(&db).len(),
            )
        });
        expected.check_killed(&env, since, &line, i == n / 2 || i == n - 1);
        // The next run is not refused, and it finishes the job.
        let out = env.run(&["cleanup", "--enforce"]);
        assert_eq!(out.status.code(), Some(0), "after {line}: {}", stderr(&out));
        assert_eq!(integrity(&db), "ok", "after {line}");
        same_lines(
            &format!("the rerun after {line}"),
            &expected.new_lines,
            &dump(&env, since),
        );
    }
    kills.finish(&format!("a run took {span:?}"));
}

#[test]
fn cleanup_killed_at_any_moment_leaves_old_or_new_content_on_2026_9_6() {
    killed_cleanup(SQLITE_LATEST);
}

#[test]
fn cleanup_killed_at_any_moment_leaves_old_or_new_content_on_2026_8_2() {
    killed_cleanup(SQLITE_FIRST);
}

// ---------------------------------------------------------------------------------------
// The runtime writing to the database.

/// The current session id of [`KEY`].
fn writer_session(db: &Path) -> String {
    let conn = read_only(db);
    conn.query_row(
        "SELECT current_session_id FROM session_nodes WHERE session_key = ?1",
        [KEY],
        |r| r.get(0),
    )
    .unwrap()
}

/// A dump without the lines the writer changes (those naming [`KEY`] or its session).
fn without_writer(env: &TestEnv) -> Vec<String> {
    let sid = writer_session(&database(env));
    dump(env, NEVER)
        .into_iter()
        .filter(|l| !l.contains(KEY) && !l.contains(&sid) && !l.starts_with("fts rows"))
        .collect()
}

fn writer_rows(db: &Path) -> i64 {
    sql_i64(
        db,
        &format!(
            "SELECT count(*) FROM transcript_events WHERE session_id = '{}'",
            writer_session(db)
        ),
    )
}

#[test]
fn a_runtime_writer_holding_its_lease_stops_the_cleanup_and_nothing_changes() {
    let Some(Setup {
        env, db, before, ..
    }) = setup(1 << 20)
    else {
        return;
    };
    env.write_config(DEMO);
    let rows_before = writer_rows(&db);
    let old = without_writer(&env);
    let Some(writer) = writer(&env, false) else {
        return;
    };
    let ready = writer.next("the first append");
    assert_eq!(ready["ready"], true, "{ready}");
    let pid = ready["pid"].as_u64().unwrap();
    for args in [
        &["cleanup", "--enforce"][..],
        &["cleanup", "--enforce", "--json", "--wait-lock", "1s"][..],
    ] {
        refused_for_lease(&env, args, &db, pid);
    }
    let done = writer.finish("the writer's count");
    let n = done["appended"].as_u64().unwrap();
    assert!(n > 0 && done["failed"] == Value::Array(vec![]), "{done}");
    same_lines("the refused cleanups", &old, &without_writer(&env));
    assert_eq!(writer_rows(&db), rows_before + n as i64, "no row lost");
    assert_eq!(integrity(&db), "ok");
    loads_with_appended(&env, &before, n);
    // The writer is gone, and its lease with it: the cleanup runs, and keeps every append.
    let out = env.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(integrity(&db), "ok");
    appended_in_order(&contexts(SQLITE_LATEST, &env), &before, n);
}

/// A writer whose lease comes after the cleanup checked the leases: SQLite's locking (busy
/// timeout 5 s on both sides) is all that stands between them. Whatever the cleanup then
/// reports, nothing the writer appended is lost, the file is sound, the sessions load.
#[test]
fn a_runtime_writer_that_starts_during_the_cleanup_loses_nothing() {
    // A WAL of 4 MB: the budget's page reclamation (passes of 512 pages, each followed by a
    // TRUNCATE checkpoint that waits for the writer) stays short.
    let Some(Setup {
        env, db, before, ..
    }) = setup(4 << 20)
    else {
        return;
    };
    env.write_config(DEMO);
    let rows_before = writer_rows(&db);
    let Some(mut writer) = writer(&env, true) else {
        return;
    };
    let WriterDuring {
        out,
        took,
        ended,
        go_at,
        ..
    } = writer_starts_during(&env, &mut writer, &["cleanup", "--enforce"], "cleanup");
    std::thread::sleep(Duration::from_millis(300));
    let done = writer.finish("the writer's count");
    let n = done["appended"].as_u64().unwrap();
    let code = out.status.code();
    eprintln!(
        "cleanup exited {code:?} after {took:?}: {}; the writer began {} ms before it ended, \
         appended {n}, failed {}",
        stderr(&out).trim_end(),
        ended - go_at,
        done["failed"]
    );
    match code {
        Some(0) => {}
        Some(4) => assert!(
            one_line(&out).contains("another connection is using the database"),
            "{}",
            stderr(&out)
        ),
        _ => panic!("cleanup exited {code:?}: {}{}", stdout(&out), stderr(&out)),
    }
    assert!(n > 0, "{done}");
    assert_eq!(integrity(&db), "ok");
    assert_eq!(
        writer_rows(&db),
        rows_before + n as i64,
        "no row lost: {done}"
    );
    // A rerun finishes the job; every session that remains loads as before, the writer's
    // with every append.
    let out = env.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(integrity(&db), "ok");
    let after = contexts(SQLITE_LATEST, &env);
    loads_as_before("after the rerun", &before, &after, Some(KEY));
    appended_in_order(&after, &before, n);
}

// ---------------------------------------------------------------------------------------
// Archive rows whose files are not published: a killed run's, and hostile ones.

/// The demo after a cleanup without the budget (its archives published), with every archive
/// row set back to pending and its file removed, as a run killed after its commit leaves them,
/// and a temp file of the first one. Returns the env and the rows (session id, name).
fn pending(template: &TestEnv) -> (TestEnv, Vec<(String, String)>) {
    let env = copy_env(template);
    let db = database(&env);
    let conn = Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE session_transcript_archives SET published_at = NULL, publish_attempts = 0, \
         last_publish_attempt_at = NULL",
        [],
    )
    .unwrap();
    let rows: Vec<(String, String)> = conn
        .prepare(
            "SELECT session_id, archive_name FROM session_transcript_archives \
             ORDER BY archive_name",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(conn);
    let sessions = env.state().join("agents/main/sessions");
    for (_, name) in &rows {
        std::fs::remove_file(sessions.join(name)).unwrap();
    }
    std::fs::write(sessions.join(format!("{}.4242.tmp", rows[0].1)), b"partial").unwrap();
    (env, rows)
}

/// Whether the archive row of `sid` is still pending.
fn is_pending(db: &Path, sid: &str) -> bool {
    sql_i64(
        db,
        &format!(
            "SELECT count(*) FROM session_transcript_archives \
             WHERE session_id = '{sid}' AND published_at IS NULL"
        ),
    ) == 1
}

fn pending_count(db: &Path) -> i64 {
    sql_i64(
        db,
        "SELECT count(*) FROM session_transcript_archives WHERE published_at IS NULL",
    )
}

#[test]
fn a_rerun_publishes_pending_archives_and_refuses_hostile_ones() {
    let Some(template) = demo_workload(SQLITE_LATEST) else {
        return;
    };
    template.write_config(DEMO_ENTRIES_ONLY);
    let (published, first_run, _) = cleaned(&template);

    // A killed run's pending rows and temp file: the rerun publishes every file with its
    // row's bytes and mode, records it, and removes the temp file.
    let (env, rows) = pending(&template);
    assert!(rows.len() >= 2, "{rows:?}");
    let out = env.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(pending_count(&database(&env)), 0);
    // The same content as the first run's: the times of both runs are `NOW` (the archives'
    // are the first run's, their publish times this one's).
    same_lines(
        "pending archives published",
        &published,
        &dump(&env, first_run),
    );

    let sessions = |env: &TestEnv| env.state().join("agents/main/sessions");
    // The run fails (exit 1) naming the problem; the hostile row stays pending.
    let refused = |env: &TestEnv, sid: &str, needle: &str| {
        let db = database(env);
        let out = env.run(&["cleanup", "--enforce"]);
        assert_eq!(out.status.code(), Some(1), "{needle}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
        assert_eq!(integrity(&db), "ok");
        assert!(is_pending(&db, sid), "{needle}: recorded as published");
    };

    // A file of another content under the archive's name: a collision, left as it is.
    let (env, rows) = pending(&template);
    let (sid, name) = &rows[0];
    let squatter = sessions(&env).join(name);
    std::fs::write(&squatter, b"not the archive").unwrap();
    refused(&env, sid, "exists with other content");
    assert_eq!(std::fs::read(&squatter).unwrap(), b"not the archive");

    // A symlink under the archive's name, to a file outside: not followed, not replaced.
    let (env, rows) = pending(&template);
    let (sid, name) = &rows[0];
    let outside = env.root().join("outside.txt");
    std::fs::write(&outside, b"outside").unwrap();
    std::os::unix::fs::symlink(&outside, sessions(&env).join(name)).unwrap();
    refused(&env, sid, "is not a file");
    assert_eq!(std::fs::read(&outside).unwrap(), b"outside");

    // A row whose name is the parent directory (the schema's CHECK keeps slashes out):
    // nothing is written outside sessions/.
    let (env, rows) = pending(&template);
    let (sid, _) = &rows[0];
    Connection::open(database(&env))
        .unwrap()
        .execute(
            "UPDATE session_transcript_archives SET archive_name = '..' WHERE session_id = ?1",
            [sid],
        )
        .unwrap();
    let agent_dir = env.state().join("agents/main");
    let entries = std::fs::read_dir(&agent_dir).unwrap().count();
    refused(&env, sid, "is not a file name");
    assert_eq!(std::fs::read_dir(&agent_dir).unwrap().count(), entries);

    // A row whose blob does not match its SHA-256: not published.
    let (env, rows) = pending(&template);
    let (sid, name) = &rows[0];
    Connection::open(database(&env))
        .unwrap()
        .execute(
            "UPDATE session_transcript_archives SET archive_sha256 = ?1 WHERE session_id = ?2",
            [&"0".repeat(64), sid],
        )
        .unwrap();
    refused(&env, sid, "does not match its SHA-256");
    assert!(!sessions(&env).join(name).exists());
}

/// Another connection holding a read snapshot (a runtime's long read) keeps the budget's
/// checkpoints from completing: the budget stops there, as the runtime defers it, after the
/// entry writes; nothing is lost, and once the reader is gone a rerun ends where an
/// undisturbed run does.
#[test]
fn a_held_snapshot_defers_the_budget_and_a_rerun_finishes_it() {
    let Some(template) = demo_workload(SQLITE_LATEST) else {
        return;
    };
    let (undisturbed, _, _) = cleaned(&copy_env(&template));
    let env = copy_env(&template);
    let db = database(&env);
    let reader = Connection::open(&db).unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM transcript_events;")
        .unwrap();
    let since = now_ms();
    let (code, doc) = env.run_json(&["cleanup", "--enforce", "--json"]);
    assert_eq!(code, 0, "{doc}");
    let budget = &doc["diskBudget"];
    assert_eq!(budget["overBudget"], true, "{doc}");
    assert_eq!(
        budget["removedFiles"], 0,
        "deferred at its first checkpoint: {doc}"
    );
    assert_eq!(budget["removedEntries"], 0, "{doc}");
    reader.execute_batch("COMMIT;").unwrap();
    drop(reader);
    assert_eq!(integrity(&db), "ok");
    // The entry writes are done, their archives published.
    let archives = archive_rows(&db);
    assert!(!archives.is_empty());
    for (name, sha, _, published) in archives.values() {
        assert!(published, "{name}");
        let bytes = std::fs::read(env.state().join("agents/main/sessions").join(name)).unwrap();
        assert_eq!(&sha256_hex(&bytes), sha, "{name}");
    }
    let out = env.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    same_lines("the rerun", &undisturbed, &dump(&env, since));
}

/// The `session_nodes` rows of `db`: key → `entry_json`.
fn node_entries(db: &Path) -> BTreeMap<String, String> {
    let conn = read_only(db);
    let mut stmt = conn
        .prepare("SELECT session_key, entry_json FROM session_nodes")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// An entry the maintenance deletes that another connection changes between the lifecycle
/// transaction and the first deletion batch is left as it is (as the runtime skips it), and
/// the run says so on stderr, naming the database and the key; the other removals are made.
fn changed_entry_is_skipped_with_a_warning(release: Release) {
    let Some(template) = imported(release) else {
        return;
    };
    template.write_config(DEMO_ENTRIES_ONLY);
    // Where an undisturbed run deletes rows.
    let undisturbed = copy_env(&template);
    let before = node_entries(&database(&undisturbed));
    let out = undisturbed.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let after = node_entries(&database(&undisturbed));
    let deleted: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert!(deleted.len() >= 2, "the demo deletes entries: {deleted:?}");
    // The same run, with the first of them changed by another connection meanwhile.
    let env = copy_env(&template);
    let db = database(&env);
    let key = deleted[0];
    let sql = format!(
        "UPDATE session_nodes SET entry_json = json_set(entry_json, '$.label', 'renamed \
         meanwhile') WHERE session_key = '{}'",
        key.replace('\'', "''")
    );
    let out = env.run_with_env(
        &["cleanup", "--enforce"],
        &[("CLAWKEEPER_TEST_SQL_AFTER_LIFECYCLE", &sql)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("clawkeeper: warning: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains(&db.display().to_string()) && warnings[0].contains(key.as_str()),
        "{}",
        warnings[0]
    );
    let nodes = node_entries(&db);
    let kept: Value = serde_json::from_str(&nodes[key]).unwrap();
    assert_eq!(kept["label"], "renamed meanwhile", "{kept}");
    for other in &deleted[1..] {
        assert!(!nodes.contains_key(*other), "{other} is deleted as before");
    }
    assert_eq!(integrity(&db), "ok");
}

#[test]
fn an_entry_changed_after_the_plan_is_skipped_with_a_warning() {
    changed_entry_is_skipped_with_a_warning(SQLITE_LATEST);
    changed_entry_is_skipped_with_a_warning(SQLITE_FIRST);
}
