//! The per-line probe: a borrowed, lenient serde view of one transcript line that reads only
//! the fields decisions need (type, id, parentId, role, stopReason, content block types and
//! text, tool ids, compaction/label targets) and skips everything else without allocating.
//!
//! "Lenient" means a field of an unexpected JSON type never makes a valid line unparsable: a
//! numeric `id` is recorded as "not a string", not as an error. Only invalid JSON fails.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON value seen only as "string", "null", "absent" or "something else".
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum Lenient<'a> {
    #[default]
    Absent,
    Null,
    Str(Cow<'a, str>),
    Other,
}

impl<'a> Lenient<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Lenient::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Lenient<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Lenient<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Lenient::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Lenient::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Lenient::Str(Cow::Owned(v)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient::Null)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient::Other)
            }
            // Objects, and numbers under serde_json's arbitrary_precision (which arrive as a
            // one-entry map).
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The top level of one line.
#[derive(Debug, Default, Deserialize)]
pub struct LineProbe<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Lenient<'a>,
    #[serde(borrow, default)]
    pub id: Lenient<'a>,
    #[serde(rename = "parentId", borrow, default)]
    pub parent_id: Lenient<'a>,
    #[serde(borrow, default)]
    pub message: Option<MessageProbe<'a>>,
    #[serde(rename = "firstKeptEntryId", borrow, default)]
    pub first_kept_entry_id: Lenient<'a>,
    #[serde(rename = "targetId", borrow, default)]
    pub target_id: Lenient<'a>,
    #[serde(borrow, default)]
    pub summary: Lenient<'a>,
    #[serde(rename = "appendMode", borrow, default)]
    pub append_mode: Lenient<'a>,
}

/// `entry.message`. A non-object `message` is recorded as all-absent.
#[derive(Debug, Default)]
pub struct MessageProbe<'a> {
    pub role: Lenient<'a>,
    pub stop_reason: Lenient<'a>,
    pub content: Content<'a>,
    /// The first string among the tool-result id aliases, in the runtime's order.
    pub tool_result_id: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for MessageProbe<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MessageProbe<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut m = MessageProbe::default();
                let mut ids: [Option<Cow<'a, str>>; 6] = Default::default();
                while let Some(key) = a.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "role" => m.role = a.next_value()?,
                        "stopReason" => m.stop_reason = a.next_value()?,
                        "content" => {
                            // Only assistant replies need their text (silent-reply check).
                            let want_text = !matches!(&m.role, Lenient::Str(r) if r != "assistant");
                            if want_text || MAY_HOLD_IMAGE.get() {
                                m.content = a.next_value_seed(ContentSeed::new(want_text))?;
                            } else {
                                // Not an assistant reply, and the line has no `"image"`: the
                                // blocks cannot matter.
                                a.next_value::<IgnoredAny>()?;
                                m.content = Content::Skipped;
                            }
                        }
                        k => {
                            let slot = TOOL_RESULT_ID_KEYS.iter().position(|x| *x == k);
                            match slot {
                                Some(i) => {
                                    if let Lenient::Str(s) = a.next_value::<Lenient<'a>>()? {
                                        ids[i] = Some(s);
                                    }
                                }
                                None => {
                                    a.next_value::<IgnoredAny>()?;
                                }
                            }
                        }
                    }
                }
                m.tool_result_id = ids.into_iter().flatten().next();
                Ok(m)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MessageProbe::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MessageProbe::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

thread_local! {
    /// Set by [`probe_line`] for the line being probed.
    static MAY_HOLD_IMAGE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// The address range of the line being probed (for payload offsets).
    static LINE: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Keys that name the tool call a result answers, in the order the runtime tries them.
pub const TOOL_RESULT_ID_KEYS: [&str; 6] = [
    "toolCallId",
    "toolUseId",
    "tool_call_id",
    "tool_use_id",
    "callId",
    "call_id",
];

/// `message.content`.
#[derive(Debug, Default)]
pub enum Content<'a> {
    #[default]
    Absent,
    /// A string content: one text block.
    Text(Cow<'a, str>),
    Blocks(Vec<BlockProbe<'a>>),
    /// Anything else (null, number, object).
    Other,
    /// Not read: it cannot matter for this line (see [`probe_line`]).
    Skipped,
}

/// Reads a `content` value; block texts are kept only when `want_text` (assistant replies),
/// so tool output and user text are skipped without being unescaped or copied.
#[derive(Clone, Copy)]
pub struct ContentSeed<'a> {
    pub want_text: bool,
    marker: std::marker::PhantomData<&'a ()>,
}

impl ContentSeed<'_> {
    pub fn new(want_text: bool) -> Self {
        ContentSeed {
            want_text,
            marker: std::marker::PhantomData,
        }
    }
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for ContentSeed<'a> {
    type Value = Content<'a>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Content<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ContentSeed<'a> {
    type Value = Content<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Content::Text(if self.want_text {
            Cow::Owned(v.to_owned())
        } else {
            Cow::Borrowed("")
        }))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::new();
        while let Some(b) = a.next_element_seed(BlockSeed(self))? {
            blocks.push(b);
        }
        Ok(Content::Blocks(blocks))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Content::Other)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
}

