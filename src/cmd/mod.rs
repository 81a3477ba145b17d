//! One file per subcommand; this module holds the single dispatch `match`.

mod cleanup;
mod cleanup_db;
pub mod compact;
mod completions;
mod inspect;
mod maintain;
pub mod problems;
mod prune_cache_ttl;
mod prune_noreply;
pub mod resolved;
mod strip_images;
pub mod transcript_targets;
pub mod transcripts;
mod transcripts_db;
mod vacuum;

use anyhow::{Result, anyhow};

use crate::cli::{Cli, Command, TargetArgs};
use crate::config::{Config, Env};
use crate::exit::{Exit, UsageError};
use crate::targets::{self, Target, TargetError};
use problems::Problems;

/// Run the parsed command line.
pub fn run(cli: &Cli) -> Result<Exit> {
    match &cli.command {
        Command::Cleanup(args) => cleanup::run(args),
        Command::PruneNoreply(args) => prune_noreply::run(args),
        Command::PruneCacheTtl(args) => prune_cache_ttl::run(args),
        Command::StripImages(args) => strip_images::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Maintain(args) => maintain::run(args),
        Command::Vacuum(args) => vacuum::run(args),
        Command::Completions(args) => completions::run(args),
    }
}

/// The `session.maintenance` overrides the plan flags give (`--prune-after` …).
pub(crate) fn overrides(
    plan: &crate::cli::CleanupPlanArgs,
) -> crate::config::maintenance::Overrides {
    crate::config::maintenance::Overrides {
        prune_after: plan.prune_after.clone(),
        max_entries: plan.max_entries,
        reset_archive_retention: plan.reset_archive_retention.clone(),
        max_disk: plan.max_disk.clone(),
        high_water: plan.high_water.clone(),
    }
}

/// The cleanup options of a run: `session.maintenance` of the config with the plan flags
/// overrides, in `mode`. `cleanup` applies them; `inspect` and `--max-delete` predict with them.
pub(crate) fn cleanup_options(
    plan: &crate::cli::CleanupPlanArgs,
    cfg: &Config,
    env: &Env,
    mode: Option<serde_json::Value>,
    dry_run: bool,
) -> Result<crate::maintenance::run::Options> {
    use crate::config::maintenance::Maintenance;
    let maintenance =
        Maintenance::with_overrides(cfg.get(&["session", "maintenance"]), &overrides(plan))?;
    Ok(crate::maintenance::run::Options {
        flags: run_flags(
            plan,
            cfg,
            mode.unwrap_or_else(|| maintenance.mode.clone()),
            dry_run,
        ),
        maintenance,
        home: env.home(),
    })
}

/// How a cleanup runs in `mode` (both eras): the plan flags and `session.dmScope`.
pub(crate) fn run_flags(
    plan: &crate::cli::CleanupPlanArgs,
    cfg: &Config,
    mode: serde_json::Value,
    dry_run: bool,
) -> crate::maintenance::RunFlags {
    crate::maintenance::RunFlags {
        mode,
        dry_run,
        active_key: plan.active_key.clone(),
        fix_missing: plan.fix_missing,
        fix_dm_scope: plan.fix_dm_scope,
        dm_scope: cfg.dm_scope(),
    }
}

/// The shared target flags resolved the way OpenClaw resolves them: the loaded config, the
/// environment it was read with, and the stores to work on. Conflicting flags are usage errors
/// and unknown agents errors, with OpenClaw's wording. Stores that do not exist are recorded
/// in `problems` (see [`missing_stores`]) and stay in the list, so that `cleanup` still prints
/// what OpenClaw prints for them.
pub(crate) fn resolve_targets(
    args: &TargetArgs,
    problems: &mut Problems,
) -> Result<(Config, Env, Vec<Target>)> {
    let env = Env::from_process();
    let cfg = Config::load(args.config.as_deref(), &env)?;
    let targets = targets::resolve(
        &cfg,
        &env,
        args.store.as_deref(),
        args.agent.as_deref(),
        args.all_agents,
    )
    .map_err(|e| match e {
        TargetError::Conflict(m) => anyhow::Error::new(UsageError(m)),
        TargetError::UnknownAgent(m) => anyhow!(m),
    })?;
    if let Some(problem) = &cfg.json_era_problem {
        let json_era = targets.iter().any(|t| {
            let has_db = crate::agentdb::is_database_path(&t.store_path)
                || t.store_path
                    .parent()
                    .and_then(crate::agentdb::path_for_sessions_dir)
                    .is_some_and(|db| std::fs::symlink_metadata(db).is_ok());
            !has_db
        });
        if json_era {
            anyhow::bail!("{problem}");
        }
    }
    missing_stores(&env, &targets, args.store.is_some(), problems);
    Ok((cfg, env, targets))
}

/// Record an error for each store that does not exist, so that a typo in `--store` or in
/// `OPENCLAW_STATE_DIR` never passes as an empty store. A `--store` file must exist; a store
/// found from the state dir must at least have its sessions directory (an agent that has not
/// written a session yet has the directory and no `sessions.json`). Over several agents
/// (`--all-agents`) a configured agent without a directory is not an error as long as some
/// agent has one: only a run that finds no store at all is. An agent whose database exists
/// (the SQLite era) has its store there.
pub(crate) fn missing_stores(
    env: &Env,
    targets: &[Target],
    explicit: bool,
    problems: &mut Problems,
) {
    let exists = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
    let missing: Vec<&Target> = targets
        .iter()
        .filter(|t| {
            !exists(&t.store_path)
                && !t
                    .store_path
                    .parent()
                    .and_then(crate::agentdb::path_for_sessions_dir)
                    .is_some_and(|db| exists(&db))
                && (explicit || !t.store_path.parent().is_some_and(|d| d.is_dir()))
                // A SQLite-era agent keeps its sessions in its database.
                && !crate::agentdb::exists(&crate::agentdb::for_store(&t.store_path))
        })
        .collect();
    if missing.is_empty() || (targets.len() > 1 && missing.len() < targets.len()) {
        return;
    }
    let state = env.state_dir();
    let state_note = if !explicit && !exists(&state) {
        format!("; the state directory {} does not exist", state.display())
    } else {
        String::new()
    };
    for t in missing {
        let what = if t.store_path.parent().is_some_and(|d| d.is_dir()) {
            "the file does not exist"
        } else {
            "neither the file nor its directory exists"
        };
        problems.add(
            Exit::Error,
            format!(
                "{}: no such store ({what}{state_note}); check --store, --agent, \
                 OPENCLAW_STATE_DIR and session.store",
                t.store_path.display()
            ),
        );
    }
}

/// Write a report to stdout and flush it (a closed pipe is an error `main` ends quietly on).
pub(crate) fn print_stdout(out: &str) -> Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
