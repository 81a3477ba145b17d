//! prune-noreply and strip-images on generated transcripts, checked three ways: against an
//! independent model of the rules (which lines change and to exactly which bytes), against
//! the reference runtime (the rewritten file loads, same leaf, and its context is the old one
//! minus exactly the removed silent replies / with exactly the expected images replaced), and
//! for preview safety (`--dry-run` and the default preview leave the file untouched).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use clawkeeper::jsjson;
use serde_json::{Value, json};

use crate::generator;
use crate::model::{self, Model};
use crate::util::{self, TestEnv};

const PLACEHOLDER: &str = "[image data removed - already processed by model]";

#[derive(Clone, Copy, Debug)]
enum Op {
    Prune(usize),
    Strip(usize),
}

struct Case {
    seed: u64,
    op: Op,
    before: PathBuf,
    after: PathBuf,
    model: Model,
    /// Lines removed (prune) or changed (strip) per the model.
    removed: HashSet<usize>,
    stripped: Option<HashMap<usize, Vec<usize>>>,
    /// Lines whose media references the strip replaces, per the model.
    media: HashMap<usize, usize>,
}

fn run_case(env: &TestEnv, seed: u64, op: Op) -> Case {
    let generated = generator::generate(seed);
    let tag = format!("{seed}-{op:?}").replace(['(', ')'], "");
    let before = env.write(&format!("orig-{tag}.jsonl"), &generated.bytes);
    let after = env.write(&format!("work-{tag}.jsonl"), &generated.bytes);
    if let Some(dump) = std::env::var_os("CLAWKEEPER_TRANSCRIPT_DUMP") {
        std::fs::create_dir_all(&dump).unwrap();
        std::fs::copy(
            &before,
            std::path::Path::new(&dump).join(before.file_name().unwrap()),
        )
        .unwrap();
    }
    let file = after.to_str().unwrap().to_owned();
    let (cmd, flag, n) = match op {
        Op::Prune(k) => ("prune-noreply", "--keep", k),
        Op::Strip(k) => ("strip-images", "--keep-turns", k),
    };
    let n = n.to_string();
    // Preview and dry run write nothing.
    for mode in [None, Some("--dry-run")] {
        let mut args = vec![cmd, "--transcript", &file, flag, &n];
        args.extend(mode);
        let out = env.run(&args);
        assert!(
            out.status.success(),
            "seed {seed} {op:?} {mode:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read(&after).unwrap(),
            generated.bytes,
            "seed {seed}: {mode:?} wrote"
        );
    }
    let (code, report) = env.run_json(&[cmd, "--transcript", &file, flag, &n, "--enforce"]);
    let model = Model::new(&generated.bytes);
    let (removed, stripped) = match op {
        Op::Prune(k) => (model.prune_removals(k), None),
        Op::Strip(k) => (HashSet::new(), model.strip_targets(k)),
    };
    let t = &report["transcripts"][0];
    match (&op, &stripped) {
        (Op::Strip(_), None) => {
            assert_eq!(t["status"], "skipped", "seed {seed}: {report}");
            assert_eq!(std::fs::read(&after).unwrap(), generated.bytes);
        }
        (Op::Prune(_), _) => {
            assert_eq!(code, 0, "seed {seed}: {report}");
            assert_eq!(
                t["entriesRemoved"],
                json!(removed.len()),
                "seed {seed}: {report}"
            );
            let changed = !removed.is_empty();
            assert_eq!(
                t["status"],
                if changed { "changed" } else { "unchanged" },
                "seed {seed}"
            );
        }
        (Op::Strip(k), Some(s)) => {
            assert_eq!(code, 0, "seed {seed}: {report}");
            let n: usize = s.values().map(Vec::len).sum();
            assert_eq!(t["imagesReplaced"], json!(n), "seed {seed}: {report}");
            let refs: usize = model.media_targets(*k).unwrap().values().sum();
            assert_eq!(
                t["mediaReferencesReplaced"],
                json!(refs),
                "seed {seed}: {report}"
            );
        }
    }
    let media = match op {
        Op::Strip(k) => model.media_targets(k).unwrap_or_default(),
        Op::Prune(_) => HashMap::new(),
    };
    let unparsable: Vec<usize> = (0..model.lines.len())
        .filter(|&l| model.values[l].is_none() && !model.lines[l].trim().is_empty())
        .map(|l| l + 1)
        .collect();
    assert_eq!(t["unparsableLines"], json!(unparsable), "seed {seed}");
    assert_eq!(
        t["bytesAfter"],
        json!(std::fs::metadata(&after).unwrap().len())
    );
    Case {
        seed,
        op,
        before,
        after,
        model,
        removed,
        stripped,
        media,
    }
}

