//! A key parsed once for the maintenance predicates of `keys`.

use super::{is_heartbeat_rest, lower, parse_agent_key};
use crate::js::js_trim;

/// What the maintenance predicates read of a key, parsed once (each public predicate below
/// would otherwise parse and lowercase the key again).
pub(super) struct KeyParts<'k> {
    /// The key trimmed.
    raw: &'k str,
    /// The key trimmed and lowercased.
    folded: String,
    /// The lowercased `rest` of an agent-scoped key.
    agent_rest: Option<String>,
}

impl<'k> KeyParts<'k> {
    pub(super) fn new(key: &'k str) -> KeyParts<'k> {
        let raw = js_trim(key);
        KeyParts {
            raw,
            folded: raw.to_lowercase(),
            agent_rest: parse_agent_key(key).map(|p| lower(&p.rest)),
        }
    }

    /// [`rest_or_key`].
    pub(super) fn rest(&self) -> &str {
        self.agent_rest.as_deref().unwrap_or(&self.folded)
    }

    /// `<prefix>…` or `agent:<id>:<prefix>…` (`is_subagent_key`, `is_acp_key`).
    fn kind_prefix(&self, prefix: &str) -> bool {
        !self.folded.is_empty()
            && (self.folded.starts_with(prefix)
                || self
                    .agent_rest
                    .as_deref()
                    .is_some_and(|r| r.starts_with(prefix)))
    }

    pub(super) fn is_synthetic(&self) -> bool {
        let rest = self.rest();
        self.kind_prefix("subagent:")
            || self.kind_prefix("acp:")
            || self
                .agent_rest
                .as_deref()
                .is_some_and(|r| r.starts_with("cron:"))
            || rest.starts_with("acp-bridge:")
            || rest.starts_with("hook:")
            || rest.starts_with("node:")
            || is_heartbeat_rest(rest)
    }

    /// [`thread_id`].
    pub(super) fn thread_id(&self) -> Option<&'k str> {
        let raw = self.raw;
        let idx = self.folded.rfind(":thread:")?;
        // Lowercasing can change byte lengths for non-ASCII text; map through ASCII
        // lowercase, which keeps offsets, when they disagree.
        let idx = if self.folded.len() == raw.len() {
            idx
        } else {
            raw.to_ascii_lowercase().rfind(":thread:")?
        };
        let tid = js_trim(&raw[idx + 8..]);
        (!tid.is_empty()).then_some(tid)
    }
}
