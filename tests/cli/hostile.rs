//! Hostile inputs against every writing command at once: `prune-noreply`, `prune-cache-ttl`,
//! `strip-images`, `compact` in place and `compact --successor` (and `cleanup` where it applies). Each case runs
//! for every writer, so a rule that holds for one command but was forgotten in another shows up
//! here: locks (live, dead, stale, garbage), agents moved to SQLite, broken `sessions.json`,
//! kept modes, temps of killed runs, and appends racing the rewrite.
//!
//! Store-level hostility for `cleanup` alone is in `hostile_cleanup`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use serde_json::Value;

use crate::generator::generate_long;
use crate::util::{TestEnv, set_age, stderr};

pub const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#;

fn msg(id: &str, parent: &str, role: &str, content: &str) -> String {
    let parent = if parent.is_empty() {
        "null".to_owned()
    } else {
        format!("\"{parent}\"")
    };
    let stop = if role == "assistant" {
        r#","stopReason":"stop""#
    } else {
        ""
    };
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"{role}","content":{content}{stop},"timestamp":1}}}}"#
    )
}

/// Header, u1, n1, n2 (removed by prune-noreply), u2.
pub fn prunable() -> Vec<u8> {
    let silent = r#"[{"type":"text","text":"NO_REPLY"}]"#;
    ([
        HEADER.to_owned(),
        msg("u1", "", "user", "\"hi\""),
        msg("n1", "u1", "assistant", silent),
        msg("n2", "n1", "assistant", silent),
        msg("u2", "n2", "user", "\"again\""),
    ]
    .join("\n")
        + "\n")
        .into_bytes()
}

/// Three cache-TTL markers of one provider and model: `prune-cache-ttl` removes the middle one.
pub fn with_cache_ttl_markers() -> Vec<u8> {
    let marker = |id: &str, parent: &str, ts: u64| {
        format!(
            r#"{{"type":"custom","customType":"openclaw.cache-ttl","data":{{"timestamp":{ts},"provider":"anthropic","modelId":"claude-opus-4-5"}},"id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:00.000Z"}}"#
        )
    };
    ([
        HEADER.to_owned(),
        msg("u1", "", "user", "\"hi\""),
        marker("t1", "u1", 1_772_323_200_000),
        marker("t2", "t1", 1_772_323_260_000),
        marker("t3", "t2", 1_772_323_320_000),
        msg("u2", "t3", "user", "\"again\""),
    ]
    .join("\n")
        + "\n")
        .into_bytes()
}

/// An image in the first of five turns: `strip-images --keep-turns 1` replaces it.
pub fn with_image() -> Vec<u8> {
    let image = format!(
        r#"[{{"type":"text","text":"see"}},{{"type":"image","data":"{}","mimeType":"image/png"}}]"#,
        "QUFB".repeat(4096)
    );
    let mut lines = vec![HEADER.to_owned(), msg("u0", "", "user", &image)];
    let mut parent = "u0".to_owned();
    for t in 0..4 {
        let a = format!("a{t}");
        lines.push(msg(
            &a,
            &parent,
            "assistant",
            r#"[{"type":"text","text":"ok"}]"#,
        ));
        let u = format!("q{t}");
        lines.push(msg(&u, &a, "user", "\"next\""));
        parent = u;
    }
    (lines.join("\n") + "\n").into_bytes()
}

/// One writing command: its name, its arguments before the target, and an input it changes.
pub struct Writer {
    pub name: &'static str,
    pub args: Vec<&'static str>,
    pub input: Vec<u8>,
    /// Whether it needs a store target (`--successor`).
    pub store_only: bool,
}

const COMPACT: [&str; 5] = [
    "compact",
    "--keep-recent-tokens",
    "400",
    "--min-tokens",
    "0",
];

