//! The `session.maintenance` settings of a case, the cutoffs they imply and their JSON5 text.

use serde_json::{Value, json};

use super::layout::Layout;
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

    /// The config texts (the reference's, and clawkeeper's when some maintenance keys move to
    /// flags); the disk budget is sized from `budget_bytes`.
    pub fn render(&self, rng: &mut Rng, budget_bytes: i64, layout: &Layout) -> Rendered {
        let mut items: Vec<Item> = Vec::new();
        if let Some(mode) = self.mode {
            items.push(Item::fixed(format!("mode: \"{mode}\"")));
        }
        if let Some(p) = &self.prune {
            items.push(Item::movable("pruneAfter", p, "--prune-after", "\"999d\""));
        }
        if let Some(d) = self.prune_days {
            items.push(Item::movable("pruneDays", &json!(d), "--prune-after", "99"));
        }
        if let Some(r) = &self.reset {
            let mut item = Item::movable(
                "resetArchiveRetention",
                r,
                "--reset-archive-retention",
                "\"1d\"",
            );
            item.text = format!("'resetArchiveRetention': {r}");
            items.push(item);
        }
        if let Some(n) = self.max_entries {
            items.push(Item::movable(
                "maxEntries",
                &json!(n),
                "--max-entries",
                "777",
            ));
        }
        if rng.chance(0.6) {
            let factor = *rng.pick(&[0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.2, 3.0]);
            let max = ((budget_bytes as f64 * factor) as i64).max(1);
            let spelled = match rng.below(6) {
                0 => json!(max),
                1 => json!(max.to_string()),
                2 => json!(format!("{}kb", (max / 1024).max(1))),
                3 => json!(format!("{}.5K", (max / 1024).max(1))),
                4 if rng.chance(0.2) => json!("0"),
                _ => json!(format!("{max}b")),
            };
            items.push(Item::movable(
                "maxDiskBytes",
                &spelled,
                "--max-disk",
                "\"1gb\"",
            ));
            let high = match rng.below(5) {
                0 => Some(json!(max * 6 / 10)),
                1 => Some(json!((max / 2).to_string())),
                2 => Some(json!(max * 2)),
                _ => None,
            };
            if let Some(h) = high {
                items.push(Item::movable(
                    "highWaterBytes",
                    &h,
                    "--high-water",
                    "\"1kb\"",
                ));
            }
        }
        if rng.chance(0.15) {
            // Deprecated and ignored, but part of the schema: any string or number.
            let v = rng
                .pick(&[r#""10mb""#, "1048576", r#""lots""#, r#""1k""#])
                .to_string();
            items.push(Item::fixed(format!("rotateBytes: {v}")));
        }
        if rng.chance(0.04) {
            // Values the reference's config schema rejects: both must refuse the same way
            // (and clawkeeper's flags must refuse them too).
            let (key, v, flag) = *rng.pick(&[
                ("pruneAfter", "\"soon\"", "--prune-after"),
                ("resetArchiveRetention", "true", "--reset-archive-retention"),
                ("maxEntries", "0", "--max-entries"),
                ("maxDiskBytes", "\"plenty\"", "--max-disk"),
            ]);
            let value: Value = serde_json::from_str(v).unwrap();
            items.push(Item::movable(key, &value, flag, "\"1d\""));
            items.last_mut().unwrap().decoy = None;
        }
        // Sometimes clawkeeper gets some of these values as flags instead (with its config
        // holding nothing, or a decoy the flag must override).
        let move_some = rng.chance(0.3);
        let mut ours_items = Vec::new();
        let mut ours_flags = Vec::new();
        for item in &items {
            match &item.flag {
                Some((flag, value)) if move_some && rng.chance(0.6) => {
                    ours_flags.push(flag.to_string());
                    ours_flags.push(value.clone());
                    if let Some(d) = &item.decoy
                        && rng.chance(0.4)
                    {
                        ours_items.push(format!("{}: {d}", item.key));
                    }
                }
                _ => ours_items.push(item.text.clone()),
            }
        }
        let reference_items: Vec<String> = items.iter().map(|i| i.text.clone()).collect();
        let logging = rng
            .chance(0.06)
            .then(|| *rng.pick(&["warn", "error", "silent", "debug", "info"]));
        let reference = self.text(&reference_items, layout, logging);
        let ours = (!ours_flags.is_empty()).then(|| self.text(&ours_items, layout, logging));
        Rendered {
            reference,
            ours,
            ours_flags,
        }
    }

    fn text(&self, m: &[String], layout: &Layout, logging: Option<&str>) -> String {
        let mut session = Vec::new();
        if let Some(d) = self.dm_scope {
            session.push(format!("dmScope: \"{d}\""));
        }
        if let Some(s) = &layout.session_store {
            session.push(format!("store: {}", json!(s)));
        }
        if m.is_empty() {
            session.push("maintenance: {}".to_string());
        } else {
            session.push(format!(
                "maintenance: {{\n      {},\n    }}",
                m.join(",\n      ")
            ));
        }
        let mut top = layout.config_lines();
        if let Some(level) = logging {
            top.push(format!("logging: {{ consoleLevel: \"{level}\" }}"));
        }
        top.push(format!(
            "session: {{\n    {},\n  }}",
            session.join(",\n    ")
        ));
        format!(
            "// generated by the clawkeeper parity suite\n{{\n  {},\n}}\n",
            top.join(",\n  ")
        )
    }
}

/// One `session.maintenance` key as written, and the flag that can replace it.
struct Item {
    key: &'static str,
    text: String,
    /// `(flag, value)`: the flag taking the same value (`String(value)`).
    flag: Option<(&'static str, String)>,
    /// A valid other value clawkeeper's config may keep when the flag replaces this key.
    decoy: Option<&'static str>,
}

impl Item {
    fn fixed(text: String) -> Item {
        Item {
            key: "",
            text,
            flag: None,
            decoy: None,
        }
    }

    fn movable(key: &'static str, v: &Value, flag: &'static str, decoy: &'static str) -> Item {
        let as_flag = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Item {
            key,
            text: format!("{key}: {v}"),
            flag: Some((flag, as_flag)),
            decoy: Some(decoy),
        }
    }
}

/// The config texts of one case.
pub struct Rendered {
    /// The reference's config (and clawkeeper's, unless `ours` is set).
    pub reference: String,
    /// clawkeeper's config when some keys moved to flags.
    pub ours: Option<String>,
    /// The flags clawkeeper gets instead.
    pub ours_flags: Vec<String>,
}
