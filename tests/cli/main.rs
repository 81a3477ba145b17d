//! The one integration-test binary: runs `clawkeeper` (and, where available, the reference
//! OpenClaw) against stores and transcripts built in temp dirs. `util` holds the shared
//! helpers, every other module one topic.

mod agentdb;
mod agentdb_cleanup;
mod agentdb_cleanup_safety;
mod agentdb_compact;
mod agentdb_inspect;
mod agentdb_safety;
mod agentdb_transcripts;
mod cachettl;
mod cachettl_hostile;
mod cleanup;
mod cleanup_cli;
mod cleanup_safety;
mod compact;
mod compact_successor;
mod crash;
mod crash_compact;
mod demo;
mod generator;
mod hostile;
mod hostile_cleanup;
mod hostile_cleanup_apply;
mod hostile_deep;
mod hostile_lines;
mod inspect;
mod inspect_targets;
mod jsnumber;
mod mediarefs;
mod model;
mod mutations;
mod operator;
mod parity;
mod properties;
mod readme;
mod safety;
mod safety_symdir;
mod silent;
mod storegen;
mod textcmp;
mod transcript;
mod transcript_safety;
mod transcript_store;
mod treegen;
mod unattended;
mod util;
