//! File-level maintenance in one sessions directory: the scan OpenClaw's budget and sweep use,
//! the referenced-artifact set, removal (simulated for previews, through `fsutil::Confined` for
//! real), archiving transcripts as `.deleted.<ts>`, trajectory sidecar removal and archive
//! retention.
//!
//! Deliberate differences from OpenClaw, all on the safe side: only regular files whose real
//! directory is the sessions directory or one of its subdirectories are ever renamed or
//! removed, never through a symlink (OpenClaw also removes symlinks named like archives, and
//! trajectory runtime files outside the directory that a pointer names).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::json::Json;
use anyhow::Result;

use super::protect::Protected;
use crate::exit::Refusal;
use crate::fsutil::Confined;
use crate::layout;
use crate::store::{self, Store, paths};
use rustc_hash::{FxHashMap, FxHashSet};

pub use super::scan::{
    FileInfo, blob_hash, blob_refcounts, blob_removable, is_blob_temp_name, mtime_ms, scan,
    scan_blobs,
};

/// The canonical transcript, trajectory pointer and trajectory runtime paths of an entry
/// (`resolveSessionArtifactPathsForEntry`); empty when the transcript is outside the dir.
pub fn entry_artifacts(entry: &Json, sessions_dir: &Path) -> Vec<PathBuf> {
    let Some(t) = store::entry_transcript(entry, sessions_dir) else {
        return Vec::new();
    };
    vec![
        t.clone(),
        paths::trajectory_pointer_path(&t),
        paths::trajectory_runtime_path(&t),
    ]
}

/// The entry's transcript as `store::entry_transcript` gives it (canonical, when it is inside
/// the sessions directory). `real` is `paths::RealDir::new(sessions_dir)`, which answers the
/// common entry without a lookup per path.
pub fn entry_transcript_canonical(
    entry: &Json,
    sessions_dir: &Path,
    real: Option<&paths::RealDir>,
) -> Option<PathBuf> {
    let fast = real.zip(plain_session_id(entry));
    if let Some(fast) = fast.and_then(|(r, id)| r.default_transcript(id)) {
        return Some(fast);
    }
    store::entry_transcript(entry, sessions_dir)
}

/// The session id of an entry that names no `sessionFile`: the common entry, whose files a
/// `RealDir` answers for.
fn plain_session_id(entry: &Json) -> Option<&str> {
    store::session_file(entry)
        .is_none()
        .then(|| store::session_id(entry))
        .flatten()
}

/// [`entry_artifacts`], each canonical. `real` is `paths::RealDir::new(sessions_dir)`, which
/// answers the common entry without a lookup per path.
pub fn entry_artifacts_canonical(
    entry: &Json,
    sessions_dir: &Path,
    real: Option<&paths::RealDir>,
) -> Vec<PathBuf> {
    let fast = real.zip(plain_session_id(entry));
    if let Some(fast) = fast.and_then(|(r, id)| r.default_artifacts(id)) {
        return fast.into();
    }
    entry_artifacts(entry, sessions_dir)
        .iter()
        .map(|p| paths::canonical(p))
        .collect()
}

/// A set of canonical paths, compared by their bytes: every path put in one comes from
/// `paths::canonical` or a `RealDir` (resolved, no `.`, `..`, doubled or trailing separator),
/// and hashing the bytes is several times cheaper than hashing a `Path` component by
/// component. The set (and `Remover`'s maps) use rustc's Fx hash: std's SipHash costs more
/// than the rest of a lookup here, and the inputs are the user's own file names, so flooding
/// resistance buys nothing. Nothing iterates them, so their order never shows.
pub type PathSet = FxHashSet<std::ffi::OsString>;

