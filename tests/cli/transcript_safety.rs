//! Hostile inputs for the transcript commands: symlinks, held and stale locks, files that
//! must not be edited, unparsable lines, and the exit codes cron wrappers rely on.

use std::fs;
use std::os::unix::fs::symlink;

use serde_json::Value;

use crate::util::TestEnv;

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/w"}"#;

fn silent(id: &str, parent: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"NO_REPLY"}}],"stopReason":"stop","timestamp":1}}}}"#
    )
}

/// A transcript where `prune-noreply` removes exactly one entry (`n2`).
fn prunable() -> String {
    [
        HEADER.to_owned(),
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#.to_owned(),
        silent("n1", "u1"),
        silent("n2", "n1"),
        r#"{"type":"message","id":"u2","parentId":"n2","timestamp":"2026-03-01T00:00:02.000Z","message":{"role":"user","content":"again","timestamp":2}}"#.to_owned(),
    ]
    .join("\n")
        + "\n"
}

fn status(v: &Value) -> &str {
    v["transcripts"][0]["status"].as_str().unwrap()
}

#[test]
fn removes_and_reparents_and_drops_labels() {
    let env = TestEnv::new();
    let label = r#"{"type":"label","id":"l1","parentId":"u2","timestamp":"2026-03-01T00:00:03.000Z","targetId":"n2","label":"x"}"#;
    let tail = r#"{"type":"message","id":"a9","parentId":"l1","timestamp":"2026-03-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop","timestamp":3}}"#;
    let text = format!("{}{label}\n{tail}\n", prunable());
    let p = env.write("t.jsonl", text.as_bytes());
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["transcripts"][0]["entriesRemoved"], 2, "{v}");
    let got = fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[3],
        r#"{"type":"message","id":"u2","parentId":"n1","timestamp":"2026-03-01T00:00:02.000Z","message":{"role":"user","content":"again","timestamp":2}}"#
    );
    assert_eq!(
        lines[4],
        r#"{"type":"message","id":"a9","parentId":"u2","timestamp":"2026-03-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop","timestamp":3}}"#
    );
    assert!(!env.path("t.jsonl.lock").exists());
    assert_eq!(
        fs::read_dir(env.work()).unwrap().count(),
        1,
        "no temp or lock left"
    );
}

#[test]
fn symlinked_transcript_is_refused_and_its_target_untouched() {
    let env = TestEnv::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("real.jsonl");
    fs::write(&target, prunable()).unwrap();
    symlink(&target, env.path("t.jsonl")).unwrap();
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(status(&v), "damaged");
    assert_eq!(fs::read_to_string(&target).unwrap(), prunable());
}

#[test]
fn live_lock_skips_the_file_with_exit_4() {
    let env = TestEnv::new();
    let p = env.write("t.jsonl", prunable().as_bytes());
    let lock = format!(
        "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
        std::process::id(),
        clawkeeper::isotime::iso_now()
    );
    env.write("t.jsonl.lock", lock.as_bytes());
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--wait-lock",
        "300ms",
    ]);
    assert_eq!(code, 4, "{v}");
    assert_eq!(status(&v), "locked");
    assert!(
        v["transcripts"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("pid")
    );
    assert_eq!(fs::read_to_string(&p).unwrap(), prunable());
    assert_eq!(fs::read_to_string(env.path("t.jsonl.lock")).unwrap(), lock);
    // A preview needs no lock.
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--dry-run"]);
    assert_eq!((code, status(&v)), (0, "would-change"));
    let notes = v["transcripts"][0]["notes"].to_string();
    assert!(notes.contains("--enforce would skip it"), "{v}");
}

#[test]
fn lock_of_a_dead_process_is_reclaimed_and_released() {
    let env = TestEnv::new();
    env.write("t.jsonl", prunable().as_bytes());
    env.write(
        "t.jsonl.lock",
        b"{\n  \"pid\": 2147483000,\n  \"createdAt\": \"2026-01-01T00:00:00.000Z\"\n}\n",
    );
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert!(!env.path("t.jsonl.lock").exists());
}

#[test]
fn files_without_a_parsable_header_are_refused() {
    let env = TestEnv::new();
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(prunable().as_bytes());
    env.write("bom.jsonl", &bom);
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "bom.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "damaged"), "{v}");
    assert_eq!(
        v["transcripts"][0]["unparsableLines"],
        serde_json::json!([1])
    );
    assert_eq!(fs::read(env.path("bom.jsonl")).unwrap(), bom);
}

#[test]
fn v1_files_are_skipped() {
    let env = TestEnv::new();
    let v1 = prunable().replace("\"version\":3,", "");
    env.write("v1.jsonl", v1.as_bytes());
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "v1.jsonl", "--enforce"]);
    assert_eq!((code, status(&v)), (0, "skipped"), "{v}");
    assert_eq!(fs::read_to_string(env.path("v1.jsonl")).unwrap(), v1);
}

