use super::*;

struct Fixture {
    dir: tempfile::TempDir,
    store: PathBuf,
}

/// The run's confinement of the fixture's directory.
fn dirs(f: &Fixture) -> Dirs {
    let mut d = Dirs::new();
    d.insert(
        f.dir.path().to_path_buf(),
        Ok(Confined::new(f.dir.path()).unwrap()),
    );
    d
}

fn fixture(store_text: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions.json");
    std::fs::write(&store, store_text).unwrap();
    Fixture { dir, store }
}

/// A written successor of `old` (the file exists), holding `old`'s lock.
fn pending(f: &Fixture, key: &str, old: &str, successor: &str) -> Pending {
    let confined = Confined::new(f.dir.path()).unwrap();
    let old = f.dir.path().join(old);
    std::fs::write(&old, "old\n").unwrap();
    let path = f.dir.path().join(successor);
    std::fs::write(&path, "new\n").unwrap();
    let Acquire::Locked(lock) = lock::acquire(&confined, &old, None).unwrap() else {
        panic!("lock");
    };
    Pending {
        store: f.store.clone(),
        key: key.into(),
        old_stamp: job::stamp(&old).unwrap(),
        old,
        rotated: rotate::Rotated {
            session_id: format!("new-{key}"),
            path: std::fs::canonicalize(&path).unwrap(),
            entries_written: 1,
            bytes_written: 4,
        },
        confined,
        _lock: lock,
    }
}

fn outcomes(n: usize) -> Vec<(Outcome, Option<String>)> {
    (0..n)
        .map(|i| {
            (
                Outcome::new(Path::new(&format!("t{i}")), Status::Unchanged),
                None,
            )
        })
        .collect()
}

#[test]
fn one_write_switches_every_entry_and_misses_are_undone() {
    let f = fixture(
        r#"{"a": {"sessionId": "a", "updatedAt": 1}, "b": {"sessionId": "b", "compactionCount": 4}, "c": {"sessionId": "other"}}"#,
    );
    let group = vec![
        (0, pending(&f, "a", "a.jsonl", "sa.jsonl")),
        (1, pending(&f, "b", "b.jsonl", "sb.jsonl")),
        // c points at another file by now; d is gone from the store.
        (2, pending(&f, "c", "c.jsonl", "sc.jsonl")),
        (3, pending(&f, "d", "d.jsonl", "sd.jsonl")),
    ];
    let mut results = outcomes(4);
    commit(&f.store, &dirs(&f), group, &mut results);
    let store: Value = serde_json::from_slice(&std::fs::read(&f.store).unwrap()).unwrap();
    assert_eq!(store["a"]["sessionId"], "new-a");
    assert_eq!(store["a"]["compactionCount"], 1);
    assert_eq!(store["b"]["sessionId"], "new-b");
    assert_eq!(store["b"]["compactionCount"], 5);
    assert!(
        store["b"]["sessionFile"]
            .as_str()
            .unwrap()
            .ends_with("/sb.jsonl")
    );
    assert_eq!(store["c"], json!({"sessionId": "other"}));
    assert_eq!(results[0].0.status, Status::Changed);
    assert_eq!(results[1].0.status, Status::Changed);
    for (i, name) in [(2, "sc.jsonl"), (3, "sd.jsonl")] {
        assert!(
            matches!(&results[i].0.status, Status::Refused(r) if r.contains("no longer")),
            "{:?}",
            results[i].0.status
        );
        assert!(!f.dir.path().join(name).exists(), "{name} removed again");
        assert!(
            results[i]
                .0
                .notes
                .iter()
                .any(|n| n.contains("removed the successor"))
        );
    }
    // Old transcripts are untouched, locks released.
    for old in ["a", "b", "c", "d"] {
        let p = f.dir.path().join(format!("{old}.jsonl"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        assert!(!f.dir.path().join(format!("{old}.jsonl.lock")).exists());
    }
}

#[test]
fn a_changed_transcript_or_an_unremovable_successor_is_reported() {
    let f = fixture(r#"{"a": {"sessionId": "a"}, "b": {"sessionId": "b"}}"#);
    let a = pending(&f, "a", "a.jsonl", "sa.jsonl");
    // The old transcript grew after its successor was written.
    std::fs::write(f.dir.path().join("a.jsonl"), "old\nappended\n").unwrap();
    let b = pending(&f, "b", "b.jsonl", "sb.jsonl");
    // The store cannot be written (it is a directory now), and the successor cannot be
    // removed (something replaced it with a directory).
    let store_before = std::fs::read(&f.store).unwrap();
    std::fs::remove_file(&b.rotated.path).unwrap();
    std::fs::create_dir(&b.rotated.path).unwrap();
    std::fs::remove_file(&f.store).unwrap();
    std::fs::create_dir(&f.store).unwrap();
    let mut results = outcomes(2);
    results[1].0.details = Some(Box::new(json!({})));
    commit(&f.store, &dirs(&f), vec![(0, a), (1, b)], &mut results);
    assert!(
        matches!(&results[0].0.status, Status::Refused(r) if r.contains("changed while")),
        "{:?}",
        results[0].0.status
    );
    assert!(!f.dir.path().join("sa.jsonl").exists());
    match &results[1].0.status {
        Status::Failed(r) => {
            assert!(
                r.contains("sb.jsonl") && r.contains("no store entry points at it"),
                "{r}"
            )
        }
        other => panic!("{other:?}"),
    }
    let d = results[1].0.details.as_ref().unwrap();
    assert_eq!(d["successorUnreferenced"], true);
    assert!(d["successorFile"].as_str().unwrap().ends_with("sb.jsonl"));
    std::fs::remove_dir(&f.store).unwrap();
    std::fs::write(&f.store, store_before).unwrap();
}
