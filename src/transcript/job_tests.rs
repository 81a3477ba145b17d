use super::*;
use std::fs::OpenOptions;
use std::sync::atomic::{AtomicUsize, Ordering};

const TEXT: &str = concat!(
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#,
    "\n",
    r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#,
    "\n",
    r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"assistant","content":"NO_REPLY"}}"#,
    "\n",
    r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"y"}}"#,
    "\n",
);
const APPENDED: &str = "{\"type\":\"custom\",\"id\":\"z\",\"parentId\":\"c\"}\n";

/// A planner that removes `b`.
fn remove_b(index: &Index, tree: &Tree) -> Result<Planned, PlanError> {
    let mut p = Planned::default();
    p.edits.remove.insert(tree.find(index, "b").unwrap());
    Ok(p)
}

/// A planner that removes `b` and, like a concurrent writer, appends a line each call.
fn appending_planner(
    path: PathBuf,
    calls: &AtomicUsize,
) -> impl Fn(&Index, &Tree) -> Result<Planned, PlanError> + Sync + '_ {
    move |index: &Index, tree: &Tree| {
        calls.fetch_add(1, Ordering::SeqCst);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(APPENDED.as_bytes()).unwrap();
        let mut p = Planned::default();
        p.edits.remove.insert(tree.find(index, "b").unwrap());
        Ok(p)
    }
}

#[test]
fn a_concurrent_append_aborts_the_rewrite_and_keeps_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, TEXT).unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let calls = AtomicUsize::new(0);
    let planner = appending_planner(path.clone(), &calls);
    let opts = Options {
        mode: Mode::Enforce,
        wait_lock: None,
        measure: None,
    };
    let out = run_file(&c, &path, opts, &planner);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "re-planned once under the lock"
    );
    match &out.status {
        Status::Refused(m) => {
            assert!(m.contains("changed while it was being rewritten"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let got = fs::read_to_string(&path).unwrap();
    assert_eq!(got, format!("{TEXT}{APPENDED}{APPENDED}"));
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp or lock left"
    );
}

/// Appends a compaction after `c`; like a concurrent writer, it first appends a line
/// itself on its first `races` calls.
fn compacting_planner(
    path: PathBuf,
    calls: &AtomicUsize,
    races: usize,
) -> impl Fn(&Index, &Tree) -> Result<Planned, PlanError> + Sync + '_ {
    move |_: &Index, tree: &Tree| {
        if calls.fetch_add(1, Ordering::SeqCst) < races {
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(APPENDED.as_bytes()).unwrap();
        }
        let leaf = tree.leaf.map(|_| "c");
        let mut p = Planned::default();
        p.edits.append.push(
            serde_json::json!({"type":"compaction","id":"n","parentId":leaf,
            "timestamp":"t","summary":"s","firstKeptEntryId":"c","tokensBefore":1}),
        );
        Ok(p)
    }
}

#[test]
fn an_append_copies_the_file_and_adds_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let c = Confined::new(dir.path()).unwrap();
    for mode in [Mode::Preview, Mode::Enforce] {
        fs::write(&path, TEXT).unwrap();
        let calls = AtomicUsize::new(0);
        let planner = compacting_planner(path.clone(), &calls, 0);
        let opts = Options {
            mode,
            wait_lock: None,
            measure: None,
        };
        let out = run_file(&c, &path, opts, &planner);
        let line = r#"{"type":"compaction","id":"n","parentId":"c","timestamp":"t","summary":"s","firstKeptEntryId":"c","tokensBefore":1}"#;
        let want = format!("{TEXT}{line}\n");
        assert_eq!(out.bytes_after, want.len() as u64, "{:?}", out.status);
        let got = fs::read_to_string(&path).unwrap();
        match mode {
            Mode::Preview => {
                assert_eq!(out.status, Status::WouldChange);
                assert_eq!(got, TEXT);
            }
            Mode::Enforce => {
                assert_eq!(out.status, Status::Changed);
                assert_eq!(got, want);
            }
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

#[test]
fn a_concurrent_append_aborts_an_append_and_keeps_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, TEXT).unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let calls = AtomicUsize::new(0);
    // The writer appends while the file is planned, and again while the locked re-plan
    // runs: the file is not what was copied, so nothing is replaced.
    let planner = compacting_planner(path.clone(), &calls, 2);
    let opts = Options {
        mode: Mode::Enforce,
        wait_lock: None,
        measure: None,
    };
    let out = run_file(&c, &path, opts, &planner);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "re-planned once under the lock"
    );
    match &out.status {
        Status::Refused(m) => {
            assert!(m.contains("changed while it was being rewritten"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{TEXT}{APPENDED}{APPENDED}")
    );
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_tail_appended_during_the_rename_is_carried_over_or_saved() {
    let dir = tempfile::tempdir().unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let path = dir.path().join("t.jsonl");
    for (new_len_matches, expect_new) in [(true, "new\ntail\n"), (false, "new\nother\n")] {
        fs::write(&path, "old\n").unwrap();
        let old = File::open(&path).unwrap();
        let mut writer = OpenOptions::new().append(true).open(&path).unwrap();
        fs::write(dir.path().join("tmp"), "new\n").unwrap();
        fs::rename(dir.path().join("tmp"), &path).unwrap();
        writer.write_all(b"tail\n").unwrap();
        if !new_len_matches {
            let mut w = OpenOptions::new().append(true).open(&path).unwrap();
            w.write_all(b"other\n").unwrap();
        }
        let note = carry_tail(&c, &path, &old, 4, 4).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), expect_new, "{note}");
        if !new_len_matches {
            let side: Vec<_> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().contains(".tail-"))
                .collect();
            assert_eq!(side.len(), 1, "{note}");
            assert_eq!(fs::read_to_string(&side[0]).unwrap(), "tail\n");
        }
    }
}

#[test]
fn preview_validates_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, TEXT).unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let planner = remove_b;
    let opts = Options {
        mode: Mode::Preview,
        wait_lock: None,
        measure: None,
    };
    let out = run_file(&c, &path, opts, &planner);
    assert_eq!(out.status, Status::WouldChange);
    assert_eq!(out.entries_removed, 1);
    assert!(out.bytes_after < out.bytes_before);
    assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn removing_the_leaf_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, TEXT).unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let planner = |index: &Index, tree: &Tree| {
        let mut p = Planned::default();
        p.edits.remove.insert(tree.find(index, "c").unwrap());
        Ok(p)
    };
    let opts = Options {
        mode: Mode::Enforce,
        wait_lock: None,
        measure: None,
    };
    let out = run_file(&c, &path, opts, &planner);
    assert!(matches!(out.status, Status::Refused(_)), "{:?}", out.status);
    assert_eq!(fs::read_to_string(&path).unwrap(), TEXT);
}

