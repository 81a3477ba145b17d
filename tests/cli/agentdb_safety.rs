//! `vacuum` where data gets lost elsewhere: killed at any moment, a runtime writing to the
//! database, the runtime's gateway lifecycle lock held, a database file this user cannot write.
//! Outcomes are checked with SQL run here and by the reference runtime (2026.9.6) loading
//! every session, and the runtime's side of the contest (its writer, its lock) is its own code
//! (`tests/oracle/sqlite-append-loop.mjs`, `tests/oracle/hold-lifecycle-lock.mjs`).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use crate::agentdb::{
    add_lease, contexts, database, grow_wal, imported, integrity, len, loads_as_before, read_only,
    same_contexts, sql_i64, wal,
};
use crate::unattended::{as_nobody, open_to_nobody};
use crate::util::{Release, SQLITE_LATEST, TestEnv, oracle_node, oracle_path_of, stderr, stdout};

const RELEASE: Release = SQLITE_LATEST;

/// The session the writer appends to.
pub const KEY: &str = "agent:main:main";

/// A script of `tests/oracle/` run with the reference's own Node: its JSON lines on stdout
/// are read by a thread, its stdin stays open until [`Script::close_stdin`] (the scripts stop
/// when it closes), its stderr goes to a file quoted when something fails.
pub struct Script {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: tempfile::NamedTempFile,
}

