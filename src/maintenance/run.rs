//! One store's cleanup: `preview` (the plan, from a read-only snapshot) and `apply` (the same
//! steps for real), following `previewStoreCleanup` and `runSessionsCleanup` of the reference.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::budget::{self, Dir, SweepReport};
use super::entries;
use super::files::{self, PathSet, RemovedFiles};
use super::log::{self, LogLine};
use crate::config::maintenance::Maintenance;
use crate::fsutil::Confined;
use crate::keys;
use crate::store::{self, Store, paths};

/// What to clean and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub maintenance: Maintenance,
    /// The effective mode: `enforce` with `--enforce`, else the configured mode (verbatim).
    pub mode: Value,
    pub dry_run: bool,
    pub active_key: Option<String>,
    pub fix_missing: bool,
    pub fix_dm_scope: bool,
    /// `session.dmScope`.
    pub dm_scope: String,
    /// The home directory (for the legacy `~/.openclaw/sessions` transcript candidate).
    pub home: PathBuf,
}

impl Options {
    fn is_warn(&self) -> bool {
        self.mode == Value::String("warn".into())
    }
}

pub use super::summary::Summary;

/// The plan for one store, plus what the dry-run table needs.
#[derive(Debug, Clone)]
pub struct Preview {
    pub summary: Summary,
    pub before: Store,
    pub repaired_keys: HashSet<String>,
    pub missing_keys: HashSet<String>,
    pub model_run_keys: HashSet<String>,
    pub stale_keys: HashSet<String>,
    pub capped_keys: HashSet<String>,
    pub budget_evicted_keys: HashSet<String>,
    pub dm_scope_keys: HashSet<String>,
    /// The store's size and mtime when the plan was made; `apply` refuses a store that no
    /// longer has them.
    pub stamp: Option<store::Stamp>,
}

impl Preview {
    /// `resolveSessionCleanupAction` for one key of `before`.
    pub fn action(&self, key: &str) -> &'static str {
        if self.dm_scope_keys.contains(key) {
            "retire-dm-scope"
        } else if self.missing_keys.contains(key) {
            "prune-missing"
        } else if self.model_run_keys.contains(key) {
            "prune-model-run"
        } else if self.stale_keys.contains(key) {
            "prune-stale"
        } else if self.capped_keys.contains(key) {
            "cap-overflow"
        } else if self.budget_evicted_keys.contains(key) {
            "evict-budget"
        } else if self.repaired_keys.contains(key) {
            "repair-session-file"
        } else {
            "keep"
        }
    }
}

