//! The entry plan of a SQLite-era cleanup, as `planSessionEntryMaintenance` (profile `write`,
//! forced) of the reference computes it on a copy of every `session_nodes` entry: model-run
//! probes, stale dashboards, stale entries, the cap. 2026.9.x archives durable entries in place
//! and deletes only synthetic ones; 2026.8.x deletes (see [`Rules`]).

use std::collections::HashSet;

use crate::json::Json;
use crate::keys;
use crate::store::Store;

/// The maintenance settings of `session.maintenance` as a SQLite-era release resolves them.
#[derive(Debug, Clone)]
pub struct Settings {
    pub prune_after_ms: i64,
    pub archive_dashboard_after_ms: Option<i64>,
    pub max_entries: f64,
    pub model_run_prune_after_ms: i64,
    pub preserve_recent_ms: Option<i64>,
    pub max_disk_bytes: Option<i64>,
    pub high_water_bytes: Option<i64>,
}

/// Which release's rules apply (by the database's schema version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// 2026.8.x (schema 19): stale and cap entries are deleted.
    V8,
    /// 2026.9.x (schema 21, 23): durable entries are archived in place.
    V9,
}

impl Rules {
    pub fn for_schema(user_version: i64) -> Rules {
        if user_version < 21 {
            Rules::V8
        } else {
            Rules::V9
        }
    }

    pub fn default_max_entries(self) -> f64 {
        match self {
            Rules::V8 => 500.0,
            Rules::V9 => 5000.0,
        }
    }
}

/// Why an entry is archived in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchivePhase {
    Dashboard,
    Age,
    Cap,
}

impl ArchivePhase {
    /// The `archiveReason` written (2026.8.x writes none for dashboards).
    pub fn reason(self) -> &'static str {
        match self {
            ArchivePhase::Dashboard => "stale-dashboard",
            ArchivePhase::Age => "age-retention",
            ArchivePhase::Cap => "active-session-cap",
        }
    }
}

/// The plan: which keys go and why.
#[derive(Debug, Clone, Default)]
pub struct EntryPlan {
    /// `--fix-missing` removals.
    pub missing: Vec<String>,
    /// `--fix-dm-scope` removals.
    pub dm_scope: Vec<String>,
    pub model_run: Vec<String>,
    pub stale: Vec<String>,
    pub capped: Vec<String>,
    /// Archived in place, with the phase, in plan order.
    pub archived: Vec<(String, ArchivePhase)>,
}

impl EntryPlan {
    /// The keys deleted (not archived).
    pub fn deleted(&self) -> impl Iterator<Item = &String> {
        self.missing
            .iter()
            .chain(&self.dm_scope)
            .chain(&self.model_run)
            .chain(&self.stale)
            .chain(&self.capped)
            .filter(|k| !self.archived.iter().any(|(a, _)| a == *k))
    }

    pub fn count(&self, phase: ArchivePhase) -> usize {
        self.archived.iter().filter(|(_, p)| *p == phase).count()
    }

    /// `resolveSessionCleanupAction` for one key.
    pub fn action(&self, key: &str) -> &'static str {
        let has = |v: &Vec<String>| v.iter().any(|k| k == key);
        let phase = self.archived.iter().find(|(k, _)| k == key).map(|p| p.1);
        if has(&self.dm_scope) {
            "retire-dm-scope"
        } else if has(&self.missing) {
            "prune-missing"
        } else if has(&self.model_run) {
            "prune-model-run"
        } else if phase == Some(ArchivePhase::Dashboard) {
            "archive-dashboard"
        } else if phase == Some(ArchivePhase::Cap) {
            "archive-cap"
        } else if phase == Some(ArchivePhase::Age) {
            "archive-age"
        } else if has(&self.stale) {
            "prune-stale"
        } else if has(&self.capped) {
            "cap-overflow"
        } else {
            "keep"
        }
    }
}

fn num(e: &Json, k: &str) -> Option<f64> {
    e.get(k).and_then(Json::as_f64)
}

