//! `vacuum`'s report: per agent, the database's bytes before and after (predicted for a
//! preview), as text or one JSON document.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::text::size;
use crate::agentdb::space::Space;

/// How one agent's part of the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The agent has no database (it keeps `sessions.json`): nothing to do.
    JsonEra,
    /// The WAL is empty and no free page can be released.
    NothingToDo,
    /// A preview that would give bytes back.
    WouldVacuum,
    Vacuumed,
    /// Stopped by a problem (named on stderr and in `reason`).
    Failed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::JsonEra => "json-era",
            Status::NothingToDo => "nothing-to-do",
            Status::WouldVacuum => "would-vacuum",
            Status::Vacuumed => "vacuumed",
            Status::Failed => "failed",
        }
    }
}

/// One agent's figures.
#[derive(Debug, Clone)]
pub struct StoreVacuum {
    pub agent_id: String,
    pub database: PathBuf,
    pub schema_version: Option<i64>,
    pub app_version: Option<String>,
    pub before: Option<Space>,
    pub db_bytes_after: u64,
    pub wal_bytes_after: u64,
    pub status: Status,
    /// Why it failed, or what `--enforce` would do differently.
    pub note: Option<String>,
}

impl StoreVacuum {
    pub fn new(agent_id: &str, database: PathBuf) -> StoreVacuum {
        StoreVacuum {
            agent_id: agent_id.to_owned(),
            database,
            schema_version: None,
            app_version: None,
            before: None,
            db_bytes_after: 0,
            wal_bytes_after: 0,
            status: Status::Failed,
            note: None,
        }
    }

    /// Record the error that stopped this agent; figures stay as measured (nothing written
    /// counts as given back).
    pub fn fail(&mut self, err: &anyhow::Error) {
        self.status = Status::Failed;
        self.note = Some(format!("{err:#}"));
        if let Some(b) = &self.before {
            self.db_bytes_after = b.db_bytes;
            self.wal_bytes_after = b.wal_bytes;
        }
    }

    /// Bytes given back (or that would be), database and WAL.
    pub fn reclaimed(&self) -> i64 {
        match (&self.before, self.status) {
            (Some(b), Status::WouldVacuum | Status::Vacuumed) => {
                (b.db_bytes + b.wal_bytes) as i64
                    - (self.db_bytes_after + self.wal_bytes_after) as i64
            }
            _ => 0,
        }
    }
}

pub fn json(stores: &[StoreVacuum], enforce: bool, full: bool) -> String {
    let stores: Vec<Value> = stores
        .iter()
        .map(|s| {
            json!({
                "agentId": s.agent_id,
                "database": s.database.display().to_string(),
                "status": s.status.name(),
                "schemaVersion": s.schema_version,
                "appVersion": s.app_version,
                "before": s.before.as_ref().map(|b| json!({
                    "dbBytes": b.db_bytes,
                    "walBytes": b.wal_bytes,
                    "shmBytes": b.shm_bytes,
                    "pageSize": b.page_size,
                    "pageCount": b.page_count,
                    "freePages": b.freelist_pages,
                    "autoVacuum": b.auto_vacuum,
                    "journalMode": b.journal_mode,
                })),
                "after": s.before.as_ref().map(|_| json!({
                    "dbBytes": s.db_bytes_after,
                    "walBytes": s.wal_bytes_after,
                })),
                "reclaimedBytes": s.reclaimed(),
                "note": s.note,
            })
        })
        .collect();
    let total: i64 = stores
        .iter()
        .filter_map(|s| s["reclaimedBytes"].as_i64())
        .sum();
    let doc = json!({
        "dryRun": !enforce,
        "full": full,
        "reclaimedBytes": total,
        "stores": stores,
    });
    let mut s = crate::jsjson::to_string_pretty(&doc);
    s.push('\n');
    s
}

/// The human report. A preview's figures are exact for `incremental_vacuum` and an upper
/// bound for a full `VACUUM` (which also packs half-empty pages).
pub fn text(stores: &[StoreVacuum], full: bool) -> String {
    let mut out = String::new();
    for (i, s) in stores.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let schema = match (&s.schema_version, &s.app_version) {
            (Some(v), Some(app)) => format!(" (schema {v}, OpenClaw {app})"),
            (Some(v), None) => format!(" (schema {v})"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "agent {}: {}{schema}\n",
            s.agent_id,
            s.database.display()
        ));
        if s.status == Status::JsonEra {
            out.push_str(
                "  no database: this agent keeps sessions.json (JSON era); nothing to vacuum\n",
            );
            continue;
        }
        if let Some(b) = &s.before {
            let after = |n: u64| match s.status {
                Status::WouldVacuum if full => format!(" → at most {}", size(n)),
                Status::WouldVacuum | Status::Vacuumed => format!(" → {}", size(n)),
                _ => String::new(),
            };
            out.push_str(&format!(
                "  database  {}{}\n",
                size(b.db_bytes),
                after(s.db_bytes_after)
            ));
            out.push_str(&format!(
                "  WAL       {}{}\n",
                size(b.wal_bytes),
                after(s.wal_bytes_after)
            ));
            out.push_str(&format!(
                "  free      {} pages ({}) of {} ({} a page, auto_vacuum {})\n",
                b.freelist_pages,
                size(b.free_bytes()),
                b.page_count,
                size(b.page_size),
                match b.auto_vacuum {
                    0 => "none",
                    1 => "full",
                    _ => "incremental",
                }
            ));
        }
        let line = match s.status {
            Status::NothingToDo => {
                "nothing to give back: the WAL is empty and no page is free".to_owned()
            }
            Status::WouldVacuum => format!(
                "would give back {}; run with --enforce to apply",
                size(s.reclaimed().max(0) as u64)
            ),
            Status::Vacuumed => format!("gave back {}", size(s.reclaimed().max(0) as u64)),
            Status::Failed => "not vacuumed (see the error on stderr)".to_owned(),
            Status::JsonEra => unreachable!(),
        };
        out.push_str(&format!("  {line}\n"));
        if let (Some(note), Status::WouldVacuum) = (&s.note, s.status) {
            out.push_str(&format!("  note: {note}\n"));
        }
    }
    out
}