pub fn writers() -> Vec<Writer> {
    let long = generate_long(31, 200).bytes;
    let mut successor = COMPACT.to_vec();
    successor.push("--successor");
    vec![
        Writer {
            name: "prune-noreply",
            args: vec!["prune-noreply"],
            input: prunable(),
            store_only: false,
        },
        Writer {
            name: "prune-cache-ttl",
            args: vec!["prune-cache-ttl"],
            input: with_cache_ttl_markers(),
            store_only: false,
        },
        Writer {
            name: "strip-images",
            args: vec!["strip-images", "--keep-turns", "1"],
            input: with_image(),
            store_only: false,
        },
        Writer {
            name: "compact",
            args: COMPACT.to_vec(),
            input: long.clone(),
            store_only: false,
        },
        Writer {
            name: "compact --successor",
            args: successor,
            input: long,
            store_only: true,
        },
    ]
}

pub const SESSIONS: &str = "agents/main/sessions";
pub const STORE: &str = "agents/main/sessions/sessions.json";

/// Put `w`'s input at `agents/main/sessions/s1.jsonl` with a store pointing at it.
pub fn setup(env: &TestEnv, w: &Writer) {
    env.write(&format!("{SESSIONS}/s1.jsonl"), &w.input);
    env.write(
        STORE,
        br#"{
  "agent:main:main": {
    "sessionId": "s1",
    "updatedAt": 1772442000000
  }
}"#,
    );
}

/// Run `w` for real on the store (or the transcript) of [`setup`].
pub fn enforce(env: &TestEnv, w: &Writer, via_store: bool) -> (i32, Value) {
    let mut args = w.args.clone();
    if via_store || w.store_only {
        args.extend(["--store", STORE, "--session", "agent:main:main"]);
    } else {
        args.extend(["--transcript", "agents/main/sessions/s1.jsonl"]);
    }
    args.push("--enforce");
    env.run_json(&args)
}

pub fn status(v: &Value) -> &str {
    v["transcripts"][0]["status"].as_str().unwrap_or("?")
}

/// Every node under `root`: file type, mode and (for regular files) bytes. Special files are
/// never opened, symlinks never followed.
pub fn tree(root: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().display().to_string();
        let meta = fs::symlink_metadata(e.path()).unwrap();
        let ft = meta.file_type();
        let mode = meta.permissions().mode() & 0o7777;
        let (kind, bytes) = if ft.is_symlink() {
            (
                "link",
                fs::read_link(e.path())
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes(),
            )
        } else if ft.is_file() {
            ("file", fs::read(e.path()).unwrap())
        } else if ft.is_dir() {
            ("dir", Vec::new())
        } else if ft.is_fifo() {
            ("fifo", Vec::new())
        } else {
            ("other", Vec::new())
        };
        out.insert(rel, (kind.to_owned(), mode, bytes));
    }
    out
}

fn live_lock(created_at: &str) -> String {
    format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{created_at}\"\n}}\n",
        std::process::id()
    )
}

#[test]
fn every_writer_skips_live_locks_and_reclaims_dead_or_garbage_ones() {
    let lock_rel = format!("{SESSIONS}/s1.jsonl.lock");
    for w in writers() {
        // Held by a live process, fresh or past every age limit: skipped (exit 4), nothing
        // written, the lock left exactly as it was.
        let fresh = live_lock(&clawkeeper::isotime::iso_now());
        let old = live_lock("2020-01-01T00:00:00.000Z");
        for (what, lock, age_ms) in [
            ("live", fresh.as_bytes(), 0),
            ("live but too old", old.as_bytes(), 0),
            ("garbage, just created", &b"{\"pid\": 12"[..], 0),
            ("empty, just created", &b""[..], 0),
        ] {
            let env = TestEnv::new();
            setup(&env, &w);
            let p = env.write(&lock_rel, lock);
            set_age(&p, age_ms);
            let before = tree(&env.work());
            let (code, v) = enforce(&env, &w, false);
            assert_eq!(
                (code, status(&v)),
                (4, "locked"),
                "{} / {what}: {v}",
                w.name
            );
            assert_eq!(tree(&env.work()), before, "{} / {what}", w.name);
        }
        // Dead holder, or an unreadable lock old enough: reclaimed, the run proceeds and
        // leaves no lock behind (its own is removed).
        for (what, lock, age_ms) in [
            (
                "dead pid",
                &b"{\n  \"pid\": 2147483000,\n  \"createdAt\": \"2026-01-01T00:00:00.000Z\"\n}\n"[..],
                0,
            ),
            ("garbage, old", &b"not json at all"[..], 600_000),
            ("empty, old", &b""[..], 600_000),
        ] {
            let env = TestEnv::new();
            setup(&env, &w);
            let p = env.write(&lock_rel, lock);
            set_age(&p, age_ms);
            let (code, v) = enforce(&env, &w, false);
            assert_eq!(
                (code, status(&v)),
                (0, "changed"),
                "{} / {what}: {v}",
                w.name
            );
            assert!(!env.path(&lock_rel).exists(), "{} / {what}", w.name);
            let leftovers: Vec<String> = fs::read_dir(env.path(SESSIONS))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".lock") || n.ends_with(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "{} / {what}: {leftovers:?}", w.name);
        }
    }
}

