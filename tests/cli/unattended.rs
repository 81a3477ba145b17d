//! Runs left alone (cron, systemd timers, many hosts): a typo is an error, never an empty
//! success; every store and file is processed even when some are bad; every problem is one
//! line on stderr naming its store or file; the exit code is the most serious outcome; totals
//! count only what was written; `--max-delete` bounds files and bytes too.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{TestEnv, announce_skip, clawkeeper_bin, now_ms, set_age, stderr, stdout};

const DAY: i64 = 86_400_000;

/// A store for `agent` with `n` generated transcripts (images, silent replies); returns the
/// transcript paths.
fn healthy_agent(env: &TestEnv, agent: &str, n: u64, seed: u64) -> Vec<PathBuf> {
    let dir = env.sessions_dir(agent);
    fs::create_dir_all(&dir).unwrap();
    let mut s = serde_json::Map::new();
    let mut files = Vec::new();
    for i in 0..n {
        let id = format!("{agent}-{i}-{}", "a".repeat(20));
        s.insert(
            format!("agent:{agent}:s{i}"),
            json!({"sessionId": id, "updatedAt": now_ms()}),
        );
        let p = dir.join(format!("{id}.jsonl"));
        fs::write(&p, generate_long(seed + i, 60).bytes).unwrap();
        files.push(p);
    }
    fs::write(
        dir.join("sessions.json"),
        serde_json::to_string_pretty(&Value::Object(s)).unwrap(),
    )
    .unwrap();
    files
}

fn agents_config(env: &TestEnv, ids: &[&str]) {
    let list: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
    env.write_config(&json!({"agents": {"list": list}}).to_string());
}

