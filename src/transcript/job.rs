//! One transcript through plan → preview or apply, with every safety rule in one place.
//!
//! [`run_file`] is what `prune-noreply` and `strip-images` (and later `compact`) call per file:
//!
//! 1. refuse symlinks and anything that is not a regular file directly inside the confined
//!    directory; open with `O_NOFOLLOW`;
//! 2. index the file and refuse files the tool cannot edit safely (no session header on the
//!    first line, a v1 header without ids, duplicate ids); `leaf` control records and
//!    side-appended entries of newer runtimes are read as the runtime's loader reads them;
//! 3. ask the planner for [`Edits`]; nothing to do means the file is not touched at all;
//! 4. resolve and stream the rewrite: into a counting sink for a preview (which is validated
//!    exactly like a real run), or, with `enforce`, into a temp file beside the original while
//!    holding OpenClaw's `<file>.lock`; the temp file replaces the original only when the
//!    validator passes and the source's size and mtime are what they were when it was
//!    indexed (a concurrent append aborts that file instead of losing the tail);
//! 5. an append that still slips in between that check and the rename lands in the old
//!    inode, which stays open: it is appended to the new file (or, if that has changed too,
//!    saved beside it as `<name>.tail-<ms>`) and reported.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use thin_vec::ThinVec;

use super::Index;
use super::append::{self, Appended};
use super::estimate::TokenCounter;
use super::rewrite::{self, Edits, Resolved};
use super::tree::Tree;
use super::validate::{self, Expectation};
use super::values::{SNAPSHOT_MAX, Snapshot, SnapshotBuf, Transcript};
use crate::exit::Refusal;
use crate::fsutil::lock::{self, Acquire, SessionLock};
use crate::fsutil::temps;
use crate::fsutil::{Confined, Durable, Staged};

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
    /// Index each file with its entries' token figures, measured with this counter (for
    /// planners that estimate tokens, see [`Index::tokens`]).
    pub measure: Option<TokenCounter>,
}

/// What a planner returns for one file.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub edits: Edits,
    /// Things worth telling the operator (held-back removals, protected images, …).
    pub notes: Vec<String>,
    /// Command-specific facts for the JSON report (e.g. what a compaction kept).
    pub details: Option<serde_json::Value>,
}

