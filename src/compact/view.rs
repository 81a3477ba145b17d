//! What the summary's readers ask of a JSON value, over two kinds of tree.
//!
//! The classifiers (`classify`), the file lists (`fileops`) and the summary builder read a
//! message through [`View`]: a member by name, a string, an array's items, a boolean, a
//! number. `serde_json::Value` is one view; [`Light`] is the other, built by
//! `pruned::parse` for the summarised entries of a transcript: its strings borrow the line's
//! bytes (unless they hold escapes), an object is a vector of members searched in order, and
//! nothing is hashed. A summary reads a few members of each of thousands of small objects,
//! and building, searching and freeing `Value`'s hash-indexed maps and owned strings was
//! most of its time.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Read access to a JSON value, as the summary's readers use it.
pub trait View: Sized {
    /// Member `key` of an object (`None` for anything else). A name given twice in the source
    /// text reads as its last value, as `JSON.parse` keeps it.
    fn field(&self, key: &str) -> Option<&Self>;
    fn as_str(&self) -> Option<&str>;
    /// An array's items.
    fn items(&self) -> Option<&[Self]>;
    fn as_bool(&self) -> Option<bool>;
    fn as_f64(&self) -> Option<f64>;
    fn is_object(&self) -> bool;
    /// The value as a `serde_json::Value` (borrowed when it is one).
    fn as_value(&self) -> Cow<'_, Value>;
}

impl View for Value {
    fn field(&self, key: &str) -> Option<&Value> {
        let m = self.as_object()?;
        // A small object is searched in order: cheaper than hashing the key, which
        // serde_json's map does for every lookup. Names are unique in a `Map`.
        if m.len() > 16 {
            return m.get(key);
        }
        m.iter().find_map(|(k, v)| (k == key).then_some(v))
    }
    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }
    fn items(&self) -> Option<&[Value]> {
        self.as_array().map(Vec::as_slice)
    }
    fn as_bool(&self) -> Option<bool> {
        Value::as_bool(self)
    }
    fn as_f64(&self) -> Option<f64> {
        Value::as_f64(self)
    }
    fn is_object(&self) -> bool {
        Value::is_object(self)
    }
    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

/// A JSON value whose strings borrow the text it was read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Light<'a> {
    Null,
    Bool(bool),
    /// As serde_json holds a number with `arbitrary_precision`: its source text.
    Number(serde_json::Number),
    String(Cow<'a, str>),
    Array(Vec<Light<'a>>),
    /// The members in source order, a name given twice kept twice ([`View::field`] takes the
    /// last one).
    Object(Vec<(Cow<'a, str>, Light<'a>)>),
}

impl<'a> Light<'a> {
    /// The `serde_json::Value` `jsjson::parse` makes of the same text: a repeated name keeps
    /// its last value, and the members are in JavaScript's order.
    pub fn to_value(&self) -> Value {
        let mut v = self.to_value_unordered();
        crate::jsjson::normalize_key_order(&mut v);
        v
    }

    fn to_value_unordered(&self) -> Value {
        match self {
            Light::Null => Value::Null,
            Light::Bool(b) => Value::Bool(*b),
            Light::Number(n) => Value::Number(n.clone()),
            Light::String(s) => Value::String(s.as_ref().to_owned()),
            Light::Array(items) => {
                Value::Array(items.iter().map(Light::to_value_unordered).collect())
            }
            Light::Object(members) => {
                let mut map = Map::new();
                for (k, v) in members {
                    map.insert(k.as_ref().to_owned(), v.to_value_unordered());
                }
                Value::Object(map)
            }
        }
    }
}

impl View for Light<'_> {
    fn field(&self, key: &str) -> Option<&Self> {
        match self {
            Light::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            Light::String(s) => Some(s),
            _ => None,
        }
    }
    fn items(&self) -> Option<&[Self]> {
        match self {
            Light::Array(items) => Some(items),
            _ => None,
        }
    }
    fn as_bool(&self) -> Option<bool> {
        match self {
            Light::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            Light::Number(n) => n.as_f64(),
            _ => None,
        }
    }
    fn is_object(&self) -> bool {
        matches!(self, Light::Object(_))
    }
    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Owned(self.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn light(text: &str) -> Light<'_> {
        crate::compact::pruned::parse(
            text.as_bytes(),
            &crate::compact::pruned::Keep {
                entry: &["a", "b", "c", "n"],
                message: &[],
                block: &[],
            },
        )
        .unwrap()
    }

    /// Both views answer every question alike, on the values `jsjson::parse` and the light
    /// parse make of the same text.
    #[test]
    fn both_views_read_the_same_text_alike() {
        let text = r#"{"a":"x\u00e9","b":[1,true,null,{"k":"v"}],"a":"last","c":{"k":1.50,"k":2},"n":-0.5e1}"#;
        let l = light(text);
        let v = crate::jsjson::parse(text.as_bytes()).unwrap();
        assert_eq!(l.to_value(), v);
        for key in ["a", "b", "c", "n", "missing"] {
            let (lf, vf) = (l.field(key), v.field(key));
            assert_eq!(lf.is_some(), vf.is_some(), "{key}");
            let (Some(lf), Some(vf)) = (lf, vf) else {
                continue;
            };
            assert_eq!(View::as_str(lf), View::as_str(vf), "{key}");
            assert_eq!(View::as_bool(lf), View::as_bool(vf), "{key}");
            assert_eq!(View::as_f64(lf), View::as_f64(vf), "{key}");
            assert_eq!(View::is_object(lf), View::is_object(vf), "{key}");
            assert_eq!(
                lf.items().map(<[_]>::len),
                vf.items().map(<[_]>::len),
                "{key}"
            );
            assert_eq!(lf.as_value().as_ref(), vf, "{key}");
        }
        assert_eq!(View::as_str(l.field("a").unwrap()), Some("last"));
        assert_eq!(
            View::as_f64(l.field("c").unwrap().field("k").unwrap()),
            Some(2.0)
        );
        // A string without escapes borrows the text.
        let l = light(r#"{"a":"plain","b":"esc\"aped"}"#);
        assert!(matches!(
            l.field("a"),
            Some(Light::String(Cow::Borrowed("plain")))
        ));
        assert!(matches!(l.field("b"), Some(Light::String(Cow::Owned(_)))));
    }
}
