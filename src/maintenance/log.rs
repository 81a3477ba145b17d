//! The `sessions/store` log lines OpenClaw's maintenance writes while it applies a cleanup,
//! decided exactly where the reference decides them. Which lines a run prints (and to which
//! stream) is the caller's business; this module only says what was logged, in order.
//!
//! Enforce mode logs `pruned stale gateway model-run session entries`, `pruned stale session
//! entries` and `capped session entry count` when those steps removed something, then the
//! disk budget's `applied session disk budget cleanup` (over budget, removed something, ended
//! at or under the high-water mark) or `session disk budget still above high-water target
//! after cleanup` (a warning). Warn mode logs `session maintenance would evict active session;
//! skipping enforcement` when `--active-key` names an entry that stale pruning or the cap
//! would remove, and `session disk budget exceeded (warn-only mode)`. Previews log nothing.

use crate::json::Json;

use super::budget::BudgetReport;
use crate::js::js_trim;
use crate::keys;
use crate::store::{self, Store};

/// The logger's levels, lowest first, as OpenClaw names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Fatal,
    Silent,
}

impl Level {
    /// `tryParseLogLevel`: one of the allowed names, surrounding whitespace ignored.
    pub fn parse(s: &str) -> Option<Level> {
        Some(match js_trim(s) {
            "trace" => Level::Trace,
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "fatal" => Level::Fatal,
            "silent" => Level::Silent,
            _ => return None,
        })
    }
}

/// One logged line of the `sessions/store` subsystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: Level,
    pub message: &'static str,
}

impl LogLine {
    fn info(message: &'static str) -> LogLine {
        LogLine {
            level: Level::Info,
            message,
        }
    }

    fn warn(message: &'static str) -> LogLine {
        LogLine {
            level: Level::Warn,
            message,
        }
    }

    /// The line as the console shows it in OpenClaw's default (compact, uncoloured) style.
    pub fn console_text(&self) -> String {
        format!("[sessions/store] {}", self.message)
    }
}

/// The lines of enforce mode's entry steps, in their order.
pub fn entry_steps(model_runs: usize, stale: usize, capped: usize) -> Vec<LogLine> {
    let mut out = Vec::new();
    if model_runs > 0 {
        out.push(LogLine::info(
            "pruned stale gateway model-run session entries",
        ));
    }
    if stale > 0 {
        out.push(LogLine::info("pruned stale session entries"));
    }
    if capped > 0 {
        out.push(LogLine::info("capped session entry count"));
    }
    out
}

/// The disk budget's line for an applied run (`warn_only` in warn mode), if any.
pub fn budget(report: Option<&BudgetReport>, warn_only: bool) -> Option<LogLine> {
    let b = report.filter(|b| b.over_budget)?;
    if warn_only {
        return Some(LogLine::warn(
            "session disk budget exceeded (warn-only mode)",
        ));
    }
    if b.total_bytes_after > b.high_water_bytes {
        Some(LogLine::warn(
            "session disk budget still above high-water target after cleanup",
        ))
    } else if b.removed_files > 0 || b.removed_entries > 0 {
        Some(LogLine::info("applied session disk budget cleanup"))
    } else {
        None
    }
}

/// Warn mode's check (`getActiveSessionMaintenanceWarning`): would stale pruning or the cap
/// remove the `--active-key` entry (looked up by the trimmed key, case kept)?
pub fn active_session(
    s: &Store,
    active_key: Option<&str>,
    prune_after_ms: i64,
    max_entries: f64,
    now_ms: f64,
) -> Option<LogLine> {
    let key = js_trim(active_key?);
    if key.is_empty() {
        return None;
    }
    let entry = s.get(key)?;
    if keys::is_protected(key, Some(entry)) {
        return None;
    }
    let cutoff = now_ms - prune_after_ms as f64;
    let would_prune = store::updated_at(entry).is_some_and(|u| u < cutoff);
    if would_prune || would_cap(s, key, entry, max_entries) {
        Some(LogLine::warn(
            "session maintenance would evict active session; skipping enforcement",
        ))
    } else {
        None
    }
}