/// `resolveReferencedSessionArtifactPaths`, kept to the canonical paths in `among` (the files
/// on disk: a store of hundreds of thousands of entries references paths by the hundred
/// thousand, most of them missing). Malformed `compactionCheckpoints` (which make OpenClaw
/// throw) are refused.
pub fn referenced_paths(
    s: &Store,
    sessions_dir: &Path,
    among: &FxHashSet<&OsStr>,
) -> Result<PathSet> {
    let uses = EntryFiles::new(sessions_dir);
    let mut out = PathSet::default();
    for (key, entry) in s {
        uses.visit(key, entry, |p| {
            if among.contains(p.as_os_str()) {
                out.insert(p.into_os_string());
            }
        })?;
    }
    Ok(out)
}

/// The files one entry uses, each canonical, as `resolveReferencedSessionArtifactPaths`
/// reads them per entry: its transcript, trajectory pointer and trajectory runtime, and the
/// compaction checkpoints inside the sessions directory.
pub struct EntryFiles<'a> {
    sessions_dir: &'a Path,
    /// `sessions_dir`, canonical.
    dir: PathBuf,
    real: Option<paths::RealDir>,
}

impl<'a> EntryFiles<'a> {
    pub fn new(sessions_dir: &'a Path) -> EntryFiles<'a> {
        EntryFiles {
            sessions_dir,
            dir: paths::canonical(sessions_dir),
            real: paths::RealDir::new(sessions_dir),
        }
    }

    /// Call `f` with each file `entry` (at `key`) uses. Malformed `compactionCheckpoints`
    /// are refused (after its artifacts were visited).
    pub fn visit(&self, key: &str, entry: &Json, mut f: impl FnMut(PathBuf)) -> Result<()> {
        entry_artifacts_canonical(entry, self.sessions_dir, self.real.as_ref())
            .into_iter()
            .for_each(&mut f);
        let Some(cps) = entry.get("compactionCheckpoints") else {
            return Ok(());
        };
        if cps.is_null() {
            return Ok(());
        }
        let Json::Array(cps) = cps else {
            return Err(malformed(key));
        };
        for cp in cps {
            for side in ["preCompaction", "postCompaction"] {
                let Some(obj) = cp.get(side).filter(|v| !v.is_null()) else {
                    return Err(malformed(key));
                };
                if let Some(Json::String(file)) = obj.get("sessionFile") {
                    let file = crate::js::js_trim(file);
                    if file.is_empty() {
                        continue;
                    }
                    let c = paths::canonical(Path::new(file));
                    if paths::is_strictly_inside(&self.dir, &c) {
                        f(c);
                    }
                }
            }
        }
        Ok(())
    }
}

fn malformed(key: &str) -> anyhow::Error {
    Refusal::Unsafe(format!(
        "entry {key:?} has malformed compactionCheckpoints (OpenClaw's cleanup fails on it); fix or remove that field first"
    ))
    .into()
}

/// `isUnreferencedSessionArtifactFile`: an unreferenced transcript, checkpoint or trajectory
/// (never the store, whatever its name).
pub fn is_orphan(f: &FileInfo, protected: &Protected) -> bool {
    !protected.contains(&f.canonical)
        && (layout::is_checkpoint_name(&f.name)
            || layout::is_trajectory_name(&f.name)
            || layout::is_primary_transcript_name(&f.name))
}

/// Removes files, or pretends to for a preview (`removeFileForBudget`).
pub struct Remover<'a> {
    pub confined: Option<&'a Confined>,
    /// Scanned sizes by canonical path (simulation only).
    sizes: FxHashMap<&'a std::ffi::OsStr, u64>,
    simulated: PathSet,
    /// Canonical paths removed (or that would be).
    pub removed: Vec<PathBuf>,
}