fn has(e: &Json, k: &str) -> bool {
    e.get(k).is_some()
}

/// `getSessionMaintenanceActivityAt`.
pub fn activity(e: &Json) -> f64 {
    [
        "lastInteractionAt",
        "lastActivityAt",
        "sessionStartedAt",
        "updatedAt",
    ]
    .iter()
    .map(|k| num(e, k).unwrap_or(0.0))
    .fold(0.0, f64::max)
}

fn rest_lower(key: &str) -> String {
    keys::parse_agent_key(key)
        .map_or_else(|| key.to_string(), |p| p.rest)
        .trim()
        .to_lowercase()
}

/// `isSyntheticSessionMaintenanceKey`.
pub fn is_synthetic(key: &str) -> bool {
    let rest = rest_lower(key);
    keys::is_model_run_key(key)
        || keys::is_subagent_key(key)
        || keys::is_acp_key(key)
        || keys::is_cron_key(key)
        || rest.starts_with("acp-bridge:")
        || rest.starts_with("hook:")
        || rest.starts_with("node:")
        || rest == "heartbeat"
        || rest.ends_with(":heartbeat")
        || rest.contains(":heartbeat:")
}

fn non_empty(v: Option<&Json>) -> Option<&str> {
    v.and_then(Json::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// `parseSessionDeliveryRoute(key) !== null`.
fn is_delivery_route(key: &str) -> bool {
    let lc = key.to_lowercase();
    let base = match lc.rfind(":thread:") {
        Some(i) => &key[..i],
        None => key,
    };
    let Some(p) = keys::parse_agent_key(base) else {
        return false;
    };
    let parts: Vec<&str> = p.rest.split(':').collect();
    if parts[0] == "agent" || parts.len() < 3 || parts[0].trim().is_empty() {
        return false;
    }
    if parts.len() >= 4 && (parts[2] == "direct" || parts[2] == "dm") {
        return !parts[1].trim().is_empty()
            && !parts[3].trim().is_empty()
            && !parts[3..].join(":").trim().is_empty();
    }
    ["channel", "direct", "dm", "group"].contains(&parts[1])
        && !parts[2].trim().is_empty()
        && !parts[2..].join(":").trim().is_empty()
}

fn re_match(re: &str, s: &str) -> bool {
    regex::Regex::new(re).is_ok_and(|r| r.is_match(s))
}

/// `isProtectedSessionMaintenanceEntry`.
pub fn is_protected(rules: Rules, key: &str, e: &Json) -> bool {
    if is_synthetic(key) {
        return false;
    }
    let parsed = keys::parse_agent_key(key);
    if key.trim().to_lowercase() == "global" || parsed.as_ref().is_some_and(|p| p.rest == "main") {
        return true;
    }
    if keys::thread_id(key).is_some() {
        return true;
    }
    let rest = rest_lower(key);
    let external_key = re_match(r"^[^:]+:(?:group|channel):.+$", &rest)
        || re_match(r"^telegram:(?:direct|dm):.+:topic:[^:]+$", &rest);
    let external = match rules {
        Rules::V8 => external_key,
        Rules::V9 => {
            e.pointer("/delivery/kind").and_then(Json::as_str) == Some("external")
                || is_delivery_route(key)
                || re_match(r"^direct:.+$", &rest)
                || external_key
        }
    };
    if external {
        return true;
    }
    let origin_chat = match e.pointer("/delivery/kind").and_then(Json::as_str) {
        Some("external") => e.pointer("/delivery/origin/chatType"),
        _ => None,
    };
    let chat = match e.get("chatType") {
        Some(Json::Null) | None => origin_chat,
        v => v,
    };
    let chat = chat
        .and_then(Json::as_str)
        .map(|s| s.trim().to_lowercase())
        .unwrap_or_default();
    matches!(chat.as_str(), "group" | "channel" | "thread")
}

/// `isPinnableSessionEntry`.
fn is_pinnable(key: &str, e: &Json) -> bool {
    if keys::is_subagent_key(key) || non_empty(e.get("spawnedBy")).is_some() {
        return false;
    }
    match non_empty(e.get("parentSessionKey")) {
        None => true,
        Some(parent) => keys::parse_agent_key(key)
            .is_some_and(|p| parent == format!("agent:{}:main", p.agent_id)),
    }
}

/// What the preserve checks need besides the entry.
pub struct Preserve<'a> {
    pub rules: Rules,
    pub keys: &'a HashSet<String>,
    pub recent_ms: Option<i64>,
    pub now_ms: f64,
}

impl Preserve<'_> {
    /// `isRecentSessionMaintenanceEntry`.
    pub fn is_recent(&self, key: &str, e: &Json) -> bool {
        self.recent(key, e)
    }

    fn recent(&self, key: &str, e: &Json) -> bool {
        let Some(ms) = self.recent_ms else {
            return false;
        };
        if is_synthetic(key) {
            return false;
        }
        let a = activity(e);
        a > 0.0 && self.now_ms - a <= ms as f64
    }

    /// `shouldPreserveNonArchivedMaintenanceEntry`.
    pub fn non_archived(&self, key: &str, e: &Json) -> bool {
        let pinned = match self.rules {
            Rules::V8 => has(e, "pinnedAt"),
            Rules::V9 => has(e, "pinnedAt") && is_pinnable(key, e),
        };
        pinned
            || e.get("modelSelectionLocked") == Some(&Json::Bool(true))
            || (self.rules == Rules::V9
                && e.get("status").and_then(Json::as_str) == Some("running"))
            || self.keys.contains(key)
            || self.recent(key, e)
            || is_protected(self.rules, key, e)
    }

    /// `shouldPreserveMaintenanceEntry`.
    pub fn any(&self, key: &str, e: &Json) -> bool {
        has(e, "archivedAt") || self.non_archived(key, e)
    }
}

