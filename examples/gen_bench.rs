//! Deterministic generator of benchmark inputs (see `scripts/bench.sh`).
//!
//!   cargo run --release --example gen_bench -- store DIR [SESSIONS] [MEAN_KB]
//!   cargo run --release --example gen_bench -- transcript FILE [MB]
//!   cargo run --release --example gen_bench -- huge-reply FILE [MB]
//!   cargo run --release --example gen_bench -- huge-message FILE [MB]
//!   cargo run --release --example gen_bench -- entries DIR [ENTRIES] [TRANSCRIPTS]
//!
//! `store` writes a state dir `DIR/agents/main/sessions/` with `sessions.json`, one transcript
//! per session (user and tool-result images, tool output, thinking, runs of silent NO_REPLY
//! replies), archives and orphans, plus `DIR/openclaw.json`. `transcript` writes one large
//! transcript of about MB megabytes. `huge-reply` writes a transcript whose one assistant
//! reply of about MB megabytes follows two silent `NO_REPLY`s (so `prune-noreply` re-parents that
//! line); `huge-message` one of 131 lines: 128 ordinary messages (about 75 KB each), a user
//! message of about MB megabytes, and a tool result with an image. The same arguments always
//! give the same bytes, apart from ages, which are relative to the time of generation.
//! `entries` writes a state dir like `store` whose `sessions.json` has ENTRIES (default 200,000)
//! small entries, mostly cron runs, of which TRANSCRIPTS (default 3,000) have a small transcript
//! (about 4 KB): the neglected store whose size, not its transcripts, is what costs memory.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }
    fn uuid(&mut self) -> String {
        format!(
            "{}-{}-4{}-a{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }
    /// `len` characters of base64 alphabet (len rounded to a multiple of 4).
    fn base64(&mut self, len: usize) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let len = len / 4 * 4;
        let mut s = Vec::with_capacity(len);
        while s.len() < len {
            let mut x = self.next();
            for _ in 0..10 {
                s.push(A[(x & 63) as usize]);
                x >>= 6;
            }
        }
        s.truncate(len);
        String::from_utf8(s).unwrap()
    }
    /// About `mb` megabytes of words (a block of them, repeated).
    fn huge_text(&mut self, mb: u64) -> String {
        let block = self.words(1 << 16);
        block.repeat(((mb << 20) / block.len() as u64).max(1) as usize)
    }
    fn words(&mut self, n: usize) -> String {
        const W: &[&str] = &[
            "the", "config", "port", "service", "deploy", "error", "log", "user", "file", "build",
            "check", "restart", "value", "again", "please", "why", "fails", "cache", "token",
            "request", "timeout", "database", "index", "review", "merge", "test", "release",
        ];
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(W[self.below(W.len() as u64) as usize]);
        }
        out
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, s) = (secs / 86_400, secs % 86_400);
    // civil-from-days (Howard Hinnant).
    let z = d as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// Writes one transcript entry per call and tracks ids, parents and time.
struct Writer<W: Write> {
    out: W,
    rng: Rng,
    parent: Option<String>,
    t: u64,
    bytes: u64,
    call: u64,
    /// Ids used so far: 8 hex digits, like the runtime's, but never twice in one file.
    ids: std::collections::HashSet<String>,
}

