//! Hostile stores and sessions directories for `cleanup --enforce`, beyond `cleanup_safety`:
//! special files named like transcripts and archives, paths in entries, checkpoints and
//! trajectory pointers that lead outside the directory or onto files that must stay, invalid
//! UTF-8 in `sessions.json`, locks of every kind, `--max-delete` at its boundaries, temps of
//! killed runs, and a gateway rewriting the store while cleanup runs.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::hostile::tree;
use crate::util::{DAY, MIN, TestEnv, now_ms, set_age, stderr, stdout};

fn entry(sid: &str, age_ms: i64, extra: &str) -> String {
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

fn store_of(members: &[(String, String)]) -> String {
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
fn max_delete_boundaries() {
    let env = TestEnv::new();
    let mut members: Vec<(String, String)> = (0..4)
        .map(|i| {
            (
                format!("agent:main:k{i}"),
                entry(&format!("m{i}"), 90 * DAY, ""),
            )
        })
        .collect();
    members.push(("agent:main:fresh".into(), entry("fresh", MIN, "")));
    env.write_store(&store_of(&members));
    for i in 0..4 {
        env.transcript(&format!("m{i}"), 90 * DAY);
    }
    env.transcript("fresh", MIN);
    let before = tree(&env.root());
    // 4 of 5 entries (80 %) go.
    for limit in ["0", "3", "0%", "79%", "79.9%"] {
        let o = env.run(&["cleanup", "--enforce", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(5), "{limit}: {}", stderr(&o));
        assert!(stderr(&o).contains("4 of 5"), "{limit}: {}", stderr(&o));
        assert_eq!(tree(&env.root()), before, "{limit}");
    }
    for limit in ["-1", "101%", "abc", "", "5 %x", "1e999"] {
        let o = env.run(&["cleanup", "--enforce", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(1), "{limit:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--max-delete"),
            "{limit:?}: {}",
            stderr(&o)
        );
        assert_eq!(tree(&env.root()), before, "{limit:?}");
    }
    for limit in ["4", "80%", "100%"] {
        let env = env.duplicate();
        let o = env.run(&["cleanup", "--enforce", "--json", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(0), "{limit}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("\"appliedCount\": 1"),
            "{limit}: {}",
            stdout(&o)
        );
    }
    // Nothing to remove: even 0 passes.
    let o = env.run(&[
        "cleanup",
        "--enforce",
        "--max-delete",
        "0",
        "--prune-after",
        "365d",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
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

/// The store keys written by a concurrent gateway: one fresh marker key per write.
fn gateway_write(store: &Path, base: &str, i: u32) {
    let text = base.replacen(
        '{',
        &format!(
            "{{\n  \"agent:main:gateway\": {{\"sessionId\": \"gw\", \"updatedAt\": {}, \"n\": \"{i:06}\"}},",
            now_ms()
        ),
        1,
    );
    let tmp = store.with_extension(format!("gw{i}.tmp"));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, store).unwrap();
}

#[test]
fn a_store_rewritten_during_cleanup_never_loses_the_other_writers_update() {
    let rounds = crate::util::case_count(12);
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let env = TestEnv::new();
        let members: Vec<(String, String)> = (0..400)
            .map(|i| {
                let age = if i % 2 == 0 { 90 * DAY } else { MIN };
                (
                    format!("agent:main:telegram:direct:{i}"),
                    entry(
                        &format!("s{i}"),
                        age,
                        "\"label\": \"padding padding padding\"",
                    ),
                )
            })
            .collect();
        let base = store_of(&members);
        env.write_store(&base);
        let store = env.store_path();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let last = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let writer = {
            let (stop, last, store, base) =
                (stop.clone(), last.clone(), store.clone(), base.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                // After a pause that differs per round (before, during or after the run), a
                // burst of same-size writes a fraction of a millisecond apart.
                std::thread::sleep(Duration::from_millis(round * 53 % 500));
                for _ in 0..10 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    i += 1;
                    gateway_write(&store, &base, i);
                    last.store(i, std::sync::atomic::Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(300));
                }
            })
        };
        let o = env.run(&["cleanup", "--enforce", "--json"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        let code = o.status.code();
        assert!(matches!(code, Some(0 | 3)), "{}", stderr(&o));
        *outcomes.entry(code).or_insert(0) += 1;
        let text = env.store_text();
        let n = last.load(std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            // The writer never wrote: cleanup ran alone and must have succeeded.
            assert_eq!(code, Some(0), "{}", stderr(&o));
            continue;
        }
        assert!(
            text.contains(&format!("\"n\": \"{n:06}\"")),
            "round {round}: cleanup overwrote the gateway's last write ({n}); exit {code:?}: {}",
            stderr(&o)
        );
    }
    eprintln!("store races: {outcomes:?}");
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
