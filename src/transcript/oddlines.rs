//! Test-only: transcript lines of odd shapes, as raw JSON text.
//!
//! Entry-shaped objects whose members take every JSON type, with duplicate keys (the runtime
//! keeps the last), keys spelled with escapes, spaces around colons, escaped and non-ASCII
//! text, long base64 `data`, numbers beyond 64 bits, plus non-object and torn lines. The probe
//! tests read them two ways (the index's parse of the text, and the same probe over the value
//! `jsjson::parse` makes of it) and against the value-level rules.

use crate::compact::testgen::Rng;

fn pick<'a>(r: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[r.below(xs.len() as u64) as usize]
}

/// A JSON string of odd text.
pub fn text(r: &mut Rng) -> String {
    let n = if r.chance(30) { 1 } else { r.below(12) };
    let mut s = String::from("\"");
    for _ in 0..n {
        s.push_str(pick(
            r,
            &[
                "a",
                " ",
                "NO_REPLY",
                "HEARTBEAT_OK",
                "\\n",
                "\\\"",
                "\\\\",
                "é",
                "漢",
                "😀",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\t",
                "\\u0041",
                "**",
                "please fix the failing build",
                "System (untrusted): [x] Exec completed",
                "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.",
            ],
        ));
    }
    s.push('"');
    s
}

fn scalar(r: &mut Rng) -> String {
    match r.below(9) {
        0 => "null".into(),
        1 => "true".into(),
        2 => "false".into(),
        3 => pick(
            r,
            &[
                "0",
                "-0",
                "1.5",
                "1e3",
                "12345678901234567890123",
                "0.0",
                "2.50",
            ],
        )
        .into(),
        4 => "\"\"".into(),
        _ => text(r),
    }
}

fn value(r: &mut Rng, depth: u32) -> String {
    if depth > 3 || r.chance(60) {
        return scalar(r);
    }
    let n = r.below(4);
    if r.chance(50) {
        let items: Vec<String> = (0..n).map(|_| value(r, depth + 1)).collect();
        format!("[{}]", items.join(","))
    } else {
        let items: Vec<String> = (0..n)
            .map(|_| {
                let k = pick(r, &["a", "1", "10", "2", "path"]);
                format!("\"{k}\":{}", value(r, depth + 1))
            })
            .collect();
        format!("{{{}}}", items.join(","))
    }
}

