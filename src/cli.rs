//! The command-line model: clap types only, no logic.
//!
//! Everything here is plain data that `resolve` turns into domain configuration. This file
//! depends on nothing else in the crate but the exit-code table (`crate::exit`), so that man
//! pages and completions can be generated from the two alone. Conflicts that OpenClaw reports with its own wording (`--store` with
//! `--agent`, `--agent` with `--all-agents`) are checked in `resolve`, not by clap, so that the
//! messages and the exit code match the reference.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::EXIT_CODES_HELP;

/// Offline maintenance for OpenClaw-style agent session stores.
///
/// clawkeeper reads `~/.openclaw/agents/<agentId>/sessions/` (or any `--store` path) with no
/// gateway running. `cleanup` does what `openclaw sessions cleanup` of OpenClaw 2026.7.1 does;
/// the transcript commands rewrite `<sessionId>.jsonl` files on disk so that the runtime still
/// loads them; `inspect` shows where the bytes go.
#[derive(Debug, Parser)]
#[command(
    name = "clawkeeper",
    version,
    about,
    long_about,
    after_long_help = EXIT_CODES_HELP,
    max_term_width = 80
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Store maintenance exactly like `openclaw sessions cleanup` (OpenClaw 2026.7.1).
    ///
    /// Prunes stale entries, caps the entry count, archives the transcripts of removed entries
    /// as `.deleted.<timestamp>`, ages out old archives, deletes unreferenced artifacts and
    /// enforces the disk budget, in OpenClaw's order. With neither `--dry-run` nor `--enforce`
    /// it follows `session.maintenance.mode` from openclaw.json (default `enforce`).
    ///
    /// An agent that moved to SQLite (`agents/<id>/agent/openclaw-agent.sqlite`, OpenClaw
    /// 2026.8.1 and later) is cleaned in its database as that release's cleanup does it
    /// (2026.9.x archives stale and capped entries in place; synthetic ones are deleted with
    /// their transcripts archived as `sessions/<id>.jsonl.deleted.<ts>.<generation>.zst`),
    /// under the gateway lifecycle lock, refusing live leases and unknown schema versions.
    ///
    /// The command line is read as OpenClaw reads it: `--dry-run` with `--enforce` previews
    /// (mode `enforce`), a repeated option takes its last value, an option's value may start
    /// with `-`, and usage errors exit 1.
    #[command(
        after_long_help = EXIT_CODES_HELP,
        args_override_self = true,
        allow_hyphen_values = true
    )]
    Cleanup(CleanupArgs),
    /// Remove runs of silent `NO_REPLY` assistant replies from transcripts, on disk.
    ///
    /// Keeps the first `--keep` replies of each run along every branch and re-parents the
    /// children of removed entries, so the runtime loads the file and sees the same context
    /// minus exactly the removed silent replies.
    #[command(name = "prune-noreply", after_long_help = EXIT_CODES_HELP)]
    PruneNoreply(PruneNoreplyArgs),
    /// Remove superseded `openclaw.cache-ttl` markers from transcripts, on disk.
    ///
    /// The runtime reads only the newest marker per provider and model (the last line in the
    /// file that matches). Every older one goes, except that the newest of each branch stays
    /// (a fork of that branch would read it); children are re-parented, so the runtime loads
    /// the same context and reads the same cache-TTL timestamp for every provider and model.
    #[command(name = "prune-cache-ttl", after_long_help = EXIT_CODES_HELP)]
    PruneCacheTtl(PruneCacheTtlArgs),
    /// Replace base64 image blocks outside the recent turns with a short text placeholder.
    ///
    /// Images in user and tool-result messages from the start of the `--keep-turns`-th most
    /// recent completed turn of the active branch onward are kept; every other image block is
    /// replaced, one block for one block. In the same old messages, media references in the
    /// text (`[media attached: …]`, `[Image: source: …]`, `media://inbound/…`) are replaced
    /// with the runtime's marker, as the runtime does before every prompt.
    #[command(name = "strip-images", after_long_help = EXIT_CODES_HELP)]
    StripImages(StripImagesArgs),
    /// Compact long transcripts offline, without a model.
    ///
    /// Keeps the newest turns verbatim, summarises everything before them deterministically and
    /// appends a `compaction` entry that the runtime honours on its next turn (on a SQLite-era
    /// agent, as a transcript row of its database).
    #[command(after_long_help = EXIT_CODES_HELP)]
    Compact(CompactArgs),
    /// Show what is in a store, where the bytes go, and what each command would reclaim.
    ///
    /// Read-only. The reclaimable figures come from the commands' own planning code, run on
    /// the same target with the same flags (`--keep`, `--keep-turns`, `--keep-recent-tokens`,
    /// and cleanup's `--prune-after`, `--max-entries`, … with the same openclaw.json).
    #[command(after_long_help = EXIT_CODES_HELP)]
    Inspect(InspectArgs),
    /// The nightly job: cleanup, prune-noreply, prune-cache-ttl, strip-images, vacuum, in one run.
    ///
    /// Every step runs over every target store even when an earlier step met a bad store or
    /// file; each step prints its report, every problem is one line on stderr, and the run
    /// exits with the most serious outcome of all steps. Without `--enforce` every step only
    /// previews. For cron and systemd timers: one command, one exit code.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Maintain(MaintainArgs),
    /// Give a SQLite-era agent database's space back: empty its WAL, release its free pages.
    ///
    /// Runs `wal_checkpoint(TRUNCATE)`, then `incremental_vacuum` (or a full `VACUUM` with
    /// `--full`), then a second checkpoint, in place on `agents/<id>/agent/openclaw-agent.sqlite`
    /// (OpenClaw 2026.8.1 and later). It writes only under the runtime's gateway lifecycle lock,
    /// when no process holds a lease on the database, and when `quick_check` passes before; it
    /// checks again after. Previews by default; `--enforce` applies. On an agent that still
    /// keeps `sessions.json` there is nothing to do, and it says so.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Vacuum(VacuumArgs),
    /// Print a shell completion script to stdout.
    ///
    /// Writes the script for the given shell to stdout; see the README for where each shell
    /// looks for it.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Completions(CompletionsArgs),
}

