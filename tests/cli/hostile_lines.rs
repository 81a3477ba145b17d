//! Hostile transcript contents and concurrent writers, for every writing command (see
//! `hostile` for the writers and the shared setup): odd lines that must survive or be refused
//! and reported, a BOM, appends racing the rewrite, symlinked stores and transcripts reached
//! through a store.

use std::fs;
use std::time::Duration;

use serde_json::Value;

use crate::hostile::{SESSIONS, STORE, Writer, enforce, setup, status, tree, writers};
use crate::util::TestEnv;

/// Append complete lines to `path` every millisecond until `stop`; returns what was appended.
fn appender(
    path: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        use std::io::Write;
        let mut written = Vec::new();
        let mut i = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let line = format!(
                r#"{{"type":"custom","id":"ap{i:05}","parentId":null,"timestamp":"2026-03-01T00:00:09.000Z","customType":"probe","data":{{"n":{i}}}}}"#
            );
            // O_APPEND through the name, as the runtime appends.
            if let Ok(mut f) = fs::OpenOptions::new().append(true).open(&path) {
                f.write_all(format!("{line}\n").as_bytes()).unwrap();
                written.push(line);
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        written
    })
}

#[test]
fn appends_racing_a_rewrite_are_never_lost() {
    let rounds = crate::util::case_count(3);
    for w in writers().into_iter().filter(|w| !w.store_only) {
        for round in 0..rounds {
            let env = TestEnv::new();
            setup(&env, &w);
            let t = env.path(&format!("{SESSIONS}/s1.jsonl"));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let handle = appender(t.clone(), stop.clone());
            std::thread::sleep(Duration::from_millis(3 * round));
            let (code, v) = enforce(&env, &w, false);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let appended = handle.join().unwrap();
            let text = String::from_utf8_lossy(&fs::read(&t).unwrap()).into_owned();
            let mut all = text.clone();
            // A tail that could not be carried over is saved beside the file and reported.
            for e in fs::read_dir(env.path(SESSIONS)).unwrap() {
                let e = e.unwrap();
                if e.file_name().to_string_lossy().contains(".tail-") {
                    all.push_str(&fs::read_to_string(e.path()).unwrap());
                    assert!(v.to_string().contains("tail"), "{}: {v}", w.name);
                }
            }
            for line in &appended {
                assert!(all.contains(line), "{} lost an append: {line}\n{v}", w.name);
            }
            assert!(
                matches!(
                    (code, status(&v)),
                    (0, "changed" | "unchanged") | (1 | 3, _)
                ),
                "{}: {v}",
                w.name
            );
            if status(&v) != "changed" {
                assert!(text.as_bytes().starts_with(&w.input), "{}: {v}", w.name);
            }
        }
    }
}

/// `input` with odd lines spliced in after its second line: CRLF endings, blank and
/// whitespace-only lines, invalid UTF-8, lone surrogate escapes, a line that is not JSON.
fn with_odd_lines(input: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let odd: Vec<Vec<u8>> = vec![
        b"\r".to_vec(),
        b"   \t".to_vec(),
        b"{\"type\":\"custom\",\"id\":\"c1\",\"customType\":\"x\",\"data\":\"\xff\xfe\xc0\"}"
            .to_vec(),
        br#"{"type":"custom","id":"c2","customType":"x","data":"\ud800 and \udfff"}"#.to_vec(),
        b"not json at all {".to_vec(),
    ];
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    assert_eq!(lines.pop(), Some(&b""[..]));
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        out.extend_from_slice(l);
        // CRLF on the header and the first entry.
        out.extend_from_slice(if i < 2 { b"\r\n" } else { b"\n" });
        if i == 1 {
            out.extend_from_slice(b"\n");
            for o in &odd {
                out.extend_from_slice(o);
                out.push(b'\n');
            }
        }
    }
    (out, odd)
}

