//! Transcript text in the runtime's JSONL format: header, model and thinking settings, user
//! and assistant turns with thinking and tool calls, tool results, small base64 images, runs
//! of silent `NO_REPLY` replies, a compaction and an abandoned branch.

use serde_json::{Value, json};

use super::{Rng, iso};

/// A 1×1 PNG, base64.
pub const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// What to put into a generated transcript.
#[derive(Clone, Copy, Default)]
pub struct Shape {
    pub turns: usize,
    pub images: bool,
    pub noreply_run: usize,
    pub compaction: bool,
    pub branch: bool,
}

impl Shape {
    pub fn random(rng: &mut Rng) -> Self {
        Shape {
            turns: rng.range(1, 4) as usize,
            images: rng.chance(0.3),
            noreply_run: if rng.chance(0.3) {
                rng.range(2, 4) as usize
            } else {
                0
            },
            compaction: rng.chance(0.2),
            branch: rng.chance(0.15),
        }
    }
}

struct Writer<'a> {
    rng: &'a mut Rng,
    lines: Vec<String>,
    ids: Vec<String>,
    clock: i64,
    leaf: Option<String>,
}

impl Writer<'_> {
    fn id(&mut self) -> String {
        loop {
            let id = self.rng.hex(8);
            if !self.ids.contains(&id) {
                self.ids.push(id.clone());
                return id;
            }
        }
    }

    /// Append an entry under the current leaf and make it the leaf.
    fn push(&mut self, kind: &str, mut extra: Value) -> String {
        self.clock += self.rng.range(50, 40_000);
        let id = self.id();
        let mut obj = json!({
            "type": kind,
            "id": id,
            "parentId": self.leaf,
            "timestamp": iso(self.clock),
        });
        let map = obj.as_object_mut().unwrap();
        for (k, v) in extra.as_object_mut().unwrap().iter() {
            map.insert(k.clone(), v.clone());
        }
        self.lines.push(obj.to_string());
        self.leaf = Some(id.clone());
        id
    }

    fn message(&mut self, message: Value) -> String {
        self.push("message", json!({ "message": message }))
    }

    fn user(&mut self, text: &str, image: bool) -> String {
        let ts = self.clock + 10;
        let content = if image {
            json!([{"type":"text","text":text},{"type":"image","data":TINY_PNG,"mimeType":"image/png"}])
        } else {
            json!(text)
        };
        self.message(json!({"role":"user","content":content,"timestamp":ts}))
    }

    fn assistant(&mut self, content: Value, stop: &str) -> String {
        let input = self.rng.range(200, 9000);
        let output = self.rng.range(1, 400);
        let ts = self.clock + 10;
        self.message(json!({
            "role":"assistant","content":content,"api":"anthropic-messages",
            "provider":"anthropic","model":"claude-sonnet-4-5",
            "usage":{"input":input,"output":output,"cacheRead":0,"cacheWrite":0,
                "totalTokens":input + output,
                "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
            "stopReason":stop,"timestamp":ts
        }))
    }

    fn tool_round(&mut self, image: bool) {
        let call_id = format!("toolu_{}", self.rng.hex(12));
        let path = self
            .rng
            .pick(&["notes/todo.md", "config/app.yaml", "src/main.rs"])
            .to_string();
        self.assistant(
            json!([
                {"type":"thinking","thinking":"Look at the file first.","thinkingSignature":"EqQB"},
                {"type":"toolCall","id":call_id,"name":"read","arguments":{"path":path}}
            ]),
            "toolUse",
        );
        let mut content = vec![json!({"type":"text","text":"line one\nline two\n"})];
        if image {
            content.push(json!({"type":"image","data":TINY_PNG,"mimeType":"image/png"}));
        }
        let ts = self.clock + 5;
        self.message(json!({
            "role":"toolResult","toolCallId":call_id,"toolName":"read",
            "content":content,"isError":false,"timestamp":ts
        }));
    }
}