/// `wouldCapActiveSession`.
fn would_cap(s: &Store, active: &str, entry: &Json, max_entries: f64) -> bool {
    // Comparisons with NaN are false, as in JavaScript.
    if (s.len() as f64) <= max_entries {
        return false;
    }
    if max_entries <= 0.0 {
        return true;
    }
    let protected = s
        .iter()
        .filter(|(k, e)| k.as_str() != active && keys::is_protected(k, Some(e)))
        .count();
    let room = (max_entries - protected as f64).max(0.0);
    if room <= 0.0 {
        return true;
    }
    let updated = |e: &Json| store::updated_at(e).unwrap_or(f64::NEG_INFINITY);
    let active_at = updated(entry);
    let mut newer = 0.0;
    let mut seen_active = false;
    for (k, e) in s {
        if k == active {
            seen_active = true;
            continue;
        }
        if keys::is_protected(k, Some(e)) {
            continue;
        }
        let at = updated(e);
        if at > active_at || (!seen_active && at == active_at) {
            newer += 1.0;
            if newer >= room {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn store(v: Value) -> Store {
        crate::store::from_map(v.as_object().unwrap().clone())
    }

    fn report(before: i64, after: i64, files: u64, entries: u64, over: bool) -> BudgetReport {
        BudgetReport {
            total_bytes_before: before,
            total_bytes_after: after,
            removed_files: files,
            removed_entries: entries,
            freed_bytes: before - after,
            max_bytes: 100,
            high_water_bytes: 80,
            over_budget: over,
        }
    }

    #[test]
    fn budget_lines() {
        assert_eq!(budget(None, false), None);
        assert_eq!(budget(Some(&report(50, 50, 0, 0, false)), true), None);
        let over = report(150, 70, 2, 0, true);
        assert_eq!(
            budget(Some(&over), true).unwrap().message,
            "session disk budget exceeded (warn-only mode)"
        );
        let applied = budget(Some(&over), false).unwrap();
        assert_eq!(applied.level, Level::Info);
        assert_eq!(
            applied.console_text(),
            "[sessions/store] applied session disk budget cleanup"
        );
        let still = budget(Some(&report(150, 90, 1, 1, true)), false).unwrap();
        assert_eq!(still.level, Level::Warn);
        assert!(still.message.contains("still above high-water"));
        // Over budget at exactly the high-water mark after removing nothing cannot happen
        // (max ≥ high water), but a run that removed nothing and ended at high water logs nothing.
        assert_eq!(budget(Some(&report(150, 80, 0, 0, true)), false), None);
    }

    #[test]
    fn entry_step_lines_in_order() {
        assert!(entry_steps(0, 0, 0).is_empty());
        let all: Vec<_> = entry_steps(1, 2, 3).iter().map(|l| l.message).collect();
        assert_eq!(
            all,
            [
                "pruned stale gateway model-run session entries",
                "pruned stale session entries",
                "capped session entry count"
            ]
        );
    }

    #[test]
    fn active_session_warning() {
        let now = 1_000_000_000.0;
        let s = store(json!({
            "agent:main:a": {"updatedAt": now - 10.0},
            "agent:main:b": {"updatedAt": now - 20.0},
            "agent:main:c": {"updatedAt": now - 5_000.0},
            "agent:main:discord:channel:1": {"updatedAt": now},
        }));
        // Stale: older than pruneAfter.
        assert!(active_session(&s, Some(" agent:main:c "), 1_000, 500.0, now).is_some());
        // Fresh, no cap pressure.
        assert!(active_session(&s, Some("agent:main:c"), 10_000, 500.0, now).is_none());
        // Cap of 2 with one protected entry: one slot, taken by the newer `a`.
        assert!(active_session(&s, Some("agent:main:b"), 10_000, 2.0, now).is_some());
        assert!(active_session(&s, Some("agent:main:a"), 10_000, 2.0, now).is_none());
        // Unknown key (case matters), protected key, empty key.
        assert!(active_session(&s, Some("AGENT:MAIN:C"), 1_000, 500.0, now).is_none());
        assert!(active_session(&s, Some("agent:main:discord:channel:1"), 1, 1.0, now).is_none());
        assert!(active_session(&s, Some("  "), 1, 1.0, now).is_none());
        assert!(active_session(&s, None, 1, 1.0, now).is_none());
    }

    #[test]
    fn levels() {
        assert_eq!(Level::parse(" warn "), Some(Level::Warn));
        assert_eq!(Level::parse("WARN"), None);
        assert!(Level::Info < Level::Warn && Level::Warn < Level::Silent);
    }
}
