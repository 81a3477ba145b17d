//! The per-line probe: a borrowed, lenient serde view of one transcript line that reads only
//! the fields decisions need (type, id, parentId, role, stopReason, content block types and
//! text, tool ids, compaction/label targets) and skips everything else without allocating.
//!
//! "Lenient" means a field of an unexpected JSON type never makes a valid line unparsable: a
//! numeric `id` is recorded as "not a string", not as an error. Only invalid JSON, and JSON
//! that is not an object, fails.
//!
//! Asked to measure (`probe_line(bytes, Some(measure))`), the same parse also measures what
//! the runtime's token estimate reads of the entry (the rules are listed in `estimate`): text
//! is measured where it lies (UTF-16 units or BPE tokens), never copied, and each content
//! block is read once whatever the order of its members, so the index can carry every entry's
//! estimate and provider usage. [`probe_value`] and [`message_tokens`] run the same visitors
//! over values held in memory, so there is one implementation of those rules.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::estimate::{self, ContextState, Measure, Measured, UsageFields};
use crate::jsjson::NUMBER_TOKEN;

/// Visitor methods that consume a JSON value of a type the visitor does not look into and
/// return `$v`: one per kind listed (`bool`, `num`, `str`, `unit`, `seq`, `map`).
macro_rules! other_types {
    ($v:expr; $($kind:ident),*) => { $( other_types!(@ $kind, $v); )* };
    (@ bool, $v:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> { Ok($v) }
    };
    // (Numbers held in a value arrive as 128-bit integers when they do not fit in 64 bits.)
    (@ num, $v:expr) => {
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> { Ok($v) }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> { Ok($v) }
        fn visit_i128<E>(self, _: i128) -> Result<Self::Value, E> { Ok($v) }
        fn visit_u128<E>(self, _: u128) -> Result<Self::Value, E> { Ok($v) }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ str, $v:expr) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ unit, $v:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> { Ok($v) }
        fn visit_none<E>(self) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ seq, $v:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok($v)
        }
    };
    // Objects, and numbers under serde_json's arbitrary_precision (which arrive as a
    // one-entry map).
    (@ map, $v:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($v)
        }
    };
}

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
            other_types!(Lenient::Null; unit);
            other_types!(Lenient::Other; bool, num, seq, map);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Reads an object key, borrowed from the input when it has no escapes (serde's own `Cow`
/// always copies).
pub struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

/// What one probe reads beyond the fields the index always needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Measure the pieces the runtime's token estimate reads, with this measure.
    pub measure: Option<Measure>,
    /// The line can hold an image block (its raw bytes name `"image"` or have a `\u` escape
    /// that could spell it). Without it and without a measure, the content of a message other
    /// than an assistant reply cannot matter and is skipped.
    pub may_hold_image: bool,
    /// The line is valid UTF-8 and its raw bytes can hold a media reference (a `\u` escape, or
    /// see `crate::mediarefs::may_name_one`): the text of message contents is read and the
    /// references in it counted.
    pub media: bool,
    /// The address range of the bytes being probed (for the offsets of `data` strings).
    line: (usize, usize),
}

/// The top level of one line (a JSON object; anything else does not parse).
#[derive(Debug, Default)]
pub struct LineProbe<'a> {
    pub kind: Lenient<'a>,
    pub id: Lenient<'a>,
    pub parent_id: Lenient<'a>,
    /// `entry.message`, unless it is absent or null.
    pub message: Option<MessageProbe<'a>>,
    /// Whether the line has a `message` member at all (even null).
    pub has_message: bool,
    pub first_kept_entry_id: Lenient<'a>,
    pub target_id: Lenient<'a>,
    pub summary: Lenient<'a>,
    /// `summary` is truthy as the context rebuild tests it: a non-empty string, or any value
    /// but null and false.
    pub summary_truthy: bool,
    pub append_mode: Lenient<'a>,
    /// `appendParentId` (read for `leaf` control records).
    pub append_parent_id: Lenient<'a>,
    /// With a measure: the entry's own `content` (what a `custom_message` puts in context).
    pub content: ContentMeasure,
    /// Where the key of the entry's own `content` ends, when the key has no escapes (see
    /// `span::value_after_key`).
    pub content_key_end: Option<usize>,
    /// The bytes probed can hold an image block (see [`Options::may_hold_image`]): without it,
    /// no value in them is one.
    pub may_hold_image: bool,
}

