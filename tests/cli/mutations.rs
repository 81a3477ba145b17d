//! Generated mutations of a whole state dir (the demo's store and transcripts) through every
//! command, previews and `--enforce`: byte flips, truncations, invalid UTF-8, lone surrogates,
//! huge numbers, deep nesting, wrong types, duplicated lines, FIFOs and symlinks in place of
//! files. For every run: no panic and no signal (an exit code of the table), a refusal (3, 5)
//! leaves every file byte-identical, nothing outside the sessions directory ever changes, and
//! every transcript the reference runtime loaded before the `--enforce` runs still loads after
//! them. `CLAWKEEPER_MUTATION_CASES=N` runs more seeds (default 12),
//! `CLAWKEEPER_MUTATION_SEED=S` one seed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::generator::Rng;
use crate::util::{Snap, TestEnv, copy_dir, oracle, snapshot, stderr};

/// Every command, previews first: an `--enforce` run changes what the next one sees.
const RUNS: &[&[&str]] = &[
    &["inspect", "--json"],
    &["cleanup", "--dry-run", "--json"],
    &["prune-noreply", "--json"],
    &["strip-images", "--json"],
    &["prune-cache-ttl", "--json"],
    &["compact", "--json"],
    &["vacuum", "--json"],
    &["prune-noreply", "--enforce", "--json"],
    &["strip-images", "--enforce", "--json"],
    &["prune-cache-ttl", "--enforce", "--json"],
    &["compact", "--enforce", "--json"],
    &["cleanup", "--enforce", "--json"],
];

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo")
}

/// One mutation of `bytes`, and what it was.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) -> String {
    let at = |rng: &mut Rng, len: usize| if len == 0 { 0 } else { rng.below(len) };
    match rng.below(9) {
        0 => {
            let i = at(rng, bytes.len());
            if let Some(b) = bytes.get_mut(i) {
                *b ^= 1 << rng.below(8);
            }
            format!("bit flip at {i}")
        }
        1 => {
            let n = at(rng, bytes.len());
            bytes.truncate(n);
            format!("truncated to {n}")
        }
        2 => {
            let i = at(rng, bytes.len());
            bytes.splice(i..i, [0xff, 0xfe, 0xc3]);
            format!("invalid UTF-8 at {i}")
        }
        3 => insert_after_quote(rng, bytes, b"\\ud800", "lone surrogate"),
        4 => replace_number(rng, bytes),
        5 => {
            let deep = format!("{}0{}", "[".repeat(300), "]".repeat(300));
            replace_value_of(
                bytes,
                b"\"content\":",
                deep.as_bytes(),
                "deep nesting in content",
            )
        }
        6 => {
            let pick = rng.below(3);
            let (key, with) = [
                (&b"\"updatedAt\":"[..], &b"\"yesterday\""[..]),
                (b"\"parentId\":", b"42"),
                (b"\"message\":", b"[1,2]"),
            ][pick];
            replace_value_of(bytes, key, with, "wrong type")
        }
        7 => {
            let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            let i = at(rng, lines.len());
            let line = lines[i].to_vec();
            let mut out = Vec::new();
            for (j, l) in lines.iter().enumerate() {
                out.extend_from_slice(l);
                if j + 1 < lines.len() {
                    out.push(b'\n');
                }
                if j == i {
                    out.extend_from_slice(&line);
                    out.push(b'\n');
                }
            }
            *bytes = out;
            format!("line {} duplicated", i + 1)
        }
        _ => {
            let i = at(rng, bytes.len());
            bytes.splice(i..i, b"\n{\"type\":\"message\",\"id\":".iter().copied());
            format!("torn line inserted at {i}")
        }
    }
}

fn insert_after_quote(rng: &mut Rng, bytes: &mut Vec<u8>, what: &[u8], label: &str) -> String {
    let quotes: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'"')
        .map(|(i, _)| i + 1)
        .collect();
    if quotes.is_empty() {
        return "nothing to mutate".into();
    }
    let i = quotes[rng.below(quotes.len())];
    bytes.splice(i..i, what.iter().copied());
    format!("{label} at {i}")
}

fn replace_number(rng: &mut Rng, bytes: &mut Vec<u8>) -> String {
    let starts: Vec<usize> = (1..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit() && bytes[i - 1] == b':')
        .collect();
    if starts.is_empty() {
        return "nothing to mutate".into();
    }
    let i = starts[rng.below(starts.len())];
    let end = (i..bytes.len())
        .find(|&j| !(bytes[j].is_ascii_digit() || b".eE+-".contains(&bytes[j])))
        .unwrap_or(bytes.len());
    let choices: [&[u8]; 4] = [
        b"1e999",
        b"123456789012345678901234567890",
        b"-0",
        b"9007199254740993",
    ];
    let with = choices[rng.below(choices.len())];
    bytes.splice(i..end, with.iter().copied());
    format!(
        "number at {i} replaced by {}",
        String::from_utf8_lossy(with)
    )
}

fn replace_value_of(bytes: &mut Vec<u8>, key: &[u8], with: &[u8], label: &str) -> String {
    let Some(k) = bytes.windows(key.len()).position(|w| w == key) else {
        return "nothing to mutate".into();
    };
    let i = k + key.len();
    // The value runs to the next `,` or `}` outside strings (good enough to corrupt it).
    let mut j = i;
    let mut in_str = false;
    let mut depth = 0i32;
    while j < bytes.len() {
        match bytes[j] {
            b'"' if j == 0 || bytes[j - 1] != b'\\' => in_str = !in_str,
            b'[' | b'{' if !in_str => depth += 1,
            b']' | b'}' if !in_str && depth > 0 => depth -= 1,
            b',' | b'}' | b'\n' if !in_str && depth == 0 => break,
            _ => {}
        }
        j += 1;
    }
    bytes.splice(i..j, with.iter().copied());
    format!("{label} at {i}")
}

