//! Private scratch copies of a sessions directory, for previews that must run the real apply
//! code without touching the real directory (`inspect` predicting `cleanup --enforce`).
//!
//! [`Scratch::of_sessions_dir`] makes `<tmp>/clawkeeper-scratch-<pid>-<uuid>/agents/<id>/sessions/`
//! (mode 0700) and fills it with every regular file directly in the source directory: a hard
//! link when the temp dir is on the same filesystem (no bytes copied; cleanup only renames,
//! deletes and atomically replaces, so a link never lets a change reach the original). When
//! a link cannot be made (another filesystem, a file owned by someone else), only the files
//! cleanup reads are copied (the store, files of at most [`READ_LIMIT`] bytes, the skill
//! prompt blobs); every other file gets a sparse stand-in of the same size and modification
//! time, which takes no space: the scratch tree never needs space proportional to the store.
//! A file that cannot be read gets a stand-in too, and is listed in [`Scratch::unreadable`].
//! Of subdirectories only `skills-prompts/` (the skill prompt blobs a store refers to) is
//! mirrored, the same way (and `cold/` for a SQLite-era agent, [`Scratch::of_database_agent`]);
//! symlinks never are. The whole scratch tree is removed on drop, and the trees of killed runs
//! by the next run. Nothing is ever written in the source directory.

use std::fs::{self, File, FileTimes};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Files up to this size may be read by cleanup (`--fix-missing` reads transcripts of at
/// most 4096 bytes; trajectory pointers are small): copied when they cannot be linked.
pub const READ_LIMIT: u64 = 4096;

/// Whether the mirror tries hard links first (the tests also mirror without them).
const LINK: bool = true;

/// A scratch tree; removed on drop.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
    sessions_dir: PathBuf,
    /// Source files that could be neither linked nor read, with the reason.
    pub unreadable: Vec<(PathBuf, String)>,
}

impl Scratch {
    /// Mirror the regular files of `source` under a fresh scratch `agents/<agent_id>/sessions/`.
    /// The file named `copied` (the store) is always copied: linking it would change its
    /// ctime, which a later apply checks to see that nobody wrote the store since its plan.
    pub fn of_sessions_dir(
        source: &Path,
        agent_id: &str,
        copied: Option<&std::ffi::OsStr>,
    ) -> Result<Scratch> {
        let mut scratch = Scratch::empty(agent_id)?;
        let to = scratch.sessions_dir.clone();
        let top = Top {
            subdirs: &["skills-prompts"],
            copied,
            skip: &|_| false,
        };
        mirror_dir(source, &to, Some(&top), LINK, &mut scratch.unreadable)?;
        Ok(scratch)
    }

    /// Mirror a SQLite-era agent: its `sessions/` (with `skills-prompts/` and `cold/`), and,
    /// when given, the regular files of its `agent/` directory except the database and its
    /// `-wal`/`-shm`/`-journal` (the caller copies the database itself, see
    /// `agentdb::cleanup::predict`). The scratch `agent/` directory is made either way.
    pub fn of_database_agent(
        sessions: &Path,
        agent: Option<&Path>,
        agent_id: &str,
    ) -> Result<Scratch> {
        let mut scratch = Scratch::empty(agent_id)?;
        let mut unreadable = Vec::new();
        let top = Top {
            subdirs: &["skills-prompts", "cold"],
            copied: None,
            skip: &|_| false,
        };
        mirror_dir(
            sessions,
            &scratch.sessions_dir,
            Some(&top),
            LINK,
            &mut unreadable,
        )?;
        let agent_to = scratch.agent_dir();
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&agent_to)
            .with_context(|| format!("cannot create {}", agent_to.display()))?;
        let db = crate::agentdb::FILE_NAME;
        let skip = |name: &std::ffi::OsStr| {
            name.to_str()
                .and_then(|n| n.strip_prefix(db))
                .is_some_and(|rest| matches!(rest, "" | "-wal" | "-shm" | "-journal"))
        };
        let top = Top {
            subdirs: &[],
            copied: None,
            skip: &skip,
        };
        if let Some(agent) = agent {
            mirror_dir(agent, &agent_to, Some(&top), LINK, &mut unreadable)?;
        }
        scratch.unreadable = unreadable;
        Ok(scratch)
    }

    /// A fresh, empty `<tmp>/clawkeeper-scratch-<pid>-<uuid>/agents/<id>/sessions/`.
    fn empty(agent_id: &str) -> Result<Scratch> {
        remove_abandoned(&std::env::temp_dir());
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
            unreadable: Vec::new(),
        };
        fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&scratch.sessions_dir)
            .with_context(|| format!("cannot create {}", scratch.sessions_dir.display()))?;
        Ok(scratch)
    }

    /// The scratch sessions directory.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// The scratch `agents/<id>/agent/` directory (made by [`Scratch::of_database_agent`]).
    pub fn agent_dir(&self) -> PathBuf {
        self.sessions_dir.with_file_name("agent")
    }

    /// The scratch `agents/<id>/` directory.
    pub fn agent_root(&self) -> &Path {
        self.sessions_dir.parent().unwrap_or(&self.root)
    }
}