/// One content block: its type, its text (for text blocks of assistant replies) and its id
/// (for tool calls).
/// A non-object block is recorded with every field absent.
#[derive(Debug, Default)]
pub struct BlockProbe<'a> {
    pub kind: Lenient<'a>,
    pub text: Lenient<'a>,
    pub id: Lenient<'a>,
    pub is_object: bool,
    /// For an image block: the byte range (within the probed bytes) of its `data` string's
    /// contents when that string has no escapes; the index records the long ones as
    /// payloads (see [`crate::transcript::Payload`]).
    pub data: Option<(usize, usize)>,
}

struct BlockSeed<'a>(ContentSeed<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for BlockSeed<'a> {
    type Value = BlockProbe<'a>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<BlockProbe<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for BlockSeed<'a> {
    type Value = BlockProbe<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut b = BlockProbe {
            is_object: true,
            ..BlockProbe::default()
        };
        let mut data = None;
        while let Some(key) = a.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "type" => b.kind = a.next_value()?,
                "text" if self.0.want_text => b.text = a.next_value()?,
                "id" => b.id = a.next_value()?,
                "data" => {
                    // Borrowed (no copy) when the string has no escapes, as base64 never has.
                    data = match a.next_value::<Lenient<'a>>()? {
                        Lenient::Str(Cow::Borrowed(s)) => Some((s.as_ptr() as usize, s.len())),
                        _ => None,
                    };
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        if b.kind.as_str() == Some("image")
            && let Some((ptr, len)) = data
        {
            let (start, end) = LINE.get();
            if ptr >= start && ptr + len <= end {
                b.data = Some((ptr - start, len));
            }
        }
        Ok(b)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(BlockProbe::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(BlockProbe::default())
    }
}

/// Parse one line (without its terminator) into a probe. Lines that `JSON.parse` would accept
/// but a Rust string cannot hold (lone surrogate escapes) are rejected here too, so that every
/// line the tool treats as an entry is one it can also re-serialise.
///
/// Prefilter: the content blocks of a non-assistant message are only read when the raw line
/// contains `"image"` (without it no block can be an image).
pub fn probe_line(bytes: &[u8]) -> Result<LineProbe<'_>, serde_json::Error> {
    MAY_HOLD_IMAGE.set(IMAGE_TYPE.find(bytes).is_some());
    let start = bytes.as_ptr() as usize;
    LINE.set((start, start + bytes.len()));
    let probe: LineProbe<'_> = serde_json::from_slice(bytes)?;
    if has_surrogate_escape(bytes) {
        // The probe skips strings without decoding them; decode the whole line to be sure.
        serde_json::from_slice::<serde_json::Value>(bytes)?;
    }
    Ok(probe)
}

static IMAGE_TYPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"image\""));
static UNICODE_ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));

/// Whether the raw line holds a `\uD800`–`\uDFFF` escape (lone or paired).
fn has_surrogate_escape(bytes: &[u8]) -> bool {
    UNICODE_ESCAPE.find_iter(bytes).any(|i| {
        matches!(bytes.get(i + 2), Some(b'd' | b'D'))
            && matches!(
                bytes.get(i + 3),
                Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_fields_never_fail_a_valid_line() {
        let p = probe_line(br#"{"type":"message","id":12,"parentId":null,"message":{"role":"assistant","content":[{"type":"text","text":"a\"b"},{"type":"toolCall","id":"t1","arguments":{"x":[1,2.5e3]}},7],"toolCallId":3}}"#).unwrap();
        assert_eq!(p.kind.as_str(), Some("message"));
        assert_eq!(p.id, Lenient::Other);
        assert_eq!(p.parent_id, Lenient::Null);
        let m = p.message.unwrap();
        assert_eq!(m.role.as_str(), Some("assistant"));
        let Content::Blocks(b) = m.content else {
            panic!()
        };
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].text.as_str(), Some("a\"b"));
        assert_eq!(b[1].id.as_str(), Some("t1"));
        assert!(!b[2].is_object);
        assert_eq!(m.tool_result_id, None);
    }

    #[test]
    fn lone_surrogates_and_garbage_are_unparsable() {
        assert!(probe_line(br#"{"type":"custom","data":"\ud800"}"#).is_err());
        assert!(probe_line(br#"{"type":"custom","data":"\ud83d\ude00"}"#).is_ok());
        assert!(probe_line(br#"{"type":"mess"#).is_err());
        assert!(probe_line(b"\xef\xbb\xbf{}").is_err());
    }
}
