//! Randomized parity suite: `clawkeeper cleanup` against the reference
//! `openclaw sessions cleanup` on generated state dirs, for two releases of the JSON line:
//! OpenClaw 2026.7.1 (the reference of record) and the extended-stable 2026.7.35, each on its
//! own seeds so that together they cover more stores.
//!
//! For each seed the generator builds one case, which is laid out twice under roots of equal
//! length (`<tmp>/r` for the reference, `<tmp>/k` for clawkeeper). Both programs get the same
//! flags: first `--dry-run --json`, then the apply run (`--enforce --json`, or `--json` alone to
//! follow the configured mode). Their stdout (with the root replaced by `<ROOT>`) and exit codes
//! must be identical, and so must the resulting trees: names (with the timestamps of newly
//! created `.deleted.<ts>` archives normalised), file modes and contents byte for byte.
//!
//! Environment: `CLAWKEEPER_PARITY_CASES=N` (default 24), `CLAWKEEPER_PARITY_FIRST=S` (first
//! seed, default 1), `CLAWKEEPER_PARITY_SEED=S` (just that seed), `CLAWKEEPER_PARITY_JOBS=J`
//! (parallel cases, default 2), `CLAWKEEPER_PARITY_BIN=PATH` (test another clawkeeper build),
//! `CLAWKEEPER_PARITY_KEEP=1` (keep the dirs of failing cases), `CLAWKEEPER_PARITY_SELF=1`
//! (compare the reference with itself: checks the suite's own normalisation and margins).
//! Against 2026.7.35 (`CLAWKEEPER_ORACLE_EXTENDED`): `CLAWKEEPER_PARITY_EXTENDED_CASES=N`
//! (default 12) seeds from `CLAWKEEPER_PARITY_EXTENDED_FIRST=S` (default 1001);
//! `CLAWKEEPER_PARITY_SEED` runs just that seed against both.
//!
//! The same reference runs also feed a coverage test that keeps the generator meaningful:
//! every counter of the reference's report must be non-zero for some seed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::storegen::{self, Case, ConfigVia};
use crate::textcmp::{dry_run_report, log_lines, same_text};
use crate::util::{
    EXTENDED, Release, STABLE, Snap, TestEnv, clawkeeper_bin, line_diff, oracle_node,
    oracle_path_of, snapshot,
};

/// Output of one program run.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// What one seed produced.
struct CaseResult {
    seed: u64,
    /// The reference's dry-run report, parsed (None when it did not print JSON).
    reference_dry: Option<Value>,
    /// Why the reference printed no JSON, when it did not.
    reference_note: Option<String>,
    /// Readable mismatch reports; empty when the programs agree (or clawkeeper was not run).
    mismatches: Vec<String>,
    args: String,
    /// Which of the generator's less common shapes this case has (see [`features`]).
    features: Vec<&'static str>,
}

struct Suite {
    results: Vec<CaseResult>,
    /// False when this build of clawkeeper has no `cleanup` yet.
    compared: bool,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The seeds to run against `release`: 1–24 against 2026.7.1, 1001–1012 against 2026.7.35.
fn seeds(release: Release) -> Vec<u64> {
    if let Some(s) = env_u64("CLAWKEEPER_PARITY_SEED") {
        return vec![s];
    }
    let (n, first) = if release.version == STABLE.version {
        (
            env_u64("CLAWKEEPER_PARITY_CASES").unwrap_or(24),
            env_u64("CLAWKEEPER_PARITY_FIRST").unwrap_or(1),
        )
    } else {
        (
            env_u64("CLAWKEEPER_PARITY_EXTENDED_CASES").unwrap_or(12),
            env_u64("CLAWKEEPER_PARITY_EXTENDED_FIRST").unwrap_or(1001),
        )
    };
    (first..first + n).collect()
}

/// The suite's results against 2026.7.1, computed once per test binary and shared by the
/// tests below.
fn suite() -> Option<&'static Suite> {
    static SUITE: OnceLock<Option<Suite>> = OnceLock::new();
    SUITE.get_or_init(|| run_suite(STABLE)).as_ref()
}