impl<'a> Remover<'a> {
    /// `confined = None` simulates (dry run) using the scanned sizes of `files`.
    pub fn new(
        confined: Option<&'a Confined>,
        files: impl IntoIterator<Item = &'a FileInfo>,
    ) -> Remover<'a> {
        let sizes = match confined {
            Some(_) => FxHashMap::default(),
            None => files
                .into_iter()
                .map(|f| (f.canonical.as_os_str(), f.size))
                .collect(),
        };
        Remover {
            confined,
            sizes,
            simulated: FxHashSet::default(),
            removed: Vec::new(),
        }
    }

    /// Remove `path`; the bytes freed (0 = nothing removed or an empty file).
    /// `removePromptBlobFileForBudget`: re-check a blob (fresh stat when applying) first.
    pub fn remove_blob(
        &mut self,
        f: &FileInfo,
        refs: &HashMap<String, usize>,
        blob_cutoff: f64,
        temp_cutoff: f64,
    ) -> u64 {
        let mut f = f.clone();
        if self.confined.is_some() {
            let Ok(meta) = std::fs::metadata(&f.path) else {
                return 0;
            };
            if !meta.is_file() {
                return 0;
            }
            f.size = meta.len();
            f.mtime_ms = mtime_ms(&meta);
        }
        if !blob_removable(&f, refs, blob_cutoff, temp_cutoff) {
            return 0;
        }
        self.remove(&f.path, Some(&f.canonical))
    }

    pub fn remove(&mut self, path: &Path, canonical: Option<&Path>) -> u64 {
        let resolved = paths::resolve(path);
        let canonical = canonical.map_or_else(|| paths::canonical(&resolved), Path::to_path_buf);
        match self.confined {
            None => {
                if self.simulated.contains(canonical.as_os_str()) {
                    return 0;
                }
                let size = self.sizes.get(canonical.as_os_str()).copied().unwrap_or(0);
                if size == 0 {
                    return 0;
                }
                self.simulated.insert(canonical.clone().into_os_string());
                self.removed.push(canonical);
                size
            }
            Some(c) => {
                let Ok(meta) = std::fs::symlink_metadata(&resolved) else {
                    return 0;
                };
                if !meta.file_type().is_file() {
                    return 0;
                }
                let Ok(c) = c.for_parent_of(&resolved) else {
                    return 0;
                };
                // A file a live process has locked (a transcript in use) is never removed; a
                // lock that cannot be read counts as held.
                if !matches!(crate::fsutil::lock::live_holder(&c, &resolved), Ok(None)) {
                    return 0;
                }
                match c.remove_file(&resolved) {
                    Ok(size) => {
                        if size > 0 {
                            self.removed.push(canonical);
                        }
                        size
                    }
                    Err(_) => 0,
                }
            }
        }
    }
}

/// `rememberRemovedSessionFile`: session id → the file to archive (a later entry with a
/// `sessionFile` wins). The id may be absent, as in OpenClaw. Each id is held once, in the
/// order first seen, found again through a table of places hashed by the id (a run may remove
/// hundreds of thousands of entries).
#[derive(Debug, Default, Clone)]
pub struct RemovedFiles(pub Vec<IdAndFile>, hashbrown::HashTable<usize>);

/// A removed session's id and the file to archive for it (see [`RemovedFiles`]).
pub type IdAndFile = (Option<Box<str>>, Option<Box<str>>);

impl RemovedFiles {
    /// Room for `n` removed entries.
    pub fn with_capacity(n: usize) -> RemovedFiles {
        RemovedFiles(
            Vec::with_capacity(n),
            hashbrown::HashTable::with_capacity(n),
        )
    }

    /// Remember a removed entry's session id and file, taken out of it (the rest of it goes).
    pub fn remember(&mut self, mut entry: Json) {
        let mut take = |name| match entry.get_mut(name).map(std::mem::take) {
            Some(Json::String(s)) if !s.is_empty() => Some(s),
            _ => None,
        };
        let id = take("sessionId");
        let file = take("sessionFile");
        let (files, at) = (&mut self.0, &mut self.1);
        let hash = id_hash(id.as_deref());
        match at.find(hash, |&i| files[i].0 == id) {
            Some(&i) => {
                if file.is_some() {
                    files[i].1 = file;
                }
            }
            None => {
                at.insert_unique(hash, files.len(), |&i| id_hash(files[i].0.as_deref()));
                files.push((id, file));
            }
        }
    }
}

