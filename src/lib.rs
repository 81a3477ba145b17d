//! clawkeeper: offline maintenance for OpenClaw-style agent session stores.
//!
//! Layers, data flowing down only: `cli` (clap types) → `cmd` (one file per subcommand:
//! resolve, plan, render or apply) → domain modules (`jsjson`, `fsutil`, …), which never import
//! clap, indicatif or comfy-table.

pub mod agentdb;
pub mod cachettl;
pub mod cli;
pub mod cmd;
pub mod compact;
pub mod config;
pub mod exit;
pub mod fsutil;
pub mod images;
pub mod inspect;
pub mod isotime;
pub mod js;
pub mod jsjson;
pub mod json;
pub mod jsonout;
pub mod keys;
pub mod layout;
pub mod maintenance;
#[cfg(test)]
mod manpages;
pub mod mediarefs;
pub mod memory;
pub mod noreply;
pub mod progress;
pub mod report;
pub mod store;
pub mod targets;
#[cfg(test)]
mod testalloc;
pub mod transcript;
