//! `session.maintenance` resolved exactly as OpenClaw's `resolveMaintenanceConfigFromInput`,
//! with clawkeeper's flag overrides applied on top.
//!
//! Defaults: mode `enforce`, pruneAfter 30 days (falls back to the deprecated `pruneDays`), max
//! 500 entries, model-run probes after 24 h, reset-archive retention = pruneAfter (`false`
//! disables it), no disk budget unless `maxDiskBytes` parses, high water 80 % of the budget.

use serde_json::Value;

use super::grammar::{parse_byte_size, parse_duration_ms};
use crate::js::js_trim;

pub const DEFAULT_PRUNE_AFTER_MS: i64 = 30 * 86_400_000;
pub const DEFAULT_MODEL_RUN_PRUNE_AFTER_MS: i64 = 86_400_000;
pub const DEFAULT_MAX_ENTRIES: f64 = 500.0;

/// A maintenance flag whose value cannot be used (the run stops before reading anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadOverride {
    #[error("invalid --prune-after {0:?}: use values like 30d, 12h or 1h30m")]
    PruneAfter(String),
    #[error(
        "invalid --max-entries 0: use a positive number of entries (OpenClaw's config refuses \
         session.maintenance.maxEntries 0 too)"
    )]
    NoEntries,
    #[error("invalid --reset-archive-retention {0:?}: use a duration like 30d, or false")]
    ResetArchiveRetention(String),
    #[error("invalid --max-disk {0:?}: use values like 512kb, 10mb, 1gb")]
    MaxDisk(String),
    #[error("invalid --high-water {0:?}: use values like 512kb, 10mb, 1gb")]
    HighWater(String),
}

/// `enforce` or `warn` (anything else in the config is carried verbatim, as OpenClaw does).
#[derive(Debug, Clone, PartialEq)]
pub struct Maintenance {
    /// The configured mode, verbatim (a JSON value: OpenClaw prints whatever it was given).
    pub mode: Value,
    pub prune_after_ms: i64,
    /// `maxEntries` verbatim as a number (OpenClaw does not clamp it).
    pub max_entries: f64,
    pub model_run_prune_after_ms: i64,
    /// `None` = disabled (`resetArchiveRetention: false`).
    pub reset_archive_retention_ms: Option<i64>,
    pub max_disk_bytes: Option<i64>,
    pub high_water_bytes: Option<i64>,
}

/// Flag overrides (`--prune-after` …), plain strings as typed.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub prune_after: Option<String>,
    pub max_entries: Option<u64>,
    pub reset_archive_retention: Option<String>,
    pub max_disk: Option<String>,
    pub high_water: Option<String>,
}