fn unarchived(s: &Store) -> usize {
    s.values().filter(|e| !has(e, "archivedAt")).count()
}

fn mark_archived(e: &mut Json, now: f64, phase: ArchivePhase, rules: Rules) {
    if let Json::Object(m) = e {
        m.insert("archivedAt", Json::from(now as i64));
        if rules == Rules::V9 || phase != ArchivePhase::Dashboard {
            m.remove("archivedBy");
            m.insert("archiveReason", Json::from(phase.reason()));
        }
    }
}

/// Plan the entry maintenance on `s` (changed in place: deletions removed, archives marked).
pub fn plan(s: &mut Store, m: &Settings, p: &Preserve<'_>, now: impl Fn() -> f64) -> EntryPlan {
    let mut out = EntryPlan::default();
    prune_model_runs(s, m, p, &now, &mut out);
    archive_dashboards(s, m, p, &now, &mut out);
    retire_stale(s, m, p, &now, &mut out);
    cap(s, m, p, &now, &mut out);
    out
}

/// Model-run probes older than `modelRunPruneAfter`, deleted when the store is over the cap.
fn prune_model_runs(
    s: &mut Store,
    m: &Settings,
    p: &Preserve<'_>,
    now: &dyn Fn() -> f64,
    out: &mut EntryPlan,
) {
    let initial = match p.rules {
        Rules::V8 => s.len(),
        Rules::V9 => unarchived(s),
    };
    if initial as f64 <= m.max_entries || m.model_run_prune_after_ms <= 0 {
        return;
    }
    let cutoff = now() - m.model_run_prune_after_ms as f64;
    let victims: Vec<String> = s
        .iter()
        .filter(|(k, e)| !p.any(k, e) && keys::is_model_run_key(k))
        .filter(|(_, e)| num(e, "updatedAt").is_some_and(|u| u < cutoff))
        .map(|(k, _)| k.clone())
        .collect();
    for k in victims {
        s.shift_remove(&k);
        out.model_run.push(k);
    }
}

