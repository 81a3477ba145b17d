//! `clawkeeper strip-images`: replace image blocks outside the recent turns with a placeholder,
//! and media references in the text of the same messages with the runtime's marker.
//!
//! Resolve the targets, plan each file with `images::plan` (protect the last `--keep-turns`
//! completed turns of the active path), and preview or apply through the shared transcript job.
//! The report counts images (`imagesReplaced`) and media references
//! (`mediaReferencesReplaced`).

use anyhow::Result;

use super::transcripts::{self, Extra, Labels};
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
        extra: Some(Extra {
            key: "mediaReferencesReplaced",
            words: "media references replaced",
            count: |o: &Outcome| o.media_refs_replaced,
        }),
    };
    transcripts::run(
        &args.targets,
        &args.mode,
        &labels,
        |o: &Outcome| o.blocks_replaced,
        &move |index, tree| images::planned(index, tree, keep_turns),
    )
}
