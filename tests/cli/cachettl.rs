//! `prune-cache-ttl` against the reference runtime. Generated transcripts (several providers
//! and models, case and whitespace variants of one key, branches, compactions whose
//! `firstKeptEntryId` names a marker, labels on markers, markers the runtime never reads,
//! tool calls, unparsable lines) and transcripts the runtime writes itself (its
//! SessionManager, with markers from its own `appendAttemptCacheTtlIfNeeded`) go through
//! `prune-cache-ttl --enforce`; then, in 2026.7.1 and in the extended-stable 2026.7.35, each
//! rewrite loads with the same leaf and context as its original, the runtime's own
//! `readLastCacheTtlTimestamp` reads the same timestamp for every provider and model (in the
//! file, and in a fork of every branch tip; a fork at other entries finds one exactly where it
//! found one before), and the runtime appends to the rewrite. Without the runtime, the
//! structural checks still run: only readable, superseded markers go, every other line is kept
//! (byte for byte, or with only its `parentId`/`firstKeptEntryId` moved to a kept entry),
//! a second run changes nothing, and `inspect` predicted the bytes freed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use clawkeeper::cachettl::read_marker;

use crate::generator::Rng;
use crate::util::{self, Oracle, TestEnv};

const MODELS: &[(Option<&str>, &str)] = &[
    (Some("anthropic"), "claude-opus-4-5"),
    (Some(" Anthropic"), "Claude-Opus-4-5"),
    (Some("anthropic"), "claude-sonnet-4-5"),
    (Some("openrouter"), "anthropic/claude-opus-4-5"),
    (Some("google"), "gemini-2.5-pro"),
    (None, "claude-opus-4-5"),
    (Some("Ünïcode"), "módel"),
];

/// Markers the runtime passes over (no usable timestamp, no object data), or that this tool
/// does not read as markers (a provider that is a number, another customType).
const ODD: &[&str] = &[
    r#""customType":"openclaw.cache-ttl","data":{"timestamp":0,"provider":"anthropic","modelId":"claude-opus-4-5"}"#,
    r#""customType":"openclaw.cache-ttl","data":{"timestamp":"1772323200000","provider":"anthropic","modelId":"claude-opus-4-5"}"#,
    r#""customType":"openclaw.cache-ttl","data":[1772323200000,"anthropic","claude-opus-4-5"]"#,
    r#""customType":"openclaw.cache-ttl""#,
    r#""customType":"openclaw.cache-ttl","data":{"timestamp":1772323200000,"provider":7,"modelId":"claude-opus-4-5"}"#,
    r#""customType":"openclaw.cache-ttl","data":{"timestamp":1e400,"provider":"anthropic"}"#,
    r#""customType":"openclaw.cache-ttl","data":{"timestamp":1772323200000,"provider":"anthropic","provider":"google","modelId":"gemini-2.5-pro"}"#,
    r#""customType":"OpenClaw.cache-ttl","data":{"timestamp":1772323200000,"provider":"anthropic","modelId":"claude-opus-4-5"}"#,
];

struct Gen {
    rng: Rng,
    lines: Vec<String>,
    parents: HashMap<String, Option<String>>,
    markers: Vec<String>,
    n: usize,
    ms: i64,
    leaf: Option<String>,
}

impl Gen {
    fn iso(&self) -> String {
        let s = self.ms / 1000;
        format!(
            "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + (s / 86_400) % 28,
            (s / 3600) % 24,
            (s / 60) % 60,
            s % 60,
            self.ms % 1000
        )
    }

    /// Append an entry (the fields after `type`, `id`, `parentId`) below the leaf.
    fn push(&mut self, kind: &str, fields: &str) -> String {
        self.n += 1;
        self.ms += 1000 + self.rng.below(90_000) as i64;
        let id = format!("e{:03}{}", self.n, ["", "x", "ab"][self.rng.below(3)]);
        let parent = self
            .leaf
            .as_ref()
            .map_or("null".to_owned(), |p| format!("\"{p}\""));
        let ts = self.iso();
        let comma = if fields.is_empty() { "" } else { "," };
        self.lines.push(format!(
            r#"{{"type":"{kind}","id":"{id}","parentId":{parent},"timestamp":"{ts}"{comma}{fields}}}"#
        ));
        self.parents.insert(id.clone(), self.leaf.clone());
        self.leaf = Some(id.clone());
        id
    }