impl Planned {
    /// Edits that remove `remove` (entry indices), with one note per entry held back:
    /// "kept `what` on line N: why".
    pub fn removals(
        index: &Index,
        remove: std::collections::BTreeSet<usize>,
        held_back: &[(usize, &str)],
        what: &str,
    ) -> Planned {
        let notes = held_back
            .iter()
            .map(|(i, why)| format!("kept {what} on line {}: {why}", index.entries[*i].line + 1))
            .collect();
        let mut planned = Planned {
            notes,
            ..Planned::default()
        };
        planned.edits.remove = remove;
        planned
    }
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
    Skipped(Cow<'static, str>),
    /// Not processed because the file is damaged or is not a transcript this tool may edit
    /// (empty, no session header, duplicate ids, a symlink): the file was not changed, and
    /// the operator is told on stderr. Not a refusal of the run.
    Damaged(Cow<'static, str>),
    /// Refused: the rewrite failed its validation or met a concurrent writer; the file was
    /// not changed.
    Refused(Cow<'static, str>),
    /// Its lock is held by a live process; the file was not changed.
    Locked(Cow<'static, str>),
    /// An error (I/O); the file was not changed.
    Failed(Cow<'static, str>),
}

/// Why a file is skipped when its store entry names a transcript that is not there (the
/// common case in a big store, whose old entries' files `cleanup` already removed).
pub const NO_FILE: &str = "the file does not exist";

impl Status {
    /// Skipped because the file does not exist ([`NO_FILE`]).
    pub fn is_no_file(&self) -> bool {
        matches!(self, Status::Skipped(why) if why == NO_FILE)
    }
}

/// The per-file report.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub path: PathBuf,
    pub status: Status,
    pub entries_removed: usize,
    pub blocks_replaced: usize,
    /// Media references replaced in text (`strip-images`).
    pub media_refs_replaced: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// 1-based numbers of lines kept as they were because they do not parse.
    pub unparsable_lines: ThinVec<usize>,
    pub notes: ThinVec<String>,
    /// [`Planned::details`] of the last plan (boxed: most outcomes have none, and a store of
    /// many entries has an outcome each).
    pub details: Option<Box<serde_json::Value>>,
    /// The change writes a new file beside this one and leaves this one on disk (for
    /// `cleanup` to age out): `bytes_before - bytes_after` is freed only then, not by this run.
    pub old_file_kept: bool,
}

impl Outcome {
    /// End with `status` instead of the planned change: nothing of the plan counts.
    pub fn fail(&mut self, status: Status) {
        self.status = status;
        self.bytes_after = self.bytes_before;
        self.entries_removed = 0;
        self.blocks_replaced = 0;
        self.media_refs_replaced = 0;
        self.old_file_kept = false;
    }

    pub fn new(path: impl Into<PathBuf>, status: Status) -> Outcome {
        Outcome {
            path: path.into(),
            status,
            entries_removed: 0,
            blocks_replaced: 0,
            media_refs_replaced: 0,
            bytes_before: 0,
            bytes_after: 0,
            unparsable_lines: ThinVec::new(),
            notes: ThinVec::new(),
            details: None,
            old_file_kept: false,
        }
    }
}

/// Why a planner leaves a transcript alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Its rule refuses this transcript (reported as skipped, with the reason).
    #[error("{0}")]
    Skip(String),
    /// A line the plan must read nests too deep to parse (reported as refused).
    #[error(transparent)]
    TooDeep(#[from] crate::jsjson::TooDeep),
}

impl PlanError {
    /// A planning step that failed with `e`: too deep when that is what it is, else skipped
    /// with the error's text.
    pub fn from_error(e: anyhow::Error) -> PlanError {
        match e.downcast::<crate::jsjson::TooDeep>() {
            Ok(deep) => PlanError::TooDeep(deep),
            Err(e) => PlanError::Skip(format!("{e:#}")),
        }
    }
}

/// A planner: from an index and its tree to edits, or a reason to leave the file alone.
pub type Planner<'a> = dyn Fn(&Index, &Tree) -> Result<Planned, PlanError> + Sync + 'a;

/// A planner that also reads the transcript back (e.g. the entries' full content, see
/// [`super::values`]): it gets what was indexed, a file or a session's rows.
pub type PlannerAt<'a> =
    dyn Fn(&dyn Transcript, &Index, &Tree) -> Result<Planned, PlanError> + Sync + 'a;

/// Process one transcript. Never returns an error: every failure is an [`Outcome`] status.
pub fn run_file(confined: &Confined, path: &Path, opts: Options, planner: &Planner) -> Outcome {
    run_file_at(confined, path, opts, &|_, index, tree| planner(index, tree))
}

/// [`run_file`] with a planner that reads the file itself.
pub fn run_file_at(
    confined: &Confined,
    path: &Path,
    opts: Options,
    planner: &PlannerAt,
) -> Outcome {
    stage_file_at(confined, path, opts, planner).finish_alone()
}

/// Size and modification time: what a concurrent append changes.
pub fn stamp(path: &Path) -> io::Result<(u64, Option<SystemTime>)> {
    let m = fs::symlink_metadata(path)?;
    Ok((m.len(), m.modified().ok()))
}

/// [`stamp`] of a file in the confined directory (never through a symlink, and only there,
/// whatever its path leads to now).
fn stamp_in(confined: &Confined, path: &Path) -> Result<(u64, Option<SystemTime>)> {
    let st = confined
        .stat(path)?
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        .with_context(|| format!("cannot stat {}", path.display()))?;
    Ok((st.len, st.modified()))
}

/// The status of a file its planner gave up on: skipped with the reason, or refused when a
/// line nests too deep to be read (the runtime reads it: the file is not damaged, but
/// clawkeeper will not edit what it cannot read in full).
pub fn planner_status(why: PlanError) -> Status {
    match why {
        PlanError::Skip(why) => Status::Skipped(why.into()),
        PlanError::TooDeep(deep) => Status::Refused(deep.to_string().into()),
    }
}

/// The status of a file whose processing stopped with `e`: failed, or refused when a line
/// nests too deep to be edited (the file is left as it is).
pub fn failed(e: anyhow::Error) -> Status {
    match e
        .chain()
        .find_map(|c| c.downcast_ref::<crate::jsjson::TooDeep>())
    {
        Some(deep) => Status::Refused(deep.to_string().into()),
        None => Status::Failed(format!("{e:#}").into()),
    }
}

/// A plan ready to apply: a general rewrite (with the file's bytes as indexed, when they are
/// held: see [`index_checked`]), or an append-only one (see [`super::append`]).
enum Prepared {
    Rewrite(Index, Resolved, Option<SnapshotBuf>),
    Append(Index, Appended),
}

/// Index and plan; `Ok(None)` when there is nothing to do.
fn prepare(
    confined: &Confined,
    path: &Path,
    measure: Option<TokenCounter>,
    planner: &PlannerAt,
    out: &mut Outcome,
) -> Result<Option<Prepared>, Status> {
    let (index, mut tree, bytes) = index_checked(confined, path, measure, out)?;
    let edits = match &bytes {
        Some(bytes) => ask(planner, &Snapshot { path, bytes }, &index, &tree, out)?,
        None => ask(planner, &path, &index, &tree, out)?,
    };
    let Some(edits) = edits else {
        return Ok(None);
    };
    if edits.only_appends() {
        let (lines, ids) = append::lines_of(&index, &tree, &edits.append)
            .map_err(|e| Status::Refused(format!("{e:#}").into()))?;
        let keeps_from = edits
            .append
            .last()
            .filter(|v| v.get("type").and_then(|t| t.as_str()) == Some("compaction"))
            .and_then(|v| v.get("firstKeptEntryId")?.as_str());
        let (index, appended) = append::prepare(index, &mut tree, lines, ids, keeps_from)
            .map_err(|e| Status::Refused(e.to_string().into()))?;
        return Ok(Some(Prepared::Append(index, appended)));
    }
    let resolved = resolve_counted(&index, &tree, edits, out)?;
    Ok(Some(Prepared::Rewrite(index, resolved, bytes)))
}

/// Ask `planner` for its edits of `transcript` (indexed as `index` and `tree`), taking its
/// notes and details into `out`; `None` when it edits nothing.
pub fn ask(
    planner: &PlannerAt,
    transcript: &dyn Transcript,
    index: &Index,
    tree: &Tree,
    out: &mut Outcome,
) -> Result<Option<Edits>, Status> {
    let planned = planner(transcript, index, tree).map_err(planner_status)?;
    out.notes.extend(planned.notes);
    out.details = planned.details.map(Box::new);
    Ok((!planned.edits.is_empty()).then_some(planned.edits))
}

/// Resolve `edits` into per-line actions (refused when the rewrite would not be safe),
/// counting in `out` what they remove and replace.
pub fn resolve_counted(
    index: &Index,
    tree: &Tree,
    edits: Edits,
    out: &mut Outcome,
) -> Result<Resolved, Status> {
    let resolved = rewrite::resolve(index, tree, edits)
        .map_err(|e| Status::Refused(format!("{e:#}").into()))?;
    out.entries_removed = resolved.removed;
    out.blocks_replaced = resolved.blocks_replaced;
    out.media_refs_replaced = resolved.media_refs_replaced;
    Ok(resolved)
}

/// Index the file (without following a symlink; with token figures measured with `measure`,
/// if given) and refuse what this tool does not edit: no session header, a v1 file,
/// duplicate ids. Fills the byte and unparsable-line fields of `out`. A file of at most
/// [`SNAPSHOT_MAX`] bytes is read whole and its bytes are returned with the index: what a
/// rewrite copies then comes from them, not from a second read of the file.
pub fn index_checked(
    confined: &Confined,
    path: &Path,
    measure: Option<TokenCounter>,
    out: &mut Outcome,
) -> Result<(Index, Tree, Option<SnapshotBuf>), Status> {
    let (len, _) = stamp_in(confined, path).map_err(failed)?;
    let file = confined.open_read(path).map_err(failed)?;
    let unreadable = || format!("cannot read {}", path.display());
    let (index, bytes) = if len <= SNAPSHOT_MAX {
        let mut bytes = SnapshotBuf::take();
        bytes.reserve(len as usize);
        crate::fsutil::read_up_to(&file, &mut bytes, len)
            .with_context(unreadable)
            .map_err(failed)?;
        (Index::from_bytes_measuring(&bytes, measure), Some(bytes))
    } else {
        let index = Index::from_reader_measuring(io::Read::take(file, len), measure)
            .with_context(unreadable)
            .map_err(failed)?;
        (index, None)
    };
    let tree = check_editable(&index, out)?;
    Ok((index, tree, bytes))
}

/// Refuse what this tool does not edit (see [`index_checked`]) in an index of the file as it
/// is now; fills the byte and unparsable-line fields of `out` and returns the tree.
pub fn check_editable(index: &Index, out: &mut Outcome) -> Result<Tree, Status> {
    refuse_uneditable(index, out)?;
    let tree = Tree::build(index);
    refuse_duplicate_ids(&tree)?;
    Ok(tree)
}

/// [`check_editable`] with the tree of `index` already built.
pub fn check_editable_with(index: &Index, tree: &Tree, out: &mut Outcome) -> Result<(), Status> {
    refuse_uneditable(index, out)?;
    refuse_duplicate_ids(tree)
}

fn refuse_duplicate_ids(tree: &Tree) -> Result<(), Status> {
    match tree.duplicate_ids.first() {
        Some(id) => Err(Status::Damaged(
            format!("entry id {id} occurs more than once").into(),
        )),
        None => Ok(()),
    }
}

/// The checks of [`check_editable`] that need no tree.
fn refuse_uneditable(index: &Index, out: &mut Outcome) -> Result<(), Status> {
    out.bytes_before = index.size;
    out.bytes_after = index.size;
    out.unparsable_lines = index.unparsable_line_numbers().into();
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
        None if index.size == 0 => {
            return Err(Status::Damaged(
                "the file is empty (no session header)".into(),
            ));
        }
        None => {
            return Err(Status::Damaged(
                "the first line is not a session header; not editing".into(),
            ));
        }
        Some(h) if h.version().is_none_or(|v| v < 2) => {
            return Err(Status::Skipped(
                "version 1 transcript (entries have no ids); the runtime migrates it on open"
                    .into(),
            ));
        }
        Some(_) => {}
    }
    Ok(())
}

/// What a preview of `planner` would find, for a file already indexed by the caller (`index`
/// must describe the file as it is now, `tree` is its tree) and already found a target by
/// [`check_target`] (a report predicting several commands on one file checks it once): the
/// same refusals, plan and resolution as [`run_file`], with `bytes_after` computed by
/// [`rewrite::predicted_size`], which reads back only the lines the plan patches. No
/// validation pass and no lock: this is for reports that predict many files at once
/// (`inspect`), not for writing. `bytes`: the file as the index was built from it, when the
/// caller still holds it (what the planner and the size read back is then read from it, not
/// from the file).
pub fn predict(
    confined: &Confined,
    path: &Path,
    bytes: Option<&[u8]>,
    index: &Index,
    tree: &Tree,
    planner: &Planner,
) -> Outcome {
    predict_at(confined, path, bytes, index, tree, &|_, i, t| planner(i, t))
}

/// [`predict`] with a planner that also reads the file (see [`PlannerAt`]).
pub fn predict_at(
    confined: &Confined,
    path: &Path,
    bytes: Option<&[u8]>,
    index: &Index,
    tree: &Tree,
    planner: &PlannerAt,
) -> Outcome {
    let mut out = Outcome::new(path, Status::Unchanged);
    if let Err(status) = predict_inner(confined, path, bytes, index, tree, planner, &mut out) {
        out.fail(status);
    }
    out
}

fn predict_inner(
    confined: &Confined,
    path: &Path,
    bytes: Option<&[u8]>,
    index: &Index,
    tree: &Tree,
    planner: &PlannerAt,
    out: &mut Outcome,
) -> Result<(), Status> {
    check_editable_with(index, tree, out)?;
    match bytes {
        Some(bytes) => {
            let snapshot = Snapshot { path, bytes };
            predict_sized(planner, &snapshot, index, tree, out, &mut |resolved| {
                rewrite::predicted_size(bytes, index, resolved).map_err(failed)
            })
        }
        None => predict_sized(planner, &path, index, tree, out, &mut |resolved| {
            let file = confined.open_read(path).map_err(failed)?;
            rewrite::predicted_size(&file, index, resolved).map_err(failed)
        }),
    }
}

/// The part of a preview without a validation pass that a file and a session's rows share,
/// once the transcript is checked: `planner`'s edits resolved and counted in `out`, and the
/// size `size_after` gives the rewrite (what is stored differs: file lines or rows).
pub fn predict_sized(
    planner: &PlannerAt,
    transcript: &dyn Transcript,
    index: &Index,
    tree: &Tree,
    out: &mut Outcome,
    size_after: &mut dyn FnMut(&Resolved) -> Result<u64, Status>,
) -> Result<(), Status> {
    let Some(edits) = ask(planner, transcript, index, tree, out)? else {
        return Ok(());
    };
    let resolved = resolve_counted(index, tree, edits, out)?;
    out.bytes_after = size_after(&resolved)?;
    out.status = Status::WouldChange;
    Ok(())
}

/// The target must be a regular file (not a symlink) inside the confined directory.
pub fn check_target(confined: &Confined, path: &Path) -> Result<(), Status> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Status::Skipped(NO_FILE.into()));
        }
        Err(e) => return Err(failed(anyhow::Error::from(e))),
    };
    if meta.file_type().is_symlink() {
        return Err(Status::Damaged(
            "it is a symlink; symlinks are never followed".into(),
        ));
    }
    if !meta.is_file() {
        return Err(Status::Damaged(
            format!(
                "not a regular file but {}",
                crate::fsutil::describe_type(&meta)
            )
            .into(),
        ));
    }
    confined
        .check(path)
        .map_err(|e| Status::Refused(format!("{e:#}").into()))?;
    Ok(())
}