impl Script {
    pub fn spawn(oracle: &Path, name: &'static str, args: &[&OsStr]) -> Script {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/oracle")
            .join(name);
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(oracle_node(oracle))
            .arg(script)
            .arg(oracle.parent().unwrap())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Script {
            name,
            stdin: child.stdin.take(),
            child,
            lines,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// The next JSON line, waiting up to a minute.
    #[track_caller]
    pub fn next(&self, what: &str) -> Value {
        match self.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{}: {what}: not JSON ({e}): {line}", self.name)),
            Err(e) => panic!(
                "{}: no line for {what} ({e}); stderr:\n{}",
                self.name,
                self.log()
            ),
        }
    }

    pub fn send_line(&mut self) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// SIGKILL, as a crashed gateway: what it wrote stays as it left it.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Close stdin, wait for a clean exit, and return the last line.
    #[track_caller]
    pub fn finish(mut self, what: &str) -> Value {
        self.close_stdin();
        let last = self.next(what);
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "{} exited {status}; stderr:\n{}",
            self.name,
            self.log()
        );
        last
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.stdin.take();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn os(p: &Path) -> &OsStr {
    p.as_os_str()
}

/// `<db>`'s bytes and its WAL's, to show that a refused run wrote nothing.
fn files_of(db: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(db).unwrap(),
        std::fs::read(wal(db)).unwrap_or_default(),
    )
}

/// The one line a failing run printed on stderr.
#[track_caller]
pub fn one_line(out: &std::process::Output) -> String {
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line on stderr:\n{err}");
    err.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------
// 1. Killed at any moment.

/// Runs of `vacuum --enforce` killed with SIGKILL, half of them `--full`.
const KILLS: usize = 20;

/// A fraction in [0, 1) from `i`, always the same (splitmix64): where in its slot of the run a
/// kill lands.
fn jitter(i: u64) -> f64 {
    let mut z = i
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Where the `i`-th of `n` kills lands in a run that takes `span`: one kill in each `n`-th of
/// the run (2 % to 98 %), each at its own fixed place in that part. Returns the delay and
/// the fraction of the run.
pub fn kill_delay(i: usize, n: usize, span: Duration) -> (Duration, f64) {
    let frac = ((i as f64 + jitter(i as u64)) / n as f64).clamp(0.02, 0.98);
    (span.mul_f64(frac), frac)
}

/// Spawn `cmd` (its output discarded), SIGKILL it after `delay`, and reap it: whether it was
/// still running when the kill came.
pub fn kill_after(mut cmd: Command, delay: Duration) -> bool {
    let mut run = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let running = run.try_wait().unwrap().is_none();
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    running
}

/// The report of a crash suite: a line per kill, and how many kills landed mid-run.
#[derive(Default)]
pub struct Kills {
    hit: usize,
    lines: Vec<String>,
}

impl Kills {
    /// Record a kill; `running` is [`kill_after`]'s answer, and `line` makes its report line
    /// from what it was (`killed mid-run` or `had finished`). Returns the line.
    pub fn record(&mut self, running: bool, line: impl FnOnce(&str) -> String) -> String {
        self.hit += usize::from(running);
        let line = line(if running {
            "killed mid-run"
        } else {
            "had finished"
        });
        self.lines.push(line.clone());
        line
    }

    /// A kill that came after the run ended tests nothing: most must have landed mid-run.
    /// The report goes to stderr after `context` (how long the runs took).
    #[track_caller]
    pub fn finish(self, context: &str) {
        let n = self.lines.len();
        let report = self.lines.join("\n");
        assert!(
            self.hit >= n / 2,
            "only {} of {n} kills landed mid-run ({context}):\n{report}",
            self.hit
        );
        eprintln!("{context}\n{report}");
    }
}

/// A fresh env holding a byte copy of the grown database and its WAL (no `-shm`: the first
/// opener rebuilds the index from the WAL, as after a reboot).
fn grown_copy(grown: &Path) -> TestEnv {
    let env = imported(RELEASE).unwrap();
    let db = database(&env);
    std::fs::copy(grown, &db).unwrap();
    std::fs::copy(wal(grown), wal(&db)).unwrap();
    let _ = std::fs::remove_file(format!("{}-shm", db.display()));
    env
}

#[test]
fn vacuum_killed_at_any_moment_leaves_a_database_the_runtime_loads() {
    let Some(template) = imported(RELEASE) else {
        return;
    };
    let grown = database(&template);
    let before = contexts(RELEASE, &template);
    // About 26 MB of WAL, most of it pages freed by the drop: a run long enough (0.2–0.4 s in
    // a debug build) that the kills land in the first checkpoint, the incremental vacuum or
    // VACUUM, and the last checkpoint (the report shows where: WAL and file sizes).
    grow_wal(&grown, 24 << 20);
    let grown_wal = len(&wal(&grown));
    let mode = |full: bool| -> Vec<&'static str> {
        if full {
            vec!["vacuum", "--enforce", "--full"]
        } else {
            vec!["vacuum", "--enforce"]
        }
    };
    // How long an undisturbed run takes, per mode.
    let span = |full: bool| -> Duration {
        let env = grown_copy(&grown);
        let start = Instant::now();
        let out = env.command(&mode(full)).output().unwrap();
        let took = start.elapsed();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(len(&wal(&database(&env))), 0);
        took
    };
    let spans = [span(false), span(true)];

    let mut kills = Kills::default();
    for i in 0..KILLS {
        let full = i % 2 == 1;
        // Half the kills per mode, spread over its run.
        let (delay, frac) = kill_delay(i / 2, KILLS / 2, spans[full as usize]);
        let env = grown_copy(&grown);
        let db = database(&env);
        let running = kill_after(env.command(&mode(full)), delay);
        let line = kills.record(running, |outcome| {
            format!(
                "kill {i:2} {:>6} at {delay:>8.1?} ({:3.0} %): {outcome}, WAL {} → {} bytes, \
                 database {} bytes",
                if full { "--full" } else { "" },
                frac * 100.0,
                grown_wal,
                len(&wal(&db)),
                len(&db)
            )
        });

        assert_eq!(integrity(&db), "ok", "{line}");
        if i % 5 == 4 {
            same_contexts(RELEASE, &before, &contexts(RELEASE, &env));
        }
        // The lifecycle lock went with the process: the next run is not refused, and it
        // finishes the job.
        let (code, done) = env.run_json(&["vacuum", "--enforce"]);
        assert_eq!(code, 0, "after {line}: {done}");
        let status = done["stores"][0]["status"].as_str().unwrap();
        assert!(
            status == "vacuumed" || status == "nothing-to-do",
            "after {line}: {done}"
        );
        assert_eq!(len(&wal(&db)), 0, "after {line}: the WAL is emptied");
        assert_eq!(sql_i64(&db, "PRAGMA freelist_count"), 0, "after {line}");
        assert_eq!(integrity(&db), "ok", "after {line}");
        if i == KILLS - 1 {
            same_contexts(RELEASE, &before, &contexts(RELEASE, &env));
        }
    }
    kills.finish(&format!("runs took {spans:?}"));
}

// ---------------------------------------------------------------------------------------
// 2. The runtime writing to the database.

/// The sessions as the runtime loads them now: every session but [`KEY`] as `before`, and
/// [`KEY`] with exactly the writer's `n` messages after its old ones, in order.
#[track_caller]
pub fn loads_with_appended(env: &TestEnv, before: &Value, n: u64) {
    let after = contexts(RELEASE, env);
    let (b, a) = (before.as_object().unwrap(), after.as_object().unwrap());
    assert_eq!(b.keys().collect::<Vec<_>>(), a.keys().collect::<Vec<_>>());
    loads_as_before(RELEASE.version, before, &after, Some(KEY));
    appended_in_order(&after, before, n);
}

/// [`KEY`] loads in `after` with its messages of `before`, then exactly the writer's `n`
/// messages, each once, in order.
#[track_caller]
pub fn appended_in_order(after: &Value, before: &Value, n: u64) {
    assert_eq!(after[KEY]["ok"], true, "{}", after[KEY]["error"]);
    let old = before[KEY]["messages"].as_array().unwrap();
    let new = after[KEY]["messages"].as_array().unwrap();
    assert!(new.len() >= old.len(), "{KEY} lost messages");
    assert_eq!(
        &new[..old.len()],
        &old[..],
        "{KEY}: the old messages changed"
    );
    let appended: Vec<&str> = new[old.len()..]
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("?"))
        .collect();
    let want: Vec<String> = (1..=n).map(|i| format!("clawkeeper-writer {i}")).collect();
    assert_eq!(
        appended, want,
        "{KEY}: the writer's messages, each once, in order"
    );
}

/// A database for a runtime-writer test: the demo imported by [`RELEASE`], every session as
/// the runtime loads it, its transcript rows, and a WAL grown by `wal_bytes`.
pub struct Setup {
    pub env: TestEnv,
    pub db: std::path::PathBuf,
    pub before: Value,
    pub events: i64,
}

pub fn setup(wal_bytes: u64) -> Option<Setup> {
    let env = imported(RELEASE)?;
    let db = database(&env);
    let before = contexts(RELEASE, &env);
    let events = events(&db);
    grow_wal(&db, wal_bytes);
    Some(Setup {
        env,
        db,
        before,
        events,
    })
}

pub fn events(db: &Path) -> i64 {
    sql_i64(db, "SELECT count(*) FROM transcript_events")
}

/// Run clawkeeper with `args` while process `pid` holds a lease on `db`: exit 4, and one line
/// on stderr that names the database and the process.
#[track_caller]
pub fn refused_for_lease(
    env: &TestEnv,
    args: &[&str],
    db: &Path,
    pid: u64,
) -> std::process::Output {
    let out = env.run(args);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{args:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let line = one_line(&out);
    assert!(
        line.contains(&db.display().to_string())
            && line.contains(&format!("process {pid} has the database open")),
        "{line}"
    );
    out
}

/// A run of clawkeeper that a runtime writer began to write during (see
/// [`writer_starts_during`]).
pub struct WriterDuring {
    pub out: std::process::Output,
    /// How long the run took, and when it ended (ms since the epoch).
    pub took: Duration,
    pub ended: i64,
    /// When the writer began (its go) and committed its first append.
    pub go_at: i64,
    pub ready_at: i64,
}

/// Run clawkeeper with `args` (`what` names it) and let `writer` (started with `wait_go`) open
/// the database during the run: once the run has cleared the runtime's integrity record (added
/// here), which it does once it holds the lock and has checked the leases and the file, just
/// before it writes. The writer must have begun before the run ended (it may have waited on
/// the run for its first commit).
#[track_caller]
pub fn writer_starts_during(
    env: &TestEnv,
    writer: &mut Script,
    args: &[&str],
    what: &str,
) -> WriterDuring {
    let loaded = writer.next("the runtime loaded");
    assert_eq!(loaded["loaded"], true, "{loaded}");
    add_integrity_record(env);
    let start = Instant::now();
    let mut run = env
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while quarantine_rows(env) > 0 {
        assert!(
            run.try_wait().unwrap().is_none(),
            "the {what} ended before it cleared the integrity record"
        );
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(2));
    }
    writer.send_line();
    let out = run.wait_with_output().unwrap();
    let took = start.elapsed();
    let ended = crate::util::now_ms();
    let ready = writer.next("the first append");
    assert_eq!(ready["ready"], true, "{ready}");
    let go_at = ready["goAt"].as_i64().unwrap();
    assert!(
        go_at < ended,
        "the writer began {} ms after the {what} ended; grow the WAL",
        go_at - ended
    );
    WriterDuring {
        out,
        took,
        ended,
        go_at,
        ready_at: ready["readyAt"].as_i64().unwrap(),
    }
}

/// The writer: the runtime's own append, in a loop, on `env`'s session [`KEY`].
pub fn writer(env: &TestEnv, wait_go: bool) -> Option<Script> {
    writer_pausing(env, wait_go, 20)
}

/// [`writer`] with `pause_ms` between appends.
fn writer_pausing(env: &TestEnv, wait_go: bool, pause_ms: u32) -> Option<Script> {
    let oracle = oracle_path_of(RELEASE, "runtime writer")?;
    let state = env.state();
    let pause = pause_ms.to_string();
    let mut args: Vec<&OsStr> = vec![os(&state), OsStr::new("main"), OsStr::new(KEY)];
    args.push(OsStr::new(&pause));
    if wait_go {
        args.push(OsStr::new("--wait-go"));
    }
    Some(Script::spawn(&oracle, "sqlite-append-loop.mjs", &args))
}

#[test]
fn a_runtime_writer_holding_its_lease_stops_the_vacuum_and_loses_nothing() {
    let Some(Setup {
        env,
        db,
        before,
        events: events_before,
    }) = setup(4 << 20)
    else {
        return;
    };
    let Some(writer) = writer(&env, false) else {
        return;
    };
    let ready = writer.next("the first append");
    assert_eq!(ready["ready"], true, "{ready}");
    let pid = ready["pid"].as_u64().unwrap();
    // The runtime's open took a lease on this database, as a gateway's does.
    let leases = ready["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 1, "{ready}");
    assert_eq!(leases[0]["path"], db.display().to_string(), "{ready}");

    let wal_before = len(&wal(&db));
    let record_before = integrity_record(&env);
    for args in [
        &["vacuum", "--enforce"][..],
        &["vacuum", "--enforce", "--full", "--wait-lock", "1s"][..],
    ] {
        let out = refused_for_lease(&env, args, &db, pid);
        assert!(stdout(&out).contains("not vacuumed"), "{}", stdout(&out));
    }
    // Nothing checkpointed or truncated the WAL (the writer only adds to it), and the
    // runtime's integrity record of the open file is as the runtime left it.
    assert!(
        len(&wal(&db)) >= wal_before,
        "the refused runs wrote nothing"
    );
    assert!(
        record_before.is_some(),
        "the runtime records its check on open"
    );
    assert_eq!(integrity_record(&env), record_before);

    let done = writer.finish("the writer's count");
    let n = done["appended"].as_u64().unwrap();
    assert!(n > 0 && done["failed"] == Value::Array(vec![]), "{done}");
    // The writer is gone, and its lease with it: the vacuum runs.
    let (code, doc) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["stores"][0]["status"], "vacuumed", "{doc}");
    assert_eq!(len(&wal(&db)), 0);
    assert_eq!(integrity(&db), "ok");
    assert_eq!(events(&db), events_before + n as i64, "no row lost");
    loads_with_appended(&env, &before, n);
}

/// A writer whose lease comes after the vacuum checked the leases: the runtime's own locking
/// (SQLite's, busy timeout 5 s on both sides) is all that stands between them. Whatever the
/// vacuum then reports, nothing is lost and the file is sound.
#[test]
fn a_runtime_writer_that_starts_during_the_vacuum_loses_nothing() {
    let Some(Setup {
        env,
        db,
        before,
        events: events_before,
    }) = setup(48 << 20)
    else {
        return;
    };
    let Some(mut writer) = writer(&env, true) else {
        return;
    };
    let WriterDuring {
        out,
        took: vacuum_took,
        ended: vacuum_ended,
        go_at,
        ready_at,
    } = writer_starts_during(&env, &mut writer, &["vacuum", "--enforce"], "vacuum");
    let first_commit = ready_at - vacuum_ended;
    std::thread::sleep(Duration::from_millis(300));
    let done = writer.finish("the writer's count");
    let n = done["appended"].as_u64().unwrap();
    let code = out.status.code();
    eprintln!(
        "vacuum exited {code:?} after {vacuum_took:?}: {}; the writer began {} ms before it \
         ended, committed its first append {first_commit} ms after it ended, appended {n}, \
         failed {}",
        stderr(&out).trim_end(),
        vacuum_ended - go_at,
        done["failed"]
    );
    // Either the vacuum got through, or it stopped on a connection it could not wait out
    // (exit 4); never an error, never a damaged file.
    match code {
        Some(0) => assert!(stdout(&out).contains("gave back"), "{}", stdout(&out)),
        Some(4) => assert!(
            one_line(&out).contains("another connection is using the database"),
            "{}",
            stderr(&out)
        ),
        _ => panic!("vacuum exited {code:?}: {}{}", stdout(&out), stderr(&out)),
    }
    assert!(n > 0, "{done}");
    assert_eq!(integrity(&db), "ok");
    assert_eq!(events(&db), events_before + n as i64, "no row lost: {done}");
    let (code, doc) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(len(&wal(&db)), 0);
    assert_eq!(integrity(&db), "ok");
    loads_with_appended(&env, &before, n);
}

/// The preview's prediction on a WAL the runtime itself grew: its appends while a reader of
/// this test held a snapshot (so no checkpoint could pass it), as a gateway's WAL grows under
/// a long read, then the runtime killed (a clean exit would checkpoint the WAL away). The
/// prediction is what the vacuum leaves, byte for byte.
#[test]
fn the_prediction_holds_on_a_wal_the_runtime_grew() {
    let Some(Setup {
        env,
        db,
        before,
        events: events_before,
    }) = setup(0)
    else {
        return;
    };
    let reader = Connection::open(&db).unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM transcript_events;")
        .unwrap();
    let Some(writer) = writer_pausing(&env, false, 1) else {
        return;
    };
    let ready = writer.next("the first append");
    assert_eq!(ready["ready"], true, "{ready}");
    std::thread::sleep(Duration::from_secs(3));
    writer.kill();
    reader.execute_batch("COMMIT;").unwrap();
    drop(reader);
    let n = (events(&db) - events_before) as u64;
    assert!(n > 0);
    let grown = len(&wal(&db));
    assert!(
        grown > 1 << 20,
        "the runtime grew the WAL to {grown} bytes only"
    );

    let (code, preview) = env.run_json(&["vacuum"]);
    assert_eq!(code, 0, "{preview}");
    let store = &preview["stores"][0];
    assert_eq!(store["status"], "would-vacuum", "{preview}");
    assert_eq!(store["before"]["walBytes"], grown, "{preview}");
    assert_eq!(len(&wal(&db)), grown, "a preview must not checkpoint");
    let (code, doc) = env.run_json(&["vacuum", "--enforce"]);
    assert_eq!(code, 0, "{doc}");
    let store = &doc["stores"][0];
    assert_eq!(store["status"], "vacuumed", "{doc}");
    assert_eq!(len(&wal(&db)), 0, "the WAL is emptied");
    assert_eq!(
        len(&db),
        preview["stores"][0]["after"]["dbBytes"].as_u64().unwrap(),
        "the prediction is what the vacuum left: {preview}\n{doc}"
    );
    assert_eq!(
        doc["reclaimedBytes"], preview["reclaimedBytes"],
        "{preview}\n{doc}"
    );
    assert_eq!(integrity(&db), "ok");
    assert_eq!(events(&db), events_before + n as i64, "no row lost");
    loads_with_appended(&env, &before, n);
}

// ---------------------------------------------------------------------------------------
// 3. The lifecycle lock held by the runtime.

#[test]
fn the_runtimes_lifecycle_lock_stops_the_vacuum_until_it_is_released() {
    let Some(env) = imported(RELEASE) else {
        return;
    };
    let Some(oracle) = oracle_path_of(RELEASE, "lifecycle lock") else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 2 << 20);
    let state = env.state();
    let holder = Script::spawn(&oracle, "hold-lifecycle-lock.mjs", &[os(&state)]);
    let held = holder.next("the lock");
    assert_eq!(held["held"], true, "{held}");
    let lock = held["path"].as_str().unwrap().to_string();

