//! Seeded transcript generator: headers, settings, user/assistant turns with thinking, tool
//! calls and results (with and without images), user images, heartbeat pairs, runs of
//! `NO_REPLY` in many spellings, lookalikes that are not silent, compactions, abandoned
//! branches with branch summaries, custom, label, session_info and unknown entries, a line
//! with a lone surrogate escape, blank lines, CRLF line endings and torn last lines. Some user
//! and tool-result texts carry media references (`[media attached: …]`, `[Image: source: …]`,
//! `media://inbound/…`), chosen from the generator's state without drawing from its random
//! stream, so a seed's structure is the same as before they were added.
//!
//! Every message gets a unique `message.timestamp`, so a message in the runtime's context can
//! be traced back to its entry.

use serde_json::{Value, json};

/// splitmix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

pub const SILENT_SPELLINGS: &[&str] = &[
    "NO_REPLY",
    "no_reply",
    " No_Reply\n",
    "**NO_REPLY**",
    "NO_REPLY.",
    "\"NO_REPLY\"",
    "_NO_REPLY_",
    "\u{a0}NO_REPLY\u{3000}",
    "{\"action\":\"NO_REPLY\"}",
    "** NO_REPLY **",
    "[[reply_to_current]] NO_REPLY",
    "[[reply_to:msg-42]]\nNO_REPLY",
    "NO_REPLYNO_REPLY",
    "NO_REPLYno_reply **NO_REPLY",
];

const LOOKALIKES: &[&str] = &[
    "Done. NO_REPLY",
    "NO_REPLY: nothing new",
    "NO REPLY",
    "{\"action\":\"no_reply\"}",
    "`NO_REPLY`",
    "~~NO_REPLY~~",
    "NO_REPLY.NO_REPLY",
    "HEARTBEAT_OK NO_REPLY",
    "[[reply_to:NO_REPLY]]",
    "[[reply_to_current]] `NO_REPLY`",
];

const HEARTBEAT: &str = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";