    fn path(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = self.leaf.clone();
        while let Some(c) = cur {
            cur = self.parents[&c].clone();
            out.push(c);
        }
        out.reverse();
        out
    }

    fn message(&mut self, m: Value) -> String {
        self.push("message", &format!("\"message\":{m}"))
    }

    fn marker(&mut self, model: (Option<&str>, &str)) -> String {
        let mut data = json!({"timestamp": 1_772_323_200_000i64 + self.ms});
        if let Some(p) = model.0 {
            data["provider"] = json!(p);
        }
        data["modelId"] = json!(model.1);
        let id = self.push(
            "custom",
            &format!(r#""customType":"openclaw.cache-ttl","data":{data}"#),
        );
        self.markers.push(id.clone());
        id
    }
}

/// A transcript of `turns` attempts under `seed`.
pub fn generate(seed: u64, turns: usize) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        lines: vec![
            r#"{"type":"session","version":3,"id":"cachettl","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/tmp"}"#
                .to_owned(),
        ],
        parents: HashMap::new(),
        markers: Vec::new(),
        n: 0,
        ms: 0,
        leaf: None,
    };
    let mut model = MODELS[0];
    for t in 0..turns {
        if t > 3 && g.rng.chance(10) {
            // A new branch from an earlier entry of the current path.
            let path = g.path();
            g.leaf = Some(path[g.rng.below(path.len())].clone());
        }
        if g.rng.chance(15) {
            model = *g.rng.pick(MODELS);
            g.push(
                "model_change",
                &format!(
                    r#""provider":{},"modelId":"{}""#,
                    json!(model.0.unwrap_or("anthropic")),
                    model.1
                ),
            );
        }
        let now = 1_772_323_200_000i64 + g.ms;
        g.message(json!({"role":"user","content":format!("turn {t}"),"timestamp":now}));
        let call = g.rng.chance(20);
        let content = if call {
            json!([{"type":"toolCall","id":format!("call_{t}"),"name":"exec","arguments":{"cmd":"ls"}}])
        } else {
            json!([{"type":"text","text":format!("answer {t}")}])
        };
        let usage = json!({"input":10,"output":5,"cacheRead":100,"cacheWrite":0,"totalTokens":115,
            "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}});
        g.message(
            json!({"role":"assistant","content":content,"api":"anthropic-messages",
            "provider":model.0.unwrap_or("anthropic"),"model":model.1,"usage":usage,
            "stopReason":if call {"toolUse"} else {"stop"},"timestamp":now+1}),
        );
        if call {
            if g.rng.chance(30) {
                // The marker of the attempt lands between the call and its result.
                g.marker(model);
            }
            g.message(
                json!({"role":"toolResult","toolCallId":format!("call_{t}"),"toolName":"exec",
                "content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":now+2}),
            );
            g.message(
                json!({"role":"assistant","content":[{"type":"text","text":"done"}],
                "api":"anthropic-messages","provider":"anthropic","model":model.1,"usage":usage,
                "stopReason":"stop","timestamp":now+3}),
            );
        }
        if g.rng.chance(85) {
            g.marker(model);
        }
        if g.rng.chance(8) {
            let odd = *g.rng.pick(ODD);
            g.push("custom", odd);
        }
        if g.rng.chance(7) {
            // A compaction keeping from a recent entry of the path, often a marker.
            let path = g.path();
            let recent = &path[path.len().saturating_sub(8)..];
            let kept = recent
                .iter()
                .rfind(|id| g.markers.contains(id))
                .filter(|_| g.rng.chance(60))
                .cloned()
                .unwrap_or_else(|| recent[g.rng.below(recent.len())].clone());
            g.push(
                "compaction",
                &format!(
                    r#""summary":"summary {t}","firstKeptEntryId":"{kept}","tokensBefore":5000"#
                ),
            );
        }
        if g.rng.chance(4) && !g.markers.is_empty() {
            let target = g.markers[g.rng.below(g.markers.len())].clone();
            g.push("label", &format!(r#""targetId":"{target}","label":"here""#));
        }
        if g.rng.chance(3) {
            g.lines.push(r#"{"type":"custom","broken"#.to_owned());
        }
    }
    if g.rng.chance(50) {
        g.marker(model);
    }
    g.lines.join("\n") + "\n"
}

/// One generated or runtime-written transcript and its rewrite.
struct Case {
    name: String,
    before: PathBuf,
    after: PathBuf,
    removed: u64,
}

/// Prune `before` into a copy beside it and check the rewrite without the runtime.
fn run_case(env: &TestEnv, name: &str, before: &Path) -> Case {
    let after = env.path(&format!("{name}.after.jsonl"));
    std::fs::copy(before, &after).unwrap();
    let probe = env.path(&format!("{name}.inspect.jsonl"));
    std::fs::copy(before, &probe).unwrap();
    let (code, ins) = env.run_json(&["inspect", "--transcript", probe.to_str().unwrap()]);
    assert_eq!(code, 0, "{name}: inspect {ins}");
    let predicted = ins["transcript"]["reclaimable"]["prune-cache-ttl"]
        .as_i64()
        .unwrap();
    let (code, doc) = env.run_json(&[
        "prune-cache-ttl",
        "--transcript",
        after.to_str().unwrap(),
        "--enforce",
    ]);
    assert_eq!(code, 0, "{name}: {doc}");
    let f = &doc["transcripts"][0];
    assert!(
        f["status"] == "changed" || f["status"] == "unchanged",
        "{name}: {doc}"
    );
    let removed = f["markersRemoved"].as_u64().unwrap();
    let freed = f["bytesBefore"].as_i64().unwrap() - f["bytesAfter"].as_i64().unwrap();
    assert_eq!(predicted, freed, "{name}: inspect predicted otherwise");
    check_lines(name, before, &after, removed);
    let (_, again) = env.run_json(&[
        "prune-cache-ttl",
        "--transcript",
        after.to_str().unwrap(),
        "--enforce",
    ]);
    assert_eq!(
        again["transcripts"][0]["status"], "unchanged",
        "{name}: second run {again}"
    );
    Case {
        name: name.to_owned(),
        before: before.to_owned(),
        after,
        removed,
    }
}

/// Only readable markers went; every other line is there, as it was or with only its
/// `parentId`/`firstKeptEntryId` moved to an entry that is still there.
fn check_lines(name: &str, before: &Path, after: &Path, removed: u64) {
    let old = std::fs::read_to_string(before).unwrap();
    let new = std::fs::read_to_string(after).unwrap();
    let id_of = |l: &str| {
        serde_json::from_str::<Value>(l)
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_owned))
    };
    let new_ids: HashSet<String> = new.lines().filter_map(id_of).collect();
    let mut gone = 0;
    let mut old_by_id = HashMap::new();
    let mut old_other = Vec::new();
    for l in old.lines() {
        match id_of(l) {
            Some(id) if !new_ids.contains(&id) => {
                assert!(
                    read_marker(l.as_bytes()).is_some(),
                    "{name}: removed a line that is not a readable marker: {l}"
                );
                gone += 1;
            }
            Some(id) => {
                old_by_id.insert(id, l);
            }
            None => old_other.push(l),
        }
    }
    assert_eq!(gone, removed, "{name}");
    let mut new_other = Vec::new();
    for l in new.lines() {
        let Some(id) = id_of(l) else {
            new_other.push(l);
            continue;
        };
        let was = old_by_id[&id];
        if was == l {
            continue;
        }
        // A re-parented line is written as JSON.stringify writes it (what the runtime writes
        // when it rewrites a file): compare with the old line written that way (`1e400`, which
        // JavaScript reads as Infinity, becomes `null`).
        let as_js = clawkeeper::jsjson::to_string_compact(
            &clawkeeper::jsjson::parse(was.as_bytes()).unwrap(),
        );
        let (mut a, mut b): (Value, Value) = (
            serde_json::from_str(&as_js).unwrap(),
            serde_json::from_str(l).unwrap(),
        );
        for k in ["parentId", "firstKeptEntryId"] {
            if let Some(v) = b.get(k).and_then(Value::as_str) {
                assert!(new_ids.contains(v), "{name}: {k} {v} is not in the file");
            }
            a.as_object_mut().unwrap().remove(k);
            b.as_object_mut().unwrap().remove(k);
        }
        assert_eq!(a, b, "{name}: line of {id} changed beyond its links");
    }
    assert_eq!(old_other, new_other, "{name}: lines without an id changed");
}

/// The runtime of `oracle`: loads, cache-TTL reads (file and forks) and an append, over
/// copies.
fn check_runtime(oracle: &Oracle, cases: &[Case], version: &str) {
    let files: Vec<PathBuf> = cases
        .iter()
        .flat_map(|c| [c.before.clone(), c.after.clone()])
        .collect();
    let loaded = oracle.load_all(&files);
    for (c, pair) in cases.iter().zip(loaded.chunks(2)) {
        let (old, new) = (&pair[0], &pair[1]);
        assert!(
            old.ok,
            "{version} {}: original does not load: {:?}",
            c.name, old.error
        );
        assert!(
            new.ok,
            "{version} {}: rewrite does not load: {:?}",
            c.name, new.error
        );
        assert_eq!(old.leaf_id, new.leaf_id, "{version} {}: leaf", c.name);
        assert!(
            old.messages == new.messages,
            "{version} {}: the context changed",
            c.name
        );
    }
    let (scratch, copies) = crate::util::scratch_copies(&files);
    let forks = tempfile::tempdir().unwrap();
    let mut args = vec!["compare".into(), forks.path().as_os_str().to_owned()];
    args.extend(copies.iter().map(|c| c.as_os_str().to_owned()));
    let out = oracle.run_script("cache-ttl.mjs", &args);
    let text = String::from_utf8_lossy(&out);
    let results: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("@@ttl "))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), cases.len(), "{version}: {text}");
    let (mut found, mut tips, mut forks_n) = (0, 0, 0);
    for (c, r) in cases.iter().zip(&results) {
        assert_eq!(
            r["problems"],
            json!([]),
            "{version} {}: the runtime reads other cache-TTL timestamps",
            c.name
        );
        found += r["found"].as_u64().unwrap();
        tips += r["tips"].as_u64().unwrap();
        forks_n += r["forks"].as_u64().unwrap();
    }
    assert!(found > 0 && tips > cases.len() as u64 && forks_n > tips);
    // The runtime appends to rewrites (three: a Node start each) and reads them back with
    // one more message.
    let appended: Vec<PathBuf> = cases
        .iter()
        .take(3)
        .map(|c| {
            let copy = scratch.path().join(format!("{}-append.jsonl", c.name));
            std::fs::copy(&c.after, &copy).unwrap();
            oracle.run_script("append-message.mjs", [&copy]);
            copy
        })
        .collect();
    let again = oracle.load_all(&appended);
    for ((c, pair), a) in cases.iter().zip(loaded.chunks(2)).zip(&again) {
        assert!(a.ok, "{version} {}: after an append: {:?}", c.name, a.error);
        let n = pair[1].messages.as_array().map_or(0, Vec::len);
        assert_eq!(
            a.messages.as_array().map_or(0, Vec::len),
            n + 1,
            "{version} {}: the appended message",
            c.name
        );
    }
}

