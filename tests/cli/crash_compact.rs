//! Crash safety of `compact`: `kill -9` at random moments during `compact --enforce`, in place
//! and with `--successor`, on a large transcript (see `crash` for the other commands).
//!
//! In place, the transcript is always the original or the original plus exactly the
//! compaction an uninterrupted run appends; with `--successor`, the old transcript is never
//! changed, `sessions.json` is the original or points at a complete successor, and any other
//! transcript left beside them is complete (a successor whose switch did not land). The next
//! run always finishes the job. `CLAWKEEPER_CRASH_ITERS` and `CLAWKEEPER_CRASH_MB` scale it as
//! in `crash` (here a third of each: 7 kills per mode on 8 MB by default).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::crash::{big_transcript, env_num, run_and_kill, timed_success};

const STORE: &str = r#"{
  "agent:main:main": {
    "sessionId": "big",
    "sessionFile": "t.jsonl",
    "updatedAt": 1772442000000
  }
}"#;

fn compact(sessions: &Path, successor: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
    c.args([
        "compact",
        "--enforce",
        "--json",
        "--keep-recent-tokens",
        "20000",
    ]);
    if successor {
        c.args(["--store", "sessions.json", "--successor"]);
    } else {
        c.args(["--transcript", "t.jsonl"]);
    }
    c.current_dir(sessions)
        .env_remove("OPENCLAW_STATE_DIR")
        .env_remove("OPENCLAW_CONFIG_PATH");
    c
}

/// The lines of `bytes`, each parsed (panics on a torn line or one that is not JSON).
fn json_lines(bytes: &[u8]) -> Vec<Value> {
    assert!(bytes.is_empty() || bytes.ends_with(b"\n"), "torn last line");
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("a line that is not JSON"))
        .collect()
}

/// The successor the store points at, checked complete; `None` when the store is unchanged.
fn successor_of(sessions: &Path) -> Option<(String, Vec<Value>)> {
    let text = fs::read(sessions.join("sessions.json")).unwrap();
    if text == STORE.as_bytes() {
        return None;
    }
    let store: Value = serde_json::from_slice(&text).expect("a store that is not JSON");
    let e = &store["agent:main:main"];
    let sid = e["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(sid, "big", "a changed store still names the old session");
    let file = e["sessionFile"].as_str().unwrap();
    let lines = json_lines(&fs::read(sessions.join(file)).expect("the successor is missing"));
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["id"], sid.as_str());
    Some((file.to_owned(), lines))
}

/// Every transcript in the directory other than the old one is complete JSON lines.
fn others_complete(sessions: &Path) {
    for e in fs::read_dir(sessions).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".jsonl") && name != "t.jsonl" {
            json_lines(&fs::read(sessions.join(&name)).unwrap());
        }
    }
}

fn setup(dir: &Path, original: &[u8]) -> std::path::PathBuf {
    let sessions = dir.join("agents/main/sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::write(sessions.join("t.jsonl"), original).unwrap();
    fs::write(sessions.join("sessions.json"), STORE).unwrap();
    sessions
}

#[test]
fn kill_9_during_compact_leaves_old_or_new() {
    let iters = env_num("CLAWKEEPER_CRASH_ITERS", 20).div_ceil(3);
    let mb = env_num("CLAWKEEPER_CRASH_MB", 24).div_ceil(3);
    let original = big_transcript(mb);
    let scratch = tempfile::tempdir().unwrap();
    let mut seed = 0xc0_4ac7_u64 ^ u64::from(std::process::id());
    for successor in [false, true] {
        // An uninterrupted run: what it appends (in place) or how long its successor is.
        let reference = setup(&scratch.path().join(format!("ref-{successor}")), &original);
        let took = timed_success(compact(&reference, successor));
        let appended = fs::read(reference.join("t.jsonl")).unwrap()[original.len()..].to_vec();
        let want_lines = if successor {
            assert!(appended.is_empty(), "--successor changed the old file");
            successor_of(&reference).expect("no successor").1.len()
        } else {
            let lines = json_lines(&appended);
            assert!(!lines.is_empty(), "the reference run appended nothing");
            lines.len()
        };
        eprintln!("uninterrupted compact (successor: {successor}): {took:?}");
        let (mut olds, mut news) = (0, 0);
        for i in 0..iters {
            let sessions = setup(
                &scratch.path().join(format!("run-{successor}-{i}")),
                &original,
            );
            let (_, delay) = run_and_kill(compact(&sessions, successor), &mut seed, took);
            let now = fs::read(sessions.join("t.jsonl")).unwrap();
            let changed = if successor {
                assert!(
                    now == original,
                    "kill {i}: --successor changed the old file"
                );
                others_complete(&sessions);
                successor_of(&sessions).is_some_and(|(_, l)| {
                    assert_eq!(l.len(), want_lines, "kill {i}: successor length");
                    true
                })
            } else {
                assert!(
                    now == original
                        || (now.starts_with(&original)
                            && json_lines(&now[original.len()..]).len() == want_lines),
                    "kill {i} after {delay:?}: the transcript is neither old nor new"
                );
                now != original
            };
            if changed {
                news += 1;
            } else {
                olds += 1;
            }
            // The next run finishes the job (after the lock of a killed run is reclaimable:
            // an empty one counts as in use until it is old).
            let lock = sessions.join("t.jsonl.lock");
            if fs::read(&lock).is_ok_and(|b| serde_json::from_slice::<Value>(&b).is_err()) {
                let old = std::time::SystemTime::now() - Duration::from_secs(120);
                fs::File::options()
                    .write(true)
                    .open(&lock)
                    .unwrap()
                    .set_modified(old)
                    .unwrap();
            }
            let out = compact(&sessions, successor).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "run after kill {i}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if successor {
                assert_eq!(fs::read(sessions.join("t.jsonl")).unwrap(), original);
                let (_, lines) = successor_of(&sessions).expect("no successor after the rerun");
                assert!(!lines.is_empty());
                others_complete(&sessions);
            } else {
                let now = fs::read(sessions.join("t.jsonl")).unwrap();
                assert!(now.starts_with(&original), "run after kill {i}");
                assert_eq!(
                    json_lines(&now[original.len()..]).len(),
                    want_lines,
                    "run after kill {i}: compacted twice or not at all"
                );
            }
            fs::remove_dir_all(sessions.parent().unwrap().parent().unwrap()).unwrap();
        }
        eprintln!("compact (successor: {successor}), {iters} kills: {olds} old, {news} new");
    }
}