impl<W: Write> Writer<W> {
    fn new_id(&mut self) -> String {
        loop {
            let id = self.rng.hex(8);
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }
    fn line(&mut self, s: &str) {
        self.out.write_all(s.as_bytes()).unwrap();
        self.out.write_all(b"\n").unwrap();
        self.bytes += s.len() as u64 + 1;
    }
    fn entry(&mut self, body: &str) {
        let id = self.new_id();
        let parent = self
            .parent
            .as_ref()
            .map_or("null".to_string(), |p| format!("\"{p}\""));
        self.t += 1000 + self.rng.below(60_000);
        let line = format!(
            "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"{}\",\"message\":{body}}}",
            iso(self.t)
        );
        self.line(&line);
        self.parent = Some(id);
    }
    fn usage(&mut self) -> String {
        let i = 1000 + self.rng.below(50_000);
        format!(
            "{{\"input\":{i},\"output\":120,\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":{},\"cost\":{{\"input\":0.003,\"output\":0.0018,\"cacheRead\":0,\"cacheWrite\":0,\"total\":0.0048}}}}",
            i + 120
        )
    }
    fn assistant(&mut self, content: &str, stop: &str) {
        let usage = self.usage();
        let body = format!(
            "{{\"role\":\"assistant\",\"content\":[{content}],\"api\":\"anthropic-messages\",\"provider\":\"anthropic\",\"model\":\"claude-sonnet-4-5\",\"usage\":{usage},\"stopReason\":\"{stop}\",\"timestamp\":{}}}",
            self.t
        );
        self.entry(&body);
    }
    fn image(&mut self, kb: u64) -> String {
        let data = self.rng.base64((kb * 1024) as usize);
        format!("{{\"type\":\"image\",\"data\":\"{data}\",\"mimeType\":\"image/png\"}}")
    }
    /// One conversational turn: user (maybe with an image), tool round(s), reply.
    fn turn(&mut self, image_pct: u64, image_kb: u64, tool_kb: u64) {
        let n = 8 + self.rng.below(30) as usize;
        let text = self.rng.words(n);
        let user = if self.rng.chance(image_pct) {
            let kb = image_kb / 2 + self.rng.below(image_kb);
            let img = self.image(kb);
            format!("[{{\"type\":\"text\",\"text\":\"{text}\"}},{img}]")
        } else {
            format!("\"{text}\"")
        };
        let body = format!(
            "{{\"role\":\"user\",\"content\":{user},\"timestamp\":{}}}",
            self.t
        );
        self.entry(&body);
        for _ in 0..self.rng.below(3) {
            self.call += 1;
            let call = format!("toolu_{:08}", self.call);
            let thinking = self.rng.words(20);
            let tool = ["read", "exec", "edit", "browser"][self.rng.below(4) as usize];
            let path = format!("src/{}.rs", self.rng.hex(6));
            let sig = self.rng.base64(64);
            self.assistant(
                &format!(
                    "{{\"type\":\"thinking\",\"thinking\":\"{thinking}\",\"thinkingSignature\":\"{}\"}},{{\"type\":\"toolCall\",\"id\":\"{call}\",\"name\":\"{tool}\",\"arguments\":{{\"path\":\"{path}\"}}}}",
                    sig
                ),
                "toolUse",
            );
            let n = (tool_kb * 1024 / 6 + self.rng.below(tool_kb * 200)) as usize;
            let output = self.rng.words(n);
            let mut content = format!("{{\"type\":\"text\",\"text\":\"{output}\"}}");
            if tool == "browser" && self.rng.chance(60) {
                content.push(',');
                let kb = image_kb / 2 + self.rng.below(image_kb);
                content.push_str(&self.image(kb));
            }
            let body = format!(
                "{{\"role\":\"toolResult\",\"toolCallId\":\"{call}\",\"toolName\":\"{tool}\",\"content\":[{content}],\"isError\":false,\"timestamp\":{}}}",
                self.t
            );
            self.entry(&body);
        }
        let n = 10 + self.rng.below(60) as usize;
        let reply = self.rng.words(n);
        self.assistant(
            &format!("{{\"type\":\"text\",\"text\":\"{reply}\"}}"),
            "stop",
        );
    }
    /// A heartbeat prompt answered by a run of 1 to 6 silent replies, the later ones each
    /// woken by a `custom` event entry (transparent to runs, so `prune-noreply` has work).
    fn silent_run(&mut self) {
        let body = format!(
            "{{\"role\":\"user\",\"content\":\"Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK.\",\"timestamp\":{}}}",
            self.t
        );
        self.entry(&body);
        for k in 0..1 + self.rng.below(6) {
            if k > 0 {
                self.custom("openclaw:system-event", "{\"event\":\"wake\"}");
            }
            let token =
                ["NO_REPLY", "no_reply", "**NO_REPLY**", "`NO_REPLY`"][self.rng.below(4) as usize];
            self.assistant(
                &format!("{{\"type\":\"text\",\"text\":\"{token}\"}}"),
                "stop",
            );
        }
    }
    /// A `custom` entry (extension state, not part of the model's context).
    fn custom(&mut self, custom_type: &str, data: &str) {
        let id = self.new_id();
        let parent = self
            .parent
            .as_ref()
            .map_or("null".to_string(), |p| format!("\"{p}\""));
        self.t += 1000 + self.rng.below(60_000);
        let line = format!(
            "{{\"type\":\"custom\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"{}\",\"customType\":\"{custom_type}\",\"data\":{data}}}",
            iso(self.t)
        );
        self.line(&line);
        self.parent = Some(id);
    }
}

fn write_transcript(path: &Path, seed: u64, session_id: &str, start: u64, target: u64) -> u64 {
    let mut w = writer(path, seed, start, session_id);
    let image_pct = if w.rng.chance(40) { 30 } else { 3 };
    while w.bytes < target {
        if w.rng.chance(15) {
            w.silent_run();
        } else {
            w.turn(image_pct, 60, 4);
        }
    }
    w.out.flush().unwrap();
    w.bytes
}

/// A transcript with one line of about `mb` megabytes: a user prompt answered by two silent
/// `NO_REPLY`s, then an assistant reply of `mb` MB whose parent is the second one, then a
/// last user message (so that `prune-noreply` removes the second silent reply and re-parents
/// the huge line).
fn write_huge_reply(path: &Path, session_id: &str, start: u64, mb: u64) -> u64 {
    let mut w = writer(path, 0x4e6_7e91, start, session_id);
    w.entry(&format!(
        "{{\"role\":\"user\",\"content\":\"ping\",\"timestamp\":{}}}",
        w.t
    ));
    for _ in 0..2 {
        w.assistant("{\"type\":\"text\",\"text\":\"NO_REPLY\"}", "stop");
    }
    let text = w.rng.huge_text(mb);
    w.assistant(
        &format!("{{\"type\":\"text\",\"text\":\"{text}\"}}"),
        "stop",
    );
    w.entry(&format!(
        "{{\"role\":\"user\",\"content\":\"thanks\",\"timestamp\":{}}}",
        w.t
    ));
    w.out.flush().unwrap();
    w.bytes
}

/// A transcript of 131 lines: the header, 64 turns of about 70 KB per message, a user
/// message of about `mb` megabytes, and a tool result with a 1 MB image.
fn write_huge_message(path: &Path, session_id: &str, start: u64, mb: u64) -> u64 {
    let mut w = writer(path, 0x4e6_7e92, start, session_id);
    for _ in 0..64 {
        let text = w.rng.words(12_000);
        w.entry(&format!(
            "{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":{}}}",
            w.t
        ));
        let reply = w.rng.words(12_000);
        w.assistant(
            &format!("{{\"type\":\"text\",\"text\":\"{reply}\"}}"),
            "stop",
        );
    }
    let text = w.rng.huge_text(mb);
    w.entry(&format!(
        "{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"timestamp\":{}}}",
        w.t
    ));
    let img = w.image(1024);
    w.entry(&format!(
        "{{\"role\":\"toolResult\",\"toolCallId\":\"toolu_1\",\"toolName\":\"browser\",\"content\":[{{\"type\":\"text\",\"text\":\"shot\"}},{img}],\"isError\":false,\"timestamp\":{}}}",
        w.t
    ));
    w.out.flush().unwrap();
    w.bytes
}

