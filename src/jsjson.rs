//! JSON exactly as JavaScript's `JSON.parse` / `JSON.stringify` see it.
//!
//! OpenClaw writes `sessions.json` with `JSON.stringify(store, null, 2)` and transcript lines
//! with `JSON.stringify(entry)`. To write the same bytes we parse into `serde_json::Value`
//! (built with `preserve_order`, so objects keep insertion order, and `arbitrary_precision`, so
//! numbers keep their source text until we format them) and serialise with our own writer:
//!
//! - numbers are formatted as JavaScript's `Number.prototype.toString` does (shortest
//!   round-trip digits, `1e+21`, `1.5e-7`, no `.0`, `-0` as `0`);
//! - strings are escaped as `JSON.stringify` does: only `"`, `\` and control characters, with
//!   the `\b\f\n\r\t` shortcuts and lowercase `\u00xx` for the rest; non-ASCII stays raw;
//! - object keys follow JavaScript's property order: integer-like keys ("array indices") first
//!   in ascending numeric order, then the others in insertion order (`normalize_key_order`).
//!
//! What it does not cover: lone surrogate escapes (`"\ud800"`), which `JSON.parse` accepts but
//! a Rust string cannot hold. `parse` rejects them; callers treat that as unparsable input.

use serde_json::{Map, Value};

/// Where serialised JSON goes: a `String`, or [`Len`] when only the length is wanted.
pub trait Sink {
    fn push_str(&mut self, s: &str);
    fn push(&mut self, c: char);
}

impl Sink for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
}

/// A [`Sink`] that only counts bytes: the length of a document without building it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Len(pub usize);

impl Sink for Len {
    fn push_str(&mut self, s: &str) {
        self.0 += s.len();
    }
    fn push(&mut self, c: char) {
        self.0 += c.len_utf8();
    }
}

/// A [`Sink`] that compares a document with what `expected` reads (bytes, or a file through a
/// buffer) as it is written, without building it or holding the expected text.
#[derive(Debug)]
pub struct SameAs<R> {
    rest: R,
    same: bool,
}

impl<R: std::io::BufRead> SameAs<R> {
    pub fn new(expected: R) -> SameAs<R> {
        SameAs {
            rest: expected,
            same: true,
        }
    }

    /// Whether what was written is what `expected` reads, to its last byte (a read error
    /// counts as a difference).
    pub fn is_same(&mut self) -> bool {
        self.same && self.rest.fill_buf().is_ok_and(|rest| rest.is_empty())
    }
}

impl<R: std::io::BufRead> Sink for SameAs<R> {
    fn push_str(&mut self, s: &str) {
        let mut want = s.as_bytes();
        while self.same && !want.is_empty() {
            let Ok(have) = self.rest.fill_buf() else {
                self.same = false;
                break;
            };
            let n = have.len().min(want.len());
            if n == 0 || have[..n] != want[..n] {
                self.same = false;
                break;
            }
            self.rest.consume(n);
            want = &want[n..];
        }
    }
    fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }
}

/// How deep arrays and objects may nest in a document that is parsed into a value (serde_json's
/// recursion limit). A deeper document is refused with an error, never recursed into (that
/// would risk a stack overflow); see [`TooDeep`].
pub const MAX_DEPTH: usize = 128;

