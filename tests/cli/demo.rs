//! The demo state dir (`fixtures/demo`): its transcripts load in the reference runtime, the
//! reference's cleanup finds work for every step on it, so the demo stays worth running, and
//! the README's first command, run as written on a fresh copy, prints what the reference
//! prints. Every run happens on a copy; the committed fixture is checked to be untouched.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::textcmp::same_text;
use crate::util::{
    EXTENDED, Loaded, STABLE, TestEnv, copy_dir, line_diff, oracle_node, oracle_of, oracle_path,
    same_loads, snapshot,
};

pub fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo")
}

/// Parse `YYYY-MM-DDTHH:MM:SSZ` into epoch milliseconds.
fn parse_utc(s: &str) -> i64 {
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + n(11, 13)) * 60 + n(14, 16)) * 60_000 + n(17, 19) * 1000
}

/// The mtimes `mtimes.tsv` gives the files of the demo's sessions directory, by name.
pub fn fixture_mtimes() -> Vec<(String, SystemTime)> {
    let manifest = std::fs::read_to_string(demo_dir().join("mtimes.tsv")).unwrap();
    manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (name, when) = line.split_once('\t').expect("name<TAB>mtime");
            let mtime = UNIX_EPOCH + Duration::from_millis(parse_utc(when) as u64);
            (name.to_string(), mtime)
        })
        .collect()
}

/// Give each file of `sessions` that `keep` selects the mtime `mtimes.tsv` lists for it.
pub fn restore_mtimes(sessions: &Path, keep: impl Fn(&str) -> bool) {
    for (name, mtime) in fixture_mtimes().into_iter().filter(|(n, _)| keep(n)) {
        let f = std::fs::File::options()
            .write(true)
            .open(sessions.join(&name))
            .unwrap();
        f.set_modified(mtime).unwrap();
    }
}

/// Copy the demo into a temp dir and restore the mtimes listed in `mtimes.tsv`.
pub fn demo_copy(env: &TestEnv) -> PathBuf {
    let dst = env.dir().join("demo");
    copy_dir(&demo_dir(), &dst);
    restore_mtimes(&dst.join("agents/main/sessions"), |_| true);
    dst
}

fn reference_cleanup(oracle: &Path, state: &Path, extra: &[&str]) -> Value {
    let store = state.join("agents/main/sessions/sessions.json");
    let out = Command::new(oracle)
        .args([
            "sessions",
            "cleanup",
            "--store",
            store.to_str().unwrap(),
            "--json",
        ])
        .args(extra)
        .env("OPENCLAW_CONFIG_PATH", state.join("openclaw.json"))
        .env("OPENCLAW_STATE_DIR", state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("reference prints JSON")
}

fn counter(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

#[test]
fn demo_mtimes_manifest_lists_every_file() {
    let sessions = demo_dir().join("agents/main/sessions");
    let listed: Vec<String> = fixture_mtimes().into_iter().map(|(n, _)| n).collect();
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(listed.contains(&name), "{name} has no line in mtimes.tsv");
    }
    assert_eq!(parse_utc("2026-03-02T09:00:05Z"), 1_772_442_005_000);
}

/// Every demo transcript loads in 2026.7.1 and in 2026.7.35 (from copies: the runtime may
/// rewrite what it opens), and both give the same leaf and context.
#[test]
fn demo_transcripts_load_in_reference_runtime() {
    let sessions = demo_dir().join("agents/main/sessions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.contains(".jsonl") && !name.contains(".trajectory")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 20, "only {} transcripts found", files.len());
    let mut first: Option<Vec<Loaded>> = None;
    for release in [STABLE, EXTENDED] {
        let Some(o) = oracle_of(release) else {
            continue;
        };
        let loaded = o.load_all(&files);
        for (l, f) in loaded.iter().zip(&files) {
            assert!(
                l.ok,
                "{}: {} does not load: {:?}",
                release.version,
                f.display(),
                l.error
            );
        }
        match &first {
            None => first = Some(loaded),
            Some(want) => same_loads(want, &loaded, &files, release),
        }
    }
}

#[test]
fn demo_gives_the_reference_work_for_every_step() {
    let Some(oracle) = oracle_path("demo_gives_the_reference_work_for_every_step") else {
        return;
    };
    let before = snapshot(&demo_dir(), &|_| false);
    let env = TestEnv::new();
    let state = demo_copy(&env);

    let plain = reference_cleanup(&oracle, &state, &["--dry-run"]);
    for path in [
        &["modelRunPruned"][..],
        &["pruned"],
        &["capped"],
        &["unreferencedArtifacts", "removedFiles"],
        &["diskBudget", "removedFiles"],
        &["diskBudget", "removedEntries"],
    ] {
        assert!(
            counter(&plain, path) > 0,
            "{} is 0 on the demo: {plain:#}",
            path.join(".")
        );
    }
    let fixes = reference_cleanup(
        &oracle,
        &state,
        &["--dry-run", "--fix-missing", "--fix-dm-scope"],
    );
    for key in ["missing", "dmScopeRetired", "repaired"] {
        assert!(
            counter(&fixes, &[key]) > 0,
            "{key} is 0 on the demo: {fixes:#}"
        );
    }
    // Applying on the copy removes entries and files there, and never in the fixture.
    let applied = reference_cleanup(&oracle, &state, &["--enforce"]);
    assert_eq!(applied["applied"], Value::Bool(true));
    let store: Value = serde_json::from_slice(
        &std::fs::read(state.join("agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    let kept = store.as_object().unwrap().len() as u64;
    assert_eq!(counter(&applied, &["appliedCount"]), kept);
    assert!(kept < counter(&applied, &["beforeCount"]), "{applied:#}");
    assert_eq!(
        snapshot(&demo_dir(), &|_| false),
        before,
        "the committed fixture changed"
    );
}

/// The README's first command, as written: the arguments after `cargo run --release --`.
fn readme_first_command() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("\n## Quick start\n")
        .nth(1)
        .expect("README has a \"Quick start\" section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh code block");
    let first = block.lines().next().expect("a first command");
    let args = first
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("first command is not `cargo run --release -- …`: {first}"));
    args.split_whitespace().map(str::to_string).collect()
}

/// A fresh clone: the demo with every file's mtime set to now, as a checkout leaves it.
fn fresh_checkout(env: &TestEnv) -> PathBuf {
    let repo = env.dir().join("clone");
    copy_dir(&demo_dir(), &repo.join("fixtures/demo"));
    fn touch_all(dir: &Path) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                touch_all(&path);
            } else {
                let f = std::fs::File::options().write(true).open(&path).unwrap();
                f.set_modified(std::time::SystemTime::now()).unwrap();
            }
        }
    }
    touch_all(&repo);
    repo
}

