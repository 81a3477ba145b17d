//! One transcript through plan → preview or apply, with every safety rule in one place.
//!
//! [`run_file`] is what `prune-noreply` and `strip-images` (and later `compact`) call per file:
//!
//! 1. refuse symlinks and anything that is not a regular file directly inside the confined
//!    directory; open with `O_NOFOLLOW`;
//! 2. index the file and refuse files the tool cannot edit safely (no session header on the
//!    first line, a v1 header without ids, duplicate ids, `leaf` control records);
//! 3. ask the planner for [`Edits`]; nothing to do means the file is not touched at all;
//! 4. resolve and stream the rewrite: into a counting sink for a preview (which is validated
//!    exactly like a real run), or, with `enforce`, into a temp file beside the original while
//!    holding OpenClaw's `<file>.lock`; the temp file replaces the original only when the
//!    validator passes and the source's size and mtime are what they were when it was
//!    indexed (a concurrent append aborts that file instead of losing the tail).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use super::rewrite::{self, Edits, Resolved};
use super::tree::Tree;
use super::validate::{self, Expectation};
use super::{EntryType, Index};
use crate::exit::Refusal;
use crate::fsutil::Confined;
use crate::fsutil::lock::{self, Acquire};
use crate::fsutil::temps;

/// Preview or apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Compute and validate everything, write nothing.
    Preview,
    /// Apply.
    Enforce,
}

/// Options shared by every file of a run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub mode: Mode,
    /// How long to wait for a lock held by a live process.
    pub wait_lock: Option<Duration>,
}

/// What a planner returns for one file.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub edits: Edits,
    /// Things worth telling the operator (held-back removals, protected images, …).
    pub notes: Vec<String>,
}

/// How one file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Nothing to change.
    Unchanged,
    /// A preview found changes.
    WouldChange,
    /// The file was rewritten.
    Changed,
    /// Not processed, for a reason that is not a problem (e.g. a missing file).
    Skipped(String),
    /// Refused: the input or the result is unsafe; the file was not changed.
    Refused(String),
    /// Its lock is held by a live process; the file was not changed.
    Locked(String),
    /// An error (I/O); the file was not changed.
    Failed(String),
}

/// The per-file report.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub path: PathBuf,
    pub status: Status,
    pub entries_removed: usize,
    pub blocks_replaced: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// 1-based numbers of lines kept as they were because they do not parse.
    pub unparsable_lines: Vec<usize>,
    pub notes: Vec<String>,
}