/// Whether a parse failed because the document nests deeper than [`MAX_DEPTH`].
pub fn is_too_deep(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// A transcript line that nests deeper than [`MAX_DEPTH`]: it is kept as it is, and the file
/// is not edited (the commands report it as refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} nests arrays or objects deeper than {MAX_DEPTH} levels; not editing")]
pub struct TooDeep {
    /// 1-based.
    pub line: usize,
}

/// Parse JSON text as `JSON.parse` would, then apply JavaScript's object key order. Objects
/// and arrays are built at their size ([`Exact`]).
pub fn parse(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut v: Value = deserialize(bytes, Exact)?;
    normalize_key_order(&mut v);
    Ok(v)
}

/// Deserialises a [`Value`] as serde_json's own `Value` does, but with each object and array
/// at its size: serde_json grows them by doubling, so a store's entries of two members would
/// keep room for three and those of four room for seven (a third of a large store's memory).
/// An object of more than [`Exact::GATHERED`] members grows as serde_json grows it (its spare
/// room is never touched, so it costs no memory).
#[derive(Debug, Clone, Copy)]
pub struct Exact;

impl Exact {
    const GATHERED: usize = 16;
}

/// The keys by which serde_json's deserializer hands over an arbitrary-precision number (a
/// one-member map) and a raw value; `serde_json::Value`'s visitor reads them the same way.
pub const NUMBER_TOKEN: &str = "$serde_json::private::Number";
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> serde::de::DeserializeSeed<'de> for Exact {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Exact {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::de::DeserializeSeed::deserialize(self, d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(Exact)? {
            items.push(item);
        }
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        use serde::de::Error;
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        if first == NUMBER_TOKEN {
            let digits: String = map.next_value()?;
            return digits.parse().map(Value::Number).map_err(A::Error::custom);
        }
        if first == RAW_TOKEN {
            let raw: String = map.next_value()?;
            return serde_json::from_str(&raw).map_err(A::Error::custom);
        }
        // A key given twice keeps its first place and takes its last value, as in
        // `JSON.parse` (and serde_json's `Map::insert`).
        let mut gathered = Vec::with_capacity(4);
        gathered.push((first, map.next_value_seed(Exact)?));
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Exact)?;
            gathered.push((key, value));
            if gathered.len() > Exact::GATHERED {
                let mut members = Map::with_capacity(2 * Exact::GATHERED);
                members.extend(gathered);
                while let Some((key, value)) =
                    map.next_entry_seed(std::marker::PhantomData::<String>, Exact)?
                {
                    members.insert(key, value);
                }
                return Ok(Value::Object(members));
            }
        }
        let mut members = Map::with_capacity(gathered.len());
        members.extend(gathered);
        Ok(Value::Object(members))
    }
}

/// Run `seed` over the JSON document `bytes` (and nothing after it but whitespace). Bytes
/// that are valid UTF-8 are read as text, whose strings then need no validation one by one;
/// other bytes are read as they are (a string the seed skips need not be valid then).
pub fn deserialize<'de, S: serde::de::DeserializeSeed<'de>>(
    bytes: &'de [u8],
    seed: S,
) -> serde_json::Result<S::Value> {
    deserialize_checked(bytes, std::str::from_utf8(bytes).ok(), seed)
}

/// [`deserialize`] for a caller that already checked the bytes: `text` is `bytes` as text,
/// `None` when they are not valid UTF-8.
pub fn deserialize_checked<'de, S: serde::de::DeserializeSeed<'de>>(
    bytes: &'de [u8],
    text: Option<&'de str>,
    seed: S,
) -> serde_json::Result<S::Value> {
    match text {
        Some(text) => {
            debug_assert_eq!(text.as_bytes(), bytes);
            let mut de = serde_json::Deserializer::from_str(text);
            let v = seed.deserialize(&mut de)?;
            de.end()?;
            Ok(v)
        }
        None => {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            let v = seed.deserialize(&mut de)?;
            de.end()?;
            Ok(v)
        }
    }
}

/// A JSON tree the writer walks: a `serde_json::Value`, or a store's compact
/// [`crate::json::Json`].
pub trait Tree: Sized {
    /// An object's members, in order.
    type Members<'a>: Iterator<Item = (&'a str, &'a Self)>
    where
        Self: 'a;
    fn node(&self) -> Node<'_, Self>;
}