/// `dirname(path.resolve(storePath))`.
pub fn sessions_dir_of(store_path: &Path) -> PathBuf {
    let r = paths::resolve(store_path);
    r.parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

fn keyset(removed: &entries::Removed) -> HashSet<String> {
    removed.iter().map(|(k, _)| k.clone()).collect()
}

/// Compute the plan for one store without writing anything.
///
/// A plan changes nothing on disk, so the sessions directory is scanned in a second thread
/// while the store is read and its entries are planned.
pub fn preview(agent_id: &str, store_path: &Path, o: &Options) -> Result<Preview> {
    let dir = sessions_dir_of(store_path);
    std::thread::scope(|sc| {
        let scan = sc.spawn(|| budget::scan(&dir));
        let scanned = || scan.join().unwrap_or_else(|_| budget::scan(&dir));
        plan(agent_id, store_path, o, &dir, scanned)
    })
}

/// The entry steps, in OpenClaw's order: stale model-run probes (only when the store is over
/// its cap), stale entries, then the cap. Returns what each removed.
fn entry_steps(
    s: &mut Store,
    m: &Maintenance,
    preserve: &[String],
) -> (entries::Removed, entries::Removed, entries::Removed) {
    let model_runs = if entries::should_prune_model_runs(s.len(), m.max_entries) {
        entries::prune_model_runs(s, m.model_run_prune_after_ms, preserve, super::now_ms())
    } else {
        Vec::new()
    };
    let stale = entries::prune_stale(s, m.prune_after_ms, preserve, super::now_ms());
    let capped = entries::cap(s, m.max_entries, preserve);
    (model_runs, stale, capped)
}

/// `preview` with the directory scan that `scanned` returns.
fn plan(
    agent_id: &str,
    store_path: &Path,
    o: &Options,
    dir: &Path,
    scanned: impl FnOnce() -> budget::Scanned,
) -> Result<Preview> {
    let dir = dir.to_path_buf();
    let loaded = store::load(store_path)?;
    let stamp = loaded.stamp;
    let before = loaded.store;
    let mut s = before.clone();
    let fm = if o.fix_missing {
        entries::fix_missing(&mut s, &dir)
    } else {
        Default::default()
    };
    let dm = if o.fix_dm_scope {
        entries::retire_dm_scope(&mut s, &o.dm_scope, agent_id, o.active_key.as_deref())
    } else {
        Vec::new()
    };
    let preserve = keys::preserve_set(o.active_key.as_deref());
    let m = &o.maintenance;
    let (model_runs, stale, capped) = entry_steps(&mut s, m, &preserve);
    let mut excluded = PathSet::default();
    let real = paths::RealDir::new(&dir);
    for (k, _) in model_runs.iter().chain(&stale).chain(&capped).chain(&dm) {
        if let Some(e) = before.get(k) {
            excluded.extend(
                files::entry_artifacts_canonical(e, &dir, real.as_ref())
                    .into_iter()
                    .map(PathBuf::into_os_string),
            );
        }
    }
    let before_budget: Vec<String> = s.keys().cloned().collect();
    let d = Dir::simulated(&dir, store_path, scanned());
    let mut budget_removed = Vec::new();
    let disk_budget = budget::enforce(
        &d,
        &mut s,
        m.max_disk_bytes,
        m.high_water_bytes,
        o.active_key.as_deref(),
        &preserve,
        false,
        &mut budget_removed,
    )?;
    excluded.extend(budget_removed.into_iter().map(PathBuf::into_os_string));
    let unreferenced = budget::sweep(&d, &s, m.prune_after_ms, &excluded)?;
    let budget_evicted: HashSet<String> = before_budget
        .into_iter()
        .filter(|k| !s.contains_key(k))
        .collect();
    let mut repaired: HashSet<String> = fm.repaired.iter().map(|r| r.key.clone()).collect();
    let missing_keys = keyset(&fm.removed);
    let (mr_keys, stale_keys, capped_keys, dm_keys) = (
        keyset(&model_runs),
        keyset(&stale),
        keyset(&capped),
        keyset(&dm),
    );
    repaired.retain(|k| {
        ![
            &missing_keys,
            &mr_keys,
            &stale_keys,
            &capped_keys,
            &budget_evicted,
            &dm_keys,
        ]
        .iter()
        .any(|set| set.contains(k))
    });
    let b = disk_budget.as_ref();
    let summary = Summary {
        agent_id: agent_id.to_string(),
        store_path: store_path.to_string_lossy().into_owned(),
        mode: o.mode.clone(),
        dry_run: o.dry_run,
        before_count: before.len() as u64,
        after_count: s.len() as u64,
        repaired: repaired.len() as u64,
        missing: fm.removed.len() as u64,
        dm_scope_retired: dm.len() as u64,
        model_run_pruned: model_runs.len() as u64,
        pruned: stale.len() as u64,
        capped: capped.len() as u64,
        would_mutate: !fm.removed.is_empty()
            || !repaired.is_empty()
            || !dm.is_empty()
            || !model_runs.is_empty()
            || !stale.is_empty()
            || !capped.is_empty()
            || unreferenced.removed_files > 0
            || b.is_some_and(|b| b.removed_entries > 0 || b.removed_files > 0),
        unreferenced,
        disk_budget,
        applied_count: None,
        logs: Vec::new(),
        left_in_use: Vec::new(),
    };
    Ok(Preview {
        summary,
        before,
        repaired_keys: repaired,
        missing_keys,
        model_run_keys: mr_keys,
        stale_keys,
        capped_keys,
        budget_evicted_keys: budget_evicted,
        dm_scope_keys: dm_keys,
        stamp,
    })
}

/// Apply the cleanup to one store for real and report what happened. With `planned` (the stamp a preview saw), a store that changed since
/// that preview is refused before anything is touched: the plan that was checked (for
/// example against `--max-delete`) is the plan that runs. With `held` (the sessions directory
/// as the run resolved it when it planned), a directory that no longer leads there (a symlink
/// swapped meanwhile) is refused likewise, and every change goes through that handle.
pub fn apply(
    agent_id: &str,
    store_path: &Path,
    o: &Options,
    planned: Option<Option<store::Stamp>>,
    held: Option<&Confined>,
) -> Result<Summary> {
    let dir = sessions_dir_of(store_path);
    if let Some(c) = held
        && !c.is_at(&dir)
    {
        return Err(crate::exit::Refusal::Unsafe(format!(
            "refusing to clean {}: {} no longer leads to {}, the directory this run resolved it to (was a symlink replaced?); nothing was changed",
            store_path.display(),
            dir.display(),
            c.root().display()
        ))
        .into());
    }
    let loaded = store::load(store_path)?;
    if let Some(stamp) = planned
        && stamp != loaded.stamp
    {
        return Err(crate::exit::Refusal::Unsafe(format!(
            "refusing to clean {}: it changed after the plan was made (is a gateway writing it?); nothing was changed",
            store_path.display()
        ))
        .into());
    }
    let mut s = loaded.store;
    // As in OpenClaw: the removals and repairs are decided on a copy, then applied to the
    // store only where the entry is still exactly what was decided on.
    let mut decided = s.clone();
    let fm = if o.fix_missing {
        entries::fix_missing(&mut decided, &dir)
    } else {
        Default::default()
    };
    let dm = if o.fix_dm_scope {
        entries::retire_dm_scope(&mut decided, &o.dm_scope, agent_id, o.active_key.as_deref())
    } else {
        Vec::new()
    };
    let mut remove_if_unchanged = |key: &str, expected: &Value| -> Option<Value> {
        if s.get(key) == Some(expected) {
            s.shift_remove(key)
        } else {
            None
        }
    };
    let missing = fm
        .removed
        .iter()
        .filter(|(k, e)| remove_if_unchanged(k, e).is_some())
        .count() as u64;
    let mut dm_files = RemovedFiles::default();
    let mut dm_n = 0u64;
    for (k, e) in &dm {
        if let Some(removed) = remove_if_unchanged(k, e) {
            dm_n += 1;
            if store::session_id(&removed).is_some() {
                dm_files.remember(&removed);
            }
        }
    }
    for r in &fm.repaired {
        let Some(Value::Object(cur)) = s.get_mut(&r.key) else {
            continue;
        };
        let same_id = cur.get("sessionId").and_then(Value::as_str) == Some(r.session_id.as_str());
        let same_file = cur.get("sessionFile").and_then(Value::as_str) == r.previous.as_deref();
        if same_id && same_file && entries::exists_with_messages(Path::new(&r.new)) {
            cur.insert("sessionFile".into(), Value::String(r.new.clone()));
        }
    }
    let m = &o.maintenance;
    let preserve = keys::preserve_set(o.active_key.as_deref());
    let before_count = s.len() as u64;
    if !dir.is_dir() {
        // Nothing on disk: OpenClaw would create the directory and write `{}`; clawkeeper
        // creates nothing and reports the (empty) result.
        let d = Dir::new(&dir, store_path, None);
        let mut ignored = Vec::new();
        let disk_budget = budget::enforce(
            &d,
            &mut s,
            m.max_disk_bytes,
            m.high_water_bytes,
            o.active_key.as_deref(),
            &preserve,
            o.is_warn(),
            &mut ignored,
        )?;
        let logs = warn_logs(&s, o)
            .into_iter()
            .chain(log::budget(disk_budget.as_ref(), o.is_warn()))
            .collect();
        return Ok(Summary {
            agent_id: agent_id.to_string(),
            store_path: store_path.to_string_lossy().into_owned(),
            mode: o.mode.clone(),
            dry_run: false,
            before_count,
            after_count: s.len() as u64,
            repaired: 0,
            missing: 0,
            dm_scope_retired: 0,
            model_run_pruned: 0,
            pruned: 0,
            capped: 0,
            unreferenced: SweepReport {
                older_than_ms: m.prune_after_ms.max(0),
                ..Default::default()
            },
            disk_budget,
            would_mutate: false,
            applied_count: Some(s.len() as u64),
            logs,
            left_in_use: Vec::new(),
        });
    }
    // The directory is synced once, after the last rename and before the report, instead of
    // after each archive rename (a rename is atomic either way; see `Confined`).
    let confined = match held {
        Some(c) => c.clone(),
        None => Confined::new(&dir)?,
    }
    .deferring_dir_sync();
    let d = Dir::new(&dir, store_path, Some(&confined));
    let mut budget_removed = Vec::new();
    let mut in_use = Vec::new();
    let (model_runs, stale, capped, disk_budget);
    let mut logs = Vec::new();
    if o.is_warn() {
        (model_runs, stale, capped) = (0, 0, 0);
        logs.extend(warn_logs(&s, o));
        disk_budget = budget::enforce(
            &d,
            &mut s,
            m.max_disk_bytes,
            m.high_water_bytes,
            o.active_key.as_deref(),
            &preserve,
            true,
            &mut budget_removed,
        )?;
    } else {
        let mut removed = RemovedFiles::default();
        let (mr, st, cp) = entry_steps(&mut s, m, &preserve);
        for (_, e) in mr.iter().chain(&st).chain(&cp) {
            removed.remember(e);
        }
        logs.extend(log::entry_steps(mr.len(), st.len(), cp.len()));
        let referenced = files::referenced_ids(&s);
        let protected = if removed.0.is_empty() {
            PathSet::default()
        } else {
            super::protect::protected_paths(&s, &dir, store_path)
        };
        let archived =
            files::archive_removed(&confined, &removed, &referenced, &protected, &dir, &o.home);
        in_use.extend(archived.in_use);
        let dirs = archived.dirs;
        if !removed.0.is_empty() {
            files::remove_trajectories(&confined, &removed, &referenced, &dir);
        }
        if !(dirs.is_empty() && m.reset_archive_retention_ms.is_none()) {
            let targets = if dirs.is_empty() {
                vec![dir.clone()]
            } else {
                dirs
            };
            files::archive_retention(
                &confined,
                &targets,
                m.prune_after_ms,
                m.reset_archive_retention_ms,
            );
        }
        disk_budget = budget::enforce(
            &d,
            &mut s,
            m.max_disk_bytes,
            m.high_water_bytes,
            o.active_key.as_deref(),
            &preserve,
            false,
            &mut budget_removed,
        )?;
        (model_runs, stale, capped) = (mr.len() as u64, st.len() as u64, cp.len() as u64);
    }
    logs.extend(log::budget(disk_budget.as_ref(), o.is_warn()));
    let after_count = s.len() as u64;
    store::save(
        &confined,
        store_path,
        &s,
        loaded.unchanged_raw.as_deref(),
        loaded.stamp,
    )
    .with_context(|| format!("cleanup of {} stopped", store_path.display()))?;
    if !dm_files.0.is_empty() {
        let referenced = files::referenced_ids(&s);
        let protected = super::protect::protected_paths(&s, &dir, store_path);
        let archived =
            files::archive_removed(&confined, &dm_files, &referenced, &protected, &dir, &o.home);
        in_use.extend(archived.in_use);
    }
    let unreferenced = if o.is_warn() {
        SweepReport {
            older_than_ms: m.prune_after_ms,
            ..Default::default()
        }
    } else {
        budget::sweep(&d, &s, m.prune_after_ms, &PathSet::default())?
    };
    let repaired = fm
        .repaired
        .iter()
        .filter(|r| s.get(&r.key).and_then(store::session_file) == Some(r.new.as_str()))
        .count() as u64;
    confined
        .sync()
        .with_context(|| format!("cleanup of {} stopped", store_path.display()))?;
    let b = disk_budget.as_ref();
    Ok(Summary {
        agent_id: agent_id.to_string(),
        store_path: store_path.to_string_lossy().into_owned(),
        mode: if o.is_warn() {
            Value::String("warn".into())
        } else {
            o.mode.clone()
        },
        dry_run: false,
        before_count,
        after_count,
        repaired,
        missing,
        dm_scope_retired: dm_n,
        model_run_pruned: model_runs,
        pruned: stale,
        capped,
        would_mutate: missing > 0
            || repaired > 0
            || dm_n > 0
            || model_runs > 0
            || stale > 0
            || capped > 0
            || unreferenced.removed_files > 0
            || b.is_some_and(|b| b.removed_entries > 0 || b.removed_files > 0),
        unreferenced,
        disk_budget,
        applied_count: Some(after_count),
        logs,
        left_in_use: in_use,
    })
}

/// Warn mode's warning about the `--active-key` entry (nothing in enforce mode).
fn warn_logs(s: &Store, o: &Options) -> Option<LogLine> {
    if !o.is_warn() {
        return None;
    }
    let m = &o.maintenance;
    log::active_session(
        s,
        o.active_key.as_deref(),
        m.prune_after_ms,
        m.max_entries,
        super::now_ms(),
    )
}
