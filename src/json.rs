//! A JSON value held compactly: what a loaded `sessions.json` keeps of each entry.
//!
//! A store may have hundreds of thousands of entries, and `serde_json::Value` takes about 600
//! bytes for an entry of two members (a hash-indexed map of 72-byte values, a heap string for
//! each member name and for each number). [`Json`] is 24 bytes: an object is a boxed slice of
//! members searched in order, a member name that OpenClaw's entries use is a number into a
//! table ([`Key`]), and an integer is held in place ([`Num`]).
//!
//! It reads as `serde_json::Value` reads with the crate's `arbitrary_precision`: a number keeps
//! the meaning of its source text (`as_i64`, `as_u64` and `as_f64` parse it), objects compare
//! without regard to member order, and [`Json::to_value`] / [`Json::from_value`] convert
//! without loss. It is written by `jsjson`'s writer exactly as a `Value` is.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

/// A JSON value. Objects keep their members in order (JavaScript's order once loaded).
#[derive(Clone, Default)]
pub enum Json {
    #[default]
    Null,
    Bool(bool),
    Number(Num),
    String(Box<str>),
    Array(Box<[Json]>),
    Object(Object),
}

/// A JSON number, as its source text means it: an integer whose text is the canonical one is
/// held as the integer, any other number as its text.
#[derive(Clone, PartialEq, Eq)]
pub struct Num(NumRepr);

#[derive(Clone, PartialEq, Eq)]
enum NumRepr {
    Int(i64),
    Text(Box<str>),
}

/// An object member's name: one that store entries use is an index into [`KNOWN`], any other
/// is owned.
#[derive(Clone)]
pub struct Key(KeyRepr);

#[derive(Clone)]
enum KeyRepr {
    Known(u16),
    Own(Box<str>),
}

/// An object: its members in order. A name appears once.
#[derive(Clone, Default)]
pub struct Object(Box<[(Key, Json)]>);

/// Member names of OpenClaw's session entries (and of what they hold), kept as a number.
const KNOWN: &[&str] = &[
    "sessionId",
    "updatedAt",
    "sessionFile",
    "systemSent",
    "abortedLastRun",
    "chatType",
    "channel",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "lastThreadId",
    "lastProvider",
    "deliveryContext",
    "route",
    "origin",
    "accountId",
    "threadId",
    "thread",
    "to",
    "provider",
    "modelProvider",
    "model",
    "modelOverride",
    "providerOverride",
    "modelSelectionLocked",
    "thinkingLevel",
    "verboseLevel",
    "reasoningLevel",
    "elevatedLevel",
    "label",
    "displayName",
    "subject",
    "room",
    "space",
    "group",
    "groupChannel",
    "groupId",
    "skillsSnapshot",
    "prompt",
    "promptRef",
    "skills",
    "resolvedSkills",
    "version",
    "algorithm",
    "hash",
    "bytes",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "totalTokensFresh",
    "contextTokens",
    "cacheRead",
    "cacheWrite",
    "compactionCount",
    "compactionCheckpoints",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "parentSessionKey",
    "spawnedBy",
    "spawnDepth",
    "cliSessionIds",
    "claudeCliSessionId",
    "sendPolicy",
    "queueMode",
    "responseUsage",
    "ttsAuto",
    "execHost",
    "execSecurity",
    "execAsk",
    "execNode",
    "heartbeat",
    "pluginExtensions",
    "pluginExtensionSlotKeys",
    "pendingFinalDelivery",
    "pendingFinalDeliveryText",
    "pendingFinalDeliveryCreatedAt",
    "pendingFinalDeliveryLastError",
    "pendingFinalDeliveryIntentId",
    "restartRecoveryDeliveryRunId",
    "usageFamilySessionIds",
    "traceSchema",
    "archivedAt",
    "archiveReason",
    "preCompaction",
    "postCompaction",
    "createdAt",
    "reason",
    "summary",
    "firstKeptEntryId",
    "tokensBefore",
    "tokensAfter",
    "tokensSaved",
    "visibility",
    "kind",
    "type",
    "id",
    "name",
    "status",
    "source",
    "target",
    "rawTo",
    "timestamp",
];

impl Key {
    /// The key named `name`.
    pub fn new(name: &str) -> Key {
        match known(name) {
            Some(i) => Key(KeyRepr::Known(i)),
            None => Key(KeyRepr::Own(name.into())),
        }
    }