    let files = files_of(&db);
    // The state dir by its own path and through a symlink: the runtime names the lock after
    // the real path, and so must clawkeeper.
    let link = env.root().join("state-link");
    std::os::unix::fs::symlink(env.state(), &link).unwrap();
    let link_str = link.display().to_string();
    for vars in [&[][..], &[("OPENCLAW_STATE_DIR", link_str.as_str())][..]] {
        let out = env.run_with_env(&["vacuum", "--enforce"], vars);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{vars:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let line = one_line(&out);
        assert!(
            line.contains("openclaw-agent.sqlite")
                && line.contains("gateway lifecycle lock")
                && line.contains(&lock),
            "clawkeeper names the lock the runtime holds ({lock}): {line}"
        );
    }
    assert!(files_of(&db) == files, "the refused runs wrote nothing");

    // Released after about 2 s: a run that may wait 10 s gets it.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        holder.finish("the release")
    });
    let start = Instant::now();
    let (code, doc) = env.run_json(&["vacuum", "--enforce", "--wait-lock", "10s"]);
    let waited = start.elapsed();
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["stores"][0]["status"], "vacuumed", "{doc}");
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    assert_eq!(release.join().unwrap()["released"], true);
    assert_eq!(len(&wal(&db)), 0);
    assert_eq!(integrity(&db), "ok");
}

