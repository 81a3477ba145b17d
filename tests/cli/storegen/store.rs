//! Generation of one random case: config, `sessions.json` entries of every key kind, their
//! transcripts and sidecars, and the other families of files a sessions dir collects.

use serde_json::{Map, Value, json};

use super::config::MaintenanceChoice;
use super::deviations;
use super::layout::Layout;
use super::transcript::{self, Shape};
use super::{Case, ConfigVia, DAY, HOUR, MINUTE, Node, ROOT, Rng, sha256_hex};

/// Builds one case; see the module docs of `storegen` for the contract.
pub fn generate(seed: u64, now: i64) -> Case {
    let mut rng = Rng::new(seed);
    let layout = Layout::random(&mut rng);
    let mut g = Gen {
        rng,
        now,
        nodes: Vec::new(),
        cutoffs: Vec::new(),
        notes: layout.notes.clone(),
        keys: Vec::new(),
        sdir: String::new(),
        store_name: String::new(),
        agent: String::new(),
    };
    let cfg = MaintenanceChoice::random(&mut g.rng);
    g.cutoffs = vec![
        (cfg.prune_ms, 10 * MINUTE),
        (DAY, 10 * MINUTE),
        (5 * MINUTE, 3 * MINUTE),
    ];
    if let Some(r) = cfg.reset_ms {
        g.cutoffs.push((r, 10 * MINUTE));
    }
    g.notes.push(format!("maintenance: {}", cfg.describe()));

    // The first store gets the rich content; the others (--all-agents) a smaller one. A
    // target that is an error still gets a store where the default agent keeps it.
    let mut stores = layout.stores.clone();
    if stores.is_empty() {
        stores.push((
            layout.default_agent.clone(),
            format!(
                "state/agents/{}/sessions/sessions.json",
                layout.default_agent
            ),
        ));
    }
    let mut budget = 0;
    for (i, (agent, rel)) in stores.iter().enumerate() {
        let (dir, name) = rel.rsplit_once('/').expect("store path has a directory");
        g.sdir = dir.to_string();
        g.store_name = name.to_string();
        g.agent = agent.clone();
        let store = g.entries(if i == 0 { 22 } else { 8 });
        g.extras();
        // A sessions dir always exists (clawkeeper deliberately never creates one).
        g.nodes.push((g.sdir.clone(), Node::Dir));
        if g.rng.chance(0.97) {
            let text = if g.rng.chance(0.8) {
                serde_json::to_string_pretty(&Value::Object(store)).unwrap()
            } else {
                serde_json::to_string(&Value::Object(store)).unwrap()
            };
            let age = g.age();
            g.file(rel, text.into_bytes(), age);
        } else {
            g.notes.push(format!("no {rel}"));
        }
        if i == 0 {
            budget = g.budget();
        }
    }
    // Distinct mtimes, so the disk budget's oldest-first order is fully determined.
    for (i, (_, node)) in g.nodes.iter_mut().enumerate() {
        if let Node::File { age_ms, .. } = node {
            *age_ms += i as i64 * 97;
        }
    }
    // The state dir exists (the reference keeps state of its own there).
    for dir in [&layout.cwd_rel, &layout.home_rel, &"state".to_string()] {
        if !dir.is_empty() {
            g.nodes.push((dir.clone(), Node::Dir));
        }
    }

    let rendered = cfg.render(&mut g.rng, budget, &layout);
    let config_via = *g.rng.pick(&[
        ConfigVia::Env,
        ConfigVia::Env,
        ConfigVia::StateDefault,
        ConfigVia::Flag,
    ]);
    let config_rel = match config_via {
        ConfigVia::StateDefault => "state/openclaw.json".to_string(),
        _ => "etc/openclaw.json5".to_string(),
    };
    g.nodes.push((
        config_rel.clone(),
        Node::File {
            content: rendered.reference.into_bytes(),
            age_ms: HOUR,
        },
    ));
    if !rendered.ours_flags.is_empty() {
        g.notes.push(format!(
            "clawkeeper gets {} instead of those config keys",
            rendered.ours_flags.join(" ")
        ));
    }

    let mut flags = Vec::new();
    if g.rng.chance(0.5) {
        flags.push("--fix-missing".to_string());
    }
    if g.rng.chance(0.5) {
        flags.push("--fix-dm-scope".to_string());
    }
    if g.rng.chance(0.35) && !g.keys.is_empty() {
        let key = g.rng.pick(&g.keys).clone();
        let key = match g.rng.below(6) {
            0 => key.to_uppercase(),
            1 => format!("agent:main:direct:nobody-{}", g.rng.hex(4)),
            2 => format!("  {key} "),
            3 if g.rng.chance(0.3) => String::new(),
            _ => key,
        };
        flags.push("--active-key".to_string());
        flags.push(key);
    }
    let apply_flag = if g.rng.chance(0.75) {
        Some("--enforce")
    } else {
        None
    };
    let text = g.rng.chance(0.35);
    tie_mtimes(&mut g);
    Case {
        seed,
        nodes: g.nodes,
        config_rel,
        config_via,
        ours_config: rendered.ours.map(String::into_bytes),
        target: layout.target,
        cwd_rel: layout.cwd_rel,
        home_rel: layout.home_rel,
        openclaw_home: layout.openclaw_home,
        flags,
        ours_flags: rendered.ours_flags,
        apply_flag,
        text,
        notes: g.notes,
    }
}

