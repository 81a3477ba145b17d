//! The `session.maintenance` settings of a case, the cutoffs they imply and their JSON5 text.

use serde_json::{Value, json};

use super::{DAY, HOUR, MINUTE, Rng};

/// The maintenance settings of one case and how they are spelled in the config.
pub struct MaintenanceChoice {
    pub mode: Option<&'static str>,
    pub prune: Option<Value>,
    pub prune_days: Option<i64>,
    pub prune_ms: i64,
    pub reset: Option<Value>,
    pub reset_ms: Option<i64>,
    pub max_entries: Option<i64>,
    pub dm_scope: Option<&'static str>,
}

impl MaintenanceChoice {
    pub fn random(rng: &mut Rng) -> Self {
        let (prune, prune_days, prune_ms) = match rng.below(12) {
            0 => (None, None, 30 * DAY),
            1 => (Some(json!("7d")), None, 7 * DAY),
            2 => (Some(json!("12h")), None, 12 * HOUR),
            3 => (Some(json!("90m")), None, 90 * MINUTE),
            4 => (Some(json!("1h30m")), None, 90 * MINUTE),
            5 => (Some(json!(14)), None, 14 * DAY),
            6 => (Some(json!("3")), None, 3 * DAY),
            7 => (Some(json!("45m")), None, 45 * MINUTE),
            8 => (None, Some(10), 10 * DAY),
            9 => (Some(json!("1.5d")), None, 36 * HOUR),
            10 => (Some(json!(" 2D ")), None, 2 * DAY),
            _ => (Some(json!("5d")), None, 5 * DAY),
        };
        let (reset, reset_ms) = match rng.below(7) {
            0 | 1 => (None, Some(prune_ms)),
            2 => (Some(json!("3d")), Some(3 * DAY)),
            3 => (Some(json!(1)), Some(DAY)),
            4 => (Some(json!(false)), None),
            5 => (Some(json!("2h")), Some(2 * HOUR)),
            _ => (Some(json!("6h")), Some(6 * HOUR)),
        };
        MaintenanceChoice {
            mode: *rng.pick(&[None, None, Some("enforce"), Some("warn")]),
            prune,
            prune_days,
            prune_ms,
            reset,
            reset_ms,
            max_entries: if rng.chance(0.65) {
                Some(rng.range(1, 10))
            } else {
                None
            },
            dm_scope: *rng.pick(&[
                None,
                None,
                Some("main"),
                Some("per-peer"),
                Some("per-channel-peer"),
            ]),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "mode={:?} pruneAfter={:?} pruneDays={:?} reset={:?} maxEntries={:?} dmScope={:?}",
            self.mode, self.prune, self.prune_days, self.reset, self.max_entries, self.dm_scope
        )
    }

    /// The JSON5 config text; the disk budget is sized from `budget_bytes`.
    pub fn render(&self, rng: &mut Rng, budget_bytes: &i64) -> String {
        let mut m = Vec::new();
        if let Some(mode) = self.mode {
            m.push(format!("mode: \"{mode}\""));
        }
        if let Some(p) = &self.prune {
            m.push(format!("pruneAfter: {p}"));
        }
        if let Some(d) = self.prune_days {
            m.push(format!("pruneDays: {d}"));
        }
        if let Some(r) = &self.reset {
            m.push(format!("'resetArchiveRetention': {r}"));
        }
        if let Some(n) = self.max_entries {
            m.push(format!("maxEntries: {n}"));
        }
        if rng.chance(0.6) {
            let factor = *rng.pick(&[0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.2, 3.0]);
            let max = ((*budget_bytes as f64 * factor) as i64).max(1);
            let spelled = match rng.below(6) {
                0 => json!(max).to_string(),
                1 => json!(max.to_string()).to_string(),
                2 => json!(format!("{}kb", (max / 1024).max(1))).to_string(),
                3 => json!(format!("{}.5K", (max / 1024).max(1))).to_string(),
                4 if rng.chance(0.2) => json!("0").to_string(),
                _ => json!(format!("{max}b")).to_string(),
            };
            m.push(format!("maxDiskBytes: {spelled}"));
            match rng.below(5) {
                0 => m.push(format!("highWaterBytes: {}", max * 6 / 10)),
                1 => m.push(format!("highWaterBytes: \"{}\"", max / 2)),
                2 => m.push(format!("highWaterBytes: {}", max * 2)),
                _ => {}
            }
        }
        if rng.chance(0.04) {
            // Values the reference's config schema rejects: both must refuse the same way.
            let bad = *rng.pick(&[
                "pruneAfter: \"soon\"",
                "resetArchiveRetention: true",
                "maxEntries: 0",
                "maxDiskBytes: \"plenty\"",
            ]);
            m.push(bad.to_string());
        }
        let mut session = Vec::new();
        if let Some(d) = self.dm_scope {
            session.push(format!("dmScope: \"{d}\""));
        }
        if m.is_empty() {
            session.push("maintenance: {}".to_string());
        } else {
            session.push(format!(
                "maintenance: {{\n      {},\n    }}",
                m.join(",\n      ")
            ));
        }
        format!(
            "// generated by the clawkeeper parity suite\n{{\n  session: {{\n    {},\n  }},\n}}\n",
            session.join(",\n    ")
        )
    }
}