/// An object of `members` in shuffled order, sometimes with one of them twice, keys sometimes
/// escaped and colons sometimes spaced.
fn object(r: &mut Rng, mut members: Vec<(String, String)>) -> String {
    for i in (1..members.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        members.swap(i, j);
    }
    if !members.is_empty() && r.chance(15) {
        let k = r.below(members.len() as u64) as usize;
        let name = members[k].0.clone();
        let v = if r.chance(50) {
            scalar(r)
        } else {
            members[k].1.clone()
        };
        members.push((name, v));
    }
    let body: Vec<String> = members
        .into_iter()
        .map(|(k, v)| {
            let key = if r.chance(3) {
                let mut chars = k.chars();
                let first = chars.next().expect("keys are not empty");
                format!("\"\\u{:04x}{}\"", first as u32, chars.as_str())
            } else {
                format!("\"{k}\"")
            };
            let w = if r.chance(5) { " " } else { "" };
            format!("{key}{w}:{w}{v}")
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

fn block(r: &mut Rng) -> String {
    if r.chance(5) {
        return scalar(r);
    }
    let ty = pick(
        r,
        &[
            "text",
            "text",
            "image",
            "thinking",
            "reasoning",
            "toolCall",
            "toolUse",
            "tool_use",
            "toolResult",
            "tool_result",
            "other",
        ],
    );
    let mut m = Vec::new();
    if !r.chance(5) {
        let t = if r.chance(5) {
            scalar(r)
        } else {
            format!("\"{ty}\"")
        };
        m.push(("type".to_string(), t));
    }
    for (k, p) in [
        ("text", 70),
        ("thinking", 30),
        ("name", 30),
        ("arguments", 30),
        ("content", 20),
        ("id", 30),
        ("data", 15),
    ] {
        if r.chance(p) {
            let v = match k {
                "arguments" => value(r, 0),
                "content" if r.chance(40) => {
                    let items: Vec<String> = (0..r.below(3)).map(|_| block(r)).collect();
                    format!("[{}]", items.join(","))
                }
                "data" if r.chance(50) => {
                    format!("\"{}\"", "QUJD".repeat(300 + r.below(10) as usize))
                }
                _ if r.chance(80) => text(r),
                _ => scalar(r),
            };
            m.push((k.to_string(), v));
        }
    }
    object(r, m)
}

fn content(r: &mut Rng) -> String {
    match r.below(10) {
        0 => scalar(r),
        1 => value(r, 0),
        2 | 3 => text(r),
        _ => {
            let items: Vec<String> = (0..r.below(5)).map(|_| block(r)).collect();
            format!("[{}]", items.join(","))
        }
    }
}

fn usage(r: &mut Rng) -> String {
    if r.chance(10) {
        return scalar(r);
    }
    let mut m = Vec::new();
    for k in ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] {
        if r.chance(70) {
            let v = if r.chance(80) {
                r.below(90_000).to_string()
            } else {
                scalar(r)
            };
            m.push((k.to_string(), v));
        }
    }
    if r.chance(20) {
        let state = pick(r, &["\"available\"", "\"unavailable\"", "\"x\"", "1"]);
        let total = r.below(500).to_string();
        let cu = object(
            r,
            vec![
                ("state".into(), state.into()),
                ("totalTokens".into(), total),
            ],
        );
        m.push(("contextUsage".into(), cu));
    }
    object(r, m)
}

/// A message object of any role (or an odd value in its place).
pub fn message(r: &mut Rng) -> String {
    if r.chance(4) {
        return scalar(r);
    }
    let role = pick(
        r,
        &[
            "user",
            "user",
            "assistant",
            "assistant",
            "toolResult",
            "custom",
            "bashExecution",
            "branchSummary",
            "compactionSummary",
            "weird",
        ],
    );
    let mut m = Vec::new();
    if !r.chance(4) {
        let v = if r.chance(4) {
            scalar(r)
        } else {
            format!("\"{role}\"")
        };
        m.push(("role".to_string(), v));
    }
    if r.chance(90) {
        m.push(("content".into(), content(r)));
    }
    if r.chance(40) {
        let stop = pick(r, &["stop", "toolUse", "error", "aborted", "length"]);
        m.push(("stopReason".into(), format!("\"{stop}\"")));
    }
    if r.chance(40) {
        m.push(("usage".into(), usage(r)));
    }
    for k in [
        "command",
        "output",
        "summary",
        "toolCallId",
        "tool_use_id",
        "isError",
    ] {
        if r.chance(10) {
            let v = if r.chance(70) { text(r) } else { scalar(r) };
            m.push((k.into(), v));
        }
    }
    object(r, m)
}

/// Line `n` of a transcript (`n` ≥ 1; ids `e<n>`, parents the line before).
pub fn line(r: &mut Rng, n: usize) -> String {
    match r.below(40) {
        0 => return value(r, 0),
        1 => return format!("[{},{}]", text(r), scalar(r)),
        2 => {
            let l = line(r, n);
            let mut cut = l.len() / 2;
            while !l.is_char_boundary(cut) {
                cut -= 1;
            }
            return l[..cut].to_string();
        }
        _ => {}
    }
    let ty = pick(
        r,
        &[
            "message",
            "message",
            "message",
            "custom_message",
            "branch_summary",
            "compaction",
            "custom",
            "label",
            "x",
        ],
    );
    let mut m = Vec::new();
    let t = if r.chance(3) {
        scalar(r)
    } else {
        format!("\"{ty}\"")
    };
    m.push(("type".to_string(), t));
    let id = if r.chance(5) {
        scalar(r)
    } else {
        format!("\"e{n}\"")
    };
    m.push(("id".into(), id));
    if r.chance(90) {
        let parent = if n > 1 {
            format!("\"e{}\"", n - 1)
        } else {
            "null".into()
        };
        m.push(("parentId".into(), parent));
    }
    if (ty == "message" && r.chance(80)) || r.chance(10) {
        m.push(("message".into(), message(r)));
    }
    if (ty == "custom_message" && r.chance(60)) || r.chance(10) {
        m.push(("content".into(), content(r)));
    }
    if ((ty == "branch_summary" || ty == "compaction") && r.chance(70)) || r.chance(5) {
        let v = if r.chance(70) { text(r) } else { scalar(r) };
        m.push(("summary".into(), v));
    }
    if ty == "compaction" && r.chance(80) {
        m.push((
            "firstKeptEntryId".into(),
            format!("\"e{}\"", r.below(n as u64 + 1)),
        ));
    }
    for k in [
        "customType",
        "display",
        "details",
        "timestamp",
        "targetId",
        "data",
    ] {
        if r.chance(8) {
            let v = if r.chance(70) { text(r) } else { value(r, 1) };
            m.push((k.into(), v));
        }
    }
    object(r, m)
}

/// A transcript of a header and `lines` odd lines, each terminated.
pub fn transcript(r: &mut Rng, lines: usize) -> String {
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n",
    );
    for n in 1..=lines {
        text.push_str(&line(r, n));
        text.push('\n');
    }
    text
}
