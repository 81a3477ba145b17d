//! Token estimates for transcript messages, as the runtime makes them and, on request, with a
//! real BPE tokenizer.
//!
//! The runtime's default (`estimateTokens` / `estimateContextTokens` in the reference's
//! agent-core compaction code) counts characters in UTF-16 code units and divides by four,
//! rounding up per message:
//!
//! - `user`: a string content's length, or per block: `image` = 4800 characters, `text` = its
//!   text, `toolResult`/`tool_result` blocks = their `text` or string `content`, others 0;
//! - `assistant`: `text` + `thinking` + for each `toolCall` its `name` plus `JSON.stringify` of
//!   its `arguments` (`undefined` counts as the 9 characters of `"undefined"`);
//! - `toolResult` and `custom`: like `user` content;
//! - `bashExecution`: `command` + `output`; `branchSummary`/`compactionSummary`: `summary`;
//! - any other role: 0.
//!
//! Messages are estimated as the runtime's transcript loader leaves them
//! (`normalizeLoadedFileEntry`), since every message it estimates was read from a file: the
//! string content of an `assistant` or `toolResult` message is one `text` block, and an object
//! content of a `toolResult` is a list of that one block. `user` and `custom` contents, and
//! `custom_message` entries, are read as they are.
//!
//! The context estimate takes `usage` of the last assistant message that did not end in
//! `error`/`aborted` (its `totalTokens`, or the sum of the four counts when that is 0, or
//! `contextUsage.totalTokens` when the provider marked it available) and adds the estimates of
//! the messages after it; without such a message it sums all estimates.
//!
//! Which pieces of a message count is read by the transcript probe (`probe`), while it indexes
//! a line or from a message value ([`Estimator::message_tokens`] runs the same probe over the
//! value), so the rules above are applied in one place; this module measures the pieces
//! ([`Measure`]) and owns the usage rule.
//!
//! [`Estimator`] is shared by `compact` and `inspect`. With [`TokenCounter::O200k`] or
//! [`TokenCounter::Cl100k`] the same pieces of text are counted in BPE tokens (vocabularies
//! embedded in the `tiktoken-rs` crate; nothing is downloaded) and an image counts as
//! 4800 / 4 = 1200 tokens. The usage rule stays: a provider's own count beats any estimate.
//! The vocabularies come with the `tiktoken` cargo feature (on by default); without it only
//! the heuristic is available ([`TokenCounter::is_available`]).

use std::fmt;

use serde_json::Value;

use crate::js::utf16_len;
use crate::jsjson;

/// Characters the runtime charges for one image block.
pub const IMAGE_CHARS: u64 = 4800;

/// How message text is turned into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenCounter {
    /// The runtime's heuristic: UTF-16 code units / 4, rounded up per message.
    #[default]
    Heuristic,
    /// BPE tokens with the o200k_base vocabulary.
    O200k,
    /// BPE tokens with the cl100k_base vocabulary.
    Cl100k,
}

impl TokenCounter {
    /// Whether this build can count this way: the BPE counters need the `tiktoken` feature.
    pub fn is_available(self) -> bool {
        self == TokenCounter::Heuristic || cfg!(feature = "tiktoken")
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            TokenCounter::Heuristic => "heuristic",
            TokenCounter::O200k => "o200k",
            TokenCounter::Cl100k => "cl100k",
        }
    }
}

/// How one piece of text is measured: in UTF-16 units (the heuristic, divided by four per
/// message at the end) or in BPE tokens.
#[derive(Clone, Copy)]
pub enum Measure {
    Utf16,
    Bpe(&'static Bpe),
}

/// A BPE vocabulary.
#[cfg(feature = "tiktoken")]
pub type Bpe = tiktoken_rs::CoreBPE;

/// No BPE vocabulary exists in a build without the `tiktoken` feature.
#[cfg(not(feature = "tiktoken"))]
pub enum Bpe {}

impl fmt::Debug for Measure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Measure::Utf16 => "Utf16",
            Measure::Bpe(_) => "Bpe",
        })
    }
}

