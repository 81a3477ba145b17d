//! `clawkeeper prune-cache-ttl`: remove superseded `openclaw.cache-ttl` markers from
//! transcripts.
//!
//! Resolve the targets, plan each file with `cachettl::plan` (keep the newest marker per
//! provider and model in the file and on every branch), and preview or apply through the
//! shared transcript job.

use anyhow::Result;

use super::transcripts::{self, Labels};
use crate::cachettl;
use crate::cli::PruneCacheTtlArgs;
use crate::exit::Exit;
use crate::transcript::job::Outcome;

pub fn run(args: &PruneCacheTtlArgs) -> Result<Exit> {
    let labels = Labels {
        command: "prune-cache-ttl",
        count_key: "markersRemoved",
        count_header: "removed",
        extra: None,
    };
    transcripts::run(
        &args.targets,
        &args.mode,
        &labels,
        |o: &Outcome| o.entries_removed,
        &|index, tree| cachettl::planned(index, tree),
    )
}
