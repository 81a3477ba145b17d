//! `leaf` control records and side-appended entries, against the reference runtime.
//!
//! Newer runtimes write a `leaf` record when they rewrite a file whose last entry is not the
//! leaf: after removing the reply of an interrupted turn or of a mid-turn context overflow,
//! the cache-ttl marker that followed the reply stays and the leaf moves above it. Two checks:
//!
//! - **The loader.** Generated transcripts with records of every shape (targets read before,
//!   after, through opaque entries, null, missing; `appendParentId` absent, null, elsewhere;
//!   side mode; records the runtime rejects, and lines it does not read as records), links,
//!   side-appended entries, compactions whose `firstKeptEntryId` names a record, and
//!   `parentId`s naming records: the tool's tree gives the runtime's leaf, active branch and
//!   context, in 2026.7.1 and 2026.7.35.
//! - **The commands.** Sessions written by the runtime's own `SessionManager` through both
//!   events go through `prune-noreply`, `strip-images`, `prune-cache-ttl` and `compact`: each
//!   rewrite changes something, loads with the same leaf (a compaction: the new one), keeps
//!   exactly the context the command means to keep, and the runtime appends to it; `inspect`
//!   predicted what each frees.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use clawkeeper::transcript::tree::{self, ContextItem, Tree};
use clawkeeper::transcript::{EntryType, Index};

use crate::generator::Rng;
use crate::util::{self, Oracle, TestEnv};

const TS: &str = "2026-03-01T00:00:00.000Z";

/// What the runtime (or the tool) sees in one file.
#[derive(Debug, PartialEq, Eq)]
struct View {
    leaf: Option<String>,
    branch: Vec<String>,
    context: Vec<String>,
}

