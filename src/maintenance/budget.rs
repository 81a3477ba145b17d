//! The disk budget (`enforceSessionDiskBudget`) and the unreferenced-artifact sweep
//! (`pruneUnreferencedSessionArtifacts`), run for real or simulated through `files::Remover`.
//!
//! Budget: total = sizes of the directory's regular files − the store file + the projected
//! store text. Over `maxDiskBytes`, phase 1 removes stale temps, archives and orphan artifacts
//! oldest first until at or below the high-water mark; phase 2 evicts unprotected entries
//! oldest first, shrinking the projected store by the entry's pretty-printed chunk + 2 bytes
//! and deleting the transcript and sidecars of the last entry using a session id, except
//! those a remaining entry still uses (or the store: [`Protected`], released as it evicts).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::json::Json;
use anyhow::Result;

use super::files::{self, EntryFiles, FileInfo, PathSet, Remover};
use super::protect::Protected;
use crate::keys;
use crate::layout;
use crate::store::{self, Store, blobs};

/// Store temps younger than this are left alone.
pub const TEMP_STALE_MS: f64 = 300_000.0;

/// The `diskBudget` object of a summary.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetReport {
    pub total_bytes_before: i64,
    pub total_bytes_after: i64,
    pub removed_files: u64,
    pub removed_entries: u64,
    pub freed_bytes: i64,
    pub max_bytes: i64,
    pub high_water_bytes: i64,
    pub over_budget: bool,
}

/// The `unreferencedArtifacts` object of a summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SweepReport {
    pub scanned_files: u64,
    pub removed_files: u64,
    pub freed_bytes: i64,
    pub older_than_ms: i64,
}

pub use super::dir::{Dir, Scanned, scan};

/// Byte length of the `"key": {...}` chunk of one entry in a pretty store.
fn chunk_bytes(key: &str, entry: &Json) -> i64 {
    crate::jsjson::pretty_member_len(key, entry, 1) as i64
}

/// What the budget is asked to keep and may not touch.
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a> {
    /// `maxDiskBytes` (`None`: no budget).
    pub max_bytes: Option<i64>,
    /// `highWaterBytes`, what a budget over `max_bytes` cleans down to (`None`: no budget).
    pub high_water_bytes: Option<i64>,
    /// The `--active-key` entry, never evicted.
    pub active_key: Option<&'a str>,
    /// The keys the entry steps preserve, never evicted either.
    pub preserve: &'a [String],
    /// Warn mode: measure only.
    pub warn_only: bool,
}

/// The prompt blobs of the projected store: references per hash, the blob files on disk by
/// hash, and the bytes of the blobs the projection would still have to write.
struct PromptBlobs<'f> {
    refs: HashMap<String, usize>,
    existing: HashMap<&'f str, &'f FileInfo>,
    virtual_bytes: HashMap<String, i64>,
}

/// The directory as the budget measures it: the files' sizes, the store counted at its
/// projected (pretty, blobs split out) length, and the blobs it still has to write.
struct Measure<'f> {
    total: i64,
    projected_store: i64,
    blobs: PromptBlobs<'f>,
}

fn measure<'f>(
    d: &Dir<'_>,
    s: &Store,
    scanned: &'f [FileInfo],
    blob_files: &'f [FileInfo],
) -> Measure<'f> {
    let store_canonical = crate::store::paths::canonical(d.store_path);
    let store_size = scanned
        .iter()
        .find(|f| f.canonical == store_canonical)
        .map_or(0, |f| f.size as i64);
    let (projected_view, needed) = blobs::project(s);
    let projected_store = store::serialized_len(&projected_view) as i64;
    let existing: HashMap<&str, &FileInfo> = blob_files
        .iter()
        .filter_map(|f| files::blob_hash(&f.name).map(|h| (h, f)))
        .collect();
    let mut virtual_bytes: HashMap<String, i64> = HashMap::new();
    for b in &needed {
        if !existing.contains_key(b.hash.as_str()) {
            virtual_bytes.insert(b.hash.clone(), b.prompt.len() as i64);
        }
    }
    let refs = files::blob_refcounts(&projected_view);
    let total = scanned
        .iter()
        .chain(blob_files)
        .map(|f| f.size as i64)
        .sum::<i64>()
        - store_size
        + projected_store
        + virtual_bytes.values().sum::<i64>();
    Measure {
        total,
        projected_store,
        blobs: PromptBlobs {
            refs,
            existing,
            virtual_bytes,
        },
    }
}

