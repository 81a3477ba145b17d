//! SQLite-era agents (OpenClaw 2026.8.1 and later): databases made by the reference releases'
//! own import of the demo state dir, then grown and damaged by the tests; `vacuum` on them,
//! checked with SQL run here and by loading every session with the reference runtime.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use rusqlite::Connection;
use serde_json::Value;

use crate::demo;
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, SQLITE_RELEASES, TestEnv, copy_dir, oracle_node,
    oracle_path_of, stderr, stdout,
};

/// Copy the JSON-era demo state dir to `dst`, its store temp dated as `mtimes.tsv` dates it.
/// A checkout gives every file the checkout's time, and the sweep keeps a temp under five
/// minutes old but removes an older one: no run may depend on how long ago that was.
pub fn copy_demo(dst: &Path) {
    copy_dir(&demo::demo_dir(), dst);
    demo::restore_mtimes(&dst.join("agents/main/sessions"), |name| {
        name.ends_with(".tmp")
    });
}

/// The demo state dir imported into SQLite by `release`'s own doctor, once per test process
/// and release; every test gets a copy.
fn imported_template(release: Release) -> Option<PathBuf> {
    static CACHE: Mutex<Vec<(&'static str, PathBuf)>> = Mutex::new(Vec::new());
    let oracle = oracle_path_of(release, "SQLite-era agent database")?;
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = cache.iter().find(|(v, _)| *v == release.version) {
        return Some(p.clone());
    }
    let dir = tempfile::tempdir().unwrap().keep();
    let state = dir.join("state");
    copy_demo(&state);
    sqlite_import(&oracle, &state, None);
    cache.push((release.version, state.clone()));
    Some(state)
}

/// Import the JSON-era state dir `state` into SQLite, in place, with the release whose wrapper
/// is `oracle` (its own doctor, `scripts/oracle/sqlite-import.sh`), with `config` or else the
/// state dir's own `openclaw.json`.
pub fn sqlite_import(oracle: &Path, state: &Path, config: Option<&Path>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracle/sqlite-import.sh");
    let mut cmd = Command::new(script);
    crate::util::hermetic(&mut cmd);
    let out = cmd.arg(oracle).arg(state).args(config).output().unwrap();
    assert!(
        out.status.success(),
        "import of {} with {}: {}",
        state.display(),
        oracle.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test env whose state dir is the demo imported by `release`.
pub fn imported(release: Release) -> Option<TestEnv> {
    let template = imported_template(release)?;
    let env = env_with_state(&template);
    std::fs::copy(template.join("openclaw.json"), env.config_path()).unwrap();
    Some(env)
}

/// A new test env whose state dir is a copy of `state` (its config `{}`).
pub fn env_with_state(state: &Path) -> TestEnv {
    let env = TestEnv::new();
    std::fs::remove_dir_all(env.state()).unwrap();
    copy_dir(state, &env.state());
    env
}

/// A new test env with a copy of `env`'s state dir and config.
pub fn copy_env(env: &TestEnv) -> TestEnv {
    let copy = env_with_state(&env.state());
    std::fs::copy(env.config_path(), copy.config_path()).unwrap();
    copy
}

/// A read-only connection to `db`.
pub fn read_only(db: &Path) -> Connection {
    Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

pub fn database(env: &TestEnv) -> PathBuf {
    env.state().join("agents/main/agent/openclaw-agent.sqlite")
}

pub fn wal(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

pub fn len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Grow the WAL by about `bytes` and leave as many free pages, the way a busy runtime does
/// between checkpoints: a table filled and dropped with automatic checkpoints off. (Touching
/// the runtime's own rows would fire its triggers and queue revalidation.) The WAL is kept:
/// a connection of this process stays open.
pub fn grow_wal(db: &Path, bytes: u64) {
    let conn = Connection::open(db).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    // Keep the WAL on close: a last connection that closes cleanly would checkpoint it away.
    conn.execute_batch("PRAGMA journal_size_limit = -1;")
        .unwrap();
    conn.execute_batch("CREATE TABLE clawkeeper_test_ballast(b BLOB)")
        .unwrap();
    let chunk = 1 << 20;
    for _ in 0..bytes.div_ceil(chunk) {
        conn.execute(
            "INSERT INTO clawkeeper_test_ballast VALUES (zeroblob(?1))",
            [chunk as i64],
        )
        .unwrap();
    }
    conn.execute_batch("DROP TABLE clawkeeper_test_ballast;")
        .unwrap();
    // SQLITE_FCNTL_PERSIST_WAL is not exposed; a second open connection kept until after the
    // first closes stops the checkpoint on close.
    let keeper = Connection::open(db).unwrap();
    keeper
        .query_row("SELECT count(*) FROM session_nodes", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    std::mem::forget(keeper);
}

/// Every session of agent main as the reference runtime of `release` loads it.
pub fn contexts(release: Release, env: &TestEnv) -> Value {
    let oracle = oracle_path_of(release, "contexts").unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracle/sqlite-session-context.mjs");
    let out = Command::new(oracle_node(&oracle))
        .arg(script)
        .arg(oracle.parent().unwrap())
        .arg(env.state())
        .args(["main", "--all"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} cannot load the sessions: {}{}",
        release.version,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"].clone()
}

/// Every session loads as before: same outcome and same context, key by key (the message
/// names the first key that differs, not the whole document).
#[track_caller]
pub fn same_contexts(release: Release, before: &Value, after: &Value) {
    let (b, a) = (before.as_object().unwrap(), after.as_object().unwrap());
    assert_eq!(
        b.keys().collect::<Vec<_>>(),
        a.keys().collect::<Vec<_>>(),
        "{}: the sessions differ",
        release.version
    );
    for (key, want) in b {
        assert!(
            want["ok"] == true,
            "{}: {key} did not load before: {}",
            release.version,
            want["error"]
        );
    }
    loads_as_before(release.version, before, after, None);
}

/// Every session of `after` but `except` loads as it did in `before` (same outcome and
/// context); `what` opens the message, which names the first key that differs.
#[track_caller]
pub fn loads_as_before(what: &str, before: &Value, after: &Value, except: Option<&str>) {
    for (key, got) in after.as_object().unwrap() {
        if Some(key.as_str()) == except {
            continue;
        }
        assert!(
            before.get(key) == Some(got),
            "{what}: {key} loads otherwise: {}",
            got["error"]
        );
    }
}

/// `PRAGMA integrity_check`, its lines joined ("ok" when sound). The FTS5 index's agreement
/// with its content (`fts5: …` lines) is left out: it is a projection the runtime rebuilds, and
/// it is off for a while after a runtime writer appends (clawkeeper's own check does the same).
pub fn integrity(db: &Path) -> String {
    let conn = read_only(db);
    let lines: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .filter(|l| !l.starts_with("fts5:"))
        .collect();
    if lines.is_empty() {
        "ok".into()
    } else {
        lines.join("; ")
    }
}

pub fn sql_i64(db: &Path, sql: &str) -> i64 {
    read_only(db).query_row(sql, [], |r| r.get(0)).unwrap()
}

fn vacuum_run(release: Release, wal_bytes: u64) {
    let Some(env) = imported(release) else { return };
    let db = database(&env);
    let before_contexts = contexts(release, &env);
    grow_wal(&db, wal_bytes);
    let grown = len(&wal(&db));
    assert!(grown >= wal_bytes, "the WAL grew to {grown} only");

    // The preview predicts, and writes nothing.
    let (code, preview) = env.run_json(&["vacuum"]);
    assert_eq!(code, 0, "{preview}");
    let store = &preview["stores"][0];
    assert_eq!(store["status"], "would-vacuum", "{preview}");
    assert_eq!(store["before"]["walBytes"], grown);
    assert_eq!(len(&wal(&db)), grown, "a preview must not checkpoint");
    let free_pages = store["before"]["freePages"].as_u64().unwrap();
    let page_count = store["before"]["pageCount"].as_u64().unwrap();
    let page_size = store["before"]["pageSize"].as_u64().unwrap();
    assert!(free_pages * page_size >= wal_bytes / 2, "{preview}");
    // Free pages go, and the pointer-map pages that tracked them.
    assert!(store["after"]["dbBytes"].as_u64().unwrap() <= (page_count - free_pages) * page_size);

    let (code, done) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(code, 0, "{done}");
    let store = &done["stores"][0];
    assert_eq!(store["status"], "vacuumed", "{done}");
    assert_eq!(len(&wal(&db)), 0, "the WAL is emptied");
    assert_eq!(store["after"]["walBytes"], 0);
    assert_eq!(store["after"]["dbBytes"].as_u64().unwrap(), len(&db));
    assert_eq!(
        len(&db),
        preview["stores"][0]["after"]["dbBytes"].as_u64().unwrap(),
        "the prediction is what the vacuum left"
    );
    assert_eq!(sql_i64(&db, "PRAGMA freelist_count"), 0);
    assert_eq!(integrity(&db), "ok");
    assert_eq!(
        done["reclaimedBytes"].as_i64().unwrap(),
        preview["reclaimedBytes"].as_i64().unwrap()
    );
    same_contexts(release, &before_contexts, &contexts(release, &env));
    // Nothing left to do, and the run says so.
    let (code, again) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(
        (code, &again["stores"][0]["status"]),
        (0, &Value::from("nothing-to-do"))
    );
}

#[test]
fn vacuum_empties_the_wal_and_releases_free_pages_in_every_release() {
    for release in SQLITE_RELEASES {
        vacuum_run(release, 32 << 20);
    }
}

/// The done-when case of operators' reports (#143524): a WAL of 1 GB.
#[test]
fn vacuum_empties_a_one_gigabyte_wal() {
    vacuum_run(SQLITE_LATEST, 1 << 30);
}

#[test]
fn vacuum_full_rebuilds_the_file() {
    let Some(env) = imported(SQLITE_FIRST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 8 << 20);
    let (code, done) = env.run_json(&["vacuum", "--enforce", "--full"]);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["full"], true);
    assert_eq!(len(&wal(&db)), 0);
    assert!(len(&db) <= done["stores"][0]["before"]["pageCount"].as_u64().unwrap() * 4096);
    assert_eq!(integrity(&db), "ok");
}

#[test]
fn vacuum_on_a_json_era_agent_says_there_is_nothing_to_do() {
    let env = TestEnv::new();
    env.write_store("{}");
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("keeps sessions.json (JSON era); nothing to vacuum"),
        "{}",
        stdout(&out)
    );
    let (_, doc) = env.run_json(&["vacuum"]);
    assert_eq!(doc["stores"][0]["status"], "json-era");
}

#[test]
fn an_unknown_schema_version_is_previewed_and_never_written() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 4 << 20);
    Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let wal_before = len(&wal(&db));
    let out = env.run(&["vacuum"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("--enforce would refuse: agent schema version 99"),
        "{}",
        stdout(&out)
    );
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&db.display().to_string())
            && err.contains("version 99")
            && err.contains("the highest 23"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(len(&wal(&db)), wal_before, "nothing was written");
}

#[test]
fn a_database_that_fails_its_check_is_not_written() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    damage_an_index_page(&db);
    grow_wal_unchecked(&db);
    let before = std::fs::read(&db).unwrap();
    let wal_before = len(&wal(&db));
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("fails its check before any write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database is untouched"
    );
    assert_eq!(len(&wal(&db)), wal_before);
}

/// Checkpoint `db` fully, then damage a page of one of its indexes: the file opens, and
/// `quick_check` fails.
pub fn damage_an_index_page(db: &Path) {
    let conn = Connection::open(db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'idx_agent_session_nodes_updated_at'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(db).unwrap();
    let at = (root as usize - 1) * 4096;
    bytes[at] = 0x0d; // a leaf table page where an index page belongs
    bytes[at + 3] = 0xff;
    std::fs::write(db, &bytes).unwrap();
}

/// Leave some WAL content without reading the damaged index.
fn grow_wal_unchecked(db: &Path) {
    let conn = Connection::open(db).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute_batch("CREATE TABLE clawkeeper_test_x(a); DROP TABLE clawkeeper_test_x;")
        .unwrap();
    let keeper = Connection::open(db).unwrap();
    keeper.query_row("SELECT 1", [], |_| Ok(())).unwrap();
    drop(conn);
    std::mem::forget(keeper);
}

/// Open the state dir's shared database as the runtime does and add a lease row.
pub fn add_lease(env: &TestEnv, pid: u32) {
    let conn = Connection::open(env.state().join("state/openclaw.sqlite")).unwrap();
    conn.execute(
        "INSERT INTO agent_database_leases (lease_id, agent_id, path, owner_pid, owner_start_time, opened_at) \
         VALUES ('test-lease', 'main', ?1, ?2, NULL, 0)",
        rusqlite::params![database(env).display().to_string(), pid],
    )
    .unwrap();
}

#[test]
fn a_live_lease_on_the_database_stops_the_write_and_a_dead_one_does_not() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 2 << 20);
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    add_lease(&env, holder.id());
    let wal_before = len(&wal(&db));
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("process {} has the database open", holder.id())),
        "{err}"
    );
    assert_eq!(len(&wal(&db)), wal_before, "nothing was written");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a lease of a dead process is stale: {}",
        stderr(&out)
    );
    assert_eq!(len(&wal(&db)), 0);
}

