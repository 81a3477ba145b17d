//! One file per subcommand; this module holds the single dispatch `match`.

mod cleanup;
mod completions;
mod prune_noreply;
mod strip_images;
pub mod transcripts;

use anyhow::{Result, anyhow, bail};

use crate::cli::{Cli, Command, TargetArgs};
use crate::config::{Config, Env};
use crate::exit::Exit;
use crate::targets::{self, Target};

/// Run the parsed command line.
pub fn run(cli: &Cli) -> Result<Exit> {
    match &cli.command {
        Command::Cleanup(args) => cleanup::run(args),
        Command::PruneNoreply(args) => prune_noreply::run(args),
        Command::StripImages(args) => strip_images::run(args),
        Command::Compact(_) => not_yet("compact"),
        Command::Inspect(_) => not_yet("inspect"),
        Command::Completions(args) => completions::run(args),
    }
}

fn not_yet(name: &str) -> Result<Exit> {
    bail!("`{name}` is not available yet in this build of clawkeeper")
}

/// The shared target flags resolved the way OpenClaw resolves them: the loaded config, the
/// environment it was read with, and the stores to work on. Conflicting flags and unknown agents
/// are errors with OpenClaw's wording (exit 1).
pub(crate) fn resolve_targets(args: &TargetArgs) -> Result<(Config, Env, Vec<Target>)> {
    let env = Env::from_process();
    let cfg = Config::load(args.config.as_deref(), &env)?;
    let targets = targets::resolve(
        &cfg,
        &env,
        args.store.as_deref(),
        args.agent.as_deref(),
        args.all_agents,
    )
    .map_err(|m| anyhow!(m))?;
    Ok((cfg, env, targets))
}
