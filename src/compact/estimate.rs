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
//! The context estimate takes `usage` of the last assistant message that did not end in
//! `error`/`aborted` (its `totalTokens`, or the sum of the four counts when that is 0, or
//! `contextUsage.totalTokens` when the provider marked it available) and adds the estimates of
//! the messages after it; without such a message it sums all estimates.
//!
//! [`Estimator`] is shared by `compact` and `inspect`. With [`TokenCounter::O200k`] or
//! [`TokenCounter::Cl100k`] the same pieces of text are counted in BPE tokens (vocabularies
//! embedded in the `tiktoken-rs` crate; nothing is downloaded) and an image counts as
//! 4800 / 4 = 1200 tokens. The usage rule stays: a provider's own count beats any estimate.

use serde_json::Value;

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
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            TokenCounter::Heuristic => "heuristic",
            TokenCounter::O200k => "o200k",
            TokenCounter::Cl100k => "cl100k",
        }
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

enum Piece<'a> {
    Text(&'a str),
    Owned(String),
    Image,
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

    /// Estimated tokens of one context message.
    pub fn message_tokens(&self, message: &Value) -> u64 {
        match self.counter {
            TokenCounter::Heuristic => {
                let mut chars = 0u64;
                for_each_piece(message, &mut |p| {
                    chars += match p {
                        Piece::Text(s) => utf16_len(s),
                        Piece::Owned(s) => utf16_len(&s),
                        Piece::Image => IMAGE_CHARS,
                    }
                });
                chars.div_ceil(4)
            }
            TokenCounter::O200k | TokenCounter::Cl100k => {
                let bpe = match self.counter {
                    TokenCounter::O200k => tiktoken_rs::o200k_base_singleton(),
                    _ => tiktoken_rs::cl100k_base_singleton(),
                };
                let mut tokens = 0u64;
                for_each_piece(message, &mut |p| {
                    tokens += match p {
                        Piece::Text(s) => bpe.count_ordinary(s) as u64,
                        Piece::Owned(s) => bpe.count_ordinary(&s) as u64,
                        Piece::Image => IMAGE_CHARS / 4,
                    }
                });
                tokens
            }
        }
    }

    /// Estimated tokens of a whole context, using the last usable provider `usage`.
    pub fn context_tokens(&self, messages: &[Value]) -> ContextEstimate {
        let per: Vec<(u64, Option<u64>)> = messages
            .iter()
            .map(|m| (self.message_tokens(m), message_usage(m)))
            .collect();
        combine(&per)
    }
}

/// The provider-reported context size of a message the runtime would trust (an assistant
/// message with usable `usage`), if any.
pub fn message_usage(message: &Value) -> Option<u64> {
    usable_usage(message).map(usage_context_tokens)
}

/// [`Estimator::context_tokens`] from per-message figures in context order: each message's
/// estimate and [`message_usage`].
pub fn combine(per_message: &[(u64, Option<u64>)]) -> ContextEstimate {
    let last = per_message
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, (_, u))| u.map(|u| (i, u)));
    match last {
        None => {
            let sum = per_message.iter().map(|(t, _)| t).sum();
            ContextEstimate {
                tokens: sum,
                usage_tokens: 0,
                trailing_tokens: sum,
                last_usage_index: None,
            }
        }
        Some((i, usage_tokens)) => {
            let trailing: u64 = per_message[i + 1..].iter().map(|(t, _)| t).sum();
            ContextEstimate {
                tokens: usage_tokens + trailing,
                usage_tokens,
                trailing_tokens: trailing,
                last_usage_index: Some(i),
            }
        }
    }
}