    /// The key named `name`, taking the string when it is not a known name.
    pub fn from_string(name: String) -> Key {
        match known(&name) {
            Some(i) => Key(KeyRepr::Known(i)),
            None => Key(KeyRepr::Own(name.into_boxed_str())),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            KeyRepr::Known(i) => KNOWN[usize::from(*i)],
            KeyRepr::Own(s) => s,
        }
    }
}

fn known(name: &str) -> Option<u16> {
    // The first byte rules out most names before any comparison.
    let first = *name.as_bytes().first()?;
    (KNOWN.iter())
        .position(|k| k.as_bytes()[0] == first && *k == name)
        .map(|i| i as u16)
}

impl std::ops::Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Num {
    /// The number whose JSON text is `text` (valid JSON number text).
    pub fn from_text(text: &str) -> Num {
        match text.parse::<i64>() {
            Ok(n) if itoa_eq(n, text) => Num(NumRepr::Int(n)),
            _ => Num(NumRepr::Text(text.into())),
        }
    }

    /// Its text, as it was read (an integer's canonical text).
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            NumRepr::Int(n) => Cow::Owned(n.to_string()),
            NumRepr::Text(t) => Cow::Borrowed(t),
        }
    }

    /// As serde_json's `Number::as_f64` (finite values only).
    pub fn as_f64(&self) -> Option<f64> {
        match &self.0 {
            NumRepr::Int(n) => Some(*n as f64),
            NumRepr::Text(t) => t.parse::<f64>().ok().filter(|f| f.is_finite()),
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match &self.0 {
            NumRepr::Int(n) => Some(*n),
            NumRepr::Text(t) => t.parse().ok(),
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match &self.0 {
            NumRepr::Int(n) => u64::try_from(*n).ok(),
            NumRepr::Text(t) => t.parse().ok(),
        }
    }

    fn to_number(&self) -> serde_json::Number {
        match &self.0 {
            NumRepr::Int(n) => (*n).into(),
            NumRepr::Text(t) => t.parse().unwrap_or_else(|_| 0.into()),
        }
    }
}

/// Whether `text` is the canonical decimal text of `n`.
fn itoa_eq(n: i64, text: &str) -> bool {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    let digits = &buf[i..];
    match text.as_bytes().split_first() {
        Some((b'-', rest)) => n < 0 && rest == digits,
        _ => n >= 0 && text.as_bytes() == digits,
    }
}

impl From<i64> for Num {
    fn from(n: i64) -> Num {
        Num(NumRepr::Int(n))
    }
}

impl fmt::Debug for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

static NULL: Json = Json::Null;

impl Object {
    pub fn new() -> Object {
        Object::default()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Json> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Json> {
        (self.0.iter_mut())
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The members in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &Json> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Member `name`, taken out of the object (which is gone).
    pub fn into_member(self, name: &str) -> Option<Json> {
        (self.0.into_vec().into_iter())
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    }

    /// Set member `name`: in its place when it exists (the old value is returned), else last,
    /// as assigning a property in JavaScript does (for a name that is not an array index).
    pub fn insert(&mut self, name: &str, value: Json) -> Option<Json> {
        if let Some(slot) = self.get_mut(name) {
            return Some(std::mem::replace(slot, value));
        }
        let mut members = std::mem::take(&mut self.0).into_vec();
        members.reserve_exact(1);
        members.push((Key::new(name), value));
        self.0 = members.into_boxed_slice();
        None
    }

    /// Remove member `name`, keeping the others in order.
    pub fn remove(&mut self, name: &str) -> Option<Json> {
        let i = self.0.iter().position(|(k, _)| k.as_str() == name)?;
        let mut members = std::mem::take(&mut self.0).into_vec();
        let (_, v) = members.remove(i);
        self.0 = members.into_boxed_slice();
        Some(v)
    }
}

impl FromIterator<(String, Json)> for Object {
    /// Members in the order given; a name given again takes the later value in the first
    /// place (as `JSON.parse` and `serde_json::Map` do).
    fn from_iter<I: IntoIterator<Item = (String, Json)>>(iter: I) -> Object {
        let iter = iter.into_iter();
        let mut members: Vec<(Key, Json)> = Vec::with_capacity(iter.size_hint().0);
        for (name, value) in iter {
            match members.iter_mut().find(|(k, _)| k.as_str() == name) {
                Some((_, slot)) => *slot = value,
                None => members.push((Key::from_string(name), value)),
            }
        }
        Object(members.into_boxed_slice())
    }
}

impl PartialEq for Object {
    /// Same members with equal values, in any order (as `serde_json::Map` compares).
    fn eq(&self, other: &Object) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Json {
    /// Member `name` of an object (`None` for a missing member or a value that is not an
    /// object).
    pub fn get(&self, name: &str) -> Option<&Json> {
        self.as_object()?.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Json> {
        self.as_object_mut()?.get_mut(name)
    }

    /// The value at JSON pointer `path` (RFC 6901, as `serde_json::Value::pointer`).
    pub fn pointer(&self, path: &str) -> Option<&Json> {
        if path.is_empty() {
            return Some(self);
        }
        let rest = path.strip_prefix('/')?;
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .try_fold(self, |v, token| match v {
                Json::Object(o) => o.get(&token),
                Json::Array(items) => parse_index(&token).and_then(|i| items.get(i)),
                _ => None,
            })
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Json::Array(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Json::String(_))
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Json::Number(_))
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self, Json::Bool(_))
    }

    /// The same value as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.to_number()),
            Json::String(s) => Value::String(s.to_string()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(o) => {
                let mut map = serde_json::Map::with_capacity(o.len());
                map.extend(o.iter().map(|(k, v)| (k.to_owned(), v.to_value())));
                Value::Object(map)
            }
        }
    }

    /// `v` held compactly.
    pub fn from_value(v: Value) -> Json {
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(b),
            Value::Number(n) => Json::Number(Num::from_text(n.as_str())),
            Value::String(s) => Json::String(s.into_boxed_str()),
            Value::Array(items) => Json::Array(items.into_iter().map(Json::from_value).collect()),
            Value::Object(map) => {
                let members: Vec<(Key, Json)> = (map.into_iter())
                    .map(|(k, v)| (Key::from_string(k), Json::from_value(v)))
                    .collect();
                Json::Object(Object(members.into_boxed_slice()))
            }
        }
    }
}

impl From<Value> for Json {
    fn from(v: Value) -> Json {
        Json::from_value(v)
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Json {
        Json::Number(Num::from(n))
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.into())
    }
}

impl PartialEq for Json {
    /// As `serde_json::Value` compares: numbers by their text, objects without regard to order.
    fn eq(&self, other: &Json) -> bool {
        match (self, other) {
            (Json::Null, Json::Null) => true,
            (Json::Bool(a), Json::Bool(b)) => a == b,
            (Json::Number(a), Json::Number(b)) => a == b,
            (Json::String(a), Json::String(b)) => a == b,
            (Json::Array(a), Json::Array(b)) => a == b,
            (Json::Object(a), Json::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Json::Null, Value::Null) => true,
            (Json::Bool(a), Value::Bool(b)) => a == b,
            (Json::Number(a), Value::Number(b)) => a.text() == b.as_str(),
            (Json::String(a), Value::String(b)) => **a == **b,
            (Json::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
            }
            (Json::Object(a), Value::Object(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| v == w))
            }
            _ => false,
        }
    }
}