/// A generated transcript: every line that can put a message in context carries its own id
/// as a `«id»` marker, so contexts compare as lists of ids.
fn generate(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut lines = vec![format!(
        r#"{{"type":"session","version":3,"id":"s{seed}","timestamp":"{TS}","cwd":"/w"}}"#
    )];
    let mut ids: Vec<String> = Vec::new();
    let mut records: Vec<String> = Vec::new();
    let n = 6 + rng.below(30);
    for k in 0..n {
        let id = format!("e{k}");
        let last = ids.last().cloned();
        let earlier = |rng: &mut Rng| -> Option<String> {
            (!ids.is_empty()).then(|| ids[rng.below(ids.len())].clone())
        };
        let any_ref = |rng: &mut Rng| -> Value {
            match rng.below(10) {
                0 => Value::Null,
                1 => json!(format!("e{}", k + 1 + rng.below(3))),
                2 => json!("missing"),
                3 if !records.is_empty() => json!(records[rng.below(records.len())]),
                _ => earlier(rng).map_or(Value::Null, Value::from),
            }
        };
        // The parent as the runtime writes it (the last line an append hangs below), or not.
        let parent: Option<Value> = match rng.below(14) {
            0 => None,
            1 => Some(Value::Null),
            2 | 3 => Some(any_ref(&mut rng)),
            _ => Some(last.clone().map_or(Value::Null, Value::from)),
        };
        let mut v = json!({"type": "message", "id": id});
        if let Some(p) = &parent {
            v["parentId"] = p.clone();
        }
        v["timestamp"] = json!(TS);
        let mark = format!("«{id}»");
        match rng.below(16) {
            0..=2 => {
                v["message"] = json!({"role": "user", "content": mark, "timestamp": k});
            }
            3..=5 => {
                v["message"] = json!({"role": "assistant", "content": [{"type": "text", "text": mark}], "stopReason": "stop", "timestamp": k});
            }
            6 => {
                v["type"] = json!("compaction");
                let fk = match rng.below(3) {
                    0 if !records.is_empty() => records[rng.below(records.len())].clone(),
                    _ => earlier(&mut rng).unwrap_or_else(|| "x".into()),
                };
                v["firstKeptEntryId"] = json!(fk);
                v["summary"] = json!(mark);
                v["tokensBefore"] = json!(100);
            }
            7 => {
                v["type"] = json!("custom");
                v["customType"] = json!("openclaw.cache-ttl");
                v["data"] = json!({"timestamp": 1, "provider": "p", "modelId": "m"});
                if rng.chance(30) {
                    v["appendMode"] = json!("side");
                }
            }
            8 => {
                // Side-appended message: beside the leaf, not on its branch.
                v["message"] = json!({"role": "user", "content": mark, "timestamp": k});
                v["appendMode"] = json!("side");
            }
            9 => {
                v["type"] = json!("mystery");
                if rng.chance(20) {
                    v.as_object_mut().unwrap().remove("parentId");
                }
            }
            10 => {
                v["type"] = json!("branch_summary");
                v["summary"] = json!(mark);
                v["fromId"] = json!("x");
            }
            _ => {
                // A `leaf` record, as the runtime writes it or bent out of shape.
                v = json!({"type": "leaf", "id": id});
                v["parentId"] = match rng.below(12) {
                    0 => json!(7),
                    1 => Value::Null,
                    _ => last.clone().map_or(Value::Null, Value::from),
                };
                if rng.chance(5) {
                    v.as_object_mut().unwrap().remove("parentId");
                }
                v["timestamp"] = json!(TS);
                match rng.below(14) {
                    0 => {}
                    1 => v["targetId"] = json!(3),
                    _ => v["targetId"] = any_ref(&mut rng),
                }
                match rng.below(6) {
                    0 => v["appendParentId"] = any_ref(&mut rng),
                    1 => v["appendParentId"] = json!(false),
                    _ => {}
                }
                match rng.below(8) {
                    0 => v["appendMode"] = json!("side"),
                    1 => v["appendMode"] = json!("active"),
                    _ => {}
                }
                records.push(id.clone());
            }
        }
        lines.push(v.to_string());
        ids.push(id);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out.into_bytes()
}

/// The tool's view: its tree's leaf, the indexed entries of the active path, and the context.
fn ours(bytes: &[u8]) -> View {
    let index = Index::from_reader(bytes).unwrap();
    let tree = Tree::build(&index);
    let id = |i: usize| index.entries[i].id.as_deref().unwrap().to_owned();
    let path = tree.active_path();
    let context = tree::context_of(&index, &tree, &path)
        .into_iter()
        .map(|c| match c {
            ContextItem::Entry(_) => id(c.at()),
            ContextItem::CompactionSummary(_) => format!("summary:{}", id(c.at())),
        })
        .collect();
    View {
        leaf: tree.leaf.map(id),
        branch: path
            .into_iter()
            .filter(|&i| index.entries[i].kind.is_runtime_indexed())
            .map(id)
            .collect(),
        context,
    }
}

/// The runtime's view of each file (loaded from copies).
fn theirs(oracle: &Oracle, files: &[PathBuf]) -> Vec<View> {
    let (_scratch, copies) = crate::util::scratch_copies(files);
    let mut args = vec![PathBuf::from("tree")];
    args.extend(copies);
    let out = oracle.run_script("leaf-records.mjs", &args);
    let views: Vec<View> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("@@tree "))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["ok"], true, "the runtime does not load {}", v["file"]);
            let strings = |v: &Value| -> Vec<String> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect()
            };
            View {
                leaf: v["leafId"].as_str().map(str::to_owned),
                branch: strings(&v["branch"]),
                context: strings(&v["context"]),
            }
        })
        .collect();
    assert_eq!(views.len(), files.len(), "runtime batch failed");
    views
}

fn releases() -> Vec<(util::Release, Oracle)> {
    [util::STABLE, util::EXTENDED]
        .into_iter()
        .filter_map(|r| util::oracle_of(r).map(|o| (r, o)))
        .collect()
}