impl LineProbe<'_> {
    /// Whether the runtime puts a message in context for this entry (ignoring compaction
    /// windows): a `message` with a `message` member, a `custom_message`, or a
    /// `branch_summary` with a truthy summary.
    pub fn is_context_entry(&self) -> bool {
        match self.kind.as_str() {
            Some("message") => self.has_message,
            Some("custom_message") => true,
            Some("branch_summary") => self.summary_truthy,
            _ => false,
        }
    }

    /// The estimate of the context message the runtime makes of this entry (a `message`'s
    /// message, a `custom_message` as a `custom` message, a `branch_summary` or `compaction`
    /// as its summary), and the provider usage it carries. Needs the probe to have measured
    /// with `measure`.
    pub fn tokens(&self, measure: Measure) -> (u64, Option<u64>) {
        let summary = || Measured::text(self.summary.as_str().map_or(0, |s| measure.text(s)));
        let (pieces, usage) = match self.kind.as_str() {
            Some("message") => match &self.message {
                Some(m) => (m.measured(), m.usage()),
                None => (Measured::default(), None),
            },
            Some("custom_message") => (self.content.as_input(), None),
            Some("branch_summary") if self.summary_truthy => (summary(), None),
            Some("compaction") => (summary(), None),
            _ => return (0, None),
        };
        (measure.tokens(pieces), usage)
    }
}

impl Options {
    /// The offset (in the probed bytes) just past the closing quote of key `k`, when the key
    /// is borrowed from them (it has no escapes; a copied one lies elsewhere).
    fn key_end(&self, k: &str) -> Option<usize> {
        let (start, end) = self.line;
        let at = k.as_ptr() as usize;
        (at >= start && at + k.len() < end).then(|| at + k.len() + 1 - start)
    }
}