impl Outcome {
    pub fn new(path: &Path, status: Status) -> Outcome {
        Outcome {
            path: path.to_owned(),
            status,
            entries_removed: 0,
            blocks_replaced: 0,
            bytes_before: 0,
            bytes_after: 0,
            unparsable_lines: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// A planner: from an index and its tree to edits, or a reason to leave the file alone.
pub type Planner<'a> = dyn Fn(&Index, &Tree) -> Result<Planned, String> + Sync + 'a;

/// Process one transcript. Never returns an error: every failure is an [`Outcome`] status.
pub fn run_file(confined: &Confined, path: &Path, opts: Options, planner: &Planner) -> Outcome {
    let mut out = Outcome::new(path, Status::Unchanged);
    if let Err(status) = run_inner(confined, path, opts, planner, &mut out) {
        out.status = status;
        out.bytes_after = out.bytes_before;
    }
    out
}

/// Size and modification time: what a concurrent append changes.
fn stamp(path: &Path) -> io::Result<(u64, Option<SystemTime>)> {
    let m = fs::symlink_metadata(path)?;
    Ok((m.len(), m.modified().ok()))
}

fn open_nofollow(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

fn failed(e: anyhow::Error) -> Status {
    Status::Failed(format!("{e:#}"))
}

/// Index and plan; `Ok(None)` when there is nothing to do.
fn prepare(
    path: &Path,
    planner: &Planner,
    out: &mut Outcome,
) -> Result<Option<(Index, Resolved)>, Status> {
    let (len, _) = stamp(path).map_err(|e| failed(anyhow::Error::from(e)))?;
    let file = open_nofollow(path).map_err(failed)?;
    let index = Index::from_reader(BufReader::with_capacity(1 << 20, io::Read::take(file, len)))
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(failed)?;
    out.bytes_before = index.size;
    out.bytes_after = index.size;
    out.unparsable_lines = index.unparsable_line_numbers();
    out.notes.clear();
    if !index.invalid_utf8.is_empty() {
        let lines: Vec<String> = index
            .invalid_utf8
            .iter()
            .map(|l| (l + 1).to_string())
            .collect();
        out.notes.push(format!(
            "kept line(s) with invalid UTF-8 as they are: {}",
            lines.join(", ")
        ));
    }
    match index.header() {
        None => {
            return Err(Status::Refused(
                "the first line is not a session header; not editing".into(),
            ));
        }
        Some(h) if h.version.is_none_or(|v| v < 2) => {
            return Err(Status::Skipped(
                "version 1 transcript (entries have no ids); the runtime migrates it on open"
                    .into(),
            ));
        }
        Some(_) => {}
    }
    if index.entries.iter().any(|e| e.kind == EntryType::Leaf) {
        return Err(Status::Skipped(
            "the file has `leaf` control records, which this tool does not edit".into(),
        ));
    }
    let tree = Tree::build(&index);
    if let Some(id) = tree.duplicate_ids.first() {
        return Err(Status::Refused(format!(
            "entry id {id} occurs more than once"
        )));
    }
    let planned = planner(&index, &tree).map_err(Status::Skipped)?;
    out.notes.extend(planned.notes);
    if planned.edits.is_empty() {
        return Ok(None);
    }
    let resolved = rewrite::resolve(&index, &tree, &planned.edits)
        .map_err(|e| Status::Refused(format!("{e:#}")))?;
    out.entries_removed = resolved.removed;
    out.blocks_replaced = resolved.blocks_replaced;
    Ok(Some((index, resolved)))
}

fn run_inner(
    confined: &Confined,
    path: &Path,
    opts: Options,
    planner: &Planner,
    out: &mut Outcome,
) -> Result<(), Status> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Status::Skipped("the file does not exist".into()));
        }
        Err(e) => return Err(failed(anyhow::Error::from(e))),
    };
    if meta.file_type().is_symlink() {
        return Err(Status::Refused(
            "it is a symlink; symlinks are never followed".into(),
        ));
    }
    if !meta.is_file() {
        return Err(Status::Refused("not a regular file".into()));
    }
    confined
        .check(path)
        .map_err(|e| Status::Refused(format!("{e:#}")))?;
    let before = stamp(path).map_err(|e| failed(e.into()))?;
    let Some((mut index, mut resolved)) = prepare(path, planner, out)? else {
        return Ok(());
    };
    if opts.mode == Mode::Preview {
        if let Ok(stale) = temps::stale_temps(confined, path)
            && !stale.is_empty()
        {
            out.notes.push(format!(
                "{} temp file(s) left by a killed run would be removed: {}",
                stale.len(),
                names(&stale)
            ));
        }
        let file = open_nofollow(path).map_err(failed)?;
        let mut sink = io::sink();
        let applied = rewrite::apply(
            BufReader::with_capacity(1 << 20, file),
            &index,
            &resolved,
            &mut sink,
        )
        .map_err(failed)?;
        check(&index, &applied.index, &resolved)?;
        out.bytes_after = applied.bytes_written;
        out.status = Status::WouldChange;
        return Ok(());
    }
    let _lock = match lock::acquire(confined, path, opts.wait_lock).map_err(failed)? {
        Acquire::Locked(l) => l,
        Acquire::Busy(holder) => return Err(Status::Locked(holder.to_string())),
    };
    // Temps of this file left by a killed writer: the file itself is intact, they are garbage.
    let swept = temps::remove_stale_temps(confined, path).map_err(failed)?;
    let swept_note = (!swept.is_empty()).then(|| {
        format!(
            "removed {} temp file(s) left by a killed run: {}",
            swept.len(),
            names(&swept)
        )
    });
    out.notes.extend(swept_note.clone());
    // The file may have changed while we planned without the lock: plan again if so.
    let locked = stamp(path).map_err(|e| failed(e.into()))?;
    if locked != before {
        let again = prepare(path, planner, out);
        out.notes.extend(swept_note);
        match again? {
            Some((i, r)) => (index, resolved) = (i, r),
            None => return Ok(()),
        }
    }
    let applied = confined
        .replace_verified(
            path,
            0o600,
            |w: &mut dyn Write| {
                let file = open_nofollow(path)?;
                rewrite::apply(
                    BufReader::with_capacity(1 << 20, file),
                    &index,
                    &resolved,
                    w,
                )
            },
            |applied| {
                check(&index, &applied.index, &resolved).map_err(|s| match s {
                    Status::Refused(m) => Refusal::Unsafe(m),
                    other => Refusal::Unsafe(format!("{other:?}")),
                })?;
                if stamp(path)? != locked {
                    return Err(Refusal::Unsafe(
                        "the file changed while it was being rewritten (a concurrent append?); \
                         left as it is"
                            .into(),
                    )
                    .into());
                }
                Ok(())
            },
        )
        .map_err(|e| {
            if e.chain().any(|c| c.downcast_ref::<Refusal>().is_some()) {
                Status::Refused(format!("{e:#}"))
            } else {
                failed(e)
            }
        })?;
    out.bytes_after = applied.bytes_written;
    out.status = Status::Changed;
    Ok(())
}

