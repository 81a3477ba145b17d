//! Session-key grammar as OpenClaw 2026.7.1 reads it (`session-key-utils`,
//! `store-maintenance`): agent-scoped parsing, the key kinds, which keys are synthetic, which
//! entries maintenance protects, and the direct-DM shapes `--fix-dm-scope` retires.
//!
//! Keys look like `agent:<agentId>:<rest>`. Normalisation lowercases everything except the
//! opaque peer ids of Signal groups (one segment) and Matrix rooms (the tail up to `:thread:`).

use crate::json::Json;

use crate::config::normalize_agent_id;
use crate::js::js_trim;

mod kind;
mod parts;
pub use kind::{SessionKind, classify};
use parts::KeyParts;

/// A `--session KEY` as every command matches it against store keys: the key as written, or
/// any key with the same [`normalize_key`] form (`Agent:Main:Main` finds `agent:main:main`),
/// or, for a selector that is not itself agent-scoped, an agent-scoped key with that rest
/// (`main:heartbeat` finds `agent:main:main:heartbeat`): the form the report tables print
/// under "(keys shown without "agent:<id>:")".
#[derive(Debug, Clone)]
pub struct SessionSelector {
    raw: String,
    normalized: String,
}

impl SessionSelector {
    pub fn new(key: &str) -> SessionSelector {
        SessionSelector {
            raw: key.to_owned(),
            normalized: normalize_key(key),
        }
    }

    /// The key as given on the command line.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    pub fn matches(&self, store_key: &str) -> bool {
        if store_key == self.raw {
            return true;
        }
        let key = normalize_key(store_key);
        key == self.normalized
            || (!self.normalized.starts_with("agent:")
                && !self.normalized.is_empty()
                && key.strip_prefix("agent:").is_some_and(|rest| {
                    rest.split_once(':')
                        .is_some_and(|(_, tail)| tail == self.normalized)
                }))
    }
}

/// A parsed `agent:<agentId>:<rest>` key (both parts normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKey {
    pub agent_id: String,
    pub rest: String,
}

fn lower(s: &str) -> String {
    js_trim(s).to_lowercase()
}

/// `normalizeSessionKeyPreservingOpaquePeerIds`: trim, lowercase, but keep the case of Signal
/// group ids and Matrix channel/group room tails.
pub fn normalize_key(key: &str) -> String {
    let raw = js_trim(key);
    if raw.is_empty() {
        return String::new();
    }
    let folded = raw.to_lowercase();
    if !folded.contains("signal:") && !folded.contains("matrix:") {
        return folded;
    }
    // Spans (byte ranges of `raw`) whose case is kept; `trim` spans are also trimmed.
    let mut spans: Vec<(usize, usize, bool)> = Vec::new();
    let lc = raw.to_ascii_lowercase();
    // Signal group: every `(^|:)signal:group:<segment>`.
    let pat = "signal:group:";
    let mut from = 0;
    while let Some(pos) = lc[from..].find(pat) {
        let at = from + pos;
        if at == 0 || lc.as_bytes()[at - 1] == b':' {
            let seg_start = at + pat.len();
            let seg_end = raw[seg_start..]
                .find(':')
                .map_or(raw.len(), |i| seg_start + i);
            if seg_end > seg_start {
                spans.push((seg_start, seg_end, true));
                from = seg_end;
                continue;
            }
        }
        from = at + 1;
    }
    // Matrix channel/group: the tail after `(agent:<x>:)+:*matrix:<kind>:` or a leading
    // `matrix:<kind>:`, split at the last `:thread:`.
    for kind in ["channel", "group"] {
        let marker = format!("matrix:{kind}:");
        let tail_start = matrix_tail_start(&lc, &marker);
        if let Some(start) = tail_start {
            if start >= raw.len() {
                continue;
            }
            match lc[start..].rfind(":thread:") {
                None => spans.push((start, raw.len(), false)),
                Some(m) => {
                    spans.push((start, start + m, false));
                    let tid = start + m + 8;
                    if tid < raw.len() {
                        spans.push((tid, raw.len(), false));
                    }
                }
            }
        }
    }
    spans.retain(|s| s.1 > s.0);
    spans.sort_by_key(|s| s.0);
    let mut out = String::new();
    let mut cursor = 0;
    for (start, end, trim) in spans {
        if start < cursor {
            continue;
        }
        out.push_str(&lower_or_empty(&raw[cursor..start]));
        let kept = &raw[start..end];
        out.push_str(if trim { js_trim(kept) } else { kept });
        cursor = end;
    }
    out.push_str(&lower_or_empty(&raw[cursor..]));
    out
}