/// In some cases, give files the modification time of another file (files written in one
/// go, a file system with coarse timestamps): the disk budget removes files oldest first,
/// and files of the same age in the order the directory lists them, which must be
/// OpenClaw's (by name). Runs after every other choice, so that the rest of a seed's case does
/// not depend on it; a copied age is another generated one, on a definite side of every
/// cutoff.
fn tie_mtimes(g: &mut Gen) {
    if !g.rng.chance(0.4) {
        return;
    }
    let files: Vec<usize> = (g.nodes.iter().enumerate())
        .filter(|(_, (_, n))| matches!(n, Node::File { .. }))
        .map(|(i, _)| i)
        .collect();
    let age_of = |n: &Node| match n {
        Node::File { age_ms, .. } => *age_ms,
        _ => unreachable!("only files are listed"),
    };
    let mut tied = 0;
    for j in 1..files.len() {
        if !g.rng.chance(0.35) {
            continue;
        }
        let k = files[g.rng.below(j as u64) as usize];
        let age = age_of(&g.nodes[k].1);
        if let Node::File { age_ms, .. } = &mut g.nodes[files[j]].1 {
            *age_ms = age;
            tied += 1;
        }
    }
    g.notes.push(format!("{tied} files share another's mtime"));
}

pub(super) struct Gen {
    pub(super) rng: Rng,
    pub(super) now: i64,
    pub(super) nodes: Vec<(String, Node)>,
    /// (cutoff age, margin): generated ages stay at least `margin` away from each cutoff.
    pub(super) cutoffs: Vec<(i64, i64)>,
    pub(super) notes: Vec<String>,
    pub(super) keys: Vec<String>,
    /// The sessions directory being filled, relative to the root.
    pub(super) sdir: String,
    /// The store file's name in it (`sessions.json` unless `session.store` says otherwise).
    pub(super) store_name: String,
    /// The agent whose store is being filled (its keys say `agent:<id>:`).
    pub(super) agent: String,
}

/// The transcript state chosen for one entry.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Presence {
    Full,
    Missing,
    HeaderOnly,
    Empty,
    Symlink,
    /// No message record (or one among look-alikes), sized around 4 KiB.
    Messageless,
}

impl Gen {
    /// An age on a definite side of every cutoff.
    pub(super) fn age(&mut self) -> i64 {
        loop {
            let a = match self.rng.below(5) {
                0 | 1 => self.rng.log_uniform(MINUTE, 400 * DAY),
                2 | 3 => {
                    let (c, _) = *self.rng.pick(&self.cutoffs);
                    let d = self
                        .rng
                        .range(11 * MINUTE, (c / 2).clamp(12 * MINUTE, 3 * DAY));
                    if self.rng.chance(0.5) { c + d } else { c - d }
                }
                _ => self.rng.range(0, 2 * MINUTE),
            };
            if a >= 0 && self.cutoffs.iter().all(|&(c, m)| (a - c).abs() >= m) {
                return a;
            }
        }
    }

    pub(super) fn file(&mut self, rel: &str, content: Vec<u8>, age_ms: i64) {
        self.nodes.retain(|(p, _)| p != rel);
        self.nodes
            .push((rel.to_string(), Node::File { content, age_ms }));
    }