/// A writer of a new transcript at `path`, its session header written.
fn writer(path: &Path, seed: u64, start: u64, session_id: &str) -> Writer<BufWriter<File>> {
    let mut w = Writer {
        out: BufWriter::with_capacity(1 << 20, File::create(path).unwrap()),
        rng: Rng(seed),
        parent: None,
        t: start,
        bytes: 0,
        call: 0,
        ids: std::collections::HashSet::new(),
    };
    let header = format!(
        "{{\"type\":\"session\",\"version\":3,\"id\":\"{session_id}\",\"timestamp\":\"{}\",\"cwd\":\"/home/op/.openclaw/workspace\"}}",
        iso(start)
    );
    w.line(&header);
    w
}

fn gen_store(dir: &Path, sessions: u64, mean_kb: u64) {
    let sdir = dir.join("agents/main/sessions");
    fs::create_dir_all(&sdir).unwrap();
    let mut rng = Rng(0x5eed_0001);
    let now = now_ms();
    let day = 86_400_000u64;
    let mut store = String::from("{");
    let mut total = 0u64;
    for i in 0..sessions {
        let id = rng.uuid();
        let key = match rng.below(10) {
            0 => format!("agent:main:telegram:group:-100{}", rng.below(1_000_000)),
            1 => format!("agent:main:cron:{}:run:{}", rng.hex(8), rng.uuid()),
            2 => format!("agent:main:subagent:{}", rng.uuid()),
            3 => format!(
                "agent:main:discord:channel:{}:thread:{}",
                rng.below(1 << 40),
                rng.below(1 << 40)
            ),
            4 => "agent:main:heartbeat".to_string() + &format!(":{i}"),
            _ => format!("agent:main:telegram:direct:{}", rng.below(1 << 40)),
        };
        let age = rng.below(90 * day);
        let updated = now - age;
        let target = mean_kb * 1024 / 10 + rng.below(mean_kb * 1024 * 18 / 10);
        total += write_transcript(
            &sdir.join(format!("{id}.jsonl")),
            rng.next(),
            &id,
            updated - 3_600_000,
            target,
        );
        if i > 0 {
            store.push(',');
        }
        store.push_str(&format!(
            "\n  \"{key}\": {{\n    \"sessionId\": \"{id}\",\n    \"updatedAt\": {updated},\n    \"chatType\": \"direct\",\n    \"label\": \"session {}\"\n  }}",
            i % 17
        ));
    }
    store.push_str("\n}");
    fs::write(sdir.join("sessions.json"), &store).unwrap();
    // Archives and orphans, a few percent of the sessions.
    for i in 0..sessions / 20 {
        let id = rng.uuid();
        let ts = iso(now - rng.below(60 * day)).replace(':', "-");
        let name = if i % 2 == 0 {
            format!("{id}.jsonl.deleted.{ts}")
        } else {
            format!("{id}.jsonl")
        };
        total += write_transcript(
            &sdir.join(name),
            rng.next(),
            &id,
            now - 70 * day,
            mean_kb * 512,
        );
    }
    fs::write(
        dir.join("openclaw.json"),
        "{\n  // benchmark config\n  session: { maintenance: { mode: \"enforce\", pruneAfter: \"30d\", maxEntries: 2000, maxDiskBytes: \"1gb\" } },\n}\n",
    )
    .unwrap();
    eprintln!(
        "store: {sessions} sessions, {} MB of files in {}",
        total >> 20,
        sdir.display()
    );
}

