//! What the disk budget and the unreferenced sweep share about one sessions directory: its
//! scan (taken once for a simulation, afresh at each step when applying) and, for a
//! simulation, the protected files of the store.

use std::path::Path;

use anyhow::Result;

use super::files::{self, FileInfo};
use super::protect::Protected;
use crate::fsutil::Confined;
use crate::store::Store;

/// Inputs shared by the budget and the sweep.
pub struct Dir<'a> {
    pub sessions_dir: &'a Path,
    pub store_path: &'a Path,
    /// `Some` applies for real; `None` simulates.
    pub confined: Option<&'a Confined>,
    /// A simulation changes nothing on disk, so the budget and the sweep share one scan.
    pub snapshot: std::cell::OnceCell<Scanned>,
    /// A simulation's last protected files, with the fingerprint of the store keys they were
    /// computed for (see [`Dir::protected`]).
    protected: std::cell::RefCell<Option<(KeysPrint, std::rc::Rc<Protected>)>>,
    /// Names a scan leaves out (see [`Dir::excluding`]).
    excluded: fn(&str) -> bool,
}

/// A store's keys, in order, told apart without a copy of them (a store may keep hundreds of
/// thousands): their count and a hash of them all, keyed at random once per process.
#[derive(PartialEq, Eq)]
struct KeysPrint(usize, u64);

impl KeysPrint {
    fn of(s: &Store) -> KeysPrint {
        use std::hash::{BuildHasher, Hash, Hasher};
        static KEY: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
        let mut h = KEY.get_or_init(std::hash::RandomState::new).build_hasher();
        for k in s.keys() {
            k.hash(&mut h);
        }
        KeysPrint(s.len(), h.finish())
    }
}

/// The directory's regular files and its prompt blob files.
pub type Scanned = (Vec<FileInfo>, Vec<FileInfo>);

impl<'a> Dir<'a> {
    pub fn new(
        sessions_dir: &'a Path,
        store_path: &'a Path,
        confined: Option<&'a Confined>,
    ) -> Self {
        Dir {
            sessions_dir,
            store_path,
            confined,
            snapshot: std::cell::OnceCell::new(),
            protected: std::cell::RefCell::new(None),
            excluded: |_| false,
        }
    }

    /// Leave the regular files whose name `excluded` accepts out of every scan (the
    /// SQLite-era releases never see migration archives).
    pub fn excluding(mut self, excluded: fn(&str) -> bool) -> Self {
        self.excluded = excluded;
        self
    }

    fn scan(&self) -> Scanned {
        let (mut files, blobs) = scan(self.sessions_dir);
        files.retain(|f| !(self.excluded)(&f.name));
        (files, blobs)
    }

    /// [`Protected::of`] `s`: the store and the files its entries use. A simulation reuses
    /// its last answer when `s` has the same keys: a plan edits entries only before the
    /// budget runs, and afterwards only removes them (the budget's evictions), so the same
    /// keys are the same entries. (Removing only, the same count alone would tell; the hash
    /// of the keys makes sure.)
    ///
    /// A simulation's protection counts only the scanned files: it removes no other (its
    /// remover knows the sizes of those alone), so no other is asked about. An apply's counts
    /// every file, since an evicted entry's file may have appeared after the scan.
    pub(super) fn protected(&self, s: &Store) -> Result<std::rc::Rc<Protected>> {
        if self.confined.is_some() {
            return Ok(std::rc::Rc::new(Protected::of(
                s,
                self.sessions_dir,
                self.store_path,
            )?));
        }
        let of = |s: &Store| {
            let (scanned, blobs) = &*self.files();
            let among: rustc_hash::FxHashSet<&std::ffi::OsStr> = (scanned.iter().chain(blobs))
                .map(|f| f.canonical.as_os_str())
                .collect();
            Protected::among(s, self.sessions_dir, self.store_path, Some(&among))
        };
        let print = KeysPrint::of(s);
        if let Some((seen, set)) = &*self.protected.borrow()
            && *seen == print
        {
            return Ok(set.clone());
        }
        let set = std::rc::Rc::new(of(s)?);
        *self.protected.borrow_mut() = Some((print, set.clone()));
        Ok(set)
    }

    /// A simulation on a scan already made (see [`scan`]).
    pub fn simulated(sessions_dir: &'a Path, store_path: &'a Path, scanned: Scanned) -> Self {
        let d = Dir::new(sessions_dir, store_path, None);
        let _ = d.snapshot.set(scanned);
        d
    }

    /// The files as they are now: scanned afresh when applying for real (earlier steps
    /// removed files), once per run when simulating.
    pub(super) fn files(&self) -> std::borrow::Cow<'_, Scanned> {
        match self.confined {
            Some(_) => std::borrow::Cow::Owned(self.scan()),
            None => std::borrow::Cow::Borrowed(self.snapshot.get_or_init(|| self.scan())),
        }
    }

    pub(super) fn store_basename(&self) -> String {
        self.store_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The regular files and prompt blob files of a sessions directory.
pub fn scan(sessions_dir: &Path) -> Scanned {
    (files::scan(sessions_dir), files::scan_blobs(sessions_dir))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::{Value, json};

    use super::*;
    use crate::json::Json;

    /// A simulation's protection is computed once for a set of keys and again whenever the
    /// keys change: after an eviction, and after a change that keeps their count.
    #[test]
    fn a_simulation_reuses_its_protection_for_the_same_keys_and_only_for_them() {
        let guard = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(guard.path()).unwrap();
        let store_path = d.join("sessions.json");
        for name in ["sessions.json", "a.jsonl", "b.jsonl", "c.jsonl"] {
            std::fs::write(d.join(name), "{}\n").unwrap();
        }
        let Value::Object(m) = json!({
            "a": {"sessionId": "a"},
            "b": {"sessionId": "b"},
            "c": {"sessionId": "c"},
        }) else {
            unreachable!()
        };
        let mut s = crate::store::from_map(m);
        let sim = Dir::new(&d, &store_path, None);
        let first = sim.protected(&s).unwrap();
        assert!(first.contains(&d.join("b.jsonl")));
        let again = sim.protected(&s).unwrap();
        assert!(Rc::ptr_eq(&first, &again), "the same keys: the same answer");

        s.shift_remove("b");
        let evicted = sim.protected(&s).unwrap();
        assert!(
            !Rc::ptr_eq(&first, &evicted),
            "one key fewer: computed again"
        );
        assert!(!evicted.contains(&d.join("b.jsonl")));
        assert!(evicted.contains(&d.join("a.jsonl")) && evicted.contains(&d.join("c.jsonl")));

        s.shift_remove("a");
        s.insert("b".into(), Json::from_value(json!({"sessionId": "b"})));
        let swapped = sim.protected(&s).unwrap();
        assert!(
            !Rc::ptr_eq(&evicted, &swapped),
            "other keys, same count: computed again"
        );
        assert!(swapped.contains(&d.join("b.jsonl")));
        assert!(!swapped.contains(&d.join("a.jsonl")));
    }
}
