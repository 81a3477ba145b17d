//! One file per subcommand; this module holds the single dispatch `match`.

mod cleanup;
mod completions;
mod prune_noreply;
mod strip_images;
pub mod transcripts;

use anyhow::{Result, bail};

use crate::cli::{Cli, Command};
use crate::exit::Exit;

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