/// Regular `.jsonl` transcripts of the sessions directory.
fn transcripts(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
        })
        .collect();
    out.sort();
    out
}

/// The transcripts (relative to `sessions`) that a transcript command's `--json` report lists
/// as refused; none for another command's report.
fn refused_transcripts(stdout: &[u8], sessions: &Path) -> Vec<String> {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(stdout) else {
        return Vec::new();
    };
    let Some(rows) = doc["transcripts"].as_array() else {
        return Vec::new();
    };
    rows.iter()
        .filter(|r| r["status"] == "refused")
        .filter_map(|r| r["path"].as_str())
        .filter_map(|p| Path::new(p).strip_prefix(sessions).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

fn run_case(seed: u64, loads: bool) {
    let mut rng = Rng::new(seed);
    let env = TestEnv::new();
    fs::remove_dir_all(env.state()).unwrap();
    copy_dir(&demo(), &env.state());
    fs::copy(demo().join("openclaw.json"), env.config_path()).unwrap();
    let sessions = env.sessions_dir("main");
    let mut what = Vec::new();
    // One to three mutations, each of the store or of a transcript.
    for _ in 0..1 + rng.below(3) {
        let files = transcripts(&sessions);
        let target = if rng.chance(30) || files.is_empty() {
            sessions.join("sessions.json")
        } else {
            rng.pick(&files).clone()
        };
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        match rng.below(12) {
            0 if name != "sessions.json" => {
                fs::remove_file(&target).unwrap();
                let st = std::process::Command::new("mkfifo").arg(&target).status();
                assert!(st.is_ok_and(|s| s.success()), "mkfifo");
                what.push(format!("{name}: a FIFO"));
            }
            1 => {
                let outside = env.work().join(format!("outside-{name}"));
                fs::rename(&target, &outside).unwrap();
                std::os::unix::fs::symlink(&outside, &target).unwrap();
                what.push(format!("{name}: a symlink to a file outside"));
            }
            _ => {
                let Ok(mut bytes) = fs::read(&target) else {
                    continue;
                };
                let m = mutate(&mut rng, &mut bytes);
                fs::write(&target, &bytes).unwrap();
                what.push(format!("{name}: {m}"));
            }
        }
    }
    let case = format!("seed {seed}: {}", what.join("; "));
    let skip_none = |_: &str| false;
    let outside = |root: &Path| -> BTreeMap<String, Snap> {
        snapshot(root, &|rel: &str| {
            rel.starts_with("state/agents/main/sessions")
        })
    };
    let runtime = if loads { oracle() } else { None };
    let before_loads = runtime.as_ref().map(|o| {
        let files = transcripts(&sessions);
        let loaded = o.load_all(&files);
        (files, loaded)
    });
    let root = env.root();
    let outside_before = outside(&root);
    for args in RUNS {
        let before = snapshot(&sessions, &skip_none);
        let out = env.run(args);
        let code = out.status.code();
        let err = stderr(&out);
        assert!(
            matches!(code, Some(0 | 1 | 3 | 4 | 5)),
            "{case}: `{}` ended with {:?}: {err}",
            args.join(" "),
            out.status
        );
        assert!(
            !err.contains("panicked"),
            "{case}: `{}`: {err}",
            args.join(" ")
        );
        if matches!(code, Some(3 | 5)) {
            // What was refused is left byte-identical: the transcripts a transcript command
            // refused (it edits the others), or else the whole directory. Lock files the run
            // took and released leave nothing behind either.
            let after = snapshot(&sessions, &skip_none);
            let refused = refused_transcripts(&out.stdout, &sessions);
            let what = format!("{case}: `{}` refused (exit {code:?})", args.join(" "));
            if refused.is_empty() {
                assert!(after == before, "{what} but changed files: {err}");
            }
            for rel in refused {
                assert!(
                    after.get(&rel) == before.get(&rel),
                    "{what} but changed {rel}: {err}"
                );
            }
        }
        assert!(
            outside(&root) == outside_before,
            "{case}: `{}` changed something outside the sessions directory",
            args.join(" ")
        );
    }
    if let (Some(o), Some((files, loaded))) = (&runtime, before_loads) {
        let still: Vec<(PathBuf, bool)> = files
            .iter()
            .zip(&loaded)
            .filter(|(p, _)| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .map(|(p, l)| (p.clone(), l.ok))
            .collect();
        let paths: Vec<PathBuf> = still.iter().map(|(p, _)| p.clone()).collect();
        let after = o.load_all(&paths);
        for ((p, was_ok), now) in still.iter().zip(&after) {
            assert!(
                !was_ok || now.ok,
                "{case}: {} loaded before the --enforce runs and not after: {:?}",
                p.display(),
                now.error
            );
        }
    }
}

#[test]
fn mutated_state_dirs_never_panic_never_change_files_on_refusal_and_stay_loadable() {
    if let Some(seed) = std::env::var("CLAWKEEPER_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run_case(seed, true);
        return;
    }
    let n: u64 = std::env::var("CLAWKEEPER_MUTATION_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    for seed in 1..=n {
        // The runtime loads every third case (each load is a Node start-up).
        run_case(seed, seed % 3 == 1);
    }
}
