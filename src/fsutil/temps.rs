//! Temp files left behind by killed writers: `<name>.<pid>.<uuid>.tmp` beside a file.
//!
//! Every atomic replace in this crate (and OpenClaw's own store writes) goes through such a
//! temp file and commits with a rename, so a temp that is still there after its writer died
//! was never committed: the file beside it is intact, and the temp is garbage. A temp whose
//! pid is alive may be a write in progress and is never touched. Only regular files directly
//! in the confined directory whose name matches the exact pattern for the given file are
//! considered, so nothing else can be mistaken for a temp.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Confined;
use super::lock::pid_alive;

/// A temp file of `target` left by a dead process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTemp {
    pub path: PathBuf,
    pub pid: u32,
    pub size: u64,
}

/// The pid in `name` when it is `<base>.<pid>.<uuid>.tmp`.
pub fn temp_pid(base: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(base)?.strip_prefix('.')?;
    let rest = rest.strip_suffix(".tmp")?;
    let (pid, uuid) = rest.split_once('.')?;
    if pid.is_empty()
        || !pid.bytes().all(|b| b.is_ascii_digit())
        || !crate::layout::is_uuid_shape(uuid)
    {
        return None;
    }
    pid.parse().ok()
}

/// Temp files of `target` whose writer is dead (never our own pid, never a live one).
pub fn stale_temps(confined: &Confined, target: &Path) -> Result<Vec<StaleTemp>> {
    let target = confined.check(target)?;
    let Some(base) = target.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let me = std::process::id();
    let mut out = Vec::new();
    let dir = confined.root();
    for name in temp_names(dir)?.iter() {
        let Some(pid) = temp_pid(base, name) else {
            continue;
        };
        if pid == me || pid_alive(pid) {
            continue;
        }
        let path = dir.join(name);
        // symlink_metadata: a symlink named like a temp is not a temp.
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => out.push(StaleTemp {
                path,
                pid,
                size: m.len(),
            }),
            _ => {}
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Names ending in `.tmp` directly in `dir`, listed once per directory and run.
///
/// A run over a whole store asks for the temps of every transcript; listing the directory each
/// time would cost O(files²). The snapshot can only miss a temp that appeared after it was
/// taken: its writer was alive then, so such a temp is left for the next run, which is what
/// happens to a live writer's temp anyway. Every name is checked again before it is used.
fn temp_names(dir: &Path) -> Result<std::sync::Arc<Vec<String>>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static SNAPSHOTS: OnceLock<Mutex<HashMap<PathBuf, Arc<Vec<String>>>>> = OnceLock::new();
    let snapshots = SNAPSHOTS.get_or_init(Default::default);
    if let Some(names) = snapshots.lock().unwrap_or_else(|e| e.into_inner()).get(dir) {
        return Ok(names.clone());
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        if let Some(name) = entry.file_name().to_str()
            && name.ends_with(".tmp")
        {
            names.push(name.to_owned());
        }
    }
    let names = Arc::new(names);
    snapshots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(dir.to_path_buf(), names.clone());
    Ok(names)
}

/// Remove the stale temps of `target`; returns what was removed. The target itself must be
/// a regular file (when it is missing, a temp may be the only copy left: keep it).
pub fn remove_stale_temps(confined: &Confined, target: &Path) -> Result<Vec<StaleTemp>> {
    let checked = confined.check(target)?;
    if !fs::symlink_metadata(&checked).is_ok_and(|m| m.file_type().is_file()) {
        return Ok(Vec::new());
    }
    let mut removed = Vec::new();
    for t in stale_temps(confined, target)? {
        // Re-check the pid right before removing: it may have been reused meanwhile.
        if pid_alive(t.pid) {
            continue;
        }
        confined.remove_file(&t.path)?;
        removed.push(t);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0f8c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6";

    #[test]
    fn names() {
        assert_eq!(
            temp_pid("t.jsonl", &format!("t.jsonl.42.{UUID}.tmp")),
            Some(42)
        );
        assert_eq!(temp_pid("t.jsonl", &format!("x.jsonl.42.{UUID}.tmp")), None);
        assert_eq!(
            temp_pid("t.jsonl", &format!("t.jsonl.4x2.{UUID}.tmp")),
            None
        );
        assert_eq!(temp_pid("t.jsonl", &format!("t.jsonl.42.{UUID}")), None);
        assert_eq!(temp_pid("t.jsonl", "t.jsonl.42.abc.tmp"), None);
        assert_eq!(temp_pid("t", &format!("t.jsonl.42.{UUID}.tmp")), None);
    }

    #[test]
    fn only_dead_writers_temps_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let t = dir.path().join("t.jsonl");
        let dead = dir
            .path()
            .join(format!("t.jsonl.{}.{UUID}.tmp", u32::MAX - 9));
        let live = dir.path().join(format!("t.jsonl.1.{UUID}.tmp"));
        let mine = dir
            .path()
            .join(format!("t.jsonl.{}.{UUID}.tmp", std::process::id()));
        let other = dir
            .path()
            .join(format!("u.jsonl.{}.{UUID}.tmp", u32::MAX - 9));
        for p in [&dead, &live, &mine, &other] {
            fs::write(p, b"tmp").unwrap();
        }
        // Without the target, nothing is removed: a temp may be the only copy.
        assert!(remove_stale_temps(&c, &t).unwrap().is_empty());
        fs::write(&t, b"x").unwrap();
        let link = dir
            .path()
            .join(format!("t.jsonl.{}.{UUID}.tmp", u32::MAX - 8));
        std::os::unix::fs::symlink(&t, &link).unwrap();
        let removed = remove_stale_temps(&c, &t).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].path, dead);
        assert!(!dead.exists() && live.exists() && mine.exists() && other.exists());
        assert!(t.exists());
        assert!(
            fs::symlink_metadata(&link).is_ok(),
            "a symlink is never a temp"
        );
    }
}