    pub(super) fn symlink(&mut self, rel: &str, target: &str) {
        self.nodes.retain(|(p, _)| p != rel);
        self.nodes.push((
            rel.to_string(),
            Node::Symlink {
                target: target.to_string(),
            },
        ));
    }

    pub(super) fn transcript_file(&mut self, rel: &str, sid: &str, presence: Presence) {
        let age = self.age();
        let start = self.now - age - self.rng.range(HOUR, 10 * DAY);
        match presence {
            Presence::Missing => {}
            Presence::Full => {
                let shape = Shape::random(&mut self.rng);
                let text = transcript::transcript(&mut self.rng, sid, start, shape);
                self.file(rel, text.into_bytes(), age);
            }
            Presence::HeaderOnly => {
                self.file(rel, transcript::header_only(sid, start).into_bytes(), age)
            }
            Presence::Empty => self.file(rel, Vec::new(), age),
            Presence::Messageless => {
                let text = transcript::messageless(&mut self.rng, sid, start);
                self.notes.push(format!(
                    "message-less transcript {rel} ({} bytes)",
                    text.len()
                ));
                self.file(rel, text, age);
            }
            Presence::Symlink => {
                let target_name = format!("linked-{}.jsonl", self.rng.hex(6));
                let text = transcript::transcript(&mut self.rng, sid, start, Shape::default());
                self.file(&format!("elsewhere/{target_name}"), text.into_bytes(), age);
                self.symlink(rel, &format!("{ROOT}/elsewhere/{target_name}"));
            }
        }
    }

    /// The `sessions.json` object, with files for every entry.
    pub(super) fn entries(&mut self, most: i64) -> Map<String, Value> {
        let mut store = Map::new();
        let count = self.rng.range(most.min(5), most);
        let mut prev_ids: Vec<String> = Vec::new();
        for _ in 0..count {
            let (key, kind) = self.key();
            if store.contains_key(&key) {
                continue;
            }
            self.keys.push(key.clone());
            if self.rng.chance(0.03) {
                store.insert(
                    key,
                    self.rng
                        .pick(&[json!("text"), json!(null), json!([1])])
                        .clone(),
                );
                continue;
            }
            let shared = !prev_ids.is_empty() && self.rng.chance(0.1);
            let entry = self.entry(kind, shared, &mut prev_ids);
            store.insert(key, Value::Object(entry));
        }
        store
    }

