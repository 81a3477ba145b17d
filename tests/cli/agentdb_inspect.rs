//! `inspect` on SQLite-era agents: every per-session figure equals what `inspect` reports for
//! the same transcript as a JSON-era file (the runtime stores each line as a row, as
//! `JSON.stringify` writes it: the demo's lines are already in that form),
//! and the database figures equal what SQL run here says.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use crate::agentdb::{database, grow_wal, imported};
use crate::util::{SQLITE_LATEST, SQLITE_RELEASES, TestEnv, copy_dir, stderr};

/// The per-session figures that must not depend on where the transcript is kept.
const SAME_IN_BOTH_ERAS: [&str; 14] = [
    "sessionId",
    "transcriptBytes",
    "entries",
    "messages",
    "images",
    "imageBytes",
    "mediaReferences",
    "silentReplies",
    "toolOutputBytes",
    "thinkingBytes",
    "estimatedContextTokens",
    "compacted",
    "cacheTtlMarkers",
    "cacheTtlBytes",
];

fn by_key(doc: &Value) -> std::collections::BTreeMap<String, Value> {
    doc["stores"][0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["key"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

#[test]
fn every_session_figure_is_the_one_of_the_same_transcript_as_a_file() {
    let json_era = TestEnv::new();
    std::fs::remove_dir_all(json_era.state()).unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo"),
        &json_era.state(),
    );
    let (code, files) = json_era.run_json(&["inspect", "--no-cleanup"]);
    assert_eq!(code, 0, "{files}");
    let files = by_key(&files);
    for release in SQLITE_RELEASES {
        let Some(env) = imported(release) else { return };
        let (code, doc) = env.run_json(&["inspect"]);
        assert_eq!(code, 0, "{doc}");
        assert_eq!(
            doc["stores"][0]["storePath"],
            database(&env).display().to_string()
        );
        let rows = by_key(&doc);
        let mut compared = 0;
        for (key, file) in &files {
            // Sessions whose transcript file is missing, and the two hook sessions that share
            // one session id (the database keys transcripts by session id), differ by design.
            if file["missing"] == true || key.starts_with("agent:main:hook:") {
                continue;
            }
            let row = rows
                .get(key)
                .unwrap_or_else(|| panic!("{}: {key} not reported", release.version));
            for field in SAME_IN_BOTH_ERAS {
                assert_eq!(
                    row[field], file[field],
                    "{}: {key}: {field}",
                    release.version
                );
            }
            compared += 1;
        }
        assert!(
            compared >= 15,
            "{}: only {compared} sessions compared",
            release.version
        );
        let total_markers: u64 = rows
            .values()
            .map(|s| s["cacheTtlMarkers"].as_u64().unwrap())
            .sum();
        assert!(total_markers > 0, "the demo has cache-ttl markers");
        // The transcript commands' figures are what their previews free on the rows;
        // compact's is the context tokens its preview saves.
        let rc = &doc["stores"][0]["reclaimable"];
        let (code, preview) = env.run_json(&["compact"]);
        assert_eq!(code, 0, "{preview}");
        assert_eq!(
            rc["compactTokens"].as_u64(),
            Some(crate::agentdb_compact::tokens_saved(&preview)),
            "{}: compact: {rc}",
            release.version
        );
        for command in ["strip-images", "prune-noreply", "prune-cache-ttl"] {
            let (code, preview) = env.run_json(&[command]);
            assert_eq!(code, 0, "{preview}");
            assert_eq!(
                rc[command], preview["totals"]["bytesFreed"],
                "{}: {command}: {rc}",
                release.version
            );
        }
        assert!(rc["prune-noreply"].as_i64().unwrap() > 0, "{rc}");
    }
}

fn q(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
        .unwrap()
        .unwrap_or(0)
}

#[test]
fn the_database_figures_are_what_sql_says_and_inspect_writes_nothing() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    {
        let conn = Connection::open(&db).unwrap();
        let sid: String = conn
            .query_row("SELECT current_session_id FROM session_nodes WHERE session_key = 'agent:main:main'", [], |r| r.get(0))
            .unwrap();
        for i in 0..40 {
            conn.execute(
                "INSERT INTO trajectory_runtime_events (session_id, seq, run_id, event_json, created_at) VALUES (?1, ?2, 'r', ?3, 0)",
                rusqlite::params![sid, i, format!("{{\"type\":\"tool\",\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(500))],
            )
            .unwrap();
        }
    }
    grow_wal(&db, 3 << 20);
    let wal = Path::new(&format!("{}-wal", db.display())).to_path_buf();
    let before = (std::fs::read(&db).unwrap(), std::fs::read(&wal).unwrap());
    let (code, doc) = env.run_json(&["inspect"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        (std::fs::read(&db).unwrap(), std::fs::read(&wal).unwrap()),
        before,
        "inspect writes nothing"
    );
    let store = &doc["stores"][0];
    let d = &store["database"];
    let conn =
        Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    assert_eq!(d["schemaVersion"], q(&conn, "PRAGMA user_version"));
    assert_eq!(d["dbBytes"], std::fs::metadata(&db).unwrap().len());
    assert_eq!(d["walBytes"], std::fs::metadata(&wal).unwrap().len());
    assert_eq!(d["pageCount"], q(&conn, "PRAGMA page_count"));
    assert_eq!(d["freePages"], q(&conn, "PRAGMA freelist_count"));
    assert!(d["freePages"].as_u64().unwrap() > 500, "{d}");
    assert_eq!(
        store["entries"],
        q(&conn, "SELECT count(*) FROM session_nodes")
    );
    assert_eq!(
        d["archivedEntries"],
        q(
            &conn,
            "SELECT count(*) FROM session_nodes WHERE archived_at IS NOT NULL"
        )
    );
    assert_eq!(
        store["storeBytes"],
        q(
            &conn,
            "SELECT sum(length(CAST(entry_json AS BLOB))) FROM session_nodes"
        )
    );
    assert_eq!(
        d["transcriptEvents"],
        q(&conn, "SELECT count(*) FROM transcript_events")
    );
    assert_eq!(
        d["transcriptEventBytes"],
        q(
            &conn,
            "SELECT sum(length(CAST(event_json AS BLOB))) FROM transcript_events"
        )
    );
    assert_eq!(d["trajectoryEvents"], 40);
    assert_eq!(
        d["trajectoryEvents"],
        q(&conn, "SELECT count(*) FROM trajectory_runtime_events")
    );
    for table in [
        "transcript_events",
        "trajectory_runtime_events",
        "session_nodes",
    ] {
        let want = q(
            &conn,
            &format!(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN \
                 (SELECT name FROM sqlite_schema WHERE tbl_name = '{table}')"
            ),
        );
        assert_eq!(d["tableBytes"][table], want, "{table}");
    }
    // Per session, against SQL over its rows.
    for s in store["sessions"].as_array().unwrap() {
        let Some(sid) = s["sessionId"].as_str() else {
            continue;
        };
        if s["missing"] == true {
            continue;
        }
        let rows = |sql: &str| {
            conn.query_row(sql, [sid], |r| r.get::<_, Option<i64>>(0))
                .unwrap()
                .unwrap_or(0)
        };
        assert_eq!(
            s["transcriptBytes"],
            rows(
                "SELECT sum(length(CAST(event_json AS BLOB)) + 1) FROM transcript_events WHERE session_id = ?1"
            )
        );
        assert_eq!(
            s["entries"],
            rows(
                "SELECT count(*) FROM transcript_events WHERE session_id = ?1 AND json_extract(event_json, '$.type') <> 'session'"
            )
        );
        assert_eq!(
            s["messages"],
            rows(
                "SELECT count(*) FROM transcript_events WHERE session_id = ?1 AND json_extract(event_json, '$.type') = 'message'"
            )
        );
        assert_eq!(
            s["cacheTtlMarkers"],
            rows(
                "SELECT count(*) FROM transcript_events WHERE session_id = ?1 AND json_extract(event_json, '$.type') = 'custom' AND json_extract(event_json, '$.customType') = 'openclaw.cache-ttl'"
            )
        );
        assert_eq!(
            s["cacheTtlBytes"],
            rows(
                "SELECT sum(length(CAST(event_json AS BLOB)) + 1) FROM transcript_events WHERE session_id = ?1 AND json_extract(event_json, '$.type') = 'custom' AND json_extract(event_json, '$.customType') = 'openclaw.cache-ttl'"
            )
        );
        assert_eq!(
            s["images"],
            rows(
                "SELECT count(*) FROM transcript_events t, json_each(t.event_json, '$.message.content') j WHERE t.session_id = ?1 AND json_valid(t.event_json) AND json_type(t.event_json, '$.message.content') = 'array' AND json_extract(j.value, '$.type') = 'image'"
            ) + rows(
                "SELECT count(*) FROM transcript_events t, json_each(t.event_json, '$.message.content') j, json_each(j.value, '$.content') k WHERE t.session_id = ?1 AND json_type(t.event_json, '$.message.content') = 'array' AND json_type(j.value, '$.content') = 'array' AND json_extract(k.value, '$.type') = 'image'"
            )
        );
    }
    // The vacuum figure is what `vacuum` then gives back.
    let predicted = store["reclaimable"]["vacuum"].as_i64().unwrap();
    assert!(predicted > 0);
    drop(conn);
    let (code, done) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["reclaimedBytes"], predicted);
}

#[test]
fn a_database_of_an_unknown_schema_version_is_read() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    Connection::open(database(&env))
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let out = env.run(&["inspect"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("schema version 99"), "{text}");
    assert!(text.contains("Database: schema 99"), "{text}");
}

#[test]
fn compressed_rows_are_read_as_their_text() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let (_, plain) = env.run_json(&["inspect"]);
    let db = database(&env);
    {
        let conn = Connection::open(&db).unwrap();
        let rows: Vec<(String, i64, String)> = conn
            .prepare("SELECT session_id, seq, event_json FROM transcript_events WHERE event_json IS NOT NULL")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let nav = r#"{"version":1,"report":{"kind":"canonical"},"navigation":{},"reset":{},"model":{},"modelBytes":0,"modelWithoutCheckpointBytes":0,"withoutCustomDataBytes":0}"#;
        for (sid, seq, text) in rows {
            let z = zstd::encode_all(text.as_bytes(), 3).unwrap();
            conn.execute(
                "UPDATE transcript_events SET event_json = NULL, event_zstd = ?1, event_utf8_bytes = ?2, navigation_json = coalesce(navigation_json, ?3) WHERE session_id = ?4 AND seq = ?5",
                rusqlite::params![z, text.len() as i64, nav, sid, seq],
            )
            .unwrap();
        }
        assert_eq!(
            q(
                &conn,
                "SELECT count(*) FROM transcript_events WHERE event_json IS NOT NULL"
            ),
            0
        );
    }
    let (code, compressed) = env.run_json(&["inspect"]);
    assert_eq!(code, 0, "{compressed}");
    let (a, b) = (by_key(&plain), by_key(&compressed));
    for (key, s) in &a {
        for field in SAME_IN_BOTH_ERAS {
            assert_eq!(b[key][field], s[field], "{key}: {field}");
        }
    }
    assert_eq!(
        compressed["stores"][0]["database"]["transcriptEventBytes"],
        plain["stores"][0]["database"]["transcriptEventBytes"]
    );
}

/// `diskBytes` and `reclaimable.cleanup` of the only store.
fn disk_and_cleanup(env: &TestEnv, args: &[&str]) -> (i64, Value) {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    let (code, doc) = env.run_json(&all);
    assert_eq!(code, 0, "{doc}");
    let store = &doc["stores"][0];
    (
        store["diskBytes"].as_i64().unwrap(),
        store["reclaimable"]["cleanup"].clone(),
    )
}

/// `inspect` predicts the cleanup of a database by running it on a scratch copy: the figure is
/// the drop of `diskBytes` that `cleanup --enforce` then causes, and the prediction leaves the
/// agent as it was.
fn cleanup_figure_is_what_enforce_frees(env: &TestEnv, what: &str) {
    let agent = env.state().join("agents/main");
    let untouched = crate::util::snapshot(&agent, &|p| p.ends_with("-shm"));
    let (before, predicted) = disk_and_cleanup(env, &[]);
    let now = crate::util::snapshot(&agent, &|p| p.ends_with("-shm"));
    let changed: Vec<&String> = untouched
        .keys()
        .chain(now.keys())
        .filter(|k| untouched.get(*k) != now.get(*k))
        .collect();
    let size = |s: Option<&crate::util::Snap>| match s {
        Some(crate::util::Snap::File { content, .. }) => Some(content.len()),
        _ => None,
    };
    let changed: Vec<(&String, Option<usize>, Option<usize>)> = changed
        .into_iter()
        .map(|k| (k, size(untouched.get(k)), size(now.get(k))))
        // Every SQLite reader makes an empty `-wal` when there is none (and owns it as the
        // database's owner when run as root): that is not a change of content.
        .filter(|(k, before, after)| {
            !(k.ends_with("-wal") && before.is_none() && *after == Some(0))
        })
        .collect();
    assert!(
        changed.is_empty(),
        "{what}: inspect changed (path, bytes before, bytes after) {changed:?}"
    );
    let out = env.run(&["cleanup", "--enforce"]);
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    let (after, _) = disk_and_cleanup(env, &["--no-cleanup"]);
    assert_eq!(
        predicted,
        Value::from(before - after),
        "{what}: diskBytes {before} → {after}"
    );
}

#[test]
fn the_cleanup_figure_is_what_cleanup_enforce_frees_on_the_demo() {
    use crate::agentdb_cleanup::{DEMO, DEMO_NO_BUDGET};
    for release in SQLITE_RELEASES {
        for config in [DEMO, DEMO_NO_BUDGET] {
            let Some(env) = imported(release) else { return };
            env.write_config(config);
            cleanup_figure_is_what_enforce_frees(&env, &format!("{} {config}", release.version));
        }
    }
}

#[test]
fn the_cleanup_figure_is_what_cleanup_enforce_frees_on_generated_databases() {
    use crate::agentdb_cleanup::{case_count, env_from, generated_template};
    use crate::util::{SQLITE_FIRST, SQLITE_LATEST};
    for seed in 0..case_count().div_ceil(2) {
        let release = if seed % 2 == 1 {
            SQLITE_FIRST
        } else {
            SQLITE_LATEST
        };
        let Some((_dir, template, config, _)) = generated_template(release, 7300 + seed) else {
            return;
        };
        let env = env_from(&template, &config);
        cleanup_figure_is_what_enforce_frees(
            &env,
            &format!("seed {} ({}) {config}", 7300 + seed, release.version),
        );
    }
}

#[test]
fn without_a_usable_temp_directory_the_cleanup_figure_is_null_with_a_note() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    env.write_config(crate::agentdb_cleanup::DEMO);
    let missing = env.home().join("no-such-tmp");
    let (code, doc) = env.run_json_with_env(&["inspect"], &[("TMPDIR", missing.to_str().unwrap())]);
    assert_eq!(code, 0, "{doc}");
    let store = &doc["stores"][0];
    assert_eq!(store["reclaimable"]["cleanup"], Value::Null, "{doc}");
    let notes = store["notes"].to_string();
    assert!(
        notes.contains("cleanup --enforce is not predicted") && notes.contains("no-such-tmp"),
        "{notes}"
    );
    // The other figures are still there.
    assert!(store["reclaimable"]["vacuum"].is_number(), "{doc}");
}

/// A prediction killed mid-run leaves its scratch tree in the temp directory (a copy of the
/// database, as large as it): the next `inspect` removes it. What it must not remove: the tree
/// of a process that is alive, a name of a dead process that is a symlink (to a directory
/// elsewhere, not followed), another user's tree, and what is not named as a scratch tree.
#[test]
fn inspect_removes_the_scratch_tree_of_a_killed_prediction_and_nothing_else() {
    use std::os::unix::fs::MetadataExt;
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    env.write_config(crate::agentdb_cleanup::DEMO);
    let tmp = env.root().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let mut live = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    // As `fsutil::scratch` names them: `clawkeeper-scratch-<pid>-<uuid>`.
    let named = |pid: u32, uuid: &str| tmp.join(format!("clawkeeper-scratch-{pid}-{uuid}"));
    let tree = |dir: &Path| {
        let agent = dir.join("agents/main/agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(dir.join("agents/main/sessions")).unwrap();
        std::fs::copy(database(&env), agent.join("openclaw-agent.sqlite")).unwrap();
    };
    let abandoned = named(dead, "3f0c2a4e-8d1b-4c6a-9e2f-5b7d1a0c9e84");
    let fresh = named(live.id(), "b61e0d2f-4a93-4f58-8c0e-2d7a9b3c4e15");
    tree(&abandoned);
    tree(&fresh);
    let outside = env.root().join("outside");
    tree(&outside);
    let link = named(dead, "link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let unrelated = tmp.join(format!("not-clawkeeper-scratch-{dead}-x"));
    tree(&unrelated);
    // Another user's tree of a dead process, when this test may hand one over.
    let foreign = named(dead, "foreign");
    tree(&foreign);
    let foreign_kept = std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).is_ok();
    if !foreign_kept {
        std::fs::remove_dir_all(&foreign).unwrap();
    }

    let (code, doc) = env.run_json_with_env(&["inspect"], &[("TMPDIR", tmp.to_str().unwrap())]);
    live.kill().unwrap();
    live.wait().unwrap();
    assert_eq!(code, 0, "{doc}");
    assert!(
        doc["stores"][0]["reclaimable"]["cleanup"].is_number(),
        "the prediction ran: {doc}"
    );
    assert!(
        !abandoned.exists(),
        "the killed prediction's tree is removed"
    );
    let db_in = |dir: &Path| dir.join("agents/main/agent/openclaw-agent.sqlite");
    assert!(db_in(&fresh).is_file(), "a live process's tree is kept");
    assert!(
        std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()),
        "the symlink is kept"
    );
    assert!(
        db_in(&outside).is_file(),
        "nothing is removed through a link"
    );
    assert!(db_in(&unrelated).is_file());
    if foreign_kept {
        assert!(db_in(&foreign).is_file(), "another user's tree is kept");
        assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), 65534);
    }
    // The run's own scratch tree went with it: the temp directory holds what it held, less
    // the abandoned tree.
    let mut left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want: Vec<String> = [&fresh, &link, &unrelated]
        .into_iter()
        .chain(foreign_kept.then_some(&foreign))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    want.sort();
    assert_eq!(left, want);
}