/// A rewrite written to its temp file and validated, holding the file's lock: it waits for
/// its batch's temps to be made durable ([`Staging::make_durable`]) and is then put in place
/// by [`Ready::finish`]. Dropped unfinished, it removes its temp and releases the lock, and
/// the file stays as it was.
#[derive(Debug)]
pub struct Pending {
    staged: Staged,
    held: Holding,
}

/// A [`Pending`] rewrite after its temp was synced (or failed to be): only a durable temp is
/// ever put in place (only [`Durable`] has a commit).
#[derive(Debug)]
pub struct Ready {
    durable: Result<Durable>,
    held: Holding,
}

/// What a rewrite holds from its lock to its rename.
#[derive(Debug)]
struct Holding {
    out: Outcome,
    confined: Confined,
    /// The original inode, kept open: a writer that appends between the last check and the
    /// rename writes into it, and [`carry_tail`] carries that tail over.
    old: File,
    /// Size and mtime when the lock was taken: the file must still have them at the rename.
    locked: (u64, Option<SystemTime>),
    _lock: SessionLock,
}

/// How far [`stage_file_at`] took a file.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // a batch holds at most a few hundred, never boxed apart
pub enum Staging {
    /// Nothing left to do: a preview, nothing to change, or a refusal or failure.
    Done(Outcome),
    /// A rewrite waiting for its batch (see [`Pending`]).
    Pending(Pending),
}

