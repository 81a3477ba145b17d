//! Hostile stores and sessions directories for `cleanup --enforce`, beyond `cleanup_safety`:
//! special files named like transcripts and archives, paths in entries, checkpoints and
//! trajectory pointers that lead outside the directory or onto files that must stay, invalid
//! UTF-8 in `sessions.json`, locks of every kind, temps of killed runs. Between plan and
//! apply (`--max-delete`, a concurrent store writer): `hostile_cleanup_apply`.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::hostile::tree;
use crate::util::{DAY, MIN, TestEnv, now_ms, set_age, stderr};

pub(crate) fn entry(sid: &str, age_ms: i64, extra: &str) -> String {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    format!(
        "{{\"sessionId\": \"{sid}\", \"updatedAt\": {}{extra}}}",
        now_ms() - age_ms
    )
}

pub(crate) fn store_of(members: &[(String, String)]) -> String {
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("  \"{k}\": {v}"))
        .collect();
    format!("{{\n{}\n}}", body.join(",\n"))
}

/// mkfifo, with an old mtime (without opening it).
fn fifo(p: &Path, age_ms: i64) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: plain libc calls on a path we own.
    unsafe {
        assert_eq!(libc::mkfifo(c.as_ptr(), 0o600), 0);
        let t = (now_ms() - age_ms) / 1000;
        let ts = [
            libc::timespec {
                tv_sec: t,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: t,
                tv_nsec: 0,
            },
        ];
        assert_eq!(
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), 0),
            0
        );
    }
}

/// Run with a deadline: a run that blocks (on a FIFO, say) fails the test instead of hanging.
fn run_bounded(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawkeeper"))
        .args(args)
        .current_dir(env.work())
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home())
        .env_remove("OPENCLAW_HOME")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("clawkeeper {args:?} blocked for a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn kind(p: &Path) -> &'static str {
    match fs::symlink_metadata(p) {
        Err(_) => "missing",
        Ok(m) if m.file_type().is_symlink() => "link",
        Ok(m) if m.is_dir() => "dir",
        Ok(m) if m.is_file() => "file",
        Ok(_) => "special",
    }
}