/// The budget's running figures.
#[derive(Debug, Clone, Copy)]
struct Tally {
    total: i64,
    removed_files: u64,
    removed_entries: u64,
    freed: i64,
}

impl Tally {
    /// Count a file removal that freed `n` bytes (none when `n` is not positive).
    fn file_removed(&mut self, n: i64) {
        if n > 0 {
            self.total -= n;
            self.freed += n;
            self.removed_files += 1;
        }
    }
}

/// One enforcement, once the directory is over its budget: what it removes through, its
/// figures, and the mark it cleans down to.
struct Pass<'a> {
    remover: Remover<'a>,
    /// The evicted entries, as they were.
    evicted: Vec<(String, Json)>,
    tally: Tally,
    high: i64,
    temp_cutoff: f64,
    blob_cutoff: f64,
}

/// Oldest first (by mtime), ties as listed.
fn oldest_first(files: &mut [&FileInfo]) {
    files.sort_by(|a, b| {
        a.mtime_ms
            .partial_cmp(&b.mtime_ms)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}

impl Pass<'_> {
    fn under_high_water(&self) -> bool {
        self.tally.total <= self.high
    }

    /// Phase 1: removable prompt blobs, then stale store temps, archives and orphan
    /// artifacts, each oldest first, until at or below the high-water mark.
    fn remove_files(
        &mut self,
        d: &Dir<'_>,
        scanned: &[FileInfo],
        blob_files: &[FileInfo],
        protected: &Protected,
        refs: &HashMap<String, usize>,
    ) {
        let basename = d.store_basename();
        let mut blob_queue: Vec<&FileInfo> = blob_files
            .iter()
            .filter(|f| files::blob_removable(f, refs, self.blob_cutoff, self.temp_cutoff))
            .collect();
        oldest_first(&mut blob_queue);
        for f in blob_queue {
            if self.under_high_water() {
                break;
            }
            let n = self
                .remover
                .remove_blob(f, refs, self.blob_cutoff, self.temp_cutoff);
            self.tally.file_removed(n as i64);
        }
        let mut queue: Vec<&FileInfo> = scanned
            .iter()
            .filter(|f| {
                if layout::is_store_temp_name(&f.name, &basename) {
                    f.mtime_ms <= self.temp_cutoff
                } else {
                    layout::is_archive_name(&f.name) || files::is_orphan(f, protected)
                }
            })
            .collect();
        oldest_first(&mut queue);
        for f in queue {
            if self.under_high_water() {
                break;
            }
            let n = self.remover.remove(&f.path, Some(&f.canonical));
            self.tally.file_removed(n as i64);
        }
    }

    /// Phase 2: evict unprotected entries, least recently updated first, until at or below
    /// the high-water mark: the projected store shrinks by the entry's chunk, its prompt blob
    /// goes with its last reference, and its transcript and sidecars with the last entry
    /// using its session id, unless a remaining entry still uses them (`protected`, which
    /// each eviction releases the entry's files from).
    fn evict_entries(
        &mut self,
        d: &Dir<'_>,
        s: &mut Store,
        limits: &Limits<'_>,
        mut projected: i64,
        blobs: &mut PromptBlobs<'_>,
        mut protected: Protected,
    ) {
        let entry_files = EntryFiles::new(d.sessions_dir);
        let active = limits
            .active_key
            .map(|k| crate::js::js_trim(k).to_lowercase())
            .filter(|k| !k.is_empty());
        let mut id_refs: HashMap<String, usize> = HashMap::new();
        for e in s.values() {
            if let Some(id) = store::session_id(e) {
                *id_refs.entry(id.to_string()).or_default() += 1;
            }
        }
        let mut projected_store = blobs::project(s).0.into_owned();
        let mut chunks: HashMap<String, i64> = projected_store
            .iter()
            .map(|(k, e)| (k.clone(), chunk_bytes(k, e)))
            .collect();
        for key in eviction_order(s) {
            if self.under_high_water() {
                break;
            }
            if active
                .as_deref()
                .is_some_and(|a| crate::js::js_trim(&key).to_lowercase() == a)
            {
                continue;
            }
            let Some(entry) = s.get(&key) else { continue };
            if keys::should_preserve(&key, Some(entry), limits.preserve) {
                continue;
            }
            let blob_hash = projected_store
                .get(&key)
                .and_then(blobs::ref_hash)
                .map(str::to_string);
            let entry = s.shift_remove(&key).expect("present");
            projected_store.shift_remove(&key);
            let prev = projected;
            projected = match chunks.remove(&key) {
                Some(c) if c >= 0 => (projected - (c + 2)).max(2),
                _ => store::serialized_len(&projected_store) as i64,
            };
            self.tally.total += projected - prev;
            if let Some(h) = blob_hash {
                self.release_blob(h, blobs);
            }
            protected.release(&entry_files, &key, &entry);
            self.tally.removed_entries += 1;
            if let Some(id) = store::session_id(&entry) {
                let left = id_refs.get(id).copied().unwrap_or(1).saturating_sub(1);
                if left > 0 {
                    id_refs.insert(id.to_string(), left);
                } else {
                    id_refs.remove(id);
                    self.remove_artifacts(d, &entry, &protected);
                }
            }
            self.evicted.push((key, entry));
        }
    }

    /// Drop one reference to the prompt blob `h`; with its last, the blob goes: its bytes
    /// leave the total when it was still to be written, else its file is removed.
    fn release_blob(&mut self, h: String, blobs: &mut PromptBlobs<'_>) {
        let left = blobs.refs.get(&h).copied().unwrap_or(1).saturating_sub(1);
        if left > 0 {
            blobs.refs.insert(h, left);
            return;
        }
        blobs.refs.remove(&h);
        let virt = blobs.virtual_bytes.get(&h).copied().unwrap_or(0);
        if virt > 0 {
            self.tally.total -= virt;
        } else if let Some(f) = blobs.existing.get(h.as_str())
            && files::blob_removable(f, &blobs.refs, self.blob_cutoff, self.temp_cutoff)
        {
            let n = self
                .remover
                .remove_blob(f, &blobs.refs, self.blob_cutoff, self.temp_cutoff);
            self.tally.file_removed(n as i64);
        }
    }

    /// Remove the transcript and sidecars of an evicted entry whose session id no kept entry
    /// uses, but none that is still `protected`.
    fn remove_artifacts(&mut self, d: &Dir<'_>, entry: &Json, protected: &Protected) {
        for p in files::entry_artifacts(entry, d.sessions_dir) {
            // Its `sessionFile` may name the store or a file a kept entry uses.
            if protected.contains(&crate::store::paths::canonical(&p)) {
                continue;
            }
            let n = self.remover.remove(&p, None);
            self.tally.file_removed(n as i64);
        }
    }
}

/// The keys by `updatedAt`, oldest first (a missing or non-finite one counts as 0; ties in
/// store order).
fn eviction_order(s: &Store) -> Vec<String> {
    let mut order: Vec<(String, f64)> = s
        .iter()
        .map(|(k, e)| {
            (
                k.clone(),
                store::updated_at(e)
                    .filter(|u| u.is_finite())
                    .unwrap_or(0.0),
            )
        })
        .collect();
    order.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
    order.into_iter().map(|(k, _)| k).collect()
}

/// What a budget run removed, or would remove: every canonical path, and the evicted entries.
#[derive(Debug, Default)]
pub struct Removed {
    pub paths: Vec<PathBuf>,
    pub entries: Vec<(String, Json)>,
}

/// Run the budget. What it removes is added to `removed`.
pub fn enforce(
    d: &Dir<'_>,
    s: &mut Store,
    limits: &Limits<'_>,
    removed: &mut Removed,
) -> Result<Option<BudgetReport>> {
    let (Some(max), Some(high)) = (limits.max_bytes, limits.high_water_bytes) else {
        return Ok(None);
    };
    let files = d.files();
    let (scanned, blob_files) = &*files;
    let Measure {
        total,
        projected_store,
        mut blobs,
    } = measure(d, s, scanned, blob_files);
    let before = total;
    let report = |t: &Tally, over: bool| BudgetReport {
        total_bytes_before: before,
        total_bytes_after: t.total,
        removed_files: t.removed_files,
        removed_entries: t.removed_entries,
        freed_bytes: t.freed,
        max_bytes: max,
        high_water_bytes: high,
        over_budget: over,
    };
    let tally = Tally {
        total,
        removed_files: 0,
        removed_entries: 0,
        freed: 0,
    };
    if total <= max {
        return Ok(Some(report(&tally, false)));
    }
    if limits.warn_only {
        return Ok(Some(report(&tally, true)));
    }
    let protected = d.protected(s)?;
    let mut pass = Pass {
        temp_cutoff: super::now_ms() - TEMP_STALE_MS,
        blob_cutoff: super::now_ms() - TEMP_STALE_MS,
        remover: Remover::new(d.confined, scanned.iter().chain(blob_files)),
        evicted: Vec::new(),
        tally,
        high,
    };
    pass.remove_files(d, scanned, blob_files, &protected, &blobs.refs);
    if !pass.under_high_water() {
        let protected = std::rc::Rc::unwrap_or_clone(protected);
        pass.evict_entries(d, s, limits, projected_store, &mut blobs, protected);
    }
    removed.paths.extend(pass.remover.removed);
    removed.entries.extend(pass.evicted);
    Ok(Some(report(&pass.tally, true)))
}

/// The unreferenced-artifact sweep: stale store temps, orphan transcripts, checkpoints and
/// trajectories older than `older_than_ms`, and unreferenced prompt blobs are deleted (archives
/// never are).
pub fn sweep(d: &Dir<'_>, s: &Store, older_than_ms: i64, exclude: &PathSet) -> Result<SweepReport> {
    let older = older_than_ms.max(0);
    let files = d.files();
    let (scanned, blob_files) = &*files;
    let protected = d.protected(s)?;
    let (projected, _) = blobs::project(s);
    let refs = files::blob_refcounts(&projected);
    let cutoff = super::now_ms() - older as f64;
    let temp_cutoff = super::now_ms() - TEMP_STALE_MS;
    let blob_cutoff = super::now_ms() - (older as f64).max(TEMP_STALE_MS);
    let basename = d.store_basename();
    let mut queue: Vec<(bool, &FileInfo)> = scanned
        .iter()
        .filter(|f| !exclude.contains(f.canonical.as_os_str()))
        .filter(|f| {
            if layout::is_store_temp_name(&f.name, &basename) {
                f.mtime_ms <= temp_cutoff
            } else {
                f.mtime_ms <= cutoff && files::is_orphan(f, &protected)
            }
        })
        .map(|f| (false, f))
        .chain(
            blob_files
                .iter()
                .filter(|f| !exclude.contains(f.canonical.as_os_str()))
                .filter(|f| files::blob_removable(f, &refs, blob_cutoff, temp_cutoff))
                .map(|f| (true, f)),
        )
        .collect();
    queue.sort_by(|a, b| {
        a.1.mtime_ms
            .partial_cmp(&b.1.mtime_ms)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut remover = Remover::new(d.confined, scanned.iter().chain(blob_files));
    let mut rep = SweepReport {
        scanned_files: (scanned.len() + blob_files.len()) as u64,
        older_than_ms: older,
        ..Default::default()
    };
    for (is_blob, f) in queue {
        let n = if is_blob {
            remover.remove_blob(f, &refs, blob_cutoff, temp_cutoff)
        } else {
            remover.remove(&f.path, Some(&f.canonical))
        } as i64;
        if n <= 0 {
            continue;
        }
        rep.removed_files += 1;
        rep.freed_bytes += n;
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::Confined;
    use serde_json::{Value, json};
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    fn age(p: &Path, ms: u64) {
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_millis(ms))
            .unwrap();
    }

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        (dir, d)
    }

    #[test]
    fn sweep_removes_old_orphans_and_stale_temps_only() {
        let (_t, d) = setup();
        let store_path = d.join("sessions.json");
        std::fs::write(&store_path, "{}").unwrap();
        for (name, ms) in [
            ("old.jsonl", 40 * 86_400_000),
            ("young.jsonl", 1000),
            ("kept.jsonl", 40 * 86_400_000),
            ("a.jsonl.deleted.2020-01-01T00-00-00.000Z", 40 * 86_400_000),
            (
                "sessions.json.0123abcd-0000-4000-8000-0123456789ab.tmp",
                600_000,
            ),
            ("notes.txt", 40 * 86_400_000),
        ] {
            std::fs::write(d.join(name), "x").unwrap();
            age(&d.join(name), ms);
        }
        let Value::Object(s) = json!({"k": {"sessionId": "kept"}}) else {
            panic!()
        };
        let s = crate::store::from_map(s);
        let dir = Dir::new(&d, &store_path, None);
        let rep = sweep(&dir, &s, 30 * 86_400_000, &PathSet::default()).unwrap();
        assert_eq!(
            (rep.scanned_files, rep.removed_files, rep.freed_bytes),
            (7, 2, 2)
        );
        let c = Confined::new(&d).unwrap();
        let dir = Dir::new(&d, &store_path, Some(&c));
        sweep(&dir, &s, 30 * 86_400_000, &PathSet::default()).unwrap();
        assert!(!d.join("old.jsonl").exists());
        assert!(
            d.join("young.jsonl").exists()
                && d.join("kept.jsonl").exists()
                && d.join("notes.txt").exists()
        );
        assert!(d.join("a.jsonl.deleted.2020-01-01T00-00-00.000Z").exists());
    }

    #[test]
    fn budget_removes_archives_then_oldest_entries() {
        let (_t, d) = setup();
        let store_path = d.join("sessions.json");
        std::fs::write(&store_path, "{}").unwrap();
        std::fs::write(
            d.join("z.jsonl.deleted.2020-01-01T00-00-00.000Z"),
            "a".repeat(500),
        )
        .unwrap();
        for (sid, ms) in [("s1", 3000), ("s2", 2000), ("s3", 1000)] {
            std::fs::write(d.join(format!("{sid}.jsonl")), "b".repeat(400)).unwrap();
            age(&d.join(format!("{sid}.jsonl")), ms);
        }
        let Value::Object(s) = json!({
            "agent:main:a": {"sessionId": "s1", "updatedAt": 1},
            "agent:main:slack:channel:c": {"sessionId": "s2", "updatedAt": 2},
            "agent:main:c": {"sessionId": "s3", "updatedAt": 3}
        }) else {
            panic!()
        };
        let mut s = crate::store::from_map(s);
        let dir = Dir::new(&d, &store_path, None);
        let mut removed = Removed::default();
        let limits = Limits {
            max_bytes: Some(1000),
            high_water_bytes: Some(800),
            active_key: None,
            preserve: &[],
            warn_only: false,
        };
        let r = enforce(&dir, &mut s, &limits, &mut removed)
            .unwrap()
            .unwrap();
        assert!(r.over_budget);
        assert_eq!(r.removed_entries, 2, "{r:?}");
        assert_eq!(r.removed_files, 3);
        assert!(
            s.contains_key("agent:main:slack:channel:c"),
            "protected entries stay"
        );
        assert!(r.total_bytes_after <= 800 || s.len() == 1);
        // The evicted entries are given back as they were.
        assert_eq!(removed.entries.len(), 2);
        for (key, entry) in &removed.entries {
            assert!(!s.contains_key(key), "{key}");
            assert!(entry.get("sessionId").is_some(), "{key}: {entry}");
        }
        let mut s2 = s.clone();
        let unlimited = Limits {
            max_bytes: None,
            high_water_bytes: None,
            ..limits
        };
        let none = enforce(&dir, &mut s2, &unlimited, &mut removed).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn an_evicted_entry_leaves_the_files_a_remaining_entry_uses() {
        let (_t, d) = setup();
        let store_path = d.join("sessions.json");
        std::fs::write(&store_path, "{}").unwrap();
        for name in ["shared.jsonl", "shared.trajectory.jsonl", "kept.jsonl"] {
            std::fs::write(d.join(name), "b".repeat(400)).unwrap();
        }
        let Value::Object(s) = json!({
            "agent:main:a": {"sessionId": "x", "sessionFile": "shared.jsonl", "updatedAt": 1},
            "agent:main:b": {"sessionId": "y", "sessionFile": "shared.jsonl", "updatedAt": 2},
            "agent:main:c": {"sessionId": "kept", "updatedAt": 3}
        }) else {
            panic!()
        };
        let mut s = crate::store::from_map(s);
        let c = Confined::new(&d).unwrap();
        let dir = Dir::new(&d, &store_path, Some(&c));
        let limits = Limits {
            max_bytes: Some(1000),
            high_water_bytes: Some(1000),
            active_key: Some("agent:main:c"),
            preserve: &[],
            warn_only: false,
        };
        // OpenClaw deletes shared.jsonl with `a`, the last entry of its session id, and is
        // then under the mark: `b` stays without its transcript. Here the file stays while
        // `b` uses it, so `b` is evicted too and the file goes with it.
        let r = enforce(&dir, &mut s, &limits, &mut Removed::default())
            .unwrap()
            .unwrap();
        assert_eq!((r.removed_entries, r.removed_files), (2, 2), "{r:?}");
        assert_eq!(s.keys().collect::<Vec<_>>(), ["agent:main:c"]);
        assert!(!d.join("shared.jsonl").exists() && !d.join("shared.trajectory.jsonl").exists());
        assert!(
            d.join("kept.jsonl").exists(),
            "the active entry's transcript stays"
        );
    }
}