/// The first half of [`run_file_at`]: plan the file and, with `--enforce`, take its lock and
/// write and validate the rewrite into a temp file beside it, without making it durable or
/// putting it in place. A batch of files is staged, its temps are made durable together,
/// then each is finished: a crash at any moment leaves every file old or new.
pub fn stage_file_at(
    confined: &Confined,
    path: &Path,
    opts: Options,
    planner: &PlannerAt,
) -> Staging {
    let mut out = Outcome::new(path, Status::Unchanged);
    match stage_inner(confined, path, opts, planner, &mut out) {
        Err(status) => {
            out.fail(status);
            Staging::Done(out)
        }
        Ok(None) => Staging::Done(out),
        Ok(Some(held)) => Staging::Pending(Pending {
            staged: held.staged,
            held: Holding {
                out,
                confined: confined.clone(),
                old: held.old,
                locked: held.locked,
                _lock: held.lock,
            },
        }),
    }
}

impl Staging {
    /// Finish a single file on its own: make its temp durable and put it in place.
    pub fn finish_alone(self) -> Outcome {
        self.make_durable().finish()
    }

    /// fsync a pending rewrite's temp (a batch does this for all its files, in parallel,
    /// before it finishes any of them); a done file stays as it is.
    pub fn make_durable(self) -> Synced {
        match self {
            Staging::Done(out) => Synced::Done(out),
            Staging::Pending(p) => Synced::Ready(Ready {
                durable: p.staged.make_durable(),
                held: p.held,
            }),
        }
    }
}