#[test]
fn every_writer_refuses_agents_that_moved_to_sqlite() {
    for w in writers() {
        for via_store in [false, true] {
            let env = TestEnv::new();
            setup(&env, &w);
            env.write(
                "agents/main/agent/openclaw-agent.sqlite",
                b"SQLite format 3\0",
            );
            let before = tree(&env.work());
            let (code, v) = enforce(&env, &w, via_store);
            assert_eq!(
                (code, status(&v)),
                (3, "refused"),
                "{} (store: {via_store}): {v}",
                w.name
            );
            assert!(v.to_string().contains("SQLite"), "{}: {v}", w.name);
            assert_eq!(tree(&env.work()), before, "{} wrote something", w.name);
        }
    }
    // A transcript in a subdirectory of the sessions directory belongs to the agent too.
    for w in writers().into_iter().filter(|w| !w.store_only) {
        let env = TestEnv::new();
        env.write(&format!("{SESSIONS}/sub/s1.jsonl"), &w.input);
        env.write("agents/main/agent/openclaw-agent.sqlite", b"");
        let before = tree(&env.work());
        let mut args = w.args.clone();
        args.extend([
            "--transcript",
            "agents/main/sessions/sub/s1.jsonl",
            "--enforce",
        ]);
        let (code, v) = env.run_json(&args);
        assert_eq!((code, status(&v)), (3, "refused"), "{}: {v}", w.name);
        assert_eq!(tree(&env.work()), before, "{} wrote something", w.name);
    }
    // inspect reads the database as the live store: an empty file there is not an agent
    // database, and inspect says so (exit 1, naming it) without writing anything.
    let env = TestEnv::new();
    setup(&env, &writers()[0]);
    env.write("agents/main/agent/openclaw-agent.sqlite", b"");
    let before = tree(&env.work());
    let out = env.run(&["inspect", "--store", STORE]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("openclaw-agent.sqlite: not an OpenClaw agent database"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tree(&env.work()), before);
}

/// Broken `sessions.json` texts and the position the refusal must name.
pub fn broken_stores() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        (
            "truncated",
            b"{\n  \"agent:main:main\": {\n    \"sessionId\": \"s1\",\n    \"upd".to_vec(),
            "line 4",
        ),
        (
            "an array",
            b"[\n  {\"sessionId\": \"s1\"}\n]".to_vec(),
            "line 1 column 1",
        ),
        ("null", b"null".to_vec(), "line 1 column 1"),
        (
            "a BOM",
            b"\xef\xbb\xbf{\"agent:main:main\": {\"sessionId\": \"s1\"}}".to_vec(),
            "line 1 column 1",
        ),
        (
            "invalid UTF-8",
            b"{\n  \"agent:main:main\": {\"sessionId\": \"s1\", \"label\": \"\xff\xfe\"}\n}"
                .to_vec(),
            "line 2",
        ),
    ]
}

#[test]
fn every_store_writer_refuses_a_broken_store_and_writes_nothing() {
    for w in writers() {
        for (what, text, pos) in broken_stores() {
            let env = TestEnv::new();
            setup(&env, &w);
            env.write(STORE, &text);
            let before = tree(&env.work());
            let mut args = w.args.clone();
            args.extend(["--store", STORE, "--enforce"]);
            let out = env.run(&args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(3), "{} / {what}: {err}", w.name);
            assert!(err.contains("sessions.json"), "{} / {what}: {err}", w.name);
            assert!(
                err.contains(pos),
                "{} / {what} should name {pos}: {err}",
                w.name
            );
            assert_eq!(tree(&env.work()), before, "{} / {what}", w.name);
        }
    }
}

