//! What cleanup must never take along with a removed entry, whatever its `sessionFile` or
//! trajectory pointer says: the store itself, and the files the entries it keeps use.
//! OpenClaw follows those paths blindly (renaming the store away and writing a new one, or
//! archiving or deleting a live session's transcript); clawkeeper does not.
//!
//! One mechanism serves every remover: [`Protected`], the remaining entries' files counted by
//! canonical path. The archive step, the trajectory removal, the disk budget (which releases
//! an entry's files as it evicts it) and the unreferenced sweep all ask it before a file goes.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::json::Json;
use anyhow::Result;
use rustc_hash::{FxHashMap, FxHashSet};

use super::files::EntryFiles;
use crate::store::{Store, paths};

/// The store and every file its remaining entries use (transcript, trajectory pointer,
/// trajectory runtime, compaction checkpoints inside the sessions directory; see
/// [`EntryFiles`]), each counted once per entry that uses it, by canonical path.
///
/// A file is counted by a 64-bit hash of its canonical path, keyed at random once per process
/// (a store of hundreds of thousands of entries uses paths by the hundred thousand, each
/// longer than the hash). Two paths that hash alike share a count, which can only keep a file
/// that was free to go, never take one that is in use; at random keys that is about one chance
/// in 10^8 for a million paths, and cannot be aimed at.
#[derive(Debug, Clone)]
pub struct Protected {
    store: OsString,
    uses: FxHashMap<u64, usize>,
}

/// The hash that [`Protected`] counts a canonical path by.
fn path_hash(p: &OsStr) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    KEY.get_or_init(std::hash::RandomState::new).hash_one(p)
}

impl Protected {
    /// The protection of store `s` at `store_path`. Malformed `compactionCheckpoints` are
    /// refused, as [`super::files::referenced_paths`] refuses them.
    pub fn of(s: &Store, sessions_dir: &Path, store_path: &Path) -> Result<Protected> {
        Protected::among(s, sessions_dir, store_path, None)
    }

    /// [`Protected::of`], counting only the canonical paths in `among` when it is given: for
    /// a remover that is asked about no other file (a store of hundreds of thousands of
    /// entries uses paths by the hundred thousand, most of them missing).
    pub fn among(
        s: &Store,
        sessions_dir: &Path,
        store_path: &Path,
        among: Option<&FxHashSet<&OsStr>>,
    ) -> Result<Protected> {
        let files = EntryFiles::new(sessions_dir);
        let room = among.map_or(3 * s.len(), |a| a.len());
        let mut uses = FxHashMap::with_capacity_and_hasher(room, Default::default());
        for (key, entry) in s {
            files.visit(key, entry, |p| {
                if among.is_none_or(|a| a.contains(p.as_os_str())) {
                    *uses.entry(path_hash(p.as_os_str())).or_default() += 1;
                }
            })?;
        }
        Ok(Protected {
            store: paths::canonical(store_path).into_os_string(),
            uses,
        })
    }

    /// `entry` (at `key`) is no longer in the store: its files are one use fewer, and those no
    /// other remaining entry uses are no longer protected. `files` must be of the same
    /// sessions directory as [`Protected::of`]'s.
    pub fn release(&mut self, files: &EntryFiles<'_>, key: &str, entry: &Json) {
        // An entry whose checkpoints are malformed never got here: `of` refused its store.
        let _ = files.visit(key, entry, |p| {
            let p = path_hash(p.as_os_str());
            match self.uses.get_mut(&p) {
                Some(n) if *n > 1 => *n -= 1,
                Some(_) => {
                    self.uses.remove(&p);
                }
                None => {}
            }
        });
    }

