//! One store's cleanup: `preview` (the plan, from a read-only snapshot) and `apply` (the same
//! steps for real), following `previewStoreCleanup` and `runSessionsCleanup` of the reference.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::json::Json;
use anyhow::{Context, Result};
use rustc_hash::FxHashSet;

use super::RunFlags;
use super::before::{self, Before, Removal};
use super::budget::{self, BudgetReport, Dir, SweepReport};
use super::entries;
use super::files::{self, PathSet, RemovedFiles};
use super::log::{self, LogLine};
use super::protect::Protected;
use crate::config::maintenance::Maintenance;
use crate::fsutil::Confined;
use crate::keys;
use crate::store::{self, Store, paths};

/// What to clean and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub maintenance: Maintenance,
    pub flags: RunFlags,
    /// The home directory (for the legacy `~/.openclaw/sessions` transcript candidate).
    pub home: PathBuf,
}

impl Options {
    /// The disk budget's limits under these options.
    fn budget_limits<'a>(&'a self, preserve: &'a [String], warn_only: bool) -> budget::Limits<'a> {
        budget::Limits {
            max_bytes: self.maintenance.max_disk_bytes,
            high_water_bytes: self.maintenance.high_water_bytes,
            active_key: self.flags.active_key.as_deref(),
            preserve,
            warn_only,
        }
    }
}

pub use super::summary::Summary;

/// The plan for one store, plus what the dry-run table needs.
#[derive(Debug, Clone)]
pub struct Preview {
    pub summary: Summary,
    /// The store as it was loaded, and why the plan removes each entry it removes.
    pub before: Before,
    /// The entries whose `sessionFile` the plan repairs and then keeps.
    pub repaired_keys: HashSet<String>,
    /// The store's size and mtime when the plan was made; `apply` refuses a store that no
    /// longer has them.
    pub stamp: Option<store::Stamp>,
}

impl Preview {
    /// `resolveSessionCleanupAction` for one key of `before`.
    pub fn action(&self, key: &str) -> &'static str {
        match self.before.removal(key) {
            Some(why) => why.action(),
            None if self.repaired_keys.contains(key) => "repair-session-file",
            None => "keep",
        }
    }
}