/// The other way round: while clawkeeper holds the lock (here, waiting for a lease to go), the
/// runtime cannot take it, so no gateway starts under a vacuum.
#[test]
fn the_runtime_cannot_take_the_lifecycle_lock_while_clawkeeper_holds_it() {
    let Some(env) = imported(RELEASE) else {
        return;
    };
    let Some(oracle) = oracle_path_of(RELEASE, "lifecycle lock") else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 2 << 20);
    let mut lessee = Command::new("sleep").arg("60").spawn().unwrap();
    add_lease(&env, lessee.id());
    let run = env
        .command(&["vacuum", "--enforce", "--wait-lock", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let state = env.state();
    let holder = Script::spawn(
        &oracle,
        "hold-lifecycle-lock.mjs",
        &[os(&state), OsStr::new("0")],
    );
    let refused = holder.next("the attempt");
    assert_eq!(refused["held"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("another OpenClaw process owns gateway-lifecycle"),
        "{refused}"
    );
    drop(holder);
    lessee.kill().unwrap();
    lessee.wait().unwrap();
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(len(&wal(&db)), 0);
    assert_eq!(integrity(&db), "ok");
}

// ---------------------------------------------------------------------------------------
// 4. A database file this user cannot write.

/// A row of the runtime's integrity-verification record for the database, as the runtime
/// writes it after a clean close (`clean_close` 1): a writer of the file must clear it first.
pub fn add_integrity_record(env: &TestEnv) {
    Connection::open(env.state().join("state/openclaw-quarantine.sqlite"))
        .unwrap()
        .execute(
            "INSERT INTO agent_integrity_verifications VALUES (?1, '1', '2', '2026.9.6', 0, 1)",
            [database(env).display().to_string()],
        )
        .unwrap();
}

/// The runtime's integrity record of the database: (verified_at, clean_close), if any.
fn integrity_record(env: &TestEnv) -> Option<(i64, i64)> {
    use rusqlite::OptionalExtension;
    read_only(&env.state().join("state/openclaw-quarantine.sqlite"))
        .query_row(
            "SELECT verified_at, clean_close FROM agent_integrity_verifications WHERE path = ?1",
            [database(env).display().to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .unwrap()
}

pub fn quarantine_rows(env: &TestEnv) -> i64 {
    sql_i64(
        &env.state().join("state/openclaw-quarantine.sqlite"),
        "SELECT count(*) FROM agent_integrity_verifications",
    )
}

#[test]
fn a_database_this_user_cannot_write_fails_loudly_and_is_not_touched() {
    let Some(env) = imported(RELEASE) else {
        return;
    };
    let db = database(&env);
    grow_wal(&db, 2 << 20);
    // The runtime's record that the file was checked: a run that cannot write must not clear it.
    add_integrity_record(&env);
    // Everything is nobody's but the database file, which nobody can only read.
    open_to_nobody(&env.root(), true);
    std::os::unix::fs::chown(&db, Some(0), Some(0)).unwrap();
    let files = files_of(&db);

    let Some(out) = as_nobody(&env, &["vacuum", "--json"]) else {
        return;
    };
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let preview: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(preview["stores"][0]["status"], "would-vacuum", "{preview}");

    let out = as_nobody(&env, &["vacuum", "--enforce"]).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let line = one_line(&out);
    assert!(
        line.contains(&db.display().to_string()) && line.contains("not writable"),
        "{line}"
    );
    assert!(
        files_of(&db) == files,
        "the database and its WAL are unchanged"
    );
    assert_eq!(quarantine_rows(&env), 1, "the integrity record is kept");

    // The whole state dir another user's, read-only to this one (an operator running
    // clawkeeper as themselves): the preview still works, the vacuum fails on the first file
    // it would need, and names the database.
    for e in walkdir::WalkDir::new(env.root()) {
        std::os::unix::fs::chown(e.unwrap().path(), Some(0), Some(0)).unwrap();
    }
    open_to_nobody(&env.root(), false);
    let out = as_nobody(&env, &["vacuum", "--json"]).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = as_nobody(&env, &["vacuum", "--enforce"]).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        one_line(&out).contains(&db.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(
        files_of(&db) == files,
        "the database and its WAL are unchanged"
    );
    assert_eq!(quarantine_rows(&env), 1);
}