fn names(temps: &[temps::StaleTemp]) -> String {
    temps
        .iter()
        .map(|t| t.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check(old: &Index, new: &Index, resolved: &Resolved) -> Result<(), Status> {
    let expect = Expectation {
        removed_ids: resolved.removed_ids.clone(),
    };
    validate::validate(old, new, &expect).map_err(|e| Status::Refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const TEXT: &str = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#,
        "\n",
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"assistant","content":"NO_REPLY"}}"#,
        "\n",
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"y"}}"#,
        "\n",
    );
    const APPENDED: &str = "{\"type\":\"custom\",\"id\":\"z\",\"parentId\":\"c\"}\n";

    /// A planner that removes `b` and, like a concurrent writer, appends a line each call.
    fn appending_planner(
        path: PathBuf,
        calls: &AtomicUsize,
    ) -> impl Fn(&Index, &Tree) -> Result<Planned, String> + Sync + '_ {
        move |index: &Index, tree: &Tree| {
            calls.fetch_add(1, Ordering::SeqCst);
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(APPENDED.as_bytes()).unwrap();
            let mut p = Planned::default();
            p.edits.remove.insert(tree.by_id["b"]);
            let _ = index;
            Ok(p)
        }
    }

    #[test]
    fn a_concurrent_append_aborts_the_rewrite_and_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        fs::write(&path, TEXT).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let calls = AtomicUsize::new(0);
        let planner = appending_planner(path.clone(), &calls);
        let opts = Options {
            mode: Mode::Enforce,
            wait_lock: None,
        };
        let out = run_file(&c, &path, opts, &planner);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "re-planned once under the lock"
        );
        match &out.status {
            Status::Refused(m) => {
                assert!(m.contains("changed while it was being rewritten"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let got = fs::read_to_string(&path).unwrap();
        assert_eq!(got, format!("{TEXT}{APPENDED}{APPENDED}"));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp or lock left"
        );
    }

    #[test]
    fn preview_validates_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        fs::write(&path, TEXT).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let planner = |_: &Index, tree: &Tree| {
            let mut p = Planned::default();
            p.edits.remove.insert(tree.by_id["b"]);
            Ok(p)
        };
        let opts = Options {
            mode: Mode::Preview,
            wait_lock: None,
        };
        let out = run_file(&c, &path, opts, &planner);
        assert_eq!(out.status, Status::WouldChange);
        assert_eq!(out.entries_removed, 1);
        assert!(out.bytes_after < out.bytes_before);
        assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn removing_the_leaf_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        fs::write(&path, TEXT).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let planner = |_: &Index, tree: &Tree| {
            let mut p = Planned::default();
            p.edits.remove.insert(tree.by_id["c"]);
            Ok(p)
        };
        let opts = Options {
            mode: Mode::Enforce,
            wait_lock: None,
        };
        let out = run_file(&c, &path, opts, &planner);
        assert!(matches!(out.status, Status::Refused(_)), "{:?}", out.status);
        assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
    }
}
