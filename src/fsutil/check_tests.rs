//! `Confined::check`'s same-directory shortcut and deferred directory syncs, on hostile layouts.

use std::fs;
use std::os::unix::fs::symlink;

use super::Confined;

#[test]
fn the_shortcut_accepts_only_the_confined_directory_itself() {
    let base = tempfile::tempdir().unwrap();
    let sessions = base.path().join("sessions");
    let other = base.path().join("other");
    fs::create_dir_all(&sessions).unwrap();
    fs::create_dir_all(other.join("sub")).unwrap();
    symlink(&sessions, base.path().join("alias")).unwrap();
    symlink(&other, sessions.join("escape")).unwrap();
    let c = Confined::new(&sessions).unwrap();
    let real = fs::canonicalize(&sessions).unwrap();
    // The directory itself, by its own path or through a symlink to it: the file in it.
    assert_eq!(
        c.check(&sessions.join("a.jsonl")).unwrap(),
        real.join("a.jsonl")
    );
    assert_eq!(
        c.check(&base.path().join("alias/a.jsonl")).unwrap(),
        real.join("a.jsonl")
    );
    // Anything else is refused: a sibling, a symlink out of it, `..`, a subdirectory.
    for bad in [
        other.join("a.jsonl"),
        sessions.join("escape/a.jsonl"),
        sessions.join("../other/a.jsonl"),
        other.join("sub/a.jsonl"),
    ] {
        let err = c.check(&bad).unwrap_err().to_string();
        assert!(err.contains("outside"), "{bad:?}: {err}");
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_after_confinement_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let sessions = base.path().join("sessions");
    let elsewhere = base.path().join("elsewhere");
    fs::create_dir_all(&sessions).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    let c = Confined::new(&sessions).unwrap();
    fs::rename(&sessions, base.path().join("moved")).unwrap();
    symlink(&elsewhere, &sessions).unwrap();
    let p = sessions.join("t.jsonl");
    assert!(
        c.check(&p).is_err(),
        "a different directory under the old name"
    );
    assert!(c.write_atomic(&p, 0o600, |w| w.write_all(b"x")).is_err());
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written there"
    );
}

#[test]
fn deferred_directory_sync_still_replaces_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let c = Confined::new(dir.path()).unwrap().deferring_dir_sync();
    let p = dir.path().join("t.jsonl");
    fs::write(&p, b"old").unwrap();
    c.write_atomic(&p, 0o600, |w| w.write_all(b"new")).unwrap();
    // A failed fill leaves the old file and no temp, deferred or not.
    let err = c.write_atomic(&p, 0o600, |_| Err(std::io::Error::other("fill failed")));
    assert!(err.is_err());
    c.sync().unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"new");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp left");
}