/// `normalizeStringifiedOptionalString`: strings trimmed, numbers/booleans stringified.
pub(crate) fn stringified(v: Option<&Value>) -> Option<String> {
    let s = match v? {
        Value::String(s) => s.clone(),
        Value::Number(n) => crate::jsjson::js_number(n.as_f64()?),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    let t = js_trim(&s);
    (!t.is_empty()).then(|| t.to_string())
}

impl Maintenance {
    /// Resolve from the `session.maintenance` object (None when absent).
    pub fn resolve(m: Option<&Value>) -> Maintenance {
        let get = |k: &str| m.and_then(|m| m.as_object()).and_then(|o| o.get(k));
        // `maintenance?.pruneAfter ?? maintenance?.pruneDays`: null and undefined fall through.
        let prune_raw = match get("pruneAfter") {
            Some(Value::Null) | None => get("pruneDays"),
            v => v,
        };
        let prune_after_ms = stringified(prune_raw)
            .and_then(|s| parse_duration_ms(&s, "d"))
            .unwrap_or(DEFAULT_PRUNE_AFTER_MS);
        let reset_archive_retention_ms = match get("resetArchiveRetention") {
            Some(Value::Bool(false)) => None,
            raw => Some(
                stringified(raw)
                    .and_then(|s| parse_duration_ms(&s, "d"))
                    .unwrap_or(prune_after_ms),
            ),
        };
        let max_disk_bytes = stringified(get("maxDiskBytes")).and_then(|s| parse_byte_size(&s));
        let high_water_bytes = resolve_high_water(get("highWaterBytes"), max_disk_bytes);
        let mode = match get("mode") {
            Some(Value::Null) | None => Value::String("enforce".into()),
            Some(v) => v.clone(),
        };
        let max_entries = match get("maxEntries") {
            Some(Value::Null) | None => DEFAULT_MAX_ENTRIES,
            Some(v) => v.as_f64().unwrap_or(DEFAULT_MAX_ENTRIES),
        };
        Maintenance {
            mode,
            prune_after_ms,
            max_entries,
            model_run_prune_after_ms: DEFAULT_MODEL_RUN_PRUNE_AFTER_MS,
            reset_archive_retention_ms,
            max_disk_bytes,
            high_water_bytes,
        }
    }

    /// The mode as text (`enforce` / `warn` / whatever was configured).
    pub fn mode_str(&self) -> String {
        match &self.mode {
            Value::String(s) => s.clone(),
            other => crate::jsjson::to_string_compact(other),
        }
    }

    /// Apply flag overrides as if they had been written into `session.maintenance`.
    pub fn with_overrides(m: Option<&Value>, o: &Overrides) -> Result<Maintenance, BadOverride> {
        let obj = Maintenance::merged(m, o)?;
        Ok(Maintenance::resolve(Some(&obj)))
    }

    /// `session.maintenance` with the overrides written into it (checked as
    /// [`Maintenance::with_overrides`] checks them).
    pub fn merged(m: Option<&Value>, o: &Overrides) -> Result<Value, BadOverride> {
        let mut obj = m.and_then(Value::as_object).cloned().unwrap_or_default();
        if let Some(p) = &o.prune_after {
            parse_duration_ms(p, "d").ok_or_else(|| BadOverride::PruneAfter(p.clone()))?;
            obj.insert("pruneAfter".into(), Value::String(p.clone()));
        }
        if let Some(n) = o.max_entries {
            if n == 0 {
                return Err(BadOverride::NoEntries);
            }
            obj.insert("maxEntries".into(), Value::from(n));
        }
        if let Some(r) = &o.reset_archive_retention {
            if js_trim(r).eq_ignore_ascii_case("false") {
                obj.insert("resetArchiveRetention".into(), Value::Bool(false));
            } else {
                parse_duration_ms(r, "d")
                    .ok_or_else(|| BadOverride::ResetArchiveRetention(r.clone()))?;
                obj.insert("resetArchiveRetention".into(), Value::String(r.clone()));
            }
        }
        if let Some(s) = &o.max_disk {
            parse_byte_size(s).ok_or_else(|| BadOverride::MaxDisk(s.clone()))?;
            obj.insert("maxDiskBytes".into(), Value::String(s.clone()));
        }
        if let Some(s) = &o.high_water {
            parse_byte_size(s).ok_or_else(|| BadOverride::HighWater(s.clone()))?;
            obj.insert("highWaterBytes".into(), Value::String(s.clone()));
        }
        Ok(Value::Object(obj))
    }
}

fn resolve_high_water(raw: Option<&Value>, max: Option<i64>) -> Option<i64> {
    let max = max?;
    let default = if max <= 0 {
        0
    } else {
        (max as f64 * 0.8).floor().min(max as f64).max(1.0) as i64
    };
    match stringified(raw).and_then(|s| parse_byte_size(&s)) {
        Some(parsed) => Some(parsed.min(max)),
        None => Some(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults() {
        let m = Maintenance::resolve(None);
        assert_eq!(m.mode, json!("enforce"));
        assert_eq!(m.prune_after_ms, DEFAULT_PRUNE_AFTER_MS);
        assert_eq!(m.max_entries, 500.0);
        assert_eq!(m.reset_archive_retention_ms, Some(DEFAULT_PRUNE_AFTER_MS));
        assert_eq!(m.max_disk_bytes, None);
        assert_eq!(m.high_water_bytes, None);
    }

    #[test]
    fn fallbacks_and_budget() {
        let m = Maintenance::resolve(Some(
            &json!({"pruneDays": 7, "resetArchiveRetention": false, "maxDiskBytes": "1kb"}),
        ));
        assert_eq!(m.prune_after_ms, 7 * 86_400_000);
        assert_eq!(m.reset_archive_retention_ms, None);
        assert_eq!(m.max_disk_bytes, Some(1024));
        assert_eq!(m.high_water_bytes, Some(819));
        let m = Maintenance::resolve(Some(
            &json!({"pruneAfter": "bogus", "resetArchiveRetention": "x", "maxDiskBytes": 100, "highWaterBytes": "1mb"}),
        ));
        assert_eq!(m.prune_after_ms, DEFAULT_PRUNE_AFTER_MS);
        assert_eq!(m.reset_archive_retention_ms, Some(DEFAULT_PRUNE_AFTER_MS));
        assert_eq!(m.high_water_bytes, Some(100));
        let m = Maintenance::resolve(Some(&json!({"maxDiskBytes": "0"})));
        assert_eq!((m.max_disk_bytes, m.high_water_bytes), (Some(0), Some(0)));
        let m = Maintenance::resolve(Some(&json!({"maxDiskBytes": "1"})));
        assert_eq!(m.high_water_bytes, Some(1));
    }

    #[test]
    fn overrides_win() {
        let o = Overrides {
            prune_after: Some("2h".into()),
            max_entries: Some(3),
            ..Default::default()
        };
        let m =
            Maintenance::with_overrides(Some(&json!({"pruneAfter": "1d", "maxEntries": 9})), &o)
                .unwrap();
        assert_eq!(m.prune_after_ms, 7_200_000);
        assert_eq!(m.max_entries, 3.0);
        let bad = Overrides {
            max_disk: Some("lots".into()),
            ..Default::default()
        };
        assert_eq!(
            Maintenance::with_overrides(None, &bad),
            Err(BadOverride::MaxDisk("lots".into()))
        );
        assert_eq!(
            BadOverride::MaxDisk("lots".into()).to_string(),
            r#"invalid --max-disk "lots": use values like 512kb, 10mb, 1gb"#
        );
        let zero = Overrides {
            max_entries: Some(0),
            ..Default::default()
        };
        let e = Maintenance::with_overrides(None, &zero).unwrap_err();
        assert_eq!(e, BadOverride::NoEntries);
        assert_eq!(
            e.to_string(),
            "invalid --max-entries 0: use a positive number of entries (OpenClaw's config \
             refuses session.maintenance.maxEntries 0 too)"
        );
    }
}
