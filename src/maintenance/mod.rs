//! Store maintenance exactly as `openclaw sessions cleanup` (OpenClaw 2026.7.1) does it.
//!
//! `run::preview` computes the plan from a read-only snapshot (it never writes: file removals
//! are simulated from the scanned sizes); `run::apply` reloads the store and performs the same
//! steps for real, in OpenClaw's order: fix-missing and dm-scope removals, model-run probes,
//! stale prune, cap, archiving of removed transcripts as `.deleted.<ts>`, archive retention,
//! disk budget, store write, dm-scope archiving, unreferenced sweep. The step functions live in
//! `entries` (store entries), `files` (the sessions directory) and `budget` (budget and sweep);
//! `log` decides the `sessions/store` lines an applied run logs.
//!
//! Like the reference, every step reads the clock itself (`now_ms`).

pub mod before;
pub mod budget;
pub mod dir;
pub mod entries;
pub mod files;
pub mod log;
pub mod predict;
pub mod protect;
pub mod run;
pub mod scan;
pub mod summary;

/// `Date.now()`, which every step measures ages against.
pub use crate::js::now_ms;

/// How a cleanup runs, beside its maintenance settings: the same flags in both eras.
#[derive(Debug, Clone)]
pub struct RunFlags {
    /// The effective mode: `enforce` with `--enforce`, else the configured mode (verbatim).
    pub mode: serde_json::Value,
    pub dry_run: bool,
    pub active_key: Option<String>,
    pub fix_missing: bool,
    pub fix_dm_scope: bool,
    /// `session.dmScope`.
    pub dm_scope: String,
}

impl RunFlags {
    /// Whether the mode is `warn`: the run reports what the budget would do and does not do it.
    pub fn is_warn(&self) -> bool {
        self.mode == serde_json::Value::String("warn".into())
    }
}