/// Files with `leaf` control records and side-appended entries are edited as the runtime
/// reads them: a record and what it names stay byte for byte, whatever the rule says.
#[test]
fn leaf_records_and_what_they_name_are_kept_and_side_appends_are_edited() {
    let env = TestEnv::new();
    let run = |name: &str, text: &str| {
        env.write(name, text.as_bytes());
        let (code, v) = env.run_json(&["prune-noreply", "--transcript", name, "--enforce"]);
        assert_eq!(code, 0, "{v}");
        (v, fs::read_to_string(env.path(name)).unwrap())
    };
    // A record as the runtime writes it after removing an interrupted turn's reply: n2 goes.
    let record = r#"{"type":"leaf","id":"lf","parentId":"u2","timestamp":"2026-03-01T00:00:05.000Z","targetId":"u2"}"#;
    let (v, after) = run("leaf.jsonl", &format!("{}{record}\n", prunable()));
    assert_eq!(status(&v), "changed", "{v}");
    assert_eq!(v["transcripts"][0]["entriesRemoved"], 1, "{v}");
    assert!(!after.contains(r#""id":"n2""#) && after.ends_with(&format!("{record}\n")));
    // Hostile: records that name the silent reply the rule removes (as target, as append
    // parent, as raw tail), and one the runtime rejects (it names an entry not read yet):
    // n2 stays each time, and the file is left as it was.
    for (k, record) in [
        r#"{"type":"leaf","id":"lf","parentId":"u2","timestamp":"2026-03-01T00:00:05.000Z","targetId":"n2"}"#,
        r#"{"type":"leaf","id":"lf","parentId":"u2","timestamp":"2026-03-01T00:00:05.000Z","targetId":"u2","appendParentId":"n2"}"#,
        r#"{"type":"leaf","id":"lf","parentId":"n2","timestamp":"2026-03-01T00:00:05.000Z","targetId":"u2"}"#,
        r#"{"type":"leaf","id":"lf","parentId":"n2","timestamp":"2026-03-01T00:00:05.000Z","targetId":"later"}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let text = format!("{}{record}\n", prunable());
        let (v, after) = run(&format!("named{k}.jsonl"), &text);
        assert_eq!(status(&v), "unchanged", "{k}: {v}");
        assert_eq!(after, text, "{k}");
        let notes = v["transcripts"][0]["notes"].to_string();
        let why = if k == 0 { "it is the leaf" } else { "a `leaf` record names it" };
        assert!(notes.contains(why), "{k}: {v}");
    }
    // A side-appended entry after the leaf: n2 goes, and the side entry stays beside u2.
    let side = r#"{"type":"custom","id":"sd","parentId":"u2","timestamp":"2026-03-01T00:00:05.000Z","customType":"x","appendMode":"side"}"#;
    let (v, after) = run("side.jsonl", &format!("{}{side}\n", prunable()));
    assert_eq!(status(&v), "changed", "{v}");
    assert!(!after.contains(r#""id":"n2""#) && after.ends_with(&format!("{side}\n")));
}

#[test]
fn unparsable_lines_are_kept_and_protect_what_they_mention() {
    let env = TestEnv::new();
    // n2 would be removed, but a line this tool cannot decode names it as its parent.
    let odd = r#"{"type":"custom","id":"c1","parentId":"n2","timestamp":"2026-03-01T00:00:05.000Z","customType":"x","data":"\udc00"}"#;
    let text = format!("{}{odd}\n{}\n{{\"torn", prunable(), silent("n3", "u2"));
    env.write("t.jsonl", text.as_bytes());
    let (code, v) = env.run_json(&["prune-noreply", "--transcript", "t.jsonl", "--enforce"]);
    assert_eq!(code, 0, "{v}");
    let t = &v["transcripts"][0];
    assert_eq!(t["status"], "unchanged", "{v}");
    assert_eq!(t["unparsableLines"], serde_json::json!([6, 8]));
    assert!(t["notes"][0].as_str().unwrap().contains("line 4"), "{v}");
    assert_eq!(fs::read_to_string(env.path("t.jsonl")).unwrap(), text);
    // The human report names file and line (an unchanged file is listed with --verbose).
    let out = env.run(&["prune-noreply", "--transcript", "t.jsonl", "--verbose"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("t.jsonl:6") && stdout.contains("t.jsonl:8"),
        "{stdout}"
    );
}

#[test]
fn preview_says_how_to_apply() {
    let env = TestEnv::new();
    env.write("t.jsonl", prunable().as_bytes());
    let out = env.run(&["prune-noreply", "--transcript", "t.jsonl"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--enforce"));
    assert_eq!(fs::read_to_string(env.path("t.jsonl")).unwrap(), prunable());
    let out = env.run(&["strip-images", "--transcript", "t.jsonl", "--session", "k"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("clawkeeper: "));
}

#[test]
fn wait_lock_takes_the_lock_once_it_is_released() {
    let env = TestEnv::new();
    env.write("t.jsonl", prunable().as_bytes());
    let lock = env.write(
        "t.jsonl.lock",
        format!(
            "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
            std::process::id(),
            clawkeeper::isotime::iso_now()
        )
        .as_bytes(),
    );
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        fs::remove_file(lock).unwrap();
    });
    let (code, v) = env.run_json(&[
        "prune-noreply",
        "--transcript",
        "t.jsonl",
        "--enforce",
        "--wait-lock",
        "10s",
    ]);
    release.join().unwrap();
    assert_eq!((code, status(&v)), (0, "changed"), "{v}");
    assert!(!env.path("t.jsonl.lock").exists());
}