fn gen_entries(dir: &Path, entries: u64, transcripts: u64) {
    let sdir = dir.join("agents/main/sessions");
    fs::create_dir_all(&sdir).unwrap();
    let mut rng = Rng(0x5eed_0002);
    let now = now_ms();
    let day = 86_400_000u64;
    let every = (entries / transcripts.max(1)).max(1);
    let mut store = String::from("{");
    let mut total = 0u64;
    for i in 0..entries {
        let id = rng.uuid();
        let key = match rng.below(20) {
            0 => format!("agent:main:telegram:direct:{}", rng.below(1 << 40)),
            1 => format!("agent:main:subagent:{}", rng.uuid()),
            _ => format!("agent:main:cron:{}:run:{}", rng.hex(8), rng.uuid()),
        };
        let updated = now - rng.below(90 * day);
        if i % every == 0 && i / every < transcripts {
            total += write_transcript(
                &sdir.join(format!("{id}.jsonl")),
                rng.next(),
                &id,
                updated - 60_000,
                4096,
            );
        }
        if i > 0 {
            store.push(',');
        }
        store.push_str(&format!(
            "\n  \"{key}\": {{\n    \"sessionId\": \"{id}\",\n    \"updatedAt\": {updated}\n  }}"
        ));
    }
    store.push_str("\n}");
    fs::write(sdir.join("sessions.json"), &store).unwrap();
    fs::write(
        dir.join("openclaw.json"),
        "{\n  // benchmark config\n  session: { maintenance: { mode: \"enforce\", pruneAfter: \"30d\", maxEntries: 100000, maxDiskBytes: \"1gb\" } },\n}\n",
    )
    .unwrap();
    eprintln!(
        "entries: {entries} entries ({} MB), {transcripts} transcripts ({} MB) in {}",
        store.len() >> 20,
        total >> 20,
        sdir.display()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("store") if args.len() >= 2 => {
            let sessions = args.get(2).map_or(3000, |s| s.parse().unwrap());
            let mean_kb = args.get(3).map_or(500, |s| s.parse().unwrap());
            gen_store(Path::new(&args[1]), sessions, mean_kb);
        }
        Some("entries") if args.len() >= 2 => {
            let entries = args.get(2).map_or(200_000, |s| s.parse().unwrap());
            let transcripts = args.get(3).map_or(3000, |s| s.parse().unwrap());
            gen_entries(Path::new(&args[1]), entries, transcripts);
        }
        Some(kind @ ("transcript" | "huge-reply" | "huge-message")) if args.len() >= 2 => {
            let path = Path::new(&args[1]);
            if let Some(p) = path.parent() {
                fs::create_dir_all(p).unwrap();
            }
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let start = now_ms() - 86_400_000;
            let n = match kind {
                "transcript" => {
                    let mb: u64 = args.get(2).map_or(500, |s| s.parse().unwrap());
                    write_transcript(path, 0xb16_f11e, &stem, start, mb << 20)
                }
                "huge-reply" => {
                    let mb: u64 = args.get(2).map_or(180, |s| s.parse().unwrap());
                    write_huge_reply(path, &stem, start, mb)
                }
                _ => {
                    let mb: u64 = args.get(2).map_or(180, |s| s.parse().unwrap());
                    write_huge_message(path, &stem, start, mb)
                }
            };
            eprintln!("{kind}: {} MB in {}", n >> 20, path.display());
        }
        _ => {
            eprintln!(
                "usage: gen_bench store DIR [SESSIONS] [MEAN_KB] | gen_bench entries DIR [ENTRIES] [TRANSCRIPTS] | gen_bench transcript|huge-reply|huge-message FILE [MB]"
            );
            std::process::exit(2);
        }
    }
}