/// The same against the extended-stable 2026.7.35.
fn extended_suite() -> Option<&'static Suite> {
    static SUITE: OnceLock<Option<Suite>> = OnceLock::new();
    SUITE.get_or_init(|| run_suite(EXTENDED)).as_ref()
}

fn run_suite(release: Release) -> Option<Suite> {
    let version = release.version;
    let oracle = oracle_path_of(release, &format!("parity against {version}"))?;
    let compared = self_check() || clawkeeper_has_cleanup();
    if !compared {
        eprintln!(
            "parity: this build's `clawkeeper cleanup` is not available yet; running the \
                     reference alone (generator coverage only)"
        );
    }
    let seeds = seeds(release);
    let jobs = env_u64("CLAWKEEPER_PARITY_JOBS").unwrap_or(2).max(1) as usize;
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&seed) = seeds.get(i) else { break };
                    let r = run_case(&oracle, seed, compared);
                    let verdict = if r.mismatches.is_empty() {
                        "ok"
                    } else {
                        "DIFFERS"
                    };
                    eprintln!("parity ({version}): seed {seed} {verdict}");
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.seed);
    Some(Suite { results, compared })
}

fn clawkeeper_has_cleanup() -> bool {
    let env = TestEnv::new();
    let store = env.dir().join("s/sessions.json");
    let out = Command::new(binary_under_test())
        .args([
            "cleanup",
            "--store",
            store.to_str().unwrap(),
            "--dry-run",
            "--json",
        ])
        .env("HOME", env.dir())
        .env("OPENCLAW_STATE_DIR", env.dir().join("state"))
        .env("OPENCLAW_CONFIG_PATH", env.dir().join("none.json"))
        .output()
        .expect("run clawkeeper");
    !String::from_utf8_lossy(&out.stderr).contains("not available yet")
}

/// The arguments after `cleanup`, placeholders replaced by `root`; `ours` adds clawkeeper's
/// own override flags.
fn cmd_args(case: &Case, root: &Path, mode: Option<&str>, ours: bool) -> Vec<String> {
    let root_str = root.to_str().unwrap();
    let mut args: Vec<String> = case
        .target
        .iter()
        .map(|a| a.replace(storegen::ROOT, root_str))
        .collect();
    if let Some(m) = mode {
        args.push(m.to_string());
    }
    if !case.text {
        args.push("--json".to_string());
    }
    args.extend(case.flags.iter().cloned());
    if ours {
        args.extend(case.ours_flags.iter().cloned());
    }
    args
}

/// The environment both programs share: state dir, `HOME`, `OPENCLAW_HOME`, no colours,
/// nothing inherited that changes what they do.
fn common_env(cmd: &mut Command, case: &Case, root: &Path) {
    cmd.env("OPENCLAW_STATE_DIR", root.join("state"))
        .env("HOME", root.join("home"))
        .env("NO_COLOR", "1")
        .env_remove("OPENCLAW_TRAJECTORY_DIR")
        .env_remove("OPENCLAW_LOG_LEVEL")
        .env_remove("OPENCLAW_HOME")
        .env_remove("USERPROFILE")
        .current_dir(root.join(&case.cwd_rel));
    if let Some(h) = &case.openclaw_home {
        cmd.env(
            "OPENCLAW_HOME",
            h.replace(storegen::ROOT, root.to_str().unwrap()),
        );
    }
}

/// The reference, started with its own Node directly (its wrapper would set `HOME`).
fn run_reference(oracle: &Path, case: &Case, root: &Path, mode: Option<&str>) -> Run {
    let dir = oracle.parent().unwrap();
    let mut cmd = Command::new(oracle_node(oracle));
    cmd.arg(dir.join("node_modules/openclaw/openclaw.mjs"))
        .args(["sessions", "cleanup"])
        .args(cmd_args(case, root, mode, false));
    common_env(&mut cmd, case, root);
    cmd.env("OPENCLAW_CONFIG_PATH", root.join(&case.config_rel));
    output(cmd)
}

/// The program under test: clawkeeper, or the reference itself when
/// `CLAWKEEPER_PARITY_SELF=1` (a check of the suite: the reference must agree with itself).
fn run_ours(oracle: &Path, case: &Case, root: &Path, mode: Option<&str>) -> Run {
    if self_check() {
        run_reference(oracle, case, root, mode)
    } else {
        run_clawkeeper(case, root, mode)
    }
}