    /// Whether `canonical` is the store or a file a remaining entry uses.
    pub fn contains(&self, canonical: &Path) -> bool {
        let p = canonical.as_os_str();
        p == self.store || self.uses.contains_key(&path_hash(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn store(v: Value) -> Store {
        let Value::Object(s) = v else { panic!() };
        crate::store::from_map(s)
    }

    /// A sessions directory (canonical) and its store's path; the directory lives as long as
    /// the guard.
    fn sessions_dir() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let store_path = d.join("sessions.json");
        (dir, d, store_path)
    }

    #[test]
    fn the_store_and_every_file_of_a_kept_entry_are_protected() {
        let (_dir, d, store_path) = sessions_dir();
        let s = store(json!({
            "a": {"sessionId": "keep"},
            "b": {"sessionId": "c", "sessionFile": "custom.jsonl", "compactionCheckpoints": [
                {"preCompaction": {"sessionFile": d.join("cp.jsonl")}, "postCompaction": {}}
            ]},
        }));
        let p = Protected::of(&s, &d, &store_path).unwrap();
        for name in [
            "keep.jsonl",
            "keep.trajectory.jsonl",
            "keep.trajectory-path.json",
            "custom.jsonl",
            "custom.trajectory.jsonl",
            "custom.trajectory-path.json",
            "cp.jsonl",
            "sessions.json",
        ] {
            assert!(p.contains(&d.join(name)), "{name}: {p:?}");
        }
        // Protection goes by the files entries use, not by names: `c` uses custom.jsonl.
        for name in [
            "gone.jsonl",
            "c.jsonl",
            "c.trajectory.jsonl",
            "sub/sessions.json",
        ] {
            assert!(!p.contains(&d.join(name)), "{name}: {p:?}");
        }
        let malformed = store(json!({"x": {"sessionId": "x", "compactionCheckpoints": 1}}));
        assert!(Protected::of(&malformed, &d, &store_path).is_err());
    }

    #[test]
    fn a_released_entry_leaves_protected_what_another_entry_still_uses() {
        let (_dir, d, store_path) = sessions_dir();
        let s = store(json!({
            "a": {"sessionId": "a", "sessionFile": "shared.jsonl"},
            "b": {"sessionId": "b", "sessionFile": "shared.jsonl"},
            "c": {"sessionId": "c", "sessionFile": "sessions.json"},
        }));
        let mut p = Protected::of(&s, &d, &store_path).unwrap();
        let files = EntryFiles::new(&d);
        p.release(&files, "a", &s["a"]);
        assert!(p.contains(&d.join("shared.jsonl")), "b still uses it");
        p.release(&files, "b", &s["b"]);
        assert!(!p.contains(&d.join("shared.jsonl")));
        assert!(!p.contains(&d.join("shared.trajectory.jsonl")));
        p.release(&files, "c", &s["c"]);
        assert!(p.contains(&store_path), "the store is never released");
        // Releasing what was never counted changes nothing.
        p.release(&files, "b", &s["b"]);
        assert!(p.contains(&store_path));
    }

    /// Kept to some files, the protection answers for those as the whole one does, and counts
    /// no other (the store itself stays protected).
    #[test]
    fn a_protection_among_some_files_counts_those_alone() {
        let (_dir, d, store_path) = sessions_dir();
        let s = store(json!({
            "a": {"sessionId": "a", "sessionFile": "shared.jsonl"},
            "b": {"sessionId": "b", "sessionFile": "shared.jsonl"},
            "c": {"sessionId": "c"},
        }));
        let on_disk = [
            d.join("shared.jsonl"),
            d.join("c.trajectory.jsonl"),
            d.join("x.jsonl"),
        ];
        let among: FxHashSet<&OsStr> = on_disk.iter().map(|p| p.as_os_str()).collect();
        let whole = Protected::of(&s, &d, &store_path).unwrap();
        let mut some = Protected::among(&s, &d, &store_path, Some(&among)).unwrap();
        for p in &on_disk {
            assert_eq!(some.contains(p), whole.contains(p), "{}", p.display());
        }
        assert_eq!(some.uses.len(), 2, "{some:?}");
        assert!(some.contains(&store_path));
        assert!(!some.contains(&d.join("c.jsonl")), "not among the files");
        let files = EntryFiles::new(&d);
        some.release(&files, "a", &s["a"]);
        assert!(some.contains(&d.join("shared.jsonl")), "b still uses it");
        some.release(&files, "b", &s["b"]);
        assert!(!some.contains(&d.join("shared.jsonl")));
    }
}
