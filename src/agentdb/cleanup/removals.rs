//! The removals a cleanup makes before its maintenance when asked: `--fix-missing`
//! (`pruneMissingTranscriptEntries`) and `--fix-dm-scope` (`retireMainScopeDirectSessionEntries`),
//! as the SQLite-era releases compute them on every `session_nodes` entry.

use std::collections::HashSet;

use serde_json::Value;

use super::plan::{Preserve, Rules};
use crate::json::Json;
use crate::keys;
use crate::store::Store;

fn has(e: &Json, k: &str) -> bool {
    e.get(k).is_some()
}

/// `isMainScopeStaleDirectSessionKey`: a per-peer direct-message key of `agent` when the
/// configured `dmScope` is `main` (the active key excepted).
fn is_stale_direct_key(key: &str, dm_scope: &str, agent: &str, active: Option<&str>) -> bool {
    if dm_scope != "main" || active == Some(key) {
        return false;
    }
    let Some(p) = keys::parse_agent_key(key) else {
        return false;
    };
    if crate::config::normalize_agent_id(&p.agent_id) != crate::config::normalize_agent_id(agent) {
        return false;
    }
    let parts: Vec<&str> = p.rest.split(':').collect();
    if parts[0] == "agent" {
        return false;
    }
    let ok = |s: &str| !s.is_empty();
    match parts.len() {
        2 => parts[0] == "direct" && ok(parts[1]),
        3 => ok(parts[0]) && parts[1] == "direct" && ok(parts[2]),
        4 => ok(parts[0]) && ok(parts[1]) && parts[2] == "direct" && ok(parts[3]),
        _ => false,
    }
}

/// `retireMainScopeDirectSessionEntries` (`--fix-dm-scope`): unarchived per-peer DM entries
/// are removed.
pub fn retire_dm_scope(
    s: &mut Store,
    dm_scope: &str,
    agent: &str,
    active: Option<&str>,
) -> Vec<String> {
    let hits: Vec<String> = s
        .iter()
        .filter(|(k, e)| !has(e, "archivedAt") && is_stale_direct_key(k, dm_scope, agent, active))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &hits {
        s.shift_remove(k);
    }
    hits
}

/// `pruneMissingTranscriptEntries` (`--fix-missing`): entries whose transcript has no message
/// (`message_free(sessionId)`; no rows at all counts) are removed, and non-agent keys without a
/// session id; locked or archived entries that are otherwise preserved stay.
pub fn fix_missing(
    s: &mut Store,
    rules: Rules,
    mut message_free: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let none = HashSet::new();
    let p = Preserve {
        rules,
        keys: &none,
        recent_ms: None,
        now_ms: crate::maintenance::now_ms(),
    };
    let mut hits = Vec::new();
    for (k, e) in s.iter() {
        let locked = e.get("modelSelectionLocked") == Some(&Json::Bool(true));
        if (locked || has(e, "archivedAt")) && p.any(k, e) {
            continue;
        }
        let agent_key = keys::parse_agent_key(k).is_some();
        let sid = e.get("sessionId").and_then(Json::as_str);
        let legacy_file = e
            .get("sessionFile")
            .and_then(Json::as_str)
            .is_some_and(|f| !f.trim().is_empty());
        if agent_key
            && (e.get("initializationPending") == Some(&Json::Bool(true))
                || (sid == Some(k.as_str()) && !legacy_file))
        {
            continue;
        }
        match sid.filter(|s| !s.is_empty()) {
            None => {
                if !agent_key {
                    hits.push(k.clone());
                }
            }
            Some(sid) => {
                if message_free(sid) {
                    hits.push(k.clone());
                }
            }
        }
    }
    for k in &hits {
        s.shift_remove(k);
    }
    hits
}

/// `isTranscriptMessageRecord` of one transcript line.
pub fn is_message_record(line: &Value) -> bool {
    let role_ok = |r: Option<&Value>| {
        matches!(
            r.and_then(Value::as_str),
            Some("user" | "assistant" | "tool" | "toolResult" | "system")
        )
    };
    match line.get("type") {
        Some(Value::String(t)) if t == "message" => true,
        None => {
            (line.get("message").is_some_and(Value::is_object)
                && role_ok(line.pointer("/message/role")))
                || role_ok(line.get("role"))
        }
        _ => false,
    }
}