/// Which store(s) to work on. Shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Path to a sessions.json store, or to a SQLite-era agent database
    /// (`.../agent/openclaw-agent.sqlite`) (`~` and `{agentId}` are expanded).
    #[arg(long, value_name = "PATH")]
    pub store: Option<String>,
    /// One configured agent, by id (store under the state dir).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Every configured agent's store under the state dir.
    #[arg(long)]
    pub all_agents: bool,
    /// openclaw.json to read (JSON5); default `$OPENCLAW_CONFIG_PATH`, else `<state dir>/openclaw.json`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Preview or apply, and how to report.
#[derive(Debug, Clone, Args)]
pub struct ModeArgs {
    /// Preview only: never write, rename or delete anything.
    #[arg(long, conflicts_with = "enforce")]
    pub dry_run: bool,
    /// Apply the changes.
    #[arg(long)]
    pub enforce: bool,
    /// Print one JSON document on stdout instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// No progress bars and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Wait up to this long (e.g. `30s`) for a transcript lock held by a live process (for
    /// `cleanup`: the locks of transcripts whose entries the plan removes).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait_lock: Option<Duration>,
    /// List every file in the text report, unchanged ones and entries whose transcript does
    /// not exist too (by default they are only counted; `--json` always lists every file).
    #[arg(long, short)]
    pub verbose: bool,
}

/// Preview or apply, for `cleanup`: [`ModeArgs`] without the conflict between `--dry-run` and
/// `--enforce`. OpenClaw accepts both together: the dry run wins, and `--enforce` still makes
/// the previewed mode `enforce`.
#[derive(Debug, Clone, Args)]
pub struct CleanupModeArgs {
    /// Preview only: never write, rename or delete anything (also with `--enforce`, which
    /// then only sets the previewed mode).
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the changes, in enforce mode even when `session.maintenance.mode` is `warn`.
    #[arg(long)]
    pub enforce: bool,
    /// Print one JSON document on stdout instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// No notes of clawkeeper's own on stderr (OpenClaw's log lines still appear).
    #[arg(long, short)]
    pub quiet: bool,
    /// Wait up to this long (e.g. `30s`) for the locks of transcripts whose entries the plan
    /// removes, when a live process holds them.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait_lock: Option<Duration>,
}