impl PartialEq<str> for Json {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl PartialEq<&str> for Json {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl std::ops::Index<&str> for Json {
    type Output = Json;
    /// Member `name`, or null (as `serde_json::Value` indexes).
    fn index(&self, name: &str) -> &Json {
        self.get(name).unwrap_or(&NULL)
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("Null"),
            Json::Bool(b) => write!(f, "Bool({b})"),
            Json::Number(n) => write!(f, "Number({n:?})"),
            Json::String(s) => write!(f, "String({s:?})"),
            Json::Array(a) => f.debug_list().entries(a.iter()).finish(),
            Json::Object(o) => fmt::Debug::fmt(o, f),
        }
    }
}

impl serde::Serialize for Json {
    /// As the same `serde_json::Value` serialises.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.to_number().serialize(s),
            Json::String(t) => s.serialize_str(t),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o.iter() {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Json {
    /// As a `serde_json::Value` deserialises, then held compactly.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        Value::deserialize(d).map(Json::from_value)
    }
}

impl fmt::Display for Json {
    /// As `serde_json::Value` displays: its compact serde_json text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl crate::jsjson::Tree for Json {
    type Members<'a> = std::iter::Map<
        std::slice::Iter<'a, (Key, Json)>,
        fn(&'a (Key, Json)) -> (&'a str, &'a Json),
    >;

    fn node(&self) -> crate::jsjson::Node<'_, Json> {
        use crate::jsjson::Node;
        match self {
            Json::Null => Node::Null,
            Json::Bool(b) => Node::Bool(*b),
            Json::Number(n) => Node::Number(n.as_f64()),
            Json::String(s) => Node::String(s),
            Json::Array(items) => Node::Array(items),
            Json::Object(o) => Node::Object(o.0.iter().map(member as _)),
        }
    }
}

/// An array index in a JSON pointer: digits without a leading zero.
fn parse_index(s: &str) -> Option<usize> {
    if s.starts_with('+') || (s.starts_with('0') && s.len() != 1) {
        return None;
    }
    s.parse().ok()
}

fn member((k, v): &(Key, Json)) -> (&str, &Json) {
    (k.as_str(), v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Json>(), 24);
        assert_eq!(std::mem::size_of::<Key>(), 16);
        assert_eq!(std::mem::size_of::<Num>(), 16);
    }

