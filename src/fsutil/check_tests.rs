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

#[test]
fn a_symlinked_directory_is_resolved_once_and_held() {
    let base = tempfile::tempdir().unwrap();
    let real = base.path().join("disk/sessions");
    let elsewhere = base.path().join("elsewhere");
    fs::create_dir_all(&real).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    let link = base.path().join("sessions");
    symlink(&real, &link).unwrap();
    let c = Confined::new(&link).unwrap();
    assert_eq!(c.root(), fs::canonicalize(&real).unwrap());
    c.write_atomic(&link.join("a.jsonl"), 0o600, |w| w.write_all(b"a"))
        .unwrap();
    assert_eq!(fs::read(real.join("a.jsonl")).unwrap(), b"a");
    // The real directory moves and its old path becomes a symlink to somewhere else: the old
    // path is refused, and a write by the new path still lands in the directory that was
    // resolved (the handle, not the path, decides where it goes).
    let moved = base.path().join("disk/moved");
    fs::rename(&real, &moved).unwrap();
    symlink(&elsewhere, &real).unwrap();
    assert!(c.check(&link.join("a.jsonl")).is_err());
    assert!(c.remove_file(&real.join("a.jsonl")).is_err());
    c.write_atomic(&moved.join("b.jsonl"), 0o600, |w| w.write_all(b"b"))
        .unwrap();
    c.rename_new(&moved.join("b.jsonl"), &moved.join("c.jsonl"))
        .unwrap();
    assert_eq!(c.remove_file(&moved.join("a.jsonl")).unwrap(), 1);
    assert_eq!(fs::read(moved.join("c.jsonl")).unwrap(), b"b");
    c.sync().unwrap();
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing there"
    );
}

#[test]
fn reads_and_stats_go_through_the_held_directory() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let c = Confined::new(dir.path()).unwrap();
    fs::write(dir.path().join("t.jsonl"), b"abc").unwrap();
    fs::write(outside.path().join("v"), b"v").unwrap();
    symlink(outside.path().join("v"), dir.path().join("l.jsonl")).unwrap();
    let st = c.stat(&dir.path().join("t.jsonl")).unwrap().unwrap();
    assert!(st.is_file() && st.len == 3 && st.modified().is_some());
    let mut s = String::new();
    std::io::Read::read_to_string(
        &mut c.open_read(&dir.path().join("t.jsonl")).unwrap(),
        &mut s,
    )
    .unwrap();
    assert_eq!(s, "abc");
    assert!(
        c.open_read(&dir.path().join("l.jsonl")).is_err(),
        "a symlink"
    );
    assert!(
        !c.stat(&dir.path().join("l.jsonl"))
            .unwrap()
            .unwrap()
            .is_file()
    );
    assert!(c.stat(&dir.path().join("none")).unwrap().is_none());
    assert!(c.open_read(&outside.path().join("v")).is_err(), "outside");
    let sub = c.create_dir_all(std::path::Path::new("x/y")).unwrap();
    assert!(dir.path().join("x/y").is_dir());
    symlink(outside.path(), dir.path().join("x/esc")).unwrap();
    assert!(c.create_dir_all(std::path::Path::new("x/esc/z")).is_err());
    assert!(!outside.path().join("z").exists());
    sub.write_atomic(&dir.path().join("x/y/f"), 0o600, |w| w.write_all(b"f"))
        .unwrap();
    assert_eq!(fs::read(dir.path().join("x/y/f")).unwrap(), b"f");
}