/// Reads one line with its [`Options`] into `out`, which starts as its default. (Filled where
/// it lies: a probe is hundreds of bytes, and each level of the parse that returned it by
/// value copied it once more.)
struct LineSeed<'p, 'a> {
    opts: Options,
    out: &'p mut LineProbe<'a>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for LineSeed<'_, 'a> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for LineSeed<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let (opts, marker) = (self.opts, std::marker::PhantomData);
        let p = self.out;
        p.may_hold_image = opts.may_hold_image;
        // A line that names one of these members twice is not read as an entry (the runtime
        // would take the last; which one a reader sees is not worth guessing).
        let mut seen = [false; ENTRY_FIELDS.len()];
        while let Some(key) = a.next_key_seed(Key)? {
            if let Some(k) = ENTRY_FIELDS.iter().position(|f| *f == key)
                && std::mem::replace(&mut seen[k], true)
            {
                return Err(de::Error::duplicate_field(ENTRY_FIELDS[k]));
            }
            match key.as_ref() {
                "type" => p.kind = a.next_value()?,
                "id" => p.id = a.next_value()?,
                "parentId" => p.parent_id = a.next_value()?,
                "message" => {
                    p.has_message = true;
                    let seed = MessageSeed {
                        opts,
                        out: &mut p.message,
                    };
                    if a.next_value_seed(seed)? == Shape::Other {
                        p.message = Some(MessageProbe::default());
                    }
                }
                "firstKeptEntryId" => p.first_kept_entry_id = a.next_value()?,
                "targetId" => p.target_id = a.next_value()?,
                "summary" => {
                    (p.summary, p.summary_truthy) = a.next_value_seed(SummarySeed(marker))?
                }
                "appendMode" => p.append_mode = a.next_value()?,
                "appendParentId" => p.append_parent_id = a.next_value()?,
                "content" => {
                    p.content_key_end = opts.key_end(&key);
                    if opts.measure.is_some() {
                        let seed = ContentSeed {
                            opts,
                            want_text: false,
                            marker,
                        };
                        p.content = a.next_value_seed(seed)?.measured;
                    } else {
                        a.next_value::<IgnoredAny>()?;
                    }
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The members of a line the index reads (see [`LineSeed`]).
const ENTRY_FIELDS: [&str; 9] = [
    "type",
    "id",
    "parentId",
    "message",
    "firstKeptEntryId",
    "targetId",
    "summary",
    "appendMode",
    "appendParentId",
];

/// `summary` as a [`Lenient`] plus its truthiness (see [`LineProbe::summary_truthy`]).
struct SummarySeed<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for SummarySeed<'a> {
    type Value = (Lenient<'a>, bool);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for SummarySeed<'a> {
    type Value = (Lenient<'a>, bool);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok((Lenient::Str(Cow::Borrowed(v)), !v.is_empty()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((Lenient::Str(Cow::Owned(v.to_owned())), !v.is_empty()))
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok((Lenient::Other, b))
    }
    other_types!((Lenient::Null, false); unit);
    other_types!((Lenient::Other, true); num, seq, map);
}

/// `entry.message`: `None` for null; a non-object message is recorded as all-absent.
#[derive(Debug, Default)]
pub struct MessageProbe<'a> {
    pub role: Lenient<'a>,
    pub stop_reason: Lenient<'a>,
    pub content: Content<'a>,
    /// The first string among the tool-result id aliases, in the runtime's order.
    pub tool_result_id: Option<Cow<'a, str>>,
    /// `isError` is `true` (the last one, when repeated).
    pub is_error: bool,
    /// With a measure: what the token estimate reads of it.
    pub measured: MessageMeasure,
    /// Where the key of `content` ends, when the key has no escapes (see
    /// `span::value_after_key`).
    pub content_key_end: Option<usize>,
    /// With [`Options::media`]: the media references in the text of `content` (see
    /// [`ContentProbe::media`]).
    pub media: MediaRefs,
}

/// Media references in the text of a content (a string, or the `text` of text blocks), as
/// `strip-images` counts them: `(replaced, left)` by `crate::mediarefs::count`.
pub type MediaRefs = (u32, u32);

/// The measured pieces of a message (see [`MessageProbe::measured`]).
#[derive(Debug, Default)]
pub struct MessageMeasure {
    pub content: ContentMeasure,
    /// `command`, `output` and `summary`, when strings.
    pub command: Option<u64>,
    pub output: Option<u64>,
    pub summary: Option<u64>,
    pub usage: Option<UsageFields>,
}

impl MessageProbe<'_> {
    /// What the estimate counts of this message, by its role: the content of `user`, `custom`
    /// and `toolResult` messages, the blocks of an assistant reply, a bash execution's command
    /// and output, a summary message's summary; nothing for any other role.
    ///
    /// The content is read as the runtime's loader leaves it (`normalizeLoadedFileEntry`): the
    /// string content of an assistant reply or a tool result is one text block, and an object
    /// content of a tool result is a list of that one block.
    pub fn measured(&self) -> Measured {
        let m = &self.measured;
        match self.role.as_str() {
            Some("user" | "custom") => m.content.as_input(),
            Some("toolResult") => m.content.record.unwrap_or_else(|| m.content.as_input()),
            Some("assistant") => m.content.text.map_or(m.content.as_reply, Measured::text),
            Some("bashExecution") => Measured::text(m.command.unwrap_or(0) + m.output.unwrap_or(0)),
            Some("branchSummary" | "compactionSummary") => Measured::text(m.summary.unwrap_or(0)),
            _ => Measured::default(),
        }
    }

    /// The provider's context size, when the runtime would trust this message's usage.
    pub fn usage(&self) -> Option<u64> {
        estimate::usage_of(
            self.role.as_str(),
            self.stop_reason.as_str(),
            self.measured.usage.as_ref(),
        )
    }
}

/// What a message value is, as [`MessageSeed`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `null`: no message.
    Null,
    /// An object, read into the seed's `out`.
    Object,
    /// Anything else: a message with every field absent.
    Other,
}

/// Reads `entry.message` into `out` (which starts as `None`) when it is an object, and says
/// what it was.
struct MessageSeed<'p, 'a> {
    opts: Options,
    out: &'p mut Option<MessageProbe<'a>>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for MessageSeed<'_, 'a> {
    type Value = Shape;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Shape, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for MessageSeed<'_, 'a> {
    type Value = Shape;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
        let opts = self.opts;
        let m = self.out.insert(MessageProbe::default());
        let mut ids: [Option<Cow<'a, str>>; 6] = Default::default();
        let mut first = true;
        while let Some(key) = a.next_key_seed(Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                // An arbitrary-precision number: not an object.
                a.next_value::<IgnoredAny>()?;
                *self.out = None;
                return Ok(Shape::Other);
            }
            match key.as_ref() {
                "role" => m.role = a.next_value()?,
                "stopReason" => m.stop_reason = a.next_value()?,
                "content" => {
                    m.content_key_end = opts.key_end(&key);
                    // Only assistant replies need their text (silent-reply check).
                    let want_text = !matches!(&m.role, Lenient::Str(r) if r != "assistant");
                    if want_text || opts.may_hold_image || opts.media || opts.measure.is_some() {
                        let seed = ContentSeed {
                            opts,
                            want_text,
                            marker: std::marker::PhantomData,
                        };
                        let c = a.next_value_seed(seed)?;
                        m.content = c.content;
                        m.measured.content = c.measured;
                        m.media = c.media;
                    } else {
                        // Not an assistant reply, and the line has no `"image"`: the blocks
                        // cannot matter.
                        a.next_value::<IgnoredAny>()?;
                        m.content = Content::Skipped;
                    }
                }
                "isError" => m.is_error = a.next_value_seed(IsTrue)?,
                k @ ("usage" | "command" | "output" | "summary") if opts.measure.is_some() => {
                    let measure = opts.measure.expect("checked");
                    let mm = &mut m.measured;
                    match k {
                        "usage" => mm.usage = Some(a.next_value_seed(UsageSeed)?),
                        "command" => mm.command = a.next_value_seed(MeasureSeed(measure))?,
                        "output" => mm.output = a.next_value_seed(MeasureSeed(measure))?,
                        _ => mm.summary = a.next_value_seed(MeasureSeed(measure))?,
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
        Ok(Shape::Object)
    }
    other_types!(Shape::Null; unit);
    other_types!(Shape::Other; bool, num, str, seq);
}

/// Whether a value is `true`; any other value is read through and is not.
struct IsTrue;

impl<'de> DeserializeSeed<'de> for IsTrue {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsTrue {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<bool, E> {
        Ok(b)
    }
    other_types!(false; num, str, unit, seq, map);
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
    /// Not read: it cannot matter for this line (see [`Options::may_hold_image`]).
    Skipped,
}

/// What the token estimate counts of a `content` value, measured.
#[derive(Debug, Default, Clone, Copy)]
pub struct ContentMeasure {
    /// A string content.
    pub text: Option<u64>,
    /// An array content read as the content of a `user`, `custom` or `toolResult` message:
    /// images, `text` blocks, and `toolResult`/`tool_result` blocks' text (or string content).
    pub blocks_as_input: Measured,
    /// An array content read as an assistant reply: `text` and `thinking` blocks, and each
    /// `toolCall`'s name and `JSON.stringify` of its arguments.
    pub as_reply: Measured,
    /// An object content, measured as one block of a `user`, `custom` or `toolResult` content
    /// (the loader makes a tool result's object content a list of that one block).
    pub record: Option<Measured>,
}

impl ContentMeasure {
    /// The content of a `user`, `custom` or `toolResult` message.
    pub fn as_input(&self) -> Measured {
        match self.text {
            Some(n) => Measured::text(n),
            None => self.blocks_as_input,
        }
    }
}

/// A `content` value read with a probe's [`Options`].
#[derive(Debug, Default)]
pub struct ContentProbe<'a> {
    pub content: Content<'a>,
    pub measured: ContentMeasure,
    /// With [`Options::media`]: the media references of a string content, or the sum over
    /// the `text` blocks of an array.
    pub media: MediaRefs,
}

/// Reads a `content` value; block texts are kept only when `want_text` (assistant replies),
/// so tool output and user text are skipped (or only measured) without being copied.
#[derive(Clone, Copy)]
struct ContentSeed<'a> {
    opts: Options,
    want_text: bool,
    marker: std::marker::PhantomData<&'a ()>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for ContentSeed<'a> {
    type Value = ContentProbe<'a>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ContentProbe<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ContentSeed<'a> {
    type Value = ContentProbe<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(ContentProbe {
            content: Content::Text(Cow::Borrowed(v)),
            measured: self.string_measure(v),
            media: self.media_of(v),
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ContentProbe {
            content: Content::Text(if self.want_text {
                Cow::Owned(v.to_owned())
            } else {
                Cow::Borrowed("")
            }),
            measured: self.string_measure(v),
            media: self.media_of(v),
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::new();
        let mut measured = ContentMeasure::default();
        let mut media: MediaRefs = (0, 0);
        while let Some(b) = a.next_element_seed(BlockSeed(self))? {
            measured.blocks_as_input.add(b.as_input);
            measured.as_reply.add(b.as_reply);
            media.0 += b.media.0;
            media.1 += b.media.1;
            blocks.push(b);
        }
        Ok(ContentProbe {
            content: Content::Blocks(blocks),
            measured,
            media,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        // An object is no text the history prune scrubs: no media references.
        let other = |measured| ContentProbe {
            content: Content::Other,
            measured,
            media: (0, 0),
        };
        if self.opts.measure.is_none() {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(other(ContentMeasure::default()));
        }
        // An object: measured as the one block a tool result's loader makes of it.
        let block = BlockSeed(self).visit_map(a)?;
        Ok(other(ContentMeasure {
            record: Some(block.as_input),
            ..ContentMeasure::default()
        }))
    }
    other_types!(ContentProbe { content: Content::Other, measured: ContentMeasure::default(), media: (0, 0) }; unit, bool, num);
}

impl ContentSeed<'_> {
    fn string_measure(&self, v: &str) -> ContentMeasure {
        ContentMeasure {
            text: self.opts.measure.map(|m| m.text(v)),
            ..ContentMeasure::default()
        }
    }

    fn media_of(&self, v: &str) -> MediaRefs {
        if self.opts.media {
            crate::mediarefs::count(v)
        } else {
            (0, 0)
        }
    }
}

/// One content block: its type, its text (for text blocks of assistant replies) and its id
/// (for tool calls); with a measure, what the estimate counts of it.
/// A non-object block is recorded with every field absent.
#[derive(Debug, Default)]
pub struct BlockProbe<'a> {
    pub kind: Lenient<'a>,
    pub text: Lenient<'a>,
    pub id: Lenient<'a>,
    /// For an image block: the byte range (within the probed bytes) of its `data` string's
    /// contents when that string has no escapes; the index records the long ones as
    /// payloads (see [`crate::transcript::Payload`]).
    pub data: Option<(usize, usize)>,
    /// With [`Options::media`], for a text block: the media references in its `text`.
    pub media: MediaRefs,
    /// What it adds to the content's [`ContentMeasure`].
    pub as_input: Measured,
    pub as_reply: Measured,
}

/// The members of a block the estimate measures (strings only; `arguments` any value).
#[derive(Default)]
struct BlockPieces {
    text: Option<u64>,
    thinking: Option<u64>,
    name: Option<u64>,
    arguments: Option<u64>,
    content: Option<u64>,
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
        let ContentSeed {
            opts, want_text, ..
        } = self.0;
        let mut b = BlockProbe::default();
        let mut data = None;
        let mut pieces = BlockPieces::default();
        let mut first = true;
        while let Some(key) = a.next_key_seed(Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                a.next_value::<IgnoredAny>()?;
                return Ok(BlockProbe::default());
            }
            match (key.as_ref(), opts.measure) {
                ("type", _) => b.kind = a.next_value()?,
                ("text", measure) if want_text || opts.media => {
                    let text: Lenient<'a> = a.next_value()?;
                    pieces.text = measure.and_then(|m| text.as_str().map(|s| m.text(s)));
                    // (A repeated member: the last one wins, as for the runtime.)
                    b.media = match text.as_str() {
                        Some(s) if opts.media => crate::mediarefs::count(s),
                        _ => (0, 0),
                    };
                    if want_text {
                        b.text = text;
                    }
                }
                ("id", _) => b.id = a.next_value()?,
                ("data", _) => {
                    // Borrowed (no copy) when the string has no escapes, as base64 never has.
                    data = match a.next_value::<Lenient<'a>>()? {
                        Lenient::Str(Cow::Borrowed(s)) => Some((s.as_ptr() as usize, s.len())),
                        _ => None,
                    };
                }
                ("arguments", Some(Measure::Utf16)) => {
                    pieces.arguments = Some(a.next_value_seed(StringifiedLen)?);
                }
                ("arguments", Some(m)) => {
                    pieces.arguments = Some(m.json(&a.next_value::<Value>()?));
                }
                (k @ ("text" | "thinking" | "name" | "content"), Some(m)) => {
                    let n = a.next_value_seed(MeasureSeed(m))?;
                    match k {
                        "text" => pieces.text = n,
                        "thinking" => pieces.thinking = n,
                        "name" => pieces.name = n,
                        _ => pieces.content = n,
                    }
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        if b.kind.as_str() != Some("text") {
            b.media = (0, 0);
        }
        if b.kind.as_str() == Some("image")
            && let Some((ptr, len)) = data
        {
            let (start, end) = opts.line;
            if ptr >= start && ptr + len <= end {
                b.data = Some((ptr - start, len));
            }
        }
        if let Some(m) = opts.measure {
            let text = Measured::text(pieces.text.unwrap_or(0));
            match b.kind.as_str() {
                Some("image") => b.as_input.images = 1,
                Some("text") => (b.as_input, b.as_reply) = (text, text),
                Some("thinking") => b.as_reply = Measured::text(pieces.thinking.unwrap_or(0)),
                Some("toolCall") => {
                    let args = pieces.arguments.unwrap_or_else(|| m.text("undefined"));
                    b.as_reply = Measured::text(pieces.name.unwrap_or(0) + args);
                }
                // The text when it is a non-empty string, else a string content.
                Some("toolResult" | "tool_result") => {
                    b.as_input = match pieces.text.filter(|&n| n > 0) {
                        Some(_) => text,
                        None => Measured::text(pieces.content.unwrap_or(0)),
                    }
                }
                _ => {}
            }
        }
        Ok(b)
    }
    other_types!(BlockProbe::default(); bool, num, str, unit, seq);
}

/// Measures a string; any other value is consumed and measures `None`.
struct MeasureSeed(Measure);

impl<'de> DeserializeSeed<'de> for MeasureSeed {
    type Value = Option<u64>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MeasureSeed {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(self.0.text(v)))
    }
    other_types!(None; bool, num, unit, seq, map);
}

/// The UTF-16 length of what `JSON.stringify` writes for a value (a tool call's `arguments`),
/// measured while it is read: nothing of it is kept but the keys of the objects being read,
/// so that a repeated key counts once, with its last value, as `JSON.parse` keeps it. The
/// same as measuring the parsed value (`Measure::json`), which this replaces for the
/// heuristic (the BPE counters need the text).
struct StringifiedLen;

impl<'de> DeserializeSeed<'de> for StringifiedLen {
    type Value = u64;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StringifiedLen {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<u64, E> {
        Ok(if b { 4 } else { 5 })
    }
    fn visit_unit<E>(self) -> Result<u64, E> {
        Ok(4)
    }
    fn visit_none<E>(self) -> Result<u64, E> {
        Ok(4)
    }
    fn visit_i64<E>(self, n: i64) -> Result<u64, E> {
        Ok(estimate::stringified_number_len(n as f64))
    }
    fn visit_u64<E>(self, n: u64) -> Result<u64, E> {
        Ok(estimate::stringified_number_len(n as f64))
    }
    fn visit_i128<E>(self, n: i128) -> Result<u64, E> {
        Ok(estimate::stringified_number_len(n as f64))
    }
    fn visit_u128<E>(self, n: u128) -> Result<u64, E> {
        Ok(estimate::stringified_number_len(n as f64))
    }
    fn visit_f64<E>(self, n: f64) -> Result<u64, E> {
        Ok(estimate::stringified_number_len(n))
    }
    fn visit_str<E>(self, v: &str) -> Result<u64, E> {
        Ok(estimate::stringified_str_len(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<u64, A::Error> {
        let (mut n, mut items) = (2u64, 0u64);
        while let Some(len) = a.next_element_seed(StringifiedLen)? {
            n += len;
            items += 1;
        }
        Ok(n + items.saturating_sub(1))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<u64, A::Error> {
        let mut members: rustc_hash::FxHashMap<String, u64> = Default::default();
        let mut total = 0u64;
        let mut first = true;
        while let Some(key) = a.next_key_seed(Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                // A number under arbitrary_precision: its text, which must be a JSON number
                // (as the value parser requires).
                let text: Cow<str> = a.next_value_seed(Key)?;
                let n: serde_json::Number = text.parse().map_err(de::Error::custom)?;
                return Ok(n.as_f64().map_or(4, estimate::stringified_number_len));
            }
            let len =
                estimate::stringified_str_len(&key) + 1 + a.next_value_seed(StringifiedLen)?;
            total += len;
            if let Some(earlier) = members.insert(key.into_owned(), len) {
                total -= earlier;
            }
        }
        Ok(2 + total + (members.len() as u64).saturating_sub(1))
    }
}

/// Reads a `usage` value into what the usage rule needs, without building it.
struct UsageSeed;

impl<'de> DeserializeSeed<'de> for UsageSeed {
    type Value = UsageFields;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<UsageFields, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UsageSeed {
    type Value = UsageFields;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<UsageFields, A::Error> {
        let mut u = UsageFields {
            truthy: true,
            ..UsageFields::default()
        };
        let mut first = true;
        while let Some(key) = a.next_key_seed(Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                // A number: truthy unless 0 (or not a number at all).
                let n: f64 = a.next_value::<Cow<'de, str>>()?.parse().unwrap_or(f64::NAN);
                return Ok(truthy_only(n != 0.0 && !n.is_nan()));
            }
            let slot = match key.as_ref() {
                "totalTokens" => &mut u.total,
                "input" => &mut u.input,
                "output" => &mut u.output,
                "cacheRead" => &mut u.cache_read,
                "cacheWrite" => &mut u.cache_write,
                "contextUsage" => {
                    (u.state, u.context_total) = a.next_value_seed(ContextUsageSeed)?;
                    continue;
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = a.next_value_seed(NumSeed)?;
        }
        Ok(u)
    }
    fn visit_bool<E>(self, b: bool) -> Result<UsageFields, E> {
        Ok(truthy_only(b))
    }
    fn visit_f64<E>(self, n: f64) -> Result<UsageFields, E> {
        Ok(truthy_only(n != 0.0 && !n.is_nan()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<UsageFields, E> {
        Ok(truthy_only(n != 0))
    }
    fn visit_u64<E>(self, n: u64) -> Result<UsageFields, E> {
        Ok(truthy_only(n != 0))
    }
    fn visit_i128<E>(self, n: i128) -> Result<UsageFields, E> {
        Ok(truthy_only(n != 0))
    }
    fn visit_u128<E>(self, n: u128) -> Result<UsageFields, E> {
        Ok(truthy_only(n != 0))
    }
    fn visit_str<E>(self, v: &str) -> Result<UsageFields, E> {
        Ok(truthy_only(!v.is_empty()))
    }
    other_types!(UsageFields::default(); unit);
    other_types!(truthy_only(true); seq);
}

/// A `usage` that is no object: only its truthiness matters.
fn truthy_only(truthy: bool) -> UsageFields {
    UsageFields {
        truthy,
        ..UsageFields::default()
    }
}

/// `usage.contextUsage`: its `state` and `totalTokens`.
struct ContextUsageSeed;

impl<'de> DeserializeSeed<'de> for ContextUsageSeed {
    type Value = (ContextState, f64);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContextUsageSeed {
    type Value = (ContextState, f64);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let (mut state, mut total) = (ContextState::Other, 0.0);
        while let Some(key) = a.next_key_seed(Key)? {
            match key.as_ref() {
                "state" => {
                    state = match a.next_value::<Lenient<'_>>()?.as_str() {
                        Some("available") => ContextState::Available,
                        Some("unavailable") => ContextState::Unavailable,
                        _ => ContextState::Other,
                    }
                }
                "totalTokens" => total = a.next_value_seed(NumSeed)?,
                // (An arbitrary-precision number arrives as a map too; it has neither key.)
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((state, total))
    }
    other_types!((ContextState::Other, 0.0); bool, num, str, unit, seq);
}

/// A number as `Value::as_f64` reads it, 0 when it is not finite or not a number.
struct NumSeed;

impl<'de> DeserializeSeed<'de> for NumSeed {
    type Value = f64;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NumSeed {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_f64<E>(self, n: f64) -> Result<f64, E> {
        Ok(if n.is_finite() { n } else { 0.0 })
    }
    fn visit_i64<E>(self, n: i64) -> Result<f64, E> {
        Ok(n as f64)
    }
    fn visit_u64<E>(self, n: u64) -> Result<f64, E> {
        Ok(n as f64)
    }
    fn visit_i128<E>(self, n: i128) -> Result<f64, E> {
        Ok(n as f64)
    }
    fn visit_u128<E>(self, n: u128) -> Result<f64, E> {
        Ok(n as f64)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<f64, A::Error> {
        // serde_json's arbitrary-precision number: `{"$serde_json::private::Number": "text"}`.
        let mut n = 0.0;
        let mut first = true;
        while let Some(key) = a.next_key_seed(Key)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                let text = a.next_value::<Cow<'de, str>>()?;
                n = text
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .unwrap_or(0.0);
            } else {
                a.next_value::<IgnoredAny>()?;
            }
        }
        Ok(n)
    }
    other_types!(0.0; bool, str, unit, seq);
}

/// What the usage rule reads of a `usage` value held in memory.
pub fn usage_fields(usage: &Value) -> UsageFields {
    UsageSeed.deserialize(usage).unwrap_or_default()
}

/// Parse one line (without its terminator) into a probe. Lines that `JSON.parse` would accept
/// but a Rust string cannot hold (lone surrogate escapes) are rejected here too, so that every
/// line the tool treats as an entry is one it can also re-serialise. With a `measure`, the
/// probe also measures the pieces the runtime's token estimate reads ([`LineProbe::tokens`]).
///
/// Prefilter: the content blocks of a non-assistant message are only read when the raw line
/// could hold an image block, or when measuring (see [`Options::may_hold_image`]).
///
/// A line that is not valid UTF-8 parses only when the strings the probe reads are (see
/// `jsjson::deserialize`).
pub fn probe_line(
    bytes: &[u8],
    measure: Option<Measure>,
) -> Result<LineProbe<'_>, serde_json::Error> {
    probe_checked(bytes, std::str::from_utf8(bytes).ok(), measure)
}

/// [`probe_line`] for a caller that already checked the bytes: `text` is `bytes` as text,
/// `None` when they are not valid UTF-8.
pub fn probe_checked<'a>(
    bytes: &'a [u8],
    text: Option<&'a str>,
    measure: Option<Measure>,
) -> Result<LineProbe<'a>, serde_json::Error> {
    let start = bytes.as_ptr() as usize;
    let unicode_escape = UNICODE_ESCAPE.find(bytes);
    let mut probe = LineProbe::default();
    let seed = LineSeed {
        opts: Options {
            measure,
            may_hold_image: unicode_escape.is_some() || IMAGE_TYPE.find(bytes).is_some(),
            // (Strings with invalid UTF-8 are never decoded: such a line is kept as it is.)
            media: text.is_some()
                && (unicode_escape.is_some() || crate::mediarefs::may_name_one(bytes)),
            line: (start, start + bytes.len()),
        },
        out: &mut probe,
    };
    crate::jsjson::deserialize_checked(bytes, text, seed)?;
    if unicode_escape.is_some_and(|at| has_surrogate_escape(&bytes[at..])) {
        // The probe skips strings without decoding them; decode the whole line to be sure.
        serde_json::from_slice::<serde_json::Value>(bytes)?;
    }
    Ok(probe)
}

/// The probe of an entry held as a value (an object; `None` for anything else), measured.
pub fn probe_value(entry: &Value, measure: Measure) -> Option<LineProbe<'_>> {
    let mut probe = LineProbe::default();
    let seed = LineSeed {
        opts: Options {
            measure: Some(measure),
            may_hold_image: true,
            media: true,
            line: (0, 0),
        },
        out: &mut probe,
    };
    seed.deserialize(entry).ok().map(|()| probe)
}

/// Estimated tokens of a context message held as a value (see `estimate`).
pub fn message_tokens(message: &Value, measure: Measure) -> u64 {
    let mut read = None;
    let seed = MessageSeed {
        opts: Options {
            measure: Some(measure),
            may_hold_image: true,
            media: false,
            line: (0, 0),
        },
        out: &mut read,
    };
    match seed.deserialize(message) {
        Ok(Shape::Object) => read.map_or(0, |m| measure.tokens(m.measured())),
        Ok(Shape::Other) => measure.tokens(MessageProbe::default().measured()),
        _ => 0,
    }
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

    /// `JSON.stringify` lengths of hostile `arguments`: escapes, non-BMP text, repeated keys
    /// (the last value counts, once), numbers that print differently or overflow to `null`,
    /// the number token as a key, nesting.
    const ARGUMENTS: &[&str] = &[
        r#"{}"#,
        r#"[]"#,
        r#"null"#,
        r#"true"#,
        r#"false"#,
        r#""plain""#,
        r#""tab\t quote\" nul\u0000 bs\\ slash\/ é 😀 \ud83d\ude00""#,
        r#"{"a":1,"a":"longer value","b":[1,2,{"a":3,"a":[]}]}"#,
        r#"{"x":1.0,"y":-0,"z":1e400,"w":-1e400,"v":123456789012345678901234567890,"u":1.5e-7,"t":0.000001}"#,
        r#"{"k\n":"\u001f","\u00e9":"é","😀":"x"}"#,
        r#"[[[[[[[[[[{"deep":[[[[["end"]]]]]}]]]]]]]]]]"#,
        r#"{"$serde_json::private::Number":"12.50"}"#,
        r#"{"n":{"$serde_json::private::Number":"1e3"},"m":[{"$serde_json::private::Number":"-0"}]}"#,
        r#"{"z":{},"y":[],"x":{"w":[{}]},"1":2,"0":1}"#,
    ];

    /// A tool call line whose `arguments` is `args`.
    fn call_line(args: &str) -> String {
        format!(
            r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"assistant","content":[{{"type":"toolCall","id":"t","name":"run","arguments":{args}}}]}}}}"#
        )
    }

    #[test]
    fn arguments_are_measured_as_their_parsed_value_is() {
        for args in ARGUMENTS {
            let line = call_line(args);
            let value = crate::jsjson::parse(line.as_bytes()).unwrap();
            let probed = probe_line(line.as_bytes(), Some(Measure::Utf16)).unwrap();
            let parsed = crate::jsjson::parse(args.as_bytes()).unwrap();
            let want = Measure::Utf16.json(&parsed) + 3;
            let m = probed.message.as_ref().unwrap();
            assert_eq!(m.measured().amount, want, "{args}");
            // The same rule over the value held in memory.
            let held = message_tokens(&value["message"], Measure::Utf16);
            assert_eq!(held, want.div_ceil(4), "{args}");
        }
    }

    #[test]
    fn arguments_the_value_parser_refuses_fail_the_probe_too() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let bad = [
            r#""\ud800""#,
            r#"{"a":"\udc00x"}"#,
            r#"{"$serde_json::private::Number":"x"}"#,
            r#"{"$serde_json::private::Number":"1","b":2}"#,
            deep.as_str(),
        ];
        for args in bad {
            let line = call_line(args);
            assert!(crate::jsjson::parse(line.as_bytes()).is_err(), "{args}");
            assert!(
                probe_line(line.as_bytes(), Some(Measure::Utf16)).is_err(),
                "{args}"
            );
        }
    }

    #[test]
    fn measuring_arguments_holds_no_copy_of_them() {
        let big = format!(
            r#"{{"cmd":"{}","n":[{}]}}"#,
            "x\\n".repeat(1 << 18),
            "1,".repeat(1 << 16) + "1"
        );
        let line = call_line(&big);
        let (p, peak) = crate::testalloc::peak_during(|| {
            probe_line(line.as_bytes(), Some(Measure::Utf16)).map(|p| p.message.unwrap().measured())
        });
        let parsed = crate::jsjson::parse(big.as_bytes()).unwrap();
        assert_eq!(p.unwrap().amount, Measure::Utf16.json(&parsed) + 3);
        // The string is decoded once (serde's scratch buffer), the array never held.
        assert!(
            peak < 2 * (1 << 18) * 2 + (64 << 10),
            "{peak} bytes for a {} byte line",
            line.len()
        );
    }

    #[test]
    fn lenient_fields_never_fail_a_valid_line() {
        let p = probe_line(br#"{"type":"message","id":12,"parentId":null,"message":{"role":"assistant","content":[{"type":"text","text":"a\"b"},{"type":"toolCall","id":"t1","arguments":{"x":[1,2.5e3]}},7],"toolCallId":3}}"#, None).unwrap();
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
        assert_eq!(b[2].kind, Lenient::Absent);
        assert_eq!(m.tool_result_id, None);
    }

    #[test]
    fn lone_surrogates_and_garbage_are_unparsable() {
        assert!(probe_line(br#"{"type":"custom","data":"\ud800"}"#, None).is_err());
        assert!(probe_line(br#"{"type":"custom","data":"\ud83d\ude00"}"#, None).is_ok());
        assert!(probe_line(br#"{"type":"mess"#, None).is_err());
        assert!(probe_line(b"\xef\xbb\xbf{}", None).is_err());
        // JSON that is not an object is no entry.
        for other in ["[]", r#"["message","a",null]"#, "\"x\"", "5", "null"] {
            assert!(probe_line(other.as_bytes(), None).is_err(), "{other}");
        }
    }
}
