//! The part of OpenClaw's config schema that cleanup depends on: `session.dmScope`,
//! `session.store`, `logging.consoleLevel` and `consoleStyle`, and the strict
//! `session.maintenance` object (types, enums, positive integers, and the duration/size
//! grammars). OpenClaw refuses to run on an invalid config
//! (exit 1); so does clawkeeper, naming each problem the same way.

use serde_json::Value;

use super::grammar::{parse_byte_size, parse_duration_ms};

fn is_string_or_number(v: &Value) -> bool {
    v.is_string() || v.is_number()
}

fn positive_int(v: &Value) -> bool {
    v.as_f64()
        .is_some_and(|f| f > 0.0 && f.fract() == 0.0 && f.is_finite())
}

fn stringified(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map(crate::jsjson::js_number).unwrap_or_default(),
        _ => String::new(),
    }
}

/// `logging.consoleLevel` and `logging.consoleStyle`, which decide the console log lines.
/// (The rest of `logging` is not checked.)
fn logging_problems(root: &Value, out: &mut Vec<String>) {
    let Some(logging) = root.get("logging") else {
        return;
    };
    let Value::Object(logging) = logging else {
        out.push("logging: Invalid input".into());
        return;
    };
    if let Some(v) = logging.get("consoleLevel")
        && !matches!(
            v.as_str(),
            Some("silent" | "fatal" | "error" | "warn" | "info" | "debug" | "trace")
        )
    {
        out.push(
            "logging.consoleLevel: Invalid input (allowed: \"silent\", \"fatal\", \"error\", \"warn\", \"info\", \"debug\", \"trace\")"
                .into(),
        );
    }
    if let Some(v) = logging.get("consoleStyle")
        && !matches!(v.as_str(), Some("pretty" | "compact" | "json"))
    {
        out.push(
            "logging.consoleStyle: Invalid input (allowed: \"pretty\", \"compact\", \"json\")"
                .into(),
        );
    }
}

/// Problems in the config, as `path: message` lines (empty = valid).
pub fn problems(root: &Value) -> Vec<String> {
    problems_of(root, false)
}

/// [`problems`] against the schema of the SQLite-era releases (2026.9.x): `session.maintenance`
/// also takes `archiveDashboardAfter`, `preserveRecent`, `coldStorage` and `maxDiskBytes:
/// false`, and no longer `pruneDays` or `rotateBytes`.
pub fn problems_sqlite(root: &Value) -> Vec<String> {
    problems_of(root, true)
}

fn positive_duration(v: &Value) -> bool {
    is_string_or_number(v) && parse_duration_ms(&stringified(v), "d").is_some_and(|d| d > 0)
}

fn problems_of(root: &Value, sqlite: bool) -> Vec<String> {
    let mut out = Vec::new();
    logging_problems(root, &mut out);
    let Some(session) = root.get("session") else {
        return out;
    };
    if session.is_null() {
        return out;
    }
    let Value::Object(session) = session else {
        out.push("session: Invalid input: expected object".into());
        return out;
    };
    if let Some(v) = session.get("dmScope")
        && !matches!(
            v.as_str(),
            Some("main" | "per-peer" | "per-channel-peer" | "per-account-channel-peer")
        )
    {
        out.push("session.dmScope: Invalid input".into());
    }
    if let Some(v) = session.get("store")
        && !v.is_string()
    {
        out.push("session.store: Invalid input: expected string".into());
    }
    let Some(m) = session.get("maintenance") else {
        return out;
    };
    let Value::Object(m) = m else {
        out.push("session.maintenance: Invalid input: expected object".into());
        return out;
    };
    for (k, v) in m {
        let p = format!("session.maintenance.{k}");
        let ok = if sqlite {
            match k.as_str() {
                "mode" => matches!(v.as_str(), Some("enforce" | "warn")),
                "pruneAfter" => positive_duration(v),
                "archiveDashboardAfter" => {
                    positive_duration(v) || *v == Value::Bool(false) || v.as_f64() == Some(0.0)
                }
                "preserveRecent" | "resetArchiveRetention" => {
                    positive_duration(v) || *v == Value::Bool(false)
                }
                "maxEntries" => positive_int(v),
                "coldStorage" => v.is_object(),
                "maxDiskBytes" => {
                    *v == Value::Bool(false)
                        || (is_string_or_number(v) && parse_byte_size(&stringified(v)).is_some())
                }
                "highWaterBytes" => {
                    is_string_or_number(v) && parse_byte_size(&stringified(v)).is_some()
                }
                _ => {
                    out.push(format!("session.maintenance: Unrecognized key: \"{k}\""));
                    continue;
                }
            }
        } else {
            match k.as_str() {
                "mode" => matches!(v.as_str(), Some("enforce" | "warn")),
                "pruneAfter" | "resetArchiveRetention" => {
                    (is_string_or_number(v) && parse_duration_ms(&stringified(v), "d").is_some())
                        || (k == "resetArchiveRetention" && *v == Value::Bool(false))
                }
                "pruneDays" | "maxEntries" => positive_int(v),
                "rotateBytes" => is_string_or_number(v),
                "maxDiskBytes" | "highWaterBytes" => {
                    is_string_or_number(v) && parse_byte_size(&stringified(v)).is_some()
                }
                _ => {
                    out.push(format!("session.maintenance: Unrecognized key: \"{k}\""));
                    continue;
                }
            }
        };
        if !ok {
            let msg = match k.as_str() {
                "mode" => "Invalid input (allowed: \"enforce\", \"warn\")",
                "pruneAfter"
                | "resetArchiveRetention"
                | "archiveDashboardAfter"
                | "preserveRecent" => "invalid duration (use ms, s, m, h, d)",
                "maxDiskBytes" | "highWaterBytes" => "invalid size (use b, kb, mb, gb, tb)",
                _ => "Invalid input",
            };
            out.push(format!("{p}: {msg}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_invalid_maintenance() {
        assert!(problems(&json!({})).is_empty());
        assert!(problems(&json!({"session": {"maintenance": {"mode": "warn", "pruneAfter": 7, "maxDiskBytes": "1gb", "resetArchiveRetention": false}}})).is_empty());
        let p = problems(
            &json!({"session": {"dmScope": "x", "maintenance": {"mode": "bogus", "maxEntries": "abc", "pruneAfter": "1w", "extra": 1}}}),
        );
        assert_eq!(p.len(), 5, "{p:?}");
        assert!(!problems(&json!({"session": {"maintenance": {"maxEntries": 2.5}}})).is_empty());
        assert!(
            problems(&json!({"logging": {"consoleLevel": "warn", "consoleStyle": "json"}}))
                .is_empty()
        );
        assert_eq!(
            problems(&json!({"logging": {"consoleLevel": " warn "}})).len(),
            1
        );
        assert_eq!(
            problems(&json!({"logging": {"consoleStyle": "fancy"}})).len(),
            1
        );
        assert_eq!(
            problems(&json!({"logging": "loud"})),
            ["logging: Invalid input"]
        );
    }
}
