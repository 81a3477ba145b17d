//! The demo state dir (`fixtures/demo`): its transcripts load in the reference runtime, and the
//! reference's cleanup finds work for every step on it, so the demo stays worth running. Every
//! run happens on a copy; the committed fixture is checked to be untouched afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;

use crate::util::{TestEnv, copy_dir, oracle_node, oracle_path, session_context_script, snapshot};

fn demo_dir() -> PathBuf {
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

/// Copy the demo into a temp dir and restore the mtimes listed in `mtimes.tsv`.
pub fn demo_copy(env: &TestEnv) -> PathBuf {
    let dst = env.dir().join("demo");
    copy_dir(&demo_dir(), &dst);
    let sessions = dst.join("agents/main/sessions");
    let manifest = std::fs::read_to_string(demo_dir().join("mtimes.tsv")).unwrap();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, when) = line.split_once('\t').expect("name<TAB>mtime");
        let mtime = UNIX_EPOCH + Duration::from_millis(parse_utc(when) as u64);
        let f = std::fs::File::options()
            .write(true)
            .open(sessions.join(name))
            .unwrap();
        f.set_modified(mtime).unwrap();
    }
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
    let manifest = std::fs::read_to_string(demo_dir().join("mtimes.tsv")).unwrap();
    let listed: Vec<&str> = manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            listed.contains(&name.as_str()),
            "{name} has no line in mtimes.tsv"
        );
    }
    assert_eq!(parse_utc("2026-03-02T09:00:05Z"), 1_772_442_005_000);
}

#[test]
fn demo_transcripts_load_in_reference_runtime() {
    let Some(oracle) = oracle_path("demo_transcripts_load_in_reference_runtime") else {
        return;
    };
    let Some(script) = session_context_script() else {
        panic!("session-context.mjs not found next to the repository (../shared/oracle)");
    };
    let sessions = demo_dir().join("agents/main/sessions");
    let mut checked = 0;
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let transcript = name.contains(".jsonl") && !name.contains(".trajectory");
        if !transcript {
            continue;
        }
        let out = Command::new(oracle_node(&oracle))
            .arg(&script)
            .arg(oracle.parent().unwrap())
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} does not load: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], Value::Bool(true), "{name}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} transcripts found");
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
