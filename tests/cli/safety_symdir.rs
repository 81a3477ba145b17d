//! A sessions directory reached through a symlink (issue 21.4): `agents/<id>/sessions`, or
//! `agents/<id>`, or the whole state dir, moved to another disk with a symlink left behind.
//! Every writing command and `inspect` resolve the directory once, say so (stderr note,
//! `resolvedDirs` / `resolvedSessionsDir` in `--json`), and change nothing outside the
//! directory it resolved to; a symlink pointed elsewhere between runs is followed by the next
//! run, which says so, and the first directory is left alone.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::hostile::{tree, writers};
use crate::util::{TestEnv, stderr};

/// Which part of `state/agents/main/sessions` is a symlink to another disk.
#[derive(Debug, Clone, Copy)]
enum Link {
    Sessions,
    Agent,
    State,
}

/// Move part of the state dir to `disk/` and leave a symlink behind; returns the real
/// sessions directory.
fn relink(env: &TestEnv, link: Link, disk: &str) -> PathBuf {
    let root = env.root();
    let state = env.state();
    let (from, to) = match link {
        Link::Sessions => (
            state.join("agents/main/sessions"),
            root.join(disk).join("sessions"),
        ),
        Link::Agent => (state.join("agents/main"), root.join(disk).join("main")),
        Link::State => (state.clone(), root.join(disk).join("state")),
    };
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::rename(&from, &to).unwrap();
    symlink(&to, &from).unwrap();
    fs::canonicalize(env.sessions_dir("main")).unwrap()
}

/// Every node under the temp dir except those under `inside`.
fn outside(env: &TestEnv, inside: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let root = env.root();
    let rel = inside.strip_prefix(&root).unwrap().display().to_string();
    tree(&root)
        .into_iter()
        .filter(|(k, _)| k != &rel && !k.starts_with(&format!("{rel}/")))
        .collect()
}

fn store(keys: &[(&str, &str)]) -> String {
    let entries: Vec<String> = keys
        .iter()
        .map(|(k, id)| {
            format!("\"{k}\": {{\"sessionId\": \"{id}\", \"updatedAt\": 1772442000000}}")
        })
        .collect();
    format!("{{\n{}\n}}", entries.join(",\n"))
}

fn resolved_to(v: &Value) -> Vec<String> {
    v["resolvedDirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resolvedTo"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_writer_works_only_inside_the_resolved_directory() {
    for w in writers() {
        for link in [Link::Sessions, Link::Agent, Link::State] {
            let what = format!("{} {link:?}", w.name);
            let env = TestEnv::new();
            let d = env.sessions_dir("main");
            fs::write(d.join("s1.jsonl"), &w.input).unwrap();
            fs::write(d.join("sessions.json"), store(&[("agent:main:main", "s1")])).unwrap();
            let real = relink(&env, link, "disk");
            let before = outside(&env, &real);
            let mut args = w.args.clone();
            args.extend(["--enforce", "--json"]);
            let out = env.run(&args);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["transcripts"][0]["status"], "changed", "{what}: {v}");
            assert_eq!(resolved_to(&v), [real.display().to_string()], "{what}");
            assert!(
                stderr(&out).contains("clawkeeper: note:")
                    && stderr(&out).contains("resolved once"),
                "{what}: {}",
                stderr(&out)
            );
            assert_eq!(
                outside(&env, &real),
                before,
                "{what}: something outside changed"
            );
            if !w.store_only {
                assert_ne!(fs::read(real.join("s1.jsonl")).unwrap(), w.input, "{what}");
            }
            // --quiet drops the stderr note, not the report's.
            let mut quiet = w.args.clone();
            quiet.extend(["--quiet"]);
            let out = env.run(&quiet);
            assert!(!stderr(&out).contains("note:"), "{what}: {}", stderr(&out));
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("Note: "),
                "{what}"
            );
        }
    }
}

#[test]
fn cleanup_and_inspect_through_a_symlinked_directory() {
    for link in [Link::Sessions, Link::Agent, Link::State] {
        let what = format!("{link:?}");
        let env = TestEnv::new();
        let d = env.sessions_dir("main");
        for id in ["old1", "old2"] {
            fs::write(
                d.join(format!("{id}.jsonl")),
                format!("{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\"}}\n"),
            )
            .unwrap();
        }
        fs::write(
            d.join("sessions.json"),
            store(&[("agent:main:a", "old1"), ("agent:main:b", "old2")]),
        )
        .unwrap();
        let real = relink(&env, link, "disk");
        let before_all = tree(&env.root());
        let out = env.run(&["inspect", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(resolved_to(&v), [real.display().to_string()], "{what}");
        let out = env.run(&["cleanup", "--dry-run"]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Note: "),
            "{what}"
        );
        assert_eq!(
            tree(&env.root()),
            before_all,
            "{what}: a read changed something"
        );
        let before = outside(&env, &real);
        let out = env.run(&["cleanup", "--enforce", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["resolvedSessionsDir"],
            real.display().to_string(),
            "{what}: {v}"
        );
        assert_eq!(v["afterCount"], 0, "{what}: {v}");
        assert!(stderr(&out).contains("clawkeeper: note:"), "{what}");
        assert_eq!(
            outside(&env, &real),
            before,
            "{what}: something outside changed"
        );
        let names: Vec<String> = fs::read_dir(&real)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("old1.jsonl.deleted.")),
            "{what}: {names:?}"
        );
    }
}

#[test]
fn a_symlink_pointed_elsewhere_between_runs_is_followed_and_reported() {
    let env = TestEnv::new();
    let d = env.sessions_dir("main");
    let w = &writers()[0];
    fs::write(d.join("s1.jsonl"), &w.input).unwrap();
    fs::write(d.join("sessions.json"), store(&[("agent:main:main", "s1")])).unwrap();
    let first = relink(&env, Link::Sessions, "disk1");
    let out = env.run(&["prune-noreply", "--enforce", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resolved_to(&v), [first.display().to_string()]);
    // The operator moves the directory again: the symlink now leads to disk2.
    let second = env.root().join("disk2/sessions");
    fs::create_dir_all(&second).unwrap();
    fs::write(second.join("s1.jsonl"), &w.input).unwrap();
    fs::write(
        second.join("sessions.json"),
        store(&[("agent:main:main", "s1")]),
    )
    .unwrap();
    fs::remove_file(&d).unwrap();
    symlink(&second, &d).unwrap();
    let before = outside(&env, &second);
    let out = env.run(&["prune-noreply", "--enforce", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resolved_to(&v), [second.display().to_string()]);
    assert_eq!(v["transcripts"][0]["status"], "changed", "{v}");
    assert_eq!(
        outside(&env, &second),
        before,
        "the first directory was touched"
    );
}