/// Remove the scratch trees of runs that were killed before they could (their pid is gone):
/// a database copy left behind would hold as much space as the database. Only directories of
/// this user are touched; a pid that is alive again (reused) keeps its tree.
fn remove_abandoned(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = fs::read_dir(tmp) else { return };
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    for ent in rd.flatten() {
        let name = ent.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("clawkeeper-scratch-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(meta) = fs::symlink_metadata(ent.path()) else {
            continue;
        };
        if meta.is_dir() && meta.uid() == uid && !super::lock::pid_alive(pid) {
            let _ = fs::remove_dir_all(ent.path());
        }
    }
}

/// What the top level of a mirror takes: the subdirectories it descends into, the file that
/// is always copied, and the files it leaves out.
struct Top<'a> {
    subdirs: &'a [&'a str],
    copied: Option<&'a std::ffi::OsStr>,
    skip: &'a dyn Fn(&std::ffi::OsStr) -> bool,
}

/// Link (or copy, or stand in for) the regular files of `from` into `to`; at the top level
/// (`top` given) descend only into its `subdirs`, below it into every directory.
fn mirror_dir(
    from: &Path,
    to: &Path,
    top: Option<&Top>,
    link: bool,
    unreadable: &mut Vec<(PathBuf, String)>,
) -> Result<()> {
    let copied = top.and_then(|t| t.copied);
    let rd = match fs::read_dir(from) {
        Ok(rd) => rd,
        Err(e) if top.is_some() && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", from.display())),
    };
    for ent in rd {
        let ent = ent.with_context(|| format!("cannot list {}", from.display()))?;
        let Ok(ft) = ent.file_type() else { continue };
        let (src, dst) = (ent.path(), to.join(ent.file_name()));
        let name = ent.file_name();
        if top.is_some_and(|t| (t.skip)(&name)) {
            continue;
        }
        let is_copied = copied == Some(name.as_os_str());
        if ft.is_dir() && top.is_none_or(|t| t.subdirs.iter().any(|d| name.as_os_str() == *d)) {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&dst)
                .with_context(|| format!("cannot create {}", dst.display()))?;
            mirror_dir(&src, &dst, None, link, unreadable)?;
        } else if ft.is_file() && !(link && !is_copied && fs::hard_link(&src, &dst).is_ok()) {
            let meta = fs::symlink_metadata(&src)
                .with_context(|| format!("cannot stat {}", src.display()))?;
            // Below the top level everything is a blob that cleanup reads.
            let read = meta.len() <= READ_LIMIT || top.is_none() || is_copied;
            let copied = if read {
                match copy(&src, &dst) {
                    Ok(()) => true,
                    Err(e) => {
                        unreadable.push((src.clone(), format!("{e:#}")));
                        false
                    }
                }
            } else {
                false
            };
            if !copied {
                stand_in(&dst, meta.len())?;
            }
            set_mtime(&dst, &meta)?;
        }
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// A sparse file of `len` bytes: the size cleanup measures, no space taken.
fn stand_in(path: &Path, len: u64) -> Result<()> {
    let f = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.set_len(len)
        .with_context(|| format!("cannot size {}", path.display()))
}

fn set_mtime(path: &Path, meta: &fs::Metadata) -> Result<()> {
    if let Ok(mtime) = meta.modified() {
        let f = File::options()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        f.set_times(FileTimes::new().set_modified(mtime))
            .with_context(|| format!("cannot set the time of {}", path.display()))?;
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
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_trees_of_killed_runs_are_removed_and_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = tmp.path().join(format!("clawkeeper-scratch-{dead}-a"));
        let live = tmp
            .path()
            .join(format!("clawkeeper-scratch-{}-b", std::process::id()));
        let other = tmp.path().join(format!("not-clawkeeper-scratch-{dead}-c"));
        for d in [&gone, &live, &other] {
            fs::create_dir_all(d.join("agents/main/agent")).unwrap();
            fs::write(d.join("agents/main/agent/openclaw-agent.sqlite"), b"x").unwrap();
        }
        remove_abandoned(tmp.path());
        assert!(!gone.exists());
        assert!(
            live.join("agents/main/agent/openclaw-agent.sqlite")
                .exists()
        );
        assert!(other.exists());
    }

    #[test]
    fn without_links_only_what_cleanup_reads_is_copied() {
        let src = tempfile::tempdir().unwrap();
        let big = vec![b'x'; 1 << 20];
        fs::write(src.path().join("big.jsonl"), &big).unwrap();
        fs::write(src.path().join("small.jsonl"), b"{}\n").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options()
            .write(true)
            .open(src.path().join("big.jsonl"))
            .unwrap()
            .set_times(FileTimes::new().set_modified(old))
            .unwrap();
        let to = tempfile::tempdir().unwrap();
        let mut unreadable = Vec::new();
        let top = Top {
            subdirs: &["skills-prompts"],
            copied: None,
            skip: &|_| false,
        };
        mirror_dir(src.path(), to.path(), Some(&top), false, &mut unreadable).unwrap();
        let m = fs::metadata(to.path().join("big.jsonl")).unwrap();
        assert_eq!(m.len(), 1 << 20);
        assert_eq!(m.modified().unwrap(), old);
        assert!(
            m.blocks() < 16,
            "a stand-in takes no space: {} blocks",
            m.blocks()
        );
        assert_eq!(fs::read(to.path().join("small.jsonl")).unwrap(), b"{}\n");
        assert!(unreadable.is_empty());
    }

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
            let s = Scratch::of_sessions_dir(src.path(), "main", None).unwrap();
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
