//! Private scratch copies of a sessions directory, for previews that must run the real apply
//! code without touching the real directory (`inspect` predicting `cleanup --enforce`).
//!
//! [`Scratch::of_sessions_dir`] makes `<tmp>/clawkeeper-scratch-<pid>-<uuid>/agents/<id>/sessions/`
//! (mode 0700) and fills it with every regular file directly in the source directory: a hard
//! link when the temp dir is on the same filesystem (no bytes copied; cleanup only renames,
//! deletes and atomically replaces, so a link never lets a change reach the original), else
//! a copy with the original modification time. Of subdirectories only `skills-prompts/` (the
//! skill prompt blobs a store refers to) is mirrored, the same way; symlinks never are.
//! The whole scratch tree is removed on drop. Nothing is ever written in the source directory.

use std::fs::{self, File, FileTimes};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A scratch tree; removed on drop.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
    sessions_dir: PathBuf,
}

impl Scratch {
    /// Mirror the regular files of `source` under a fresh scratch `agents/<agent_id>/sessions/`.
    pub fn of_sessions_dir(source: &Path, agent_id: &str) -> Result<Scratch> {
        let root = std::env::temp_dir().join(format!(
            "clawkeeper-scratch-{}-{}",
            std::process::id(),
            super::random_uuid()
        ));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("cannot create {}", root.display()))?;
        let scratch = Scratch {
            sessions_dir: root.join("agents").join(agent_id).join("sessions"),
            root,
        };
        fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&scratch.sessions_dir)
            .with_context(|| format!("cannot create {}", scratch.sessions_dir.display()))?;
        mirror_dir(source, &scratch.sessions_dir, true)?;
        Ok(scratch)
    }

    /// The scratch sessions directory.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }
}

/// Link (or copy) the regular files of `from` into `to`; at the top level also descend into
/// `skills-prompts/`, below it into every directory.
fn mirror_dir(from: &Path, to: &Path, top: bool) -> Result<()> {
    let rd = match fs::read_dir(from) {
        Ok(rd) => rd,
        Err(e) if top && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", from.display())),
    };
    for ent in rd {
        let ent = ent.with_context(|| format!("cannot list {}", from.display()))?;
        let Ok(ft) = ent.file_type() else { continue };
        let (src, dst) = (ent.path(), to.join(ent.file_name()));
        if ft.is_dir() && (!top || ent.file_name() == "skills-prompts") {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&dst)
                .with_context(|| format!("cannot create {}", dst.display()))?;
            mirror_dir(&src, &dst, false)?;
        } else if ft.is_file() && fs::hard_link(&src, &dst).is_err() {
            copy_with_mtime(&src, &dst)?;
        }
    }
    Ok(())
}

fn copy_with_mtime(from: &Path, to: &Path) -> Result<()> {
    let meta =
        fs::symlink_metadata(from).with_context(|| format!("cannot stat {}", from.display()))?;
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    if let Ok(mtime) = meta.modified() {
        let f = File::options()
            .write(true)
            .open(to)
            .with_context(|| format!("cannot open {}", to.display()))?;
        f.set_times(FileTimes::new().set_modified(mtime))
            .with_context(|| format!("cannot set the time of {}", to.display()))?;
    }
    Ok(())
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_regular_files_and_never_reaches_the_source() {
        let src = tempfile::tempdir().unwrap();
        fs::write(src.path().join("a.jsonl"), b"x\n").unwrap();
        fs::create_dir(src.path().join("sub")).unwrap();
        let blobs = src.path().join("skills-prompts/sha256/ab");
        fs::create_dir_all(&blobs).unwrap();
        fs::write(blobs.join("ab01.txt"), b"prompt").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", blobs.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let root;
        {
            let s = Scratch::of_sessions_dir(src.path(), "main").unwrap();
            root = s.root.clone();
            let mut names: Vec<_> = walkdir::WalkDir::new(s.sessions_dir())
                .min_depth(1)
                .into_iter()
                .map(|e| {
                    let e = e.unwrap();
                    let rel = e.path().strip_prefix(s.sessions_dir()).unwrap().to_owned();
                    (rel.display().to_string(), e.file_type().is_file())
                })
                .collect();
            names.sort();
            let want = [
                ("a.jsonl", true),
                ("skills-prompts", false),
                ("skills-prompts/sha256", false),
                ("skills-prompts/sha256/ab", false),
                ("skills-prompts/sha256/ab/ab01.txt", true),
            ];
            let want: Vec<_> = want.iter().map(|(n, f)| (n.to_string(), *f)).collect();
            assert_eq!(names, want);
            fs::remove_file(s.sessions_dir().join("a.jsonl")).unwrap();
        }
        assert!(!root.exists());
        assert_eq!(fs::read(src.path().join("a.jsonl")).unwrap(), b"x\n");
    }
}
