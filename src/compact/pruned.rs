//! Entries parsed with only the fields a reader looks at.
//!
//! A transcript line is mostly bookkeeping that a summary never reads (provider, model,
//! `usage`, signatures, …). [`parse`] builds the entry as a [`Light`] tree (strings borrowed
//! from the line) keeping, at the three levels the summary reads (the entry, its `message`,
//! and the blocks of a `content` array), only the members [`Keep`] names; everything else is
//! skipped by the parser without being built. Kept members are whole values, read as
//! `jsjson::parse` reads them (a repeated name means its last value, numbers keep their text;
//! [`Light::to_value`] gives the `Value` `jsjson::parse` would).
//!
//! The result is not the entry: it is the entry as seen by a reader that only asks for the
//! kept members. [`SUMMARY`] lists what the summary of a compacted range and the entry
//! reader's id check look at.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::view::Light;

/// The members kept at each level.
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    /// Of the entry.
    pub entry: &'static [&'static str],
    /// Of `entry.message`.
    pub message: &'static [&'static str],
    /// Of each block of an array `content` (of the entry or of its message).
    pub block: &'static [&'static str],
}

/// What the summary of a summarised range is built from (`summary::SummaryBuilder::push`):
/// the context message the runtime makes of an entry (`compact::context_message`), its
/// classification (`classify`: heartbeats, silent replies, exec events, meaningful text), the
/// tools called with their arguments (files), a tool result's `isError`, `toolName`,
/// `toolCallId` and `details` (failures), and user requests. Provider usage is not read.
pub const SUMMARY: Keep = Keep {
    entry: &[
        "type",
        "id",
        "message",
        "customType",
        "content",
        "display",
        "details",
        "timestamp",
        "summary",
        "fromId",
        "tokensBefore",
        "firstKeptEntryId",
    ],
    message: &[
        "role",
        "content",
        "stopReason",
        "command",
        "output",
        "summary",
        "display",
        "excludeFromContext",
        "isError",
        "toolName",
        "toolCallId",
        "details",
    ],
    block: &["type", "text", "thinking", "name", "arguments", "content"],
};

/// Parse one line (without its terminator) keeping only what `keep` names.
pub fn parse<'a>(bytes: &'a [u8], keep: &Keep) -> serde_json::Result<Light<'a>> {
    let seed = Pruned {
        level: Level::Entry,
        keep,
    };
    crate::jsjson::deserialize(bytes, seed)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Entry,
    Message,
    /// A `content` value: blocks when it is an array.
    Content,
    Block,
    /// Below the levels: kept whole.
    Whole,
}

#[derive(Clone, Copy)]
struct Pruned<'k> {
    level: Level,
    keep: &'k Keep,
}

impl Pruned<'_> {
    /// Whether member `key` of an object at this level is kept.
    fn keeps(&self, key: &str) -> bool {
        let names = match self.level {
            Level::Entry => self.keep.entry,
            Level::Message => self.keep.message,
            Level::Block => self.keep.block,
            // A `content` object (not blocks) is kept whole, like any value below the levels.
            Level::Content | Level::Whole => return true,
        };
        names.contains(&key)
    }

    /// The seed of kept member `key` of an object at this level (a member of a `content`
    /// object, or of anything below the levels, is a whole value).
    fn child(&self, key: &str) -> Pruned<'_> {
        let level = match (self.level, key) {
            (Level::Entry, "message") => Level::Message,
            (Level::Entry | Level::Message, "content") => Level::Content,
            _ => Level::Whole,
        };
        Pruned {
            level,
            keep: self.keep,
        }
    }
}

