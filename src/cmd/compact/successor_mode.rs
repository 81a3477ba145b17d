//! `compact --successor`: write a successor transcript instead of appending, as the runtime's
//! truncate-after-compaction does, and point the store entry at it.
//!
//! Phase 1, per store entry in parallel, under the transcript's lock: index and check the file
//! as the other transcript commands do (files with unparsable lines are refused, since a
//! successor could not carry them), plan the compaction, and write the successor beside the old
//! file (checked before it is renamed into place). The lock stays held.
//!
//! Phase 2, per store, once: check that no old transcript changed meanwhile, load the store,
//! switch every entry that still points at its old file (`sessionId`, `sessionFile`,
//! `compactionCount + 1`) and save it in one atomic write, guarded against a store that changed
//! since it was loaded (then it is loaded again and the switches re-applied, a few times). So
//! many sessions of one store never race each other for `sessions.json`, and no switch
//! overwrites another. A successor whose switch did not land is removed again; one that cannot
//! be removed is reported by path (status failed) rather than left behind silently. The old
//! files are never touched; `cleanup` reclaims them later.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Result;
use rayon::prelude::*;
use serde_json::{Value, json};

use crate::json::Json;

use super::{External, describe, details, use_external};
use crate::cli::{ModeArgs, TranscriptTargetArgs};
use crate::cmd::transcript_targets::{self, Target};
use crate::cmd::transcripts::{self, Labels};
use crate::compact::plan::{Compaction, Settings};
use crate::compact::successor_plan::{self, PathEntry};
use crate::compact::{facts, load, rotate};
use crate::exit::Exit;
use crate::fsutil::Confined;
use crate::fsutil::lock::{self, Acquire, SessionLock};
use crate::progress::{self, Progress};
use crate::store;
use crate::transcript::job::{self, Outcome, Status};
use crate::transcript::tree::Tree;
use crate::transcript::tree::{self, ContextItem};
use crate::transcript::values::EntryReader;
use crate::transcript::{Index, IndexBuilder};

/// The confinement of each directory of the run, made once.
type Dirs = std::collections::HashMap<PathBuf, Result<Confined, String>>;

/// The directory of a `sessions.json`.
fn store_dir(store_path: &Path) -> &Path {
    match store_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The confinement of `dir` made for this run.
fn confined_for(dirs: &Dirs, dir: &Path) -> Result<Confined, String> {
    match dirs.get(dir) {
        Some(c) => c.clone(),
        None => Err(format!("{} was not resolved for this run", dir.display())),
    }
}

/// Why `--successor` leaves a SQLite-era agent's database alone.
fn not_for_rows(d: &transcript_targets::Database) -> String {
    format!(
        "{}: refused, nothing written: compact --successor is not supported yet for an agent \
         that keeps its transcripts in its database (agent {:?}); compact it in place \
         (without --successor)",
        d.db.display(),
        d.agent_id
    )
}

/// Run-wide settings of a successor run.
pub(super) struct Run<'a> {
    pub settings: &'a Settings,
    pub external: Option<&'a External>,
    pub enforce: bool,
    pub wait_lock: Option<Duration>,
    pub now: &'a str,
}

