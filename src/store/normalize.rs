//! OpenClaw's load-time normalisation of store entries (`store-load.ts`,
//! `store-entry-shape.ts`, `store-migrations.ts`, skill-prompt hydration), in its order.
//!
//! Entries that are not objects or whose `sessionId` is unsafe are dropped; an unusable
//! `sessionId` without a `sessionFile` is removed; a non-string `sessionFile` is removed; an
//! invalid `updatedAt` becomes 0; model fields are trimmed; legacy `provider`/`lastProvider`/
//! `room` fields are migrated; invalid pending-delivery scalars, malformed plugin extension
//! maps and cached `resolvedSkills` are dropped. Key order follows JavaScript's object spread.
//!
//! Delivery fields are canonicalised by `delivery`; skill prompt blobs are inlined before this
//! runs (`blobs::hydrate`). Not reproduced (a documented gap): the nested delivery contexts of
//! pending final deliveries, which are kept as they are.

use serde_json::{Map, Value};

use crate::js::js_trim;
use crate::store::paths::{is_safe_session_id, validate_session_id};

/// Normalise every entry in place (an entry it cannot use is dropped, never refused, as the
/// runtime drops it). Returns whether anything changed.
pub fn normalize_store(store: &mut Map<String, Value>) -> bool {
    let mut changed = false;
    store.retain(|_, entry| match normalize_entry(entry) {
        None => {
            changed = true;
            false
        }
        Some(c) => {
            changed |= c;
            true
        }
    });
    changed
}

/// Normalise one entry in place: `None` when the runtime drops it, else whether it changed.
/// Each entry is normalised on its own, so a store can be normalised entry by entry as it is
/// read (see `store::load_entry_files`).
pub fn normalize_entry(entry: &mut Value) -> Option<bool> {
    let Value::Object(e) = entry else {
        return None;
    };
    let mut changed = migrate(e);
    if !shape(e) {
        return None;
    }
    let normalised = |k: &str| {
        NORMALISED_FIELDS.contains(&k)
            || super::delivery::FIELDS.contains(&k)
            || PENDING_FINAL_DELIVERY_FIELDS.contains(&k)
    };
    if !e.keys().any(|k| normalised(k)) {
        // None of the normalisers below has anything to read or write.
        return Some(changed);
    }
    let before = e.clone();
    runtime_model_fields(e);
    super::delivery::normalize_entry(e);
    pending_final_delivery(e);
    plugin_maps(e, "pluginExtensions");
    plugin_maps(e, "pluginExtensionSlotKeys");
    strip_skills_cache(e);
    changed |= *e != before;
    Some(changed)
}

/// Every field the normalisers after `shape` read (with [`super::delivery::FIELDS`] and
/// [`PENDING_FINAL_DELIVERY_FIELDS`]): an entry with none of them is left as it is by all of
/// them (most entries of a big store), so it is neither copied nor compared.
const NORMALISED_FIELDS: &[&str] = &[
    // runtime_model_fields
    "model",
    "modelProvider",
    // plugin_maps
    "pluginExtensions",
    "pluginExtensionSlotKeys",
    // strip_skills_cache
    "skillsSnapshot",
];

fn migrate(e: &mut Map<String, Value>) -> bool {
    // Only entries with a legacy field have anything to migrate.
    if !e
        .keys()
        .any(|k| matches!(k.as_str(), "provider" | "lastProvider" | "room"))
    {
        return false;
    }
    let mut changed = false;
    for (old, new) in [("provider", "channel"), ("lastProvider", "lastChannel")] {
        if !e.get(new).is_some_and(Value::is_string) && e.get(old).is_some_and(Value::is_string) {
            let v = e.shift_remove(old).expect("present");
            e.insert(new.to_string(), v);
            changed = true;
        }
    }
    if !e.get("groupChannel").is_some_and(Value::is_string)
        && e.get("room").is_some_and(Value::is_string)
    {
        let v = e.shift_remove("room").expect("present");
        e.insert("groupChannel".to_string(), v);
        changed = true;
    } else if e.contains_key("room") {
        e.shift_remove("room");
        changed = true;
    }
    changed
}

/// `normalizePersistedSessionEntryShape`; false = drop the entry.
fn shape(e: &mut Map<String, Value>) -> bool {
    let has_file = matches!(e.get("sessionFile"), Some(Value::String(s)) if !js_trim(s).is_empty());
    if let Some(sid) = e.get("sessionId") {
        let Value::String(sid) = sid else {
            return false;
        };
        if !is_safe_session_id(sid) {
            return false;
        }
        let trimmed = js_trim(sid);
        if validate_session_id(trimmed).is_none() && !has_file {
            e.shift_remove("sessionId");
        } else if trimmed.len() != sid.len() {
            let trimmed = trimmed.to_string();
            e.insert("sessionId".into(), Value::String(trimmed));
        }
    }
    if e.get("sessionFile").is_some_and(|v| !v.is_string()) {
        e.shift_remove("sessionFile");
    }
    if let Some(v) = e.get("updatedAt") {
        let ok =
            matches!(v, Value::Number(n) if n.as_f64().is_some_and(|f| f.is_finite() && f >= 0.0));
        if !ok {
            e.insert("updatedAt".into(), Value::from(0));
        }
    }
    true
}