/// Length of `s` in UTF-16 code units (JavaScript's `String.prototype.length`).
pub fn utf16_len(s: &str) -> u64 {
    // One unit per character (every byte that does not continue a UTF-8 sequence), two for
    // characters outside the BMP (their lead bytes are 0xF0 and above); counted per byte so
    // that the loop vectorises.
    let b = s.as_bytes();
    if b.is_ascii() {
        return b.len() as u64;
    }
    let starts = b.iter().filter(|&&x| (x as i8) >= -0x40).count();
    let astral = b.iter().filter(|&&x| x >= 0xF0).count();
    (starts + astral) as u64
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Feed the pieces the runtime counts for `message` to `f`.
fn for_each_piece<'a>(message: &'a Value, f: &mut dyn FnMut(Piece<'a>)) {
    let role = str_field(message, "role").unwrap_or("");
    match role {
        "user" | "custom" | "toolResult" => content_pieces(message.get("content"), f),
        "assistant" => {
            let Some(blocks) = message.get("content").and_then(Value::as_array) else {
                return;
            };
            for block in blocks {
                match str_field(block, "type") {
                    Some("text") => {
                        if let Some(t) = str_field(block, "text") {
                            f(Piece::Text(t));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = str_field(block, "thinking") {
                            f(Piece::Text(t));
                        }
                    }
                    Some("toolCall") => {
                        if let Some(n) = str_field(block, "name") {
                            f(Piece::Text(n));
                        }
                        f(Piece::Owned(match block.get("arguments") {
                            Some(args) => jsjson::to_string_compact(args),
                            None => "undefined".to_owned(),
                        }));
                    }
                    _ => {}
                }
            }
        }
        "bashExecution" => {
            for key in ["command", "output"] {
                if let Some(t) = str_field(message, key) {
                    f(Piece::Text(t));
                }
            }
        }
        "branchSummary" | "compactionSummary" => {
            if let Some(t) = str_field(message, "summary") {
                f(Piece::Text(t));
            }
        }
        _ => {}
    }
}

fn content_pieces<'a>(content: Option<&'a Value>, f: &mut dyn FnMut(Piece<'a>)) {
    match content {
        Some(Value::String(s)) => f(Piece::Text(s)),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                match str_field(block, "type") {
                    Some("image") => f(Piece::Image),
                    Some("text") => {
                        if let Some(t) = str_field(block, "text") {
                            f(Piece::Text(t));
                        }
                    }
                    Some("toolResult" | "tool_result") => {
                        match str_field(block, "text").filter(|t| !t.is_empty()) {
                            Some(t) => f(Piece::Text(t)),
                            None => {
                                if let Some(t) = str_field(block, "content") {
                                    f(Piece::Text(t));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The `usage` of an assistant message that the runtime would trust, if any.
fn usable_usage(message: &Value) -> Option<&Value> {
    if str_field(message, "role") != Some("assistant") {
        return None;
    }
    if matches!(str_field(message, "stopReason"), Some("aborted" | "error")) {
        return None;
    }
    let usage = message.get("usage")?;
    if !is_truthy(usage) {
        return None;
    }
    let state = usage
        .get("contextUsage")
        .and_then(|c| c.get("state"))
        .and_then(Value::as_str);
    if state == Some("unavailable") {
        return None;
    }
    Some(usage)
}

fn is_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn num(v: Option<&Value>) -> f64 {
    v.and_then(Value::as_f64)
        .filter(|f| f.is_finite())
        .unwrap_or(0.0)
}

/// `calculateContextTokens(usage)`; missing counts are taken as 0.
fn usage_context_tokens(usage: &Value) -> u64 {
    let cu = usage.get("contextUsage");
    let f = if cu.and_then(|c| c.get("state")).and_then(Value::as_str) == Some("available") {
        num(cu.and_then(|c| c.get("totalTokens")))
    } else {
        let total = num(usage.get("totalTokens"));
        if total != 0.0 {
            total
        } else {
            ["input", "output", "cacheRead", "cacheWrite"]
                .iter()
                .map(|k| num(usage.get(*k)))
                .sum()
        }
    };
    if f > 0.0 { f.round() as u64 } else { 0 }
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