/// Dashboard sessions idle longer than `archiveDashboardAfter`, archived in place.
fn archive_dashboards(
    s: &mut Store,
    m: &Settings,
    p: &Preserve<'_>,
    now: &dyn Fn() -> f64,
    out: &mut EntryPlan,
) {
    let Some(after) = m.archive_dashboard_after_ms.filter(|a| *a > 0) else {
        return;
    };
    let t = now();
    let cutoff = t - after as f64;
    let mut hits = Vec::new();
    for (k, e) in s.iter() {
        if !keys::parse_agent_key(k).is_some_and(|a| a.rest.starts_with("dashboard:")) {
            continue;
        }
        let skip = match p.rules {
            Rules::V8 => has(e, "pinnedAt") || has(e, "archivedAt") || p.keys.contains(k),
            Rules::V9 => p.any(k, e),
        };
        let a = activity(e);
        if skip || a <= 0.0 || a >= cutoff {
            continue;
        }
        hits.push(k.clone());
    }
    for k in hits {
        if let Some(e) = s.get_mut(&k) {
            mark_archived(e, t, ArchivePhase::Dashboard, p.rules);
        }
        out.archived.push((k, ArchivePhase::Dashboard));
    }
}

/// Entries not updated within `pruneAfter`: deleted (2026.8.x, or synthetic), else archived.
fn retire_stale(
    s: &mut Store,
    m: &Settings,
    p: &Preserve<'_>,
    now: &dyn Fn() -> f64,
    out: &mut EntryPlan,
) {
    if m.prune_after_ms <= 0 {
        return;
    }
    let t = now();
    let cutoff = t - m.prune_after_ms as f64;
    let victims: Vec<String> = s
        .iter()
        .filter(|(k, e)| !p.any(k, e))
        .filter(|(_, e)| num(e, "updatedAt").is_some_and(|u| u < cutoff))
        .map(|(k, _)| k.clone())
        .collect();
    for k in victims {
        if retire(s, &k, t, ArchivePhase::Age, p.rules) {
            out.stale.push(k);
        } else {
            out.archived.push((k, ArchivePhase::Age));
        }
    }
}

/// The cap (forced: it always runs): as many entries over `maxEntries` as nothing preserves,
/// the least recent ones, deleted (2026.8.x, or synthetic) or archived.
fn cap(s: &mut Store, m: &Settings, p: &Preserve<'_>, now: &dyn Fn() -> f64, out: &mut EntryPlan) {
    let candidates: Vec<String> = s
        .iter()
        .filter(|(_, e)| p.rules == Rules::V8 || !has(e, "archivedAt"))
        .map(|(k, _)| k.clone())
        .collect();
    let overflow = candidates.len() as f64 - m.max_entries.max(0.0);
    if overflow <= 0.0 {
        return;
    }
    let eligible: Vec<String> = candidates
        .into_iter()
        .filter(|k| !p.any(k, &s[k]))
        .collect();
    let count = (overflow.min(eligible.len() as f64)) as usize;
    let victims = oldest(s, eligible, count, p.rules);
    let t = now();
    for k in victims {
        if !retire(s, &k, t, ArchivePhase::Cap, p.rules) {
            out.archived.push((k.clone(), ArchivePhase::Cap));
        }
        out.capped.push(k);
    }
}