fn opt_trimmed(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => {
            let t = js_trim(s);
            (!t.is_empty()).then(|| t.to_string())
        }
        _ => None,
    }
}

fn runtime_model_fields(e: &mut Map<String, Value>) {
    let model = opt_trimmed(e.get("model"));
    let provider = opt_trimmed(e.get("modelProvider"));
    let Some(model) = model else {
        e.shift_remove("model");
        e.shift_remove("modelProvider");
        return;
    };
    e.insert("model".into(), Value::String(model));
    match provider {
        None => {
            e.shift_remove("modelProvider");
        }
        Some(p) => {
            e.insert("modelProvider".into(), Value::String(p));
        }
    }
}

fn finite_non_negative(v: &Value) -> bool {
    matches!(v, Value::Number(n) if n.as_f64().is_some_and(|f| f.is_finite() && f >= 0.0))
}

/// The fields `pending_final_delivery` checks.
const PENDING_FINAL_DELIVERY_FIELDS: [&str; 8] = [
    "pendingFinalDelivery",
    "pendingFinalDeliveryText",
    "pendingFinalDeliveryCreatedAt",
    "pendingFinalDeliveryLastAttemptAt",
    "pendingFinalDeliveryAttemptCount",
    "pendingFinalDeliveryLastError",
    "pendingFinalDeliveryIntentId",
    "restartRecoveryDeliveryRunId",
];