pub(super) fn run(
    targets: &TranscriptTargetArgs,
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    run: &Run,
) -> Result<Exit> {
    let mut problems = crate::cmd::problems::Problems::default();
    let resolved = transcript_targets::resolve_with_rows(targets, &mut problems)?;
    // Not built for transcript rows: such an agent is refused, never passed over in silence.
    for d in &resolved.databases {
        problems.add(Exit::Refused, not_for_rows(d));
    }
    // Every directory is resolved and confined once for the run: the transcripts' and the
    // stores' (whose entries are switched in phase 2).
    let resolved_dirs = crate::cmd::resolved::of_targets(&resolved.targets);
    crate::cmd::resolved::announce(&resolved_dirs, run.enforce, mode.quiet);
    let mut dirs = Dirs::new();
    for t in &resolved.targets {
        for d in [Some(t.dir.as_path()), t.store.as_deref().map(store_dir)]
            .into_iter()
            .flatten()
        {
            // Not deferring directory syncs: a successor must be durable before the store
            // points at it.
            dirs.entry(d.to_path_buf())
                .or_insert_with(|| Confined::new(d).map_err(|e| format!("{e:#}")));
        }
    }
    let size = |p: &std::path::Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
    let sizes: Vec<u64> = resolved.targets.iter().map(|t| size(&t.path)).collect();
    let progress = Progress::bytes(
        sizes.iter().sum(),
        labels.command,
        progress::wanted(mode.json, mode.quiet),
    );
    // Phase 1, in parallel: plan and write every successor (each under its transcript's lock,
    // which is held until its store entry is switched).
    let plan_all = || -> Vec<(Outcome, Option<String>, Option<Pending>)> {
        resolved
            .targets
            .par_iter()
            .zip(&sizes)
            .map(|(t, bytes)| {
                let mut out = Outcome::new(&t.path, Status::Unchanged);
                let pending = match prepare(t, run, &dirs, &mut out) {
                    Ok(p) => p,
                    Err(status) => {
                        out.status = status;
                        out.bytes_after = out.bytes_before;
                        None
                    }
                };
                progress.inc(*bytes);
                (out, t.session_key.clone(), pending)
            })
            .collect()
    };
    let prepared = if run.enforce {
        crate::cmd::transcripts::writer_pool(resolved.targets.len())?.install(plan_all)
    } else {
        plan_all()
    };
    progress.finish();
    // Phase 2, per store: one atomic write that switches every entry at once.
    let mut results = Vec::with_capacity(prepared.len() + resolved.skipped.len());
    let mut by_store: BTreeMap<PathBuf, Vec<(usize, Pending)>> = BTreeMap::new();
    for (i, (out, key, pending)) in prepared.into_iter().enumerate() {
        results.push((out, key));
        if let Some(p) = pending {
            by_store.entry(p.store.clone()).or_default().push((i, p));
        }
    }
    for (store_path, group) in by_store {
        commit(&store_path, &dirs, group, &mut results);
    }
    results.extend(resolved.skipped);
    transcripts::report(mode, labels, count, &results, &resolved_dirs, problems)
}

/// A successor on disk whose store entry is not switched yet.
struct Pending {
    store: PathBuf,
    key: String,
    old: PathBuf,
    /// The old transcript's size and mtime when it was indexed.
    old_stamp: (u64, Option<SystemTime>),
    rotated: rotate::Rotated,
    confined: Confined,
    _lock: SessionLock,
}

/// How often the store is loaded again when another writer changed it between our load and
/// our write (each attempt re-checks every entry on the fresh store).
const STORE_ATTEMPTS: usize = 5;