#[test]
fn every_writer_keeps_odd_lines_or_refuses_and_reports_them() {
    for w in writers() {
        let env = TestEnv::new();
        let (text, odd) = with_odd_lines(&w.input);
        let w = Writer {
            input: text.clone(),
            ..w
        };
        setup(&env, &w);
        let before = tree(&env.work());
        let (code, v) = enforce(&env, &w, false);
        let t = &v["transcripts"][0];
        // The lines this tool cannot decode are reported by number, whatever it did.
        let unparsable: Vec<u64> = t["unparsableLines"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        assert!(
            unparsable.contains(&7) && unparsable.contains(&8),
            "{}: {v}",
            w.name
        );
        let now = fs::read(env.path(&format!("{SESSIONS}/s1.jsonl"))).unwrap();
        match (code, status(&v)) {
            (0, "changed") => {
                for o in &odd {
                    let mut line = o.clone();
                    line.push(b'\n');
                    assert!(
                        now.windows(line.len()).any(|win| win == line.as_slice()),
                        "{}: lost {:?}",
                        w.name,
                        String::from_utf8_lossy(o)
                    );
                }
            }
            (3, "refused") => assert_eq!(tree(&env.work()), before, "{}", w.name),
            other => panic!("{}: {other:?} {v}", w.name),
        }
        assert_eq!(
            w.store_only,
            now == text,
            "{}: the old file must stay exactly when a successor is written",
            w.name
        );
    }
}

#[test]
fn every_writer_skips_a_transcript_with_a_bom_as_damaged() {
    for w in writers() {
        let env = TestEnv::new();
        let mut text = b"\xef\xbb\xbf".to_vec();
        text.extend_from_slice(&w.input);
        let w = Writer { input: text, ..w };
        setup(&env, &w);
        let before = tree(&env.work());
        let (code, v) = enforce(&env, &w, false);
        assert_eq!((code, status(&v)), (0, "damaged"), "{}: {v}", w.name);
        assert_eq!(tree(&env.work()), before, "{}", w.name);
    }
}

#[test]
fn store_targets_never_write_through_symlinks_or_outside_the_sessions_dir() {
    for w in writers() {
        // A symlinked sessions.json: read for the targets, but never written through.
        let env = TestEnv::new();
        setup(&env, &w);
        fs::rename(env.path(STORE), env.path("real-sessions.json")).unwrap();
        std::os::unix::fs::symlink(env.path("real-sessions.json"), env.path(STORE)).unwrap();
        let before = fs::read(env.path("real-sessions.json")).unwrap();
        let (code, v) = enforce(&env, &w, true);
        assert!(
            fs::symlink_metadata(env.path(STORE))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{}: the symlink was replaced",
            w.name
        );
        assert_eq!(fs::read(env.path("real-sessions.json")).unwrap(), before);
        if w.store_only {
            assert_eq!(code, 3, "{}: {v}", w.name);
        }
        // Entries whose sessionFile leads outside (`..`, absolute, a symlink): skipped, the
        // files outside untouched.
        let env = TestEnv::new();
        setup(&env, &w);
        let outside = env.write("outside/o.jsonl", &w.input);
        env.write("outside/dotdot.jsonl", &w.input);
        std::os::unix::fs::symlink(&outside, env.path(&format!("{SESSIONS}/link.jsonl"))).unwrap();
        env.write(
            STORE,
            format!(
                r#"{{
  "agent:main:abs": {{ "sessionId": "a", "sessionFile": "{}", "updatedAt": 3 }},
  "agent:main:dotdot": {{ "sessionId": "b", "sessionFile": "../../../outside/dotdot.jsonl", "updatedAt": 2 }},
  "agent:main:link": {{ "sessionId": "c", "sessionFile": "link.jsonl", "updatedAt": 1 }}
}}"#,
                outside.display()
            )
            .as_bytes(),
        );
        let before = tree(&env.path("outside"));
        let mut args = w.args.clone();
        args.extend(["--store", STORE, "--enforce"]);
        let (code, v) = env.run_json(&args);
        assert!(matches!(code, 0 | 3), "{}: {v}", w.name);
        for t in v["transcripts"].as_array().unwrap() {
            assert!(
                matches!(t["status"].as_str(), Some("skipped" | "refused")),
                "{}: {t}",
                w.name
            );
        }
        assert_eq!(tree(&env.path("outside")), before, "{}", w.name);
        assert!(
            fs::symlink_metadata(env.path(&format!("{SESSIONS}/link.jsonl")))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}

#[test]
fn store_targets_that_are_fifos_or_directories_are_refused_without_blocking() {
    for w in writers() {
        let env = TestEnv::new();
        setup(&env, &w);
        let t = env.path(&format!("{SESSIONS}/s1.jsonl"));
        fs::remove_file(&t).unwrap();
        let c = std::ffi::CString::new(t.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        fs::create_dir(env.path(&format!("{SESSIONS}/s2.jsonl"))).unwrap();
        env.write(
            STORE,
            br#"{"agent:main:main": {"sessionId": "s1", "updatedAt": 2}, "agent:main:b": {"sessionId": "s2", "updatedAt": 1}}"#,
        );
        let before = tree(&env.work());
        let mut args = w.args.clone();
        args.extend(["--store", STORE, "--enforce"]);
        let (code, v) = env.run_json(&args);
        assert_eq!(code, 0, "{}: {v}", w.name);
        for t in v["transcripts"].as_array().unwrap() {
            assert_eq!(t["status"], "damaged", "{}: {t}", w.name);
        }
        assert_eq!(tree(&env.work()), before, "{}", w.name);
    }
}