/// `normalizeLowercaseStringOrEmpty` (trims as well).
fn lower_or_empty(s: &str) -> String {
    lower(s)
}

fn matrix_tail_start(lc: &str, marker: &str) -> Option<usize> {
    // Scoped: ^(?:agent:[^:]*:)+:*matrix:<kind>:
    let mut i = 0;
    let mut wrapped = false;
    while lc[i..].starts_with("agent:") {
        let after = i + 6;
        match lc[after..].find(':') {
            Some(j) => {
                i = after + j + 1;
                wrapped = true;
            }
            None => break,
        }
    }
    if wrapped {
        let mut k = i;
        while lc[k..].starts_with(':') {
            k += 1;
        }
        if lc[k..].starts_with(marker) {
            return Some(k + marker.len());
        }
        // The scoped form did not match; fall through to the unscoped one.
    }
    lc.starts_with(marker).then_some(marker.len())
}

/// `parseAgentSessionKey`.
pub fn parse_agent_key(key: &str) -> Option<AgentKey> {
    let raw = normalize_key(key);
    if raw.is_empty() {
        return None;
    }
    // `agent:<id>:<rest>` where neither `<id>` nor the first segment of `<rest>` is empty.
    let mut parts = raw.splitn(3, ':');
    let (Some("agent"), Some(id), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    if id.is_empty() || rest.is_empty() || rest.starts_with(':') {
        return None;
    }
    let agent_id = js_trim(id);
    if agent_id.is_empty() {
        return None;
    }
    Some(AgentKey {
        agent_id: agent_id.to_string(),
        rest: rest.to_string(),
    })
}

/// The `rest` of an agent-scoped key, else the whole key, trimmed and lowercased.
pub(crate) fn rest_or_key(key: &str) -> String {
    lower(&parse_agent_key(key).map_or_else(|| key.to_string(), |p| p.rest))
}

pub fn is_cron_key(key: &str) -> bool {
    parse_agent_key(key).is_some_and(|p| lower(&p.rest).starts_with("cron:"))
}

/// `agent:<id>:cron:<job>:run:<run>` (more segments allowed after the run id).
pub fn is_cron_run_key(key: &str) -> bool {
    parse_agent_key(key).is_some_and(|p| {
        let parts: Vec<&str> = p.rest.split(':').collect();
        parts.len() >= 4
            && parts[0] == "cron"
            && !parts[1].is_empty()
            && parts[2] == "run"
            && !parts[3].is_empty()
    })
}

pub fn is_subagent_key(key: &str) -> bool {
    let raw = js_trim(key);
    if raw.is_empty() {
        return false;
    }
    raw.to_lowercase().starts_with("subagent:")
        || parse_agent_key(raw).is_some_and(|p| lower(&p.rest).starts_with("subagent:"))
}

pub fn is_acp_key(key: &str) -> bool {
    let raw = js_trim(key);
    if raw.is_empty() {
        return false;
    }
    raw.to_lowercase().starts_with("acp:")
        || parse_agent_key(raw).is_some_and(|p| lower(&p.rest).starts_with("acp:"))
}

pub(crate) fn is_heartbeat_rest(rest: &str) -> bool {
    rest == "heartbeat" || rest.ends_with(":heartbeat") || rest.contains(":heartbeat:")
}

/// Keys maintenance never auto-protects (subagent, acp, cron, hook, node, heartbeat …).
pub fn is_synthetic_key(key: &str) -> bool {
    KeyParts::new(key).is_synthetic()
}

/// The generic thread id: the non-empty text after the last `:thread:` (case-insensitive).
pub fn thread_id(key: &str) -> Option<String> {
    KeyParts::new(key).thread_id().map(str::to_string)
}

/// `^telegram:(group|channel|direct|dm):.+:topic:[^:]+$` on the lowercased rest.
pub fn is_telegram_topic_key(key: &str) -> bool {
    is_telegram_topic_rest(&rest_or_key(key))
}

fn is_telegram_topic_rest(rest: &str) -> bool {
    let Some(after) = ["group:", "channel:", "direct:", "dm:"]
        .iter()
        .find_map(|k| {
            rest.strip_prefix("telegram:")
                .and_then(|r| r.strip_prefix(k))
        })
    else {
        return false;
    };
    match after.rfind(":topic:") {
        Some(i) => {
            let topic = &after[i + 7..];
            i >= 1 && !topic.is_empty() && !topic.contains(':')
        }
        None => false,
    }
}

/// `^[^:]+:(group|channel):.+$` on the lowercased rest: an external group or channel.
pub fn is_external_group_or_channel_key(key: &str) -> bool {
    is_external_group_or_channel_rest(&rest_or_key(key))
}

fn is_external_group_or_channel_rest(rest: &str) -> bool {
    let mut parts = rest.splitn(3, ':');
    let (Some(ch), Some(kind), Some(tail)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !ch.is_empty() && (kind == "group" || kind == "channel") && !tail.is_empty()
}

/// The entry's `chatType`, else `origin.chatType`, lowercased.
pub(crate) fn chat_type(entry: Option<&Json>) -> String {
    let e = entry.and_then(Json::as_object);
    let ct = e
        .and_then(|o| o.get("chatType"))
        .filter(|v| !v.is_null())
        .or_else(|| {
            e.and_then(|o| o.get("origin"))
                .and_then(Json::as_object)
                .and_then(|o| o.get("chatType"))
        });
    match ct {
        Some(Json::String(s)) => lower(s),
        _ => String::new(),
    }
}

/// `isProtectedSessionMaintenanceEntry`: durable external conversation pointers.
pub fn is_protected(key: &str, entry: Option<&Json>) -> bool {
    let parts = KeyParts::new(key);
    if parts.is_synthetic() {
        return false;
    }
    if parts.thread_id().is_some()
        || is_telegram_topic_rest(parts.rest())
        || is_external_group_or_channel_rest(parts.rest())
    {
        return true;
    }
    matches!(chat_type(entry).as_str(), "group" | "channel" | "thread")
}

/// `shouldPreserveMaintenanceEntry`: in the preserve set (raw compare) or protected.
pub fn should_preserve(key: &str, entry: Option<&Json>, preserve: &[String]) -> bool {
    preserve.iter().any(|k| k == key) || is_protected(key, entry)
}

/// The preserve set for `--active-key` (normalised; empty keys dropped).
pub fn preserve_set(active_key: Option<&str>) -> Vec<String> {
    active_key
        .map(normalize_key)
        .filter(|k| !k.is_empty())
        .into_iter()
        .collect()
}

/// Gateway model-run probes: `agent:<id>:explicit:model-run-<uuid>`.
pub fn is_model_run_key(key: &str) -> bool {
    let Some(rest) = key
        .strip_prefix("agent:")
        .or_else(|| (key.len() >= 6 && key[..6].eq_ignore_ascii_case("agent:")).then(|| &key[6..]))
    else {
        return false;
    };
    let Some((agent, tail)) = rest.split_once(':') else {
        return false;
    };
    if agent.is_empty() || agent.chars().any(char::is_whitespace) {
        return false;
    }
    let tl = tail.to_ascii_lowercase();
    let Some(uuid) = tl.strip_prefix("explicit:model-run-") else {
        return false;
    };
    if !crate::layout::is_lowercase_uuid_shape(uuid) {
        return false;
    }
    match parse_agent_key(key) {
        Some(p) => {
            p.agent_id == agent.to_lowercase()
                && lower(&p.rest)
                    .strip_prefix("explicit:model-run-")
                    .is_some_and(crate::layout::is_lowercase_uuid_shape)
        }
        None => false,
    }
}

/// `--fix-dm-scope`: a per-peer direct-DM key of `target_agent` (shapes `direct:<peer>`,
/// `<ch>:direct:<peer>`, `<ch>:<acct>:direct:<peer>`) other than the active key.
pub fn is_stale_direct_key(key: &str, target_agent: &str, active_key: Option<&str>) -> bool {
    if active_key.is_some_and(|a| !a.is_empty() && a == key) {
        return false;
    }
    let Some(p) = parse_agent_key(key) else {
        return false;
    };
    if normalize_agent_id(&p.agent_id) != normalize_agent_id(target_agent) {
        return false;
    }
    let parts: Vec<&str> = p.rest.split(':').collect();
    if parts[0] == "agent" {
        return false;
    }
    match parts.len() {
        2 => parts[0] == "direct" && !parts[1].is_empty(),
        3 => !parts[0].is_empty() && parts[1] == "direct" && !parts[2].is_empty(),
        4 => {
            !parts[0].is_empty()
                && !parts[1].is_empty()
                && parts[2] == "direct"
                && !parts[3].is_empty()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_matches_every_form_a_table_prints() {
        let sel = SessionSelector::new("main:heartbeat");
        assert!(sel.matches("agent:main:main:heartbeat"));
        assert!(sel.matches("agent:ops:main:heartbeat"));
        assert!(sel.matches("main:heartbeat"));
        assert!(!sel.matches("agent:main:main:heartbeat:x"));
        assert!(!sel.matches("agent:main:heartbeat"));
        let full = SessionSelector::new("Agent:Main:Main");
        assert!(full.matches("agent:main:main"));
        assert!(!full.matches("agent:ops:agent:main:main"));
        assert!(!SessionSelector::new("").matches("agent:main:"));
    }

    #[test]
    fn session_selectors_match_exact_and_normalised_keys() {
        let sel = SessionSelector::new(" Agent:Main:Telegram:Direct:42 ");
        assert!(sel.matches("agent:main:telegram:direct:42"));
        assert!(sel.matches(" Agent:Main:Telegram:Direct:42 "));
        assert!(!sel.matches("agent:main:telegram:direct:43"));
        // The case of a Signal group id is part of the key.
        let sel = SessionSelector::new("agent:main:signal:group:AbC");
        assert!(sel.matches("AGENT:main:signal:group:AbC"));
        assert!(!sel.matches("agent:main:signal:group:abc"));
    }
    use serde_json::json;

    #[test]
    fn parses_agent_keys() {
        assert_eq!(
            parse_agent_key("Agent:Main:Telegram:Direct:42"),
            Some(AgentKey {
                agent_id: "main".into(),
                rest: "telegram:direct:42".into()
            })
        );
        assert_eq!(parse_agent_key("agent:main"), None);
        assert_eq!(parse_agent_key("agent::main"), None);
        assert_eq!(parse_agent_key("main"), None);
        assert_eq!(
            normalize_key("agent:main:signal:group:AbC=:x"),
            "agent:main:signal:group:AbC=:x"
        );
        assert_eq!(
            normalize_key("agent:main:matrix:channel:!Room:ex.org:thread:T1"),
            "agent:main:matrix:channel:!Room:ex.org:thread:T1"
        );
        assert_eq!(
            normalize_key("Agent:Main:Slack:Channel:C1"),
            "agent:main:slack:channel:c1"
        );
    }

    #[test]
    fn synthetic_and_protected() {
        assert!(is_synthetic_key("agent:main:cron:job1"));
        assert!(is_synthetic_key("subagent:x"));
        assert!(is_synthetic_key("agent:main:hook:gmail:1"));
        assert!(is_synthetic_key("agent:main:slack:heartbeat"));
        assert!(!is_synthetic_key("agent:main:main"));
        assert!(is_protected("agent:main:slack:channel:c1", None));
        assert!(is_protected("agent:main:discord:direct:1:thread:9", None));
        assert!(is_protected("agent:main:telegram:group:-100:topic:7", None));
        assert!(is_protected(
            "agent:main:x",
            Some(&crate::json::Json::from_value(json!({"chatType": "Group"})))
        ));
        assert!(is_protected(
            "agent:main:x",
            Some(&crate::json::Json::from_value(
                json!({"origin": {"chatType": "thread"}})
            ))
        ));
        assert!(!is_protected("agent:main:cron:slack:channel:c1", None));
        assert!(!is_protected("agent:main:telegram:direct:42", None));
        assert!(!is_protected("agent:main:x:thread:", None));
    }

    #[test]
    fn model_run_and_dm_scope() {
        assert!(is_model_run_key(
            "agent:main:explicit:model-run-0123abcd-0000-4000-8000-0123456789ab"
        ));
        assert!(is_model_run_key(
            "agent:main:explicit:MODEL-RUN-0123ABCD-0000-4000-8000-0123456789AB"
        ));
        assert!(!is_model_run_key("agent:main:explicit:model-run-xyz"));
        assert!(is_stale_direct_key("agent:main:direct:bob", "main", None));
        assert!(is_stale_direct_key(
            "agent:main:telegram:direct:42",
            "main",
            None
        ));
        assert!(is_stale_direct_key(
            "agent:main:telegram:acct:direct:42",
            "main",
            None
        ));
        assert!(!is_stale_direct_key(
            "agent:main:telegram:direct:42",
            "ops",
            None
        ));
        assert!(!is_stale_direct_key(
            "agent:main:direct:bob",
            "main",
            Some("agent:main:direct:bob")
        ));
        assert!(!is_stale_direct_key(
            "agent:main:telegram:group:42",
            "main",
            None
        ));
    }
}