/// One node of a [`Tree`], as the writer sees it.
pub enum Node<'a, T: Tree + 'a> {
    Null,
    Bool(bool),
    /// The number's value (`None`, or not finite: written as `null`, as JavaScript writes it).
    Number(Option<f64>),
    String(&'a str),
    Array(&'a [T]),
    Object(T::Members<'a>),
}

impl Tree for Value {
    type Members<'a> = std::iter::Map<
        serde_json::map::Iter<'a>,
        fn((&'a String, &'a Value)) -> (&'a str, &'a Value),
    >;

    fn node(&self) -> Node<'_, Value> {
        match self {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            // With arbitrary_precision the number keeps its source text; JavaScript holds it
            // as f64.
            Value::Number(n) => Node::Number(n.as_f64()),
            Value::String(s) => Node::String(s),
            Value::Array(items) => Node::Array(items),
            Value::Object(map) => Node::Object(map.iter().map(value_member as _)),
        }
    }
}

fn value_member<'a>((k, v): (&'a String, &'a Value)) -> (&'a str, &'a Value) {
    (k, v)
}

/// `JSON.stringify(v, null, 2)`.
pub fn to_string_pretty<T: Tree>(v: &T) -> String {
    let mut out = String::new();
    write_value(&mut out, v, Some(2), 0);
    out
}

/// `JSON.stringify(v)`.
pub fn to_string_compact<T: Tree>(v: &T) -> String {
    let mut out = String::new();
    write_value(&mut out, v, None, 0);
    out
}

/// Byte length of the `"key": value` member as it appears at `level` inside a
/// `JSON.stringify(…, null, 2)` document, indentation of its first line included.
pub fn pretty_member_len<T: Tree>(key: &str, v: &T, level: usize) -> usize {
    let mut out = Len(2 * level);
    write_string(&mut out, key);
    out.push_str(": ");
    write_value(&mut out, v, Some(2), level);
    out.0
}

/// Serialise `v` into `out`. `indent` is the indent unit (None = compact), `level` the depth of
/// `v` itself (its closing bracket is indented by `level` units).
pub fn write_value<S: Sink + ?Sized, T: Tree>(
    out: &mut S,
    v: &T,
    indent: Option<usize>,
    level: usize,
) {
    match v.node() {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Node::Number(Some(f)) if f.is_finite() => push_js_number(out, f),
        Node::Number(_) => out.push_str("null"),
        Node::String(s) => write_string(out, s),
        Node::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_indent(out, indent, level + 1);
                write_value(out, item, indent, level + 1);
            }
            push_indent(out, indent, level);
            out.push(']');
        }
        Node::Object(members) => {
            let mut members = members.peekable();
            if members.peek().is_none() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in members.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_indent(out, indent, level + 1);
                write_string(out, k);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_value(out, item, indent, level + 1);
            }
            push_indent(out, indent, level);
            out.push('}');
        }
    }
}

fn push_indent<S: Sink + ?Sized>(out: &mut S, indent: Option<usize>, level: usize) {
    const SPACES: &str = "                                                                ";
    if let Some(unit) = indent {
        out.push('\n');
        let mut n = unit * level;
        while n > 0 {
            let k = n.min(SPACES.len());
            out.push_str(&SPACES[..k]);
            n -= k;
        }
    }
}

/// A JSON string literal as `JSON.stringify` writes it.
pub fn write_string<S: Sink + ?Sized>(out: &mut S, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Runs without anything to escape are skipped 32 bytes at a time (the check
        // vectorises); a run's bytes are written in one piece.
        if let Some(chunk) = bytes.get(i..i + 32)
            && !chunk.iter().fold(false, |any, &b| any | needs_escape(b))
        {
            i += 32;
            continue;
        }
        let b = bytes[i];
        i += 1;
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i - 1]);
        match esc {
            Some(e) => out.push_str(e),
            None => out.push_str(&format!("\\u{:04x}", b)),
        }
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// A byte `JSON.stringify` escapes inside a string.
#[inline]
fn needs_escape(b: u8) -> bool {
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// `String(x)` for a JavaScript number: ECMA-262 `Number::toString(x, 10)`, which is what
/// `JSON.stringify` writes for a finite number. The shortest digits that read back as `x`,
/// the even one when two are equally near (`22722038.950195312`, not `…313`); plain notation
/// from 1e-6 up to 1e21 (`0.000001`, `123456789012345680000`), else `1e+21` and `1.5e-7`;
/// `-0` as `0`, and `NaN`, `Infinity`, `-Infinity`.
pub fn js_number(f: f64) -> String {
    ryu_js::Buffer::new().format(f).to_owned()
}

/// [`js_number`] written straight into a [`Sink`].
fn push_js_number<S: Sink + ?Sized>(out: &mut S, f: f64) {
    out.push_str(ryu_js::Buffer::new().format(f));
}

/// Whether JavaScript treats `key` as an array index (ordered first, ascending).
pub fn is_array_index(key: &str) -> bool {
    let b = key.as_bytes();
    if b.is_empty() || b.len() > 10 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if b.len() > 1 && b[0] == b'0' {
        return false;
    }
    key.parse::<u64>().is_ok_and(|n| n < u64::from(u32::MAX))
}

/// Reorder every object in `v` the way a JavaScript object enumerates its keys.
pub fn normalize_key_order(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(normalize_key_order),
        Value::Object(map) => {
            map.values_mut().for_each(normalize_key_order);
            sort_object_keys(map);
        }
        _ => {}
    }
}