/// Every kept line is byte-identical, except the lines the model expects to change, which
/// must be exactly `JSON.stringify` of the expected value.
fn check_lines(c: &Case) {
    let new = String::from_utf8(std::fs::read(&c.after).unwrap()).unwrap();
    let new_lines: Vec<&str> = new
        .split_inclusive('\n')
        .map(|l| l.trim_end_matches('\n'))
        .collect();
    let m = &c.model;
    let removed_ids: HashSet<String> = c.removed.iter().map(|&l| m.id(l)).collect();
    let kept: Vec<usize> = (0..m.lines.len())
        .filter(|l| !c.removed.contains(l))
        .collect();
    assert_eq!(kept.len(), new_lines.len(), "seed {}: line count", c.seed);
    for (&old, new_line) in kept.iter().zip(&new_lines) {
        let orig = &m.lines[old];
        let mut expected: Option<Value> = None;
        if let Some(v) = &m.values[old] {
            let mut v2 = jsjson::parse(orig.as_bytes()).unwrap();
            let mut changed = false;
            if v["type"] != "session"
                && let Some(pid) = m.parent_id(old)
                && removed_ids.contains(&pid)
            {
                // Walk up through removed entries by their parent ids.
                let mut up: Option<String> = Some(pid);
                while let Some(id) = up.clone().filter(|id| removed_ids.contains(id)) {
                    up = m.parent_id(m.line_of[&id]);
                }
                v2["parentId"] = up.map_or(Value::Null, Value::String);
                changed = true;
            }
            if v["type"] == "compaction" && matches!(c.op, Op::Prune(_)) {
                // A compaction may be retargeted when the entry its firstKeptEntryId stands for
                // is removed (directly, or as the indexed ancestor of an unknown entry); the
                // exact retarget is checked through the runtime's context.
                let got: Value = serde_json::from_str(new_line.trim_end_matches('\r')).unwrap();
                if got["firstKeptEntryId"] != v["firstKeptEntryId"] {
                    v2["firstKeptEntryId"] = got["firstKeptEntryId"].clone();
                    changed = true;
                }
            }
            if let Some(imgs) = c.stripped.as_ref().and_then(|s| s.get(&old)) {
                for &i in imgs {
                    v2["message"]["content"][i] = json!({"type":"text","text":PLACEHOLDER});
                }
                changed = true;
            }
            if c.media.contains_key(&old) {
                model::scrub_media(&mut v2["message"]["content"]);
                changed = true;
            }
            if changed {
                expected = Some(v2);
            }
        }
        // Where the runtime would re-link an entry in the result (its parentId naming the
        // unknown entry just before it, see `Model::parent_id`), the tool names the entry's
        // nearest kept known ancestor instead; the runtime check below confirms the context.
        if *new_line != orig.as_str()
            && let Some(v) = &m.values[old]
            && v["type"] != "session"
            && v.get("id").is_some()
        {
            let mut alt = expected
                .clone()
                .unwrap_or_else(|| jsjson::parse(orig.as_bytes()).unwrap());
            alt["parentId"] = m
                .nearest_known_kept(old, &removed_ids)
                .map_or(Value::Null, Value::String);
            if jsjson::to_string_compact(&alt) == *new_line {
                continue;
            }
        }
        match expected {
            None => assert_eq!(
                orig,
                new_line,
                "seed {} {:?}: line {} changed",
                c.seed,
                c.op,
                old + 1
            ),
            Some(v) => assert_eq!(
                jsjson::to_string_compact(&v),
                *new_line,
                "seed {} {:?}: line {} rewritten wrongly",
                c.seed,
                c.op,
                old + 1
            ),
        }
    }
}

/// The context the runtime should see after the operation.
fn expected_context(c: &Case, old: &Value) -> Value {
    let m = &c.model;
    let msgs = old.as_array().unwrap();
    let ts_of = |lines: &mut dyn Iterator<Item = usize>| -> HashSet<String> {
        lines
            .map(|l| m.v(l)["message"]["timestamp"].to_string())
            .collect()
    };
    match c.op {
        Op::Prune(_) => {
            let gone = ts_of(&mut c.removed.iter().copied());
            Value::Array(
                msgs.iter()
                    .filter(|msg| {
                        !(msg["role"] == "assistant"
                            && gone.contains(&msg["timestamp"].to_string()))
                    })
                    .cloned()
                    .collect(),
            )
        }
        Op::Strip(_) => {
            let s = c.stripped.clone().unwrap_or_default();
            let by_ts: HashMap<String, Vec<usize>> = s
                .iter()
                .map(|(l, i)| (m.v(*l)["message"]["timestamp"].to_string(), i.clone()))
                .collect();
            let media_ts: HashSet<String> = c
                .media
                .keys()
                .map(|l| m.v(*l)["message"]["timestamp"].to_string())
                .collect();
            Value::Array(
                msgs.iter()
                    .map(|msg| {
                        let mut msg = msg.clone();
                        let role_ok = matches!(msg["role"].as_str(), Some("user" | "toolResult"));
                        if role_ok && let Some(imgs) = by_ts.get(&msg["timestamp"].to_string()) {
                            for &i in imgs {
                                msg["content"][i] = json!({"type":"text","text":PLACEHOLDER});
                            }
                        }
                        if role_ok && media_ts.contains(&msg["timestamp"].to_string()) {
                            model::scrub_media(&mut msg["content"]);
                        }
                        msg
                    })
                    .collect(),
            )
        }
    }
}

