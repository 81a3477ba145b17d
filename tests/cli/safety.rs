//! The safety envelope of the transcript commands under hostile inputs, beyond what
//! `transcript_safety` covers: special files, confinement of every write, odd lines that must
//! survive a rewrite byte for byte (invalid UTF-8, CRLF, blank lines, a torn tail, a 100 MB
//! line), symlinked and stale locks, `--wait-lock`, temps left by killed runs, kept modes and
//! owners, and agents that moved to SQLite.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::TestEnv;

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#;
const UUID: &str = "0f8c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6";

fn user(id: &str, parent: &str, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
    )
}

fn silent(id: &str, parent: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"NO_REPLY"}}],"stopReason":"stop","timestamp":1}}}}"#
    )
}

/// Header, u1, n1, n2 (removed by prune-noreply), u2.
fn prunable() -> String {
    [
        HEADER.to_owned(),
        user("u1", "x", "hi").replace(r#""parentId":"x""#, r#""parentId":null"#),
        silent("n1", "u1"),
        silent("n2", "n1"),
        user("u2", "n2", "again"),
    ]
    .join("\n")
        + "\n"
}

fn status(v: &Value) -> &str {
    v["transcripts"][0]["status"].as_str().unwrap_or("?")
}

/// Every file under `root` (recursively, symlinks not followed) with its bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().display().to_string();
        let ft = e.file_type();
        let bytes = if ft.is_symlink() {
            format!("-> {}", fs::read_link(e.path()).unwrap().display()).into_bytes()
        } else if ft.is_file() {
            fs::read(e.path()).unwrap()
        } else {
            b"<dir>".to_vec()
        };
        out.insert(rel, bytes);
    }
    out
}