/// A generated transcript.
pub struct Generated {
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

struct G {
    rng: Rng,
    lines: Vec<String>,
    /// (id, type) of every entry written, in file order.
    ids: Vec<String>,
    /// The parent for the next entry.
    cur: Option<String>,
    /// The id of the entry on the last line (for "append only at the end" rules).
    last_written: Option<String>,
    /// The id of the last entry of a type the runtime indexes.
    last_known: Option<String>,
    /// Parent of every entry written (as the runtime resolves it).
    parent_of: std::collections::HashMap<String, Option<String>>,
    clock: u64,
    next_id: u64,
    tool_seq: u64,
    /// Long mode (see [`generate_long`]): longer texts and varied file tools. Draws nothing
    /// extra from `rng`, so seeds of [`generate`] are unaffected.
    long: bool,
}

impl G {
    fn id(&mut self) -> String {
        self.next_id += 1 + self.rng.below(5) as u64;
        format!("{:08x}", self.next_id * 2_654_435_761 % 0xffff_ffff)
    }
    fn tick(&mut self) -> u64 {
        self.clock += 1000 + self.rng.below(50_000) as u64;
        self.clock
    }
    fn iso(&self, ms: u64) -> String {
        let secs = ms / 1000;
        format!(
            "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + secs / 86_400 % 28,
            secs / 3600 % 24,
            secs / 60 % 60,
            secs % 60,
            ms % 1000
        )
    }
    /// Append an entry under `cur` and make it the new `cur`.
    fn push(&mut self, kind: &str, extra: Value) -> String {
        let id = self.id();
        let ts = self.tick();
        let mut m = serde_json::Map::new();
        m.insert("type".into(), json!(kind));
        m.insert("id".into(), json!(id));
        // Rarely leave parentId out where the runtime's rule for that (the previous indexed
        // entry) gives the same parent.
        let omit = self.cur.is_some()
            && self.cur == self.last_written
            && self.last_written == self.last_known
            && self.rng.chance(3);
        if !omit {
            m.insert(
                "parentId".into(),
                self.cur.clone().map_or(Value::Null, Value::String),
            );
        }
        m.insert("timestamp".into(), json!(self.iso(ts)));
        if let Value::Object(extra) = extra {
            m.extend(extra);
        }
        self.lines.push(Value::Object(m).to_string());
        self.ids.push(id.clone());
        self.parent_of.insert(id.clone(), self.cur.clone());
        self.cur = Some(id.clone());
        self.last_written = Some(id.clone());
        if !kind.starts_with("x_") {
            self.last_known = Some(id.clone());
        }
        id
    }
    fn message(&mut self, msg: Value) -> String {
        let mut msg = msg;
        let ts = self.tick();
        msg["timestamp"] = json!(ts);
        self.push("message", json!({ "message": msg }))
    }
    fn image(&mut self) -> Value {
        let n = 8 + self.rng.below(40);
        let data: String = (0..n)
            .map(|i| (b'A' + ((i * 7 + n) % 26) as u8) as char)
            .collect();
        json!({"type":"image","data": data, "mimeType":"image/png"})
    }
    fn assistant(&mut self, content: Value, stop: &str) -> String {
        self.message(json!({
            "role":"assistant","content": content,"api":"anthropic-messages","provider":"anthropic",
            "model":"claude-sonnet-4-5","usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,
            "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason": stop
        }))
    }
    fn silent(&mut self) -> String {
        let text = *self.rng.pick(SILENT_SPELLINGS);
        let content = match self.rng.below(4) {
            0 => {
                json!([{"type":"thinking","thinking":"nothing to say","thinkingSignature":"sig"},{"type":"text","text":text}])
            }
            1 => json!([{"type":"text","text":""},{"type":"text","text":text}]),
            2 => json!(text),
            _ => json!([{"type":"text","text":text}]),
        };
        self.assistant(content, "stop")
    }
    /// Deterministic filler for long mode (no draws from `rng`).
    fn pad(&self, base: &str) -> String {
        if !self.long {
            return base.to_owned();
        }
        let n = (self.next_id * 7 + self.clock / 1000) % 60;
        format!("{base} {}", "with some more detail ".repeat(n as usize))
    }
    /// A media reference for some texts (no draws from `rng`).
    fn media(&self, base: &str, salt: u64) -> String {
        let n = self.next_id * 31 + self.clock / 1000 + salt;
        match n % 7 {
            0 => format!("{base} [media attached: /tmp/openclaw/inbound/{n}.png (image/png)]"),
            1 => format!("[media attached 1/2: media://inbound/{n}.jpg]\n{base}"),
            2 => format!("{base} (media://inbound/{n}.webp)"),
            3 => format!("{base}\n[Image: source: /work/shots/{n}.png]"),
            _ => base.to_owned(),
        }
    }
    fn user(&mut self, images: usize) -> String {
        if images == 0 && self.rng.chance(40) {
            let text = self.media(&self.pad("please check the logs"), 0);
            return self.message(json!({"role":"user","content":text}));
        }
        let text = self.media(&self.pad("look at this"), 1);
        let mut content = vec![json!({"type":"text","text":text})];
        for _ in 0..images {
            let img = self.image();
            content.push(img);
        }
        self.message(json!({"role":"user","content": content}))
    }
    fn reply(&mut self) -> String {
        let content = if self.rng.chance(40) {
            let text = self.pad("Here is what I found.");
            json!([{"type":"thinking","thinking":"hmm","thinkingSignature":"s1"},{"type":"text","text":text}])
        } else {
            json!([{"type":"text","text":self.pad("All good.")}])
        };
        self.assistant(content, "stop")
    }
    fn tool_round(&mut self) {
        let n = 1 + self.rng.below(2);
        let calls: Vec<String> = (0..n)
            .map(|_| {
                self.tool_seq += 1;
                format!("toolu_{:04}", self.tool_seq)
            })
            .collect();
        let long = self.long;
        let blocks: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(k, c)| {
                if long {
                    let seq = self.tool_seq as usize + k;
                    let name = ["read", "edit", "write", "exec", "read"][seq % 5];
                    json!({"type":"toolCall","id":c,"name":name,"arguments":{"path":format!("src/mod{}.rs", seq % 23)}})
                } else {
                    json!({"type":"toolCall","id":c,"name":"read","arguments":{"path":"a.png"}})
                }
            })
            .collect();
        self.assistant(Value::Array(blocks), "toolUse");
        // Now and then a silent reply slips in between the call and its results, sometimes
        // with a result written twice (a retried tool run), or a silent run follows the
        // results: prune-noreply must keep tool pairing no worse.
        let odd = self.tool_seq % 5;
        if odd == 1 || odd == 2 {
            self.silent();
        }
        for (k, c) in calls.iter().enumerate() {
            let mut content =
                vec![json!({"type":"text","text":self.media(&self.pad("ok"), k as u64 + 2)})];
            if self.rng.chance(50) {
                let img = self.image();
                content.push(img);
            }
            let result = json!({"role":"toolResult","toolCallId":c,"toolName":"read","content":content,"isError":false});
            self.message(result.clone());
            if odd == 1 && k == 0 {
                self.message(result);
            }
        }
        if odd == 4 {
            self.silent();
            self.silent();
        }
        self.reply();
    }
    fn transparent(&mut self) {
        match self.rng.below(6) {
            0 => self.push(
                "model_change",
                json!({"provider":"anthropic","modelId":"claude-opus-4"}),
            ),
            1 => self.push("thinking_level_change", json!({"thinkingLevel":"high"})),
            2 => self.push("session_info", json!({"name":"chat"})),
            3 => self.push(
                "custom",
                json!({"customType":"openclaw.cache-ttl","data":{"t":1}}),
            ),
            4 => {
                let target = self.ids[self.rng.below(self.ids.len())].clone();
                self.push("label", json!({"targetId": target, "label":"bookmark"}))
            }
            _ => {
                // Unknown types only at the end of the file order (see the runtime's opaque
                // entry handling).
                if self.cur == self.last_written {
                    self.push("x_future_entry", json!({"payload":{"k":[1,2,3]}}))
                } else {
                    self.push("custom", json!({"customType":"x","data":null}))
                }
            }
        };
    }
    /// The active path from `cur` to the root (ids).
    fn path(&self) -> Vec<String> {
        let parents = &self.parent_of;
        let mut out = Vec::new();
        let mut c = self.cur.clone();
        while let Some(id) = c {
            out.push(id.clone());
            c = parents.get(&id).cloned().flatten();
        }
        out.reverse();
        out
    }
    fn step(&mut self, allow_branch: bool) {
        match self.rng.below(16) {
            0 | 1 => {
                self.user(0);
                self.reply();
            }
            2 => {
                let n = 1 + self.rng.below(2);
                self.user(n);
                self.reply();
            }
            3 | 4 => {
                if self.rng.chance(50) {
                    self.user(0);
                }
                self.tool_round();
            }
            5 | 6 => {
                self.message(json!({"role":"user","content": HEARTBEAT}));
                self.silent();
            }
            7 | 8 => {
                let n = 2 + self.rng.below(3);
                for _ in 0..n {
                    self.silent();
                    if self.rng.chance(30) {
                        self.transparent();
                    }
                }
            }
            9 => {
                match self.rng.below(3) {
                    0 => {
                        let t = *self.rng.pick(LOOKALIKES);
                        self.assistant(json!([{"type":"text","text":t}]), "stop")
                    }
                    1 => self.assistant(json!([{"type":"text","text":"NO_REPLY"}]), "error"),
                    _ => self.assistant(json!([{"type":"text","text":"NO_REPLY"}]), "aborted"),
                };
            }
            10 => {
                self.push(
                    "custom_message",
                    json!({"customType":"note","content":"injected context","display":true}),
                );
            }
            11 => {
                let path = self.path();
                let first_kept = if path.is_empty() || self.rng.chance(20) {
                    None
                } else if self.rng.chance(10) {
                    // Possibly on another branch: then nothing before the compaction is kept.
                    Some(self.ids[self.rng.below(self.ids.len())].clone())
                } else {
                    Some(path[self.rng.below(path.len())].clone())
                };
                let id = self.push(
                    "compaction",
                    json!({"summary":"earlier work","tokensBefore":1234}),
                );
                let fk = first_kept.unwrap_or(id);
                let last = self.lines.pop().unwrap();
                let mut v: Value = serde_json::from_str(&last).unwrap();
                v["firstKeptEntryId"] = json!(fk);
                self.lines.push(v.to_string());
            }
            12 if allow_branch => {
                let path = self.path();
                if path.len() < 3 {
                    return;
                }
                let leaf = self.cur.clone();
                let fork = path[self.rng.below(path.len() - 1)].clone();
                self.cur = Some(fork.clone());
                for _ in 0..1 + self.rng.below(3) {
                    self.step(false);
                }
                let abandoned = self.cur.clone();
                if self.rng.chance(50) {
                    // Come back to where we were.
                    self.cur = leaf;
                } else {
                    // Or continue from the fork point, abandoning both continuations.
                    self.cur = Some(fork);
                }
                let summary = if self.rng.chance(70) {
                    "tried another way"
                } else {
                    ""
                };
                self.push(
                    "branch_summary",
                    json!({"fromId": abandoned, "summary": summary}),
                );
            }
            13 => self.transparent(),
            14 => {
                let n = 1 + self.rng.below(2);
                self.user(n);
                self.silent();
            }
            _ => {
                self.user(0);
                self.tool_round();
            }
        }
    }
}