fn cases() -> Vec<(u64, Op)> {
    let n = util::case_count(8);
    // CLAWKEEPER_TRANSCRIPT_SEED=N runs only that seed (both operations).
    let only: Option<u64> = std::env::var("CLAWKEEPER_TRANSCRIPT_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    // CLAWKEEPER_TRANSCRIPT_FIRST=F starts the seeds at F (fresh cases, not the usual ones).
    let first: u64 = std::env::var("CLAWKEEPER_TRANSCRIPT_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // Seeds that once found a bug in a long sweep run every time (60226: a kept entry the
    // runtime would have re-linked to another branch).
    const FOUND: [u64; 1] = [60226];
    let seeds: Vec<u64> = match only {
        Some(seed) => vec![seed - 1],
        None => (first - 1..first - 1 + n)
            .chain(FOUND.iter().map(|s| s - 1))
            .collect(),
    };
    seeds
        .into_iter()
        .flat_map(|s| {
            let seed = 1 + s;
            [
                (seed, Op::Prune((s % 3) as usize)),
                (seed, Op::Strip([3, 1, 0, 2][s as usize % 4])),
            ]
        })
        .collect()
}

#[test]
fn generated_transcripts_match_the_model_and_load_in_the_runtime() {
    let env = TestEnv::new();
    let done: Vec<Case> = cases()
        .into_iter()
        .map(|(s, op)| run_case(&env, s, op))
        .collect();
    let mut interesting = (0, 0, 0);
    let with_media = done.iter().filter(|c| !c.media.is_empty()).count();
    for c in &done {
        check_lines(c);
        interesting.0 += usize::from(!c.removed.is_empty());
        interesting.1 += usize::from(c.stripped.as_ref().is_some_and(|s| !s.is_empty()));
        interesting.2 += usize::from(matches!(c.op, Op::Strip(_)) && c.stripped.is_none());
        // Idempotent: a second run changes nothing.
        let file = c.after.to_str().unwrap();
        let args: Vec<String> = match c.op {
            Op::Prune(k) => vec!["prune-noreply".into(), "--keep".into(), k.to_string()],
            Op::Strip(k) => vec!["strip-images".into(), "--keep-turns".into(), k.to_string()],
        };
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["--transcript", file, "--enforce"]);
        let (_, again) = env.run_json(&a);
        let st = &again["transcripts"][0]["status"];
        assert!(
            st == "unchanged" || st == "skipped",
            "seed {}: second run {again}",
            c.seed
        );
    }
    assert!(
        std::env::var_os("CLAWKEEPER_TRANSCRIPT_SEED").is_some()
            || (interesting.0 >= 2 && interesting.1 >= 2 && with_media >= 2),
        "generator too tame: {interesting:?}"
    );
    eprintln!(
        "{} cases; prune removed in {}, strip replaced in {} (media references in {with_media}), strip refused in {}",
        done.len(),
        interesting.0,
        interesting.1,
        interesting.2
    );
    let files: Vec<PathBuf> = done
        .iter()
        .flat_map(|c| [c.before.clone(), c.after.clone()])
        .collect();
    // CLAWKEEPER_TRANSCRIPT_DUMP=DIR keeps the files for a closer look.
    if let Some(dump) = std::env::var_os("CLAWKEEPER_TRANSCRIPT_DUMP") {
        std::fs::create_dir_all(&dump).unwrap();
        for f in &files {
            std::fs::copy(f, std::path::Path::new(&dump).join(f.file_name().unwrap())).unwrap();
        }
    }
    // The same cases in the reference of record (2026.7.1) and in the extended-stable
    // release (2026.7.35) that operators who stay on the JSON line run.
    if let Some(oracle) = util::oracle() {
        check_loads(&oracle, util::STABLE, &done, &files);
    }
    if let Some(oracle) = util::oracle_extended() {
        check_loads(&oracle, util::EXTENDED, &done, &files);
    }
}

/// Load every original and every rewrite (`files`, in pairs) with the runtime of `release`:
/// both load, the leaf stays, and the context is what the model expects.
fn check_loads(oracle: &util::Oracle, release: util::Release, done: &[Case], files: &[PathBuf]) {
    let v = release.version;
    let loaded = oracle.load_all(files);
    for (c, pair) in done.iter().zip(loaded.chunks(2)) {
        let (old, new) = (&pair[0], &pair[1]);
        assert!(
            old.ok,
            "{v}: seed {}: original does not load: {:?}",
            c.seed, old.error
        );
        assert!(
            new.ok,
            "{v}: seed {} {:?}: rewrite does not load: {:?}",
            c.seed, c.op, new.error
        );
        assert_eq!(
            old.leaf_id, new.leaf_id,
            "{v}: seed {} {:?}: leaf changed",
            c.seed, c.op
        );
        let want = expected_context(c, &old.messages);
        assert_eq!(
            new.messages.as_array().map(Vec::len),
            want.as_array().map(Vec::len),
            "{v}: seed {} {:?}: context length",
            c.seed,
            c.op
        );
        assert!(
            new.messages == want,
            "{v}: seed {} {:?}: context differs",
            c.seed,
            c.op
        );
    }
}