#[test]
fn fifos_and_directories_are_refused_without_blocking() {
    let env = TestEnv::new();
    let fifo = env.path("t.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fs::create_dir(env.path("d.jsonl")).unwrap();
    for (name, cmd) in [("t.jsonl", "prune-noreply"), ("d.jsonl", "strip-images")] {
        let (code, v) = env.run_json(&[cmd, "--transcript", name, "--enforce"]);
        assert_eq!((code, status(&v)), (0, "damaged"), "{name}: {v}");
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn an_enforce_run_changes_only_its_transcript() {
    let env = TestEnv::new();
    let outside = env.path("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("victim.jsonl"), prunable()).unwrap();
    let sessions = env.path("sessions");
    fs::create_dir(&sessions).unwrap();
    fs::write(sessions.join("t.jsonl"), prunable()).unwrap();
    fs::write(sessions.join("other.jsonl"), prunable()).unwrap();
    symlink(outside.join("victim.jsonl"), sessions.join("link.jsonl")).unwrap();
    let before = snapshot(&env.work());
    // `..` in the path is fine as long as the file itself is a regular file.
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "outside/../sessions/t.jsonl",
        "--enforce",
    ]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    let mut after = snapshot(&env.work());
    let changed = after.remove("sessions/t.jsonl").unwrap();
    assert_ne!(changed, prunable().into_bytes());
    let mut expected = before;
    expected.remove("sessions/t.jsonl");
    assert_eq!(after, expected, "something besides the transcript changed");
    // Through the symlink: refused, nothing anywhere changes.
    let before = snapshot(&env.work());
    let (code, _) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "sessions/link.jsonl",
        "--enforce",
    ]);
    // Skipped as damaged (named on stderr), not a failure of the run.
    assert_eq!(code, 0);
    assert_eq!(snapshot(&env.work()), before);
}

#[test]
fn odd_lines_survive_a_rewrite_byte_for_byte() {
    let env = TestEnv::new();
    let mut text: Vec<u8> = Vec::new();
    text.extend_from_slice(HEADER.as_bytes());
    text.extend_from_slice(b"\r\n");
    text.extend_from_slice(
        user("u1", "x", "hi")
            .replace(r#""parentId":"x""#, r#""parentId":null"#)
            .as_bytes(),
    );
    text.extend_from_slice(b"\r\n\n   \n");
    let invalid_utf8 = b"{\"type\":\"custom\",\"id\":\"c1\",\"data\":\"\xff\xfe\xc0\"}\n";
    text.extend_from_slice(invalid_utf8);
    let lone = br#"{"type":"custom","id":"c2","data":"\ud800 and \udfff"}"#;
    text.extend_from_slice(lone);
    text.push(b'\n');
    text.extend_from_slice(silent("n1", "u1").as_bytes());
    text.extend_from_slice(b"\r\n");
    text.extend_from_slice(silent("n2", "n1").as_bytes());
    text.push(b'\n');
    text.extend_from_slice(user("u2", "n2", "again").as_bytes());
    text.extend_from_slice(b"\r\n");
    let torn = br#"{"type":"message","id":"u3","parentId":"u2","message":{"role":"user","cont"#;
    text.extend_from_slice(torn);
    env.write("t.jsonl", &text);
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    // Unparsable lines are reported by number; the invalid UTF-8 line is an entry to the
    // runtime (it reads U+FFFD), kept as it is and reported in a note.
    assert_eq!(
        v["transcripts"][0]["unparsableLines"],
        serde_json::json!([6, 10])
    );
    assert!(
        v["transcripts"][0]["notes"]
            .to_string()
            .contains("invalid UTF-8 as they are: 5"),
        "{v}"
    );
    let got = fs::read(env.path("t.jsonl")).unwrap();
    // Exactly n2 went; u2 was re-parented (rewritten with `\n`); everything else is identical.
    let u2_new = user("u2", "n1", "again");
    let mut expected: Vec<u8> = Vec::new();
    expected.extend_from_slice(HEADER.as_bytes());
    expected.extend_from_slice(b"\r\n");
    expected.extend_from_slice(
        user("u1", "x", "hi")
            .replace(r#""parentId":"x""#, r#""parentId":null"#)
            .as_bytes(),
    );
    expected.extend_from_slice(b"\r\n\n   \n");
    expected.extend_from_slice(invalid_utf8);
    expected.extend_from_slice(lone);
    expected.push(b'\n');
    expected.extend_from_slice(silent("n1", "u1").as_bytes());
    expected.extend_from_slice(b"\r\n");
    expected.extend_from_slice(u2_new.as_bytes());
    expected.push(b'\n');
    expected.extend_from_slice(torn);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(got, expected);
}

#[test]
fn a_100_mb_line_is_kept_and_a_100_mb_image_is_replaced() {
    let mb: usize = std::env::var("CLAWKEEPER_BIG_LINE_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let env = TestEnv::new();
    let big_text = "x".repeat(mb << 20);
    let big_user = user("u0", "x", &big_text).replace(r#""parentId":"x""#, r#""parentId":null"#);
    let image = format!(
        r#"{{"type":"message","id":"i1","parentId":"u0","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"see"}},{{"type":"image","data":"{}","mimeType":"image/png"}}],"timestamp":2}}}}"#,
        "QUFB".repeat((mb << 20) / 4)
    );
    let mut lines = vec![HEADER.to_owned(), big_user.clone(), image];
    let mut parent = "i1".to_owned();
    for t in 0..4 {
        let a = format!("a{t}");
        lines.push(format!(
            r#"{{"type":"message","id":"{a}","parentId":"{parent}","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"stopReason":"stop","timestamp":{}}}}}"#,
            10 + t
        ));
        let u = format!("q{t}");
        lines.push(user(&u, &a, "next"));
        parent = u;
    }
    lines.push(silent("z", &parent));
    let text = lines.join("\n") + "\n";
    drop(big_text);
    env.write("t.jsonl", text.as_bytes());
    let (code, v) = env.run_json(&[
        "strip-images",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--keep-turns",
        "1",
    ]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert_eq!(v["transcripts"][0]["imagesReplaced"], 1, "{v}");
    let got = fs::read(env.path("t.jsonl")).unwrap();
    let mut it = got.split(|&b| b == b'\n');
    assert_eq!(it.next().unwrap(), HEADER.as_bytes());
    assert_eq!(
        it.next().unwrap(),
        big_user.as_bytes(),
        "the big line changed"
    );
    let img = it.next().unwrap();
    assert!(img.len() < 1000, "the image line was not slimmed");
    assert!(got.len() < text.len() - (mb << 20) + 1000);
}

#[test]
fn symlinked_and_old_live_locks_are_never_taken() {
    let env = TestEnv::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"keep").unwrap();
    env.write("t.jsonl", prunable().as_bytes());
    symlink(&victim, env.path("t.jsonl.lock")).unwrap();
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (4, "locked"), "{v}");
    assert_eq!(fs::read(&victim).unwrap(), b"keep");
    assert!(
        fs::symlink_metadata(env.path("t.jsonl.lock"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    fs::remove_file(env.path("t.jsonl.lock")).unwrap();
    // A live holder past every age limit: reported as stale, still not taken.
    let old = format!(
        "{{\"pid\":{},\"createdAt\":\"2020-01-01T00:00:00.000Z\",\"maxHoldMs\":1000}}",
        std::process::id()
    );
    env.write("t.jsonl.lock", old.as_bytes());
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (4, "locked"), "{v}");
    let reason = v["transcripts"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("too-old") && reason.contains("not reclaimed"),
        "{reason}"
    );
    assert_eq!(fs::read_to_string(env.path("t.jsonl.lock")).unwrap(), old);
    assert_eq!(fs::read_to_string(env.path("t.jsonl")).unwrap(), prunable());
}

#[test]
fn wait_lock_proceeds_once_the_holder_lets_go() {
    let env = TestEnv::new();
    env.write("t.jsonl", prunable().as_bytes());
    let lock = env.path("t.jsonl.lock");
    let live = format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
        std::process::id(),
        clawkeeper::isotime::iso_now()
    );
    fs::write(&lock, &live).unwrap();
    let releaser = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(700));
            fs::remove_file(lock).unwrap();
        })
    };
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--wait-lock",
        "20s",
    ]);
    releaser.join().unwrap();
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert!(!lock.exists(), "our own lock is released");
}

