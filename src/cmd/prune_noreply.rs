//! `clawkeeper prune-noreply`: remove runs of silent `NO_REPLY` replies from transcripts.
//!
//! Resolve the targets, plan each file with `noreply::plan` (keep the first `--keep` of every
//! run on every path), and preview or apply through the shared transcript job.

use anyhow::Result;

use super::transcripts::{self, Labels};
use crate::cli::PruneNoreplyArgs;
use crate::exit::Exit;
use crate::noreply;
use crate::transcript::job::Outcome;

pub fn run(args: &PruneNoreplyArgs) -> Result<Exit> {
    let keep = args.keep;
    let labels = Labels {
        command: "prune-noreply",
        count_key: "entriesRemoved",
        count_header: "removed",
        extra: None,
    };
    transcripts::run(
        &args.targets,
        &args.mode,
        &labels,
        |o: &Outcome| o.entries_removed,
        &move |index, tree| Ok(noreply::planned(index, tree, keep)),
    )
}