#[derive(Debug, Clone, Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub mode: CleanupModeArgs,
    #[command(flatten)]
    pub plan: CleanupPlanArgs,
    /// Refuse to apply a store whose plan removes more than N entries or N files, or more
    /// than P% (e.g. `10%`) of its entries, of its files or of its bytes.
    #[arg(long, value_name = "N|P%")]
    pub max_delete: Option<String>,
}

/// The flags that shape a cleanup plan: `cleanup` applies the plan, `inspect` predicts
/// what it frees. The overrides are written as in openclaw.json (a bare number is days for
/// durations and bytes for sizes).
#[derive(Debug, Clone, Default, Args)]
pub struct CleanupPlanArgs {
    /// Remove entries whose transcript file is missing.
    #[arg(long)]
    pub fix_missing: bool,
    /// With `session.dmScope` = `main`, retire stale per-peer direct-message session keys.
    #[arg(long)]
    pub fix_dm_scope: bool,
    /// Never prune, cap or evict this session key.
    #[arg(long, value_name = "KEY")]
    pub active_key: Option<String>,
    /// Override `session.maintenance.pruneAfter` (duration, e.g. `30d`; a bare number is days).
    #[arg(long, value_name = "DURATION")]
    pub prune_after: Option<String>,
    /// Override `session.maintenance.maxEntries`.
    #[arg(long, value_name = "N")]
    pub max_entries: Option<u64>,
    /// Override `session.maintenance.resetArchiveRetention` (duration, or `false` to disable).
    #[arg(long, value_name = "DURATION")]
    pub reset_archive_retention: Option<String>,
    /// Override `session.maintenance.maxDiskBytes` (size, e.g. `500mb`; binary units).
    #[arg(long, value_name = "SIZE")]
    pub max_disk: Option<String>,
    /// Override `session.maintenance.highWaterBytes` (size).
    #[arg(long, value_name = "SIZE")]
    pub high_water: Option<String>,
}

/// The nightly job in one command.
#[derive(Debug, Clone, Args)]
pub struct MaintainArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Apply every step (without it, every step only previews: cleanup as `--dry-run`).
    #[arg(long)]
    pub enforce: bool,
    /// No progress bars and no notes on stderr (problems are always printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// List every file in the transcript steps' reports, unchanged ones and entries whose
    /// transcript does not exist too.
    #[arg(long, short)]
    pub verbose: bool,
    /// Wait up to this long (e.g. `30s`) for a lock held by a live process, in every step.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait_lock: Option<Duration>,
    /// cleanup's `--max-delete`: refuse a store whose plan removes more than N entries or N
    /// files, or more than P% of its entries, files or bytes.
    #[arg(long, value_name = "N|P%")]
    pub max_delete: Option<String>,
    /// prune-noreply's `--keep`: silent replies kept at the start of each run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub keep: usize,
    /// strip-images' `--keep-turns`: recent completed turns whose images are kept.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep_turns: usize,
}

/// Which transcripts a transcript command works on.
#[derive(Debug, Clone, Args)]
pub struct TranscriptTargetArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// One transcript file, no store.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["store", "agent", "all_agents"])]
    pub transcript: Option<PathBuf>,
    /// Only the transcript of this session key of the store.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct PruneNoreplyArgs {
    #[command(flatten)]
    pub targets: TranscriptTargetArgs,
    #[command(flatten)]
    pub mode: ModeArgs,
    /// Keep the first N silent replies of each run (0 removes them all).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub keep: usize,
}

#[derive(Debug, Clone, Args)]
pub struct PruneCacheTtlArgs {
    #[command(flatten)]
    pub targets: TranscriptTargetArgs,
    #[command(flatten)]
    pub mode: ModeArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StripImagesArgs {
    #[command(flatten)]
    pub targets: TranscriptTargetArgs,
    #[command(flatten)]
    pub mode: ModeArgs,
    /// Keep images from the start of the N-th most recent completed turn onward.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep_turns: usize,
}

/// Token counting for `compact` and `inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tokenizer {
    /// The runtime's own estimate: characters / 4 in UTF-16 units.
    Heuristic,
    /// Real BPE tokens, o200k_base vocabulary.
    O200k,
    /// Real BPE tokens, cl100k_base vocabulary.
    Cl100k,
}