#[test]
fn readme_first_command_matches_the_reference_on_a_fresh_clone() {
    let args = readme_first_command();
    assert_eq!(&args[..2], ["cleanup", "--dry-run"], "{args:?}");
    let config_at = args
        .iter()
        .position(|a| a == "--config")
        .expect("the first command reads the demo's openclaw.json (--config)");
    let Some(oracle) = oracle_path("readme_first_command_matches_the_reference_on_a_fresh_clone")
    else {
        return;
    };
    let before = snapshot(&demo_dir(), &|_| false);
    let env = TestEnv::new();
    let repo = fresh_checkout(&env);
    let home = env.dir().join("newcomer-home");
    std::fs::create_dir_all(&home).unwrap();
    let clean = |cmd: &mut Command| {
        cmd.current_dir(&repo)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .env_remove("OPENCLAW_STATE_DIR")
            .env_remove("OPENCLAW_CONFIG_PATH")
            .env_remove("OPENCLAW_HOME")
            .env_remove("OPENCLAW_LOG_LEVEL");
    };
    let mut ours = Command::new(crate::util::clawkeeper_bin());
    ours.args(&args);
    clean(&mut ours);
    let ours = ours.output().unwrap();
    // The reference has no --config: the same file goes in OPENCLAW_CONFIG_PATH.
    let mut ref_args = args.clone();
    let config = ref_args.remove(config_at + 1);
    ref_args.remove(config_at);
    let mut theirs = Command::new(oracle_node(&oracle));
    theirs
        .arg(
            oracle
                .parent()
                .unwrap()
                .join("node_modules/openclaw/openclaw.mjs"),
        )
        .arg("sessions")
        .args(&ref_args);
    clean(&mut theirs);
    theirs.env("OPENCLAW_CONFIG_PATH", repo.join(&config));
    let theirs = theirs.output().unwrap();
    assert!(
        theirs.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    assert_eq!(
        ours.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let (want, got) = (
        String::from_utf8_lossy(&theirs.stdout).into_owned(),
        String::from_utf8_lossy(&ours.stdout).into_owned(),
    );
    assert!(same_text(&want, &got), "{}", line_diff(&want, &got));
    // The demo's own config is in effect: the plan prunes, caps and enforces the budget.
    for line in [
        "Would prune stale model-run probes: 1",
        "Would prune stale: 2",
        "Would cap overflow: 6",
        "Would enforce disk budget: ",
    ] {
        assert!(got.contains(line), "{line:?} missing from:\n{got}");
    }
    assert_eq!(
        snapshot(&demo_dir(), &|_| false),
        before,
        "the committed fixture changed"
    );
}