/// A full transcript for `session_id`, starting at `start_ms`.
pub fn transcript(rng: &mut Rng, session_id: &str, start_ms: i64, shape: Shape) -> String {
    let mut w = Writer {
        rng,
        lines: Vec::new(),
        ids: Vec::new(),
        clock: start_ms,
        leaf: None,
    };
    w.lines.push(
        json!({"type":"session","version":3,"id":session_id,"timestamp":iso(start_ms),
            "cwd":"/home/ana/.openclaw/workspace"})
        .to_string(),
    );
    w.push(
        "model_change",
        json!({"provider":"anthropic","modelId":"claude-sonnet-4-5"}),
    );
    w.push("thinking_level_change", json!({"thinkingLevel":"low"}));
    let mut first_kept = None;
    for turn in 0..shape.turns.max(1) {
        let u = w.user(
            "Can you check the notes and summarise them?",
            shape.images && turn == 0,
        );
        if turn == 1 {
            first_kept = Some(u);
        }
        w.tool_round(shape.images && turn == 0);
        w.assistant(
            json!([{"type":"text","text":"Here is the summary: all good."}]),
            "stop",
        );
    }
    if shape.noreply_run > 0 {
        w.user("[cron] nightly check finished", false);
        for _ in 0..shape.noreply_run {
            w.assistant(json!([{"type":"text","text":"NO_REPLY"}]), "stop");
        }
    }
    if shape.compaction {
        let leaf = w.leaf.clone().unwrap();
        let first = first_kept.unwrap_or(leaf);
        w.push(
            "compaction",
            json!({"summary":"## Decisions\nThe user asked for summaries of the notes.",
                "firstKeptEntryId":first,"tokensBefore":5172,
                "details":{"readFiles":["notes/todo.md"],"modifiedFiles":[]},"fromHook":true}),
        );
    }
    if shape.branch {
        let fork = w.leaf.clone();
        w.user("Also restart the service.", false);
        let abandoned = w.assistant(
            json!([{"type":"text","text":"I can't do that here."}]),
            "stop",
        );
        w.leaf = fork;
        w.push(
            "branch_summary",
            json!({"fromId":abandoned,"summary":"Abandoned path: a restart was declined."}),
        );
        w.user("Instead, give me the restart command.", false);
        w.assistant(
            json!([{"type":"text","text":"Run: sudo systemctl restart app"}]),
            "stop",
        );
    }
    let mut text = w.lines.join("\n");
    text.push('\n');
    text
}

/// A transcript with only the header (the reference treats it as missing).
pub fn header_only(session_id: &str, start_ms: i64) -> String {
    json!({"type":"session","version":3,"id":session_id,"timestamp":iso(start_ms),
        "cwd":"/home/ana/.openclaw/workspace"})
    .to_string()
        + "\n"
}

/// A trajectory runtime file of the runtime's own shape.
pub fn trajectory_runtime(session_id: &str, start_ms: i64) -> String {
    format!(
        "{}\n{}\n",
        json!({"traceSchema":"openclaw-trajectory","schemaVersion":1,"source":"runtime","sessionId":session_id}),
        json!({"type":"turn","ts":iso(start_ms),"tokens":1234})
    )
}

/// A trajectory pointer naming `runtime_file`.
pub fn trajectory_pointer(session_id: &str, runtime_file: &str) -> String {
    json!({"traceSchema":"openclaw-trajectory-pointer","schemaVersion":1,
        "sessionId":session_id,"runtimeFile":runtime_file})
    .to_string()
        + "\n"
}

/// A transcript for `--fix-missing`'s "no message record" rule: a header, settings and entries
/// that only look like messages (a `type` of `null`, unknown roles, a `role` inside `data`,
/// arrays and strings), sometimes one real message record (`role` without `type`, or a
/// `message` object) or a line that does not parse, with CRLF, blank lines or a BOM now and
/// then; padded to a size just under, at or just over the 4096-byte limit.
pub fn messageless(rng: &mut Rng, session_id: &str, start_ms: i64) -> Vec<u8> {
    let nl = if rng.chance(0.2) { "\r\n" } else { "\n" };
    let mut lines = vec![
        json!({"type":"session","version":3,"id":session_id,"timestamp":iso(start_ms),
            "cwd":"/home/ana/.openclaw/workspace"})
        .to_string(),
        json!({"type":"model_change","id":rng.hex(8),"parentId":null,"timestamp":iso(start_ms),
            "provider":"anthropic","modelId":"claude-sonnet-4-5"})
        .to_string(),
    ];
    let look_alikes = [
        r#"{"type":"custom","customType":"note","data":{"role":"user"}}"#,
        r#"{"type":null,"role":"user","content":"hi"}"#,
        r#"{"role":"narrator","content":"hi"}"#,
        r#"{"message":{"role":"robot"}}"#,
        r#"{"message":"user"}"#,
        r#"[{"role":"user"}]"#,
        r#""just a string""#,
        "   ",
        "",
    ];
    for _ in 0..rng.range(0, 4) {
        lines.push(rng.pick(&look_alikes).to_string());
    }
    match rng.below(10) {
        0 => lines.push(r#"{"role":"user","content":"a bare message"}"#.to_string()),
        1 => lines.push(r#"{"message":{"role":"assistant","content":[]}}"#.to_string()),
        2 => lines.push(r#"{"type":"message","id":"x"}"#.to_string()),
        3 if rng.chance(0.5) => lines.push("{not json".to_string()),
        _ => {}
    }
    let target = *rng.pick(&[600, 4000, 4090, 4095, 4096, 4096, 4097, 4098, 4200]);
    let used: usize = lines.iter().map(|l| l.len() + nl.len()).sum();
    let pad_frame = json!({"type":"custom","customType":"pad","data":""})
        .to_string()
        .len()
        + nl.len();
    if used + pad_frame < target {
        let pad = "p".repeat(target - used - pad_frame);
        lines.push(json!({"type":"custom","customType":"pad","data":pad}).to_string());
    }
    let mut text: String = lines.iter().map(|l| format!("{l}{nl}")).collect();
    if rng.chance(0.05) {
        text.insert(0, '\u{feff}');
    }
    text.into_bytes()
}