/// `dirname(path.resolve(storePath))`.
pub fn sessions_dir_of(store_path: &Path) -> PathBuf {
    let resolved = paths::resolve(store_path);
    resolved
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// Compute the plan for one store without writing anything.
///
/// A plan changes nothing on disk, so the sessions directory is scanned in a second thread
/// while the store is read and its entries are planned.
pub fn preview(agent_id: &str, store_path: &Path, opts: &Options) -> Result<Preview> {
    let dir = sessions_dir_of(store_path);
    std::thread::scope(|sc| {
        let scan = sc.spawn(|| budget::scan(&dir));
        let scanned = || scan.join().unwrap_or_else(|_| budget::scan(&dir));
        plan(agent_id, store_path, opts, &dir, scanned)
    })
}

/// What the `--fix-*` flags remove (and `--fix-missing` repairs) in a store.
struct Fixes {
    missing: entries::FixMissing,
    dm_scope: entries::Removed,
}

/// The `--fix-*` steps on `store`, in OpenClaw's order: `--fix-missing`, `--fix-dm-scope`.
fn fix_steps(store: &mut Store, agent_id: &str, dir: &Path, opts: &Options) -> Fixes {
    let missing = if opts.flags.fix_missing {
        entries::fix_missing(store, dir)
    } else {
        Default::default()
    };
    let dm_scope = if opts.flags.fix_dm_scope {
        entries::retire_dm_scope(
            store,
            &opts.flags.dm_scope,
            agent_id,
            opts.flags.active_key.as_deref(),
        )
    } else {
        Vec::new()
    };
    Fixes { missing, dm_scope }
}

/// What the entry steps removed.
#[derive(Default)]
struct Pruned {
    model_runs: entries::Removed,
    stale: entries::Removed,
    capped: entries::Removed,
}

impl Pruned {
    fn entries(&self) -> impl Iterator<Item = &(String, Json)> {
        self.model_runs
            .iter()
            .chain(&self.stale)
            .chain(&self.capped)
    }

    /// The removed entries, taken (each goes once the caller is done with it).
    fn into_entries(self) -> impl Iterator<Item = (String, Json)> {
        (self.model_runs.into_iter())
            .chain(self.stale)
            .chain(self.capped)
    }

    fn counts(&self) -> PrunedCounts {
        PrunedCounts {
            model_runs: self.model_runs.len(),
            stale: self.stale.len(),
            capped: self.capped.len(),
        }
    }
}

/// How many entries each entry step removed (an apply keeps no more of them once their files
/// are known: a store may lose hundreds of thousands).
#[derive(Default, Clone, Copy)]
struct PrunedCounts {
    model_runs: usize,
    stale: usize,
    capped: usize,
}

/// The entry steps, in OpenClaw's order: stale model-run probes (only when the store is over
/// its cap), stale entries, then the cap.
fn entry_steps(store: &mut Store, maintenance: &Maintenance, preserve: &[String]) -> Pruned {
    let model_runs = if entries::should_prune_model_runs(store.len(), maintenance.max_entries) {
        entries::prune_model_runs(
            store,
            maintenance.model_run_prune_after_ms,
            preserve,
            super::now_ms(),
        )
    } else {
        Vec::new()
    };
    let stale = entries::prune_stale(store, maintenance.prune_after_ms, preserve, super::now_ms());
    let capped = entries::cap(store, maintenance.max_entries, preserve);
    Pruned {
        model_runs,
        stale,
        capped,
    }
}

/// The figures of one store's run, for its summary.
#[derive(Default)]
struct Counted {
    before: u64,
    after: u64,
    repaired: u64,
    missing: u64,
    dm_scope_retired: u64,
    model_run_pruned: u64,
    pruned: u64,
    capped: u64,
    unreferenced: SweepReport,
    disk_budget: Option<BudgetReport>,
    /// What an applied run logged and left in use (`None` for a plan).
    applied: Option<Applied>,
}

#[derive(Default)]
struct Applied {
    logs: Vec<LogLine>,
    left_in_use: Vec<(PathBuf, String)>,
}

impl Counted {
    /// Whether the run removes or repairs anything.
    fn mutates(&self) -> bool {
        self.missing > 0
            || self.repaired > 0
            || self.dm_scope_retired > 0
            || self.model_run_pruned > 0
            || self.pruned > 0
            || self.capped > 0
            || self.unreferenced.removed_files > 0
            || self
                .disk_budget
                .as_ref()
                .is_some_and(|budget| budget.removed_entries > 0 || budget.removed_files > 0)
    }

    fn summary(
        self,
        agent_id: &str,
        store_path: &Path,
        opts: &Options,
        would_mutate: bool,
    ) -> Summary {
        let applied_count = self.applied.is_some().then_some(self.after);
        let applied = self.applied.unwrap_or_default();
        Summary {
            agent_id: agent_id.to_string(),
            store_path: store_path.to_string_lossy().into_owned(),
            mode: opts.flags.mode.clone(),
            dry_run: opts.flags.dry_run && applied_count.is_none(),
            before_count: self.before,
            after_count: self.after,
            repaired: self.repaired,
            missing: self.missing,
            dm_scope_retired: self.dm_scope_retired,
            model_run_pruned: self.model_run_pruned,
            pruned: self.pruned,
            capped: self.capped,
            unreferenced: self.unreferenced,
            disk_budget: self.disk_budget,
            would_mutate,
            applied_count,
            logs: applied.logs,
            left_in_use: applied.left_in_use,
        }
    }
}

/// `preview` with the directory scan that `scanned` returns.
fn plan(
    agent_id: &str,
    store_path: &Path,
    opts: &Options,
    dir: &Path,
    scanned: impl FnOnce() -> budget::Scanned,
) -> Result<Preview> {
    // A plan saves nothing: the store's text (kept for the save when normalising changed
    // nothing) goes at once. The plan works on the loaded store itself; what the steps remove
    // is kept for the table of the store as it was ([`Before`]).
    let store::Loaded {
        mut store, stamp, ..
    } = store::load(store_path)?;
    let order = before::Order::of(&store);
    let fixes = fix_steps(&mut store, agent_id, dir, opts);
    let repairs: HashMap<&str, &entries::Repair> = fixes
        .missing
        .repaired
        .iter()
        .map(|repair| (repair.key.as_str(), repair))
        .collect();
    let preserve = keys::preserve_set(opts.flags.active_key.as_deref());
    let pruned = entry_steps(&mut store, &opts.maintenance, &preserve);
    let simulated = Dir::simulated(dir, store_path, scanned());
    // The files the steps take along are left out of the sweep. Only files on disk can be
    // swept, so only those are kept: a store may remove hundreds of thousands of entries.
    let files = simulated.files();
    let on_disk: FxHashSet<&OsStr> = (files.0.iter().chain(&files.1))
        .map(|f| f.canonical.as_os_str())
        .collect();
    let mut excluded = PathSet::default();
    let mut exclude = |p: PathBuf| {
        if on_disk.contains(p.as_os_str()) {
            excluded.insert(p.into_os_string());
        }
    };
    let real = paths::RealDir::new(dir);
    for (key, entry) in pruned.entries().chain(&fixes.dm_scope) {
        // The files of the entry as it was loaded, before a `sessionFile` repair.
        let loaded = repairs
            .get(key.as_str())
            .map_or(entry, |repair| &repair.loaded);
        files::entry_artifacts_canonical(loaded, dir, real.as_ref())
            .into_iter()
            .for_each(&mut exclude);
    }
    let mut budget_removed = budget::Removed::default();
    let disk_budget = budget::enforce(
        &simulated,
        &mut store,
        &opts.budget_limits(&preserve, false),
        &mut budget_removed,
    )?;
    budget_removed.paths.drain(..).for_each(&mut exclude);
    let unreferenced = budget::sweep(
        &simulated,
        &store,
        opts.maintenance.prune_after_ms,
        &excluded,
    )?;
    let mut counted = Counted {
        before: order.len() as u64,
        after: store.len() as u64,
        // Set below: an entry that a later step removes is not counted as repaired.
        repaired: 0,
        missing: fixes.missing.removed.len() as u64,
        dm_scope_retired: fixes.dm_scope.len() as u64,
        model_run_pruned: pruned.model_runs.len() as u64,
        pruned: pruned.stale.len() as u64,
        capped: pruned.capped.len() as u64,
        unreferenced,
        disk_budget,
        applied: None,
    };
    drop(repairs);
    let removed = vec![
        (Removal::Missing, fixes.missing.removed),
        (Removal::DmScope, fixes.dm_scope),
        (Removal::ModelRun, pruned.model_runs),
        (Removal::Stale, pruned.stale),
        (Removal::Capped, pruned.capped),
        (Removal::BudgetEvicted, budget_removed.entries),
    ];
    let before = Before::new(order, store, removed, &fixes.missing.repaired);
    let repaired: HashSet<String> = (fixes.missing.repaired.into_iter())
        .map(|repair| repair.key)
        .filter(|key| before.removal(key).is_none())
        .collect();
    counted.repaired = repaired.len() as u64;
    let would_mutate = counted.mutates();
    Ok(Preview {
        summary: counted.summary(agent_id, store_path, opts, would_mutate),
        before,
        repaired_keys: repaired,
        stamp,
    })
}

/// The `--fix-*` changes as made to the store.
#[derive(Default)]
struct FixesMade {
    missing: u64,
    dm_scope_retired: u64,
    /// The files of the retired dm-scope entries, archived after the store is saved.
    dm_scope_files: RemovedFiles,
    repairs: Vec<entries::Repair>,
}

/// The `--fix-*` changes, as in OpenClaw: decided on a copy, then made to `store` only where
/// the entry is still exactly what was decided on.
fn make_fixes(store: &mut Store, agent_id: &str, dir: &Path, opts: &Options) -> FixesMade {
    if !opts.flags.fix_missing && !opts.flags.fix_dm_scope {
        // No `--fix-*` flag: nothing to decide, and no copy of the store to make.
        return FixesMade::default();
    }
    let mut decided = store.clone();
    let fixes = fix_steps(&mut decided, agent_id, dir, opts);
    let mut remove_if_unchanged = |key: &str, expected: &Json| -> Option<Json> {
        if store.get(key) == Some(expected) {
            store.shift_remove(key)
        } else {
            None
        }
    };
    let missing = fixes
        .missing
        .removed
        .iter()
        .filter(|(key, entry)| remove_if_unchanged(key, entry).is_some())
        .count() as u64;
    let mut dm_scope_files = RemovedFiles::default();
    let mut dm_scope_retired = 0u64;
    for (key, entry) in &fixes.dm_scope {
        if let Some(removed) = remove_if_unchanged(key, entry) {
            dm_scope_retired += 1;
            if store::session_id(&removed).is_some() {
                dm_scope_files.remember(removed);
            }
        }
    }
    for repair in &fixes.missing.repaired {
        let Some(Json::Object(current)) = store.get_mut(&repair.key) else {
            continue;
        };
        let same_id =
            current.get("sessionId").and_then(Json::as_str) == Some(repair.session_id.as_str());
        let same_file =
            current.get("sessionFile").and_then(Json::as_str) == repair.previous.as_deref();
        if same_id && same_file && entries::exists_with_messages(Path::new(&repair.new)) {
            current.insert("sessionFile", Json::from(repair.new.as_str()));
        }
    }
    FixesMade {
        missing,
        dm_scope_retired,
        dm_scope_files,
        repairs: fixes.missing.repaired,
    }
}

/// Apply the cleanup to one store for real and report what happened. With `planned` (the
/// stamp a preview saw), a store that changed since that preview is refused before anything is
/// touched: the plan that was checked (for
/// example against `--max-delete`) is the plan that runs. With `held` (the sessions directory
/// as the run resolved it when it planned), a directory that no longer leads there (a symlink
/// swapped meanwhile) is refused likewise, and every change goes through that handle.
pub fn apply(
    agent_id: &str,
    store_path: &Path,
    opts: &Options,
    planned: Option<Option<store::Stamp>>,
    held: Option<&Confined>,
) -> Result<Summary> {
    let dir = sessions_dir_of(store_path);
    refuse_moved_dir(store_path, &dir, held)?;
    let store::Loaded {
        mut store,
        unchanged,
        stamp,
        ..
    } = store::load(store_path)?;
    refuse_changed_store(store_path, planned, stamp)?;
    // Whether saving the store as loaded writes the text that was read (the text itself is
    // not held: a store may be tens of megabytes).
    let saves_as_loaded = unchanged && store::saves_as_file(&store, store_path, stamp);
    let loaded_count = store.len();
    let fixes = make_fixes(&mut store, agent_id, &dir, opts);
    let preserve = keys::preserve_set(opts.flags.active_key.as_deref());
    let before_count = store.len() as u64;
    if !dir.is_dir() {
        return nothing_on_disk(
            agent_id,
            store_path,
            &dir,
            opts,
            store,
            &preserve,
            before_count,
        );
    }
    // The directory is synced once, after the last rename and before the report, instead of
    // after each archive rename (a rename is atomic either way; see `Confined`).
    let confined = match held {
        Some(c) => c.clone(),
        None => Confined::new(&dir)?,
    }
    .deferring_dir_sync();
    let sessions = Dir::new(&dir, store_path, Some(&confined));
    let mut applied = Applied::default();
    let pruned = prune_step(
        &confined,
        &mut store,
        store_path,
        opts,
        &preserve,
        &mut applied,
    )?;
    let disk_budget = budget::enforce(
        &sessions,
        &mut store,
        &opts.budget_limits(&preserve, opts.flags.is_warn()),
        &mut budget::Removed::default(),
    )?;
    applied
        .logs
        .extend(log::budget(disk_budget.as_ref(), opts.flags.is_warn()));
    let after_count = store.len() as u64;
    let repaired = fixes
        .repairs
        .iter()
        .filter(|repair| {
            store.get(&repair.key).and_then(store::session_file) == Some(repair.new.as_str())
        })
        .count() as u64;
    // The steps only remove entries and repair them: a store with as many entries as it was
    // loaded with and no repair is the store as loaded.
    let unchanged = saves_as_loaded && store.len() == loaded_count && repaired == 0;
    store::save(&confined, store_path, &store, unchanged, stamp)
        .with_context(|| format!("cleanup of {} stopped", store_path.display()))?;
    applied.left_in_use.extend(archive_retired(
        &confined,
        &fixes.dm_scope_files,
        &store,
        &dir,
        store_path,
        opts,
    )?);
    let unreferenced = sweep_after_save(&sessions, &store, opts)?;
    confined
        .sync()
        .with_context(|| format!("cleanup of {} stopped", store_path.display()))?;
    let counted = Counted {
        before: before_count,
        after: after_count,
        repaired,
        missing: fixes.missing,
        dm_scope_retired: fixes.dm_scope_retired,
        model_run_pruned: pruned.model_runs as u64,
        pruned: pruned.stale as u64,
        capped: pruned.capped as u64,
        unreferenced,
        disk_budget,
        applied: Some(applied),
    };
    let would_mutate = counted.mutates();
    Ok(counted.summary(agent_id, store_path, opts, would_mutate))
}

/// The entry steps of an apply (model-run probes, stale prune, cap, with their archives), or in
/// `warn` mode only the lines saying what they would do; what they log is added to `applied`.
fn prune_step(
    confined: &Confined,
    store: &mut Store,
    store_path: &Path,
    opts: &Options,
    preserve: &[String],
    applied: &mut Applied,
) -> Result<PrunedCounts> {
    if opts.flags.is_warn() {
        applied.logs.extend(warn_logs(store, opts));
        return Ok(PrunedCounts::default());
    }
    let dir = sessions_dir_of(store_path);
    let (pruned, in_use) = prune_entries(confined, store, &dir, store_path, opts, preserve)?;
    applied.left_in_use.extend(in_use);
    applied.logs.extend(log::entry_steps(
        pruned.model_runs,
        pruned.stale,
        pruned.capped,
    ));
    Ok(pruned)
}

/// Refuse a sessions directory that no longer leads where the run resolved it (`held`).
fn refuse_moved_dir(store_path: &Path, dir: &Path, held: Option<&Confined>) -> Result<()> {
    match held {
        Some(c) if !c.is_at(dir) => Err(crate::exit::Refusal::Unsafe(format!(
            "refusing to clean {}: {} no longer leads to {}, the directory this run resolved it to (was a symlink replaced?); nothing was changed",
            store_path.display(),
            dir.display(),
            c.root().display()
        ))
        .into()),
        _ => Ok(()),
    }
}

/// Refuse a store that changed since the plan that saw it as `planned`.
fn refuse_changed_store(
    store_path: &Path,
    planned: Option<Option<store::Stamp>>,
    now: Option<store::Stamp>,
) -> Result<()> {
    match planned {
        Some(stamp) if stamp != now => Err(crate::exit::Refusal::Unsafe(format!(
            "refusing to clean {}: it changed after the plan was made (is a gateway writing it?); nothing was changed",
            store_path.display()
        ))
        .into()),
        _ => Ok(()),
    }
}

/// Archive the files of the retired dm-scope entries once the store is saved (the store and
/// the files a kept entry uses protected); the files left in use.
fn archive_retired(
    confined: &Confined,
    retired: &RemovedFiles,
    store: &Store,
    dir: &Path,
    store_path: &Path,
    opts: &Options,
) -> Result<Vec<(PathBuf, String)>> {
    if retired.0.is_empty() {
        return Ok(Vec::new());
    }
    let referenced = files::referenced_ids(store);
    let protected = Protected::of(store, dir, store_path)?;
    let archived =
        files::archive_removed(confined, retired, &referenced, &protected, dir, &opts.home);
    Ok(archived.in_use)
}

/// The unreferenced-artifact sweep after the store is saved (warn mode: none).
fn sweep_after_save(sessions: &Dir<'_>, store: &Store, opts: &Options) -> Result<SweepReport> {
    if opts.flags.is_warn() {
        return Ok(SweepReport {
            older_than_ms: opts.maintenance.prune_after_ms,
            ..Default::default()
        });
    }
    budget::sweep(
        sessions,
        store,
        opts.maintenance.prune_after_ms,
        &PathSet::default(),
    )
}

/// The apply of a store whose sessions directory does not exist: OpenClaw would create the
/// directory and write `{}`; clawkeeper creates nothing and reports the (empty) result.
fn nothing_on_disk(
    agent_id: &str,
    store_path: &Path,
    dir: &Path,
    opts: &Options,
    mut store: Store,
    preserve: &[String],
    before_count: u64,
) -> Result<Summary> {
    let sessions = Dir::new(dir, store_path, None);
    let disk_budget = budget::enforce(
        &sessions,
        &mut store,
        &opts.budget_limits(preserve, opts.flags.is_warn()),
        &mut budget::Removed::default(),
    )?;
    let logs = warn_logs(&store, opts)
        .into_iter()
        .chain(log::budget(disk_budget.as_ref(), opts.flags.is_warn()))
        .collect();
    let counted = Counted {
        before: before_count,
        after: store.len() as u64,
        unreferenced: SweepReport {
            older_than_ms: opts.maintenance.prune_after_ms.max(0),
            ..Default::default()
        },
        disk_budget,
        applied: Some(Applied {
            logs,
            left_in_use: Vec::new(),
        }),
        ..Default::default()
    };
    Ok(counted.summary(agent_id, store_path, opts, false))
}

/// The entry steps of an enforce run and what goes with the entries they remove: their
/// transcripts archived (the store and the files a kept entry uses protected; one a live
/// process holds is left where it is and listed), their trajectories removed, then the
/// archive retention in the directories archived into (else the sessions directory, when a
/// reset-archive retention is set). Returns what the steps removed and the files left in
/// use.
fn prune_entries(
    confined: &Confined,
    store: &mut Store,
    dir: &Path,
    store_path: &Path,
    opts: &Options,
    preserve: &[String],
) -> Result<(PrunedCounts, Vec<(PathBuf, String)>)> {
    let maintenance = &opts.maintenance;
    let pruned = entry_steps(store, maintenance, preserve);
    // Of the removed entries only their files are needed from here on: each entry gives up
    // its id and file and goes.
    let counts = pruned.counts();
    let mut removed = RemovedFiles::with_capacity(pruned.entries().count());
    for (_, e) in pruned.into_entries() {
        removed.remember(e);
    }
    let mut archived = files::Archived::default();
    if !removed.0.is_empty() {
        let referenced = files::referenced_ids(store);
        let protected = Protected::of(store, dir, store_path)?;
        archived =
            files::archive_removed(confined, &removed, &referenced, &protected, dir, &opts.home);
        files::remove_trajectories(confined, &removed, &referenced, &protected, dir);
    }
    if !(archived.dirs.is_empty() && maintenance.reset_archive_retention_ms.is_none()) {
        let targets = if archived.dirs.is_empty() {
            vec![dir.to_path_buf()]
        } else {
            archived.dirs
        };
        files::archive_retention(
            confined,
            &targets,
            maintenance.prune_after_ms,
            maintenance.reset_archive_retention_ms,
        );
    }
    Ok((counts, archived.in_use))
}

/// Warn mode's warning about the `--active-key` entry (nothing in enforce mode).
fn warn_logs(store: &Store, opts: &Options) -> Option<LogLine> {
    if !opts.flags.is_warn() {
        return None;
    }
    log::active_session(
        store,
        opts.flags.active_key.as_deref(),
        opts.maintenance.prune_after_ms,
        opts.maintenance.max_entries,
        super::now_ms(),
    )
}