    #[test]
    fn known_names_are_distinct() {
        for (i, k) in KNOWN.iter().enumerate() {
            assert_eq!(known(k), Some(i as u16), "{k}");
        }
        assert!(KNOWN.len() < usize::from(u16::MAX));
    }

    /// Numbers read as serde_json's arbitrary-precision numbers read their text.
    #[test]
    fn numbers_mean_what_their_text_means() {
        for text in [
            "0",
            "-0",
            "1",
            "-1",
            "1.0",
            "1e3",
            "1E3",
            "-1.5e-7",
            "9007199254740993",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "1e400",
            "-1e400",
            "0.1",
            "1794451317125",
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let n = Json::from_value(v.clone());
            assert_eq!(n.as_f64(), v.as_f64(), "{text}");
            assert_eq!(n.as_i64(), v.as_i64(), "{text}");
            assert_eq!(n.as_u64(), v.as_u64(), "{text}");
            assert_eq!(n.to_value(), v, "{text}");
            assert_eq!(
                serde_json::to_string(&n).unwrap(),
                serde_json::to_string(&v).unwrap()
            );
            assert!(n == v, "{text}");
        }
        assert!(matches!(Num::from_text("12").0, NumRepr::Int(12)));
        assert!(matches!(Num::from_text("-0").0, NumRepr::Text(_)));
        assert!(matches!(Num::from_text("1.0").0, NumRepr::Text(_)));
    }

    #[test]
    fn values_convert_both_ways_and_compare_as_serde_json_does() {
        let v = json!({
            "sessionId": "s",
            "updatedAt": 1794451317125u64,
            "custom name": [1, 2.5, null, true, {"b": 1, "a": "x"}],
            "nested": {"deliveryContext": {"channel": "telegram"}},
            "": {}
        });
        let j = Json::from_value(v.clone());
        assert_eq!(j.to_value(), v);
        assert!(j == v);
        assert_eq!(j["sessionId"].as_str(), Some("s"));
        assert_eq!(j["updatedAt"].as_f64(), Some(1794451317125.0));
        assert!(j["missing"].is_null());
        assert_eq!(
            j["nested"]["deliveryContext"]["channel"].as_str(),
            Some("telegram")
        );
        let keys: Vec<&str> = j.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["sessionId", "updatedAt", "custom name", "nested", ""]
        );
        let reordered = Json::from_value(json!({"b": 1, "a": "x"}));
        assert_eq!(&reordered, &j["custom name"].as_array().unwrap()[4]);
        assert_ne!(
            Json::from_value(json!({"a": 1})),
            Json::from_value(json!({"a": 1.0}))
        );
        assert_eq!(
            serde_json::to_string(&j).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
    }

    #[test]
    fn members_are_set_in_place_or_last_and_removed_in_order() {
        let mut o: Object = [
            ("a".to_owned(), Json::from("1")),
            ("sessionFile".to_owned(), Json::from("f")),
            ("a".to_owned(), Json::from("2")),
        ]
        .into_iter()
        .collect();
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "sessionFile"]);
        assert_eq!(o.get("a").and_then(Json::as_str), Some("2"));
        assert_eq!(
            o.insert("sessionFile", Json::from("g")),
            Some(Json::from("f"))
        );
        assert_eq!(o.insert("z", Json::Null), None);
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "sessionFile", "z"]);
        assert_eq!(o.remove("a"), Some(Json::from("2")));
        assert_eq!(o.remove("a"), None);
        assert_eq!(o.keys().collect::<Vec<_>>(), ["sessionFile", "z"]);
    }
}