/// A [`Staging`] after its temp was synced: the last step of a file.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // as `Staging`
pub enum Synced {
    Done(Outcome),
    Ready(Ready),
}

impl Synced {
    /// The file's outcome, putting a ready rewrite in place ([`Ready::finish`]).
    pub fn finish(self) -> Outcome {
        match self {
            Synced::Done(out) => out,
            Synced::Ready(r) => r.finish(),
        }
    }
}

impl Ready {
    /// Put the rewrite in place if its temp is durable: the original must still have the
    /// size and mtime it had when locked (a concurrent append aborts the file instead of
    /// losing its tail). Then release the lock. Whatever fails, the file is left as it was
    /// and the temp is removed.
    pub fn finish(self) -> Outcome {
        let Holding {
            mut out,
            confined,
            old,
            locked,
            _lock,
        } = self.held;
        let path = out.path.clone();
        let renamed = self.durable.map_err(failed).and_then(|durable| {
            if stamp_in(&confined, &path).map_err(failed)? != locked {
                return Err(Status::Refused(
                    "the file changed while it was being rewritten (a concurrent append?); \
                     left as it is"
                        .to_owned()
                        .into(),
                ));
            }
            durable.commit().map_err(failed)
        });
        match renamed {
            Err(status) => out.fail(status),
            Ok(()) => {
                out.status = Status::Changed;
                if let Some(note) = carry_tail(&confined, &path, &old, locked.0, out.bytes_after) {
                    out.notes.push(note);
                }
            }
        }
        out
    }
}