    fn entry(
        &mut self,
        kind: &str,
        shared: bool,
        prev_ids: &mut Vec<String>,
    ) -> Map<String, Value> {
        let mut e = Map::new();
        let sid = if shared {
            self.rng.pick(prev_ids).clone()
        } else {
            match self.rng.below(20) {
                0 => format!("s-{}", self.rng.hex(10)),
                1 => format!(" {} ", self.rng.uuid()),
                2 => format!("a:{}", self.rng.hex(6)),
                3 if self.rng.chance(0.3) => format!("../{}", self.rng.hex(6)),
                _ => self.rng.uuid(),
            }
        };
        let trimmed = sid.trim().to_string();
        prev_ids.push(trimmed.clone());
        let has_sid = !self.rng.chance(0.04);
        if has_sid {
            e.insert("sessionId".into(), json!(sid));
        }
        let age = self.age();
        let updated = self.now - age;
        match self.rng.below(30) {
            0 => {}
            1 => {
                e.insert("updatedAt".into(), json!(updated.to_string()));
            }
            2 => {
                e.insert("updatedAt".into(), json!(null));
            }
            3 => {
                e.insert("updatedAt".into(), json!(-5));
            }
            4 => {
                e.insert("updatedAt".into(), json!(updated as f64 + 0.5));
            }
            _ => {
                e.insert("updatedAt".into(), json!(updated));
            }
        }
        if self.rng.chance(0.4) {
            let label = *self.rng.pick(&[
                "Ana DM",
                "ops alerts",
                "  nightly  ",
                "Research",
                "ünïcode ✓",
            ]);
            e.insert("label".into(), json!(label));
        }
        // Chat type, sometimes only in origin, sometimes contradicting the key.
        let chat = match kind {
            "group" | "topic" => Some("group"),
            "channel" => Some("channel"),
            "thread" => Some("thread"),
            "direct" => Some("direct"),
            _ => None,
        };
        match self.rng.below(6) {
            0 => {
                e.insert("chatType".into(), json!(chat.unwrap_or("direct")));
            }
            1 => {
                let ct = *self.rng.pick(&["Group", "channel", "thread", "direct"]);
                e.insert(
                    "origin".into(),
                    json!({"provider":"telegram","chatType":ct,"label":"x"}),
                );
            }
            2 if self.rng.chance(0.3) => {
                e.insert(
                    "chatType".into(),
                    json!(*self.rng.pick(&["group", "thread"])),
                );
            }
            _ => {}
        }
        if self.rng.chance(0.5) {
            e.insert("model".into(), json!("claude-sonnet-4-5"));
            e.insert("modelProvider".into(), json!("anthropic"));
        }
        if self.rng.chance(0.3) {
            e.insert("thinkingLevel".into(), json!("low"));
            e.insert("systemSent".into(), json!(true));
        }
        if self.rng.chance(0.2) {
            e.insert("lastChannel".into(), json!("telegram"));
            e.insert(
                "lastTo".into(),
                json!(format!("{}", self.rng.range(1000, 99999))),
            );
        }
        if self.rng.chance(0.05) {
            e.insert("provider".into(), json!("whatsapp"));
            e.insert("room".into(), json!("lobby"));
        }
        if self.rng.chance(0.2) {
            e.insert(
                "x-custom".into(),
                json!({"b": 2, "a": [1, "two"], "9": true}),
            );
            e.insert("7".into(), json!("integer-like key"));
        }
        self.skills(&mut e);

        // Where the transcript lives.
        let topic = kind == "topic" || self.rng.chance(0.05);
        let default_name = if topic {
            format!("{trimmed}-topic-{}.jsonl", self.rng.range(1, 400))
        } else {
            format!("{trimmed}.jsonl")
        };
        let variant = self.rng.below(22);
        let mut transcript_rel: Option<String> = Some(format!("{}/{trimmed}.jsonl", self.sdir));
        let sf: Option<Value> = match variant {
            0..=1 => Some(json!(default_name)),
            2 => Some(json!(format!("{ROOT}/{}/{default_name}", self.sdir))),
            3 => Some(json!(format!("{ROOT}/elsewhere/{default_name}"))),
            4 => Some(json!(format!(
                "{ROOT}/state/agents/ops/sessions/{default_name}"
            ))),
            5 => Some(json!(format!("../{default_name}"))),
            6 => Some(json!(format!("archive/{default_name}"))),
            7 | 8 => {
                let other = self.rng.uuid();
                if self.rng.chance(0.5) {
                    Some(json!(format!("{other}.jsonl")))
                } else {
                    Some(json!(format!(
                        "{ROOT}/{}/2026-01-02T03-04-05-678Z_{other}.jsonl",
                        self.sdir
                    )))
                }
            }
            9 => Some(json!(42)),
            10 => Some(json!("   ")),
            _ if topic => Some(json!(default_name)),
            _ => None,
        };
        if let Some(Value::String(s)) = &sf {
            let s = s.trim();
            if !s.is_empty() {
                let rel = if let Some(abs) = s.strip_prefix(ROOT) {
                    abs.trim_start_matches('/').to_string()
                } else if let Some(up) = s.strip_prefix("../") {
                    match self.sdir.rsplit_once('/') {
                        Some((parent, _)) => format!("{parent}/{up}"),
                        None => up.to_string(),
                    }
                } else {
                    format!("{}/{s}", self.sdir)
                };
                transcript_rel = Some(rel);
            }
        }
        if let Some(v) = sf {
            e.insert("sessionFile".into(), v);
        }
        if trimmed.starts_with("..") {
            transcript_rel = None;
        }
        let presence = if shared {
            Presence::Missing
        } else {
            match self.rng.below(22) {
                0..=1 => Presence::Missing,
                2 => Presence::HeaderOnly,
                3 => Presence::Empty,
                4 => Presence::Symlink,
                5 | 6 => Presence::Messageless,
                _ => Presence::Full,
            }
        };
        if let Some(rel) = &transcript_rel {
            self.transcript_file(rel, &trimmed, presence);
            // The canonical `<id>.jsonl` next to an override: the repair case and the
            // second archive candidate.
            if (7..=8).contains(&variant) || (variant <= 6 && self.rng.chance(0.25)) {
                let presence = if self.rng.chance(0.15) {
                    Presence::Messageless
                } else {
                    Presence::Full
                };
                let canonical = format!("{}/{trimmed}.jsonl", self.sdir);
                self.transcript_file(&canonical, &trimmed, presence);
            }
            if rel.starts_with(&format!("{}/", self.sdir))
                && rel.ends_with(".jsonl")
                && self.rng.chance(0.3)
            {
                self.trajectory(rel, &trimmed);
            }
            // A checkpoint may name the transcript of another entry: of an entry without a
            // session id, one that takes the id; of an entry sharing an id, the first one's.
            // OpenClaw archives that file with the other entry when it goes, while clawkeeper
            // keeps every file a kept entry uses (a deliberate difference).
            if self.rng.chance(0.2) && ((has_sid && !shared) || deviations()) {
                self.checkpoint(&mut e, rel, &trimmed);
            }
        }
        e
    }