/// Switch the entries of one store to their successors in a single atomic write. Successors
/// whose switch did not land are removed again (the old transcripts were never touched); one
/// that cannot be removed is reported by path.
fn commit(
    store_path: &Path,
    dirs: &Dirs,
    group: Vec<(usize, Pending)>,
    results: &mut [(Outcome, Option<String>)],
) {
    let mut live = Vec::with_capacity(group.len());
    for (i, p) in group {
        match job::stamp(&p.old) {
            Ok(s) if s == p.old_stamp => live.push((i, p)),
            Ok(_) => undo(
                &mut results[i].0,
                p,
                Status::Refused(
                    "the transcript changed while the successor was written; its store entry was not switched"
                        .into(),
                ),
            ),
            Err(e) => undo(&mut results[i].0, p, job::failed(e.into())),
        }
    }
    if live.is_empty() {
        return;
    }
    let dir = store_dir(store_path);
    let confined = match confined_for(dirs, dir) {
        Ok(c) => c,
        Err(why) => {
            for (i, p) in live {
                undo(&mut results[i].0, p, Status::Failed(why.clone().into()));
            }
            return;
        }
    };
    for attempt in 1..=STORE_ATTEMPTS {
        let mut loaded = match store::load(store_path) {
            Ok(l) => l,
            Err(e) => {
                let why = format!("{e:#}");
                for (i, p) in live {
                    undo(&mut results[i].0, p, Status::Refused(why.clone().into()));
                }
                return;
            }
        };
        let mut switched = Vec::with_capacity(live.len());
        for (i, p) in live {
            match switch_entry(&mut loaded.store, dir, store_path, &p) {
                Ok(()) => switched.push((i, p)),
                Err(why) => undo(&mut results[i].0, p, Status::Refused(why.into())),
            }
        }
        if switched.is_empty() {
            return;
        }
        match store::save(&confined, store_path, &loaded.store, false, loaded.stamp) {
            Ok(_) => {
                for (i, p) in switched {
                    done(&mut results[i].0, p);
                }
                return;
            }
            // Another writer changed the store after we loaded it: load it again.
            Err(_) if attempt < STORE_ATTEMPTS && store::stamp(store_path) != loaded.stamp => {
                std::thread::sleep(Duration::from_millis(20 * attempt as u64));
                live = switched;
            }
            Err(e) => {
                let why = format!("{e:#}");
                for (i, p) in switched {
                    undo(&mut results[i].0, p, Status::Refused(why.clone().into()));
                }
                return;
            }
        }
    }
}

/// The store entry now points at the successor.
fn done(out: &mut Outcome, p: Pending) {
    out.status = Status::Changed;
    out.bytes_after = p.rotated.bytes_written;
    out.old_file_kept = true;
    out.notes.push(format!(
        "wrote successor {} ({} entries); {} now points at it; the old file stays for cleanup",
        p.rotated.path.display(),
        p.rotated.entries_written,
        p.key
    ));
    if let Some(Value::Object(d)) = out.details.as_deref_mut() {
        d.insert("successorSessionId".into(), json!(p.rotated.session_id));
        d.insert(
            "successorFile".into(),
            json!(p.rotated.path.display().to_string()),
        );
    }
}

/// The store entry was not switched: remove the successor again (the old transcript was never
/// touched). A successor that cannot be removed is named, so it is not left behind silently.
fn undo(out: &mut Outcome, p: Pending, status: Status) {
    out.bytes_after = out.bytes_before;
    out.old_file_kept = false;
    let file = p.rotated.path.display().to_string();
    match p.confined.remove_file(&p.rotated.path) {
        Ok(_) => {
            out.status = status;
            out.notes.push(format!(
                "removed the successor {file} again; {} and the old transcript are unchanged",
                p.key
            ));
        }
        Err(e) => {
            let why = match &status {
                Status::Refused(r) | Status::Failed(r) | Status::Skipped(r) | Status::Locked(r) => {
                    r.clone()
                }
                _ => String::new().into(),
            };
            out.status = Status::Failed(format!(
                "{why}; the successor {file} could not be removed ({e:#}) and no store entry points at it: delete it by hand"
            ).into());
            if let Some(Value::Object(d)) = out.details.as_deref_mut() {
                d.insert("successorFile".into(), json!(file));
                d.insert("successorUnreferenced".into(), json!(true));
            }
        }
    }
}