/// Reorder one object's keys (not recursively) into JavaScript enumeration order.
pub fn sort_object_keys(map: &mut Map<String, Value>) {
    if !map.keys().any(|k| is_array_index(k)) {
        return;
    }
    let old = std::mem::take(map);
    map.extend(in_js_key_order(old.into_iter().collect()));
}

/// Members in JavaScript's enumeration order: array-index keys first, ascending, then the
/// others in the order given. Sorted in place, and only when some key is an array index (a
/// stable sort keeps the others in their order).
pub fn in_js_key_order<V>(mut members: Vec<(String, V)>) -> Vec<(String, V)> {
    if members.iter().any(|(k, _)| is_array_index(k)) {
        members.sort_by_key(|(k, _)| key_rank(k));
    }
    members
}

/// Where JavaScript enumerates key `k` among an object's keys: array indices first, ascending,
/// then the others (in their order: sorts by it must be stable).
pub fn key_rank(k: &str) -> (bool, u64) {
    match is_array_index(k) {
        true => (false, k.parse::<u64>().unwrap_or(0)),
        false => (true, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_format_like_javascript() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (100.0, "100"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1776000000000.0, "1776000000000"),
            (9007199254740993.0, "9007199254740992"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            // 17-digit ties: the exact value lies halfway between two 17-digit decimals, and
            // Number::toString takes the even one (Rust's `{:e}` takes the other).
            (22722038.950195312, "22722038.950195312"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (f, want) in cases {
            assert_eq!(js_number(*f), *want, "formatting {f:e}");
        }
    }

    #[test]
    fn number_text_is_reformatted_as_javascript_holds_it() {
        let v = parse(br#"[1.50, 1e2, 12345678901234567890, -0, 2.0E-7, 0.000001]"#).unwrap();
        assert_eq!(
            to_string_compact(&v),
            "[1.5,100,12345678901234567000,0,2e-7,0.000001]"
        );
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let v = Value::String("a\"b\\c\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é😀\u{2028}/".into());
        assert_eq!(
            to_string_compact(&v),
            "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é😀\u{2028}/\""
        );
        let v = parse(br#""\u0041\/\u00e9""#).unwrap();
        assert_eq!(to_string_compact(&v), "\"A/é\"");
        // Long strings (skipped 32 bytes at a time) escape the same at every offset.
        let escape = |s: &str| {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        let pieces = [
            "abc",
            "é",
            "😀",
            "\"",
            "\\",
            "\n",
            "\u{1}",
            "\u{1f}",
            " ",
            "xxxxxxxxxxxxxxxx",
        ];
        let mut state = 7u64;
        for len in 0..300 {
            let s: String = (0..len)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    pieces[(state >> 33) as usize % pieces.len()]
                })
                .collect();
            let mut got = String::new();
            write_string(&mut got, &s);
            assert_eq!(got, escape(&s), "{s:?}");
            let mut n = Len(0);
            write_string(&mut n, &s);
            assert_eq!(n.0, got.len());
        }
    }

    #[test]
    fn pretty_matches_json_stringify_layout() {
        let v = parse(br#"{"a":{},"b":[],"c":[1,{"d":null}],"e":{"f":true}}"#).unwrap();
        assert_eq!(
            to_string_pretty(&v),
            "{\n  \"a\": {},\n  \"b\": [],\n  \"c\": [\n    1,\n    {\n      \"d\": null\n    }\n  ],\n  \"e\": {\n    \"f\": true\n  }\n}"
        );
        assert_eq!(to_string_pretty(&Value::Object(Map::new())), "{}");
    }

    #[test]
    fn integer_like_keys_come_first_in_ascending_order() {
        let v = parse(br#"{"b":1,"10":2,"a":3,"2":4,"01":5,"-1":6,"4294967295":7,"4294967294":8}"#)
            .unwrap();
        assert_eq!(
            to_string_compact(&v),
            r#"{"2":4,"10":2,"4294967294":8,"b":1,"a":3,"01":5,"-1":6,"4294967295":7}"#
        );
    }

    #[test]
    fn duplicate_keys_keep_first_position_and_last_value() {
        let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(to_string_compact(&v), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn member_length_matches_the_pretty_document() {
        let v = parse(br#"{"k":{"x":[1,2],"y":"z"}}"#).unwrap();
        let doc = to_string_pretty(&v);
        // "{\n" + member + "\n}"
        assert_eq!(pretty_member_len("k", &v["k"], 1), doc.len() - 4);
    }

    #[test]
    fn lone_surrogates_are_rejected() {
        assert!(parse(br#""\ud800""#).is_err());
    }

    /// A value as serde_json's own `Value` reads it, from text that mixes every kind of value,
    /// big and odd numbers, duplicate keys, deep and wide objects, and the keys serde_json
    /// itself gives a meaning to.
    fn next(seed: &mut u64, n: u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) % n
    }

    fn random_json(seed: &mut u64, depth: usize, out: &mut String) {
        let pick = if depth > 4 {
            next(seed, 6)
        } else {
            next(seed, 9)
        };
        match pick {
            0 => out.push_str("null"),
            1 => out.push_str(["true", "false"][next(seed, 2) as usize]),
            2 => out.push_str(
                [
                    "0",
                    "-0",
                    "1",
                    "-17",
                    "1e5",
                    "1E-7",
                    "2.50",
                    "18446744073709551616",
                    "-9223372036854775809",
                    "1.7976931348623157e309",
                    "0.1",
                    "123456789012345678",
                ][next(seed, 12) as usize],
            ),
            3..=5 => {
                let words = [
                    "",
                    "a",
                    "\\u00e9",
                    "\\n\\\"",
                    "sessionId",
                    "$serde_json::private::Number",
                ];
                out.push('"');
                out.push_str(words[next(seed, 6) as usize]);
                out.push('"');
            }
            6 => {
                out.push('[');
                for i in 0..next(seed, 6) {
                    if i > 0 {
                        out.push(',');
                    }
                    random_json(seed, depth + 1, out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                let wide = next(seed, 4) == 0;
                let n = if wide {
                    10 + next(seed, 30)
                } else {
                    next(seed, 6)
                };
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    let key = ["a", "b", "1", "0", "updatedAt", "k"][next(seed, 6) as usize];
                    out.push_str(&format!(
                        "\"{key}{}\":",
                        next(seed, if wide { 40 } else { 3 })
                    ));
                    random_json(seed, depth + 1, out);
                }
                out.push('}');
            }
        }
    }

    #[test]
    fn exact_reads_what_serde_json_reads() {
        let mut seed = 7u64;
        for _ in 0..3000 {
            let mut text = String::new();
            random_json(&mut seed, 0, &mut text);
            let theirs: Value = serde_json::from_str(&text).unwrap();
            let ours = deserialize(text.as_bytes(), Exact).unwrap();
            assert_eq!(ours, theirs, "{text}");
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&theirs).unwrap(),
                "members in the same order: {text}"
            );
        }
        for text in [
            "{\"$serde_json::private::Number\": \"12.50\"}",
            "{\"$serde_json::private::RawValue\": \"[1, 2]\"}",
            "{\"a\": 1, \"a\": 2, \"b\": 3}",
            "[[], {}, [{}]]",
        ] {
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                deserialize(text.as_bytes(), Exact).unwrap(),
                theirs,
                "{text}"
            );
        }
        let Value::Array(items) = deserialize(b"[1, 2, 3, 4, 5]", Exact).unwrap() else {
            panic!("an array");
        };
        assert_eq!(items.capacity(), 5, "room for its items only");
    }
}
