//! Sessions directories reached through a symlink.
//!
//! Operators move `~/.openclaw` or `agents/<id>/sessions` to a bigger disk and leave a symlink
//! behind. clawkeeper follows such a directory symlink exactly once, when it confines a run to
//! the directory (`fsutil::Confined` then holds the real directory open and never follows a
//! symlink inside it), and says so: a `clawkeeper: note:` line on stderr (unless `--quiet`), a
//! `Note:` line in the text report, and the real path in `--json`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A directory whose path leads, through a symlink, to another real path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedDir {
    /// As the run named it.
    pub dir: PathBuf,
    /// Where it really is (resolved once, at the start of the run).
    pub real: PathBuf,
}

impl ResolvedDir {
    /// `Some` when `dir` exists and a symlink on its path leads elsewhere than the path says.
    pub fn of(dir: &Path) -> Option<ResolvedDir> {
        let real = crate::fsutil::resolved_elsewhere(dir)?;
        Some(ResolvedDir {
            dir: dir.to_path_buf(),
            real,
        })
    }

    /// The note, for a run that writes (`writes`) or only reads.
    pub fn note(&self, writes: bool) -> String {
        let what = if writes {
            "every change of this run stays inside it"
        } else {
            "read from there"
        };
        format!(
            "{} leads through a symlink to {}: resolved once; {what}",
            self.dir.display(),
            self.real.display()
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "path": self.dir.display().to_string(),
            "resolvedTo": self.real.display().to_string(),
        })
    }
}

/// The distinct resolved directories among `dirs`, in order.
pub fn collect<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Vec<ResolvedDir> {
    let mut out: Vec<ResolvedDir> = Vec::new();
    for d in dirs {
        if out.iter().any(|r| r.dir == d) {
            continue;
        }
        if let Some(r) = ResolvedDir::of(d) {
            out.push(r);
        }
    }
    out
}

/// The resolved directories of transcript targets: each store's sessions directory (the
/// transcripts' own paths come out of the store already resolved), else the directory of a
/// `--transcript` file.
pub fn of_targets(targets: &[super::transcript_targets::Target]) -> Vec<ResolvedDir> {
    collect(targets.iter().map(|t| {
        t.store
            .as_deref()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(&t.dir)
    }))
}

/// One `clawkeeper: note:` line per directory on stderr, unless `quiet`.
pub fn announce(resolved: &[ResolvedDir], writes: bool, quiet: bool) {
    if quiet {
        return;
    }
    for r in resolved {
        eprintln!("clawkeeper: note: {}", r.note(writes));
    }
}

/// `Note:` lines for a text report (wrapped to 80 columns).
pub fn text(out: &mut String, resolved: &[ResolvedDir], writes: bool) {
    for r in resolved {
        crate::report::transcript_text::write_indented(
            out,
            "",
            &format!("Note: {}.", r.note(writes)),
        );
    }
}

/// The `resolvedDirs` array of a `--json` document.
pub fn json(resolved: &[ResolvedDir]) -> Value {
    Value::Array(resolved.iter().map(ResolvedDir::to_json).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_reached_through_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(base.path()).unwrap();
        let real = base.join("disk/sessions");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(base.join("disk"), base.join("state")).unwrap();
        assert_eq!(ResolvedDir::of(&real), None);
        assert_eq!(ResolvedDir::of(&base.join("disk/../disk/sessions")), None);
        assert_eq!(ResolvedDir::of(&base.join("nowhere")), None);
        let r = ResolvedDir::of(&base.join("state/sessions")).unwrap();
        assert_eq!(r.real, real);
        assert!(r.note(true).contains("every change"));
        let all = collect([
            base.join("state/sessions").as_path(),
            real.as_path(),
            base.join("state/sessions").as_path(),
        ]);
        assert_eq!(all.len(), 1);
    }
}