/// Plan one transcript and, with `--enforce`, write its successor (checked and renamed into
/// place); the store entry is switched later by [`commit`].
fn prepare(
    t: &Target,
    run: &Run,
    dirs: &Dirs,
    out: &mut Outcome,
) -> Result<Option<Pending>, Status> {
    let (Some(store_path), Some(key)) = (&t.store, &t.session_key) else {
        return Err(Status::Refused("--successor needs a store entry".into()));
    };
    let sqlite = crate::targets::sqlite_marker_of_dir(&t.dir);
    if let (Some(db), true) = (&sqlite, run.enforce) {
        return Err(Status::Refused(transcripts::moved_to_sqlite(db).into()));
    }
    let confined = confined_for(dirs, &t.dir).map_err(|e| Status::Failed(e.into()))?;
    job::check_target(&confined, &t.path)?;
    let lock = if run.enforce {
        Some(lock_transcript(&confined, &t.path, run.wait_lock)?)
    } else {
        None
    };
    let before = job::stamp(&t.path).map_err(|e| job::failed(e.into()))?;
    let (index, tree) = index_whole(&confined, &t.path, run, out)?;
    let moved = sqlite.as_deref().map(transcripts::moved_to_sqlite);
    let Some((c, scan)) = plan_compaction(&t.path, &index, &tree, run, moved, out)? else {
        return Ok(None);
    };
    let Some(lock) = lock else {
        out.status = Status::WouldChange;
        out.old_file_kept = true;
        out.notes.push(format!(
            "would write a successor transcript and point {key} at it; the old file stays"
        ));
        return Ok(None);
    };
    let rotated = write_successor(&confined, &t.path, run, (index, tree), scan, &c)?;
    Ok(Some(Pending {
        store: store_path.clone(),
        key: key.clone(),
        old: t.path.clone(),
        old_stamp: before,
        rotated,
        confined,
        _lock: lock,
    }))
}

/// Take the transcript's lock (waiting up to `wait`); a lock another process holds is
/// reported as such.
fn lock_transcript(
    confined: &Confined,
    path: &Path,
    wait: Option<Duration>,
) -> Result<SessionLock, Status> {
    match lock::acquire(confined, path, wait).map_err(job::failed)? {
        Acquire::Locked(l) => Ok(l),
        Acquire::Busy(holder) => Err(Status::Locked(holder.to_string().into())),
    }
}

/// Index the transcript as the other transcript commands do, refusing a file a successor
/// could not carry whole (lines that do not parse) and skipping an unrooted active path.
fn index_whole(
    confined: &Confined,
    path: &Path,
    run: &Run,
    out: &mut Outcome,
) -> Result<(Index, Tree), Status> {
    let (index, tree, _) =
        job::index_checked(confined, path, Some(run.settings.estimator.counter()), out)?;
    if !index.unparsable.is_empty() {
        return Err(Status::Refused(
            "lines that do not parse cannot be carried into a successor; compact in place instead"
                .into(),
        ));
    }
    crate::compact::ensure_rooted(&index, &tree.active_path())
        .map_err(|e| Status::Skipped(format!("{e:#}").into()))?;
    Ok((index, tree))
}

/// Plan the compaction (with the external summariser, when one is set), noting what it does
/// and `moved` (the SQLite-era note) in `out`; `None` when the file is left alone.
fn plan_compaction(
    path: &Path,
    index: &Index,
    tree: &Tree,
    run: &Run,
    moved: Option<String>,
    out: &mut Outcome,
) -> Result<Option<(Compaction, facts::Scan)>, Status> {
    let scan = facts::scan(index, tree, &run.settings.estimator).map_err(job::failed)?;
    let planned =
        load::compaction(&path, index, tree, &scan, run.settings, run.now).map_err(job::failed)?;
    let mut c = match planned {
        Ok(c) => c,
        Err(leave) => {
            out.notes = thin_vec::thin_vec![format!("left alone: {leave}")];
            out.notes.extend(moved);
            return Ok(None);
        }
    };
    out.notes = describe(index, &c).into();
    out.notes.extend(moved);
    let mut source = "builtin";
    if let Some(ext) = run.external {
        let write = |c: &Compaction, w: &mut dyn Write| {
            load::write_request(&path, index, &scan.active, c, w)
        };
        let (note, s) = use_external(ext, &mut c, run.enforce, run.now, &write);
        out.notes.push(note);
        source = s;
    }
    out.details = Some(Box::new(details(&c, &run.settings.estimator, source)));
    Ok(Some((c, scan)))
}