/// Generate one transcript from a seed.
pub fn generate(seed: u64) -> Generated {
    build(seed, None)
}

/// A long transcript for compaction tests: `steps` generator steps (a few entries each),
/// longer texts, `read`/`edit`/`write` calls on varied paths, no torn last line.
pub fn generate_long(seed: u64, steps: usize) -> Generated {
    build(seed, Some(steps))
}

fn build(seed: u64, long_steps: Option<usize>) -> Generated {
    let mut g = G {
        rng: Rng::new(seed),
        lines: Vec::new(),
        ids: Vec::new(),
        cur: None,
        last_written: None,
        last_known: None,
        parent_of: Default::default(),
        clock: 1_772_400_000_000,
        next_id: seed * 1000,
        tool_seq: 0,
        long: long_steps.is_some(),
    };
    g.lines.push(
        json!({"type":"session","version":3,"id":format!("sess-{seed}"),"timestamp":"2026-03-01T00:00:00.000Z","cwd":"/work"})
            .to_string(),
    );
    g.push(
        "model_change",
        json!({"provider":"anthropic","modelId":"claude-sonnet-4-5"}),
    );
    g.push("thinking_level_change", json!({"thinkingLevel":"low"}));
    let steps = 12 + g.rng.below(30);
    let steps = long_steps.unwrap_or(steps);
    for i in 0..steps {
        g.step(true);
        if seed % 5 == 3 && i == steps / 2 {
            // A line JSON.parse accepts but this tool cannot decode: kept as it is.
            let id = g.id();
            let parent = g.cur.clone().unwrap_or_default();
            g.lines.push(format!(
                r#"{{"type":"custom","id":"{id}","parentId":"{parent}","timestamp":"2026-03-02T00:00:00.000Z","customType":"x","data":"\ud800"}}"#
            ));
            g.parent_of.insert(id.clone(), g.cur.clone());
            g.cur = Some(id.clone());
            g.last_written = Some(id);
        }
        if g.rng.chance(3) {
            g.lines.push(String::new());
        }
    }
    // End with a real turn so the leaf is a known entry most of the time.
    if g.rng.chance(70) {
        g.user(0);
        g.reply();
    } else {
        g.silent();
    }
    // A few CRLF line endings (both loaders accept them; untouched ones must stay as they are).
    let mut text = String::new();
    for line in &g.lines {
        text.push_str(line);
        if !line.is_empty() && g.rng.chance(4) {
            text.push('\r');
        }
        text.push('\n');
    }
    if g.rng.chance(30) && long_steps.is_none() {
        text.push_str(r#"{"type":"message","id":"torn","parentId":"#);
    }
    Generated {
        bytes: text.into_bytes(),
    }
}