    fn skills(&mut self, e: &mut Map<String, Value>) {
        let pick = self.rng.below(12);
        match pick {
            0 => {
                let prompt = "You can use these skills:\n".to_string()
                    + &"- weather: look up forecasts\n".repeat(25);
                e.insert(
                    "skillsSnapshot".into(),
                    json!({"prompt": prompt, "skills": [{"name":"weather"}]}),
                );
            }
            1 => {
                let prompt = format!(
                    "Skills for {}:\n{}",
                    self.rng.hex(8),
                    "- notes: keep notes\n".repeat(30)
                );
                let hash = sha256_hex(prompt.as_bytes());
                let age = self.age();
                self.file(
                    &format!(
                        "{}/skills-prompts/sha256/{}/{hash}.txt",
                        self.sdir,
                        &hash[..2]
                    ),
                    prompt.clone().into_bytes(),
                    age,
                );
                e.insert(
                    "skillsSnapshot".into(),
                    json!({"promptRef": {"version":1,"algorithm":"sha256","hash":hash,"bytes":prompt.len()}, "skills": []}),
                );
            }
            2 => {
                e.insert(
                    "skillsSnapshot".into(),
                    json!({"prompt": "short skills prompt", "skills": []}),
                );
            }
            _ => {}
        }
    }

    pub(super) fn trajectory(&mut self, transcript_rel: &str, sid: &str) {
        let stem = transcript_rel.trim_end_matches(".jsonl");
        let runtime_rel = format!("{stem}.trajectory.jsonl");
        let age = self.age();
        let runtime = transcript::trajectory_runtime(sid, self.now - age);
        let runtime_file = match self.rng.below(3) {
            0 if deviations() => {
                // OpenClaw deletes this file outside the sessions dir; clawkeeper never does.
                self.file(
                    &format!("traces/{sid}.jsonl"),
                    runtime.clone().into_bytes(),
                    age,
                );
                format!("{ROOT}/traces/{sid}.jsonl")
            }
            0 => format!("{ROOT}/traces/{sid}.jsonl"),
            _ => format!("{ROOT}/{runtime_rel}"),
        };
        if self.rng.chance(0.8) {
            self.file(&runtime_rel, runtime.into_bytes(), age);
        }
        let pointer = transcript::trajectory_pointer(sid, &runtime_file);
        let age = self.age();
        self.file(
            &format!("{stem}.trajectory-path.json"),
            pointer.into_bytes(),
            age,
        );
    }

    fn checkpoint(&mut self, e: &mut Map<String, Value>, transcript_rel: &str, sid: &str) {
        let name = format!("{sid}.checkpoint.{}.jsonl", self.rng.uuid());
        let age = self.age();
        let text =
            transcript::transcript(&mut self.rng, sid, self.now - age - DAY, Shape::default());
        self.file(&format!("{}/{name}", self.sdir), text.into_bytes(), age);
        let pre = match self.rng.below(3) {
            0 => name.clone(),
            _ => format!("{ROOT}/{}/{name}", self.sdir),
        };
        let created = self.now - age;
        e.insert(
            "compactionCheckpoints".into(),
            json!([{
                "checkpointId": self.rng.uuid(), "reason": "auto", "createdAt": created,
                "preCompaction": {"sessionId": sid, "sessionFile": pre, "leafId": self.rng.hex(8)},
                "postCompaction": {"sessionId": sid, "sessionFile": format!("{ROOT}/{transcript_rel}")}
            }]),
        );
    }
}