#[derive(Debug, Clone, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub targets: TranscriptTargetArgs,
    #[command(flatten)]
    pub mode: ModeArgs,
    /// Keep at least this many tokens of the newest context verbatim.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub keep_recent_tokens: u64,
    /// Leave transcripts whose estimated context is not above N (default: the keep-recent budget).
    #[arg(long, value_name = "N")]
    pub min_tokens: Option<u64>,
    /// How to count tokens.
    #[arg(long, value_enum, default_value_t = Tokenizer::Heuristic)]
    pub tokenizer: Tokenizer,
    /// Write a successor transcript and point the store entry at it (needs a store target;
    /// not supported yet for SQLite-era agents, whose databases it refuses).
    #[arg(long)]
    pub successor: bool,
    /// Pipe the messages to summarise, as JSON, to this shell command and use its stdout.
    #[arg(long, value_name = "CMD")]
    pub summarizer: Option<String>,
    /// Give up on `--summarizer` after this long (then the built-in summary is used).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub summarizer_timeout: Duration,
}

/// Sort order for inspect's per-session table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InspectSort {
    Bytes,
    Age,
    Tokens,
    Images,
    Key,
}

#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub targets: TranscriptTargetArgs,
    /// Print one JSON document on stdout instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// No progress bars and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Only sessions not updated for this long (e.g. `7d`).
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<String>,
    /// Only sessions whose transcript is larger than this (e.g. `10mb`).
    #[arg(long, value_name = "SIZE")]
    pub larger_than: Option<String>,
    /// Only sessions of this kind (main, direct, group, channel, thread, topic, cron, cron-run,
    /// subagent, heartbeat, hook, acp, model-run, other).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Sort the per-session table.
    #[arg(long, value_enum, default_value_t = InspectSort::Bytes)]
    pub sort: InspectSort,
    /// Show at most N sessions per store (0 = all). Default: 20 in the tables, all with --json.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Use real BPE tokens for the context estimates.
    #[arg(long, value_enum, default_value_t = Tokenizer::Heuristic)]
    pub tokenizer: Tokenizer,
    /// Predict `prune-noreply --keep N`.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub keep: usize,
    /// Predict `strip-images --keep-turns N`.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep_turns: usize,
    /// Predict `compact --keep-recent-tokens N`.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub keep_recent_tokens: u64,
    /// Predict `compact --min-tokens N` (default: the keep-recent budget).
    #[arg(long, value_name = "N")]
    pub min_tokens: Option<u64>,
    /// Do not predict what `cleanup --enforce` would free.
    #[arg(long)]
    pub no_cleanup: bool,
    #[command(flatten)]
    pub plan: CleanupPlanArgs,
}

/// `clawkeeper vacuum`.
#[derive(Debug, Clone, Args)]
pub struct VacuumArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Preview only (the default): say what would be given back, write nothing.
    #[arg(long, conflicts_with = "enforce")]
    pub dry_run: bool,
    /// Apply: checkpoint, vacuum and checkpoint again.
    #[arg(long)]
    pub enforce: bool,
    /// A full `VACUUM` instead of `incremental_vacuum`: rebuilds the file, packing half-empty
    /// pages too. Needs free disk space of about twice the database's used size, and holds
    /// the database longer.
    #[arg(long)]
    pub full: bool,
    /// Print one JSON document on stdout instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// No notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Wait up to this long (e.g. `30s`) for the gateway lifecycle lock and for the
    /// processes that hold the database to let go.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait_lock: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    Elvish,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to generate completions for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// A duration flag (`--wait-lock`, `--summarizer-timeout`) in the grammar of OpenClaw's
/// durations, as `--prune-after` takes them: `500ms`, `30s`, `2m`, `1h`, `1d`, `1m30s`; a bare
/// number is seconds. Negative values, and values past 2^53 milliseconds, are refused here, so
/// a bad value is a usage error and never reaches the code that waits.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    match crate::config::grammar::parse_duration_ms(raw, "s") {
        Some(ms) if ms >= 0 => Ok(Duration::from_millis(ms as u64)),
        Some(_) => Err("a duration cannot be negative".into()),
        None => Err(
            "use a number with a unit: ms, s, m, h or d (e.g. 30s, 1m30s; a bare number is \
             seconds), at most 2^53 milliseconds"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_share_the_config_grammar_and_stay_in_range() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in [
            "soon",
            "5x",
            "",
            "-1s",
            "18446744073709551616",
            "5124095576030432h",
            "1e400",
            "NaN",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }
}