fn id_hash(id: Option<&str>) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(id)
}

/// Session ids still present in the store.
pub fn referenced_ids(s: &Store) -> HashSet<String> {
    s.values()
        .filter_map(store::session_id)
        .map(str::to_string)
        .collect()
}

/// `resolveSessionTranscriptCandidates` (no agent id), with the legacy `~/.openclaw/sessions`.
fn transcript_candidates(
    id: Option<&str>,
    file: Option<&str>,
    sessions_dir: &Path,
    home: &Path,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let stale = match crate::maintenance::entries::generated_transcript_session_id(file) {
        None => false,
        Some(g) => Some(g.as_str()) != id,
    };
    let resolve_file = |f: &str| match paths::within_sessions_dir(sessions_dir, f) {
        paths::Within::Inside(p) | paths::Within::Outside(p) => Some(p),
        paths::Within::Invalid => id.and_then(|i| paths::default_transcript_path(i, sessions_dir)),
    };
    if let Some(f) = file.filter(|_| !stale) {
        out.extend(resolve_file(f));
    }
    if let Some(i) = id {
        out.extend(paths::default_transcript_path(i, sessions_dir));
    }
    if let Some(f) = file.filter(|_| stale) {
        out.extend(resolve_file(f));
    }
    if let Some(i) = id {
        out.extend(paths::default_transcript_path(
            i,
            &home.join(".openclaw").join("sessions"),
        ));
    }
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// What [`archive_removed`] did.
#[derive(Debug, Default)]
pub struct Archived {
    /// The directories archived into.
    pub dirs: Vec<PathBuf>,
    /// Transcripts left where they are because a live process held their lock right before
    /// the rename, each with who holds it.
    pub in_use: Vec<(PathBuf, String)>,
}

/// `archiveRemovedSessionTranscripts` with `restrictToStoreDir`: rename each unreferenced
/// removed transcript to `<path>.deleted.<ts>`, except what is [`Protected`].
///
/// Unlike the reference, each transcript's write lock is looked at again right before its
/// rename (the plan checked them once, earlier): a transcript a live process has locked
/// meanwhile is not renamed but left in place, unreferenced (its entry is already gone from
/// the store, as in OpenClaw's order), and listed in [`Archived::in_use`]; the sweep and the
/// budget leave it alone as well while the lock is held ([`Remover::remove`]).
pub fn archive_removed(
    confined: &Confined,
    removed: &RemovedFiles,
    referenced: &HashSet<String>,
    protected: &Protected,
    sessions_dir: &Path,
    home: &Path,
) -> Archived {
    let dir = paths::canonical(sessions_dir);
    let mut out = Archived::default();
    for (id, file) in &removed.0 {
        if id.as_deref().is_some_and(|i| referenced.contains(i)) {
            continue;
        }
        for cand in transcript_candidates(id.as_deref(), file.as_deref(), sessions_dir, home) {
            let c = paths::canonical(&cand);
            if !paths::is_strictly_inside(&dir, &c) || !c.exists() || protected.contains(&c) {
                continue;
            }
            let Ok(sub) = confined.for_parent_of(&c) else {
                continue;
            };
            // A lock that cannot be read counts as held: the file stays.
            match crate::fsutil::lock::live_holder(&sub, &c) {
                Ok(None) => {}
                Ok(Some(holder)) => {
                    out.in_use.push((c, holder.to_string()));
                    continue;
                }
                Err(e) => {
                    out.in_use
                        .push((c, format!("its lock cannot be read: {e:#}")));
                    continue;
                }
            }
            let stamp = layout::format_archive_timestamp(super::now_ms() as i64);
            let mut target = c.clone().into_os_string();
            target.push(format!(".deleted.{stamp}"));
            let target = PathBuf::from(target);
            if sub.rename_new(&c, &target).is_ok()
                && let Some(parent) = target.parent()
                && !out.dirs.iter().any(|d| d == parent)
            {
                out.dirs.push(parent.to_path_buf());
            }
        }
    }
    out
}

/// `removeRemovedSessionTrajectoryArtifacts` with `restrictToStoreDir`, except what is
/// [`Protected`]. A removed entry's trajectory pointer (plain JSON) may name any file, so
/// unlike OpenClaw only a `*.trajectory.jsonl` is followed.
pub fn remove_trajectories(
    confined: &Confined,
    removed: &RemovedFiles,
    referenced: &HashSet<String>,
    protected: &Protected,
    sessions_dir: &Path,
) {
    let dir = paths::canonical(sessions_dir);
    for (id, file) in &removed.0 {
        if id.as_deref().is_some_and(|i| referenced.contains(i)) {
            continue;
        }
        let transcript = match (file, id) {
            (Some(f), _) => match paths::within_sessions_dir(sessions_dir, f) {
                paths::Within::Inside(p) | paths::Within::Outside(p) => Some(p),
                paths::Within::Invalid => id
                    .as_deref()
                    .and_then(|i| paths::default_transcript_path(i, sessions_dir)),
            },
            (None, Some(i)) => paths::default_transcript_path(i, sessions_dir),
            (None, None) => None,
        };
        let Some(transcript) = transcript else {
            continue;
        };
        let runtime = paths::trajectory_runtime_path(&transcript);
        let pointer = paths::trajectory_pointer_path(&transcript);
        let mut candidates = vec![runtime.clone()];
        if let Some(p) = read_pointer(&pointer, id.as_deref())
            && p != runtime
            && p.to_string_lossy().ends_with(".trajectory.jsonl")
        {
            candidates.push(p);
        }
        for cand in candidates {
            let c = paths::canonical(&cand);
            if paths::is_strictly_inside(&dir, &c) && is_regular(&cand) && !protected.contains(&c) {
                remove_in(confined, &cand);
            }
        }
        let c = paths::canonical(&pointer);
        if paths::is_strictly_inside(&dir, &c) && is_regular(&pointer) && !protected.contains(&c) {
            remove_in(confined, &pointer);
        }
    }
}

/// Best-effort removal of a regular file anywhere inside the confined tree (OpenClaw swallows
/// these failures too).
fn remove_in(confined: &Confined, p: &Path) {
    if let Ok(c) = confined.for_parent_of(p) {
        let _ = c.remove_file(p);
    }
}

fn is_regular(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// A trajectory pointer's `runtimeFile`, when the pointer is valid for `session_id`.
fn read_pointer(pointer: &Path, session_id: Option<&str>) -> Option<PathBuf> {
    if !is_regular(pointer) {
        return None;
    }
    let v = crate::jsjson::parse(&std::fs::read(pointer).ok()?).ok()?;
    let ok = v.get("traceSchema").and_then(serde_json::Value::as_str)
        == Some("openclaw-trajectory-pointer")
        && v.get("schemaVersion").and_then(serde_json::Value::as_f64) == Some(1.0)
        && v.get("sessionId").and_then(serde_json::Value::as_str) == session_id;
    let rf = v.get("runtimeFile")?.as_str()?;
    (ok && !crate::js::js_trim(rf).is_empty()).then(|| paths::resolve(Path::new(rf)))
}

/// `cleanupArchivedSessionTranscripts`: remove `.deleted.<ts>` older than `deleted_ms` and
/// `.reset.<ts>` older than `reset_ms` (by the name's timestamp).
pub fn archive_retention(
    confined: &Confined,
    dirs: &[PathBuf],
    deleted_ms: i64,
    reset_ms: Option<i64>,
) {
    let mut rules = vec![(layout::ArchiveReason::Deleted, deleted_ms)];
    if let Some(r) = reset_ms {
        rules.push((layout::ArchiveReason::Reset, r));
    }
    rules.retain(|r| r.1 >= 0);
    if rules.is_empty() {
        return;
    }
    let now = super::now_ms();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for name in names {
            for (reason, older) in &rules {
                let Some(ts) = layout::archive_timestamp(&name, *reason) else {
                    continue;
                };
                if now - ts as f64 > *older as f64 {
                    let p = dir.join(&name);
                    if is_regular(&p) {
                        remove_in(confined, &p);
                    }
                }
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn store_of(v: Value) -> Store {
        let Value::Object(s) = v else { panic!() };
        crate::store::from_map(s)
    }

    /// The fast answer for the common entry is `store::entry_transcript`'s, and every other
    /// entry gets `store::entry_transcript`'s own: symlinked names, ids the runtime refuses,
    /// empty ids, a `sessionFile`, a directory that is not its own real path.
    #[test]
    fn an_entrys_transcript_is_the_stores_answer_with_or_without_the_real_dir() {
        use std::os::unix::fs::symlink;
        let guard = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(guard.path()).unwrap();
        let d = root.join("sessions");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("plain.jsonl"), "").unwrap();
        std::fs::write(d.join("target.jsonl"), "").unwrap();
        symlink(d.join("target.jsonl"), d.join("linked.jsonl")).unwrap();
        symlink(&d, root.join("via-link")).unwrap();
        let entries = [
            json!({"sessionId": "plain"}),
            json!({"sessionId": "absent"}),
            json!({"sessionId": "linked"}),
            json!({"sessionId": " spaced "}),
            json!({"sessionId": ""}),
            json!({"sessionId": "a:b"}),
            json!({"sessionId": "../up"}),
            json!({"sessionId": 7}),
            json!({}),
            json!({"sessionId": "plain", "sessionFile": "sub/x.jsonl"}),
            json!({"sessionId": "plain", "sessionFile": "/elsewhere/x.jsonl"}),
            json!({"sessionId": "plain", "sessionFile": ""}),
        ];
        for dir in [d.clone(), root.join("via-link"), root.join("missing")] {
            let real = paths::RealDir::new(&dir);
            assert_eq!(real.is_some(), dir == d, "{}", dir.display());
            for e in &entries {
                let e = Json::from_value(e.clone());
                assert_eq!(
                    entry_transcript_canonical(&e, &dir, real.as_ref()),
                    store::entry_transcript(&e, &dir),
                    "{e:?} in {}",
                    dir.display()
                );
            }
        }
    }

    #[test]
    fn archives_and_retention() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("v.jsonl"), "keep").unwrap();
        std::fs::write(d.join("gone.jsonl"), "t").unwrap();
        std::fs::write(d.join("gone.trajectory.jsonl"), "t").unwrap();
        std::fs::write(d.join("old.jsonl.deleted.2020-01-01T00-00-00.000Z"), "o").unwrap();
        std::fs::write(d.join("old.jsonl.reset.2020-01-01T00-00-00.000Z"), "o").unwrap();
        std::fs::write(d.join("bak.jsonl.bak.2020-01-01T00-00-00.000Z"), "o").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("v.jsonl"),
            d.join("link.jsonl.deleted.2020-01-01T00-00-00.000Z"),
        )
        .unwrap();
        let c = Confined::new(&d).unwrap();
        let mut removed = RemovedFiles::default();
        removed.remember(Json::from_value(json!({"sessionId": "gone"})));
        removed.remember(Json::from_value(json!({"sessionId": "kept"})));
        let referenced: HashSet<String> = ["kept".to_string()].into();
        let kept = store_of(json!({"k": {"sessionId": "kept"}}));
        let protected = Protected::of(&kept, &d, &d.join("sessions.json")).unwrap();
        let archived = archive_removed(
            &c,
            &removed,
            &referenced,
            &protected,
            &d,
            Path::new("/nonexistent"),
        );
        assert!(archived.in_use.is_empty());
        let dirs = archived.dirs;
        assert_eq!(dirs, vec![d.clone()]);
        remove_trajectories(&c, &removed, &referenced, &protected, &d);
        assert!(!d.join("gone.trajectory.jsonl").exists());
        archive_retention(&c, &dirs, 86_400_000, None);
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("gone.jsonl.deleted.")),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.starts_with("old.jsonl.deleted.")));
        assert!(
            names.iter().any(|n| n.starts_with("old.jsonl.reset.")),
            "reset retention disabled"
        );
        assert!(
            names.iter().any(|n| n.starts_with("bak.jsonl.bak.")),
            "bak archives never age"
        );
        assert!(
            names.iter().any(|n| n.starts_with("link.jsonl.deleted.")),
            "symlinks are never removed"
        );
        assert_eq!(
            std::fs::read_to_string(outside.path().join("v.jsonl")).unwrap(),
            "keep"
        );
    }

    #[test]
    fn a_transcript_locked_before_its_rename_is_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(d.join("busy.jsonl"), "t").unwrap();
        std::fs::write(d.join("idle.jsonl"), "t").unwrap();
        let c = Confined::new(&d).unwrap();
        let mut removed = RemovedFiles::default();
        removed.remember(Json::from_value(json!({"sessionId": "busy"})));
        removed.remember(Json::from_value(json!({"sessionId": "idle"})));
        // The plan saw no lock; a live process (this one) takes one before the rename.
        let crate::fsutil::lock::Acquire::Locked(lock) =
            crate::fsutil::lock::acquire(&c, &d.join("busy.jsonl"), None).unwrap()
        else {
            panic!("not locked")
        };
        let nothing_kept = Protected::of(&Store::new(), &d, &d.join("sessions.json")).unwrap();
        let archived = archive_removed(
            &c,
            &removed,
            &HashSet::new(),
            &nothing_kept,
            &d,
            Path::new("/nonexistent"),
        );
        assert_eq!(archived.dirs, vec![d.clone()]);
        assert_eq!(archived.in_use.len(), 1, "{archived:?}");
        assert_eq!(archived.in_use[0].0, d.join("busy.jsonl"));
        assert!(
            archived.in_use[0]
                .1
                .contains(&std::process::id().to_string()),
            "{archived:?}"
        );
        assert_eq!(std::fs::read_to_string(d.join("busy.jsonl")).unwrap(), "t");
        assert!(!d.join("idle.jsonl").exists());
        // Unreferenced now, it is still not removed while the lock is held.
        let mut remover = Remover::new(Some(&c), std::iter::empty());
        assert_eq!(remover.remove(&d.join("busy.jsonl"), None), 0);
        assert!(d.join("busy.jsonl").exists());
        drop(lock);
        assert_eq!(remover.remove(&d.join("busy.jsonl"), None), 1);
        assert!(!d.join("busy.jsonl").exists());
    }

    /// Each session id once, in the order first seen; a later entry's non-empty `sessionFile`
    /// wins; entries without an id share one place (as in OpenClaw's map).
    #[test]
    fn removed_files_keep_each_id_once_with_its_last_file() {
        let mut removed = RemovedFiles::default();
        for e in [
            json!({"sessionId": "a", "sessionFile": "a1.jsonl"}),
            json!({"sessionId": "b"}),
            json!({"sessionFile": "none1.jsonl"}),
            json!({"sessionId": "a", "sessionFile": ""}),
            json!({"sessionId": "b", "sessionFile": "b2.jsonl"}),
            json!({"sessionId": "", "sessionFile": "none2.jsonl"}),
            json!({"sessionId": "a"}),
        ] {
            removed.remember(Json::from_value(e));
        }
        let seen: Vec<(Option<&str>, Option<&str>)> = (removed.0.iter())
            .map(|(id, file)| (id.as_deref(), file.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                (Some("a"), Some("a1.jsonl")),
                (Some("b"), Some("b2.jsonl")),
                (None, Some("none2.jsonl")),
            ]
        );
    }
}