#[test]
fn special_files_named_like_transcripts_never_block_and_are_never_removed() {
    let env = TestEnv::new();
    let d = env.sessions_dir("main");
    env.write_config(r#"{ session: { maintenance: { maxDiskBytes: 10, highWaterBytes: 5 } } }"#);
    env.write_store(&store_of(&[
        ("agent:main:a".into(), entry("dirsess", 90 * DAY, "")),
        ("agent:main:b".into(), entry("fifosess", 90 * DAY, "")),
        ("agent:main:c".into(), entry("fresh", MIN, "")),
    ]));
    env.transcript("fresh", MIN);
    fs::create_dir(d.join("dirsess.jsonl")).unwrap();
    fifo(&d.join("fifosess.jsonl"), 90 * DAY);
    fifo(&d.join("orphan.jsonl"), 90 * DAY);
    fs::create_dir(d.join("orphandir.jsonl")).unwrap();
    fifo(
        &d.join("gone.jsonl.deleted.2020-01-01T00-00-00.000Z"),
        90 * DAY,
    );
    fs::create_dir(d.join("old.jsonl.reset.2020-01-01T00-00-00.000Z")).unwrap();
    fifo(
        &d.join("sessions.json.2147483000.0f8c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6.tmp"),
        90 * DAY,
    );
    fifo(&d.join("dirsess.trajectory.jsonl"), 90 * DAY);
    fifo(
        &d.join("x.checkpoint.0123abcd-0000-4000-8000-0123456789ab.jsonl"),
        90 * DAY,
    );
    let specials: Vec<_> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !matches!(kind(p), "file"))
        .map(|p| (kind(&p), p))
        .collect();
    assert_eq!(specials.len(), 9);
    for mode in ["--dry-run", "--enforce"] {
        let o = run_bounded(&env, &["cleanup", mode, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        for (k, p) in &specials {
            assert_eq!(kind(p), *k, "{mode}: {} was touched", p.display());
        }
    }
    assert!(
        !env.store_text().contains("\"dirsess\""),
        "{}",
        env.store_text()
    );
}

/// Where a trajectory pointer points, from the sessions dir and the outside dir.
type PointerTarget = dyn Fn(&Path, &Path) -> String;

#[test]
fn entry_checkpoint_and_pointer_paths_never_reach_outside_or_live_files() {
    let env = TestEnv::new();
    let d = env.sessions_dir("main");
    let outside = env.root().join("outside");
    fs::create_dir_all(&outside).unwrap();
    for n in [
        "a.jsonl",
        "cp.jsonl",
        "cp2.jsonl",
        "rt.trajectory.jsonl",
        "t.jsonl",
    ] {
        fs::write(outside.join(n), "precious").unwrap();
    }
    let u = "0123abcd-0000-4000-8000-0123456789ab";
    // A symlinked checkpoint and trajectory inside the directory, pointing outside.
    symlink(
        outside.join("cp2.jsonl"),
        d.join(format!("old.checkpoint.{u}.jsonl")),
    )
    .unwrap();
    symlink(outside.join("t.jsonl"), d.join("old.trajectory.jsonl")).unwrap();
    let cps = format!(
        "\"compactionCheckpoints\": [{{\"preCompaction\": {{\"sessionFile\": \"../../../../outside/cp.jsonl\"}}, \"postCompaction\": {{\"sessionFile\": \"{}\"}}}}, {{\"preCompaction\": {{\"sessionFile\": \"{}\"}}, \"postCompaction\": {{}}}}]",
        outside.join("cp.jsonl").display(),
        d.join(format!("old.checkpoint.{u}.jsonl")).display()
    );
    env.write_store(&store_of(&[
        ("agent:main:old".into(), entry("old", 90 * DAY, &cps)),
        (
            "agent:main:esc".into(),
            entry(
                "esc",
                90 * DAY,
                "\"sessionFile\": \"sub/../../../../../outside/a.jsonl\"",
            ),
        ),
        ("agent:main:keep".into(), entry("keep", MIN, "")),
    ]));
    env.transcript("old", 90 * DAY);
    env.transcript("keep", MIN);
    // Trajectory pointers of the pruned session that name the store, a live transcript, a
    // file outside and the outside through `..`.
    let targets: [&PointerTarget; 4] = [
        &|d, _| d.join("sessions.json").display().to_string(),
        &|d, _| d.join("keep.jsonl").display().to_string(),
        &|_, o| o.join("rt.trajectory.jsonl").display().to_string(),
        &|d, _| format!("{}/../../../../outside/rt.trajectory.jsonl", d.display()),
    ];
    for (i, target) in targets.iter().enumerate() {
        let env = env.duplicate();
        let d = env.sessions_dir("main");
        let target = target(&d, &env.root().join("outside"));
        env.file(
            "old.trajectory-path.json",
            &format!(
                "{{\"traceSchema\":\"openclaw-trajectory-pointer\",\"schemaVersion\":1,\"sessionId\":\"old\",\"runtimeFile\":\"{target}\"}}"
            ),
            90 * DAY,
        );
        let outside = env.root().join("outside");
        let before_outside = tree(&outside);
        let keep = fs::read(d.join("keep.jsonl")).unwrap();
        let o = env.run(&["cleanup", "--enforce", "--json"]);
        assert_eq!(o.status.code(), Some(0), "case {i}: {}", stderr(&o));
        assert_eq!(tree(&outside), before_outside, "case {i}: outside changed");
        assert_eq!(fs::read(d.join("keep.jsonl")).unwrap(), keep, "case {i}");
        let store = env.store_text();
        assert!(
            store.contains("\"keep\"") && !store.contains("\"old\""),
            "case {i}: {store}"
        );
        for link in [
            format!("old.checkpoint.{u}.jsonl"),
            "old.trajectory.jsonl".into(),
        ] {
            assert_eq!(kind(&d.join(&link)), "link", "case {i}: {link}");
        }
        assert!(
            env.listing().contains(&"old.jsonl.deleted.TS".to_string()),
            "case {i}: {:?}",
            env.listing()
        );
    }
}

#[test]
fn a_store_with_invalid_utf8_is_refused_naming_file_and_line() {
    let env = TestEnv::new();
    env.transcript("old", 90 * DAY);
    let mut text = format!(
        "{{\n  \"agent:main:a\": {},\n  \"agent:main:b\": {{\"sessionId\": \"x\", \"label\": \"",
        entry("old", 90 * DAY, "")
    )
    .into_bytes();
    text.extend_from_slice(b"\xc3\x28\xff\"}\n}\n");
    fs::write(env.store_path(), &text).unwrap();
    let before = tree(&env.root());
    for mode in ["--enforce", "--dry-run"] {
        let o = env.run(&["cleanup", mode]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&env.store_path().display().to_string()),
            "{err}"
        );
        assert!(err.contains("line 3"), "{err}");
        assert_eq!(tree(&env.root()), before);
    }
}

fn stale_env() -> TestEnv {
    let env = TestEnv::new();
    env.write_store(&store_of(&[
        ("agent:main:a".into(), entry("old", 90 * DAY, "")),
        ("agent:main:b".into(), entry("new", MIN, "")),
    ]));
    env.transcript("old", 90 * DAY);
    env.transcript("new", MIN);
    env
}

#[test]
fn cleanup_respects_every_kind_of_held_lock_and_reclaims_dead_ones() {
    let me = std::process::id();
    let held = [
        (
            "live, past every age limit",
            format!(
                "{{\"pid\": {me}, \"createdAt\": \"2020-01-01T00:00:00.000Z\", \"maxHoldMs\": 1000}}"
            ),
            0,
        ),
        ("garbage, just created", "{\"pid\"".to_owned(), 0),
    ];
    for (what, lock, age) in held {
        let env = stale_env();
        let p = env.sessions_dir("main").join("old.jsonl.lock");
        fs::write(&p, &lock).unwrap();
        set_age(&p, age);
        let before = tree(&env.root());
        let o = env.run(&["cleanup", "--enforce"]);
        assert_eq!(o.status.code(), Some(4), "{what}: {}", stderr(&o));
        assert!(stderr(&o).contains("skipped"), "{what}: {}", stderr(&o));
        assert_eq!(tree(&env.root()), before, "{what}");
    }
    for (what, lock, age) in [
        ("garbage, old", "]]".to_owned(), 10 * MIN),
        (
            "dead pid",
            "{\"pid\": 2147483000, \"createdAt\": \"2026-01-01T00:00:00.000Z\"}".to_owned(),
            0,
        ),
    ] {
        let env = stale_env();
        let p = env.sessions_dir("main").join("old.jsonl.lock");
        fs::write(&p, &lock).unwrap();
        set_age(&p, age);
        let o = env.run(&["cleanup", "--enforce"]);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
        assert!(!env.store_text().contains("\"old\""), "{what}");
    }
}

#[test]
fn temps_of_killed_store_writes_are_never_read_and_are_swept_when_old() {
    let env = stale_env();
    let d = env.sessions_dir("main");
    let u = "0f8c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6";
    // A half-written store temp of a dead run, old; one of a live run; one just written.
    let old = d.join(format!("sessions.json.2147483000.{u}.tmp"));
    let live = d.join(format!("sessions.json.{}.{u}.tmp", std::process::id()));
    fs::write(&old, "{\"agent:main:a\": {\"sessionId\": ").unwrap();
    set_age(&old, 90 * DAY);
    fs::write(&live, "{}").unwrap();
    set_age(&live, 90 * DAY);
    let o = env.run(&["cleanup", "--enforce", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let store = env.store_text();
    assert!(
        store.contains("\"new\"") && !store.contains("\"old\""),
        "{store}"
    );
    assert!(!old.exists(), "the dead run's old temp is swept");
    let _ = live; // OpenClaw's sweep goes by age alone; whether it stays is the reference's call.
}

#[test]
fn a_removed_entry_naming_the_store_or_a_kept_transcript_never_takes_it_along() {
    // Pruned by age (archived) and evicted by the disk budget (deleted): either way the store
    // and the kept session's files stay. (OpenClaw renames the store away and writes a new
    // one, and archives or deletes the kept session's transcript.)
    for config in [
        "{}",
        "{ session: { maintenance: { pruneAfter: \"365d\", maxDiskBytes: 10, highWaterBytes: 5 } } }",
    ] {
        let env = TestEnv::new();
        env.write_config(config);
        let d = env.sessions_dir("main");
        env.write_store(&store_of(&[
            (
                "agent:main:a".into(),
                entry("x", 90 * DAY, "\"sessionFile\": \"sessions.json\""),
            ),
            (
                "agent:main:b".into(),
                entry("y", 91 * DAY, "\"sessionFile\": \"keep.jsonl\""),
            ),
            (
                "agent:main:c".into(),
                entry(
                    "z",
                    92 * DAY,
                    &format!("\"sessionFile\": \"{}\"", d.join("keep.jsonl").display()),
                ),
            ),
            ("agent:main:keep".into(), entry("keep", MIN, "")),
        ]));
        let keep = env.transcript("keep", MIN);
        env.file("keep.trajectory.jsonl", "rt\n", MIN);
        let o = env.run(&[
            "cleanup",
            "--enforce",
            "--json",
            "--active-key",
            "agent:main:keep",
        ]);
        assert_eq!(o.status.code(), Some(0), "{config}: {}", stderr(&o));
        let store = env.store_text();
        assert!(store.contains("\"keep\""), "{config}: {store}");
        assert!(
            !store.contains("\"x\"") && !store.contains("\"y\""),
            "{config}: {store}"
        );
        assert!(keep.exists(), "{config}: {:?}", env.listing());
        assert!(
            d.join("keep.trajectory.jsonl").exists(),
            "{config}: {:?}",
            env.listing()
        );
        assert_eq!(
            env.listing(),
            ["keep.jsonl", "keep.trajectory.jsonl", "sessions.json"],
            "{config}"
        );
    }
}

#[test]
fn the_files_a_kept_entry_uses_stay_under_any_name_and_a_name_alone_protects_nothing() {
    // The kept entry (session id `k`) uses custom.jsonl and its trajectory files; a removed
    // entry names custom.jsonl too, another names k.jsonl, which no remaining entry uses.
    // Pruned by age (archive step, trajectory removal) or evicted by the disk budget: the
    // files the kept entry uses stay, whatever their name (OpenClaw archives or deletes them),
    // and k.jsonl and its trajectory go as OpenClaw takes them, although they are named after
    // a kept session id.
    let cases = [
        (
            "{}",
            &[
                "custom.jsonl",
                "custom.trajectory-path.json",
                "custom.trajectory.jsonl",
                "k.jsonl.deleted.TS",
                "sessions.json",
            ][..],
            &[
                "custom.jsonl.deleted.TS",
                "k.jsonl.deleted.TS",
                "sessions.json",
            ][..],
        ),
        (
            "{ session: { maintenance: { pruneAfter: \"365d\", maxDiskBytes: 10, highWaterBytes: 5 } } }",
            &[
                "custom.jsonl",
                "custom.trajectory-path.json",
                "custom.trajectory.jsonl",
                "sessions.json",
            ][..],
            &["sessions.json"][..],
        ),
    ];
    for (config, ours_left, theirs_left) in cases {
        let env = TestEnv::new();
        env.write_config(config);
        env.write_store(&store_of(&[
            (
                "agent:main:a".into(),
                entry("x", 90 * DAY, "\"sessionFile\": \"custom.jsonl\""),
            ),
            (
                "agent:main:b".into(),
                entry("w", 91 * DAY, "\"sessionFile\": \"k.jsonl\""),
            ),
            (
                "agent:main:keep".into(),
                entry("k", MIN, "\"sessionFile\": \"custom.jsonl\""),
            ),
        ]));
        let header = "{\"type\":\"session\",\"version\":3,\"id\":\"k\"}\n";
        env.file("custom.jsonl", header, MIN);
        env.file("custom.trajectory.jsonl", "rt\n", MIN);
        env.file("custom.trajectory-path.json", "{}", MIN);
        env.file("k.jsonl", header, MIN);
        env.file("k.trajectory.jsonl", "rt\n", MIN);
        let twin = env.duplicate();
        let args = ["cleanup", "--enforce", "--active-key", "agent:main:keep"];
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(0), "{config}: {}", stderr(&o));
        let store = env.store_text();
        assert!(
            store.contains("\"k\"") && !store.contains("\"x\"") && !store.contains("\"w\""),
            "{config}: {store}"
        );
        assert_eq!(env.listing(), ours_left, "{config}");
        assert_eq!(
            fs::read_to_string(env.sessions_dir("main").join("custom.jsonl")).unwrap(),
            header
        );
        let Some(oracle) = crate::util::oracle() else {
            continue;
        };
        // With `--store`, the reference runs offline.
        let twin_store = twin.store_path().display().to_string();
        let o = twin.run_oracle(
            &oracle.wrapper,
            &[
                "sessions",
                "cleanup",
                "--enforce",
                "--store",
                &twin_store,
                "--active-key",
                "agent:main:keep",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{config}: {}", stderr(&o));
        assert_eq!(twin.listing(), theirs_left, "{config}: the reference");
    }
}