/// Write the successor of the transcript at `path` (indexed as `index` and `tree`) that
/// compaction `c` makes: the compaction joins the index as the file's last entry would, the
/// rotation is planned over the active path, and the kept lines are read back one at a time.
fn write_successor(
    confined: &Confined,
    path: &Path,
    run: &Run,
    (index, mut tree): (Index, Tree),
    scan: facts::Scan,
    c: &Compaction,
) -> Result<rotate::Rotated, Status> {
    // The path's figures are done with: gone before the context is rebuilt.
    let mut branch = scan.active;
    drop(scan.facts);
    let kept_tail: Vec<String> = tree::context_iter(&index, &tree, &branch)
        .filter_map(|item| match item {
            ContextItem::Entry(i) => index.entries[i as usize].id.as_deref().map(str::to_owned),
            ContextItem::CompactionSummary(_) => None,
        })
        .skip_while(|id| *id != c.cut.first_kept_id)
        .collect();
    // The new compaction joins the index and the tree as the file's last entry would.
    let entry = c.entry.to_value();
    let mut builder = IndexBuilder::resume(index);
    builder.push_line(format!("{}\n", crate::jsjson::to_string_compact(&entry)).as_bytes());
    let index = builder.finish();
    tree.extend(&index);
    let appended = index.entries.len() - 1;
    branch.push(appended);
    let mut reader = EntryReader::open(path).map_err(job::failed)?;
    let mut detail = |p: usize| -> anyhow::Result<PathEntry> {
        Ok(match branch[p] {
            i if i == appended => PathEntry::of(&entry),
            i => PathEntry::of(&reader.read(&index, i)?),
        })
    };
    let rewrites = successor_plan::build(&index, &tree, &branch, &mut detail)
        .map_err(job::failed)?
        .ok_or_else(|| Status::Refused("no compaction on the active path".into()))?;
    let header = crate::jsjson::parse(&index.header_raw).map_err(|e| job::failed(e.into()))?;
    let cwd = header.get("cwd").and_then(Value::as_str).unwrap_or("");
    rotate::write_successor(
        confined,
        path,
        cwd,
        &index,
        &rewrites,
        (appended, &entry),
        &kept_tail,
        run.now,
    )
    .map_err(|e| match job::failed(e) {
        damaged @ Status::Damaged(_) => damaged,
        Status::Failed(why) => Status::Refused(why),
        other => other,
    })
}

/// Switch `key` of a freshly loaded store to the successor (it must still name the old file).
fn switch_entry(
    store: &mut store::Store,
    dir: &Path,
    store_path: &Path,
    p: &Pending,
) -> Result<(), String> {
    let key = &p.key;
    let entry = store
        .get_mut(key)
        .ok_or_else(|| format!("{key} is no longer in {}", store_path.display()))?;
    let now_points_at = store::entry_transcript(entry, dir);
    if now_points_at.as_deref() != Some(&crate::store::paths::canonical(&p.old)) {
        return Err(format!(
            "{key} no longer points at {} in {}",
            p.old.display(),
            store_path.display()
        ));
    }
    let obj = entry
        .as_object_mut()
        .ok_or_else(|| format!("{key} in {} is not an object", store_path.display()))?;
    let count = obj
        .get("compactionCount")
        .and_then(Json::as_f64)
        .unwrap_or(0.0);
    obj.insert("sessionId", Json::from(p.rotated.session_id.as_str()));
    obj.insert(
        "sessionFile",
        Json::from(p.rotated.path.display().to_string().as_str()),
    );
    obj.insert(
        "compactionCount",
        Json::from_value(json!(if count.is_finite() && count >= 0.0 {
            count as u64 + 1
        } else {
            1
        })),
    );
    Ok(())
}

#[cfg(test)]
#[path = "successor_mode_tests.rs"]
mod tests;