#[test]
fn the_tree_reads_leaf_records_and_side_appends_as_the_runtime_loader_does() {
    let env = TestEnv::new();
    let cases = util::case_count(120);
    let mut files = Vec::new();
    let mut accepted = 0;
    for seed in 0..cases {
        let bytes = generate(seed);
        let index = Index::from_reader(&bytes[..]).unwrap();
        let tree = Tree::build(&index);
        accepted += (0..index.entries.len())
            .filter(|&i| tree.leaf_effect(i).is_some())
            .count();
        files.push(env.write(&format!("g{seed}.jsonl"), &bytes));
    }
    assert!(
        accepted > cases as usize,
        "too few accepted records: {accepted}"
    );
    for (release, oracle) in releases() {
        for (seed, (file, want)) in files.iter().zip(theirs(&oracle, &files)).enumerate() {
            let bytes = std::fs::read(file).unwrap();
            assert_eq!(
                ours(&bytes),
                want,
                "{} seed {seed}:\n{}",
                release.version,
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}

/// A runtime-written session with `leaf` records, in `dir`.
fn runtime_session(oracle: &Oracle, dir: &Path, seed: u64) -> PathBuf {
    let file = dir.join(format!("w{seed}.jsonl"));
    let out = oracle.run_script(
        "leaf-records.mjs",
        [
            "write".as_ref(),
            file.as_os_str(),
            seed.to_string().as_ref(),
        ],
    );
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert!(v["leafRecords"].as_u64().unwrap() > 0, "seed {seed}: {v}");
    file
}

#[test]
fn every_command_edits_sessions_the_runtime_wrote_after_interrupted_turns_and_overflows() {
    let Some(oracle) = util::oracle() else {
        return;
    };
    let env = TestEnv::new();
    let commands: [&[&str]; 4] = [
        &["prune-noreply"],
        &["strip-images"],
        &["prune-cache-ttl"],
        &["compact", "--keep-recent-tokens", "40", "--min-tokens", "0"],
    ];
    let inspect_keys = ["prune-noreply", "strip-images", "prune-cache-ttl"];
    let seeds = util::case_count(6);
    let mut originals = Vec::new();
    let mut rewrites = Vec::new();
    for seed in 1..=seeds {
        let orig = runtime_session(&oracle, env.dir(), seed);
        let (_, inspected) = env.run_json(&["inspect", "--transcript", orig.to_str().unwrap()]);
        let reclaimable = &inspected["transcript"]["reclaimable"];
        for (n, cmd) in commands.iter().enumerate() {
            let work = env.dir().join(format!("w{seed}-{}.jsonl", cmd[0]));
            std::fs::copy(&orig, &work).unwrap();
            let before = std::fs::metadata(&work).unwrap().len();
            let mut args = cmd.to_vec();
            args.extend(["--transcript", work.to_str().unwrap(), "--enforce"]);
            let (code, report) = env.run_json(&args);
            let t = &report["transcripts"][0];
            assert_eq!(code, 0, "seed {seed} {}: {report}", cmd[0]);
            assert_eq!(t["status"], "changed", "seed {seed} {}: {report}", cmd[0]);
            if n < 3 {
                // (Signed: replacing short media references with the runtime's longer marker
                // can grow a file that holds no image to strip.)
                let freed = before as i64 - std::fs::metadata(&work).unwrap().len() as i64;
                assert_eq!(
                    reclaimable[inspect_keys[n]],
                    json!(freed),
                    "seed {seed}: inspect's {} figure",
                    cmd[0]
                );
            }
            originals.push(orig.clone());
            rewrites.push(work);
        }
    }
    for (release, oracle) in releases() {
        let v = release.version;
        let old = theirs(&oracle, &originals);
        let new = theirs(&oracle, &rewrites);
        for (k, ((o, n), file)) in old.iter().zip(&new).zip(&rewrites).enumerate() {
            let cmd = commands[k % commands.len()][0];
            let bytes = std::fs::read(file).unwrap();
            // (Contexts of runtime-written files are keyed by markers, not ids.)
            let mine = ours(&bytes);
            assert_eq!(
                (&mine.leaf, &mine.branch),
                (&n.leaf, &n.branch),
                "{v} {file:?}"
            );
            let index = Index::from_reader(&bytes[..]).unwrap();
            assert!(
                index.entries.iter().any(|e| e.kind == EntryType::Leaf),
                "{file:?}: the records stay"
            );
            let kept: HashSet<&str> = index
                .entries
                .iter()
                .filter_map(|e| e.id.as_deref())
                .collect();
            match cmd {
                "compact" => {
                    let last = index.entries.last().unwrap();
                    assert_eq!(last.kind, EntryType::Compaction);
                    assert_eq!(n.leaf.as_deref(), last.id.as_deref(), "{v} {file:?}");
                    assert!(n.context[0].starts_with("summary:"), "{v} {file:?}");
                    assert!(
                        o.context.ends_with(&n.context[1..]),
                        "{v} {file:?}: the kept tail"
                    );
                }
                _ => {
                    assert_eq!(n.leaf, o.leaf, "{v} {file:?}: the leaf");
                    // The context is the old one minus exactly what the command removed.
                    // (A silent reply's key is its message as the runtime wrote it: it went
                    // with its line or stayed with it.)
                    let text = String::from_utf8_lossy(&bytes);
                    let want: Vec<String> = o
                        .context
                        .iter()
                        .filter(|c| !c.contains("NO_REPLY") || text.contains(c.as_str()))
                        .cloned()
                        .collect();
                    assert_eq!(n.context, want, "{v} {file:?}: the context");
                    let branch: Vec<&String> = o
                        .branch
                        .iter()
                        .filter(|b| kept.contains(b.as_str()))
                        .collect();
                    assert_eq!(n.branch.iter().collect::<Vec<_>>(), branch, "{v} {file:?}");
                }
            }
        }
        // The runtime appends to every rewrite, below its leaf (on copies).
        let scratch = tempfile::tempdir().unwrap();
        let copies: Vec<PathBuf> = rewrites
            .iter()
            .enumerate()
            .map(|(k, file)| {
                let copy = scratch.path().join(format!("{k}.jsonl"));
                std::fs::copy(file, &copy).unwrap();
                copy
            })
            .collect();
        let mut args = vec![PathBuf::from("append")];
        args.extend(copies.iter().cloned());
        let leaf_ids: Vec<String> =
            serde_json::from_slice(&oracle.run_script("leaf-records.mjs", &args)).unwrap();
        let after = theirs(&oracle, &copies);
        for (((file, n), appended), leaf_id) in rewrites.iter().zip(&new).zip(&after).zip(&leaf_ids)
        {
            assert_eq!(appended.leaf.as_ref(), Some(leaf_id), "{v} {file:?}");
            let (tip, above) = appended.branch.split_last().unwrap();
            assert_eq!((tip, above), (leaf_id, &n.branch[..]), "{v} {file:?}");
        }
    }
}

/// `compact --successor` on a session with `leaf` records writes what the runtime's own
/// rotation (`rotateTranscriptFileAfterCompaction`) writes from the same session compacted in
/// place (apart from the new compaction's id and time).
#[test]
fn the_successor_of_a_session_with_leaf_records_is_the_runtimes_rotation() {
    let Some(oracle) = util::oracle() else {
        return;
    };
    let env = TestEnv::new();
    let stamp = regex::Regex::new(r" at [0-9T:.-]+Z;").unwrap();
    let compact = [
        "compact",
        "--keep-recent-tokens",
        "40",
        "--min-tokens",
        "0",
        "--enforce",
    ];
    for seed in 1..=util::case_count(3) {
        let orig = runtime_session(&oracle, env.dir(), seed);
        let sessions = env.sessions_dir("main");
        std::fs::create_dir_all(&sessions).unwrap();
        std::fs::copy(&orig, sessions.join("s1.jsonl")).unwrap();
        env.write_store(r#"{"agent:main:main": {"sessionId": "s1", "updatedAt": 1772442000000}}"#);
        let store = env.store_path();
        let mut args = compact.to_vec();
        args.extend(["--store", store.to_str().unwrap(), "--successor"]);
        let (code, report) = env.run_json(&args);
        assert_eq!(code, 0, "seed {seed}: {report}");
        let store_text = std::fs::read_to_string(&store).unwrap();
        let store_json: Value = serde_json::from_str(&store_text).unwrap();
        let successor = store_json["agent:main:main"]["sessionFile"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let id = store_json["agent:main:main"]["sessionId"].as_str().unwrap();
                std::fs::read_dir(&sessions)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .find(|p| p.to_string_lossy().contains(id))
                    .unwrap()
            });
        // The runtime's rotation of the same session compacted in place.
        let in_place = env.dir().join(format!("in-place-{seed}.jsonl"));
        std::fs::copy(&orig, &in_place).unwrap();
        let mut args = compact.to_vec();
        args.extend(["--transcript", in_place.to_str().unwrap()]);
        assert_eq!(env.run_json(&args).0, 0);
        let out = oracle.run_script("rotate-successor.mjs", [&in_place]);
        let rotated: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(rotated["rotated"], true, "seed {seed}: {rotated}");
        let entries = |p: &Path| -> Vec<Value> {
            let text = std::fs::read_to_string(p).unwrap();
            let lines: Vec<Value> = text
                .lines()
                .skip(1)
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let compaction = lines
                .iter()
                .rev()
                .find(|e| e["type"] == "compaction")
                .unwrap()["id"]
                .clone();
            lines
                .into_iter()
                .map(|mut e| {
                    for k in ["id", "parentId", "firstKeptEntryId"] {
                        if e[k] == compaction {
                            e[k] = json!("C");
                        }
                    }
                    if e["id"] == "C" {
                        e["timestamp"] = json!(null);
                        let s = e["summary"].as_str().unwrap().to_owned();
                        e["summary"] = json!(stamp.replace(&s, " at T;"));
                    }
                    e
                })
                .collect()
        };
        let want = entries(Path::new(rotated["sessionFile"].as_str().unwrap()));
        assert_eq!(entries(&successor), want, "seed {seed}");
    }
}
