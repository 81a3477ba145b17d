//! The `compaction` entry as the runtime's session manager writes it (`appendCompaction`):
//! `{type, id, parentId, timestamp, summary, firstKeptEntryId, tokensBefore, details}` in that
//! key order, one compact JSON line, `fromHook` left out so the runtime carries the file lists
//! forward. Also the id and timestamp helpers the runtime's conventions call for.

use serde_json::{Map, Value, json};

use crate::jsjson;

/// What goes into a new compaction entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionEntry {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Value,
}

impl CompactionEntry {
    /// The entry as a JSON value, keys in the runtime's order.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), json!("compaction"));
        m.insert("id".into(), json!(self.id));
        m.insert("parentId".into(), json!(self.parent_id));
        m.insert("timestamp".into(), json!(self.timestamp));
        m.insert("summary".into(), json!(self.summary));
        m.insert("firstKeptEntryId".into(), json!(self.first_kept_entry_id));
        m.insert("tokensBefore".into(), json!(self.tokens_before));
        m.insert("details".into(), self.details.clone());
        Value::Object(m)
    }

    /// The line to append, without the trailing newline (`JSON.stringify(entry)`).
    pub fn to_line(&self) -> String {
        jsjson::to_string_compact(&self.to_value())
    }
}

/// A new entry id: the first 8 hex characters of a random UUID, as the runtime makes them,
/// checked against `taken`; a full UUID if 100 tries collide.
pub fn new_entry_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let id = crate::fsutil::random_uuid()[..8].to_owned();
        if !taken(&id) {
            return id;
        }
    }
    crate::fsutil::random_uuid()
}

/// The current time as `toISOString()` gives it.
pub fn now_iso() -> String {
    crate::isotime::iso_now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_has_the_runtime_field_order() {
        let e = CompactionEntry {
            id: "abcd1234".into(),
            parent_id: Some("p1".into()),
            timestamp: "2026-03-02T10:05:00.000Z".into(),
            summary: "s \"q\"\n".into(),
            first_kept_entry_id: "k1".into(),
            tokens_before: 5172,
            details: json!({"readFiles":["a"],"modifiedFiles":[]}),
        };
        assert_eq!(
            e.to_line(),
            r#"{"type":"compaction","id":"abcd1234","parentId":"p1","timestamp":"2026-03-02T10:05:00.000Z","summary":"s \"q\"\n","firstKeptEntryId":"k1","tokensBefore":5172,"details":{"readFiles":["a"],"modifiedFiles":[]}}"#
        );
        let root = CompactionEntry {
            parent_id: None,
            ..e
        };
        assert!(root.to_line().contains(r#""parentId":null"#));
    }

    #[test]
    fn ids_are_short_hex_and_avoid_collisions() {
        let id = new_entry_id(|_| false);
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let full = new_entry_id(|_| true);
        assert_eq!(full.len(), 36);
    }

    #[test]
    fn now_is_an_iso_timestamp() {
        let now = now_iso();
        assert_eq!(now.len(), 24);
        assert!(now.ends_with('Z'));
    }
}