impl Measure {
    /// The measure of a counter.
    ///
    /// # Panics
    /// For a counter this build does not have ([`TokenCounter::is_available`]); callers check
    /// that first, where they can tell the operator.
    pub fn of(counter: TokenCounter) -> Measure {
        match counter {
            TokenCounter::Heuristic => Measure::Utf16,
            #[cfg(feature = "tiktoken")]
            TokenCounter::O200k => Measure::Bpe(tiktoken_rs::o200k_base_singleton()),
            #[cfg(feature = "tiktoken")]
            TokenCounter::Cl100k => Measure::Bpe(tiktoken_rs::cl100k_base_singleton()),
            #[cfg(not(feature = "tiktoken"))]
            TokenCounter::O200k | TokenCounter::Cl100k => {
                panic!(
                    "the {} tokenizer needs the tiktoken feature",
                    counter.name()
                )
            }
        }
    }

    /// One piece of text.
    pub fn text(self, s: &str) -> u64 {
        match self {
            Measure::Utf16 => utf16_len(s),
            #[cfg(feature = "tiktoken")]
            Measure::Bpe(bpe) => bpe.count_ordinary(s) as u64,
            #[cfg(not(feature = "tiktoken"))]
            Measure::Bpe(bpe) => match *bpe {},
        }
    }

    /// `JSON.stringify(v)` (a tool call's arguments).
    pub fn json(self, v: &Value) -> u64 {
        match self {
            Measure::Utf16 => {
                // The length does not depend on key order, so no reordering is needed.
                let mut n = Utf16Len(0);
                jsjson::write_value(&mut n, v, None, 0);
                n.0
            }
            Measure::Bpe(_) => {
                let mut v = v.clone();
                jsjson::normalize_key_order(&mut v);
                self.text(&jsjson::to_string_compact(&v))
            }
        }
    }

    /// The message's estimate from its measured pieces.
    pub fn tokens(self, m: Measured) -> u64 {
        match self {
            Measure::Utf16 => (m.amount + m.images * IMAGE_CHARS).div_ceil(4),
            Measure::Bpe(_) => m.amount + m.images * (IMAGE_CHARS / 4),
        }
    }
}

/// What the counted pieces of one message add up to: text measured with a [`Measure`], and
/// image blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measured {
    pub amount: u64,
    pub images: u64,
}

impl Measured {
    pub fn text(amount: u64) -> Measured {
        Measured { amount, images: 0 }
    }

    pub fn add(&mut self, other: Measured) {
        self.amount += other.amount;
        self.images += other.images;
    }
}

/// The UTF-16 length of `JSON.stringify(s)` for a string `s` (quotes and escapes included).
pub(crate) fn stringified_str_len(s: &str) -> u64 {
    let mut n = Utf16Len(0);
    jsjson::write_string(&mut n, s);
    n.0
}

/// The length of `JSON.stringify(x)` for a number read as `x` (`null` when not finite).
pub(crate) fn stringified_number_len(x: f64) -> u64 {
    if x.is_finite() {
        jsjson::js_number(x).len() as u64
    } else {
        4
    }
}

/// A [`jsjson::Sink`] that counts UTF-16 units.
struct Utf16Len(u64);

impl jsjson::Sink for Utf16Len {
    fn push_str(&mut self, s: &str) {
        self.0 += utf16_len(s);
    }
    fn push(&mut self, c: char) {
        self.0 += c.len_utf16() as u64;
    }
}

/// The context-level estimate, as the runtime's `estimateContextTokens` returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextEstimate {
    /// `usage_tokens + trailing_tokens`.
    pub tokens: u64,
    /// Tokens reported by the provider in the last usable assistant `usage` (0 without one).
    pub usage_tokens: u64,
    /// Estimated tokens of the messages after that assistant (all messages without one).
    pub trailing_tokens: u64,
    /// Index of the message whose usage was taken.
    pub last_usage_index: Option<usize>,
}

