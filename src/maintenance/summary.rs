//! The per-store summary of a cleanup, as OpenClaw prints it with `--json`.

use serde_json::{Map, Value, json};

use super::budget::{BudgetReport, SweepReport};
use super::log::LogLine;

/// The per-store summary OpenClaw prints with `--json`.
#[derive(Debug, Clone)]
pub struct Summary {
    pub agent_id: String,
    pub store_path: String,
    pub mode: Value,
    pub dry_run: bool,
    pub before_count: u64,
    pub after_count: u64,
    pub repaired: u64,
    pub missing: u64,
    pub dm_scope_retired: u64,
    pub model_run_pruned: u64,
    pub pruned: u64,
    pub capped: u64,
    pub unreferenced: SweepReport,
    pub disk_budget: Option<BudgetReport>,
    pub would_mutate: bool,
    /// `appliedCount` for applied runs.
    pub applied_count: Option<u64>,
    /// What the applied run logged (`sessions/store` lines), in order; empty for previews.
    pub logs: Vec<LogLine>,
    /// Transcripts of removed entries that were not archived because a live process locked
    /// them after the plan was checked, with who holds each (not in OpenClaw's summary).
    pub left_in_use: Vec<(std::path::PathBuf, String)>,
}

impl Summary {
    /// The summary as a JSON object, keys in the reference's order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("agentId".into(), json!(self.agent_id));
        m.insert("storePath".into(), json!(self.store_path));
        m.insert("mode".into(), self.mode.clone());
        m.insert("dryRun".into(), json!(self.dry_run));
        m.insert("beforeCount".into(), json!(self.before_count));
        m.insert("afterCount".into(), json!(self.after_count));
        m.insert("repaired".into(), json!(self.repaired));
        m.insert("missing".into(), json!(self.missing));
        m.insert("dmScopeRetired".into(), json!(self.dm_scope_retired));
        m.insert("modelRunPruned".into(), json!(self.model_run_pruned));
        m.insert("pruned".into(), json!(self.pruned));
        m.insert("capped".into(), json!(self.capped));
        let u = &self.unreferenced;
        m.insert(
            "unreferencedArtifacts".into(),
            json!({"scannedFiles": u.scanned_files, "removedFiles": u.removed_files, "freedBytes": u.freed_bytes, "olderThanMs": u.older_than_ms}),
        );
        m.insert(
            "diskBudget".into(),
            match &self.disk_budget {
                None => Value::Null,
                Some(b) => json!({
                    "totalBytesBefore": b.total_bytes_before,
                    "totalBytesAfter": b.total_bytes_after,
                    "removedFiles": b.removed_files,
                    "removedEntries": b.removed_entries,
                    "freedBytes": b.freed_bytes,
                    "maxBytes": b.max_bytes,
                    "highWaterBytes": b.high_water_bytes,
                    "overBudget": b.over_budget,
                }),
            },
        );
        m.insert("wouldMutate".into(), json!(self.would_mutate));
        if let Some(n) = self.applied_count {
            m.insert("applied".into(), json!(true));
            m.insert("appliedCount".into(), json!(n));
        }
        Value::Object(m)
    }

    /// Entries this run removes (or would remove).
    pub fn removed_entries(&self) -> u64 {
        self.before_count.saturating_sub(self.after_count)
            + if self.applied_count.is_some() {
                self.missing + self.dm_scope_retired
            } else {
                0
            }
    }
}
