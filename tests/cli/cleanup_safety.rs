//! The safety envelope of `cleanup --enforce` beyond what `cleanup` covers: transcripts in use
//! (live locks), symlinked stores, more shapes of broken `sessions.json`, and the store's owner
//! and mode after a rewrite.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

use crate::util::{DAY, MIN, TestEnv, now_ms, stderr};

fn entry(sid: &str, age_ms: i64) -> String {
    format!(
        "{{\"sessionId\": \"{sid}\", \"updatedAt\": {}}}",
        now_ms() - age_ms
    )
}

/// A store where `old` is stale (pruned by default) and `new` is fresh.
fn stale_env() -> TestEnv {
    let env = TestEnv::new();
    env.write_store(&format!(
        "{{\"agent:main:telegram:direct:1\": {}, \"agent:main:telegram:direct:2\": {}}}",
        entry("old", 90 * DAY),
        entry("new", 10 * MIN)
    ));
    env.transcript("old", 90 * DAY);
    env.transcript("new", 10 * MIN);
    env
}

/// Every file under the env root with its bytes (symlinks as their target).
fn snapshot(env: &TestEnv) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(env.root()).follow_links(false) {
        let e = e.unwrap();
        let body = if e.file_type().is_symlink() {
            fs::read_link(e.path())
                .unwrap()
                .display()
                .to_string()
                .into_bytes()
        } else if e.file_type().is_file() {
            fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.push((e.path().display().to_string(), body));
    }
    out
}

#[test]
fn a_store_whose_plan_removes_a_live_locked_transcript_is_skipped() {
    let env = stale_env();
    let lock = env.sessions_dir("main").join("old.jsonl.lock");
    let live = format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
        std::process::id(),
        clawkeeper::isotime::iso_now()
    );
    fs::write(&lock, &live).unwrap();
    let before = snapshot(&env);
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("skipped") && err.contains("in use"), "{err}");
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    assert_eq!(
        snapshot(&env),
        before,
        "nothing may change while a session is in use"
    );
    // The lock of a dead process does not hold anything back.
    fs::write(
        &lock,
        "{\n  \"pid\": 2147483000,\n  \"createdAt\": \"2026-01-01T00:00:00.000Z\"\n}\n",
    )
    .unwrap();
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!env.store_text().contains("\"old\""));
    assert!(env.store_text().contains("\"new\""));
}

#[test]
fn a_symlinked_store_is_refused_and_its_target_untouched() {
    let env = stale_env();
    let real = env.root().join("real-sessions.json");
    fs::rename(env.store_path(), &real).unwrap();
    symlink(&real, env.store_path()).unwrap();
    let before = snapshot(&env);
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("symlink"), "{}", stderr(&o));
    assert_eq!(snapshot(&env), before);
    // A preview may read through it; it writes nothing either.
    let o = env.run(&["cleanup", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(snapshot(&env), before);
}

#[test]
fn a_directory_or_fifo_named_sessions_json_is_refused() {
    let env = stale_env();
    fs::remove_file(env.store_path()).unwrap();
    let c = std::ffi::CString::new(env.store_path().to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let before = snapshot(&env);
    for mode in ["--enforce", "--dry-run"] {
        let o = env.run(&["cleanup", mode]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert_eq!(snapshot(&env), before);
    }
}

#[test]
fn broken_stores_are_refused_with_file_and_position() {
    for (text, pos) in [
        ("{\"agent:main:a\": {\"sessionId\": \"x\", \"upd", "line 1"),
        ("\u{feff}{}", "line 1 column 1"),
        ("{}\n{}", "line 2 column 1"),
        ("null", "line 1 column 1"),
        ("\"a string\"", "line 1 column 1"),
        ("{\n  \"a\": NaN\n}", "line 2"),
    ] {
        let env = stale_env();
        env.write_store(text);
        let before = snapshot(&env);
        let o = env.run(&["cleanup", "--enforce", "--json"]);
        assert_eq!(o.status.code(), Some(3), "{text:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with("clawkeeper: "), "{err}");
        assert!(
            err.contains(&env.store_path().display().to_string()),
            "{err}"
        );
        assert!(err.contains(pos), "{text:?} should name {pos}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert_eq!(snapshot(&env), before, "nothing may change for {text:?}");
    }
}

#[test]
fn the_store_keeps_its_owner_and_gets_openclaws_mode() {
    let env = stale_env();
    let p = env.store_path();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    let owned = std::os::unix::fs::chown(&p, Some(4242), Some(4243)).is_ok();
    let o = env.run(&["cleanup", "--enforce"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !env.store_text().contains("\"old\""),
        "the store was not rewritten"
    );
    let m = fs::metadata(&p).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600);
    if owned {
        assert_eq!((m.uid(), m.gid()), (4242, 4243));
    }
}

#[test]
fn wait_lock_lets_cleanup_proceed_once_the_session_is_released() {
    let env = stale_env();
    let lock = env.sessions_dir("main").join("old.jsonl.lock");
    let live = format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
        std::process::id(),
        clawkeeper::isotime::iso_now()
    );
    fs::write(&lock, live).unwrap();
    let releaser = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            fs::remove_file(lock).unwrap();
        })
    };
    let o = env.run(&["cleanup", "--enforce", "--wait-lock", "20s"]);
    releaser.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!env.store_text().contains("\"old\""));
}

/// A run that changes no entry writes the store only when its text is not what OpenClaw
/// writes (as OpenClaw compares the text it would write with the text it read): the same
/// file stays (same inode, same bytes); a minified one is written out pretty.
#[test]
fn a_store_with_nothing_to_change_is_written_only_when_its_text_differs() {
    let env = TestEnv::new();
    let updated = now_ms() - 10 * MIN;
    let pretty = format!(
        "{{\n  \"agent:main:telegram:direct:2\": {{\n    \"sessionId\": \"new\",\n    \"updatedAt\": {updated}\n  }}\n}}"
    );
    env.write_store(&pretty);
    env.transcript("new", 10 * MIN);
    let p = env.store_path();
    let ino = || fs::metadata(&p).unwrap().ino();
    let enforce = |args: &[&str]| {
        let o = env.run(&[&["cleanup", "--enforce"], args].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    let before = ino();
    enforce(&[]);
    assert_eq!(env.store_text(), pretty);
    assert_eq!(ino(), before, "the store was rewritten");

    env.write_store(&format!(
        "{{\"agent:main:telegram:direct:2\":{{\"sessionId\":\"new\",\"updatedAt\":{updated}}}}}"
    ));
    let before = ino();
    enforce(&[]);
    assert_eq!(env.store_text(), pretty);
    assert_ne!(ino(), before, "the store was not rewritten");

    // A `--fix-missing` repair alone keeps every entry: the store is still written.
    let stale = "0123abcd-0000-4000-8000-0123456789ab.jsonl";
    env.write_store(&pretty.replace(
        &format!("{updated}\n"),
        &format!("{updated},\n    \"sessionFile\": \"{stale}\"\n"),
    ));
    enforce(&["--fix-missing"]);
    let text = env.store_text();
    assert!(!text.contains(stale), "the repair was not saved: {text}");
    assert!(text.contains("new.jsonl\""), "{text}");
}
