//! Crash safety of batched `--enforce` runs: `kill -9` at random moments while a store of
//! hundreds of transcripts is rewritten in batches (every file of a batch is locked and
//! written to a temp, then every temp is made durable, then each is renamed into place).
//!
//! After each kill, every transcript must be byte-identical to its original or to the result
//! of an uninterrupted run; whatever the killed run left (temps, locks) must not stop the next
//! run, which must reach exactly the uninterrupted result and remove every temp, leaving at
//! most the dead run's locks on files it had already finished (which every OpenClaw writer
//! reclaims).
//!
//! `CLAWKEEPER_CRASH_ITERS` sets the number of kills (default 20, half of them here),
//! `CLAWKEEPER_CRASH_FILES` the number of transcripts (default 300: three batches).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::crash::{env_num, run_and_kill, timed_success};
use crate::util::run_under;

/// A transcript of a few turns, each with an image of `image_kb` KiB and a run of silent
/// replies, so both commands rewrite it; ids are unique per `file`.
fn transcript(file: usize, turns: usize, image_kb: usize) -> Vec<u8> {
    let image = "QUJD".repeat(image_kb * 256);
    let mut lines = vec![format!(
        r#"{{"type":"session","version":3,"id":"s{file}","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}}"#
    )];
    let mut parent = "null".to_owned();
    let mut n = 0;
    let next = |n: &mut usize| {
        *n += 1;
        format!("f{file}e{n}")
    };
    for _ in 0..turns {
        let u = next(&mut n);
        lines.push(format!(
            r#"{{"type":"message","id":"{u}","parentId":{parent},"timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"look"}},{{"type":"image","data":"{image}","mimeType":"image/png"}}],"timestamp":{n}}}}}"#
        ));
        let a = next(&mut n);
        lines.push(format!(
            r#"{{"type":"message","id":"{a}","parentId":"{u}","timestamp":"2026-03-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"seen"}}],"stopReason":"stop","timestamp":{n}}}}}"#
        ));
        let mut last = a;
        for _ in 0..3 {
            let s = next(&mut n);
            lines.push(format!(
                r#"{{"type":"message","id":"{s}","parentId":"{last}","timestamp":"2026-03-01T00:00:03.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"NO_REPLY"}}],"stopReason":"stop","timestamp":{n}}}}}"#
            ));
            last = s;
        }
        parent = format!("\"{last}\"");
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out.into_bytes()
}

/// The transcripts of the store: `s<i>.jsonl` → bytes.
fn originals(files: usize) -> BTreeMap<String, Vec<u8>> {
    (0..files)
        .map(|i| {
            let name = format!("s{i}.jsonl");
            (name, transcript(i, 4 + i % 5, 4 + (i * 7) % 40))
        })
        .collect()
}

/// A sessions directory with a store naming every transcript.
fn write_store(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    fs::create_dir_all(dir).unwrap();
    let now = 1_800_000_000_000u64;
    let entries: Vec<String> = files
        .keys()
        .map(|name| {
            let sid = name.trim_end_matches(".jsonl");
            format!(r#""agent:main:{sid}": {{"sessionId": "{sid}", "updatedAt": {now}}}"#)
        })
        .collect();
    fs::write(
        dir.join("sessions.json"),
        format!("{{{}}}", entries.join(",\n")),
    )
    .unwrap();
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

const COMMANDS: [&[&str]; 2] = [&["prune-noreply"], &["strip-images", "--keep-turns", "1"]];

fn clawkeeper(dir: &Path, cmd: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
    c.args(cmd)
        .args(["--store", "sessions.json", "--enforce", "--json"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    c
}

/// Every file of `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, fs::read(e.path()).unwrap())
        })
        .collect()
}

/// A lock the killed run `pid` left on `name`: an empty one (killed between creating and
/// filling it) is aged past the runtime's grace, as any writer would see it later.
fn check_lock(dir: &Path, name: &str, pid: u32) {
    let text = fs::read_to_string(dir.join(name)).unwrap();
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => assert_eq!(v["pid"], Value::from(pid), "{name}: {text}"),
        Err(_) => {
            assert!(text.is_empty(), "{name}: {text}");
            let old = std::time::SystemTime::now() - Duration::from_secs(120);
            fs::File::options()
                .write(true)
                .open(dir.join(name))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
}

#[test]
fn kill_9_during_batches_of_hundreds_of_files_leaves_each_file_old_or_new() {
    let iters = env_num("CLAWKEEPER_CRASH_ITERS", 20).div_ceil(2);
    let files = env_num("CLAWKEEPER_CRASH_FILES", 300) as usize;
    let originals = originals(files);
    let scratch = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for (k, cmd) in COMMANDS.iter().enumerate() {
        let dir = scratch.path().join(format!("ref{k}"));
        write_store(&dir, &originals);
        let took = timed_success(clawkeeper(&dir, cmd));
        let result = contents(&dir);
        let changed = originals.iter().filter(|(n, b)| result[*n] != **b).count();
        assert_eq!(changed, files, "{}: every transcript is rewritten", cmd[0]);
        assert_eq!(result.len(), files + 1, "{}: {:?}", cmd[0], result.keys());
        eprintln!("uninterrupted {}: {took:?}", cmd[0]);
        expected.push((result, took));
    }
    let mut seed = 0xba7c_u64 ^ u64::from(std::process::id());
    let (mut mixed, mut temps_left, mut locks_left) = (0, 0, 0);
    for i in 0..iters {
        let k = (i % 2) as usize;
        let (want, took) = &expected[k];
        let dir = scratch.path().join(format!("run{i}"));
        write_store(&dir, &originals);
        let (pid, delay) = run_and_kill(clawkeeper(&dir, COMMANDS[k]), &mut seed, *took);
        let after = contents(&dir);
        let (mut olds, mut news) = (0, 0);
        for (name, bytes) in &after {
            if let Some(original) = originals.get(name) {
                if bytes == original {
                    olds += 1;
                } else {
                    assert_eq!(
                        bytes, &want[name],
                        "kill {i} after {delay:?}: {name} is neither the original nor the result"
                    );
                    news += 1;
                }
            } else if name.ends_with(".lock") {
                check_lock(&dir, name, pid);
                locks_left += 1;
            } else if name.ends_with(".tmp") {
                temps_left += 1;
            } else {
                assert_eq!(name, "sessions.json", "kill {i}: unexpected {name}");
                assert_eq!(bytes, &want[name], "kill {i}: the store changed");
            }
        }
        assert_eq!(olds + news, files, "kill {i}: a transcript went missing");
        mixed += usize::from(olds > 0 && news > 0);
        // The next run completes the job whatever was left behind.
        let out = clawkeeper(&dir, COMMANDS[k]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "run after kill {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (name, bytes) in contents(&dir) {
            match want.get(&name) {
                Some(w) => assert!(bytes == *w, "run after kill {i}: {name} differs"),
                // Only a lock of the dead run on a file it had finished may stay.
                None => {
                    let file = name.trim_end_matches(".lock");
                    assert!(
                        name.ends_with(".lock") && after[file] != originals[file],
                        "run after kill {i} left {name}"
                    );
                }
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "{iters} kills: {mixed} stopped between files (some old, some new); \
         {temps_left} temps and {locks_left} locks were left and handled by the next run"
    );
}

/// The order of the durable writes, seen from outside with `strace`: in each batch every temp
/// is fsynced before the first of them is renamed over its original, and the directory is
/// fsynced once after the batch's renames (not once per file). `strace -y` names each fd's
/// file, so the trace says which temp each fsync was for. Needs `strace` (CI installs it).
#[test]
fn every_temp_of_a_batch_is_durable_before_its_first_rename() {
    let files = 300; // three batches
    let Some(trace) = strace_run(files) else {
        return;
    };
    let events = durability_events(&trace);
    let (mut synced, mut renamed) = (BTreeSet::new(), BTreeSet::new());
    let mut batches = 0;
    let mut renaming = false;
    for e in &events {
        match e {
            Event::SyncTemp(t) => {
                assert!(
                    !renaming,
                    "{t} fsynced after a rename of its batch: {events:?}"
                );
                synced.insert(t.clone());
            }
            Event::Rename(t) => {
                assert!(synced.contains(t), "{t} renamed before it was fsynced");
                renaming = true;
                renamed.insert(t.clone());
            }
            Event::SyncDir => {
                if renaming {
                    batches += 1;
                }
                renaming = false;
            }
        }
    }
    assert!(
        !renaming,
        "the last renames were never followed by a directory fsync"
    );
    assert_eq!(renamed.len(), files, "every transcript was replaced once");
    assert_eq!(synced, renamed, "every fsynced temp was renamed");
    assert_eq!(batches, 3, "one directory fsync per batch: {events:?}");
}

/// A durability step of a traced run: a temp file fsynced, a temp renamed over its original
/// (each named by the temp's file name), or the sessions directory fsynced.
#[derive(Debug)]
enum Event {
    SyncTemp(String),
    Rename(String),
    SyncDir,
}

/// `prune-noreply --enforce` over a store of `files` transcripts, under `strace -f -y`: the
/// trace of its fsync and rename calls (`None`, announced, when `strace` is not installed;
/// a failure under `CLAWKEEPER_REQUIRE_ORACLE`, which CI sets).
fn strace_run(files: usize) -> Option<String> {
    let originals = originals(files);
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("sessions");
    write_store(&dir, &originals);
    let out_file = scratch.path().join("trace");
    let run = clawkeeper(&dir, COMMANDS[0]);
    let trace = "trace=fsync,fdatasync,rename,renameat,renameat2";
    let args = ["-f", "-y", "-qq", "-e", trace].map(std::ffi::OsStr::new);
    let args = [&args[..], &["-o".as_ref(), out_file.as_os_str()]].concat();
    let out = run_under("strace", &args, &run)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(fs::read_to_string(&out_file).unwrap())
}

/// The durability steps of a trace, in the order they completed (an fsync that another
/// thread's call interrupted in the trace counts when it resumed) or started (a rename).
fn durability_events(trace: &str) -> Vec<Event> {
    let mut pending: BTreeMap<String, String> = BTreeMap::new();
    let mut events = Vec::new();
    for line in trace.lines() {
        let (pid, call) = line.split_once(' ').unwrap_or(("", line));
        let call = call.trim_start();
        let finished = if let Some(start) = call.strip_suffix(" <unfinished ...>") {
            pending.insert(pid.to_owned(), start.to_owned());
            continue;
        } else if call.starts_with("<... ") {
            match pending.remove(pid) {
                Some(start) => start,
                None => continue,
            }
        } else {
            call.to_owned()
        };
        if finished.starts_with("fsync(") || finished.starts_with("fdatasync(") {
            // fsync(5</path/name>): the path between `<` and the last `>`.
            let path = finished
                .split_once('<')
                .and_then(|(_, rest)| rest.rsplit_once('>'))
                .map(|(p, _)| p)
                .unwrap_or_default();
            if path.ends_with(".tmp") {
                let name = path.rsplit('/').next().unwrap_or(path).to_owned();
                events.push(Event::SyncTemp(name));
            } else if path.ends_with("/sessions") {
                events.push(Event::SyncDir);
            }
        } else if finished.starts_with("rename") {
            // renameat(3</dir>, "name.tmp", 3</dir>, "name"): the first quoted name.
            if let Some(name) = finished.split('"').nth(1)
                && name.ends_with(".tmp")
            {
                events.push(Event::Rename(name.rsplit('/').next().unwrap().to_owned()));
            }
        }
    }
    events
}