#[test]
fn temps_of_killed_runs_are_removed_but_live_ones_kept() {
    let env = TestEnv::new();
    env.write("t.jsonl", prunable().as_bytes());
    let dead = format!("t.jsonl.{}.{UUID}.tmp", 2_147_483_000u32);
    let live = format!("t.jsonl.{}.{UUID}.tmp", std::process::id());
    let unrelated = format!("other.jsonl.{}.{UUID}.tmp", 2_147_483_000u32);
    for n in [&dead, &live, &unrelated] {
        env.write(n, b"half a file");
    }
    // A preview says so and removes nothing.
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        v["transcripts"][0]["notes"].to_string().contains(&dead),
        "{v}"
    );
    assert!(env.path(&dead).exists());
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert!(
        v["transcripts"][0]["notes"]
            .to_string()
            .contains("removed 1 temp"),
        "{v}"
    );
    assert!(!env.path(&dead).exists());
    assert!(env.path(&live).exists() && env.path(&unrelated).exists());
}

#[test]
fn mode_and_owner_are_kept_on_rewrite() {
    let env = TestEnv::new();
    for (name, mode) in [("a.jsonl", 0o600), ("b.jsonl", 0o640)] {
        let p = env.write(name, prunable().as_bytes());
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        let owned = std::os::unix::fs::chown(&p, Some(4242), Some(4243)).is_ok();
        let (code, v) = env.run_json(&["prune-noreply", "--transcript", name, "--enforce"]);
        assert_eq!((code, status(&v)), (0, "changed"), "{v}");
        let m = fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o7777, mode, "{name}");
        if owned {
            assert_eq!((m.uid(), m.gid()), (4242, 4243), "{name}");
        }
    }
}

#[test]
fn agents_that_moved_to_sqlite_are_not_written() {
    let env = TestEnv::new();
    let t = env.write("agents/main/sessions/t.jsonl", prunable().as_bytes());
    env.write(
        "agents/main/agent/openclaw-agent.sqlite",
        b"SQLite format 3\0",
    );
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "agents/main/sessions/t.jsonl",
        "--enforce",
    ]);
    assert_eq!((code, status(&v)), (3, "refused"), "{v}");
    assert!(
        v["transcripts"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("SQLite")
    );
    assert_eq!(fs::read_to_string(&t).unwrap(), prunable());
    assert!(!env.path("agents/main/sessions/t.jsonl.lock").exists());
    // A preview still runs, and says so.
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "agents/main/sessions/t.jsonl",
    ]);
    assert_eq!((code, status(&v)), (0, "would-change"), "{v}");
    assert!(
        v["transcripts"][0]["notes"].to_string().contains("SQLite"),
        "{v}"
    );
    // Relative to the sessions directory itself, too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_clawkeeper"))
        .args(["prune-noreply", "--transcript", "t.jsonl", "--enforce"])
        .current_dir(env.path("agents/main/sessions"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(fs::read_to_string(&t).unwrap(), prunable());
}

#[test]
fn a_role_less_message_does_not_crash_strip_images() {
    let env = TestEnv::new();
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"m\",\"parentId\":\"u1\"}}\n{}\n",
        user("u1", "x", "hi").replace(r#""parentId":"x""#, r#""parentId":null"#),
        user("u2", "m", "again"),
    );
    env.write("t.jsonl", text.as_bytes());
    let (code, v) = env.run_json(&["strip-images", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "unchanged"), "{v}");
    assert_eq!(fs::read_to_string(env.path("t.jsonl")).unwrap(), text);
}

#[test]
fn an_entry_with_invalid_utf8_is_never_rewritten() {
    let env = TestEnv::new();
    // n2 goes, so its child (whose text holds invalid UTF-8) would need a new parentId.
    let mut text = prunable()
        .replace(&user("u2", "n2", "again"), "")
        .into_bytes();
    text.pop();
    text.extend_from_slice(
        b"{\"type\":\"message\",\"id\":\"u2\",\"parentId\":\"n2\",\"message\":{\"role\":\"user\",\"content\":\"\xff\"}}\n",
    );
    text.extend_from_slice(user("u3", "u2", "end").as_bytes());
    text.push(b'\n');
    env.write("t.jsonl", &text);
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (3, "refused"), "{v}");
    assert!(
        v["transcripts"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid UTF-8")
    );
    assert_eq!(fs::read(env.path("t.jsonl")).unwrap(), text);
}