/// The `count` entries of `eligible` the cap takes: 2026.8.x the least recently updated,
/// 2026.9.x the least recently active (of equals, the later in the store first).
fn oldest(s: &Store, eligible: Vec<String>, count: usize, rules: Rules) -> Vec<String> {
    match rules {
        Rules::V8 => {
            let ts = |k: &String| num(&s[k], "updatedAt").unwrap_or(f64::NEG_INFINITY);
            let mut v = eligible;
            v.sort_by(|a, b| {
                ts(b)
                    .partial_cmp(&ts(a))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            v.split_off(v.len() - count)
        }
        Rules::V9 => {
            let mut v: Vec<String> = eligible.into_iter().rev().collect();
            v.sort_by(|a, b| {
                activity(&s[a])
                    .partial_cmp(&activity(&s[b]))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            v.truncate(count);
            v
        }
    }
}

/// Take entry `k` out of the live store in `phase`: deleted (true) under 2026.8.x rules or
/// when it is synthetic, else archived in place at `t` (false).
fn retire(s: &mut Store, k: &str, t: f64, phase: ArchivePhase, rules: Rules) -> bool {
    if rules == Rules::V8 || is_synthetic(k) {
        s.shift_remove(k);
        return true;
    }
    if let Some(e) = s.get_mut(k) {
        mark_archived(e, t, phase, rules);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn store(v: Value) -> Store {
        match v {
            Value::Object(m) => crate::store::from_map(m),
            _ => unreachable!(),
        }
    }

    fn settings(max_entries: f64) -> Settings {
        Settings {
            prune_after_ms: 3650 * 86_400_000,
            archive_dashboard_after_ms: Some(7 * 86_400_000),
            max_entries,
            model_run_prune_after_ms: 86_400_000,
            preserve_recent_ms: None,
            max_disk_bytes: None,
            high_water_bytes: None,
        }
    }

    #[test]
    fn the_cap_takes_the_oldest_activity_and_on_ties_the_larger_key_first() {
        // 2026.9.6 on `gen/timp`: victims zzz, t-c, t-b.
        let t = 1_700_000_000_000i64;
        let mut s = store(json!({
            "agent:main:explicit:t-a": {"sessionId": "a", "updatedAt": t},
            "agent:main:explicit:t-b": {"sessionId": "b", "updatedAt": t},
            "agent:main:explicit:t-c": {"sessionId": "c", "updatedAt": t},
            "agent:main:explicit:zzz": {"sessionId": "z", "updatedAt": t},
            "agent:main:main": {"sessionId": "m", "updatedAt": t},
        }));
        let keys = HashSet::new();
        let p = Preserve {
            rules: Rules::V9,
            keys: &keys,
            recent_ms: None,
            now_ms: t as f64 + 1000.0,
        };
        let plan = plan(&mut s, &settings(2.0), &p, || t as f64 + 1000.0);
        assert_eq!(
            plan.capped,
            [
                "agent:main:explicit:zzz",
                "agent:main:explicit:t-c",
                "agent:main:explicit:t-b"
            ]
        );
        // Durable entries are archived in place, not deleted.
        assert_eq!(plan.deleted().count(), 0);
        assert_eq!(s.len(), 5);
        assert_eq!(
            s["agent:main:explicit:zzz"]["archiveReason"],
            "active-session-cap"
        );
        assert_eq!(plan.action("agent:main:explicit:zzz"), "archive-cap");
        assert_eq!(plan.action("agent:main:explicit:t-a"), "keep");
    }

    #[test]
    fn synthetic_and_protected_keys() {
        for k in [
            "agent:main:subagent:x",
            "agent:main:cron:job",
            "agent:main:hook:webhook:w",
            "agent:main:main:heartbeat",
            "agent:main:acp:x",
        ] {
            assert!(is_synthetic(k), "{k}");
            assert!(
                !is_protected(Rules::V9, k, &Json::from_value(json!({}))),
                "{k}"
            );
        }
        let e = Json::from_value(json!({}));
        for k in [
            "agent:main:main",
            "agent:main:telegram:direct:1",
            "agent:main:direct:+1555",
            "agent:main:whatsapp:default:direct:+1",
            "agent:main:discord:channel:9",
            "agent:main:slack:channel:c:thread:1.2",
        ] {
            assert!(is_protected(Rules::V9, k, &e), "{k}");
        }
        // 2026.8.x does not protect direct messages.
        assert!(!is_protected(Rules::V8, "agent:main:telegram:direct:1", &e));
        assert!(is_protected(Rules::V8, "agent:main:discord:channel:9", &e));
        assert!(is_protected(
            Rules::V9,
            "agent:main:explicit:x",
            &Json::from_value(json!({"delivery": {"kind": "external"}}))
        ));
    }
}