/// What a staged rewrite holds until its batch finishes it.
struct Held {
    staged: Staged,
    old: File,
    locked: (u64, Option<SystemTime>),
    lock: SessionLock,
}

fn stage_inner(
    confined: &Confined,
    path: &Path,
    opts: Options,
    planner: &PlannerAt,
    out: &mut Outcome,
) -> Result<Option<Held>, Status> {
    check_target(confined, path)?;
    let before = stamp_in(confined, path).map_err(failed)?;
    let Some(mut prepared) = prepare(confined, path, opts.measure, planner, out)? else {
        return Ok(None);
    };
    if opts.mode == Mode::Preview {
        preview(confined, path, prepared, out)?;
        return Ok(None);
    }
    let lock = match lock::acquire(confined, path, opts.wait_lock).map_err(failed)? {
        Acquire::Locked(l) => l,
        Acquire::Busy(holder) => return Err(Status::Locked(holder.to_string().into())),
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
    let locked = stamp_in(confined, path).map_err(failed)?;
    if locked != before {
        let again = prepare(confined, path, opts.measure, planner, out);
        out.notes.extend(swept_note);
        match again? {
            Some(p) => prepared = p,
            None => return Ok(None),
        }
    }
    let old = confined.open_read(path).map_err(failed)?;
    let (staged, written) = write(confined, path, prepared)?;
    out.bytes_after = written;
    Ok(Some(Held {
        staged,
        old,
        locked,
        lock,
    }))
}

/// A preview: what the rewrite would write (validated like a real run, into a counting
/// sink), temps a killed run left, and a lock that `--enforce` would wait for.
fn preview(
    confined: &Confined,
    path: &Path,
    prepared: Prepared,
    out: &mut Outcome,
) -> Result<(), Status> {
    if let Ok(stale) = temps::stale_temps(confined, path)
        && !stale.is_empty()
    {
        out.notes.push(format!(
            "{} temp file(s) left by a killed run would be removed: {}",
            stale.len(),
            names(&stale)
        ));
    }
    out.bytes_after = match prepared {
        // Validated in `prepare`; the result is the file plus the new lines.
        Prepared::Append(_, appended) => appended.bytes_after(),
        Prepared::Rewrite(index, resolved, bytes) => {
            let expect = expectation(&resolved);
            let mut sink = io::sink();
            let applied = apply_from(
                confined,
                path,
                bytes.as_deref().map(Vec::as_slice),
                &index,
                &resolved,
                &mut sink,
            )
            .map_err(failed)?;
            drop(resolved);
            check_expected(&index, &applied.index, &expect)?;
            applied.bytes_written
        }
    };
    out.status = Status::WouldChange;
    if let Ok(Some(holder)) = lock::live_holder(confined, path) {
        out.notes.push(format!(
            "{holder}; --enforce would skip it while the lock is held"
        ));
    }
    Ok(())
}

/// Write the prepared rewrite into a temp file beside the original and validate it; the temp
/// and the bytes written.
fn write(confined: &Confined, path: &Path, prepared: Prepared) -> Result<(Staged, u64), Status> {
    match prepared {
        Prepared::Append(index, appended) => confined
            .stage_verified(path, 0o600, |w: &mut dyn Write| {
                let file = confined.open_read(path)?;
                append::copy_verified(
                    BufReader::with_capacity(1 << 20, file),
                    &index,
                    &appended,
                    w,
                )
            })
            .map_err(write_failed),
        Prepared::Rewrite(index, resolved, bytes) => {
            let expect = expectation(&resolved);
            let (staged, applied) = confined
                .stage_verified(path, 0o600, |w: &mut dyn Write| {
                    apply_from(
                        confined,
                        path,
                        bytes.as_deref().map(Vec::as_slice),
                        &index,
                        &resolved,
                        w,
                    )
                })
                .map_err(write_failed)?;
            drop(resolved);
            check_expected(&index, &applied.index, &expect)?;
            Ok((staged, applied.bytes_written))
        }
    }
}

/// [`rewrite::apply`] from the file's bytes as indexed when they are held, else from the file.
fn apply_from(
    confined: &Confined,
    path: &Path,
    bytes: Option<&[u8]>,
    index: &Index,
    resolved: &Resolved,
    out: &mut dyn Write,
) -> Result<rewrite::Applied> {
    match bytes {
        Some(bytes) => rewrite::apply_bytes(bytes, index, resolved, out),
        None => rewrite::apply(confined.open_read(path)?, index, resolved, out),
    }
}

/// The status of a rewrite that could not be written: refused when the source turned out to
/// have changed under it (see [`append::copy_verified`]), else failed.
fn write_failed(e: anyhow::Error) -> Status {
    if e.chain().any(|c| c.downcast_ref::<Refusal>().is_some()) {
        Status::Refused(format!("{e:#}").into())
    } else {
        failed(e)
    }
}

/// After the rename: if the old inode grew past `indexed_len` (an append that raced with the
/// rename), append those bytes to the new file when nothing else has touched it yet, else
/// save them beside it as `<name>.tail-<ms>` so they are never lost.
fn carry_tail(
    confined: &Confined,
    path: &Path,
    old: &File,
    indexed_len: u64,
    written: u64,
) -> Option<String> {
    let len = old.metadata().ok()?.len();
    if len <= indexed_len {
        return None;
    }
    let mut tail = Vec::new();
    let read = (|| -> io::Result<()> {
        let mut f = old.try_clone()?;
        io::Seek::seek(&mut f, io::SeekFrom::Start(indexed_len))?;
        io::Read::read_to_end(&mut io::Read::take(f, len - indexed_len), &mut tail)?;
        Ok(())
    })();
    if let Err(e) = read {
        return Some(format!(
            "{} bytes were appended during the replace and could not be read back: {e}",
            len - indexed_len
        ));
    }
    match confined.append_if_len(path, written, &tail) {
        Ok(true) => Some(format!(
            "carried over {} bytes appended during the replace",
            tail.len()
        )),
        _ => {
            let mut name = path.file_name().unwrap_or_default().to_owned();
            name.push(format!(".tail-{}", crate::js::now_ms() as u64));
            let side = path.with_file_name(name);
            match confined.write_atomic(&side, 0o600, |w| w.write_all(&tail)) {
                Ok(()) => Some(format!(
                    "{} bytes appended during the replace were saved to {}",
                    tail.len(),
                    side.display()
                )),
                Err(e) => Some(format!(
                    "{} bytes appended during the replace could not be saved: {e:#}",
                    tail.len()
                )),
            }
        }
    }
}

fn names(temps: &[temps::StaleTemp]) -> String {
    temps
        .iter()
        .map(|t| t.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Validate a rewrite: `new` (the index of what was written) against `old` under `resolved`,
/// with the same expectations for a file and for the rows of an agent database.
pub fn check(old: &Index, new: &Index, resolved: &Resolved) -> Result<(), Status> {
    check_expected(old, new, &expectation(resolved))
}

/// What the validator expects of a rewrite resolved as `resolved`. Taken before the rewrite
/// is written, so that the per-line actions can be freed before the validator indexes both
/// versions (a big transcript has one action per line).
fn expectation(resolved: &Resolved) -> Expectation {
    // An appended compaction (as the last line) changes the context in a known way: its
    // summary, then the old context from its `firstKeptEntryId` on.
    let compaction_keeps_from = resolved
        .append
        .last()
        .and_then(|l| crate::jsjson::parse(l.as_bytes()).ok())
        .filter(|v| v.get("type").and_then(|t| t.as_str()) == Some("compaction"))
        .and_then(|v| v.get("firstKeptEntryId")?.as_str().map(str::to_owned));
    Expectation {
        appended_ids: resolved.appended_ids.clone(),
        check_context: resolved.appended_ids.is_empty() || compaction_keeps_from.is_some(),
        compaction_keeps_from,
        ..Expectation::removals(resolved.removed_ids.clone())
    }
}

/// [`check`] with the expectation already taken.
fn check_expected(old: &Index, new: &Index, expect: &Expectation) -> Result<(), Status> {
    validate::validate(old, new, expect).map_err(|e| Status::Refused(e.to_string().into()))
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