fn pending_final_delivery(e: &mut Map<String, Value>) {
    let keep = |k: &str, e: &Map<String, Value>| -> bool {
        let Some(v) = e.get(k) else { return true };
        match k {
            "pendingFinalDelivery" => v == &Value::Bool(true),
            "pendingFinalDeliveryText"
            | "pendingFinalDeliveryLastError"
            | "pendingFinalDeliveryIntentId" => v.is_null() || v.is_string(),
            "pendingFinalDeliveryCreatedAt" | "pendingFinalDeliveryLastAttemptAt" => {
                finite_non_negative(v)
            }
            "pendingFinalDeliveryAttemptCount" => {
                finite_non_negative(v) && v.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            "restartRecoveryDeliveryRunId" => v.is_string(),
            _ => true,
        }
    };
    for k in PENDING_FINAL_DELIVERY_FIELDS {
        if !keep(k, e) {
            e.shift_remove(k);
        }
    }
}

/// `pluginExtensions` / `pluginExtensionSlotKeys`: a non-object is removed; plugin ids and
/// namespaces are trimmed; non-object plugin states and empty maps are dropped.
fn plugin_maps(e: &mut Map<String, Value>, field: &str) {
    let Some(v) = e.get(field) else { return };
    let Value::Object(plugins) = v else {
        e.shift_remove(field);
        return;
    };
    let mut changed = false;
    let mut out = Map::new();
    for (raw_id, state) in plugins {
        let id = js_trim(raw_id);
        let Value::Object(state) = state else {
            changed = true;
            continue;
        };
        if id.is_empty() {
            changed = true;
            continue;
        }
        changed |= id != raw_id;
        let mut inner = Map::new();
        for (raw_ns, value) in state {
            let ns = js_trim(raw_ns);
            let value = if field == "pluginExtensionSlotKeys" {
                match value.as_str().map(js_trim).filter(|s| is_slot_key(s)) {
                    Some(t) => {
                        changed |= Some(t) != value.as_str();
                        Value::String(t.to_string())
                    }
                    None => {
                        changed = true;
                        continue;
                    }
                }
            } else {
                value.clone()
            };
            if ns.is_empty() {
                changed = true;
                continue;
            }
            changed |= ns != raw_ns;
            inner.insert(ns.to_string(), value);
        }
        if inner.is_empty() {
            changed = true;
            continue;
        }
        out.insert(id.to_string(), Value::Object(inner));
    }
    if !changed {
        return;
    }
    if out.is_empty() {
        e.shift_remove(field);
    } else {
        crate::jsjson::sort_object_keys(&mut out);
        e.insert(field.to_string(), Value::Object(out));
    }
}

/// An identifier-style slot key (`^[A-Za-z][A-Za-z0-9_]*$`) that is not a reserved field.
fn is_slot_key(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && !RESERVED_SLOT_KEYS.contains(&s)
}

/// Session entry fields (and Object prototype names) a plugin slot may not use.
const RESERVED_SLOT_KEYS: &[&str] = &[
    "constructor",
    "prototype",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "lastHeartbeatText",
    "lastHeartbeatSentAt",
    "heartbeatIsolatedBaseSessionKey",
    "heartbeatTaskState",
    "pluginExtensions",
    "pluginExtensionSlotKeys",
    "pluginNextTurnInjections",
    "sessionId",
    "lifecycleRevision",
    "updatedAt",
    "archivedAt",
    "pinnedAt",
    "lastReadAt",
    "markedUnreadAt",
    "lastActivityAt",
    "sessionFile",
    "spawnedBy",
    "spawnedWorkspaceDir",
    "spawnedCwd",
    "parentSessionKey",
    "forkedFromParent",
    "spawnDepth",
    "subagentRole",
    "subagentControlScope",
    "inheritedToolDeny",
    "inheritedToolAllow",
    "subagentRecovery",
    "pluginOwnerId",
    "systemSent",
    "abortedLastRun",
    "restartRecoveryRuns",
    "goal",
    "pendingSkillSuggestion",
    "skillCaptureSignalHashes",
    "sessionStartedAt",
    "ambientTranscriptWatermarks",
    "lastInteractionAt",
    "startedAt",
    "endedAt",
    "runtimeMs",
    "status",
    "abortCutoffMessageSid",
    "abortCutoffTimestamp",
    "chatType",
    "thinkingLevel",
    "fastMode",
    "verboseLevel",
    "traceLevel",
    "reasoningLevel",
    "elevatedLevel",
    "ttsAuto",
    "lastTtsReadLatestHash",
    "lastTtsReadLatestAt",
    "execHost",
    "execSecurity",
    "execAsk",
    "execNode",
    "responseUsage",
    "usageFamilyKey",
    "usageFamilySessionIds",
    "providerOverride",
    "modelOverride",
    "agentRuntimeOverride",
    "modelOverrideSource",
    "modelOverrideFallbackOriginProvider",
    "modelOverrideFallbackOriginModel",
    "authProfileOverride",
    "authProfileOverrideSource",
    "authProfileOverrideCompactionCount",
    "liveModelSwitchPending",
    "groupActivation",
    "groupActivationNeedsSystemIntro",
    "sendPolicy",
    "queueMode",
    "queueDebounceMs",
    "queueCap",
    "queueDrop",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "pendingFinalDelivery",
    "pendingFinalDeliveryCreatedAt",
    "pendingFinalDeliveryLastAttemptAt",
    "pendingFinalDeliveryAttemptCount",
    "pendingFinalDeliveryLastError",
    "pendingFinalDeliveryText",
    "pendingFinalDeliveryContext",
    "pendingFinalDeliveryIntentId",
    "restartRecoveryDeliveryContext",
    "restartRecoveryDeliveryRunId",
    "totalTokensFresh",
    "estimatedCostUsd",
    "cacheRead",
    "cacheWrite",
    "modelProvider",
    "model",
    "agentHarnessId",
    "fallbackNoticeSelectedModel",
    "fallbackNoticeActiveModel",
    "fallbackNoticeReason",
    "contextTokens",
    "contextBudgetStatus",
    "compactionCount",
    "compactionCheckpoints",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "memoryFlushContextHash",
    "memoryFlushFailureCount",
    "memoryFlushLastFailedAt",
    "memoryFlushLastFailureError",
    "cliSessionIds",
    "cliSessionBindings",
    "claudeCliSessionId",
    "label",
    "category",
    "displayName",
    "channel",
    "groupId",
    "subject",
    "groupChannel",
    "space",
    "origin",
    "route",
    "deliveryContext",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "lastThreadId",
    "skillsSnapshot",
    "systemPromptReport",
    "pluginDebugEntries",
    "acp",
    "quotaSuspension",
];

fn strip_skills_cache(e: &mut Map<String, Value>) {
    if let Some(Value::Object(snap)) = e.get_mut("skillsSnapshot") {
        snap.shift_remove("resolvedSkills");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: Value) -> (Value, bool) {
        let Value::Object(mut m) = v else { panic!() };
        let changed = normalize_store(&mut m);
        (Value::Object(m), changed)
    }

    #[test]
    fn drops_and_repairs_entries() {
        let (s, changed) = norm(json!({
            "a": 5,
            "b": {"sessionId": "../x"},
            "c": {"sessionId": " s1 ", "updatedAt": "x", "sessionFile": 3},
            "d": {"sessionId": "a:b", "updatedAt": -1},
            "e": {"sessionId": "a:b", "sessionFile": "a.jsonl"},
            "f": {"sessionId": null},
            "g": {"model": " gpt ", "modelProvider": "  "},
            "h": {"provider": "tg", "room": 3},
        }));
        assert!(changed);
        assert_eq!(
            s,
            json!({
                "c": {"sessionId": "s1", "updatedAt": 0},
                "d": {"updatedAt": 0},
                "e": {"sessionId": "a:b", "sessionFile": "a.jsonl"},
                "g": {"model": "gpt"},
                "h": {"channel": "tg", "route": {"channel": "tg"}, "deliveryContext": {"channel": "tg"}, "lastChannel": "tg"},
            })
        );
        let (_, changed) = norm(json!({"k": {"sessionId": "s", "updatedAt": 1}}));
        assert!(!changed);
    }

    #[test]
    fn skills_cache_is_stripped() {
        let (s, _) = norm(json!({"j": {"skillsSnapshot": {"prompt": "p", "resolvedSkills": []}}}));
        assert_eq!(s, json!({"j": {"skillsSnapshot": {"prompt": "p"}}}));
    }
}