#[test]
fn a_plan_that_only_replaces_media_references_rewrites_the_file() {
    // No image, no removal: the plan is neither empty nor an append.
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#,
    );
    let mut parent = "null".to_string();
    for k in 0..3 {
        text += &format!(
            "\n{{\"type\":\"message\",\"id\":\"u{k}\",\"parentId\":{parent},\"message\":{{\"role\":\"user\",\"content\":\"[media attached: {k}.png]\"}}}}\n{{\"type\":\"message\",\"id\":\"a{k}\",\"parentId\":\"u{k}\",\"message\":{{\"role\":\"assistant\",\"content\":\"ok\"}}}}"
        );
        parent = format!("\"a{k}\"");
    }
    text.push('\n');
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, &text).unwrap();
    let c = Confined::new(dir.path()).unwrap();
    let planner = |i: &Index, t: &Tree| crate::images::planned(i, t, 1);
    for mode in [Mode::Preview, Mode::Enforce] {
        let opts = Options {
            mode,
            wait_lock: None,
            measure: None,
        };
        let out = run_file(&c, &path, opts, &planner);
        assert_eq!(out.media_refs_replaced, 2, "{out:?}");
        assert_eq!(out.blocks_replaced, 0);
    }
    let got = fs::read_to_string(&path).unwrap();
    assert_eq!(got.matches(crate::mediarefs::MARKER).count(), 2);
    assert!(got.contains("[media attached: 2.png]"));
}

#[test]
fn a_planner_refusal_is_skipped_and_a_too_deep_line_refused() {
    let deep = crate::jsjson::TooDeep { line: 4 };
    assert_eq!(
        planner_status(PlanError::Skip("no images".into())),
        Status::Skipped("no images".into())
    );
    assert_eq!(
        planner_status(deep.clone().into()),
        Status::Refused(deep.to_string().into())
    );
    // A failed planning step: too deep when that is the error, else skipped with its text.
    assert_eq!(
        PlanError::from_error(deep.clone().into()),
        PlanError::TooDeep(deep)
    );
    let other = anyhow::anyhow!("inner").context("outer");
    assert_eq!(
        PlanError::from_error(other),
        PlanError::Skip("outer: inner".into())
    );
}

#[test]
fn a_file_held_in_memory_and_a_streamed_one_are_rewritten_alike() {
    // Up to `SNAPSHOT_MAX` bytes the rewrite copies the bytes the index was built from; a
    // longer file is read again. Both give the file the plan describes, previewed or applied.
    let removed = |pad: &str| {
        let mut want = String::new();
        for line in TEXT.lines() {
            if line.contains(r#""id":"b""#) {
                continue;
            }
            want.push_str(&line.replace(r#""parentId":"b""#, r#""parentId":"a""#));
            want.push('\n');
        }
        want + pad
    };
    for pad_len in [100, SNAPSHOT_MAX as usize + 10] {
        let pad = format!(
            "{{\"type\":\"custom\",\"id\":\"p\",\"parentId\":\"c\",\"data\":\"{}\"}}\n",
            "x".repeat(pad_len)
        );
        let text = format!("{TEXT}{pad}");
        assert_eq!(text.len() as u64 > SNAPSHOT_MAX, pad_len > 100);
        for mode in [Mode::Preview, Mode::Enforce] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.jsonl");
            fs::write(&path, &text).unwrap();
            let c = Confined::new(dir.path()).unwrap();
            let planner = remove_b;
            let opts = Options {
                mode,
                wait_lock: None,
                measure: None,
            };
            let out = run_file(&c, &path, opts, &planner);
            let want = removed(&pad);
            assert_eq!(out.bytes_after, want.len() as u64, "{pad_len} {mode:?}");
            let got = fs::read_to_string(&path).unwrap();
            match mode {
                Mode::Preview => {
                    assert_eq!(out.status, Status::WouldChange);
                    assert!(got == text, "a preview writes nothing");
                }
                Mode::Enforce => {
                    assert_eq!(out.status, Status::Changed);
                    assert!(got == want, "{pad_len}: the file the plan describes");
                }
            }
        }
    }
}