#[test]
fn every_writer_keeps_the_mode_of_what_it_rewrites() {
    for w in writers() {
        for mode in [0o600, 0o640] {
            let env = TestEnv::new();
            setup(&env, &w);
            let t = env.path(&format!("{SESSIONS}/s1.jsonl"));
            fs::set_permissions(&t, fs::Permissions::from_mode(mode)).unwrap();
            fs::set_permissions(env.path(STORE), fs::Permissions::from_mode(0o600)).unwrap();
            let (code, v) = enforce(&env, &w, false);
            assert_eq!((code, status(&v)), (0, "changed"), "{}: {v}", w.name);
            let mode_of = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode_of(&t), mode, "{}", w.name);
            assert_eq!(mode_of(&env.path(STORE)), 0o600, "{}", w.name);
            if w.store_only {
                // The successor is a new file that takes the old one's mode.
                let store: Value =
                    serde_json::from_slice(&fs::read(env.path(STORE)).unwrap()).unwrap();
                let sid = store["agent:main:main"]["sessionId"].as_str().unwrap();
                assert_ne!(sid, "s1", "{v}");
                let succ = env.path(&format!("{SESSIONS}/{sid}.jsonl"));
                let succ = match store["agent:main:main"]["sessionFile"].as_str() {
                    Some(f) => env.path(SESSIONS).join(f),
                    None => succ,
                };
                assert_eq!(mode_of(&succ), mode, "{}: {}", w.name, succ.display());
            }
        }
    }
}

#[test]
fn every_writer_removes_temps_of_dead_runs_and_nothing_else() {
    const UUID: &str = "0f8c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6";
    for w in writers() {
        let env = TestEnv::new();
        setup(&env, &w);
        let outside = env.write("outside/victim", b"keep");
        let dead = format!("{SESSIONS}/s1.jsonl.2147483000.{UUID}.tmp");
        let live = format!("{SESSIONS}/s1.jsonl.{}.{UUID}.tmp", std::process::id());
        let link = format!("{SESSIONS}/s1.jsonl.2147483001.{UUID}.tmp");
        let dir = format!("{SESSIONS}/s1.jsonl.2147483002.{UUID}.tmp");
        env.write(&dead, b"{\"type\":\"session\"");
        env.write(&live, b"in progress");
        std::os::unix::fs::symlink(&outside, env.path(&link)).unwrap();
        fs::create_dir(env.path(&dir)).unwrap();
        let (code, v) = enforce(&env, &w, false);
        assert_eq!((code, status(&v)), (0, "changed"), "{}: {v}", w.name);
        if w.store_only {
            // The old transcript is not rewritten: its temps are left alone, never read.
            assert_eq!(fs::read(env.path(&dead)).unwrap(), b"{\"type\":\"session\"");
        } else {
            assert!(
                !env.path(&dead).exists(),
                "{}: the dead run's temp stays",
                w.name
            );
        }
        assert!(env.path(&live).exists(), "{}", w.name);
        assert!(
            fs::symlink_metadata(env.path(&link))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{}",
            w.name
        );
        assert!(env.path(&dir).is_dir(), "{}", w.name);
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
    }
}

#[test]
fn a_fifo_or_directory_in_place_of_the_lock_is_respected_without_blocking() {
    let lock_rel = format!("{SESSIONS}/s1.jsonl.lock");
    for w in writers() {
        for special in ["fifo", "dir"] {
            let env = TestEnv::new();
            setup(&env, &w);
            let p = env.path(&lock_rel);
            if special == "dir" {
                fs::create_dir(&p).unwrap();
            } else {
                let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
                // SAFETY: mkfifo on a path we own.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
            let before = tree(&env.work());
            let (code, v) = enforce(&env, &w, false);
            assert_eq!(
                (code, status(&v)),
                (4, "locked"),
                "{} / {special}: {v}",
                w.name
            );
            assert_eq!(tree(&env.work()), before, "{} / {special}", w.name);
        }
    }
}