/// Hold a transcript's lock as a live process (this test) would; returns the lock file.
fn hold(transcript: &Path) -> PathBuf {
    let lock = PathBuf::from(format!("{}.lock", transcript.display()));
    fs::write(
        &lock,
        format!(
            "{{\"pid\": {}, \"createdAt\": \"2099-01-01T00:00:00.000Z\"}}",
            std::process::id()
        ),
    )
    .unwrap();
    lock
}

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// The lines of stderr that are problems (not notes).
fn problem_lines(o: &std::process::Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("clawkeeper: ") && !l.starts_with("clawkeeper: note:"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_state_dir_or_store_that_does_not_exist_is_an_error_on_stderr() {
    let env = TestEnv::new();
    let missing = env.root().join("nonexistent");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["prune-noreply", "--all-agents", "--enforce", "--quiet"],
        vec!["strip-images", "--all-agents", "--enforce", "--quiet"],
        vec!["compact", "--agent", "main", "--enforce"],
        vec!["cleanup", "--all-agents", "--enforce"],
        vec!["inspect"],
    ] {
        let out = env.run_with_env(&args, &[("OPENCLAW_STATE_DIR", missing)]);
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
        let lines = problem_lines(&out);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(
            lines[0].contains(&format!("{missing}/agents/main/sessions/sessions.json"))
                && lines[0].contains("no such store")
                && lines[0].contains("state directory"),
            "{args:?}: {lines:?}"
        );
    }
    // cleanup keeps OpenClaw's stdout for a missing store, and says so on stderr (exit 1).
    let typo = env.root().join("typo/sessions.json");
    let typo = typo.to_str().unwrap();
    let out = env.run(&["cleanup", "--store", typo, "--enforce"]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("Applied maintenance. Current entries: 0"));
    assert!(stderr(&out).contains(&format!("{typo}: no such store")));
    // A misspelt file name in an existing directory is caught too.
    let misspelt = env.sessions_dir("main").join("sesions.json");
    let out = env.run(&["prune-noreply", "--store", misspelt.to_str().unwrap()]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // An agent that has its directory but no store yet is not an error.
    let out = env.run(&["prune-noreply", "--agent", "main"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Over several agents, one that never ran is fine as long as another has a store.
    agents_config(&env, &["main", "never"]);
    healthy_agent(&env, "main", 1, 5);
    let out = env.run(&["prune-noreply", "--all-agents"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_damaged_transcript_is_a_skip_named_on_stderr_and_the_others_are_rewritten() {
    let env = TestEnv::new();
    let files = healthy_agent(&env, "main", 3, 40);
    // Replace the second transcript with an empty file.
    fs::write(&files[1], b"").unwrap();
    let before: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    let inspect = env.run_json(&["inspect", "--agent", "main"]).1;
    let damage = &inspect["stores"][0]["damage"];
    assert!(
        damage.to_string().contains(files[1].to_str().unwrap()),
        "inspect lists the empty transcript as damage: {damage}"
    );
    let out = env.run(&["prune-noreply", "--agent", "main", "--enforce"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let lines = problem_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(files[1].to_str().unwrap()) && lines[0].contains("damaged"),
        "{lines:?}"
    );
    assert!(stdout(&out).contains("damaged"), "{}", stdout(&out));
    assert_ne!(fs::read(&files[0]).unwrap(), before[0], "rewritten");
    assert_eq!(fs::read(&files[1]).unwrap(), before[1], "left alone");
    let out = env.run(&["strip-images", "--agent", "main", "--enforce"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn one_bad_agent_never_stops_the_others() {
    let env = TestEnv::new();
    agents_config(&env, &["bad", "good", "many"]);
    fs::create_dir_all(env.sessions_dir("bad")).unwrap();
    fs::write(env.sessions_dir("bad").join("sessions.json"), "{ not json").unwrap();
    let good = healthy_agent(&env, "good", 2, 60);
    // `many`: every entry is stale, so a plan under `--max-delete 50%` is refused.
    healthy_agent(&env, "many", 2, 70);
    let store = env.sessions_dir("many").join("sessions.json");
    let mut s: Value = serde_json::from_str(&fs::read_to_string(&store).unwrap()).unwrap();
    for v in s.as_object_mut().unwrap().values_mut() {
        v["updatedAt"] = json!(now_ms() - 400 * DAY);
    }
    fs::write(&store, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    let before_good = fs::read(&good[0]).unwrap();
    let out = env.run(&["prune-noreply", "--all-agents", "--enforce"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_ne!(
        fs::read(&good[0]).unwrap(),
        before_good,
        "good was maintained"
    );
    let lines = problem_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("agents/bad/sessions/sessions.json"),
        "{lines:?}"
    );

    let out = env.run(&[
        "cleanup",
        "--all-agents",
        "--enforce",
        "--max-delete",
        "50%",
    ]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let lines = problem_lines(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("agents/bad/")), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("agents/many/") && l.contains("--max-delete")),
        "{lines:?}"
    );
    assert!(stdout(&out).contains("agents/good/sessions/sessions.json"));
    assert!(
        !stdout(&out).contains("agents/many/"),
        "refused, not applied"
    );
    // Without the unparsable store, the most serious outcome is the --max-delete refusal.
    fs::remove_file(env.sessions_dir("bad").join("sessions.json")).unwrap();
    let out = env.run(&[
        "cleanup",
        "--all-agents",
        "--enforce",
        "--max-delete",
        "50%",
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let out = env.run(&["inspect", "--all-agents", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// A directory whose sync fails after a batch replaced files in it (a failing disk) is a
/// problem of its own: the run goes on with the other directories, keeps every row of its
/// report, and each file replaced there says that a power loss could undo it.
#[test]
fn a_directory_that_cannot_be_synced_is_one_problem_and_every_row_is_kept() {
    let env = TestEnv::new();
    agents_config(&env, &["a", "b"]);
    let a = healthy_agent(&env, "a", 3, 60);
    let b = healthy_agent(&env, "b", 3, 60);
    let failing = env.sessions_dir("a");
    let read_all = |files: &[PathBuf]| -> Vec<Vec<u8>> {
        files.iter().map(|f| fs::read(f).unwrap()).collect()
    };
    let before = std::collections::HashMap::from([("a", read_all(&a)), ("b", read_all(&b))]);
    let out = env.run_with_env(
        &[
            "prune-noreply",
            "--all-agents",
            "--enforce",
            "--json",
            "--verbose",
        ],
        &[("CLAWKEEPER_TEST_FAIL_DIR_SYNC", failing.to_str().unwrap())],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let lines = problem_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("cannot sync directory") && lines[0].contains("agents/a/sessions"),
        "{lines:?}"
    );
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = doc["transcripts"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{doc}");
    for row in rows {
        assert_eq!(row["status"], "changed", "{row}");
        let path = row["path"].as_str().unwrap();
        let warned = row["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("could not be synced"));
        assert_eq!(warned, path.contains("agents/a/"), "{row}");
    }
    // The renames happened in both directories; nothing was left beside them.
    for (files, dir) in [(&a, "a"), (&b, "b")] {
        for (f, old) in files.iter().zip(&before[dir]) {
            assert_ne!(&fs::read(f).unwrap(), old, "{}", f.display());
        }
        let leftovers: Vec<_> = fs::read_dir(env.sessions_dir(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp") || n.ends_with(".lock"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

#[test]
fn max_delete_bounds_files_and_bytes_too() {
    let env = TestEnv::new();
    healthy_agent(&env, "main", 4, 80);
    let dir = env.sessions_dir("main");
    // Old archives that archive retention deletes: no store entry is removed at all.
    for i in 0..6 {
        let p = dir.join(format!(
            "old{i}.jsonl.deleted.2020-01-0{}T00-00-00.000Z",
            i + 1
        ));
        fs::write(&p, "x".repeat(10_000)).unwrap();
        set_age(&p, 400 * DAY);
    }
    env.write_config(r#"{"session": {"maintenance": {"resetArchiveRetention": "1d"}}}"#);
    let store = env.store_path();
    let preview = env.run(&["cleanup", "--dry-run", "--max-delete", "20%"]);
    assert_eq!(code(&preview), 0);
    let out = env.run(&["cleanup", "--enforce", "--max-delete", "20%"]);
    let listing_after = fs::read_dir(&dir).unwrap().count();
    if code(&out) == 0 {
        panic!(
            "expected a refusal; store {store:?}; {} files after\n{}\n{}",
            listing_after,
            stdout(&out),
            stderr(&out)
        );
    }
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("files"), "{}", stderr(&out));
    assert!(
        stderr(&preview).contains("--enforce would refuse"),
        "the preview says so: {}",
        stderr(&preview)
    );
    assert_eq!(listing_after, 11, "nothing was removed");
    let out = env.run(&["cleanup", "--enforce", "--max-delete", "100%"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn totals_count_only_what_was_written() {
    let env = TestEnv::new();
    let files = healthy_agent(&env, "main", 2, 90);
    // A live lock on the first transcript (held by this test process).
    let lock = hold(&files[0]);
    let (code_, doc) = env.run_json(&["prune-noreply", "--agent", "main", "--enforce"]);
    assert_eq!(code_, 4);
    let locked = doc["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["status"] == "locked")
        .unwrap();
    assert_eq!(locked["entriesRemoved"], 0, "{locked}");
    assert_eq!(locked["bytesBefore"], locked["bytesAfter"]);
    let removed: u64 = doc["transcripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["entriesRemoved"].as_u64().unwrap())
        .sum();
    assert_eq!(doc["totals"]["entriesRemoved"].as_u64().unwrap(), removed);
    fs::remove_file(&lock).unwrap();
    // A successor leaves the old file for cleanup: nothing is freed now.
    let (c, doc) = env.run_json(&[
        "compact",
        "--agent",
        "main",
        "--successor",
        "--keep-recent-tokens",
        "200",
        "--min-tokens",
        "0",
        "--enforce",
    ]);
    assert_eq!(c, 0, "{doc}");
    let t = &doc["totals"];
    assert_eq!(t["bytesFreed"], 0, "{t}");
    assert!(t["bytesFreedLater"].as_u64().unwrap() > 0, "{t}");
}

#[test]
fn unchanged_files_are_counted_not_listed_unless_verbose() {
    let env = TestEnv::new();
    let dir = env.sessions_dir("main");
    let mut s = serde_json::Map::new();
    for i in 0..5 {
        let id = format!("plain-{i}");
        env.transcript(&id, 0);
        s.insert(format!("agent:main:p{i}"), json!({"sessionId": id}));
    }
    fs::write(
        dir.join("sessions.json"),
        serde_json::to_string(&Value::Object(s)).unwrap(),
    )
    .unwrap();
    let out = env.run(&["prune-noreply"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(!text.contains("plain-0.jsonl"), "{text}");
    assert!(
        text.contains("5 transcripts (5 unchanged, not listed)"),
        "{text}"
    );
    let verbose = stdout(&env.run(&["prune-noreply", "--verbose"]));
    assert!(verbose.contains("plain-0.jsonl"), "{verbose}");
    let (_, doc) = env.run_json(&["prune-noreply"]);
    assert_eq!(doc["transcripts"].as_array().unwrap().len(), 5);
}

#[test]
fn every_key_form_a_table_prints_selects_the_session() {
    let env = TestEnv::new();
    let dir = env.sessions_dir("main");
    env.transcript("hb", 0);
    fs::write(
        dir.join("sessions.json"),
        json!({"agent:main:main:heartbeat": {"sessionId": "hb"}}).to_string(),
    )
    .unwrap();
    let out = env.run(&["prune-noreply", "--verbose"]);
    let text = stdout(&out);
    assert!(
        text.contains("(session keys shown without \"agent:main:\")"),
        "{text}"
    );
    assert!(
        text.contains("main:heartbeat"),
        "a key that fits is whole: {text}"
    );
    for form in [
        "main:heartbeat",
        "agent:main:main:heartbeat",
        "AGENT:MAIN:MAIN:HEARTBEAT",
    ] {
        for cmd in ["prune-noreply", "strip-images", "inspect"] {
            let out = env.run(&[cmd, "--session", form]);
            assert_eq!(code(&out), 0, "{cmd} --session {form}: {}", stderr(&out));
        }
    }
    let out = env.run(&["prune-noreply", "--session", "heartbeat"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no session \"heartbeat\""));
}

#[test]
fn bad_values_are_usage_errors_everywhere_but_in_cleanup() {
    let env = TestEnv::new();
    let cases: &[&[&str]] = &[
        &["prune-noreply", "--keep", "abc"],
        &["prune-noreply", "--wait-lock", "5x"],
        &["strip-images", "--wait-lock", "18446744073709551616"],
        &["compact", "--wait-lock", "5124095576030432h"],
        &["compact", "--summarizer-timeout", "-3s"],
        &["inspect", "--kind", "bogus"],
        &["inspect", "--older-than", "soon"],
        &["inspect", "--larger-than", "big"],
        &["prune-noreply", "--store", "a", "--agent", "b"],
        &["strip-images", "--agent", "a", "--all-agents"],
        &["inspect", "--transcript", "x.jsonl", "--session", "k"],
        &["compact", "--transcript", "x.jsonl", "--successor"],
    ];
    for args in cases {
        let out = env.run(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with("clawkeeper: "), "{args:?}");
    }
    for args in [
        vec!["cleanup", "--wait-lock", "5x", "--enforce"],
        vec![
            "cleanup",
            "--wait-lock",
            "18446744073709551616",
            "--enforce",
        ],
        vec!["cleanup", "--store", "a", "--agent", "b"],
        vec!["cleanup", "--max-delete", "lots"],
    ] {
        let out = env.run(&args);
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_dry_run_says_what_enforce_would_refuse() {
    let env = TestEnv::new();
    let files = healthy_agent(&env, "main", 1, 100);
    let store = env.store_path();
    // A symlinked store.
    let real = env.sessions_dir("main").join("real.json");
    fs::rename(&store, &real).unwrap();
    std::os::unix::fs::symlink("real.json", &store).unwrap();
    let out = env.run(&["cleanup", "--dry-run"]);
    assert_eq!(code(&out), 0);
    assert!(
        stderr(&out).contains("symlink") && stderr(&out).contains("--enforce would refuse"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&env.run(&["cleanup", "--enforce"])), 3);
    fs::remove_file(&store).unwrap();
    fs::rename(&real, &store).unwrap();
    // A held lock on a transcript the plan removes.
    let mut s: Value = serde_json::from_str(&fs::read_to_string(&store).unwrap()).unwrap();
    for v in s.as_object_mut().unwrap().values_mut() {
        v["updatedAt"] = json!(now_ms() - 400 * DAY);
    }
    fs::write(&store, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    hold(&files[0]);
    let out = env.run(&["cleanup", "--dry-run"]);
    assert!(
        stderr(&out).contains("--enforce would skip this store"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&env.run(&["cleanup", "--enforce"])), 4);
}

/// Run clawkeeper as `nobody` (for permission failures, which root never meets); `None` when
/// this is not root or `setpriv` is missing.
pub fn as_nobody(env: &TestEnv, args: &[&str]) -> Option<std::process::Output> {
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        announce_skip("run as root with util-linux setpriv to test permission failures");
        return None;
    }
    Some(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(clawkeeper_bin())
            .args(args)
            .current_dir("/")
            .env("OPENCLAW_STATE_DIR", env.state())
            .env("OPENCLAW_CONFIG_PATH", env.config_path())
            .env("HOME", env.home())
            .output()
            .unwrap(),
    )
}

/// Open the test tree to `nobody` for reading (and writing where `writable`).
pub fn open_to_nobody(path: &Path, writable: bool) {
    let mut p = path.to_path_buf();
    loop {
        let mode = fs::metadata(&p).unwrap().permissions().mode();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode | 0o555)).unwrap();
        if !p.pop() || p == Path::new("/tmp") || p == Path::new("/") {
            break;
        }
    }
    for e in walkdir::WalkDir::new(path) {
        let e = e.unwrap();
        let mode = if e.file_type().is_dir() { 0o755 } else { 0o644 };
        fs::set_permissions(e.path(), fs::Permissions::from_mode(mode)).unwrap();
        if writable {
            std::os::unix::fs::chown(e.path(), Some(65534), Some(65534)).unwrap();
        }
    }
}

#[test]
fn a_read_only_sessions_directory_fails_loudly_and_claims_nothing() {
    let env = TestEnv::new();
    let files = healthy_agent(&env, "main", 2, 110);
    open_to_nobody(&env.root(), false);
    let Some(out) = as_nobody(&env, &["prune-noreply", "--enforce"]) else {
        return;
    };
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let lines = problem_lines(&out);
    for f in &files {
        assert!(
            lines.iter().any(|l| l.contains(f.to_str().unwrap())),
            "{f:?} named: {lines:?}"
        );
    }
    assert!(stdout(&out).contains(" 0 removed"), "{}", stdout(&out));
    // inspect predicts cleanup without needing to write or copy anything, and lists an
    // unreadable transcript as damage instead of failing.
    fs::set_permissions(&files[0], fs::Permissions::from_mode(0o000)).unwrap();
    let out = as_nobody(&env, &["inspect", "--json"]).unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["stores"][0]["damage"]
            .to_string()
            .contains(files[0].to_str().unwrap()),
        "{}",
        doc["stores"][0]["damage"]
    );
}

#[test]
fn inspect_predicts_cleanup_without_copying_across_filesystems() {
    let env = TestEnv::new();
    healthy_agent(&env, "main", 3, 120);
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        announce_skip("/dev/shm is needed for a temp dir on another filesystem");
        return;
    }
    let tmp = tempfile::tempdir_in(shm).unwrap();
    let (c1, here) = env.run_json(&["inspect"]);
    let (c2, there) =
        env.run_json_with_env(&["inspect"], &[("TMPDIR", tmp.path().to_str().unwrap())]);
    assert_eq!((c1, c2), (0, 0));
    assert_eq!(
        here["stores"][0]["reclaimable"]["cleanup"],
        there["stores"][0]["reclaimable"]["cleanup"]
    );
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "scratch removed"
    );
}

#[test]
fn a_wide_terminal_shows_long_keys_whole() {
    let env = TestEnv::new();
    let key = format!("agent:main:telegram:direct:{}", "7".repeat(60));
    env.transcript("long", 0);
    fs::write(
        env.store_path(),
        json!({ key.clone(): {"sessionId": "long", "updatedAt": now_ms()} }).to_string(),
    )
    .unwrap();
    let rest = key.strip_prefix("agent:main:").unwrap();
    // Piped: 80 columns, so the long key is cut in the middle.
    let piped = stdout(&env.run(&["inspect", "--no-cleanup"]));
    assert!(!piped.contains(rest), "{piped}");
    // On a 200-column terminal it fits, and is shown whole.
    let cmdline = format!(
        "stty cols 200 rows 50; {} inspect --no-cleanup",
        clawkeeper_bin()
    );
    let out = Command::new("script")
        .args(["-qec", &cmdline, "/dev/null"])
        .current_dir(env.work())
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home())
        .stdin(std::process::Stdio::null())
        .output();
    let Ok(out) = out else {
        announce_skip("util-linux `script` is needed for the terminal-width test");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(text.contains(rest), "{text}");
    // Table lines fit the terminal (the progress line on stderr is drawn in place).
    assert!(
        text.lines()
            .filter(|l| l.starts_with(['┌', '│', '╞', '└']))
            .all(|l| l.chars().count() <= 200),
        "{text}"
    );
    // The form the table prints selects the session.
    let out = env.run(&["inspect", "--session", rest, "--no-cleanup"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_lock_that_cannot_be_read_is_a_problem_of_its_store_alone() {
    let env = TestEnv::new();
    agents_config(&env, &["a", "b"]);
    let mut locked = Vec::new();
    for agent in ["a", "b"] {
        let files = healthy_agent(&env, agent, 1, 130);
        // Every entry is stale: the plan removes its transcript.
        let store = env.sessions_dir(agent).join("sessions.json");
        let mut s: Value = serde_json::from_str(&fs::read_to_string(&store).unwrap()).unwrap();
        for v in s.as_object_mut().unwrap().values_mut() {
            v["updatedAt"] = json!(now_ms() - 400 * DAY);
        }
        fs::write(&store, serde_json::to_string_pretty(&s).unwrap()).unwrap();
        locked.push(files[0].clone());
    }
    open_to_nobody(&env.root(), true);
    // Agent a's transcript lock belongs to root and is unreadable to the run.
    let lock = hold(&locked[0]);
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o000)).unwrap();
    let Some(out) = as_nobody(&env, &["cleanup", "--all-agents", "--enforce"]) else {
        return;
    };
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let lines = problem_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(lock.to_str().unwrap()), "{lines:?}");
    assert!(
        stdout(&out).contains("agents/b/sessions/sessions.json"),
        "{}",
        stdout(&out)
    );
    assert!(locked[0].exists(), "agent a was left alone");
    assert!(
        !locked[1].exists(),
        "agent b was cleaned: its transcript archived"
    );
}
