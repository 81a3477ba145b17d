//! `clawkeeper maintain`: the nightly job in one run. `cleanup`, then `prune-noreply`, then
//! `prune-cache-ttl`, then `strip-images`, then `vacuum` (SQLite-era agents), each over every
//! target store with the flags it shares with this command;
//! every step runs whatever the previous one met, and the run exits with the most serious
//! outcome of all of them, so that a cron line or a systemd unit needs one command and one
//! exit code, and one bad store never keeps the others from any step.
//!
//! `prune-cache-ttl` is a step because it takes nothing the runtime reads (only markers that
//! a newer one of the same provider and model supersedes, in the file and on every branch),
//! has no setting, and its markers are where an active cache-ttl session grows fastest.

use anyhow::Result;

use super::problems::Problems;
use crate::cli::{
    CleanupArgs, CleanupModeArgs, CleanupPlanArgs, MaintainArgs, ModeArgs, PruneCacheTtlArgs,
    PruneNoreplyArgs, StripImagesArgs, TranscriptTargetArgs, VacuumArgs,
};
use crate::exit::Exit;

pub fn run(args: &MaintainArgs) -> Result<Exit> {
    let cleanup = CleanupArgs {
        target: args.target.clone(),
        mode: CleanupModeArgs {
            dry_run: !args.enforce,
            enforce: args.enforce,
            json: false,
            quiet: args.quiet,
            wait_lock: args.wait_lock,
        },
        plan: CleanupPlanArgs::default(),
        max_delete: args.max_delete.clone(),
    };
    let targets = TranscriptTargetArgs {
        target: args.target.clone(),
        transcript: None,
        session: None,
    };
    let mode = ModeArgs {
        dry_run: !args.enforce,
        enforce: args.enforce,
        json: false,
        quiet: args.quiet,
        wait_lock: args.wait_lock,
        verbose: args.verbose,
    };
    let prune = PruneNoreplyArgs {
        targets: targets.clone(),
        mode: mode.clone(),
        keep: args.keep,
    };
    let cache_ttl = PruneCacheTtlArgs {
        targets: targets.clone(),
        mode: mode.clone(),
    };
    let strip = StripImagesArgs {
        targets,
        mode,
        keep_turns: args.keep_turns,
    };
    let vacuum = VacuumArgs {
        target: args.target.clone(),
        dry_run: !args.enforce,
        enforce: args.enforce,
        full: false,
        json: false,
        quiet: args.quiet,
        wait_lock: args.wait_lock,
    };
    let steps: [&dyn Fn() -> Result<Exit>; 5] = [
        &|| super::cleanup::run(&cleanup),
        &|| super::prune_noreply::run(&prune),
        &|| super::prune_cache_ttl::run(&cache_ttl),
        &|| super::strip_images::run(&strip),
        &|| super::vacuum::run(&vacuum),
    ];
    // Stores that do not exist are said once here: every step would find nothing.
    let mut missing = Problems::default();
    super::resolve_targets(&args.target, &mut missing)?;
    if !missing.is_empty() {
        return Ok(missing.finish(Exit::Success));
    }
    let mut worst = Exit::Success;
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            println!();
        }
        // An error that stops a step (a config that does not load) stops every step: it
        // ends the run. Problems of single stores and files do not come here.
        worst = worst.worst(step()?);
        // Each step loads the stores again: what the last one freed goes back to the system,
        // so that the steps' peaks do not add up (a store may have hundreds of thousands of
        // entries).
        crate::memory::release_freed();
    }
    Ok(worst)
}
