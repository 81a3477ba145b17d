//! `clawkeeper strip-images`: replace image blocks outside the recent turns with a placeholder.
//!
//! Resolve the targets, plan each file with `images::plan` (protect the last `--keep-turns`
//! completed turns of the active path), and preview or apply through the shared transcript job.

use anyhow::Result;

use super::transcripts::{self, Labels};
use crate::cli::StripImagesArgs;
use crate::exit::Exit;
use crate::images;
use crate::transcript::job::Outcome;

pub fn run(args: &StripImagesArgs) -> Result<Exit> {
    let keep_turns = args.keep_turns;
    let labels = Labels {
        command: "strip-images",
        count_key: "imagesReplaced",
        count_header: "images replaced",
    };
    transcripts::run(
        &args.targets,
        &args.mode,
        &labels,
        |o: &Outcome| o.blocks_replaced,
        &move |index, tree| images::planned(index, tree, keep_turns),
    )
}