#[test]
fn a_maintenance_lease_stops_the_write() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 2 << 20);
    let conn = Connection::open(env.state().join("state/openclaw.sqlite")).unwrap();
    conn.execute(
        "INSERT INTO state_leases (scope, lease_key, owner, expires_at, heartbeat_at, payload_json, created_at, updated_at) \
         VALUES ('core:agent-database-maintenance', 'global', 'doctor-test', ?1, NULL, NULL, 0, 0)",
        [crate::util::now_ms() + 60_000],
    )
    .unwrap();
    drop(conn);
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("maintenance is in progress"),
        "{}",
        stderr(&out)
    );
    assert!(len(&wal(&db)) > 0);
}

#[test]
fn a_lease_whose_process_started_at_another_time_is_stale() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 1 << 20);
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    // The pid is alive, but the lease names another process that had it before.
    let conn = Connection::open(env.state().join("state/openclaw.sqlite")).unwrap();
    conn.execute(
        "INSERT INTO agent_database_leases (lease_id, agent_id, path, owner_pid, owner_start_time, opened_at) \
         VALUES ('reused-pid', 'main', ?1, ?2, 1, 0)",
        rusqlite::params![db.display().to_string(), holder.id()],
    )
    .unwrap();
    drop(conn);
    let out = env.run(&["vacuum", "--enforce"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(len(&wal(&db)), 0);
}

#[test]
fn the_runtime_integrity_record_of_the_file_is_cleared_before_the_write() {
    use std::os::unix::fs::MetadataExt;
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 1 << 20);
    let quarantine = env.state().join("state/openclaw-quarantine.sqlite");
    let meta = std::fs::metadata(&db).unwrap();
    let conn = Connection::open(&quarantine).unwrap();
    // One row by path, one for the same file under another path (a hard link or an old
    // mount point), one for another file that must stay.
    for (path, dev, ino) in [
        (
            db.display().to_string(),
            meta.dev().to_string(),
            meta.ino().to_string(),
        ),
        (
            "/elsewhere/openclaw-agent.sqlite".to_string(),
            meta.dev().to_string(),
            meta.ino().to_string(),
        ),
        (
            "/other/openclaw-agent.sqlite".to_string(),
            "1".to_string(),
            "2".to_string(),
        ),
    ] {
        conn.execute(
            "INSERT INTO agent_integrity_verifications (path, dev, ino, app_version, verified_at, clean_close) \
             VALUES (?1, ?2, ?3, '2026.9.6', 0, 1)",
            [&path, &dev, &ino],
        )
        .unwrap();
    }
    // A preview leaves the record alone.
    assert_eq!(env.run(&["vacuum"]).status.code(), Some(0));
    let count = |conn: &Connection| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM agent_integrity_verifications",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(count(&conn), 3);
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let left: Vec<String> = conn
        .prepare("SELECT path FROM agent_integrity_verifications")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(left, vec!["/other/openclaw-agent.sqlite".to_string()]);
}

#[test]
fn a_quarantined_database_is_left_to_the_runtime() {
    let Some(env) = imported(SQLITE_LATEST) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 1 << 20);
    let conn = Connection::open(env.state().join("state/openclaw-quarantine.sqlite")).unwrap();
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('quarantined_databases')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(cols.contains(&"reason".to_string()), "{cols:?}");
    let names = cols.join(", ");
    let values: Vec<String> = cols
        .iter()
        .map(|c| match c.as_str() {
            "path" => format!("'{}'", db.display()),
            "reason" => "'integrity check failed'".into(),
            "kind" => "'agent'".into(),
            _ => "0".into(),
        })
        .collect();
    conn.execute(
        &format!(
            "INSERT INTO quarantined_databases ({names}) VALUES ({})",
            values.join(", ")
        ),
        [],
    )
    .unwrap();
    let wal_before = len(&wal(&db));
    let out = env.run(&["vacuum", "--enforce"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("quarantine (integrity check failed)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(len(&wal(&db)), wal_before);
}