/// serde_json's private name of an arbitrary-precision number (a one-member map).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = Light<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Light<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned<'_> {
    type Value = Light<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Light<'de>, E> {
        Ok(Light::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Light<'de>, E> {
        Ok(Light::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Light<'de>, E> {
        Ok(Light::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Light<'de>, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Light::Null, Light::Number))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Light<'de>, E> {
        Ok(Light::String(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Light<'de>, E> {
        Ok(Light::String(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Light<'de>, E> {
        Ok(Light::String(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Light<'de>, E> {
        Ok(Light::Null)
    }
    fn visit_none<E>(self) -> Result<Light<'de>, E> {
        Ok(Light::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Light<'de>, A::Error> {
        let item = Pruned {
            level: match self.level {
                Level::Content => Level::Block,
                _ => Level::Whole,
            },
            keep: self.keep,
        };
        let mut items = Vec::new();
        while let Some(v) = a.next_element_seed(item)? {
            items.push(v);
        }
        Ok(Light::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Light<'de>, A::Error> {
        let mut members = Vec::new();
        let mut first = true;
        while let Some(key) = a.next_key_seed(crate::transcript::probe::Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                let text: Cow<'de, str> = a.next_value_seed(crate::transcript::probe::Key)?;
                let n = text
                    .parse::<serde_json::Number>()
                    .map_err(de::Error::custom)?;
                return Ok(Light::Number(n));
            }
            if !self.keeps(&key) {
                a.next_value::<IgnoredAny>()?;
                continue;
            }
            let v = a.next_value_seed(self.child(&key))?;
            members.push((key, v));
        }
        Ok(Light::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::compact::summary::{self, SummaryBuilder};
    use crate::compact::testgen::{self, PathBuilder, Rng};

    /// Generated entries of every kind the readers look at.
    fn entries(rng: &mut Rng) -> Vec<Value> {
        let turns = 1 + rng.below(12) as usize;
        let mut b = PathBuilder::random(rng, turns);
        for k in 0..30 {
            let m = testgen::message(rng, 1000 + k);
            b.message(m);
        }
        b.message(
            json!({"role":"toolResult","toolCallId":"c9","toolName":"exec","isError":true,
            "details":{"status":"failed","exitCode":2},"content":[{"type":"text","text":"boom"}]}),
        );
        b.message(json!({"role":"user","content":"System (untrusted): [x] Exec completed ok"}));
        b.message(json!({"role":"user","content":"Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK."}));
        b.message(json!({"role":"assistant","content":[{"type":"text","text":"NO_REPLY"}],"stopReason":"stop"}));
        b.push("custom_message", json!({"customType":"k","content":[{"type":"text","text":"note"}],"display":false,"details":{"a":1}}));
        b.push(
            "branch_summary",
            json!({"summary":"went elsewhere","fromId":"x"}),
        );
        b.push(
            "compaction",
            json!({"summary":"earlier","firstKeptEntryId":"x","tokensBefore":12}),
        );
        b.entries
    }

    /// Lines a `Value` cannot hold as written (names given twice, escapes, numbers in odd
    /// spellings, values of the wrong kind) summarise through the light tree as through
    /// `jsjson::parse`, one line at a time and all together.
    #[test]
    fn odd_lines_summarise_as_their_full_values() {
        let lines = [
            r#"{"type":"message","id":"1","timestamp":"t1","message":{"role":"user","content":"first"},"message":{"role":"user","content":"second \"quoted\" \u00e9"}}"#,
            r#"{"type":"message","id":"2","timestamp":"t2","message":{"role":"assistant","role":"user","content":[{"type":"text","text":"x","text":"  "}]}}"#,
            r#"{"type":"message","id":"3","timestamp":7,"message":{"role":"toolResult","toolCallId":"c1","toolName":"exec","isError":true,"isError":1,"content":"boom"}}"#,
            r#"{"type":"message","id":"4","message":{"role":"toolResult","toolCallId":"c2","toolName":" ","isError":true,"details":{"status":"failed","exitCode":2.50e0,"exitCode":-0.0},"content":[{"type":"text","text":"a\nb"},"s",3]}}"#,
            r#"{"type":"message","id":"5","message":{"role":"assistant","content":[{"type":"toolCall","name":"read","arguments":{"path":"/a","path":"/b"}},{"type":"toolCall","name":"write","arguments":"{\"path\":\"/c\"}"},{"type":"toolCall","name":"edit","arguments":{"path":""}}]}}"#,
            r#"{"type":"message","id":"6","message":{"role":"custom","display":0,"content":[{"type":"thinking"},{"type":"image"},{"text":"untyped"}]}}"#,
            r#"{"type":"message","id":"7","message":{"role":"bashExecution","command":"ls","output":"NO_REPLY","excludeFromContext":"yes"}}"#,
            r#"{"type":"message","id":"8","message":{"role":"assistant","stopReason":"aborted","content":"NO_REPLY"}}"#,
            r#"{"type":"message","id":"9","message":{"role":"user","content":"[OpenClaw heartbeat poll]"}}"#,
            r#"{"type":"message","id":"10","message":{"role":"assistant","content":[{"type":"text","text":"HEARTBEAT_OK"}]}}"#,
            r#"{"type":"message","id":"11","message":"not an object"}"#,
            r#"{"type":"message","id":"12"}"#,
            r#"{"type":"custom_message","id":"13","customType":"k","content":"note","display":true,"timestamp":"t13"}"#,
            r#"{"type":"branch_summary","id":"14","summary":"went\u0020elsewhere","fromId":"x"}"#,
            r#"{"type":"compaction","id":"15","summary":"earlier","tokensBefore":1e3,"firstKeptEntryId":"x"}"#,
            r#"{"type":"message","id":"16","timestamp":"t16","message":{"role":"user","content":[{"type":"text","text":"System (untrusted): [x] Exec completed"}]}}"#,
        ];
        let done = |b| summary::finish(b, None, None, "t 0", "2026-01-01T00:00:00.000Z");
        let (mut full_all, mut light_all) = (SummaryBuilder::default(), SummaryBuilder::default());
        for line in lines {
            let full = crate::jsjson::parse(line.as_bytes()).unwrap();
            let light = parse(line.as_bytes(), &SUMMARY).unwrap();
            let (mut f, mut l) = (SummaryBuilder::default(), SummaryBuilder::default());
            f.push(&full);
            l.push(&light);
            assert_eq!(done(l), done(f), "{line}");
            full_all.push(&full);
            light_all.push(&light);
        }
        assert_eq!(done(light_all), done(full_all));
    }

    #[test]
    fn summaries_are_the_same_through_pruned_entries() {
        for seed in 0..12 {
            let mut rng = Rng::new(seed);
            let all = entries(&mut rng);
            let mut full_summary = SummaryBuilder::default();
            let mut pruned_summary = SummaryBuilder::default();
            for e in &all {
                let line = crate::jsjson::to_string_compact(e);
                let full = crate::jsjson::parse(line.as_bytes()).unwrap();
                let pruned = parse(line.as_bytes(), &SUMMARY).unwrap();
                assert_eq!(pruned.to_value()["id"], full["id"]);
                full_summary.push(&full);
                pruned_summary.push(&pruned);
            }
            let done = |b| summary::finish(b, None, None, "t 0", "2026-01-01T00:00:00.000Z");
            assert_eq!(done(pruned_summary), done(full_summary), "seed {seed}");
        }
    }

    #[test]
    fn keeps_the_named_members_whole_and_nothing_else() {
        let line = br#"{"type":"message","id":"a","parentId":null,"n":1.50,"message":{"role":"assistant","model":"m","usage":{"input":1,"cost":{"total":0.5}},"content":[{"type":"text","text":"t\n","sig":"x"},{"type":"toolCall","name":"exec","id":"c","arguments":{"2":1,"b":[1.0,{"x":1}],"1":2}},"s",7],"stopReason":"stop","role":"user"}}"#;
        let v = parse(line, &SUMMARY).unwrap().to_value();
        assert_eq!(
            v,
            json!({"type":"message","id":"a","message":{"role":"user",
                "content":[{"type":"text","text":"t\n"},{"type":"toolCall","name":"exec","arguments":{"1":2,"2":1,"b":[1.0,{"x":1}]}},"s",7],
                "stopReason":"stop"}})
        );
        // Number text survives as `jsjson::parse` keeps it.
        let full = crate::jsjson::parse(line).unwrap();
        let args = &v["message"]["content"][1]["arguments"];
        assert_eq!(args, &full["message"]["content"][1]["arguments"]);
        assert_eq!(
            crate::jsjson::to_string_compact(args),
            crate::jsjson::to_string_compact(&full["message"]["content"][1]["arguments"])
        );
        // Non-object messages and content, numbers where objects are expected.
        for line in [
            r#"{"type":"message","id":"a","message":"text"}"#,
            r#"{"type":"message","id":"a","message":12.50}"#,
            r#"{"type":"message","id":"a","message":{"role":"user","content":{"k":[1]}}}"#,
            r#"{"type":"custom_message","id":"a","content":[{"type":"text","text":"x","y":1},3.0e2]}"#,
            r#"{"type":"compaction","id":"a","summary":"s","firstKeptEntryId":"b","tokensBefore":1e3}"#,
        ] {
            let v = parse(line.as_bytes(), &SUMMARY).unwrap().to_value();
            let mut want = crate::jsjson::parse(line.as_bytes()).unwrap();
            if let Some(blocks) = want.get_mut("content").and_then(Value::as_array_mut) {
                blocks[0].as_object_mut().unwrap().remove("y");
            }
            assert_eq!(v, want, "{line}");
        }
        assert!(parse(br#"{"type":"message","id":"a"} x"#, &SUMMARY).is_err());
        assert!(parse(br#"{"type":"message","id":"a","m":[}"#, &SUMMARY).is_err());
    }
}
