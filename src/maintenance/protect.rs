//! What cleanup must never take along with a removed entry, whatever its `sessionFile` or
//! trajectory pointer says: the store itself, and the files of the sessions it keeps.
//! OpenClaw follows those paths blindly (renaming the store away and writing a new one, or
//! archiving a live session's transcript); clawkeeper does not.

use std::collections::HashSet;
use std::path::Path;

use super::files::PathSet;
use crate::store::{self, Store, paths};

/// What a session id owns in the sessions directory: `<id>` + one of these.
const ARTIFACT_SUFFIXES: [&str; 3] = [".trajectory.jsonl", ".trajectory-path.json", ".jsonl"];

/// Canonical paths cleanup never archives: the store itself and the transcripts of the entries
/// it keeps. A removed entry's `sessionFile` may name either; OpenClaw then renames the store
/// away (writing a new one) or archives a live session's transcript.
pub fn protected_paths(s: &Store, sessions_dir: &Path, store_path: &Path) -> PathSet {
    let mut out: PathSet = s
        .values()
        .filter_map(|e| store::entry_transcript(e, sessions_dir))
        .map(|p| paths::canonical(&p).into_os_string())
        .collect();
    out.insert(paths::canonical(store_path).into_os_string());
    out
}

/// The `<id>` of a file named `<id><suffix>`.
fn owner<'a>(p: &'a Path, suffix: &str) -> Option<&'a str> {
    p.file_name()?.to_str()?.strip_suffix(suffix)
}

/// Whether `p` (an artifact of an evicted entry) is the store itself or `<id>.jsonl` /
/// `<id>.trajectory.jsonl` / `<id>.trajectory-path.json` of a session id `kept` still has.
pub fn store_or_kept(p: &Path, store_path: &Path, kept: impl Fn(&str) -> bool) -> bool {
    ARTIFACT_SUFFIXES
        .iter()
        .any(|s| owner(p, s).is_some_and(&kept))
        || (p.file_name() == store_path.file_name()
            && paths::canonical(p) == paths::canonical(store_path))
}

/// Whether `p` is `<id><suffix>` for a session the store keeps. A removed entry's
/// `sessionFile` may name a kept session's transcript, and its trajectory pointer (plain JSON)
/// any file at all, so unlike OpenClaw only trajectory files (`*.trajectory.jsonl`) that no
/// kept session owns are removed: never `sessions.json`, a transcript or a kept trajectory.
pub(super) fn owned_by_kept(p: &Path, suffix: &str, referenced: &HashSet<String>) -> bool {
    owner(p, suffix).is_some_and(|id| referenced.contains(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_store_and_kept_files_are_protected() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let store_path = d.join("sessions.json");
        let mut s = Store::new();
        s.insert("a".into(), json!({"sessionId": "keep"}));
        s.insert(
            "b".into(),
            json!({"sessionId": "c", "sessionFile": "custom.jsonl"}),
        );
        let p = protected_paths(&s, &d, &store_path);
        for name in ["keep.jsonl", "custom.jsonl", "sessions.json"] {
            assert!(p.contains(d.join(name).as_os_str()), "{name}: {p:?}");
        }
        assert!(!p.contains(d.join("gone.jsonl").as_os_str()));
        let kept = |id: &str| id == "keep";
        assert!(store_or_kept(&d.join("sessions.json"), &store_path, kept));
        assert!(store_or_kept(&d.join("keep.jsonl"), &store_path, kept));
        assert!(store_or_kept(
            &d.join("keep.trajectory.jsonl"),
            &store_path,
            kept
        ));
        assert!(!store_or_kept(&d.join("gone.jsonl"), &store_path, kept));
        assert!(!store_or_kept(
            &d.join("sub/sessions.json"),
            &store_path,
            kept
        ));
        let ids: HashSet<String> = ["keep".to_string()].into();
        assert!(owned_by_kept(
            &d.join("keep.trajectory.jsonl"),
            ".trajectory.jsonl",
            &ids
        ));
        assert!(!owned_by_kept(
            &d.join("gone.trajectory.jsonl"),
            ".trajectory.jsonl",
            &ids
        ));
    }
}