/// Token estimator for context messages (the objects the runtime's context holds).
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimator {
    counter: TokenCounter,
}

impl Estimator {
    /// An estimator with the given counter.
    pub fn new(counter: TokenCounter) -> Estimator {
        Estimator { counter }
    }

    /// The counter in use.
    pub fn counter(&self) -> TokenCounter {
        self.counter
    }

    /// How it measures text.
    pub fn measure(&self) -> Measure {
        Measure::of(self.counter)
    }

    /// Estimated tokens of one context message.
    pub fn message_tokens(&self, message: &Value) -> u64 {
        super::probe::message_tokens(message, self.measure())
    }

    /// Estimated tokens of a whole context, using the last usable provider `usage`.
    pub fn context_tokens(&self, messages: &[Value]) -> ContextEstimate {
        combine(
            messages
                .iter()
                .map(|m| (self.message_tokens(m), message_usage(m))),
        )
    }
}

/// The provider-reported context size of a message the runtime would trust (an assistant
/// message with usable `usage`), if any.
pub fn message_usage(message: &Value) -> Option<u64> {
    let field = |k: &str| message.get(k).and_then(Value::as_str);
    let usage = message.get("usage").map(super::probe::usage_fields);
    usage_of(field("role"), field("stopReason"), usage.as_ref())
}

/// What the usage rule reads of a `usage` value (numbers that are not finite, or not
/// numbers, read as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageFields {
    /// The value is truthy (JavaScript's sense).
    pub truthy: bool,
    /// `contextUsage.state`, when a string.
    pub state: ContextState,
    /// `contextUsage.totalTokens`.
    pub context_total: f64,
    pub total: f64,
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// `usage.contextUsage.state`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContextState {
    #[default]
    Other,
    Available,
    Unavailable,
}

/// The usage rule, from a message's `role`, `stopReason` (when strings) and `usage`: the
/// provider's context size when the message is an assistant reply that did not end in
/// `error`/`aborted` and its usage is truthy and not marked unavailable
/// (`calculateContextTokens`: `contextUsage.totalTokens` when available, else `totalTokens`,
/// else the sum of the four counts).
pub fn usage_of(
    role: Option<&str>,
    stop_reason: Option<&str>,
    usage: Option<&UsageFields>,
) -> Option<u64> {
    if role != Some("assistant") || matches!(stop_reason, Some("aborted" | "error")) {
        return None;
    }
    let u = usage.filter(|u| u.truthy && u.state != ContextState::Unavailable)?;
    let f = if u.state == ContextState::Available {
        u.context_total
    } else if u.total != 0.0 {
        u.total
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    };
    Some(if f > 0.0 { f.round() as u64 } else { 0 })
}

/// [`Estimator::context_tokens`] from per-message figures in context order: each message's
/// estimate and [`message_usage`]. Taken one at a time: a context can be as long as the file.
pub fn combine(per_message: impl IntoIterator<Item = (u64, Option<u64>)>) -> ContextEstimate {
    let (mut all, mut trailing, mut last) = (0u64, 0u64, None);
    for (i, (tokens, usage)) in per_message.into_iter().enumerate() {
        all += tokens;
        match usage {
            Some(u) => {
                last = Some((i, u));
                trailing = 0;
            }
            None => trailing += tokens,
        }
    }
    match last {
        None => ContextEstimate {
            tokens: all,
            usage_tokens: 0,
            trailing_tokens: all,
            last_usage_index: None,
        },
        Some((i, usage_tokens)) => ContextEstimate {
            tokens: usage_tokens + trailing,
            usage_tokens,
            trailing_tokens: trailing,
            last_usage_index: Some(i),
        },
    }
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
