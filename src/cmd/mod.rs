//! One file per subcommand; this module holds the single dispatch `match`.

mod cleanup;
pub mod compact;
mod completions;
mod inspect;
mod prune_noreply;
mod strip_images;
pub mod transcript_targets;
pub mod transcripts;

use anyhow::Result;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

/// Run the parsed command line.
pub fn run(cli: &Cli) -> Result<Exit> {
    match &cli.command {
        Command::Cleanup(args) => cleanup::run(args),
        Command::PruneNoreply(args) => prune_noreply::run(args),
        Command::StripImages(args) => strip_images::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Completions(args) => completions::run(args),
    }
}
