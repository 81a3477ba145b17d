//! Crash safety: `kill -9` at random moments during `--enforce` runs on a large transcript.
//!
//! For each kill the transcript must be byte-identical to the original or to the result of an
//! uninterrupted run, never anything in between; whatever the killed run left behind (its
//! lock, a temp file) must not stop the next run, which must finish the job and leave the
//! directory clean (at most the dead run's own lock, which every OpenClaw writer reclaims).
//!
//! The same for `cleanup --enforce` on a large store: `sessions.json` is the original or the
//! uninterrupted result, every transcript is at its name or archived with its bytes intact,
//! and the next run reaches exactly the uninterrupted result.
//!
//! `compact` (in place and `--successor`) is in `crash_compact`.
//!
//! `CLAWKEEPER_CRASH_ITERS` sets the number of kills (default 20; half as many for cleanup),
//! `CLAWKEEPER_CRASH_MB` the approximate transcript size (default 24),
//! `CLAWKEEPER_CRASH_STORE_ENTRIES` the store size (default 1200 entries, about 10 MB).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `cmd` to completion, asserts that it succeeded, and returns how long it took (the
/// window the kills are drawn from).
pub(crate) fn timed_success(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let took = start.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// Runs `cmd` (output discarded) and kills it with SIGKILL after a random delay within 1.1 ×
/// `took` (an uninterrupted run's time), drawn from the xorshift state `seed`. Returns the
/// killed process's pid and the delay.
pub(crate) fn run_and_kill(mut cmd: Command, seed: &mut u64, took: Duration) -> (u32, Duration) {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    let delay = Duration::from_micros(*seed % (took.as_micros() as u64 * 11 / 10 + 1));
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    (pid, delay)
}

/// A transcript of about `mb` MiB: turns with a large image each, heartbeat runs of silent
/// replies between them, so both commands rewrite lines all through the file.
pub(crate) fn big_transcript(mb: u64) -> Vec<u8> {
    let image = "QUJD".repeat(64 * 1024); // 256 KiB of base64
    let mut out = String::new();
    out.push_str(r#"{"type":"session","version":3,"id":"big","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#);
    out.push('\n');
    let mut parent = "null".to_owned();
    let mut n = 0u64;
    let id = |n: &mut u64| {
        *n += 1;
        format!("e{n:07x}")
    };
    while (out.len() as u64) < (mb << 20) {
        let u = id(&mut n);
        out.push_str(&format!(
            r#"{{"type":"message","id":"{u}","parentId":{parent},"timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"look at this"}},{{"type":"image","data":"{image}","mimeType":"image/png"}}],"timestamp":{n}}}}}"#
        ));
        out.push('\n');
        let a = id(&mut n);
        out.push_str(&format!(
            r#"{{"type":"message","id":"{a}","parentId":"{u}","timestamp":"2026-03-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"seen"}}],"stopReason":"stop","timestamp":{n}}}}}"#
        ));
        out.push('\n');
        parent = format!("\"{a}\"");
        for _ in 0..40 {
            let h = id(&mut n);
            out.push_str(&format!(
                r#"{{"type":"message","id":"{h}","parentId":{parent},"timestamp":"2026-03-01T00:00:03.000Z","message":{{"role":"user","content":"heartbeat","timestamp":{n}}}}}"#
            ));
            out.push('\n');
            for _ in 0..3 {
                let s = id(&mut n);
                out.push_str(&format!(
                    r#"{{"type":"message","id":"{s}","parentId":"{h2}","timestamp":"2026-03-01T00:00:04.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"NO_REPLY"}}],"stopReason":"stop","timestamp":{n}}}}}"#,
                    h2 = last_id(&out)
                ));
                out.push('\n');
            }
            parent = format!("\"{}\"", last_id(&out));
        }
    }
    let last = id(&mut n);
    out.push_str(&format!(
        r#"{{"type":"message","id":"{last}","parentId":{parent},"timestamp":"2026-03-01T00:00:05.000Z","message":{{"role":"user","content":"bye","timestamp":{n}}}}}"#
    ));
    out.push('\n');
    out.into_bytes()
}

/// The id on the last line written so far.
fn last_id(text: &str) -> String {
    let line = text.trim_end_matches('\n').rsplit('\n').next().unwrap();
    let v: Value = serde_json::from_str(line).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

const COMMANDS: [&[&str]; 2] = [&["prune-noreply"], &["strip-images", "--keep-turns", "2"]];

fn clawkeeper(dir: &Path, cmd: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
    c.args(cmd)
        .args(["--transcript", "t.jsonl", "--enforce", "--json"])
        .current_dir(dir)
        .env_remove("OPENCLAW_STATE_DIR")
        .env_remove("OPENCLAW_CONFIG_PATH");
    c
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn kill_9_at_random_moments_leaves_old_or_new() {
    let iters = env_num("CLAWKEEPER_CRASH_ITERS", 20);
    let mb = env_num("CLAWKEEPER_CRASH_MB", 24);
    let original = big_transcript(mb);
    let scratch = tempfile::tempdir().unwrap();
    // The uninterrupted results, and how long a run takes.
    let mut expected = Vec::new();
    for (k, cmd) in COMMANDS.iter().enumerate() {
        let dir = scratch.path().join(format!("ref{k}"));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("t.jsonl"), &original).unwrap();
        let took = timed_success(clawkeeper(&dir, cmd));
        let result = fs::read(dir.join("t.jsonl")).unwrap();
        assert!(
            result.len() < original.len(),
            "the reference run changed nothing"
        );
        assert_eq!(listing(&dir), ["t.jsonl"]);
        eprintln!("uninterrupted {}: {took:?}", cmd[0]);
        expected.push((result, took));
    }
    let mut seed = 0x5eed_u64 ^ u64::from(std::process::id());
    let (mut olds, mut news, mut empty_locks) = (0, 0, 0);
    for i in 0..iters {
        let k = (i % 2) as usize;
        let (want, took) = &expected[k];
        let dir = scratch.path().join(format!("run{i}"));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("t.jsonl"), &original).unwrap();
        let (pid, delay) = run_and_kill(clawkeeper(&dir, COMMANDS[k]), &mut seed, *took);
        let now = fs::read(dir.join("t.jsonl")).unwrap();
        let is_new = &now == want;
        assert!(
            now == original || is_new,
            "kill {i} after {delay:?}: the transcript is neither the original nor the result ({} bytes)",
            now.len()
        );
        if is_new {
            news += 1;
        } else {
            olds += 1;
        }
        // A lock left behind is ours, in OpenClaw's format, naming the dead pid. Killed
        // between creating and filling it, it is empty: like the runtime, the next run waits
        // until such a lock is old enough (it may be a writer that has not written yet), and
        // says the file is locked meanwhile.
        let lock = dir.join("t.jsonl.lock");
        if let Ok(text) = fs::read_to_string(&lock) {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => {
                    assert_eq!(v["pid"], Value::from(pid), "{text}");
                    assert!(v["createdAt"].is_string(), "{text}");
                }
                Err(_) => {
                    let out = clawkeeper(&dir, COMMANDS[k]).output().unwrap();
                    assert_eq!(
                        out.status.code(),
                        Some(4),
                        "a fresh empty lock is respected"
                    );
                    let old = std::time::SystemTime::now() - Duration::from_secs(120);
                    fs::File::options()
                        .write(true)
                        .open(&lock)
                        .unwrap()
                        .set_modified(old)
                        .unwrap();
                    empty_locks += 1;
                }
            }
        }
        // The next run completes the job whatever was left behind.
        let out = clawkeeper(&dir, COMMANDS[k]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "run after kill {i}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            fs::read(dir.join("t.jsonl")).unwrap() == *want,
            "run after kill {i} gave a different result"
        );
        let left = listing(&dir);
        let lock_of_dead = left == ["t.jsonl", "t.jsonl.lock"] && is_new;
        assert!(
            left == ["t.jsonl"] || lock_of_dead,
            "garbage after kill {i}: {left:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "{iters} kills: {olds} left the original, {news} the finished result, {empty_locks} an empty lock"
    );
}

/// A state dir with a large store: `n` entries with a bulky field, two thirds of them stale
/// (pruned, their transcripts archived) and the rest fresh.
fn big_store(root: &Path, n: usize) -> Vec<String> {
    let sessions = root.join("state/agents/main/sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::create_dir_all(root.join("home")).unwrap();
    fs::write(
        root.join("openclaw.json"),
        "{ session: { maintenance: { maxEntries: 100000 } } }",
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let blob = "s".repeat(8 * 1024);
    let mut members = Vec::new();
    let mut sids = Vec::new();
    for i in 0..n {
        let sid = format!("sess-{i:05}");
        let age = if i % 3 == 0 {
            3_600_000
        } else {
            90 * 86_400_000
        };
        members.push(format!(
            "\"agent:main:telegram:direct:{i}\": {{\"sessionId\": \"{sid}\", \"updatedAt\": {}, \"customData\": {{\"note\": \"{blob}\"}}}}",
            now - age - i as u64
        ));
        fs::write(
            sessions.join(format!("{sid}.jsonl")),
            format!("{{\"type\":\"session\",\"version\":3,\"id\":\"{sid}\"}}\n"),
        )
        .unwrap();
        sids.push(sid);
    }
    fs::write(
        sessions.join("sessions.json"),
        format!("{{{}}}", members.join(", ")),
    )
    .unwrap();
    sids
}

fn cleanup(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
    c.args(["cleanup", "--enforce", "--json"])
        .current_dir(root)
        .env("OPENCLAW_STATE_DIR", root.join("state"))
        .env("OPENCLAW_CONFIG_PATH", root.join("openclaw.json"))
        .env("HOME", root.join("home"))
        .env_remove("OPENCLAW_HOME");
    c
}

/// Transcript name → bytes, with archive timestamps blanked (`<sid>.jsonl.deleted.TS`).
fn transcripts(sessions: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(sessions)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().contains(".jsonl"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = match name.find(".deleted.") {
                Some(i) => format!("{}.deleted.TS", &name[..i]),
                None => name,
            };
            (name, fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn kill_9_during_cleanup_leaves_every_file_old_or_new() {
    let iters = env_num("CLAWKEEPER_CRASH_ITERS", 20) / 2;
    let n = env_num("CLAWKEEPER_CRASH_STORE_ENTRIES", 1200) as usize;
    let scratch = tempfile::tempdir().unwrap();
    let pristine = scratch.path().join("pristine");
    let sids = big_store(&pristine, n);
    let sessions_of = |root: &Path| root.join("state/agents/main/sessions");
    let original_store = fs::read(sessions_of(&pristine).join("sessions.json")).unwrap();
    let copy = |to: &Path| {
        let st = Command::new("cp")
            .arg("-a")
            .arg(&pristine)
            .arg(to)
            .status()
            .unwrap();
        assert!(st.success());
    };
    let reference = scratch.path().join("reference");
    copy(&reference);
    let took = timed_success(cleanup(&reference));
    eprintln!(
        "uninterrupted cleanup of {n} entries ({} MB): {took:?}",
        original_store.len() >> 20
    );
    let want_store = fs::read(sessions_of(&reference).join("sessions.json")).unwrap();
    let want_files = transcripts(&sessions_of(&reference));
    assert!(
        want_store.len() < original_store.len() / 2,
        "the reference run pruned too little"
    );
    let mut seed = 0xc1ea_u64 ^ u64::from(std::process::id());
    let (mut olds, mut news, mut partial) = (0, 0, 0);
    for i in 0..iters {
        let root = scratch.path().join(format!("run{i}"));
        copy(&root);
        let (pid, delay) = run_and_kill(cleanup(&root), &mut seed, took);
        let sessions = sessions_of(&root);
        let store = fs::read(sessions.join("sessions.json")).unwrap();
        assert!(
            store == original_store || store == want_store,
            "kill {i} after {delay:?}: sessions.json is neither the original nor the result"
        );
        // Every transcript is where it was or archived, with its bytes intact; none is lost.
        let files = transcripts(&sessions);
        for sid in &sids {
            let here = files.get(&format!("{sid}.jsonl"));
            let archived = files.get(&format!("{sid}.jsonl.deleted.TS"));
            let body =
                format!("{{\"type\":\"session\",\"version\":3,\"id\":\"{sid}\"}}\n").into_bytes();
            assert!(
                (here == Some(&body)) ^ (archived == Some(&body)),
                "kill {i}: transcript {sid} is lost, duplicated or damaged"
            );
        }
        match (store == want_store, files == want_files) {
            (true, true) => news += 1,
            (false, _) if files == transcripts(&sessions_of(&pristine)) => olds += 1,
            _ => partial += 1,
        }
        let out = cleanup(&root).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "run after kill {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            fs::read(sessions.join("sessions.json")).unwrap() == want_store,
            "run after kill {i}: different store"
        );
        assert_eq!(
            transcripts(&sessions),
            want_files,
            "run after kill {i}: different files"
        );
        // Anything else left is the killed run's store temp, which OpenClaw's own sweep (and
        // ours) removes once it is old; nothing reads it.
        let extra: Vec<String> = listing(&sessions)
            .into_iter()
            .filter(|n| !n.contains(".jsonl") && n != "sessions.json")
            .collect();
        for name in &extra {
            assert!(
                clawkeeper::fsutil::temps::temp_pid("sessions.json", name) == Some(pid),
                "garbage after kill {i}: {name}"
            );
        }
        fs::remove_dir_all(&root).unwrap();
    }
    eprintln!(
        "{iters} kills: {olds} before any change, {news} after all, {partial} in between (each file old or new)"
    );
}