fn with_runtimes(cases: &[Case]) {
    if let Some(o) = util::oracle() {
        check_runtime(&o, cases, util::STABLE.version);
    }
    if let Some(o) = util::oracle_extended() {
        check_runtime(&o, cases, util::EXTENDED.version);
    }
}

#[test]
fn generated_transcripts_keep_what_the_runtime_reads() {
    let env = TestEnv::new();
    let cases: Vec<Case> = (1..=util::case_count(10))
        .map(|seed| {
            let text = generate(seed, 20 + (seed as usize * 7) % 40);
            let before = env.write(&format!("gen{seed}.jsonl"), text.as_bytes());
            run_case(&env, &format!("gen{seed}"), &before)
        })
        .collect();
    let removed: u64 = cases.iter().map(|c| c.removed).sum();
    assert!(
        removed > 10 * cases.len() as u64,
        "generator too tame: {removed}"
    );
    with_runtimes(&cases);
}

#[test]
fn transcripts_the_runtime_wrote_keep_what_it_reads() {
    let Some(writer) = util::oracle() else {
        return;
    };
    let env = TestEnv::new();
    // Four sessions written by 2026.7.1, two by the extended-stable 2026.7.35.
    let extended = util::oracle_extended();
    let writers = std::iter::repeat_n(&writer, 4).chain(extended.iter().cycle().take(2));
    let cases: Vec<Case> = writers
        .zip(1u64..)
        .map(|(w, seed)| {
            let before = env.path(&format!("rt{seed}.jsonl"));
            w.run_script(
                "cache-ttl.mjs",
                ["write", before.to_str().unwrap(), &seed.to_string()],
            );
            run_case(&env, &format!("rt{seed}"), &before)
        })
        .collect();
    assert!(cases.iter().all(|c| c.removed > 5));
    with_runtimes(&cases);
}