fn self_check() -> bool {
    std::env::var("CLAWKEEPER_PARITY_SELF").as_deref() == Ok("1")
}

/// The binary under test: `CLAWKEEPER_PARITY_BIN` (another build, e.g. a teammate's branch),
/// else this crate's own.
fn binary_under_test() -> std::path::PathBuf {
    std::env::var_os("CLAWKEEPER_PARITY_BIN")
        .map(Into::into)
        .unwrap_or_else(|| clawkeeper_bin().into())
}

fn run_clawkeeper(case: &Case, root: &Path, mode: Option<&str>) -> Run {
    let mut cmd = Command::new(binary_under_test());
    cmd.arg("cleanup").args(cmd_args(case, root, mode, true));
    common_env(&mut cmd, case, root);
    cmd.env_remove("OPENCLAW_CONFIG_PATH");
    match case.config_via {
        ConfigVia::Env => {
            cmd.env("OPENCLAW_CONFIG_PATH", root.join(&case.config_rel));
        }
        ConfigVia::StateDefault => {}
        ConfigVia::Flag => {
            cmd.arg("--config").arg(root.join(&case.config_rel));
        }
    }
    output(cmd)
}

fn output(mut cmd: Command) -> Run {
    let out = cmd.output().expect("spawn");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn describe_args(case: &Case) -> String {
    let mut s = format!(
        "seed {}: cleanup {} {{--dry-run | {}}}{} {}  (config {} via {:?}, cwd <ROOT>/{}, ~ = <ROOT>/{})",
        case.seed,
        case.target.join(" "),
        case.apply_flag.unwrap_or("<no mode flag>"),
        if case.text { "" } else { " --json" },
        case.flags.join(" "),
        case.config_rel,
        case.config_via,
        case.cwd_rel,
        case.home_rel,
    );
    if !case.ours_flags.is_empty() {
        s += &format!("\n    clawkeeper also gets: {}", case.ours_flags.join(" "));
    }
    for note in &case.notes {
        s += &format!("\n    {note}");
    }
    s
}

fn run_case(oracle: &Path, seed: u64, compare: bool) -> CaseResult {
    let case = storegen::generate(seed, storegen::now_ms());
    let env = TestEnv::new();
    let (r, k) = (env.dir().join("r"), env.dir().join("k"));
    let now = storegen::now_ms();
    for (root, ours) in [(&r, false), (&k, true)] {
        std::fs::create_dir_all(root.join("home")).unwrap();
        storegen::materialize(&case, root, now, ours);
    }
    let initial: BTreeSet<String> = snapshot(&r, &skip_runtime_state).into_keys().collect();
    let mut mismatches = Vec::new();

    let ref_dry = run_reference(oracle, &case, &r, Some("--dry-run"));
    let reference_dry = dry_run_report(&ref_dry.stdout);
    let reference_note = reference_dry
        .is_none()
        .then(|| format!("exit {}: {}", ref_dry.code, tail(&ref_dry.stderr, 600)));
    if compare {
        let ck_dry = run_ours(oracle, &case, &k, Some("--dry-run"));
        compare_runs(
            "--dry-run",
            &ref_dry,
            &ck_dry,
            &r,
            &k,
            case.text,
            &mut mismatches,
        );
    }
    let ref_apply = run_reference(oracle, &case, &r, case.apply_flag);
    if compare {
        let ck_apply = run_ours(oracle, &case, &k, case.apply_flag);
        let label = case.apply_flag.unwrap_or("apply (configured mode)");
        compare_runs(
            label,
            &ref_apply,
            &ck_apply,
            &r,
            &k,
            case.text,
            &mut mismatches,
        );
        let ours_config = case.ours_config.as_ref().map(|_| case.config_rel.as_str());
        compare_trees(&r, &k, &initial, ours_config, &mut mismatches);
    }
    if !mismatches.is_empty() && std::env::var_os("CLAWKEEPER_PARITY_KEEP").is_some() {
        let orig = env.dir().join("orig");
        storegen::materialize(&case, &orig, now, false);
        let kept = env.tmp.keep();
        mismatches.push(format!(
            "kept for inspection: {} (orig = input, r = after the reference, k = after clawkeeper)",
            kept.display()
        ));
    }
    CaseResult {
        seed,
        reference_dry,
        reference_note,
        mismatches,
        args: describe_args(&case),
        features: features(&case),
    }
}

/// The shapes of a case that exercise the rarer paths: how the target is named, where `~`
/// points, overrides given as flags, human text, and message-less transcripts near 4 KiB
/// with `--fix-missing`.
fn features(case: &Case) -> Vec<&'static str> {
    let mut f = Vec::new();
    let t = &case.target;
    match t.first().map(String::as_str) {
        None => f.push("no target flag"),
        Some("--agent") if t.len() == 2 => f.push("--agent"),
        Some("--all-agents") if t.len() == 1 => f.push("--all-agents"),
        Some("--store") if t.len() == 2 => {
            let s = &t[1];
            if s.starts_with('~') {
                f.push("--store ~/…");
            } else if !s.starts_with(storegen::ROOT) {
                f.push("--store relative");
            }
            if s.contains("{agentId}") {
                f.push("--store {agentId}");
            }
        }
        _ => f.push("conflicting target flags"),
    }
    if case.notes.iter().any(|n| n.starts_with("session.store")) {
        f.push("session.store");
    }
    if case.openclaw_home.is_some() {
        f.push("OPENCLAW_HOME");
    }
    if !case.ours_flags.is_empty() {
        f.push("override flags");
    }
    if case.text {
        f.push("human text");
    }
    let fix_missing = case.flags.iter().any(|x| x == "--fix-missing");
    if fix_missing && case.notes.iter().any(|n| n.starts_with("message-less")) {
        f.push("--fix-missing with message-less transcripts");
    }
    f
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// The reference keeps runtime state of its own under `<state dir>/state`.
fn skip_runtime_state(rel: &str) -> bool {
    rel == "state/state" || rel.starts_with("state/state/")
}

fn normalize(text: &str, root: &Path) -> String {
    text.replace(root.to_str().unwrap(), "<ROOT>")
}

fn compare_runs(
    label: &str,
    reference: &Run,
    ours: &Run,
    r: &Path,
    k: &Path,
    text: bool,
    out: &mut Vec<String>,
) {
    let (want, got) = (normalize(&reference.stdout, r), normalize(&ours.stdout, k));
    // A store that does not exist: clawkeeper prints what OpenClaw prints, and also says so
    // on stderr and exits 1 (a deliberate difference, see the README).
    let missing_store = reference.code == 0
        && ours.code == 1
        && ours
            .stderr
            .lines()
            .any(|l| l.starts_with("clawkeeper: ") && l.contains(": no such store ("));
    if reference.code != ours.code && !missing_store {
        out.push(format!(
            "{label}: exit code: expected {}, got {} (clawkeeper stderr: {})",
            reference.code,
            ours.code,
            first_line(&ours.stderr)
        ));
    }
    let same = if text {
        same_text(&want, &got)
    } else {
        want == got
    };
    if !same {
        let what = if text { "text" } else { "--json" };
        out.push(format!(
            "{label}: {what} output differs:\n{}",
            line_diff(&want, &got)
        ));
    }
    let (want_log, got_log) = (log_lines(&reference.stderr), log_lines(&ours.stderr));
    if want_log != got_log {
        out.push(format!(
            "{label}: sessions/store log lines on stderr differ:\n{}",
            line_diff(&want_log, &got_log)
        ));
    }
}

/// Name of a file after normalising the timestamp of an archive created by the run.
fn normalize_name(rel: &str, initial: &BTreeSet<String>) -> String {
    if initial.contains(rel) {
        return rel.to_string();
    }
    if let Some(pos) = rel.rfind(".deleted.") {
        let ts = &rel[pos + 9..];
        let b = ts.as_bytes();
        let shape_ok = ts.len() == 24
            && b[10] == b'T'
            && b[23] == b'Z'
            && ts.chars().filter(char::is_ascii_digit).count() == 17;
        if shape_ok {
            return format!("{}.deleted.<TS>", &rel[..pos]);
        }
    }
    rel.to_string()
}

fn tree(root: &Path, initial: &BTreeSet<String>) -> BTreeMap<String, Vec<Snap>> {
    let mut out: BTreeMap<String, Vec<Snap>> = BTreeMap::new();
    let root_str = root.to_str().unwrap().as_bytes();
    for (rel, snap) in snapshot(root, &skip_runtime_state) {
        let snap = match snap {
            Snap::File { mode, content } => Snap::File {
                mode,
                content: storegen::replace_bytes(&content, root_str, b"<ROOT>"),
            },
            Snap::Link(t) => Snap::Link(normalize(&t, root)),
            Snap::Dir => Snap::Dir,
        };
        out.entry(normalize_name(&rel, initial))
            .or_default()
            .push(snap);
    }
    out
}

fn show(snaps: &[Snap]) -> String {
    snaps
        .iter()
        .map(|s| match s {
            Snap::File { mode, content } => format!("file {mode:o}, {} bytes", content.len()),
            Snap::Link(t) => format!("symlink -> {t}"),
            Snap::Dir => "dir".to_string(),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Compare the resulting trees; `skip` is a file that differs by design (clawkeeper's own
/// config, when the case gives it different text).
fn compare_trees(
    r: &Path,
    k: &Path,
    initial: &BTreeSet<String>,
    skip: Option<&str>,
    out: &mut Vec<String>,
) {
    let (mut want, mut got) = (tree(r, initial), tree(k, initial));
    if let Some(s) = skip {
        want.remove(s);
        got.remove(s);
    }
    let mut report = String::new();
    for (name, w) in &want {
        match got.get(name) {
            None => report += &format!("  missing in clawkeeper's tree: {name} ({})\n", show(w)),
            Some(g) if g != w => {
                report += &format!("  differs: {name}: expected {}, got {}\n", show(w), show(g));
                if let (Some(Snap::File { content: a, .. }), Some(Snap::File { content: b, .. })) =
                    (w.first(), g.first())
                {
                    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
                    if a.len() + b.len() < 200_000 {
                        report += &line_diff(&a, &b);
                    }
                }
            }
            Some(_) => {}
        }
    }
    for (name, g) in &got {
        if !want.contains_key(name) {
            report += &format!("  unexpected in clawkeeper's tree: {name} ({})\n", show(g));
        }
    }
    if !report.is_empty() {
        out.push(format!("resulting directory differs:\n{report}"));
    }
}

#[test]
fn cleanup_matches_reference_on_random_stores() {
    check_suite(suite(), STABLE);
}

/// Operators who stay on the JSON line run the extended-stable releases (2026.7.33 to
/// 2026.7.35); cleanup matches the last of them too, on seeds of its own.
#[test]
fn cleanup_matches_the_extended_stable_release_on_random_stores() {
    check_suite(extended_suite(), EXTENDED);
}

fn check_suite(suite: Option<&Suite>, release: Release) {
    let Some(suite) = suite else { return };
    if !suite.compared {
        eprintln!("SKIPPED cleanup parity: `clawkeeper cleanup` is not built yet");
        return;
    }
    let failing: Vec<&CaseResult> = suite
        .results
        .iter()
        .filter(|r| !r.mismatches.is_empty())
        .collect();
    for r in &failing {
        eprintln!("\n=== seed {} ===\nargs: {}", r.seed, r.args);
        for m in &r.mismatches {
            eprintln!("{m}");
        }
    }
    let seeds: Vec<String> = failing.iter().map(|r| r.seed.to_string()).collect();
    assert!(
        failing.is_empty(),
        "{} of {} seeds differ from the reference OpenClaw {}: {} (reproduce one with \
         CLAWKEEPER_PARITY_SEED=<seed> cargo test parity)",
        failing.len(),
        suite.results.len(),
        release.version,
        seeds.join(", ")
    );
}

/// Every counter of the reference's report is non-zero for some seed, so the generator keeps
/// exercising every step of maintenance.
#[test]
fn generator_reaches_every_cleanup_counter() {
    let Some(suite) = suite() else { return };
    if suite.results.len() < 12 {
        eprintln!("SKIPPED generator coverage: fewer than 12 seeds in this run");
        return;
    }
    let counters: [&[&str]; 9] = [
        &["repaired"],
        &["missing"],
        &["dmScopeRetired"],
        &["modelRunPruned"],
        &["pruned"],
        &["capped"],
        &["unreferencedArtifacts", "removedFiles"],
        &["diskBudget", "removedFiles"],
        &["diskBudget", "removedEntries"],
    ];
    let mut missing = Vec::new();
    for path in counters {
        let hits = suite
            .results
            .iter()
            .filter(|r| {
                let mut v = r.reference_dry.as_ref();
                for k in path {
                    v = v.and_then(|x| x.get(k));
                }
                v.and_then(Value::as_u64).unwrap_or(0) > 0
            })
            .count();
        eprintln!(
            "coverage: {:<36} non-zero in {hits} of {} seeds",
            path.join("."),
            suite.results.len()
        );
        if hits == 0 {
            missing.push(path.join("."));
        }
    }
    // The rarer shapes, where the reference ran without error (checked on long runs only).
    let mut shapes: BTreeMap<&str, usize> = BTreeMap::new();
    for r in suite.results.iter().filter(|r| r.reference_dry.is_some()) {
        for f in &r.features {
            *shapes.entry(f).or_default() += 1;
        }
    }
    for f in [
        "no target flag",
        "--agent",
        "--all-agents",
        "--store ~/…",
        "--store relative",
        "--store {agentId}",
        "session.store",
        "OPENCLAW_HOME",
        "override flags",
        "human text",
        "--fix-missing with message-less transcripts",
    ] {
        let hits = shapes.get(f).copied().unwrap_or(0);
        eprintln!(
            "coverage: {f:<44} in {hits} of {} seeds",
            suite.results.len()
        );
        if hits == 0 && suite.results.len() >= 100 {
            missing.push(f.to_string());
        }
    }
    let silent = suite
        .results
        .iter()
        .filter(|r| r.reference_dry.is_none())
        .count();
    for r in suite.results.iter().filter(|r| r.reference_note.is_some()) {
        eprintln!(
            "seed {}: the reference printed no JSON ({})",
            r.seed,
            r.reference_note.as_deref().unwrap_or("")
        );
    }
    assert!(
        missing.is_empty(),
        "the generator never reaches: {}",
        missing.join(", ")
    );
    assert!(
        silent * 4 <= suite.results.len(),
        "{silent} seeds gave no JSON from the reference"
    );
}

/// Developer aid: lay out the case of `CLAWKEEPER_PARITY_SEED` under `CLAWKEEPER_PARITY_DUMP`
/// and print how to run both programs on it (`cargo test dump_parity_case -- --ignored`).
#[test]
#[ignore = "developer aid; needs CLAWKEEPER_PARITY_SEED and CLAWKEEPER_PARITY_DUMP"]
fn dump_parity_case() {
    let seed = env_u64("CLAWKEEPER_PARITY_SEED").expect("set CLAWKEEPER_PARITY_SEED");
    let dir = std::path::PathBuf::from(
        std::env::var_os("CLAWKEEPER_PARITY_DUMP").expect("set CLAWKEEPER_PARITY_DUMP"),
    );
    let case = storegen::generate(seed, storegen::now_ms());
    std::fs::create_dir_all(dir.join("home")).unwrap();
    storegen::materialize(&case, &dir, storegen::now_ms(), false);
    println!(
        "{}",
        describe_args(&case).replace("<ROOT>", dir.to_str().unwrap())
    );
    let d = dir.display();
    let home = match &case.openclaw_home {
        Some(h) => format!(
            "HOME={d}/home OPENCLAW_HOME={}",
            h.replace(storegen::ROOT, dir.to_str().unwrap())
        ),
        None => format!("HOME={d}/home"),
    };
    println!(
        "cd {d}/{} && {home} OPENCLAW_CONFIG_PATH={d}/{} OPENCLAW_STATE_DIR={d}/state NO_COLOR=1 \\\n  node openclaw.mjs sessions cleanup {}",
        case.cwd_rel,
        case.config_rel,
        cmd_args(&case, &dir, Some("--dry-run"), false).join(" ")
    );
    println!(
        "clawkeeper: cleanup {} (config via {:?}{})",
        cmd_args(&case, &dir, Some("--dry-run"), true).join(" "),
        case.config_via,
        if case.ours_config.is_some() {
            "; its own config text differs: keys moved to flags"
        } else {
            ""
        }
    );
}
